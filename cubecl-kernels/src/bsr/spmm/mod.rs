//! The block-sparse weight gradient `dW = Xᵀ · G` of a linear layer from its pruned input
//! (BSpMM), with the comptime multiply of [`crate::approx`].
//!
//! `x` is a [`PrunedCube`](super::prune::PrunedCube) (`[samples, rows, d]` cut into blocks of
//! `b`), `grad: [samples · rows, out]`, `dW: [d, out]`. A cube owns a part of one block column
//! `c` of `dW` × a range of output columns. It walks, sample by sample, the run of stored blocks
//! of column `c` (`crow[s, c] .. crow[s, c + 1]`, only the kept blocks: pruned ones cost
//! nothing) and the gradient rows they select (gathered through `col`), and accumulates in
//! registers, in one of two [`Tile`]s chosen for the device ([`Tile::for_device`]):
//! - **staged** (GPUs): 16 blocks and their gradient rows at a time in shared memory, decoded
//!   for the multiply, 16 × 16 units reading them from there;
//! - **direct** (a CPU running the kernel, lavapipe): no shared memory, 8 units with a large
//!   register tile each, the block's values read at addresses the whole cube shares.
//!
//! Every output sums its products samples ascending, rows ascending, from `+0`: the order of the
//! host reference [`reference::weight_grad`], so the kernel agrees with it bit for bit in either
//! tile.
//!
//! `kernel.rs` holds the two kernels, `launch.rs` [`launch_weight_grad`] (the tile chosen for
//! the device) and [`launch_weight_grad_tiled`], `reference.rs` the host reference
//! [`reference::weight_grad`].

mod kernel;
mod launch;
pub mod reference;

pub use launch::{device_tile, launch_weight_grad, launch_weight_grad_tiled};

use crate::approx::MulKind;
use crate::approx::multiply::staged_words;

/// Units per cube of the staged kernel, along the output columns and along the block's rows.
pub(crate) const UNITS: u32 = 16;
/// Stored blocks the staged kernel stages per step.
pub(crate) const DEPTH: usize = 16;
use crate::runtime::SIMD_UNITS;
use cubecl::prelude::CubeDim;

/// How a cube computes its part of `dW`, chosen per launch by [`Tile::for_device`]. Both kinds
/// sum every output in the same order, so they agree bit for bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tile {
    /// For GPUs: 16 × 16 units stage 16 kept blocks and the gradient rows they select in shared
    /// memory, then each unit sums `rows × cols` outputs from there: a cube covers `16 · rows`
    /// rows of one block column × `16 · cols` output columns. Up to 32 rows × 64 columns
    /// ([`Tile::staged`]): on an H200, ResMLP-S12's `(64, 196, 384) → 384` at `b = 64` gives
    /// 72 cubes for 132 multiprocessors, and larger tiles ran up to 1.9× slower
    /// (`docs/sparse-act.md`).
    Staged {
        /// Rows of the block each unit accumulates.
        rows: usize,
        /// Output columns each unit accumulates.
        cols: usize,
    },
    /// For a CPU running the kernel (lavapipe): [`SIMD_UNITS`] units, each summing `rows`
    /// rows of the block × `cols` output columns, with no shared memory and no barrier. The
    /// kept block's values are read at addresses the whole cube shares (one load and a
    /// broadcast to the SIMD lanes), the gradient row once per cube for all `rows` rows; the
    /// large register tile ([`Tile::direct`]: up to 64 × 16 a unit) is what a CPU's caches hold
    /// and a GPU's registers do not.
    Direct {
        /// Rows of the block each unit (and the cube) accumulates.
        rows: usize,
        /// Output columns each unit accumulates.
        cols: usize,
    },
}

impl Tile {
    /// The staged tile for blocks of `b`: 16 rows (`b ≤ 16`) or 32, × 64 output columns.
    pub fn staged(b: usize) -> Self {
        Self::Staged {
            rows: if b <= UNITS as usize { 1 } else { 2 },
            cols: 4,
        }
    }

    /// The direct tile for blocks of `b` under `kind`: for the plain product up to 64 rows (the
    /// whole block up to `b = 64`) × 16 columns a unit, 128 output columns a cube; for the
    /// approximate multiplies, whose products cost more than their loads, up to 16 × 4 (a
    /// kernel unrolls a unit's tile: 1024 of their products would take the shader compilers
    /// minutes).
    pub fn direct(b: usize, kind: MulKind) -> Self {
        if kind == MulKind::Plain {
            Self::Direct {
                rows: b.clamp(1, 64),
                cols: 16,
            }
        } else {
            Self::Direct {
                rows: b.clamp(1, 16),
                cols: 4,
            }
        }
    }

