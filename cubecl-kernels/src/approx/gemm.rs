//! Tiled, batched GEMM whose every product goes through a comptime [`MulKind`].
//!
//! A cube computes one output tile of a [`Tiling`] chosen from the output's shape (64 × 64 for
//! large products, 16 × 128 / 128 × 16 when one side is short, 16 × 32 when both are); each unit
//! owns a small block of accumulators in registers (rows `ty + uy·i`, columns `tx + ux·j`), so
//! every shared-memory read of a decoded operand serves several products. Per step along `k`,
//! the units decode the lhs and rhs tiles into shared memory (key + scale, see the module docs of
//! [`crate::approx`]); tables are staged in shared memory once per cube as f32 (`m ≤ 6`) or
//! packed bytes (`m = 7`), wider ones are read from global memory. Long `k` with few tiles is
//! split into chunks ([`split_k`]) whose partial sums a second kernel adds in chunk order. Any
//! shape works: loads outside the matrices decode zeros and stores outside are skipped. Inputs
//! may be strided (transposed views need no copy).

use super::multiply::{decode_into, product};
use super::{ApproxMultiply, LutStaging, MulKind, split_k};
use burn_cubecl::CubeRuntime;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_std::{DType, Shape};
use cubecl::prelude::*;

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

/// The batched GEMM kernel: `out[s·batch + b] = lhs[b] · rhs[b]` over the `s`-th chunk of
/// `chunk` along `k`, shapes `[batch, m, k] · [batch, k, n]`.
#[cube(launch)]
fn approx_gemm_kernel(
    lhs: &Tensor<f32>,
    rhs: &Tensor<f32>,
    lut: &Array<u32>,
    out: &mut Tensor<f32>,
    chunk: u32,
    #[comptime] kind: MulKind,
    #[comptime] tiling: Tiling,
) {
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
    let z = CUBE_POS_Z as usize;
    let batch = z % lhs.shape(0);
    let k_begin = (z / lhs.shape(0)) * chunk as usize;
    let k_end = select(
        inner - k_begin < chunk as usize,
        inner,
        k_begin + chunk as usize,
    );
    let row0 = CUBE_POS_Y as usize * tile_m;
    let col0 = CUBE_POS_X as usize * tile_n;
    let tx = UNIT_POS_X as usize;
    let ty = UNIT_POS_Y as usize;
    let unit = ty * ux + tx;

    // The table (f32 bits or packed bytes), staged once per cube where it fits.
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

/// `out[i] = Σ_s parts[s · len + i]`, in `s` order from a `+0` accumulator.
#[cube(launch)]
fn sum_chunks_kernel(parts: &Array<f32>, out: &mut Array<f32>, splits: u32) {
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
    let device = lhs.device.clone();
    let chunk = split_k([batch, m, k, n]);
    let splits = k.div_ceil(chunk).max(1);
    let new = |rows: usize| {
        empty_device_dtype(
            client.clone(),
            device.clone(),
            Shape::new([rows, m, n]),
            DType::F32,
        )
    };
    let parts = new(splits * batch);
    if batch * m * n == 0 {
        return parts;
    }
    let kind = mul.kind();
    let words = mul.lut_words();
    let lut = client.create_from_slice(words);
    let tiling = Tiling::choose(m, n);
    let [ux, uy, ..] = tiling.dims();
    let count = CubeCount::Static(
        n.div_ceil(tiling.cols()) as u32,
        m.div_ceil(tiling.rows()) as u32,
        (splits * batch) as u32,
    );
    approx_gemm_kernel::launch::<R>(
        &client,
        count,
        CubeDim::new_2d(ux, uy),
        lhs.into_tensor_arg(),
        rhs.into_tensor_arg(),
        unsafe { ArrayArg::from_raw_parts(lut, words.len() / 4) },
        parts.clone().into_tensor_arg(),
        chunk as u32,
        kind,
        tiling,
    );
    if splits == 1 {
        return parts;
    }
    let out = new(batch);
    let units = 256u32;
    sum_chunks_kernel::launch::<R>(
        &client,
        CubeCount::Static(((batch * m * n) as u32).div_ceil(units), 1, 1),
        CubeDim::new_1d(units),
        parts.into_array_arg(),
        out.clone().into_array_arg(),
        splits as u32,
    );
    out
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
    fn tilings_follow_the_output_shape() {
        assert_eq!(Tiling::choose(512, 512), Tiling::Square);
        assert_eq!(Tiling::choose(64, 120), Tiling::Square);
        assert_eq!(Tiling::choose(16, 6400), Tiling::Wide);
        assert_eq!(Tiling::choose(6400, 6), Tiling::Tall);
        assert_eq!(Tiling::choose(6, 25), Tiling::Small);
    }
}
