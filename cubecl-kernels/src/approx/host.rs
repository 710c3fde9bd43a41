//! Host (CPU) reference of the comptime multiply ([`super::multiply`]): decoding an operand and
//! one product, with the kernels' arithmetic. The GEMM's reference, built on it, is
//! [`super::gemm::gemm`] (also re-exported here).

use super::{ApproxMultiply, MANT_MASK, MBM_CORRECTION};

pub use super::gemm::{gemm, gemm_nt};

/// A decoded operand: table key and power-of-two scale.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decoded {
    /// Mantissa bits (pre-shifted for the LUT index when `lhs`).
    pub key: u32,
    /// `±2^(e-127)`, `±0` (zero/subnormal), `±Inf` or NaN; the value itself for `Plain`.
    pub scale: f32,
}

/// Decodes `x` as a left (`lhs = true`) or right operand of `mul`.
pub fn decode(x: f32, mul: &ApproxMultiply, lhs: bool) -> Decoded {
    let bits = x.to_bits();
    let nan = (bits & 0x7fff_ffff) > 0x7f80_0000;
    let scale = f32::from_bits(if nan { bits } else { bits & 0xff80_0000 });
    let mant = bits & MANT_MASK;
    match mul {
        ApproxMultiply::Plain => Decoded { key: 0, scale: x },
        ApproxMultiply::Mitchell | ApproxMultiply::Mbm => Decoded { key: mant, scale },
        ApproxMultiply::Lut(t) => {
            let m = t.bits();
            let key = mant >> (23 - m);
            Decoded {
                key: if lhs { key << m } else { key },
                scale,
            }
        }
    }
}

/// Mitchell's significand product of two 23-bit mantissas, as f32 in `[1, 4)`.
pub fn mitchell_significand(ka: u32, kb: u32) -> f32 {
    let s = ka + kb;
    f32::from_bits(((127 + (s >> 23)) << 23) | (s & MANT_MASK))
}

/// MBM's significand product of two 23-bit mantissas, as f32 in `[1, 4)`.
pub fn mbm_significand(ka: u32, kb: u32) -> f32 {
    let s = ka + kb;
    let carry = s >> 23 == 1;
    let frac = (s & MANT_MASK) + (MBM_CORRECTION >> (s >> 23));
    let over = frac > MANT_MASK;
    let mant = if over {
        if carry {
            s & MANT_MASK
        } else {
            (((1 << 23) + frac) >> 1) & MANT_MASK
        }
    } else {
        frac
    };
    let c = u32::from(carry || over);
    f32::from_bits(((127 + c) << 23) | mant)
}

/// The exponent bias of a significand in `[1, 2)`: `1.0f32.to_bits()`. The vector loops add it
/// to the lhs key once per broadcast, so that a key sum is already a float's bits.
pub(crate) const BIAS: u32 = 0x3f80_0000;

/// The constants of [`mbm_bits`], in the biased domain `sb = BIAS + ka + kb`.
pub(crate) mod mbm {
    use super::{BIAS, MBM_CORRECTION as C};
    const TOP: u32 = 1 << 23;
    /// From here on the mantissa sum carried (`ka + kb ≥ 2^23`).
    pub(crate) const CARRY: u32 = BIAS + TOP;
    /// From here on, without a carry, the correction overflows the mantissa.
    pub(crate) const OVER: u32 = BIAS + TOP - C;
    /// Below this, with a carry, the half correction still fits the mantissa.
    pub(crate) const FITS: u32 = BIAS + 2 * TOP - C / 2;
    /// The correction with a carry.
    pub(crate) const HALF: u32 = C / 2;
    /// Added before the halving of an overflowed sum: `(sb + RENORM) >> 1 = BIAS + (s + C + 2^23) / 2`.
    pub(crate) const RENORM: u32 = C + TOP + BIAS;
}

/// [`mbm_significand`]`(ka, kb).to_bits()` from the biased sum `sb = BIAS + ka + kb` alone, in
/// the form the vector loops compute (three comparisons against constants, three adds, a shift
/// and two selects, none of them on the carry's value):
/// - no carry (`ka + kb < 2^23`): `sb + C`, or `(sb + C + 2^23 + BIAS) / 2` where that passes
///   `2^23` (the significand renormalised: `BIAS + (s + C + 2^23) / 2`, `2·BIAS` being even);
/// - a carry: `sb + C/2` where that stays below `2^24` in the mantissa sum, else `sb`.
///
/// Written here for its test, against [`mbm_significand`] for every mantissa sum.
#[cfg(test)]
pub(crate) fn mbm_bits(sb: u32) -> u32 {
    let no_carry = if sb >= mbm::OVER {
        (sb + mbm::RENORM) >> 1
    } else {
        sb + MBM_CORRECTION
    };
    let carry = if sb < mbm::FITS { sb + mbm::HALF } else { sb };
    if sb >= mbm::CARRY { carry } else { no_carry }
}

