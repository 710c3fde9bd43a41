//! ReLU, GELU and sigmoid, forward and backward, each one element-wise kernel.
//!
//! # Why
//!
//! burn-cubecl 0.21 has no activation kernels of its own: Burn's default `relu` is a
//! comparison (`x ≤ 0`, a bool tensor) then a masked fill, and `relu_backward` the same on the
//! output then the gradient: two launches each, and a mask written and read between them.
//! Burn's `gelu` is five element-wise launches, its `gelu_backward` fourteen, its `sigmoid`
//! six (negate, `exp`, add, `ln`, negate, `exp`: the negations are multiplications by `−1`)
//! and `sigmoid_backward` four. ResNet-18 applies ReLU 17 times a step (68 launches), DeiT-Ti
//! and ResMLP-S12 GELU 12 times (228); the 2 × 256 GRU over 48 frames applies sigmoid 192
//! times, and burn-autodiff computes each again in the backward before its
//! `sigmoid_backward` (16 launches each, 3,072 of the step's 10,695). Here each
//! pass is one kernel that reads its inputs once and writes its output once, in place where the
//! tensor it replaces is contiguous and held by nothing else (as Burn's element-wise ops write)
//! and over the contiguous copy it reads of a view that is not contiguous.
//!
//! # Semantics (Burn 0.21's, operation for operation)
//!
//! - **ReLU**: `0` where `x ≤ 0` (a positive zero, for `−0` too), else `x` (NaN stays NaN).
//!   Backward, given the forward's **output** `y` and the gradient `g`: `0` where `y ≤ 0`, else
//!   `g` (a NaN output passes the gradient).
//! - **GELU**: `x · (erf(x / √2) + 1) / 2`, the runtime's `erf`. Backward, given the forward's
//!   **input** `x`: Burn's derivative of the tanh approximation,
//!   `g · (t/2 + (i₂ · (1 − t²) + ½))` with `t = tanh(x³·k₁ + x·k₂)`, `i₂ = x³·k₃ + x·k₄`
//!   ([`reference::GELU_BACKWARD`]), `x³` by the runtime's `pow`.
//! - **Sigmoid**: burn-backend's default composite, `exp(ln(exp(x · −1) + 1) · −1)`, the
//!   runtime's `exp` and `ln`. Backward, given the forward's **output** `y`:
//!   `y · (y · −1 + 1) · g`.
//!
//! Burn's scalars are kernel arguments, rounded as Burn rounds them, and every operation is
//! Burn's, in Burn's order: ReLU equals [`mod@reference`] (and Burn's composite) bit for bit on
//! every runtime (it only compares and chooses); GELU equals Burn's composite bit for bit on a
//! runtime that does not contract multiply-adds (wgpu), and [`mod@reference`] within the
//! rounding of the runtime's `exp`, `erf`, `tanh` and `pow`. Sigmoid equals both within the
//! rounding of the runtime's `exp` and `ln`: a shader compiler may rewrite their chain inside
//! one kernel (lavapipe's results differ from Burn's composite by up to 5 ulps). On the host,
//! [`crate::elementwise`] computes sigmoid, GELU and ReLU's, sigmoid's and GELU's backward in
//! one pass each, bit for bit burn-ndarray's composites (whose `erf` and `tanh` are libm's
//! `f64` functions, not the ones above).
//!
//! The kernels are `kernel.rs` (one forward and one backward kernel, each out of place or in
//! place, the activation a comptime [`Activation`]; `ember profile` names them
//! `ActivationKernel`, `ActivationInPlaceKernel`, `ActivationBackwardKernel` and
//! `ActivationBackwardInPlaceKernel`), their launches [`launch_forward`] and
//! [`launch_backward`] (`launch.rs`); [`ops`] runs them on the float tensors of a backend with
//! CubeCL memory and declines elsewhere (ndarray has its own one-pass ReLU, and Ember's host
//! passes for sigmoid, GELU and the three backwards, [`crate::elementwise`]).

mod kernel;
mod launch;
pub mod ops;
pub mod reference;

pub use kernel::Activation;
pub use launch::{launch_backward, launch_forward};
