//! Functional models of approximate floating-point multipliers, and Ember's IEEE semantics.
//!
//! A model works on the two 23-bit mantissa fields (`ma`, `mb`, the fractions `x = ma / 2^23`
//! of `1.x`) and returns the mantissa product as a carry bit and a 23-bit mantissa: the product
//! of the significands is `(1 + carry) · (1 + mant / 2^23)`. [`apply`] turns such a model into a
//! full `f32 × f32 → f32` multiply with the semantics below, which the LUT simulator
//! ([`crate::Lut::multiply`]) and the GEMM kernels share.
//!
//! # Semantics (every built-in multiplier, the simulator and the kernels)
//! Ember's own, IEEE-like; ApproxTrain differs in several cases (`docs/approx-mul.md` has the
//! table, case by case, for its GPU simulator `AMsimulator` and its `FPmultMBM_fast*` models).
//! - NaN in either operand → NaN.
//! - Subnormal inputs are treated as zero (DAZ), as hardware multipliers without subnormal
//!   support do. (ApproxTrain is not DAZ: it reads a subnormal's mantissa field as if it had a
//!   hidden bit.)
//! - ±Inf × (±0 or subnormal) → NaN; ±Inf × anything else → ±Inf.
//! - ±0 (or subnormal) × finite → a zero whose sign is the XOR of the signs (ApproxTrain
//!   returns +0, and its GPU simulator, through an operator-precedence bug, `±|x|·2^-127·s` for
//!   `0 · x` with `|x| ≥ 2`, `s` the table significand).
//! - Otherwise the product is `±(1 + carry)(1 + mant/2^23) · 2^(ea + eb - 254)`, rounded once to
//!   the nearest f32 (ties to even): results of magnitude ≥ 2^128 become ±Inf (overflow) and
//!   results below 2^-126 round to a subnormal or zero (gradual underflow). ApproxTrain flushes
//!   every result below 2^-126 to +0 instead; Ember's choice makes the scalar model equal to the
//!   kernels' decoded form `(lut[ia | ib] · sa) · sb` (see `cubecl_kernels::approx`).

/// 2^23: the unit of a mantissa field.
pub const ONE: u32 = 1 << 23;
/// Mask of the 23-bit mantissa field.
pub const MANT_MASK: u32 = ONE - 1;

/// A mantissa-product model: `(ma, mb)` 23-bit fields → `(carry, mant)`.
pub type MantissaModel = fn(u32, u32, u32) -> (u32, u32);

/// Mask keeping the top `m` bits of a 23-bit mantissa.
pub fn top_bits(m: u32) -> u32 {
    MANT_MASK & !((1u32 << (23 - m)) - 1)
}

/// Truncating multiplier (ApproxTrain's `ACC`, bfloat16-style at `m = 7`): both mantissas are
/// truncated to `m` bits, multiplied exactly, and the product's mantissa truncated to `m` bits.
pub fn truncated(ma: u32, mb: u32, m: u32) -> (u32, u32) {
    if m == 23 {
        let p = (u64::from(ONE | ma) * u64::from(ONE | mb)) >> 23; // 2^23 · [1, 4)
        let carry = (p >> 24) as u32;
        return (carry, ((p >> carry) as u32) & MANT_MASK);
    }
    let shift = 23 - m;
    let (ia, ib) = (
        u64::from((ma >> shift) | (1 << m)),
        u64::from((mb >> shift) | (1 << m)),
    );
    let p = ia * ib; // scale 2^(2m), value in [1, 4)
    let carry = (p >> (2 * m + 1)) as u32;
    let mant = ((p >> (m + carry)) as u32) & ((1 << m) - 1);
    (carry, mant << shift)
}

/// Mitchell's logarithmic multiplier (Mitchell 1962): `log2(1 + x) ≈ x`, so the significand
/// product is `1 + xa + xb` when `xa + xb < 1` and `2 (xa + xb)` otherwise, on the operands'
/// top `m` mantissa bits.
pub fn mitchell(ma: u32, mb: u32, m: u32) -> (u32, u32) {
    let mask = top_bits(m);
    let s = (ma & mask) + (mb & mask);
    (s >> 23, s & MANT_MASK)
}

/// A mantissa truncated to its top `m` bits with the next bit set (the middle of the dropped
/// interval), as REALM prepares its operands; unchanged at FP32 width.
fn to_middle(mant: u32, m: u32) -> u32 {
    if m == 23 {
        mant
    } else {
        (mant & top_bits(m)) | (1 << (22 - m))
    }
}

