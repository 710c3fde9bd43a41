//! Softmax over the last axis (Burn's `softmax` op, which `burn::nn::attention` calls on its
//! scores): one kernel forward and one backward, with the multi-threaded host implementation
//! beside them.
//!
//! Burn 0.21's `softmax` is a composite (a max, a subtract, an exponential, a sum, a divide),
//! and autodiff records each op and differentiates each: 18 launches a softmax and step.
//! DeiT-Ti's attention applies one per block, 12 a step.
//!
//! # Semantics
//!
//! `x` is viewed as `rows × d`, `d` its last axis. Per row, in f32:
//!
//! - **Forward**: `m = max x` (NaN compares false, so a NaN in the row makes every output NaN
//!   through its exponential, as Burn's composite does), `e = exp(x − m)`, `y = e / Σ e`:
//!   Burn's expressions; its sum adds in another order, and a runtime's `exp` rounds as it
//!   does.
//! - **Backward**, given the forward's output `y` and `dy`: `dx = y · (dy − Σ dy · y)`, the
//!   closed form of the derivative (Burn's autodiff differentiates the composite op by op: the
//!   two agree within rounding, 1e-5 relative in the tests).
//!
//! # Order
//!
//! A row's sums add in [`layer_norm`](crate::layer_norm)'s order (units, then a halving tree);
//! the maximum does not depend on an order. The host implementation adds in the same order,
//! so it equals the kernels where the runtime's `exp` rounds as the host's does, and within
//! its rounding elsewhere.

mod kernel;
mod launch;
pub mod ops;
pub mod reference;

pub use launch::{launch_softmax, launch_softmax_backward};
