//! `Bcr<B>`: the decorator whose BCR-pruned weights stay packed in BCRC.
//!
//! Its float primitive is [`BcrFloat`]: the inner backend's tensor (`Dense`) or a weight in
//! BCRC (`Packed`, [`cubecl_kernels::bcrc::Bcrc`]). A weight becomes packed when a per-layer
//! setting carries its BCRC form ([`BcrLayer`], handed down the stack by
//! [`KernelBackend::float_for_layer`](cubecl_kernels::decorator::KernelBackend::float_for_layer);
//! [`crate::module::pack_module`] does it for a whole
//! model); nothing else changes a model. The plumbing is the one every weight-sparsity
//! decorator shares ([`cubecl_kernels::decorator::packed`], HiNM's `Hinm<B>` too): `Bcr<B>` is
//! [`PackedOps`] instantiated with BCRC, and these aliases name it.
//!
//! - `linear`, `float_matmul` (a rank-2 left operand times a packed `[d_in, d_out]` weight, as
//!   Burn's `Gru` multiplies its gate weights) and `conv2d` (groups = 1) with
//!   a packed weight run BCRC's reordered sparse product, `x · Wᵀ` on the weight's
//!   `out × K` view: the CubeCL kernel ([`cubecl_kernels::bcrc::launch_spmm`], the weight's
//!   arrays uploaded once per device) on a CubeCL backend, the host implementation with
//!   load-redundancy elimination ([`cubecl_kernels::bcrc::reference::spmm`]) elsewhere
//!   (ndarray). The effects report's routes are `bcrc kernel` and `bcrc host`.
//! - Any other op on a packed weight densifies it first and the per-layer effects report names
//!   the op. So does a packed contraction over an *approximate* multiplier underneath
//!   (`Bcr<ApproxMul<B>>`): the sparse product multiplies exactly, so the dense masked weight
//!   goes to ApproxMul's op instead.

use cubecl_kernels::bcrc::Bcrc;
use cubecl_kernels::decorator::packed::{self, PackedFloat, PackedLayer, PackedOps};
use cubecl_kernels::decorator::{Decorated, DecoratedDevice};

/// The BCR decoration: the shared weight-sparsity decoration over BCRC (no configuration: what
/// is packed is carried by the weights).
pub type BcrOps = PackedOps<Bcrc>;

/// A backend `B` whose weights may be packed in BCRC.
pub type Bcr<B> = Decorated<B, BcrOps>;
/// The device of [`Bcr<B>`].
pub type BcrDevice<B> = DecoratedDevice<B, ()>;

/// The BCRC form of one layer's weight, as a per-layer setting (`PackedLayer(Arc<Bcrc>)`):
/// [`BcrFloat::Packed`] for the layer's weight when
/// [`KernelBackend::float_for_layer`](cubecl_kernels::decorator::KernelBackend::float_for_layer)
/// hands it down (when its `out × K` view is the weight's; check it first with
/// [`check_fits`](crate::module::check_fits)).
pub type BcrLayer = PackedLayer<Bcrc>;

/// A BCRC weight on a device (its host form: [`BcrcTensor::packed`]).
pub type BcrcTensor<B> = packed::PackedTensor<B, Bcrc>;

/// Bcr's float primitive: a dense tensor of the inner backend (`BcrFloat::Dense`), or a BCRC
/// weight (`BcrFloat::Packed(Arc<BcrcTensor<B>>)`).
pub type BcrFloat<B> = PackedFloat<B, Bcrc>;
