//! The band check of the expansion: the operands' exponents against the table's range, inside
//! which the expansion's order of multiplication gives the per-product path's bits (see the
//! parent module's docs).

use super::MAX_BITS;
use crate::approx::LutTable;
use rayon::prelude::*;

/// How the expansion adds a row's products into its sums.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(in crate::approx::gemm) enum Sum {
    /// A multiply, then an add: the product rounded, then the sum (every operand in the band).
    Separate,
    /// A fused multiply-add. Every product `LUT · sa · sb` is also a normal number, so it is
    /// exact (a table entry times two powers of two), and the add's rounding is the only one,
    /// as with the separate multiply and add. A product below the normal range would be
    /// rounded by the multiply and not by the fused one.
    Fused,
}

/// Whether a `[batch, rows, k] · [batch, k, n]` product under `table` takes the expansion, and
/// how it adds its products ([`Sum`]): at least `min_rows` rows (for the expansion to pay,
/// [`super::min_rows`]), a narrow enough table, and every operand inside the band where the two
/// orders of multiplication give the same bits (see the parent module's docs); `None` where it
/// does not take it.
pub(in crate::approx::gemm) fn expands(
    lhs: &[f32],
    rhs: &[f32],
    [rows, min_rows]: [usize; 2],
    n: usize,
    table: &LutTable,
) -> Option<Sum> {
    let bits = table.bits();
    if bits > MAX_BITS || rows < min_rows || n == 0 {
        return None;
    }
    // the operands' smallest and largest biased exponent among normal values (255: an
    // infinity or a NaN, never in the band; zero and subnormals have scale ±0, always safe)
    let (lhs_lo, lhs_hi) = exponent_range(lhs);
    let (rhs_lo, rhs_hi) = exponent_range(rhs);
    let (e_lo, e_hi) = (lhs_lo.min(rhs_lo), lhs_hi.max(rhs_hi));
    if e_hi == 255 {
        return None;
    }
    let (lo, hi) = table.expansion_layouts().range;
    if !lo.is_finite() || e_lo == 255 {
        // an all-zero table, or no normal operand: every product is ±0 in both orders, and
        // exact
        return Some(Sum::Fused);
    }
    // a scale s = ±2^(e - 127) is safe when lo·|s| is normal and hi·|s| is finite; the
    // smallest and the largest scale bound every other
    let scale = |e: u32| 2f64.powi(e as i32 - 127);
    let normal = |lo: f64, hi: f64| lo >= f64::from(f32::MIN_POSITIVE) && hi <= f64::from(f32::MAX);
    if !normal(lo * scale(e_lo), hi * scale(e_hi)) {
        return None;
    }
    // every product normal: bounded by the smallest and the largest scale of each operand (a
    // side without a normal value makes every product ±0, exact)
    let fused = lhs_lo == 255
        || rhs_lo == 255
        || normal(
            lo * scale(lhs_lo) * scale(rhs_lo),
            hi * scale(lhs_hi) * scale(rhs_hi),
        );
    Some(if fused { Sum::Fused } else { Sum::Separate })
}

/// The smallest biased exponent among `x`'s normal values (255 when there are none) and the
/// largest of all (255: an infinity or a NaN; 0: zeros and subnormals only).
pub(in crate::approx::gemm) fn exponent_range(x: &[f32]) -> (u32, u32) {
    x.par_chunks(1 << 16)
        .map(|chunk| {
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2, checked just above.
                return unsafe { chunk_range_avx2(chunk) };
            }
            chunk_range(chunk)
        })
        .reduce(|| (255, 0), |a, b| (a.0.min(b.0), a.1.max(b.1)))
}

/// [`exponent_range`] of one chunk, as a loop the compiler vectorises: the smallest of
/// `e - 1` (wrapping, so that the zero exponent of zeros and subnormals never wins) and the
/// largest `e`.
#[inline(always)]
fn chunk_range(chunk: &[f32]) -> (u32, u32) {
    let (mut lo1, mut hi) = (u32::MAX, 0u32);
    for v in chunk {
        let e = (v.to_bits() >> 23) & 0xff;
        lo1 = lo1.min(e.wrapping_sub(1));
        hi = hi.max(e);
    }
    (if lo1 == u32::MAX { 255 } else { lo1 + 1 }, hi)
}

/// [`chunk_range`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn chunk_range_avx2(chunk: &[f32]) -> (u32, u32) {
    chunk_range(chunk)
}