/// A mantissa truncated to its top `m` bits with the **lowest kept** bit set, as ApproxTrain's
/// `FPmultMBM_fast{10,12,14,16}` prepare their operands (`| 1 << (23 − m)` after masking);
/// unchanged at FP32 width.
fn with_lowest_kept_bit(mant: u32, m: u32) -> u32 {
    if m == 23 {
        mant
    } else {
        (mant & top_bits(m)) | (1 << (23 - m))
    }
}

/// Error-correction constant of the minimally biased multiplier: `2^-4 + 2^-6` in mantissa units.
pub const MBM_CORRECTION: u32 = (1 << 19) + (1 << 17);

/// The minimally biased multiplier (MBM, Saadat et al., TCAD 2018; ApproxTrain's AFM).
///
/// Mitchell's sum plus a constant error-correction term `c = 2^-4 + 2^-6` (halved when the sum
/// carries, so the correction is the same relative to the result). Below FP32 width, each
/// operand is truncated to `m` bits and its lowest kept bit is set, as ApproxTrain's
/// `FPmultMBM_fast{10,12,14,16}` do, and the result mantissa is truncated to `m` bits. When the
/// corrected mantissa of a carrying sum would reach 2 the correction is dropped.
///
/// The tables this generates at m = 1, 3, 5, 7 (`afm10/12/14/16`, `mbm1/3/5/7`) are ApproxTrain's
/// shipped `MBM_M.bin` byte for byte (SHA-256 checked in the tests). Their `.inl` files differ in
/// the correction constant (absent at m = 1 and 3, masked to the kept bits at m = 5), which after
/// the m-bit truncation of the result changes no entry: the set bit is what decides the table.
/// Ember ≤ 0.1 (before issue 15) set the bit *below* the kept ones (the middle of the dropped
/// interval); every AFM result produced with it differs from ApproxTrain's at 7,887 of 16,384
/// MBM_7 entries. At m = 23 (`afm32`, ApproxTrain's `FPmultMBM_fast32`) nothing is truncated.
pub fn mbm(ma: u32, mb: u32, m: u32) -> (u32, u32) {
    let (ta, tb) = (with_lowest_kept_bit(ma, m), with_lowest_kept_bit(mb, m));
    let s = ta + tb;
    let carry = s >> 23;
    let mut frac = (s & MANT_MASK) + (MBM_CORRECTION >> carry);
    let (carry, mut mant) = if carry == 1 {
        if frac >= ONE {
            frac = s & MANT_MASK;
        }
        (1, frac)
    } else if frac >= ONE {
        // 1 + frac ≥ 2: normalise by one bit, truncating.
        (1, ((ONE + frac) >> 1) & MANT_MASK)
    } else {
        (0, frac)
    };
    if m < 23 {
        mant &= top_bits(m);
    }
    (carry, mant)
}

/// Segments per axis of the REALM model.
pub const REALM_SEGMENTS: u32 = 8;

/// REALM (Saadat et al., "REALM: Reduced-Error Approximate Log-based Integer Multiplier",
/// DATE 2020), applied to the significands as ApproxTrain's `REALM16` applies it.
///
/// Formula implemented: the operands' fractions `xa, xb ∈ [0, 1)` (top `m` bits, with the bit
/// below them set, as in MBM) select a segment `(i, j)` of an `S × S` grid
/// (`S = min(8, 2^m)`, `i = ⌊S·xa⌋`). Mitchell's log-domain sum is corrected by a per-segment
/// error-reduction factor `c_ij`: `t = xa + xb + c_ij`, and the significand product is
/// `1 + t` for `t < 1`, `2t` for `1 ≤ t < 2` (saturating at the largest mantissa beyond).
/// `c_ij` is the value that makes the mean relative error of the segment zero,
/// `mean_{(x,y) ∈ seg} A(x + y + c) / ((1 + x)(1 + y)) = 1`, with `A` the antilog above, found by
/// bisection over a 32 × 32 midpoint grid of the segment (REALM's design criterion; the paper
/// then quantises `c_ij` for hardware, which this model does not). The result mantissa is
/// truncated to `m` bits.
pub fn realm(ma: u32, mb: u32, m: u32) -> (u32, u32) {
    let (ta, tb) = (to_middle(ma, m), to_middle(mb, m));
    let segments = REALM_SEGMENTS.min(1 << m.min(3));
    let (i, j) = ((ta * segments) >> 23, (tb * segments) >> 23);
    let c = realm_factors(segments)[(i * segments + j) as usize];
    let t = (f64::from(ta) + f64::from(tb)) / f64::from(ONE) + c;
    let (carry, frac) = if t < 1.0 {
        (0, t)
    } else {
        (1, (t - 1.0).min(1.0 - f64::EPSILON))
    };
    let mut mant = ((frac * f64::from(ONE)).floor() as u32).min(MANT_MASK);
    if m < 23 {
        mant &= top_bits(m);
    }
    (carry, mant)
}

