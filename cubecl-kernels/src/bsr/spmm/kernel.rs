//! The block-sparse weight-gradient kernel (BSpMM).

use super::{DEPTH, Tile, UNITS};
use crate::approx::MulKind;
use crate::approx::multiply::{decode_into, product, stage_lut};
use crate::bsr::prune::Blocks;
use cubecl::prelude::*;

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(super) fn weight_grad_kernel(
    values: &Array<f32>,
    col: &Array<u32>,
    crow: &Array<u32>,
    grad: &Tensor<f32>,
    lut: &Array<u32>,
    dw: &mut Array<f32>,
    samples: u32,
    keep: u32,
    #[comptime] g: Blocks,
    #[comptime] tile: Tile,
    #[comptime] kind: MulKind,
) {
    let ux = comptime!(UNITS as usize);
    let py = comptime!(tile.rows);
    let px = comptime!(tile.cols);
    let depth = comptime!(DEPTH);
    let tile_m = comptime!(tile.rows_per_cube());
    let tile_n = comptime!(tile.cols_per_cube());
    let units = comptime!((UNITS * UNITS) as usize);
    let (b, d, rows) = comptime!((g.b, g.d, g.rows));
    let nb = comptime!(g.columns());
    let row_tiles = comptime!(tile.row_tiles(g.b));
    let out = grad.shape(1);
    let c = CUBE_POS_Y as usize / row_tiles;
    let e0 = (CUBE_POS_Y as usize % row_tiles) * tile_m;
    let o0 = CUBE_POS_X as usize * tile_n;
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
