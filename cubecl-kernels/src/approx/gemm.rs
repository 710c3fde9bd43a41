//! Tiled, batched GEMM whose every product goes through a comptime [`MulKind`].
//!
//! A cube of 16 × 16 units computes a 64 × 64 output tile; each unit owns a 4 × 4 block of
//! accumulators in registers (rows `ty + 16i`, columns `tx + 16j`), so every shared-memory read
//! of a decoded operand serves four products. Per step of 16 along `k`, the units decode the lhs and
//! rhs tiles into shared memory (key + scale, see the module docs of [`crate::approx`]); small
//! tables (`m ≤ 6`, ≤ 16 KiB) are staged in shared memory once per cube, larger ones are read
//! from global memory. Any shape works: loads outside the matrices decode zeros and stores
//! outside are skipped. Inputs may be strided (transposed views need no copy).

use super::multiply::{decode_into, product};
use super::{ApproxMultiply, MulKind, SHARED_LUT_ENTRIES};
use burn_cubecl::CubeRuntime;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_std::{DType, Shape};
use cubecl::prelude::*;

/// Outputs per unit along each edge (a unit owns `PER × PER` outputs, kept in registers).
pub const PER: u32 = 4;
/// Units per cube edge.
pub const UNITS: u32 = 16;
/// Output tile edge (`UNITS · PER`).
pub const TILE: u32 = UNITS * PER;
/// Depth of a shared tile along `k`.
pub const DEPTH: u32 = 16;

/// The batched GEMM kernel: `out[b] = lhs[b] · rhs[b]`, shapes `[batch, m, k] · [batch, k, n]`.
#[cube(launch)]
fn approx_gemm_kernel(
    lhs: &Tensor<f32>,
    rhs: &Tensor<f32>,
    lut: &Array<f32>,
    out: &mut Tensor<f32>,
    #[comptime] kind: MulKind,
) {
    let tile = comptime!(TILE as usize);
    let depth = comptime!(DEPTH as usize);
    let units = comptime!(UNITS as usize);
    let per = comptime!(PER as usize);
    let rows = lhs.shape(1);
    let inner = lhs.shape(2);
    let cols = rhs.shape(2);
    let batch = CUBE_POS_Z as usize;
    let row0 = CUBE_POS_Y as usize * tile;
    let col0 = CUBE_POS_X as usize * tile;
    let tx = UNIT_POS_X as usize;
    let ty = UNIT_POS_Y as usize;
    let unit = ty * units + tx;

    let lut_len = comptime!(match kind {
        MulKind::Lut(m, true) => 1usize << (2 * m),
        _ => 1usize,
    });
    let mut staged = SharedMemory::<f32>::new(lut_len);
    if let MulKind::Lut(_, true) = kind {
        let mut i = unit;
        while i < lut_len {
            staged[i] = lut[i];
            i += units * units;
        }
    }

    let mut a_keys = SharedMemory::<u32>::new(comptime!(tile * depth));
    let mut a_scales = SharedMemory::<f32>::new(comptime!(tile * depth));
    let mut b_keys = SharedMemory::<u32>::new(comptime!(depth * tile));
    let mut b_scales = SharedMemory::<f32>::new(comptime!(depth * tile));

    let lhs_base = batch * lhs.stride(0);
    let rhs_base = batch * rhs.stride(0);
    let mut acc = Array::<f32>::new(comptime!(per * per));
    #[unroll]
    for i in 0..per * per {
        acc[i] = 0.0f32;
    }
    let mut ka = Array::<u32>::new(per);
    let mut sa = Array::<f32>::new(per);
    let mut kb = Array::<u32>::new(per);
    let mut sb = Array::<f32>::new(per);

    let mut k0 = 0usize;
    while k0 < inner {
        // tile·depth lhs and rhs elements per step: `per` of each per unit.
        #[unroll]
        for q in 0..per {
            let e = unit + q * units * units;
            // lhs tile [tile rows × depth]
            let (r, kk) = (e / depth, e % depth);
            let (gr, gk) = (row0 + r, k0 + kk);
            let mut x = 0.0f32;
            if gr < rows && gk < inner {
                x = lhs[lhs_base + gr * lhs.stride(1) + gk * lhs.stride(2)];
            }
            decode_into(x, &mut a_keys, &mut a_scales, r * depth + kk, kind, true);
            // rhs tile [depth × tile cols]
            let (kr, c) = (e / tile, e % tile);
            let (gk2, gc) = (k0 + kr, col0 + c);
            let mut y = 0.0f32;
            if gk2 < inner && gc < cols {
                y = rhs[rhs_base + gk2 * rhs.stride(1) + gc * rhs.stride(2)];
            }
            decode_into(y, &mut b_keys, &mut b_scales, kr * tile + c, kind, false);
        }
        sync_cube();
        let steps = select(inner - k0 < depth, inner - k0, depth);
        for kk in 0..steps {
            #[unroll]
            for i in 0..per {
                ka[i] = a_keys[(ty + i * units) * depth + kk];
                sa[i] = a_scales[(ty + i * units) * depth + kk];
                kb[i] = b_keys[kk * tile + tx + i * units];
                sb[i] = b_scales[kk * tile + tx + i * units];
            }
            #[unroll]
            for i in 0..per {
                #[unroll]
                for j in 0..per {
                    acc[i * per + j] += product(ka[i], sa[i], kb[j], sb[j], lut, &staged, kind);
                }
            }
        }
        sync_cube();
        k0 += depth;
    }

    let out_base = batch * out.stride(0);
    #[unroll]
    for i in 0..per {
        #[unroll]
        for j in 0..per {
            let (r, c) = (row0 + ty + i * units, col0 + tx + j * units);
            if r < rows && c < cols {
                out[out_base + r * out.stride(1) + c * out.stride(2)] = acc[i * per + j];
            }
        }
    }
}

