//! The host implementation of HiNM's sparse product: the kernel's test oracle and the path of
//! backends without CubeCL kernels.
//!
//! Rows of the packed weight are shared among threads; each row's outputs are accumulated for
//! 16 activation rows at a time in registers from a transposed copy of `x`, so the inner loop
//! is a contiguous multiply-add the compiler vectorises (AVX where the CPU has it, chosen at
//! run time). Every output still sums its products groups ascending from `+0`, one product and
//! one add each (no fused multiply-add): the kernel's order, bit for bit.

use super::Packed;
use rayon::prelude::*;

/// Activation rows accumulated together.
const LANES: usize = 16;

/// `y = x · Wᵀ` through the packed weight: `x: [m, K]` row-major → `y: [m, out]`, output
/// columns in the view's order (the output permutation applied on the store).
///
/// # Panics
/// If `x` does not have `m · K` values.
pub fn spmm(x: &[f32], m: usize, w: &Packed) -> Vec<f32> {
    assert_eq!(x.len(), m * w.k, "spmm: x is not [{m}, {}]", w.k);
    let (out, half) = (w.out, w.nnz / 2);
    let padded = m.div_ceil(LANES) * LANES;
    // xt[c, i] = x[i, c], rows padded to a multiple of LANES
    let mut xt = vec![0f32; w.k * padded];
    xt.par_chunks_mut(padded).enumerate().for_each(|(c, row)| {
        for (i, v) in row.iter_mut().take(m).enumerate() {
            *v = x[i * w.k + c];
        }
    });
    // yt[r, i]: packed row r's outputs
    let mut yt = vec![0f32; out * padded];
    yt.par_chunks_mut(padded).enumerate().for_each(|(r, dst)| {
        let columns: Vec<usize> = (0..half).map(|j| w.column(r, j)).collect();
        let values = &w.values[r * half..(r + 1) * half];
        row_product(&xt, padded, &columns, values, dst);
    });
    let mut y = vec![0f32; m * out];
    y.par_chunks_mut(out).enumerate().for_each(|(i, row)| {
        for r in 0..out {
            row[w.out_perm[r] as usize] = yt[r * padded + i];
        }
    });
    y
}

/// One packed row's outputs for every activation row: `dst[i] = Σ_j values[j] · xt[columns[j], i]`.
fn row_product(xt: &[f32], padded: usize, columns: &[usize], values: &[f32], dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU has AVX (checked just above).
        unsafe { row_product_avx(xt, padded, columns, values, dst) };
        return;
    }
    row_product_plain(xt, padded, columns, values, dst)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn row_product_avx(xt: &[f32], padded: usize, columns: &[usize], values: &[f32], dst: &mut [f32]) {
    row_product_plain(xt, padded, columns, values, dst)
}

#[inline(always)]
fn row_product_plain(
    xt: &[f32],
    padded: usize,
    columns: &[usize],
    values: &[f32],
    dst: &mut [f32],
) {
    for (i0, out) in dst.chunks_exact_mut(LANES).enumerate() {
        let mut acc = [0f32; LANES];
        for (&c, &v) in columns.iter().zip(values) {
            let xs: &[f32; LANES] = xt[c * padded + i0 * LANES..][..LANES].try_into().unwrap();
            for l in 0..LANES {
                acc[l] += v * xs[l];
            }
        }
        out.copy_from_slice(&acc);
    }
}

/// The same product one output at a time, in the order of the definition: the oracle of
/// [`spmm`] itself.
pub fn spmm_naive(x: &[f32], m: usize, w: &Packed) -> Vec<f32> {
    let half = w.nnz / 2;
    let mut y = vec![0f32; m * w.out];
    for i in 0..m {
        for r in 0..w.out {
            let mut acc = 0f32;
            for j in 0..half {
                acc += w.values[r * half + j] * x[i * w.k + w.column(r, j)];
            }
            y[i * w.out + w.out_perm[r] as usize] = acc;
        }
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hinm::random_packed as random;

    #[test]
    fn the_fast_product_is_the_definition_bit_for_bit() {
        for (out, k, v, nnz, m) in [(16, 24, 8, 12, 5), (64, 64, 64, 32, 33), (12, 8, 4, 4, 1)] {
            let w = random(out, k, v, nnz, 7);
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i * 37 % 97) as f32 - 48.0) / 17.0)
                .collect();
            assert_eq!(
                spmm(&x, m, &w),
                spmm_naive(&x, m, &w),
                "{out}x{k} V={v} m={m}"
            );
        }
    }

    #[test]
    fn the_product_is_the_dense_masked_product() {
        let w = random(16, 32, 8, 16, 9);
        let dense = w.dense();
        let m = 3;
        let x: Vec<f32> = (0..m * 32).map(|i| (i % 7) as f32 - 3.0).collect();
        let y = spmm(&x, m, &w);
        for i in 0..m {
            for o in 0..16 {
                // another summation order: equal up to rounding
                let want: f32 = (0..32).map(|c| x[i * 32 + c] * dense[o * 32 + c]).sum();
                assert!((y[i * 16 + o] - want).abs() <= 1e-4 * want.abs().max(1.0));
            }
        }
    }
}
