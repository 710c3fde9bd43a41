//! Layer normalization over the last axis (`burn::nn::LayerNorm`, Burn's `layer_norm` op): one
//! forward kernel, and a backward of one kernel for `dx` and the broadcast family's channel
//! pass for `dγ` and `dβ`, with the multi-threaded host implementation beside them that they
//! equal bit for bit.
//!
//! Burn 0.21's `layer_norm` is a composite (two means, a subtract, a multiply, an add, a
//! square root, a divide, the scale and the shift), and autodiff records each op: 35 launches a
//! layer norm and step, forward and backward, where these take five. DeiT-Ti has 25.
//!
//! # Semantics
//!
//! `x` is viewed as `rows × d`, `d` its last axis; `γ` and `β` hold `d` values. Per row, in f32:
//!
//! - **Forward**: `mean = (Σ x) / d`, `c = x − mean`, `var = (Σ c²) / d` (biased),
//!   `σ = √(var + ε)`, `x̂ = c / σ`, `y = x̂ · γ + β` (the product rounded, then the add; without
//!   `β`, `x̂ · γ`). These are Burn's composite's expressions in its order; its sums add in
//!   another order, so values differ from Burn's in the last bits. The forward keeps `x̂` and
//!   `σ` (one per row) for the backward ([`LayerNormed`]).
//! - **Backward**, given `dy`: `ĝ = dy · γ`, `a = Σ ĝ`, `b = Σ ĝ · x̂` over the row,
//!   `dx = ((ĝ − a / d) − x̂ · (b / d)) / σ`; `dγ = Σ dy · x̂` and `dβ = Σ dy` over the rows.
//!   This is the closed form of the derivative, where Burn's autodiff differentiates the
//!   composite op by op: the two agree within rounding (1e-5 relative in the tests).
//!
//! # Summation order
//!
//! A row's sums: `U` units ([`units`]); unit `u` adds the terms of the row's values
//! `u, u + U, u + 2U, …` in that order from `+0`; then a halving tree over the unit sums (for
//! `h = U/2, …, 1`, sum `u < h` becomes `sum[u] + sum[u + h]`; the result is `sum[0]`). The
//! column sums `dγ`, `dβ` are the channel sums of the broadcast family
//! ([`crate::broadcast::reference`]'s order) over `[rows, d, 1]`. The kernels and
//! [`reference`](mod@reference) add in these orders, so they agree bit for bit where the runtime does not
//! contract multiply-adds.

pub(crate) mod kernel;
pub(crate) mod launch;
pub mod ops;
pub mod reference;

pub use launch::{launch_layer_norm, launch_layer_norm_backward};

/// What a layer norm's forward returns.
#[derive(Clone, Debug)]
pub struct LayerNormed<T> {
    /// The output, of `x`'s shape.
    pub y: T,
    /// The normalized input `x̂ = (x − mean) / σ`, of `x`'s shape (the backward reads it).
    pub xhat: T,
    /// Each row's `σ = √(var + ε)`, `[rows]`.
    pub sigma: T,
}

/// The units that reduce a row of `d` values: the power of two at or above `⌈d / 4⌉`, at least
/// 32 and at most 256.
pub fn units(d: usize) -> usize {
    d.div_ceil(4).next_power_of_two().clamp(32, 256)
}
