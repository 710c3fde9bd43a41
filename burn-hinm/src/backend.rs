//! `Hinm<B>`: the decorator whose pruned weights stay packed.
//!
//! Its float primitive is [`HinmFloat`]: the inner backend's tensor (`Dense`) or a weight in
//! HiNM's packed layout (`Packed`, [`cubecl_kernels::hinm::Packed`]). A weight becomes packed
//! when a per-layer setting carries its packed form ([`HinmLayer`], handed down the stack by
//! [`KernelBackend::float_for_layer`](cubecl_kernels::decorator::KernelBackend::float_for_layer)); nothing else changes a model. The plumbing is the one
//! every weight-sparsity decorator shares ([`cubecl_kernels::decorator::packed`]).
//!
//! `Hinm<B>` is the shared weight-sparsity decorator ([`PackedOps`]) instantiated with HiNM's
//! format; these aliases name it.
//!
//! - `linear`, `float_matmul` (a packed right operand, as Burn's `Gru` multiplies its gate
//!   weights) and `conv2d` (groups = 1) with a packed weight run the HiNM
//!   sparse product: the CubeCL kernel on a CubeCL backend, the vectorised host implementation
//!   elsewhere (ndarray). The effects report's routes are `hinm kernel` and `hinm host`.
//! - Any other op on a packed weight densifies it first (the generated forwarding calls
//!   [`FloatPrimitive::float_inner`](cubecl_kernels::decorator::FloatPrimitive::float_inner)) and the per-layer effects report names the op. So does a
//!   packed contraction over an *approximate* multiplier underneath (`Hinm<ApproxMul<B>>`): the
//!   sparse kernel multiplies exactly, so the dense masked weight goes to ApproxMul's op instead.

use cubecl_kernels::decorator::packed::{self, PackedFloat, PackedLayer, PackedOps};
use cubecl_kernels::decorator::{Decorated, DecoratedDevice};
use cubecl_kernels::hinm::Packed;

/// The HiNM decoration: the shared weight-sparsity decoration over HiNM's packed layout (no
/// configuration: what is packed is carried by the weights).
pub type HinmOps = PackedOps<Packed>;

/// A backend `B` whose weights may be HiNM-packed.
pub type Hinm<B> = Decorated<B, HinmOps>;
/// The device of [`Hinm<B>`].
pub type HinmDevice<B> = DecoratedDevice<B, ()>;

/// The packed form of one layer's weight, as a per-layer setting (`PackedLayer(Arc<Packed>)`):
/// [`HinmFloat::Packed`] for the layer's weight when
/// [`KernelBackend::float_for_layer`](cubecl_kernels::decorator::KernelBackend::float_for_layer)
/// hands it down. Check the packed form against the model first
/// ([`check_fits`](crate::pack::check_fits)).
pub type HinmLayer = PackedLayer<Packed>;

/// A HiNM-packed weight on a device (its host form: [`PackedTensor::packed`]).
pub type PackedTensor<B> = packed::PackedTensor<B, Packed>;

/// Hinm's float primitive: a dense tensor of the inner backend (`HinmFloat::Dense`), or a
/// packed weight (`HinmFloat::Packed(Arc<PackedTensor<B>>)`).
pub type HinmFloat<B> = PackedFloat<B, Packed>;
