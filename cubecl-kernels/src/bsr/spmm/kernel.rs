//! The block-sparse weight-gradient kernels (BSpMM): staged and direct ([`super::Tile`]).

use super::{DEPTH, UNITS};
use crate::approx::MulKind;
use crate::approx::multiply::{
    decode_into, decode_key, decode_scale, product, stage_lut, staged_words,
};
use crate::bsr::prune::Blocks;
use crate::grid::cube_at;
use crate::runtime::SIMD_UNITS;
use cubecl::prelude::*;

/// The weight gradient in a staged tile: 16 × 16 units, each summing `py` block rows × `px`
/// output columns, read from 16 kept blocks and their gradient rows staged (decoded) in shared
/// memory at a time.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(super) fn weight_grad_staged_kernel(
    values: &Array<f32>,
    col: &Array<u32>,
    crow: &Array<u32>,
    grad: &Tensor<f32>,
    lut: &Array<u32>,
    dw: &mut Array<f32>,
    samples: u32,
    keep: u32,
    grid_x: u32,
    grid_y: u32,
    grid_total: u32,
    #[comptime] g: Blocks,
    #[comptime] py: usize,
    #[comptime] px: usize,
    #[comptime] kind: MulKind,
) {
    let ux = comptime!(UNITS as usize);
    let depth = comptime!(DEPTH);
    let tile_m = comptime!(UNITS as usize * py);
    let tile_n = comptime!(UNITS as usize * px);
    let units = comptime!((UNITS * UNITS) as usize);
    let (b, d, rows) = comptime!((g.b, g.d, g.rows));
    let nb = comptime!(g.columns());
    let row_tiles = comptime!(g.b.div_ceil(UNITS as usize * py));
    let out = grad.shape(1);
    let at = cube_at(grid_x, grid_y, grid_total);
    let c = at.y / row_tiles;
    let e0 = (at.y % row_tiles) * tile_m;
    let o0 = at.x * tile_n;
    let tx = UNIT_POS_X as usize;
    let ty = UNIT_POS_Y as usize;
    let unit = ty * ux + tx;

    let staged = stage_lut(lut, unit, units, kind);
    let mut a_keys = SharedMemory::<u32>::new(comptime!(tile_m * DEPTH));
    let mut a_scales = SharedMemory::<f32>::new(comptime!(tile_m * DEPTH));
    let mut b_keys = SharedMemory::<u32>::new(comptime!(DEPTH * tile_n));
    let mut b_scales = SharedMemory::<f32>::new(comptime!(DEPTH * tile_n));
    let mut acc = Array::<f32>::new(comptime!(px * py));
    #[unroll]
    for i in 0..px * py {
        acc[i] = 0.0f32;
    }
    let keep = keep as usize;
    for s in 0..samples as usize {
        let start = crow[s * (nb + 1) + c] as usize;
        let end = crow[s * (nb + 1) + c + 1] as usize;
        let mut j0 = start;
        while j0 < end {
            // blocks [depth × tile_m], block-major in memory: consecutive units, consecutive e
            #[unroll]
            for q in 0..comptime!((tile_m * DEPTH).div_ceil(units)) {
                let idx = unit + q * units;
                if idx < comptime!(tile_m * DEPTH) {
                    let (kk, e) = (idx / tile_m, idx % tile_m);
                    let j = j0 + kk;
                    let mut v = 0.0f32;
                    if j < end && e0 + e < b {
                        v = values[(s * keep + j) * b + e0 + e];
                    }
                    decode_into(v, &mut a_keys, &mut a_scales, e * depth + kk, kind, true);
                }
            }
            // the gradient rows they select [depth × tile_n]
            #[unroll]
            for q in 0..comptime!((DEPTH * tile_n).div_ceil(units)) {
                let idx = unit + q * units;
                if idx < comptime!(DEPTH * tile_n) {
                    let (kk, o) = (idx / tile_n, idx % tile_n);
                    let j = j0 + kk;
                    let mut v = 0.0f32;
                    if j < end && o0 + o < out {
                        let r = s * rows + col[s * keep + j] as usize;
                        v = grad[r * grad.stride(0) + (o0 + o) * grad.stride(1)];
                    }
                    decode_into(v, &mut b_keys, &mut b_scales, kk * tile_n + o, kind, false);
                }
            }
            sync_cube();
            let steps = select(end - j0 < depth, end - j0, depth);
            for kk in 0..steps {
                #[unroll]
                for i in 0..py {
                    let (ka, sa) = (
                        a_keys[(ty + i * ux) * depth + kk],
                        a_scales[(ty + i * ux) * depth + kk],
                    );
                    #[unroll]
                    for jj in 0..px {
                        let at = kk * tile_n + tx + jj * ux;
                        acc[i * px + jj] +=
                            product(ka, sa, b_keys[at], b_scales[at], lut, &staged, kind);
                    }
                }
            }
            sync_cube();
            j0 += depth;
        }
    }
    #[unroll]
    for i in 0..py {
        #[unroll]
        for jj in 0..px {
            let e = e0 + ty + i * ux;
            let o = o0 + tx + jj * ux;
            if e < b && c * b + e < d && o < out {
                dw[(c * b + e) * out + o] = acc[i * px + jj];
            }
        }
    }
}

