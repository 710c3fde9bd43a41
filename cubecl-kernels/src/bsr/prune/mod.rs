//! Pruning on the device: block norms, per-sample top-k selection, and compression into the
//! column-oriented BSR that the weight gradient reads.
//!
//! Layout (the same as `burn_sparse_act::prune::Pruned`'s): blocks are numbered block-column
//! major within a sample, `n = c · rows + r` (`c` the block column along `d`, `r` the row). A
//! sample keeps `keep` blocks; `values: [samples, keep, b]` holds them in `n` order (zero-padded
//! where the last block column is shorter than `b`), `col: [samples, keep]` their rows `r`, and
//! `crow: [samples, nb + 1]` the start of every block column's run (`nb = ⌈d / b⌉`).
//!
//! Three launches: `block_norms_kernel` (one unit per block, squares summed in element
//! order), `select_kernel` (one unit per block: its rank among the sample's blocks by norm,
//! descending, ties to the lower index, NaN as +∞; kept when the rank is below `keep`), and
//! `compress_kernel` (one unit per sample and block column: the column's start from the flags
//! before it, then its kept blocks in row order).
//!
//! `kernel.rs` holds the kernels, `launch.rs` their launches ([`launch_block_norms`],
//! [`launch_compress`]), `reference.rs` the host reference ([`reference::prune`] and its parts).

mod kernel;
mod launch;
pub mod reference;

pub use launch::{launch_block_norms, launch_compress};

use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;
use reference::Bsr;

/// The geometry of a pruned activation `[samples, rows, d]` cut into blocks of `b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Blocks {
    /// Rows per sample.
    pub rows: usize,
    /// Row length.
    pub d: usize,
    /// Block width.
    pub b: usize,
}

impl Blocks {
    /// Block columns `⌈d / b⌉`.
    pub fn columns(&self) -> usize {
        self.d.div_ceil(self.b)
    }
    /// Blocks per sample.
    pub fn per_sample(&self) -> usize {
        self.rows * self.columns()
    }
}

/// A pruned activation on the device, in the layout of the [module docs](self).
#[derive(Clone, Debug)]
pub struct PrunedCube<R: CubeRuntime> {
    /// `[samples, keep, b]` f32.
    pub values: CubeTensor<R>,
    /// `[samples, keep]` u32 rows.
    pub col: CubeTensor<R>,
    /// `[samples, nb + 1]` u32 column starts.
    pub crow: CubeTensor<R>,
}

/// The column-oriented arrays of a host [`Bsr`] of `samples` samples (the test oracle of
/// [`launch_compress`]): `(values, col, crow)` in the layout of the [module docs](self).
pub fn columns(bsr: &Bsr, samples: usize) -> (Vec<f32>, Vec<u32>, Vec<u32>) {
    let rows = bsr.rows / samples.max(1);
    let (b, nb) = (bsr.block, bsr.cols.div_ceil(bsr.block));
    let (mut values, mut col, mut crow) = (Vec::new(), Vec::new(), Vec::new());
    for s in 0..samples {
        let mut by_col: Vec<Vec<(u32, usize)>> = vec![Vec::new(); nb];
        for r in 0..rows {
            let row = s * rows + r;
            for at in bsr.crow[row] as usize..bsr.crow[row + 1] as usize {
                by_col[bsr.col[at] as usize].push((r as u32, at));
            }
        }
        let mut start = 0u32;
        for blocks in &by_col {
            crow.push(start);
            start += blocks.len() as u32;
            for &(r, at) in blocks {
                col.push(r);
                values.extend_from_slice(&bsr.values[at * b..(at + 1) * b]);
            }
        }
        crow.push(start);
    }
    (values, col, crow)
}
