//! The batched GEMM kernels (staged and direct, [`super::Tile`]) and the kernel that adds
//! split-K partial sums.

use super::Tiling;
use crate::approx::MulKind;
use crate::approx::multiply::{
    decode_into, decode_key, decode_scale, private_lut, product, product_private, stage_lut,
    staged_words,
};
use crate::grid::cube_at;
use crate::runtime::SIMD_UNITS;
use cubecl::prelude::*;

/// The batched GEMM kernel: `out[s·batch + b] = lhs[b] · rhs[b]` over the `s`-th chunk of
/// `chunk` along `k`, shapes `[batch, m, k] · [batch, k, n]`.
#[cube(launch)]
pub(super) fn approx_gemm_kernel(
    lhs: &Tensor<f32>,
    rhs: &Tensor<f32>,
    lut: &Array<u32>,
    out: &mut Tensor<f32>,
    chunk: u32,
    grid_x: u32,
    grid_y: u32,
    grid_total: u32,
    #[comptime] kind: MulKind,
    #[comptime] tiling: Tiling,
) {
    let at = cube_at(grid_x, grid_y, grid_total);
    let ux = comptime!(tiling.dims()[0] as usize);
    let uy = comptime!(tiling.dims()[1] as usize);
    let px = comptime!(tiling.dims()[2] as usize);
    let py = comptime!(tiling.dims()[3] as usize);
    let depth = comptime!(tiling.dims()[4] as usize);
    let tile_m = comptime!(tiling.rows());
    let tile_n = comptime!(tiling.cols());
    let units = comptime!(tiling.units());
    let rows = lhs.shape(1);
    let inner = lhs.shape(2);
    let cols = rhs.shape(2);
    let z = at.z;
    let batch = z % lhs.shape(0);
    let k_begin = (z / lhs.shape(0)) * chunk as usize;
    let k_end = select(
        inner - k_begin < chunk as usize,
        inner,
        k_begin + chunk as usize,
    );
    let row0 = at.y * tile_m;
    let col0 = at.x * tile_n;
    let tx = UNIT_POS_X as usize;
    let ty = UNIT_POS_Y as usize;
    let unit = ty * ux + tx;

    // The table (f32 bits or packed bytes), staged once per cube where it fits.
    let staged = stage_lut(lut, unit, units, kind);

    let mut a_keys = SharedMemory::<u32>::new(comptime!(tile_m * depth));
    let mut a_scales = SharedMemory::<f32>::new(comptime!(tile_m * depth));
    let mut b_keys = SharedMemory::<u32>::new(comptime!(depth * tile_n));
    let mut b_scales = SharedMemory::<f32>::new(comptime!(depth * tile_n));

    let lhs_base = batch * lhs.stride(0);
    let rhs_base = batch * rhs.stride(0);
    let mut acc = Array::<f32>::new(comptime!(px * py));
    #[unroll]
    for i in 0..px * py {
        acc[i] = 0.0f32;
    }
    let mut ka = Array::<u32>::new(py);
    let mut sa = Array::<f32>::new(py);
    let mut kb = Array::<u32>::new(px);
    let mut sb = Array::<f32>::new(px);

    // Consecutive units load consecutive addresses: along k when an operand is k-contiguous
    // (a row-major lhs, a transposed rhs), across the tile otherwise.
    let lhs_along_k = lhs.stride(2) == 1;
    let rhs_along_k = rhs.stride(1) == 1 && rhs.stride(2) != 1;

    let mut k0 = k_begin;
    while k0 < k_end {
        // lhs tile [tile_m × depth]
        #[unroll]
        for q in 0..comptime!((tile_m * depth).div_ceil(units)) {
            let e = unit + q * units;
            if e < comptime!(tile_m * depth) {
                let r = select(lhs_along_k, e / depth, e % tile_m);
                let kk = select(lhs_along_k, e % depth, e / tile_m);
                let (gr, gk) = (row0 + r, k0 + kk);
                let mut x = 0.0f32;
                if gr < rows && gk < k_end {
                    x = lhs[lhs_base + gr * lhs.stride(1) + gk * lhs.stride(2)];
                }
                decode_into(x, &mut a_keys, &mut a_scales, r * depth + kk, kind, true);
            }
        }
        // rhs tile [depth × tile_n]
        #[unroll]
        for q in 0..comptime!((depth * tile_n).div_ceil(units)) {
            let e = unit + q * units;
            if e < comptime!(depth * tile_n) {
                let kr = select(rhs_along_k, e % depth, e / tile_n);
                let c = select(rhs_along_k, e / depth, e % tile_n);
                let (gk, gc) = (k0 + kr, col0 + c);
                let mut y = 0.0f32;
                if gk < k_end && gc < cols {
                    y = rhs[rhs_base + gk * rhs.stride(1) + gc * rhs.stride(2)];
                }
                decode_into(y, &mut b_keys, &mut b_scales, kr * tile_n + c, kind, false);
            }
        }
        sync_cube();
        let steps = select(k_end - k0 < depth, k_end - k0, depth);
        for kk in 0..steps {
            #[unroll]
            for i in 0..py {
                ka[i] = a_keys[(ty + i * uy) * depth + kk];
                sa[i] = a_scales[(ty + i * uy) * depth + kk];
            }
            #[unroll]
            for j in 0..px {
                kb[j] = b_keys[kk * tile_n + tx + j * ux];
                sb[j] = b_scales[kk * tile_n + tx + j * ux];
            }
            #[unroll]
            for i in 0..py {
                #[unroll]
                for j in 0..px {
                    acc[i * px + j] += product(ka[i], sa[i], kb[j], sb[j], lut, &staged, kind);
                }
            }
        }
        sync_cube();
        k0 += depth;
    }

    let out_base = z * out.stride(0);
    #[unroll]
    for i in 0..py {
        #[unroll]
        for j in 0..px {
            let (r, c) = (row0 + ty + i * uy, col0 + tx + j * ux);
            if r < rows && c < cols {
                out[out_base + r * out.stride(1) + c * out.stride(2)] = acc[i * px + j];
            }
        }
    }
}