/// The weight gradient in the direct tile: a cube owns `rows` rows of block column `c` ×
/// `SIMD_UNITS · cols` output columns, and each unit `rows × cols` outputs. Every operand is
/// read where it lies: the kept block's values through addresses every unit of the cube shares
/// (one load and a broadcast on a CPU running the kernel), the gradient row's values through
/// the unit's own columns. No shared memory and no barrier, but the one after staging a table.
#[cube(launch)]
// `if comptime!(whole)` and its runtime `else if` read the same value: the first skips the
// bounds test where `rows` divides `b`
#[allow(clippy::too_many_arguments, clippy::if_same_then_else)]
pub(super) fn weight_grad_direct_kernel(
    values: &Array<f32>,
    col: &Array<u32>,
    crow: &Array<u32>,
    grad: &Tensor<f32>,
    lut: &Array<u32>,
    dw: &mut Array<f32>,
    samples: u32,
    keep: u32,
    grid_x: u32,
    grid_y: u32,
    grid_total: u32,
    #[comptime] g: Blocks,
    #[comptime] rows: usize,
    #[comptime] cols: usize,
    #[comptime] kind: MulKind,
) {
    let units = comptime!(SIMD_UNITS);
    let (b, d, per_sample) = comptime!((g.b, g.d, g.rows));
    let nb = comptime!(g.columns());
    let chunks = comptime!(g.b.div_ceil(rows));
    let whole = comptime!(g.b.is_multiple_of(rows));
    let out = grad.shape(1);
    let at = cube_at(grid_x, grid_y, grid_total);
    let c = at.y / chunks;
    let e0 = (at.y % chunks) * rows;
    let unit = UNIT_POS_X as usize;
    let o0 = at.x * comptime!(units * cols) + unit;
    let staged = stage_lut(lut, unit, units, kind);
    if comptime!(staged_words(kind) > 1) {
        sync_cube();
    }
    let mut acc = Array::<f32>::new(comptime!(rows * cols));
    #[unroll]
    for i in 0..rows * cols {
        acc[i] = 0.0f32;
    }
    let mut kb = Array::<u32>::new(cols);
    let mut sb = Array::<f32>::new(cols);
    let keep = keep as usize;
    let (gs0, gs1) = (grad.stride(0), grad.stride(1));
    for s in 0..samples as usize {
        let start = crow[s * (nb + 1) + c] as usize;
        let end = crow[s * (nb + 1) + c + 1] as usize;
        for j in start..end {
            let r = s * per_sample + col[s * keep + j] as usize;
            #[unroll]
            for q in 0..cols {
                let o = o0 + q * units;
                let mut v = 0.0f32;
                if o < out {
                    v = grad[r * gs0 + o * gs1];
                }
                kb[q] = decode_key(v, kind, false);
                sb[q] = decode_scale(v, kind);
            }
            let base = (s * keep + j) * b + e0;
            #[unroll]
            for e in 0..rows {
                let mut v = 0.0f32;
                if comptime!(whole) {
                    v = values[base + e];
                } else if e0 + e < b {
                    v = values[base + e];
                }
                let (ka, sa) = (decode_key(v, kind, true), decode_scale(v, kind));
                #[unroll]
                for q in 0..cols {
                    acc[e * cols + q] += product(ka, sa, kb[q], sb[q], lut, &staged, kind);
                }
            }
        }
    }
    #[unroll]
    for e in 0..rows {
        #[unroll]
        for q in 0..cols {
            let o = o0 + q * units;
            if e0 + e < b && c * b + e0 + e < d && o < out {
                dw[(c * b + e0 + e) * out + o] = acc[e * cols + q];
            }
        }
    }
}
