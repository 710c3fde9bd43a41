//! Batched GEMM whose every product goes through a comptime
//! [`MulKind`](crate::approx::MulKind), in one of two kernel tiles ([`Tile`]) that sum every
//! output in the same order, so they agree bit for bit.
//!
//! **Staged (GPUs).** A cube computes one output tile of a [`Tiling`] chosen from the output's
//! shape (64 × 64 for large products, 16 × 128 / 128 × 16 when one side is short, 16 × 32 when
//! both are); each unit owns a small block of accumulators in registers (rows `ty + uy·i`,
//! columns `tx + ux·j`), so every shared-memory read of a decoded operand serves several
//! products. Per step along `k`, the units decode the lhs and rhs tiles into shared memory (a
//! key and a scale each, see the module docs of [`crate::approx`]); tables are staged in shared
//! memory once per cube as f32 (`m ≤ 6`) or packed bytes (`m = 7`), wider ones are read from
//! global memory.
//!
//! **Direct (a CPU running the kernel, lavapipe).** A cube is one SIMD vector of units along the
//! output's columns; each unit sums 16 × 16 outputs in registers, reads the lhs at
//! addresses the whole cube shares and a staged table from its private copy: no shared memory
//! and no per-lane branch around a load, which is what a CPU's SIMD lanes pay for
//! (`docs/approx-mul.md`: 6–9× faster than the staged tile on lavapipe).
//!
//! Both: long `k` with few tiles is split into chunks ([`split_k`]) whose partial sums a second
//! kernel adds in chunk order. Any shape works: loads outside the matrices decode zeros and
//! stores outside are skipped. Inputs may be strided (transposed views need no copy).
//!
//! - `kernel.rs`: the `#[cube]` kernels; `launch.rs`: [`launch`], [`launch_tiled`];
//!   `reference.rs`: the host reference [`gemm`](fn@gemm) (multi-threaded, AVX2 where available), the
//!   test oracle and the path on backends without CubeCL; `expand.rs`: its LUT path by table
//!   expansion (no lookup per product, the same bits); `implicit.rs`: a convolution's forward
//!   and weight-gradient products by the expansion with the im2col columns read in place.
//!
//! [`split_k`]: crate::approx::split_k

mod expand;
mod implicit;
mod kernel;
mod launch;
mod reference;

use cubecl::prelude::CubeDim;
pub(in crate::approx) use expand::Layouts;
pub use implicit::{conv_forward, conv_input_grad, conv_weight_grad};
pub use launch::{device_tile, launch, launch_tiled};
pub use reference::{gemm, gemm_in_order, gemm_nt};
pub use tiling::Tiling;

mod tiling {
    // The `CubeType` derive generates undocumented expansion types.
    #![allow(missing_docs)]
    use cubecl::prelude::*;

    /// The tile shape of a launch: units per cube `(ux, uy)`, outputs per unit `(px, py)` and
    /// the depth of a shared tile along `k`. Every tiling has 256 units.
    #[derive(CubeType, Clone, Copy, Hash, PartialEq, Eq, Debug)]
    pub enum Tiling {
        /// 64 × 64 outputs, 4 × 4 per unit, depth 16.
        Square,
        /// 16 × 128 outputs (short `m`), 4 × 2 per unit, depth 8.
        Wide,
        /// 128 × 16 outputs (short `n`), 2 × 4 per unit, depth 8.
        Tall,
        /// 16 × 32 outputs (short `m` and `n`), 2 × 1 per unit, depth 16.
        Small,
    }
}

/// How a launch computes its output, picked per device by [`Tile::for_device`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tile {
    /// For GPUs: 256 units stage decoded operand tiles in shared memory, in the [`Tiling`]
    /// [`Tiling::choose`] picks for the output's shape.
    Staged(Tiling),
    /// For a CPU running the kernel: [`SIMD_UNITS`](crate::runtime::SIMD_UNITS) units, each
    /// summing `rows` output rows × `cols` columns in registers ([`Tile::DIRECT`]).
    Direct {
        /// Output rows of a unit (and of its cube).
        rows: usize,
        /// Output columns of a unit.
        cols: usize,
    },
}

impl Tile {
    /// The direct tile: 16 output rows × 16 columns a unit, 16 × 128 a cube, whatever the
    /// shape (at 512³ on lavapipe, 16 × 4 ran 1.8× slower and 32 × 16 1.1×). One tile keeps
    /// the kernels to compile to one per multiply: lavapipe takes 13 s (plain) to 50 s (a
    /// private m = 7 table) for one, once per machine (Mesa keeps compiled shaders in its disk
    /// cache), where a staged kernel takes under a second.
    pub const DIRECT: Self = Self::Direct { rows: 16, cols: 16 };

