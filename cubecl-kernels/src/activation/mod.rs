//! ReLU and its backward, each one element-wise kernel.
//!
//! # Why
//!
//! burn-cubecl 0.21 has no ReLU of its own: Burn's default `relu` is a comparison
//! (`x ≤ 0`, a bool tensor) then a masked fill, and `relu_backward` the same on the output then
//! the gradient: two launches each, and a mask written and read between them. ResNet-18 applies
//! ReLU 17 times a step, so its training step spent 68 launches on it. Here each is one kernel
//! that reads its inputs once and writes its output once (in place where the input it replaces
//! is contiguous and held by nothing else, as Burn's masked fill writes).
//!
//! # Semantics (Burn 0.21's, value for value)
//!
//! - **ReLU**: `0` where `x ≤ 0` (a positive zero, for `−0` too), else `x` (NaN stays NaN).
//! - **Backward**, given the forward's output `y` and the gradient `g`: `0` where `y ≤ 0`,
//!   else `g` (a NaN output passes the gradient).
//!
//! Nothing is computed but a comparison and a choice, so the kernels equal
//! [`mod@reference`] (and Burn's composite) bit for bit on every runtime.
//!
//! The kernels are `kernel.rs`, their launches [`launch_relu`] and [`launch_relu_backward`]
//! (`launch.rs`); [`ops`] runs them on the float tensors of a backend with CubeCL memory and
//! declines elsewhere (ndarray has its own one-pass ReLU, and Ember's host element-wise walk
//! for the backward, [`crate::elementwise`]).

mod kernel;
mod launch;
pub mod ops;
pub mod reference;

pub use launch::{launch_relu, launch_relu_backward};
