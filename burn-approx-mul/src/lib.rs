//! # burn-approx-mul
//!
//! **ApproxMul** ("ApproxTrain: Fast Simulation of Approximate Multipliers for DNN Training and
//! Inference"): every multiply inside
//! matmul, linear and convolution — forward and both gradients — goes through a simulated
//! approximate floating-point multiplier, with FP32 accumulation.
//!
//! ```
//! use burn::backend::{Autodiff, NdArray};
//! use burn::tensor::Tensor;
//! use burn_approx_mul::{ApproxDevice, ApproxMul, Multiplier};
//!
//! type B = Autodiff<ApproxMul<NdArray>>;
//! let device = ApproxDevice::<NdArray>::new(Default::default(), Multiplier::parse("mitchell7").unwrap());
//! let a = Tensor::<B, 2>::from_floats([[1.25, 1.75]], &device).require_grad();
//! let b = Tensor::<B, 2>::from_floats([[1.5], [1.5]], &device);
//! // Mitchell: 1.25·1.5 ≈ 1.75 and 1.75·1.5 ≈ 2.5 (exact: 1.875 and 2.625)
//! let y = a.clone().matmul(b);
//! assert_eq!(y.to_data().to_vec::<f32>().unwrap(), vec![4.25]);
//! ```
//!
//! - [`model`]: functional models (truncation/bfloat16, MBM, Mitchell, REALM) and Ember's IEEE
//!   semantics for zero, subnormals, Inf, NaN and overflow.
//! - [`Lut`]: mantissa-product tables generated from any `fn(f32, f32) -> f32` (ApproxTrain's
//!   Algorithm 1) and the simulator (Algorithm 2); [`file`](mod@file): ApproxTrain's raw `NAME_M.bin` and
//!   Ember's `.lut` format.
//! - [`Multiplier`]: what an [`ApproxDevice`] carries; [`ApproxMul<B>`]: the backend decorator.
//!   It overrides `float_matmul`, `linear` and its two gradient ops, and `conv1d/2d/3d`,
//!   `conv_transpose1d/2d/3d` with their input and weight gradients, so that
//!   `Autodiff<ApproxMul<B>>` approximates the forward pass and both gradient contractions of
//!   stock `burn::nn` models. With [`Multiplier::native`] it forwards every op to `B` unchanged.
//!   A weight may carry its own multiplier (a per-layer policy tags it, naming the layer,
//!   [`Multiplier::layer`]): each contraction multiplies with its **weight's** multiplier, in the
//!   forward pass and both gradients (the linear weight gradient through a layer view above
//!   autodiff, `SparseAct`), and reports what it ran to `cubecl_kernels::decorator::effects`.
//! - [`ops`]: the contractions, on the `cubecl-kernels` LUT GEMM kernel when `B` is a CubeCL
//!   backend and on its multi-threaded host reference otherwise.
//!
//! # Feature flags
//!
//! - `cuda`: builds the CUDA runtime of `cubecl-kernels` (no CUDA toolkit needed to build).
#![warn(missing_docs)]

mod backend;
pub mod error;
pub mod file;
mod lut;
pub mod model;
mod multiplier;
pub mod ops;

pub use backend::{Approx, ApproxDevice, ApproxMul};
pub use cubecl_kernels::matmul::MatmulKernel;
pub use error::ApproxError;
pub use lut::{ErrorStats, Lut, MAX_LUT_BITS};
pub use multiplier::{BUILT_IN_HELP, Family, Multiplier};
pub use ops::native::ConvRoute;