    /// The tile for a GPU (`gpu`: staged) or a CPU running the kernel (direct; on lavapipe the
    /// direct tile is 3–18× faster than the staged one, `docs/sparse-act.md`).
    pub fn for_device(gpu: bool, b: usize, kind: MulKind) -> Self {
        if gpu {
            Self::staged(b)
        } else {
            Self::direct(b, kind)
        }
    }

    /// The units of a cube: a square of `UNITS` × `UNITS` (staged) or a row of
    /// [`SIMD_UNITS`] (direct).
    pub fn cube_dim(&self) -> CubeDim {
        match self {
            Self::Staged { .. } => CubeDim::new_2d(UNITS, UNITS),
            Self::Direct { .. } => CubeDim::new_1d(SIMD_UNITS as u32),
        }
    }

    /// Rows of `dW` a cube covers.
    pub fn rows_per_cube(&self) -> usize {
        match *self {
            Self::Staged { rows, .. } => UNITS as usize * rows,
            Self::Direct { rows, .. } => rows,
        }
    }

    /// Output columns a cube covers.
    pub fn cols_per_cube(&self) -> usize {
        match *self {
            Self::Staged { cols, .. } => UNITS as usize * cols,
            Self::Direct { cols, .. } => SIMD_UNITS * cols,
        }
    }

    /// The cubes along the block's rows: `⌈b / rows_per_cube⌉`.
    pub fn row_tiles(&self, b: usize) -> usize {
        b.div_ceil(self.rows_per_cube())
    }

    /// `"staged"` or `"direct"` (the bench rows' suffix).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Staged { .. } => "staged",
            Self::Direct { .. } => "direct",
        }
    }

    /// Whether the tile can run under `kind`: a staged unit sums at most 4 rows × 8 columns,
    /// 2 × 4 where the multiply stages its table in shared memory too (lavapipe gives a cube
    /// 32 KiB); a direct unit at most 64 × 16 (16 × 4 under an approximate multiply).
    pub fn fits(&self, kind: MulKind) -> bool {
        let (rows, cols, most) = match *self {
            Self::Staged { rows, cols } if stages_table(kind) => (rows, cols, (2, 4)),
            Self::Staged { rows, cols } => (rows, cols, (4, 8)),
            Self::Direct { rows, cols } if kind == MulKind::Plain => (rows, cols, (64, 16)),
            Self::Direct { rows, cols } => (rows, cols, (16, 4)),
        };
        (1..=most.0).contains(&rows) && (1..=most.1).contains(&cols)
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
    fn the_staged_tile_runs_on_a_gpu_and_the_direct_one_on_a_cpu() {
        let plain = MulKind::Plain;
        let staged_table = MulKind::Lut(5, crate::approx::LutStaging::Shared);
        // ResMLP-S12 at b = 64: 6 × 6 × 2 staged cubes, 3 × 6 direct ones
        let cubes = |t: Tile| 384usize.div_ceil(t.cols_per_cube()) * 6 * t.row_tiles(64);
        assert_eq!(cubes(Tile::staged(64)), 72);
        assert_eq!(cubes(Tile::direct(64, plain)), 18);
        assert_eq!(Tile::for_device(true, 64, plain), Tile::staged(64));
        assert_eq!(Tile::for_device(false, 64, plain), Tile::direct(64, plain));
        for kind in [plain, staged_table] {
            let most = if kind == plain { 64 } else { 16 };
            for b in [1, 4, 16, 17, 32, 40, 64, 65, 100] {
                assert!(Tile::staged(b).fits(kind) && Tile::direct(b, kind).fits(kind));
                let rows = Tile::direct(b, kind).row_tiles(b);
                assert_eq!(rows, b.div_ceil(most), "b={b} {kind:?}");
            }
        }
        assert_eq!(Tile::staged(64).name(), "staged");
        assert_eq!(Tile::direct(64, plain).name(), "direct");
        assert_eq!(
            Tile::direct(64, plain).cube_dim().num_elems(),
            SIMD_UNITS as u32
        );
        assert_eq!(Tile::staged(64).cube_dim().num_elems(), UNITS * UNITS);
        assert!(!Tile::Staged { rows: 4, cols: 8 }.fits(staged_table));
        assert!(Tile::Staged { rows: 4, cols: 8 }.fits(plain));
        assert!(!Tile::Direct { rows: 65, cols: 16 }.fits(plain));
        assert!(!Tile::Direct { rows: 32, cols: 16 }.fits(staged_table));
        assert!(!Tile::Direct { rows: 8, cols: 0 }.fits(plain));
    }
}
