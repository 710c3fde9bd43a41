//! The block-sparse weight gradient `dW = Xᵀ · G` of a linear layer from its pruned input
//! (BSpMM), with the comptime multiply of [`crate::approx`].
//!
//! `x` is a [`PrunedCube`](super::prune::PrunedCube) (`[samples, rows, d]` cut into blocks of
//! `b`), `grad: [samples · rows, out]`, `dW: [d, out]`. A cube owns a [`Tile`] of `dW`: up to
//! 64 rows of one block column `c` × 128 output columns where the runtime reports no
//! multiprocessors (wgpu, lavapipe), up to 32 × 64 on a GPU that does (CUDA;
//! [`Tile::for_device`]). It walks, sample by sample, the run of stored blocks of column `c`
//! (`crow[s, c] .. crow[s, c + 1]`, only the kept blocks: pruned ones cost nothing), staging 16
//! blocks and the 16 gradient rows they select (gathered through `col`) in shared memory,
//! decoded for the multiply, and accumulates in registers. Every
//! output sums its products samples ascending, rows ascending, from `+0`: the order of the host
//! reference [`reference::weight_grad`], so the two agree bit for bit.
//!
//! `kernel.rs` holds the kernel, `launch.rs` [`launch_weight_grad`] (the tile chosen for the
//! device) and [`launch_weight_grad_tiled`], `reference.rs` the host reference
//! [`reference::weight_grad`].

mod kernel;
mod launch;
pub mod reference;

pub use launch::{device_tile, launch_weight_grad, launch_weight_grad_tiled};

use crate::approx::MulKind;
use crate::approx::multiply::staged_words;

/// Units per cube along the output columns and along the block's rows.
pub(crate) const UNITS: u32 = 16;
/// Stored blocks staged per step.
pub(crate) const DEPTH: usize = 16;

/// The tile of `dW` one cube accumulates: `16 · rows` rows of one block column × `16 · cols`
/// output columns, each of its 16 × 16 units summing `rows × cols` outputs in registers.
///
/// Two tilings, chosen per launch by [`Tile::for_device`]:
/// - [`Tile::wide`]: a whole block of up to 64 rows × 128 output columns, so each kept gradient
///   row is staged once per block column. Fewest cubes and least staging: the fastest on a CPU
///   running the kernel (lavapipe), where a handful of cubes already fills every core.
/// - [`Tile::narrow`]: up to 32 rows × 64 columns, up to four times the cubes and fewer
///   registers a unit. On a GPU the wide tiles leave multiprocessors idle (ResMLP-S12's
///   `(64, 196, 384) → 384` at `b = 64`: 18 cubes on an H200's 132 SMs, 72 narrow ones), and
///   the narrow tiles run faster there (`docs/sparse-act.md`).
///
/// Both sum every output in the same order, so they agree bit for bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tile {
    /// Rows of the block each unit accumulates.
    pub rows: usize,
    /// Output columns each unit accumulates.
    pub cols: usize,
}

impl Tile {
    /// The wide tile for blocks of `b` under `kind`: `⌈b / 16⌉` rows a unit up to 4 and 8
    /// columns (64 × 128); up to 2 rows and 4 columns (32 × 64) where the multiply stages its
    /// table in shared memory, whose 32 KiB (lavapipe's budget for a cube) the wider tile would
    /// overflow.
    pub fn wide(b: usize, kind: MulKind) -> Self {
        let most = Self::largest(kind);
        Self {
            rows: b.div_ceil(UNITS as usize).clamp(1, most.rows),
            cols: most.cols,
        }
    }

    /// The most a unit accumulates under `kind`: 4 rows × 8 columns, 2 × 4 with a staged table.
    fn largest(kind: MulKind) -> Self {
        if stages_table(kind) {
            Self { rows: 2, cols: 4 }
        } else {
            Self { rows: 4, cols: 8 }
        }
    }

