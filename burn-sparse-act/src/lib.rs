//! # burn-sparse-act
//!
//! **SparseAct** (Barley & Fröning, "Compressing the Backward Pass of Large-Scale Neural Architectures by
//! Structured Activation Pruning"):
//! a dense forward pass, but the input activation a linear layer keeps for its weight gradient
//! is pruned per sample to its top-k blocks by L2 norm and stored block-sparse; the weight
//! gradient is then computed from the stored blocks. The goal is less training memory.
//!
//! ```
//! use burn::backend::{Autodiff, NdArray};
//! use burn::tensor::{Tensor, module::linear};
//! use burn_sparse_act::{Policy, Pruning, SparseAct, SparseDevice};
//!
//! type B = SparseAct<Autodiff<NdArray>>;
//! let policy = Policy::uniform(Pruning::parse("0.5:2").unwrap());
//! let device = SparseDevice::<NdArray>::new(Default::default(), policy);
//! let x = Tensor::<B, 2>::from_floats([[1.0, 2.0, 0.25, 0.25]], &device);
//! let w = Tensor::<B, 2>::ones([4, 1], &device).require_grad();
//! let y = linear(x, w.clone(), None);
//! assert_eq!(y.to_data().to_vec::<f32>().unwrap(), vec![3.5]); // the forward stays dense
//! let grads = y.backward();
//! // the weight gradient sees only the kept block (1, 2); the block (0.25, 0.25) was pruned
//! let dw = w.grad(&grads).unwrap().to_data().to_vec::<f32>().unwrap();
//! assert_eq!(dw, vec![1.0, 2.0, 0.0, 0.0]);
//! ```
//!
//! - [`Policy`] / [`Pruning`]: sparsity `s ∈ [0, 1)`, block width `b ≥ 1`, per-layer overrides
//!   (layers named by their weight shape `IN×OUT`), the optional stochastic variant; validated,
//!   every refusal an error.
//! - [`SparseAct<A>`]: the decorator of an autodiff backend (`SparseAct<Autodiff<B>>`, also
//!   `SparseAct<Autodiff<ApproxMul<B>>>`). It implements `AutodiffBackend`, so burn-train's
//!   `Learner` uses it unchanged. Its device ([`SparseDevice`]) carries the policy. Its `linear`
//!   computes the forward densely; when the weight needs a gradient the input is pruned per
//!   sample ([`prune`]) and kept block-sparse instead of the dense checkpoint; backward computes
//!   the weight gradient from those blocks and the input gradient as usual.
//! - How it sits on autodiff: Burn requires an autodiff backend's device to be its inner
//!   backend's, so the policy rides in [`PolicyBackend`] *under* the autodiff layer, and the
//!   layer above ([`cubecl_kernels::decorator::Transparent`]) keeps autodiff's primitives.
//!
//! - [`fused`]: PReLU (stock `burn::nn::PRelu`, through the backend's `prelu`) and the
//!   per-channel affine ([`fused_affine`]) each as one autodiff node whose backward is one
//!   fused broadcast pass (`cubecl_kernels::broadcast`; `docs/broadcast.md`); batch norm's
//!   training forward ([`fused_batch_norm`]) as one node of a few kernels each way
//!   (`cubecl_kernels::norm`); layer norm (stock `burn::nn::LayerNorm`, through the backend's
//!   `layer_norm`) as one node of one kernel forward and a kernel and a channel pass backward
//!   (`cubecl_kernels::layer_norm`).
//! - [`kernel`]: where the backend has CubeCL tensors, pruning and the weight gradient run as
//!   the kernels of `cubecl_kernels::bsr` (the weight gradient with the multiply of an ApproxMul
//!   underneath); elsewhere as Burn tensor ops. Same arrays, same selection.
//!
//! `docs/sparse-act.md` has the semantics, the measured memory tables and the speed figures.
//!
//! # Feature flags
//!
//! - `cuda`: builds the CUDA runtime of `cubecl-kernels` (no CUDA toolkit needed to build).
#![warn(missing_docs)]

mod backend;
pub mod fused;
pub mod kernel;
pub mod policy;
pub mod prune;

pub use backend::{
    Carry, LayerPruning, PolicyBackend, Sparse, SparseAct, SparseBase, SparseDevice, fused_affine,
    fused_batch_norm,
};
pub use policy::{Policy, PolicyError, Pruning};
