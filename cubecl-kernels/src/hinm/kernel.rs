//! The HiNM sparse-product kernel.

use crate::grid::cube_at;
use cubecl::prelude::*;

/// One unit per output `(i, r)`: activation row `i` (along `y` of the virtual grid, `grid_*`:
/// [`crate::grid::Grid`]) times packed row `r` (along `x`). Units of one cube along `x` are consecutive rows of one tile, so they
/// read the same kept columns of `x` (one broadcast load) and only the two kept values of each
/// group; the result goes to column `out_perm[r]`.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(super) fn spmm_kernel(
    x: &Tensor<f32>,
    values: &Array<f32>,
    meta: &Array<u32>,
    cols: &Array<u32>,
    out_perm: &Array<u32>,
    y: &mut Array<f32>,
    m: u32,
    out: u32,
    v: u32,
    nnz: u32,
    grid_x: u32,
    grid_y: u32,
    grid_total: u32,
) {
    let at = cube_at(grid_x, grid_y, grid_total);
    let r = at.x * CUBE_DIM_X as usize + UNIT_POS_X as usize;
    let i = at.y * CUBE_DIM_Y as usize + UNIT_POS_Y as usize;
    let (out, nnz) = (out as usize, nnz as usize);
    if r < out && i < m as usize {
        let groups = nnz / 4;
        let half = nnz / 2;
        let words = groups.div_ceil(8);
        let base = (r / v as usize) * nnz;
        let row = i * x.stride(0);
        let step = x.stride(1);
        let mut acc = 0.0f32;
        for g in 0..groups {
            let word = meta[r * words + g / 8];
            let bits = (word >> (((g % 8) * 4) as u32)) & 0xfu32;
            let c0 = cols[base + g * 4 + (bits & 3u32) as usize] as usize;
            let c1 = cols[base + g * 4 + (bits >> 2u32) as usize] as usize;
            acc += values[r * half + 2 * g] * x[row + c0 * step];
            acc += values[r * half + 2 * g + 1] * x[row + c1 * step];
        }
        let col = out_perm[r] as usize;
        y[i * out + col] = acc;
    }
}
