//! The GEMM's AVX2 panels (8 lanes).

use super::{ApproxMultiply, LANES};
use crate::approx::MBM_CORRECTION;
use crate::approx::host::mbm;
use std::arch::x86_64::*;

/// `acc[0..8] = Σ_k a[k] · panel[k][0..8]` in k order.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn panel(
    a_keys: &[u32],
    a_scales: &[f32],
    b_keys: &[u32],
    b_scales: &[f32],
    acc: &mut [f32],
    mul: &ApproxMultiply,
) {
    // the panels' keys carry `key_bias`: Mitchell's and MBM's key sums are then already the
    // bits of a significand in [1, 2) (`host::mbm_bits`)
    macro_rules! run {
        (|$ka:ident, $sa:ident, $kb:ident, $sb:ident| $product:expr) => {{
            let mut s = _mm256_setzero_ps();
            for (kk, (&ka, &sa)) in a_keys.iter().zip(a_scales).enumerate() {
                // SAFETY: kk < k and the panels hold k·8 entries.
                let ($kb, $sb) = unsafe {
                    (
                        _mm256_loadu_si256(b_keys.as_ptr().add(kk * LANES) as *const __m256i),
                        _mm256_loadu_ps(b_scales.as_ptr().add(kk * LANES)),
                    )
                };
                let $ka = _mm256_set1_epi32(ka as i32);
                let $sa = _mm256_set1_ps(sa);
                s = _mm256_add_ps(s, $product);
            }
            // SAFETY: acc has 8 entries.
            unsafe { _mm256_storeu_ps(acc.as_mut_ptr(), s) };
        }};
    }
    // every biased key sum is below 2^31 (`BIAS + 2^24`): signed comparisons order them
    let c = |v: u32| _mm256_set1_epi32(v as i32);
    match mul {
        ApproxMultiply::Plain => run!(|_ka, sa, _kb, sb| _mm256_mul_ps(sa, sb)),
        // Table gathers were slower than the portable 4-row loop (`lut_rows`) on the CPU
        // measured; LUT multiplies never reach this function.
        ApproxMultiply::Lut(_) => unreachable!("LUT panels use lut_rows"),
        ApproxMultiply::Mitchell => run!(|ka, sa, kb, sb| {
            // (127 + carry) << 23 | mant == (ka + kb) + (127 << 23)
            let bits = _mm256_add_epi32(kb, ka);
            _mm256_mul_ps(_mm256_mul_ps(_mm256_castsi256_ps(bits), sa), sb)
        }),
        ApproxMultiply::Mbm => run!(|ka, sa, kb, sb| {
            // `host::mbm_bits`, operation for operation
            let sum = _mm256_add_epi32(kb, ka);
            let carry = _mm256_cmpgt_epi32(sum, c(mbm::CARRY - 1));
            let over = _mm256_cmpgt_epi32(sum, c(mbm::OVER - 1));
            let fits = _mm256_cmpgt_epi32(c(mbm::FITS), sum);
            let no_carry = _mm256_blendv_epi8(
                _mm256_add_epi32(sum, c(MBM_CORRECTION)),
                _mm256_srli_epi32::<1>(_mm256_add_epi32(sum, c(mbm::RENORM))),
                over,
            );
            let with_carry = _mm256_add_epi32(sum, _mm256_and_si256(fits, c(mbm::HALF)));
            let bits = _mm256_blendv_epi8(no_carry, with_carry, carry);
            _mm256_mul_ps(_mm256_mul_ps(_mm256_castsi256_ps(bits), sa), sb)
        }),
    }
}