fn realm_antilog(t: f64) -> f64 {
    if t < 1.0 { 1.0 + t } else { 2.0 * t }
}

/// REALM's per-segment error-reduction factors for an `s × s` grid (row-major).
pub fn realm_factors(s: u32) -> &'static [f64] {
    use std::sync::OnceLock;
    static CACHE: [OnceLock<Vec<f64>>; 4] = [const { OnceLock::new() }; 4];
    let slot = s.trailing_zeros() as usize; // s ∈ {1, 2, 4, 8}
    CACHE[slot].get_or_init(|| {
        const GRID: u32 = 32;
        let width = 1.0 / f64::from(s);
        let mut factors = Vec::with_capacity((s * s) as usize);
        for i in 0..s {
            for j in 0..s {
                let mean_ratio = |c: f64| {
                    let mut sum = 0.0;
                    for p in 0..GRID {
                        for q in 0..GRID {
                            let x = (f64::from(i) + (f64::from(p) + 0.5) / f64::from(GRID)) * width;
                            let y = (f64::from(j) + (f64::from(q) + 0.5) / f64::from(GRID)) * width;
                            sum += realm_antilog(x + y + c) / ((1.0 + x) * (1.0 + y));
                        }
                    }
                    sum / f64::from(GRID * GRID)
                };
                // mean_ratio is increasing in c; Mitchell (c = 0) never overestimates.
                let (mut lo, mut hi) = (0.0, 0.5);
                for _ in 0..60 {
                    let mid = 0.5 * (lo + hi);
                    if mean_ratio(mid) < 1.0 {
                        lo = mid
                    } else {
                        hi = mid
                    }
                }
                factors.push(0.5 * (lo + hi));
            }
        }
        factors
    })
}

/// Multiplies `a · b` with the mantissa product `(carry, mant)` already known, under Ember's
/// semantics (module docs). `carry_mant` is only called for two normal operands.
pub fn assemble(a: f32, b: f32, carry_mant: impl FnOnce(u32, u32) -> (u32, u32)) -> f32 {
    if a.is_nan() || b.is_nan() {
        return f32::NAN;
    }
    let (ab, bb) = (a.to_bits(), b.to_bits());
    let sign = (ab ^ bb) & 0x8000_0000;
    let (ea, eb) = ((ab >> 23) & 0xff, (bb >> 23) & 0xff);
    if ea == 255 || eb == 255 {
        return if ea == 0 || eb == 0 {
            f32::NAN
        } else {
            f32::from_bits(sign | 0x7f80_0000)
        };
    }
    if ea == 0 || eb == 0 {
        return f32::from_bits(sign);
    }
    let (carry, mant) = carry_mant(ab & MANT_MASK, bb & MANT_MASK);
    let significand = f64::from(f32::from_bits(((127 + carry) << 23) | mant));
    let exponent = ea as i32 + eb as i32 - 254;
    let magnitude = significand * 2f64.powi(exponent); // exact in f64
    let value = magnitude as f32; // one rounding: RNE, gradual underflow, overflow to Inf
    f32::from_bits(value.to_bits() | sign)
}

