//! The GEMM's AVX-512 panels (16 lanes, two packed panels at once).

use super::{ApproxMultiply, LANES};
use crate::approx::MBM_CORRECTION;
use crate::approx::host::mbm;
use std::arch::x86_64::*;

/// `acc[0..16] = Σ_k a[k] · pair[k][0..16]` in k order (`pair`: two panels packed
/// together, `[k][16]`).
#[target_feature(enable = "avx512f")]
pub(super) fn panel_pair(
    (a_keys, a_scales): (&[u32], &[f32]),
    (b_keys, b_scales): (&[u32], &[f32]),
    acc: &mut [f32],
    mul: &ApproxMultiply,
) {
    macro_rules! run {
        (|$ka:ident, $sa:ident, $kb:ident, $sb:ident| $product:expr) => {{
            let mut s = _mm512_setzero_ps();
            let rows = b_keys
                .chunks_exact(2 * LANES)
                .zip(b_scales.chunks_exact(2 * LANES));
            for ((&ka, &sa), (keys, scales)) in a_keys.iter().zip(a_scales).zip(rows) {
                // SAFETY: each chunk holds 16 entries.
                let ($kb, $sb) = unsafe {
                    (
                        _mm512_loadu_si512(keys.as_ptr().cast()),
                        _mm512_loadu_ps(scales.as_ptr()),
                    )
                };
                let $ka = _mm512_set1_epi32(ka as i32);
                let $sa = _mm512_set1_ps(sa);
                s = _mm512_add_ps(s, $product);
            }
            // SAFETY: acc has 16 entries.
            unsafe { _mm512_storeu_ps(acc[..16].as_mut_ptr(), s) };
        }};
    }
    let c = |v: u32| _mm512_set1_epi32(v as i32);
    match mul {
        ApproxMultiply::Plain => run!(|_ka, sa, _kb, sb| _mm512_mul_ps(sa, sb)),
        ApproxMultiply::Lut(_) => unreachable!("LUT panels use lut_rows"),
        ApproxMultiply::Mitchell => run!(|ka, sa, kb, sb| {
            let bits = _mm512_add_epi32(kb, ka);
            _mm512_mul_ps(_mm512_mul_ps(_mm512_castsi512_ps(bits), sa), sb)
        }),
        ApproxMultiply::Mbm => run!(|ka, sa, kb, sb| {
            // `host::mbm_bits`, operation for operation
            let sum = _mm512_add_epi32(kb, ka);
            let carry = _mm512_cmpge_epu32_mask(sum, c(mbm::CARRY));
            let over = _mm512_cmpge_epu32_mask(sum, c(mbm::OVER));
            let fits = _mm512_cmplt_epu32_mask(sum, c(mbm::FITS));
            let no_carry = _mm512_mask_blend_epi32(
                over,
                _mm512_add_epi32(sum, c(MBM_CORRECTION)),
                _mm512_srli_epi32::<1>(_mm512_add_epi32(sum, c(mbm::RENORM))),
            );
            let with_carry = _mm512_mask_add_epi32(sum, fits, sum, c(mbm::HALF));
            let bits = _mm512_mask_blend_epi32(carry, no_carry, with_carry);
            _mm512_mul_ps(_mm512_mul_ps(_mm512_castsi512_ps(bits), sa), sb)
        }),
    }
}
