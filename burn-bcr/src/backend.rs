//! `Bcr<B>`: the decorator whose BCR-pruned weights stay packed in BCRC.
//!
//! Its float primitive is [`BcrFloat`]: the inner backend's tensor (`Dense`) or a weight in
//! BCRC (`Packed`, [`cubecl_kernels::bcrc::Bcrc`]). A weight becomes packed when a per-layer
//! setting carries its BCRC form ([`BcrLayer`], handed down the stack by
//! [`KernelBackend::float_for_layer`]; [`crate::module::pack_module`] does it for a whole
//! model); nothing else changes a model. The plumbing is the one every weight-sparsity
//! decorator shares ([`cubecl_kernels::decorator::packed`], HiNM's `Hinm<B>` too).
//!
//! - `linear`, `float_matmul` (a rank-2 left operand times a packed `[d_in, d_out]` weight, as
//!   Burn's `Gru` multiplies its gate weights) and `conv2d` (groups = 1, through `unfold4d`)
//!   with a packed weight run BCRC's reordered sparse product, `x · Wᵀ` on the weight's
//!   `out × K` view: the CubeCL kernel ([`cubecl_kernels::bcrc::launch_spmm`], the weight's
//!   arrays uploaded once per device) on a CubeCL backend, the host implementation with
//!   load-redundancy elimination ([`cubecl_kernels::bcrc::reference::spmm`]) elsewhere
//!   (ndarray). The effects report's routes are `bcrc kernel` and `bcrc host`.
//! - Any other op on a packed weight densifies it first and the per-layer effects report names
//!   the op. So does a packed contraction over an *approximate* multiplier underneath
//!   (`Bcr<ApproxMul<B>>`): the sparse product multiplies exactly, so the dense masked weight
//!   goes to ApproxMul's op instead.

use burn_backend::Backend;
use burn_backend::ops::ConvOptions;
use burn_backend::tensor::FloatTensor;
use cubecl_kernels::bcrc::Bcrc;
use cubecl_kernels::decorator::packed::{self, PackedFloat};
use cubecl_kernels::decorator::{
    Decorated, DecoratedDevice, Decoration, DecoratorOps, FloatPrimitive, KernelBackend,
    LayerSettings, Wrapped,
};
use std::sync::Arc;

/// The BCR decoration (no configuration: what is packed is carried by the weights).
#[derive(Clone, Copy, Debug, Default)]
pub struct BcrOps;

/// A backend `B` whose weights may be packed in BCRC.
pub type Bcr<B> = Decorated<B, BcrOps>;
/// The device of [`Bcr<B>`].
pub type BcrDevice<B> = DecoratedDevice<B, ()>;

impl Decoration for BcrOps {
    type Config = ();
    const NAME: &'static str = "bcr";
}

/// The BCRC form of one layer's weight, as a per-layer setting: [`BcrFloat::Packed`] for the
/// layer's weight when [`KernelBackend::float_for_layer`] hands it down (when its `out × K`
/// view is the weight's; check it first with [`check_fits`](crate::module::check_fits)).
#[derive(Clone, Debug)]
pub struct BcrLayer(pub Arc<Bcrc>);

/// A BCRC weight on a device (its host form: [`BcrcTensor::packed`]).
pub type BcrcTensor<B> = packed::PackedTensor<B, Bcrc>;

/// Bcr's float primitive: a dense tensor of the inner backend (`BcrFloat::Dense`), or a BCRC
/// weight (`BcrFloat::Packed(Arc<BcrcTensor<B>>)`).
pub type BcrFloat<B> = PackedFloat<B, Bcrc>;

impl<B: Backend> FloatPrimitive<B> for BcrOps {
    type Float = BcrFloat<B>;

    fn float_inner(tensor: BcrFloat<B>, op: &'static str) -> B::FloatTensorPrimitive {
        tensor.into_inner(op)
    }
    fn float_from_inner(tensor: B::FloatTensorPrimitive) -> BcrFloat<B> {
        BcrFloat::Dense(tensor)
    }
    fn float_peek(tensor: &BcrFloat<B>) -> &B::FloatTensorPrimitive {
        tensor.peek()
    }
    fn float_map(
        tensor: BcrFloat<B>,
        f: &dyn Fn(B::FloatTensorPrimitive) -> B::FloatTensorPrimitive,
    ) -> BcrFloat<B> {
        tensor.map(f)
    }
    fn float_layer(tensor: BcrFloat<B>, layer: &LayerSettings) -> BcrFloat<B> {
        let host = layer.get::<BcrLayer>().map(|l| &l.0);
        tensor.for_layer(layer, host)
    }
}

type T<B> = FloatTensor<Bcr<B>>;

impl<B: KernelBackend> DecoratorOps<B> for BcrOps {
    fn linear(x: T<B>, weight: T<B>, bias: Option<T<B>>) -> T<B> {
        let x = Self::float_inner(x.inner, "linear");
        let bias = bias.map(|b| Self::float_inner(b.inner, "linear"));
        let y = packed::linear::<B, Bcrc>(x, weight.inner, bias);
        Wrapped::new(BcrFloat::Dense(y), ())
    }

    fn float_matmul(lhs: T<B>, rhs: T<B>) -> T<B> {
        let lhs = Self::float_inner(lhs.inner, "float_matmul");
        let y = packed::matmul::<B, Bcrc>(lhs, rhs.inner);
        Wrapped::new(BcrFloat::Dense(y), ())
    }

    fn conv2d(x: T<B>, weight: T<B>, bias: Option<T<B>>, options: ConvOptions<2>) -> T<B> {
        let x = Self::float_inner(x.inner, "conv2d");
        let bias = bias.map(|b| Self::float_inner(b.inner, "conv2d"));
        let y = packed::conv2d::<B, Bcrc>(x, weight.inner, bias, options);
        Wrapped::new(BcrFloat::Dense(y), ())
    }
}