/// Launches [`approx_gemm_kernel`]: `lhs: [batch, m, k]`, `rhs: [batch, k, n]` (f32, any
/// strides) → a new contiguous `[batch, m, n]`.
///
/// # Panics
/// If ranks, batch sizes, inner sizes or dtypes disagree (callers reshape and check first).
pub fn launch<R: CubeRuntime>(
    lhs: CubeTensor<R>,
    rhs: CubeTensor<R>,
    mul: &ApproxMultiply,
) -> CubeTensor<R> {
    let [batch, m, k] = lhs.meta.shape().dims();
    let [batch_r, k_r, n] = rhs.meta.shape().dims();
    assert_eq!(
        (batch, k),
        (batch_r, k_r),
        "approx_gemm: [b, m, k] · [b, k, n]"
    );
    assert!(
        lhs.dtype == DType::F32 && rhs.dtype == DType::F32,
        "approx_gemm works on f32 tensors"
    );
    let client = lhs.client.clone();
    let out = empty_device_dtype(
        client.clone(),
        lhs.device.clone(),
        Shape::new([batch, m, n]),
        DType::F32,
    );
    if batch * m * n == 0 {
        return out;
    }
    let table = mul.table();
    debug_assert!(
        !matches!(mul.kind(), MulKind::Lut(_, true)) || table.len() <= SHARED_LUT_ENTRIES
    );
    let lut = client.create_from_slice(f32::as_bytes(table));
    let count = CubeCount::Static(
        n.div_ceil(TILE as usize) as u32,
        m.div_ceil(TILE as usize) as u32,
        batch as u32,
    );
    approx_gemm_kernel::launch::<R>(
        &client,
        count,
        CubeDim::new_2d(UNITS, UNITS),
        lhs.into_tensor_arg(),
        rhs.into_tensor_arg(),
        unsafe { ArrayArg::from_raw_parts(lut, table.len()) },
        out.clone().into_tensor_arg(),
        mul.kind(),
    );
    out
}