    /// The tile for a GPU (`gpu`: staged) or a CPU running the kernel (direct).
    pub fn for_device(gpu: bool, m: usize, n: usize) -> Self {
        if gpu {
            Self::Staged(Tiling::choose(m, n))
        } else {
            Self::DIRECT
        }
    }

    /// The units of a cube: the [`Tiling`]'s `ux × uy` (staged) or a row of
    /// [`SIMD_UNITS`](crate::runtime::SIMD_UNITS) (direct).
    pub fn cube_dim(&self) -> CubeDim {
        match *self {
            Self::Staged(t) => {
                let [ux, uy, ..] = t.dims();
                CubeDim::new_2d(ux, uy)
            }
            Self::Direct { .. } => CubeDim::new_1d(crate::runtime::SIMD_UNITS as u32),
        }
    }

    /// The tile's name in reports: `staged` or `direct`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Staged(_) => "staged",
            Self::Direct { .. } => "direct",
        }
    }

    /// Output rows and columns of a cube.
    pub fn cube_outputs(&self) -> [usize; 2] {
        match *self {
            Self::Staged(t) => [t.rows(), t.cols()],
            Self::Direct { rows, cols } => [rows, crate::runtime::SIMD_UNITS * cols],
        }
    }
}

impl Tiling {
    /// `[ux, uy, px, py, depth]`.
    pub const fn dims(self) -> [u32; 5] {
        match self {
            Self::Square => [16, 16, 4, 4, 16],
            Self::Wide => [32, 8, 4, 2, 8],
            Self::Tall => [8, 32, 2, 4, 8],
            Self::Small => [16, 16, 2, 1, 16],
        }
    }

    /// Output rows of a tile.
    pub const fn rows(self) -> usize {
        let [_, uy, _, py, _] = self.dims();
        (uy * py) as usize
    }

    /// Output columns of a tile.
    pub const fn cols(self) -> usize {
        let [ux, _, px, _, _] = self.dims();
        (ux * px) as usize
    }

    /// Units per cube.
    pub const fn units(self) -> usize {
        let [ux, uy, ..] = self.dims();
        (ux * uy) as usize
    }

    /// Shared memory of the decoded operand tiles, in bytes (a key and a scale per element).
    pub const fn operand_bytes(self) -> usize {
        let depth = self.dims()[4] as usize;
        (self.rows() + self.cols()) * depth * 8
    }

    /// The tiling that computes an `m × n` output with the fewest padded products (ties go to
    /// the one with more products per unit, which reuses each shared read more).
    pub fn choose(m: usize, n: usize) -> Self {
        [Self::Square, Self::Wide, Self::Tall, Self::Small]
            .into_iter()
            .min_by_key(|t| m.next_multiple_of(t.rows()) * n.next_multiple_of(t.cols()))
            .expect("four tilings")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tiling_fits_beside_a_staged_table() {
        // 32 KiB: lavapipe's (and many GPUs') compute shared memory; a staged table is 16 KiB.
        for t in [Tiling::Square, Tiling::Wide, Tiling::Tall, Tiling::Small] {
            assert!(t.operand_bytes() + 16 * 1024 <= 32 * 1024, "{t:?}");
            assert_eq!(t.units(), 256, "{t:?}");
        }
    }

    #[test]
    fn gpus_get_the_staged_tile() {
        assert_eq!(
            Tile::for_device(true, 512, 512),
            Tile::Staged(Tiling::Square)
        );
        assert_eq!(Tile::for_device(false, 512, 512), Tile::DIRECT);
        assert_eq!(Tile::for_device(false, 6, 25), Tile::DIRECT);
        assert_eq!(Tile::DIRECT.cube_outputs(), [16, 128]);
        assert_eq!(Tile::DIRECT.cube_dim().num_elems(), 8);
        assert_eq!(Tile::Staged(Tiling::Square).cube_dim().num_elems(), 256);
        assert_eq!(
            [Tile::DIRECT.name(), Tile::Staged(Tiling::Square).name()],
            ["direct", "staged"]
        );
    }

    #[test]
    fn tilings_follow_the_output_shape() {
        assert_eq!(Tiling::choose(512, 512), Tiling::Square);
        assert_eq!(Tiling::choose(64, 120), Tiling::Square);
        assert_eq!(Tiling::choose(16, 6400), Tiling::Wide);
        assert_eq!(Tiling::choose(6400, 6), Tiling::Tall);
        assert_eq!(Tiling::choose(6, 25), Tiling::Small);
    }
}
