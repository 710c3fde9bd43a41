//! The block-sparse weight gradient `dW = Xᵀ · G` of a linear layer from its pruned input
//! (BSpMM), with the comptime multiply of [`crate::approx`].
//!
//! `x` is a [`PrunedCube`](super::prune::PrunedCube) (`[samples, rows, d]` cut into blocks of
//! `b`), `grad: [samples · rows, out]`, `dW: [d, out]`. A cube owns a tile of `dW`: up to 32
//! rows of one block column `c` × 64 output columns. It walks, sample by sample, the run of
//! stored blocks of column `c` (`crow[s, c] .. crow[s, c + 1]`, only the kept blocks: pruned
//! ones cost nothing), staging 16 blocks and the 16 gradient rows they select (gathered through
//! `col`) in shared memory, decoded for the multiply, and accumulates in registers. Every
//! output sums its products samples ascending, rows ascending, from `+0`: the order of the host
//! reference [`super::host::weight_grad`], so the two agree bit for bit.
// `#[cube]` generates undocumented expansion items for public functions.
#![allow(missing_docs)]

use super::prune::{Blocks, PrunedCube};
use crate::approx::multiply::{decode_into, product};
use crate::approx::{ApproxMultiply, LutStaging, MulKind};
use burn_cubecl::CubeRuntime;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_std::{DType, Shape};
use cubecl::prelude::*;

/// Units per cube along the output columns and along the block's rows.
const UNITS: u32 = 16;
/// Output columns per unit (a cube covers `UNITS · COLS_PER_UNIT` = 64).
const COLS_PER_UNIT: usize = 4;
/// Stored blocks staged per step.
const DEPTH: usize = 16;

/// Rows of a block a unit accumulates: 1 for `b ≤ 16`, else 2 (a cube then covers 32 rows).
pub fn rows_per_unit(b: usize) -> usize {
    if b <= UNITS as usize { 1 } else { 2 }
}

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn weight_grad_kernel(
    values: &Array<f32>,
    col: &Array<u32>,
    crow: &Array<u32>,
    grad: &Tensor<f32>,
    lut: &Array<u32>,
    dw: &mut Array<f32>,
    samples: u32,
    keep: u32,
    #[comptime] g: Blocks,
    #[comptime] kind: MulKind,
) {
    let ux = comptime!(UNITS as usize);
    let py = comptime!(rows_per_unit(g.b));
    let px = comptime!(COLS_PER_UNIT);
    let depth = comptime!(DEPTH);
    let tile_m = comptime!(UNITS as usize * rows_per_unit(g.b));
    let tile_n = comptime!(UNITS as usize * COLS_PER_UNIT);
    let units = comptime!((UNITS * UNITS) as usize);
    let (b, d, rows) = comptime!((g.b, g.d, g.rows));
    let nb = comptime!(g.columns());
    let row_tiles = comptime!(g.b.div_ceil(UNITS as usize * rows_per_unit(g.b)));
    let out = grad.shape(1);
    let c = CUBE_POS_Y as usize / row_tiles;
    let e0 = (CUBE_POS_Y as usize % row_tiles) * tile_m;
    let o0 = CUBE_POS_X as usize * tile_n;
    let tx = UNIT_POS_X as usize;
    let ty = UNIT_POS_Y as usize;
    let unit = ty * ux + tx;

    let staged_len = comptime!(match kind {
        MulKind::Lut(m, LutStaging::Shared) => 1usize << (2 * m),
        MulKind::Lut(m, LutStaging::Packed) => 1usize << (2 * m - 2),
        _ => 1usize,
    });
    let mut staged = SharedMemory::<u32>::new(staged_len);
    if comptime!(staged_len > 1) {
        let mut i = unit;
        while i < staged_len {
            staged[i] = lut[i];
            i += units;
        }
    }
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

/// Launches [`weight_grad_kernel`]: `dW: [d, out]` from a pruned input of `samples × rows × d`
/// in blocks of `b` and `grad: [samples · rows, out]` (any strides).
///
/// # Panics
/// If the shapes disagree or `grad` is not f32.
pub fn launch_weight_grad<R: CubeRuntime>(
    x: &PrunedCube<R>,
    [samples, rows, d]: [usize; 3],
    b: usize,
    grad: &CubeTensor<R>,
    mul: &ApproxMultiply,
) -> CubeTensor<R> {
    let g = Blocks { rows, d, b };
    let [grad_rows, out] = grad.meta.shape().dims::<2>();
    assert_eq!(grad_rows, samples * rows, "weight gradient: grad rows");
    assert_eq!(grad.dtype, DType::F32, "weight gradient of f32 tensors");
    let [vs, keep, vb] = x.values.meta.shape().dims::<3>();
    assert_eq!((vs, vb), (samples, b), "pruned values");
    let client = grad.client.clone();
    let dw = empty_device_dtype(
        client.clone(),
        grad.device.clone(),
        Shape::new([d, out]),
        DType::F32,
    );
    if d * out == 0 {
        return dw;
    }
    let kind = mul.kind();
    let words = mul.lut_words();
    let lut = client.create_from_slice(words);
    let row_tiles = b.div_ceil(UNITS as usize * rows_per_unit(b));
    let count = CubeCount::Static(
        out.div_ceil(UNITS as usize * COLS_PER_UNIT) as u32,
        (g.columns() * row_tiles) as u32,
        1,
    );
    weight_grad_kernel::launch::<R>(
        &client,
        count,
        CubeDim::new_2d(UNITS, UNITS),
        x.values.clone().into_array_arg(),
        x.col.clone().into_array_arg(),
        x.crow.clone().into_array_arg(),
        grad.clone().into_tensor_arg(),
        unsafe { ArrayArg::from_raw_parts(lut, words.len() / 4) },
        dw.clone().into_array_arg(),
        samples as u32,
        keep as u32,
        g,
        kind,
    );
    dw
}
