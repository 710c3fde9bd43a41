//! Batch normalization over the channels of `[outer, channels, inner]` (NCHW's `[B, C, H·W]`),
//! training forward, inference forward and backward, each a few fused kernels where Burn's
//! `BatchNorm` composes tens of tensor ops.
//!
//! # Why
//!
//! Burn 0.21's `nn::BatchNorm` builds its training forward from about 20 tensor ops (two
//! copies to put the channels first, two means, the centring, the square, the root, the
//! division, `γ`, `β` and the running statistics' six scalings and sums), and autodiff records
//! each one, so its backward is some 35 more launches, among them a sum over every broadcast
//! axis of every per-channel operand. ResNet-18 has 20 batch norms: about 1,100 launches of a
//! training step whose time on a GPU is mostly launches. Here a training forward is five
//! launches, a backward three, an inference forward one.
//!
//! # The arithmetic
//!
//! With `n = outer · inner` values per channel (as f32), `ε` and the momentum `μ` rounded to
//! f32 as Burn rounds its scalars, and every sum over a channel's values in the order of
//! [`broadcast::reference`](crate::broadcast::reference) (a function of the layout alone):
//!
//! - **Training forward** ([`launch_batch_norm`]): `mean = (Σ x) / n`,
//!   `var = (Σ (x − mean)²) / n` (biased, as Burn's), and
//!   `y = ((x − mean) / √(var + ε)) · γ + β`, each operation rounded in that order (Burn's
//!   order). The running statistics, when given, become `r · (1 − μ) + mean · μ` and
//!   `r · (1 − μ) + var · μ`.
//! - **Inference forward** ([`launch_normalize`]): the same `y` with the running mean and
//!   variance.
//! - **Backward** given `dy` ([`launch_batch_norm_backward`]), from `x`, `mean`, `var` and `γ`:
//!   `s = √(var + ε)`, `dβ = Σ dy`, `dγ = (Σ dy · (x − mean)) / s`, and
//!   `dx = (γ / s) · ((dy − dβ / n) − ((x − mean) / s) · (dγ / n))`: the gradient through the
//!   batch's mean and variance included, as autodiff gives it for Burn's composite.
//!
//! The sums run in another order than Burn's reductions and the backward is the closed form
//! rather than autodiff's chain of ops, so results differ from Burn's composite in the last
//! bits (tested within 1e-5 relative). The kernels and [`mod@reference`] agree bit for bit on
//! runtimes that round as the host does (lavapipe); CUDA may contract a multiply and an add.
//!
//! # The launches
//!
//! A training forward: the per-channel sums of `x` ([`broadcast`](crate::broadcast)'s segmented
//! channel pass), the means (one unit per channel adding the segments), the sums of squared
//! deviations (the same pass), the variances with the running statistics, and the
//! normalization (one unit per pack of four values where the inner size allows). A backward:
//! one channel pass for both sums, one unit per channel for `dγ`, and `dx`.
//!
//! The kernels are `kernel.rs`, their launches `launch.rs`; [`ops`] runs them on any backend of
//! an Ember stack (the host implementation where there are no CubeCL tensors).

mod kernel;
mod launch;
pub mod ops;
pub mod reference;

pub use launch::{launch_batch_norm, launch_batch_norm_backward, launch_normalize};

use crate::broadcast::Layout;

/// What a training forward returns.
#[derive(Clone, Debug)]
pub struct Normalized<T> {
    /// The output, of `x`'s shape.
    pub y: T,
    /// The batch's means, `[channels]`.
    pub mean: T,
    /// The batch's (biased) variances, `[channels]`.
    pub var: T,
    /// The running mean and variance after the step, when they were given.
    pub running: Option<(T, T)>,
}

/// A batch norm's scalars, rounded to f32 as Burn's `BatchNorm` rounds them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchNormStep {
    /// `ε`, added to the variance under the root.
    pub epsilon: f32,
    /// `μ`: the share of the batch's statistic in a running one.
    pub momentum: f32,
    /// `1 − μ`: the share of the old running statistic.
    pub keep: f32,
}

impl BatchNormStep {
    /// The scalars of a batch norm with `epsilon` and running-statistics `momentum` (Burn's
    /// `BatchNormConfig` fields).
    pub fn new(epsilon: f64, momentum: f64) -> Self {
        Self {
            epsilon: epsilon as f32,
            momentum: momentum as f32,
            keep: (1.0 - momentum) as f32,
        }
    }
}

/// Values of one channel as the f32 divisor of its means: `outer · inner`.
fn count(l: Layout) -> f32 {
    (l.outer * l.inner) as f32
}
