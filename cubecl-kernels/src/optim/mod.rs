//! Optimizer steps, each one fused kernel per parameter: Adam and SGD (with momentum and L2
//! weight decay), with the host implementation beside them that they equal bit for bit on a
//! runtime that rounds as the host does.
//!
//! # Why
//!
//! Burn's `Adam` composes its step from tensor ops: 13 launches per parameter (the moments'
//! scalings and sums, the square, the root, the division, the update), each a full pass over the
//! parameter's values; its `Sgd` with momentum and weight decay 7. ResNet-18 has 62 parameters,
//! so Adam alone was about 800 of the 2,385 launches of its training step on CUDA. Here one
//! kernel reads the parameter, its gradient and its state once and writes the new parameter and
//! state: one launch per parameter.
//!
//! # The arithmetic (Burn 0.21's, operation for operation)
//!
//! Every value is f32; each line below is rounded where Burn's op would round it, with `p` the
//! parameter, `g` its gradient and `λ` the L2 penalty (weight decay, optional):
//!
//! - **Weight decay**: `g ← p · λ + g`.
//! - **Adam** ([`AdamStep`]), at step `t` (1 for a parameter's first step, whose moments are
//!   then `(1 − β₁) · g` and `(1 − β₂) · g · g`, as if both had been 0):
//!   `m ← m · β₁ + g · (1 − β₁)`, `v ← v · β₂ + (g · g) · (1 − β₂)`,
//!   `p ← p − ((m · f) / (√v + ε')) · lr`, with `f = √(1 − β₂ᵗ) / (1 − β₁ᵗ)` and
//!   `ε' = ε · √(1 − β₂ᵗ)` computed on the host in f32 (Burn's `AdaptiveMomentum`).
//! - **SGD** ([`SgdStep`]): with momentum `μ` and dampening `d`, the velocity is `u ← g` at a
//!   parameter's first step, else `u ← g · (1 − d) + u · μ`, and `g ← u`; then `p ← p − g · lr`
//!   (no Nesterov step).
//!
//! Burn's ops run one at a time, so they never fuse a multiply with an add; the kernels do not
//! either on wgpu, and equal [`mod@reference`] bit for bit there. CUDA's compiler contracts
//! multiply-adds into FMAs, which round once: within one rounding of each product.
//!
//! The kernels are `kernel.rs`, their launches [`launch_adam`] and [`launch_sgd`] (`launch.rs`);
//! [`ops`] runs them on any backend of an Ember stack (the host implementation where there are
//! no CubeCL tensors).

mod kernel;
mod launch;
pub mod ops;
pub mod reference;

pub use launch::{launch_adam, launch_sgd};

/// One Adam step's scalars, computed on the host as Burn's `Adam` computes them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamStep {
    /// `β₁`.
    pub beta_1: f32,
    /// `1 − β₁`.
    pub one_minus_beta_1: f32,
    /// `β₂`.
    pub beta_2: f32,
    /// `1 − β₂`.
    pub one_minus_beta_2: f32,
    /// `f = √(1 − β₂ᵗ) / (1 − β₁ᵗ)`, the first moment's bias correction over the second's.
    pub factor: f32,
    /// `ε' = ε · √(1 − β₂ᵗ)`.
    pub epsilon: f32,
    /// The learning rate.
    pub lr: f32,
    /// The L2 penalty added to the gradient (`p · λ + g`), if any.
    pub weight_decay: Option<f32>,
    /// Whether this is the parameter's first step (`t = 1`, no moments read).
    pub first: bool,
}

impl AdamStep {
    /// The scalars of step `time` (1-based) at rate `lr`, for Adam with `beta_1`, `beta_2`,
    /// `epsilon` and an optional L2 `weight_decay`.
    ///
    /// # Panics
    /// If `time` is 0.
    pub fn new(
        beta_1: f32,
        beta_2: f32,
        epsilon: f32,
        weight_decay: Option<f32>,
        time: usize,
        lr: f64,
    ) -> Self {
        assert!(time >= 1, "Adam's steps count from 1");
        let t = i32::try_from(time).unwrap_or(i32::MAX);
        let correction_2 = (1.0 - beta_2.powi(t)).sqrt();
        Self {
            beta_1,
            one_minus_beta_1: 1.0 - beta_1,
            beta_2,
            one_minus_beta_2: 1.0 - beta_2,
            factor: correction_2 / (1.0 - beta_1.powi(t)),
            epsilon: epsilon * correction_2,
            lr: lr as f32,
            weight_decay,
            first: time == 1,
        }
    }
}

/// One SGD step's scalars.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdStep {
    /// `(μ, 1 − d)`: the momentum and one minus the dampening, or `None` for plain SGD.
    pub momentum: Option<(f32, f32)>,
    /// The L2 penalty added to the gradient (`p · λ + g`), if any.
    pub weight_decay: Option<f32>,
    /// The learning rate.
    pub lr: f32,
    /// Whether this is the parameter's first step (the velocity is the gradient).
    pub first: bool,
}

impl SgdStep {
    /// The scalars of a step at rate `lr` with optional `(momentum, dampening)` and L2
    /// `weight_decay`; `first` for a parameter's first step. The momentum and `1 − dampening`
    /// are rounded to f32 as Burn's `Momentum` rounds them.
    pub fn new(
        momentum: Option<(f64, f64)>,
        weight_decay: Option<f32>,
        lr: f64,
        first: bool,
    ) -> Self {
        Self {
            momentum: momentum.map(|(m, d)| (m as f32, (1.0 - d) as f32)),
            weight_decay,
            lr: lr as f32,
            first,
        }
    }
}
