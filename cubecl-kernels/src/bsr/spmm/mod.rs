//! The block-sparse weight gradient `dW = Xᵀ · G` of a linear layer from its pruned input
//! (BSpMM), with the comptime multiply of [`crate::approx`].
//!
//! `x` is a [`PrunedCube`](super::prune::PrunedCube) (`[samples, rows, d]` cut into blocks of
//! `b`), `grad: [samples · rows, out]`, `dW: [d, out]`. A cube owns a tile of `dW`: up to 64
//! rows of one block column `c` × 128 output columns (32 × 64 where the multiply stages its
//! table in shared memory; [`rows_per_unit`], [`cols_per_unit`]). It walks, sample by sample, the run of
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

use crate::approx::MulKind;
use crate::approx::multiply::staged_words;

/// Units per cube along the output columns and along the block's rows.
pub(crate) const UNITS: u32 = 16;
/// Output columns per unit: 8 (a cube covers 128), or 4 (64) where the multiply stages its
/// table in shared memory. With the table staged, 8 columns would overflow the 32 KiB of
/// shared memory lavapipe gives a cube.
pub fn cols_per_unit(kind: MulKind) -> usize {
    if stages_table(kind) { 4 } else { 8 }
}
/// Stored blocks staged per step.
pub(crate) const DEPTH: usize = 16;

/// Rows of a block a unit accumulates: `⌈b / 16⌉` up to 4, so a cube covers a whole block of up
/// to 64 rows and each kept gradient row is staged once per block column; up to 2 (32 rows)
/// where the multiply stages its table in shared memory (the 32 KiB budget of
/// [`cols_per_unit`]).
pub fn rows_per_unit(b: usize, kind: MulKind) -> usize {
    let most = if stages_table(kind) { 2 } else { 4 };
    b.div_ceil(UNITS as usize).clamp(1, most)
}

/// Whether the multiply stages its table in shared memory (the tile sizes above shrink then).
fn stages_table(kind: MulKind) -> bool {
    staged_words(kind) > 1
}
