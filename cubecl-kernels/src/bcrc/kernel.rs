//! The BCRC sparse-product kernel.

use crate::grid::cube_at;
use cubecl::prelude::*;

/// One unit per output `(i, p)`: activation row `i` (along `y` of the virtual grid, `grid_*`:
/// [`crate::grid::Grid`]) times reordered row `p` (along `x`). Units of one cube along `x` are consecutive reordered rows, mostly of one
/// column pattern, so they read the same activations (one broadcast load serves them all: the
/// GPU form of load-redundancy elimination); the result goes to column `reorder[p]`.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(super) fn spmm_kernel(
    x: &Tensor<f32>,
    weights: &Array<f32>,
    row_offset: &Array<u32>,
    row_cols: &Array<u32>,
    compact_column: &Array<u32>,
    reorder: &Array<u32>,
    y: &mut Array<f32>,
    m: u32,
    out: u32,
    grid_x: u32,
    grid_y: u32,
    grid_total: u32,
) {
    let at = cube_at(grid_x, grid_y, grid_total);
    let p = at.x * CUBE_DIM_X as usize + UNIT_POS_X as usize;
    let i = at.y * CUBE_DIM_Y as usize + UNIT_POS_Y as usize;
    let out = out as usize;
    if p < out && i < m as usize {
        let first = row_offset[p] as usize;
        let count = row_offset[p + 1] as usize - first;
        let cols = row_cols[p] as usize;
        let row = i * x.stride(0);
        let step = x.stride(1);
        let mut acc = 0.0f32;
        for t in 0..count {
            let c = compact_column[cols + t] as usize;
            acc += weights[first + t] * x[row + c * step];
        }
        let col = reorder[p] as usize;
        y[i * out + col] = acc;
    }
}