    /// The narrow tile for blocks of `b`: 16 rows (`b ≤ 16`) or 32, × 64 output columns.
    pub fn narrow(b: usize) -> Self {
        Self {
            rows: if b <= UNITS as usize { 1 } else { 2 },
            cols: 4,
        }
    }

    /// The tile for a device that reports `sms` multiprocessors: the narrow one on a GPU that
    /// reports them (CUDA), the wide one where none are reported (wgpu reports none for any
    /// adapter; on lavapipe the wide tile is 1.3–2× faster). On an H200 the narrow tile was as
    /// fast or faster in all 16 pairs measured, by up to 1.9× (`docs/sparse-act.md`), also
    /// where the wide tiles alone already outnumber the multiprocessors (`b = 4`: 288 cubes).
    pub fn for_device(sms: Option<u32>, b: usize, kind: MulKind) -> Self {
        match sms {
            Some(_) => Self::narrow(b),
            None => Self::wide(b, kind),
        }
    }

    /// Rows of `dW` a cube covers.
    pub fn rows_per_cube(&self) -> usize {
        UNITS as usize * self.rows
    }

    /// Output columns a cube covers.
    pub fn cols_per_cube(&self) -> usize {
        UNITS as usize * self.cols
    }

    /// The cubes along the block's rows: `⌈b / rows_per_cube⌉`.
    pub fn row_tiles(&self, b: usize) -> usize {
        b.div_ceil(self.rows_per_cube())
    }

    /// `"wide"` or `"narrow"` (the bench rows' suffix), or the sizes of any other tile.
    pub fn name(&self, b: usize, kind: MulKind) -> String {
        if *self == Self::wide(b, kind) {
            "wide".into()
        } else if *self == Self::narrow(b) {
            "narrow".into()
        } else {
            format!("{}x{}", self.rows_per_cube(), self.cols_per_cube())
        }
    }

    /// Whether a unit's registers and the cube's shared memory can hold this tile under
    /// `kind`: at most 4 rows and 8 columns a unit, at most 2 × 4 with a staged table.
    pub fn fits(&self, kind: MulKind) -> bool {
        let most = Self::largest(kind);
        (1..=most.rows).contains(&self.rows) && (1..=most.cols).contains(&self.cols)
    }
}

/// Whether the multiply stages its table in shared memory (the tile sizes above shrink then).
fn stages_table(kind: MulKind) -> bool {
    staged_words(kind) > 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_narrow_tile_runs_where_the_device_reports_multiprocessors() {
        let plain = MulKind::Plain;
        // ResMLP-S12 at b = 64: 3 × 6 wide cubes, 6 × 6 × 2 narrow ones
        let cubes = |t: Tile| 384usize.div_ceil(t.cols_per_cube()) * 6 * t.row_tiles(64);
        assert_eq!(cubes(Tile::wide(64, plain)), 18);
        assert_eq!(cubes(Tile::narrow(64)), 72);
        assert_eq!(Tile::for_device(Some(132), 64, plain), Tile::narrow(64));
        assert_eq!(Tile::for_device(None, 64, plain), Tile::wide(64, plain));
        // both fit every multiply, the wide one never smaller; with a staged table the two
        // are the same tile
        for kind in [plain, MulKind::Lut(5, crate::approx::LutStaging::Shared)] {
            for b in [1, 4, 16, 17, 32, 40, 64, 100] {
                assert!(Tile::wide(b, kind).fits(kind) && Tile::narrow(b).fits(kind));
                let (w, n) = (Tile::wide(b, kind), Tile::narrow(b));
                assert!(w.rows >= n.rows && w.cols >= n.cols);
                assert_eq!(w == n, kind != plain, "b={b} {kind:?}");
            }
        }
        assert_eq!(Tile::narrow(64).name(64, plain), "narrow");
        assert_eq!(Tile::wide(64, plain).name(64, plain), "wide");
        assert!(
            !Tile { rows: 4, cols: 8 }.fits(MulKind::Lut(5, crate::approx::LutStaging::Shared))
        );
    }
}
