//! `Hinm<B>`: the decorator whose pruned weights stay packed.
//!
//! Its float primitive is [`HinmFloat`]: the inner backend's tensor (`Dense`) or a weight in
//! HiNM's packed layout (`Packed`, [`cubecl_kernels::hinm::Packed`]). A weight becomes packed
//! when a per-layer setting carries its packed form ([`HinmLayer`], handed down the stack by
//! [`KernelBackend::float_for_layer`]); nothing else changes a model. The plumbing is the one
//! every weight-sparsity decorator shares ([`cubecl_kernels::decorator::packed`]).
//!
//! - `linear`, `float_matmul` (a packed right operand, as Burn's `Gru` multiplies its gate
//!   weights) and `conv2d` (groups = 1, through `unfold4d`) with a packed weight run the HiNM
//!   sparse product: the CubeCL kernel on a CubeCL backend, the vectorised host implementation
//!   elsewhere (ndarray). The effects report's routes are `hinm kernel` and `hinm host`.
//! - Any other op on a packed weight densifies it first (the generated forwarding calls
//!   [`FloatPrimitive::float_inner`]) and the per-layer effects report names the op. So does a
//!   packed contraction over an *approximate* multiplier underneath (`Hinm<ApproxMul<B>>`): the
//!   sparse kernel multiplies exactly, so the dense masked weight goes to ApproxMul's op instead.

use burn_backend::Backend;
use burn_backend::ops::ConvOptions;
use burn_backend::tensor::FloatTensor;
use cubecl_kernels::decorator::packed::{self, PackedFloat};
use cubecl_kernels::decorator::{
    Decorated, DecoratedDevice, Decoration, DecoratorOps, FloatPrimitive, KernelBackend,
    LayerSettings, Wrapped,
};
use cubecl_kernels::hinm::Packed;
use std::sync::Arc;

/// The HiNM decoration (no configuration: what is packed is carried by the weights).
#[derive(Clone, Copy, Debug, Default)]
pub struct HinmOps;

/// A backend `B` whose weights may be HiNM-packed.
pub type Hinm<B> = Decorated<B, HinmOps>;
/// The device of [`Hinm<B>`].
pub type HinmDevice<B> = DecoratedDevice<B, ()>;

impl Decoration for HinmOps {
    type Config = ();
    const NAME: &'static str = "hinm";
}

/// The packed form of one layer's weight, as a per-layer setting: [`HinmFloat::Packed`] for
/// the layer's weight when [`KernelBackend::float_for_layer`] hands it down.
#[derive(Clone, Debug)]
pub struct HinmLayer(pub Arc<Packed>);

/// A HiNM-packed weight on a device (its host form: [`PackedTensor::packed`]).
pub type PackedTensor<B> = packed::PackedTensor<B, Packed>;

/// Hinm's float primitive: a dense tensor of the inner backend (`HinmFloat::Dense`), or a
/// packed weight (`HinmFloat::Packed(Arc<PackedTensor<B>>)`).
pub type HinmFloat<B> = PackedFloat<B, Packed>;

impl<B: Backend> FloatPrimitive<B> for HinmOps {
    type Float = HinmFloat<B>;

    fn float_inner(tensor: HinmFloat<B>, op: &'static str) -> B::FloatTensorPrimitive {
        tensor.into_inner(op)
    }
    fn float_from_inner(tensor: B::FloatTensorPrimitive) -> HinmFloat<B> {
        HinmFloat::Dense(tensor)
    }
    fn float_peek(tensor: &HinmFloat<B>) -> &B::FloatTensorPrimitive {
        tensor.peek()
    }
    fn float_map(
        tensor: HinmFloat<B>,
        f: &dyn Fn(B::FloatTensorPrimitive) -> B::FloatTensorPrimitive,
    ) -> HinmFloat<B> {
        tensor.map(f)
    }
    // The caller checked the packed form against the model (`crate::pack::check_fits`).
    fn float_layer(tensor: HinmFloat<B>, layer: &LayerSettings) -> HinmFloat<B> {
        let host = layer.get::<HinmLayer>().map(|l| &l.0);
        tensor.for_layer(layer, host)
    }
}

type T<B> = FloatTensor<Hinm<B>>;

impl<B: KernelBackend> DecoratorOps<B> for HinmOps {
    fn linear(x: T<B>, weight: T<B>, bias: Option<T<B>>) -> T<B> {
        let x = Self::float_inner(x.inner, "linear");
        let bias = bias.map(|b| Self::float_inner(b.inner, "linear"));
        let y = packed::linear::<B, Packed>(x, weight.inner, bias);
        Wrapped::new(HinmFloat::Dense(y), ())
    }

    fn float_matmul(lhs: T<B>, rhs: T<B>) -> T<B> {
        let lhs = Self::float_inner(lhs.inner, "float_matmul");
        let y = packed::matmul::<B, Packed>(lhs, rhs.inner);
        Wrapped::new(HinmFloat::Dense(y), ())
    }

    fn conv2d(x: T<B>, weight: T<B>, bias: Option<T<B>>, options: ConvOptions<2>) -> T<B> {
        let x = Self::float_inner(x.inner, "conv2d");
        let bias = bias.map(|b| Self::float_inner(b.inner, "conv2d"));
        let y = packed::conv2d::<B, Packed>(x, weight.inner, bias, options);
        Wrapped::new(HinmFloat::Dense(y), ())
    }
}