/// The direct GEMM kernel, for a CPU running it: a cube of [`SIMD_UNITS`] units computes `rows`
/// output rows × `SIMD_UNITS · cols` columns of `out[z]`, each unit `rows × cols` outputs in
/// registers (columns `unit + SIMD_UNITS · q`). Per step along `k`, a unit reads its `cols` rhs
/// values once for all `rows` rows, and each lhs value at an address the whole cube shares (one
/// load and a broadcast on a CPU); a staged table is the unit's private copy
/// ([`private_lut`]). No shared memory, no barrier, no branch around a load (loads are clamped
/// into the matrices and their values selected away); each output is summed in `k` order from
/// `+0`, as in [`approx_gemm_kernel`].
#[cube(launch)]
pub(super) fn approx_gemm_direct_kernel(
    lhs: &Tensor<f32>,
    rhs: &Tensor<f32>,
    lut: &Array<u32>,
    out: &mut Tensor<f32>,
    chunk: u32,
    grid_x: u32,
    grid_y: u32,
    grid_total: u32,
    #[comptime] kind: MulKind,
    #[comptime] rows: usize,
    #[comptime] cols: usize,
) {
    let at = cube_at(grid_x, grid_y, grid_total);
    let units = comptime!(SIMD_UNITS);
    let (m, inner, n) = (lhs.shape(1), lhs.shape(2), rhs.shape(2));
    let z = at.z;
    let batch = z % lhs.shape(0);
    let k_begin = (z / lhs.shape(0)) * chunk as usize;
    let k_end = select(
        inner - k_begin < chunk as usize,
        inner,
        k_begin + chunk as usize,
    );
    let row0 = at.y * rows;
    let c0 = at.x * comptime!(units * cols) + UNIT_POS_X as usize;
    let table = private_lut(lut, kind);
    if comptime!(staged_words(kind) > 1) {
        // not for other units' writes: see `private_lut`
        sync_cube();
    }
    let staged = SharedMemory::<u32>::new(1usize);
    let mut acc = Array::<f32>::new(comptime!(rows * cols));
    #[unroll]
    for i in 0..rows * cols {
        acc[i] = 0.0f32;
    }
    let mut kb = Array::<u32>::new(cols);
    let mut sb = Array::<f32>::new(cols);
    let (ls1, ls2, rs1, rs2) = (lhs.stride(1), lhs.stride(2), rhs.stride(1), rhs.stride(2));
    let lhs_base = batch * lhs.stride(0);
    let rhs_base = batch * rhs.stride(0);
    for k in k_begin..k_end {
        #[unroll]
        for q in 0..cols {
            let c = c0 + q * units;
            let inside = c < n;
            let at = rhs_base + k * rs1 + select(inside, c, 0usize) * rs2;
            let y = select(inside, rhs[at], 0.0f32);
            kb[q] = decode_key(y, kind, false);
            sb[q] = decode_scale(y, kind);
        }
        #[unroll]
        for e in 0..rows {
            let inside = row0 + e < m;
            let at = lhs_base + select(inside, row0 + e, 0usize) * ls1 + k * ls2;
            let x = select(inside, lhs[at], 0.0f32);
            let (ka, sa) = (decode_key(x, kind, true), decode_scale(x, kind));
            #[unroll]
            for q in 0..cols {
                acc[e * cols + q] +=
                    product_private(ka, sa, kb[q], sb[q], lut, &table, &staged, kind);
            }
        }
    }
    let out_base = z * out.stride(0);
    #[unroll]
    for e in 0..rows {
        #[unroll]
        for q in 0..cols {
            let c = c0 + q * units;
            if row0 + e < m && c < n {
                out[out_base + (row0 + e) * out.stride(1) + c * out.stride(2)] = acc[e * cols + q];
            }
        }
    }
}

/// `out[i] = Σ_s parts[s · len + i]`, in `s` order from a `+0` accumulator.
#[cube(launch)]
pub(super) fn sum_chunks_kernel(parts: &Array<f32>, out: &mut Array<f32>, splits: u32) {
    let i = ABSOLUTE_POS;
    let len = out.len();
    if i < len {
        let mut acc = 0.0f32;
        for s in 0..splits as usize {
            acc += parts[s * len + i];
        }
        out[i] = acc;
    }
}
