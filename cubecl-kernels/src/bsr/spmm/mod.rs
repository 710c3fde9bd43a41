//! The block-sparse weight gradient `dW = Xᵀ · G` of a linear layer from its pruned input
//! (BSpMM), with the comptime multiply of [`crate::approx`].
//!
//! `x` is a [`PrunedCube`](super::prune::PrunedCube) (`[samples, rows, d]` cut into blocks of
//! `b`), `grad: [samples · rows, out]`, `dW: [d, out]`. A cube owns a tile of `dW`: up to 32
//! rows of one block column `c` × 64 output columns. It walks, sample by sample, the run of
//! stored blocks of column `c` (`crow[s, c] .. crow[s, c + 1]`, only the kept blocks: pruned
//! ones cost nothing), staging 16 blocks and the 16 gradient rows they select (gathered through
//! `col`) in shared memory, decoded for the multiply, and accumulates in registers. Every
//! output sums its products samples ascending, rows ascending, from `+0`: the order of the host
//! reference [`reference::weight_grad`], so the two agree bit for bit.
//!
//! `kernel.rs` holds the kernel, `launch.rs` [`launch_weight_grad`], `reference.rs` the host
//! reference [`reference::weight_grad`].

mod kernel;
mod launch;
pub mod reference;

pub use launch::launch_weight_grad;

/// Units per cube along the output columns and along the block's rows.
pub(crate) const UNITS: u32 = 16;
/// Output columns per unit (a cube covers `UNITS · COLS_PER_UNIT` = 64).
pub(crate) const COLS_PER_UNIT: usize = 4;
/// Stored blocks staged per step.
pub(crate) const DEPTH: usize = 16;

/// Rows of a block a unit accumulates: 1 for `b ≤ 16`, else 2 (a cube then covers 32 rows).
pub fn rows_per_unit(b: usize) -> usize {
    if b <= UNITS as usize { 1 } else { 2 }
}