/// The full multiply of a mantissa model at width `m` under Ember's semantics.
pub fn apply(model: MantissaModel, m: u32, a: f32, b: f32) -> f32 {
    assemble(a, b, |ma, mb| model(ma, mb, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(carry: u32, mant: u32) -> f64 {
        f64::from(1 + carry) * (1.0 + f64::from(mant) / f64::from(ONE))
    }

    #[test]
    fn truncated_at_full_width_is_ieee_truncation_of_the_exact_product() {
        for (a, b) in [(1.5f32, 1.5f32), (1.999, 1.999), (1.1, 1.3), (1.0, 1.0)] {
            let (c, mnt) = truncated(a.to_bits() & MANT_MASK, b.to_bits() & MANT_MASK, 23);
            let exact = f64::from(a) * f64::from(b);
            let got = sig(c, mnt);
            assert!(
                got <= exact && exact - got < 2f64.powi(-22),
                "{a}·{b}: {got} vs {exact}"
            );
        }
    }

    #[test]
    fn bf16_truncation_matches_masking_both_operands_and_the_product() {
        let mask = |x: f32| f32::from_bits(x.to_bits() & 0xffff_0000);
        for (a, b) in [(1.37f32, 1.91f32), (1.5, 1.5), (1.99, 1.99), (1.01, 1.7)] {
            let want = mask(mask(a) * mask(b));
            assert_eq!(
                apply(truncated, 7, a, b).to_bits(),
                want.to_bits(),
                "{a}·{b}"
            );
        }
    }

    #[test]
    fn mitchell_formula() {
        // 1.25 · 1.5 → 1 + 0.25 + 0.5 = 1.75; 1.75 · 1.5 → 2 (0.75 + 0.5) = 2.5
        assert_eq!(apply(mitchell, 23, 1.25, 1.5), 1.75);
        assert_eq!(apply(mitchell, 23, 1.75, 1.5), 2.5);
        assert_eq!(apply(mitchell, 7, -1.75, 3.0), -5.0);
    }

    #[test]
    fn mbm_adds_the_correction_term() {
        // 1.25 · 1.5: Mitchell 1.75, plus 2^-4 + 2^-6 = 0.078125
        assert_eq!(apply(mbm, 23, 1.25, 1.5), 1.828125);
        // carrying: 2 (0.75 + 0.5 + 0.078125 / 2)
        assert_eq!(apply(mbm, 23, 1.75, 1.5), 2.578125);
        // MBM errs less than Mitchell on average
        let (mut e_mit, mut e_mbm) = (0.0, 0.0);
        for i in 0..128u32 {
            for j in 0..128u32 {
                let a = 1.0 + i as f32 / 128.0 + 1.0 / 256.0;
                let b = 1.0 + j as f32 / 128.0 + 1.0 / 256.0;
                let exact = f64::from(a) * f64::from(b);
                e_mit += (f64::from(apply(mitchell, 23, a, b)) - exact) / exact;
                e_mbm += (f64::from(apply(mbm, 23, a, b)) - exact) / exact;
            }
        }
        assert!(
            e_mbm.abs() < e_mit.abs() / 4.0,
            "bias mbm {e_mbm} vs mitchell {e_mit}"
        );
    }

    #[test]
    fn realm_is_nearly_unbiased_and_more_accurate_than_mitchell() {
        let (mut bias, mut err_realm, mut err_mit) = (0.0, 0.0, 0.0);
        let n = 256u32;
        for i in 0..n {
            for j in 0..n {
                let a = 1.0 + (i as f32 + 0.5) / n as f32;
                let b = 1.0 + (j as f32 + 0.5) / n as f32;
                let exact = f64::from(a) * f64::from(b);
                let r = (f64::from(apply(realm, 23, a, b)) - exact) / exact;
                bias += r;
                err_realm += r.abs();
                err_mit += ((f64::from(apply(mitchell, 23, a, b)) - exact) / exact).abs();
            }
        }
        let count = f64::from(n * n);
        assert!(
            (bias / count).abs() < 2e-3,
            "mean relative error {}",
            bias / count
        );
        assert!(err_realm < err_mit / 2.0, "{err_realm} vs {err_mit}");
    }

    #[test]
    fn ieee_edge_cases() {
        let m = |a: f32, b: f32| apply(mbm, 7, a, b);
        assert!(m(f32::NAN, 1.0).is_nan());
        assert!(m(f32::INFINITY, 0.0).is_nan());
        assert!(m(f32::INFINITY, 1e-40).is_nan(), "subnormal is zero");
        assert_eq!(m(f32::INFINITY, -2.0), f32::NEG_INFINITY);
        assert_eq!(m(0.0, -3.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(m(-0.0, -3.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(m(1e-40, 3.0), 0.0, "subnormal input is zero");
        assert_eq!(
            m(0.0, 2.0e30).to_bits(),
            0.0f32.to_bits(),
            "no 2^-125 for 0·x"
        );
        assert_eq!(m(1e30, 1e30), f32::INFINITY, "overflow");
        assert_eq!(m(-1e30, 1e30), f32::NEG_INFINITY);
        // gradual underflow: 2^-70 · 2^-70 = 2^-140, a subnormal
        let t = |a: f32, b: f32| apply(truncated, 7, a, b);
        assert_eq!(t(2f32.powi(-70), 2f32.powi(-70)), 2f32.powi(-140));
        assert_eq!(
            t(-2f32.powi(-70), 1.5 * 2f32.powi(-70)),
            -1.5 * 2f32.powi(-140)
        );
        assert_eq!(t(2f32.powi(-100), 2f32.powi(-100)), 0.0);
    }
}