/// One approximate product of decoded operands.
#[inline]
pub fn product(a: Decoded, b: Decoded, mul: &ApproxMultiply, table: &[f32]) -> f32 {
    match mul {
        ApproxMultiply::Plain => a.scale * b.scale,
        ApproxMultiply::Mitchell => (mitchell_significand(a.key, b.key) * a.scale) * b.scale,
        ApproxMultiply::Mbm => (mbm_significand(a.key, b.key) * a.scale) * b.scale,
        ApproxMultiply::Lut(_) => (table[(a.key | b.key) as usize] * a.scale) * b.scale,
    }
}

/// `a · b` under `mul` for two scalars.
pub fn multiply(a: f32, b: f32, mul: &ApproxMultiply) -> f32 {
    product(
        decode(a, mul, true),
        decode(b, mul, false),
        mul,
        mul.table(),
    )
}

/// `n` values of both signs spread over `binades` binades around 1 (`u · 2^e`, `u` in `[-1, 1)`,
/// `e` in `-binades/2 .. binades/2`), from a linear congruential generator seeded by `seed`:
/// operands for the LUT GEMM tests (re-exported by `testing`).
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn binades(n: usize, seed: u64, binades: u32) -> Vec<f32> {
    let step = |s: u64| {
        s.wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407)
    };
    let mut s = step(seed);
    (0..n)
        .map(|_| {
            s = step(s);
            let u = (s >> 40) as f32 / (1u64 << 24) as f32;
            let e = ((s >> 20) % u64::from(binades)) as i32 - (binades / 2) as i32;
            (u * 2.0 - 1.0) * 2f32.powi(e)
        })
        .collect()
}

/// Mitchell's table at `m` bits, built from the FP32-width model on truncated mantissas
/// (re-exported by `testing`).
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn mitchell_table(m: u32) -> ApproxMultiply {
    let n = 1u32 << m;
    let sig = (0..n * n)
        .map(|i| mitchell_significand((i >> m) << (23 - m), (i & (n - 1)) << (23 - m)))
        .collect();
    ApproxMultiply::Lut(super::LutTable::new(m, sig))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approx::LutTable;

    /// The vector loops' form of MBM gives the definition's bits for every mantissa sum
    /// `0 ..= 2·(2^23 − 1)` (the significand depends on the sum alone).
    #[test]
    fn mbm_bits_are_the_significand_for_every_mantissa_sum() {
        for s in 0..=2 * MANT_MASK {
            let (ka, kb) = (s.min(MANT_MASK), s - s.min(MANT_MASK));
            assert_eq!(
                mbm_bits(BIAS + s),
                mbm_significand(ka, kb).to_bits(),
                "mantissa sum {s:#x}"
            );
        }
    }

    #[test]
    fn decoded_lut_product_applies_scales_and_signs() {
        // m = 1 Mitchell table: [1, 1.5, 1.5, 2]
        let mul = ApproxMultiply::Lut(LutTable::new(1, vec![1.0, 1.5, 1.5, 2.0]));
        assert_eq!(multiply(3.0, -6.0, &mul), -(2.0 * 4.0 * 2.0)); // 1.5·2 × 1.5·4 → 2·8
        assert_eq!(multiply(0.0, -6.0, &mul).to_bits(), (-0.0f32).to_bits());
        assert!(multiply(f32::INFINITY, 0.0, &mul).is_nan());
        assert!(multiply(f32::NAN, 1.0, &mul).is_nan());
        assert_eq!(multiply(f32::NEG_INFINITY, 2.0, &mul), f32::NEG_INFINITY);
        assert_eq!(multiply(1e-40, 1.0, &mul), 0.0, "subnormal is zero");
    }

    #[test]
    fn fp32_width_models() {
        assert_eq!(multiply(1.25, 1.5, &ApproxMultiply::Mitchell), 1.75);
        assert_eq!(multiply(1.75, 1.5, &ApproxMultiply::Mitchell), 2.5);
        assert_eq!(multiply(1.25, 1.5, &ApproxMultiply::Mbm), 1.828125);
        assert_eq!(multiply(1.75, 1.5, &ApproxMultiply::Mbm), 2.578125);
    }
}
