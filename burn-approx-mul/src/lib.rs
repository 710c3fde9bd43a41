//! # burn-approx-mul
//!
//! **ApproxMul** (ApproxTrain, `shared/papers/approx-mul_approxtrain.md`): every multiply inside
//! matmul, linear and convolution — forward and both gradients — goes through a mantissa-product
//! lookup table generated from a functional model of an approximate floating-point multiplier,
//! with FP32 accumulation.
//!
//! Status: this crate is empty until the ApproxMul issue lands. The decorator will be a
//! `cubecl_kernels::decorator::Decoration` whose device carries the multiplier, so that
//! `Autodiff<ApproxMul<B>>` approximates every contraction of a stock `burn::nn` model.
//!
//! # Feature flags
//!
//! None yet.
#![warn(missing_docs)]
