//! burn-ndarray's tanh of many `f32` values at once, bit for bit its scalar calls.
//!
//! burn-ndarray's tanh widens each value to `f64`, calls the host's `f64` tanh and rounds the
//! result to `f32` ([`super::activation::tanh_value`]). That call (glibc's goes through
//! `expm1`) was about a seventh of DeiT-Ti's training step on ndarray. [`tanh_in_place`]
//! computes the same `f64` function by vectors instead ([`tanh_wide`]: an odd Taylor
//! polynomial below [`SMALL`], `1 − 2 / (e^{2|x|} + 1)` above, every lane both ways and one
//! picked) and rounds it to `f32`.
//!
//! # Why the bits are the scalar call's
//!
//! An `f64` value rounds to the `f32` on its side of the nearest `f32` rounding midpoint, and
//! where it lies relative to that midpoint shows in its 29 low significand bits (`2^28` is the
//! midpoint). The vector value is within a few `f64` units in the last place of the true tanh
//! (measured over every `f32` input: at most [`MEASURED_ULPS`]), and any libm's `f64` tanh is
//! within one or two of it, so wherever the vector value lies at least [`MARGIN`] units from a
//! midpoint both round to the same `f32`. Values nearer a midpoint (about 4 in a million),
//! non-finite inputs and inputs below `2^-120` (results near `f32`'s subnormal range, where its
//! midpoints lie elsewhere) take the scalar call. Test
//! `tanh_by_vectors_is_the_scalar_call_bit_for_bit` compares both over a sweep of every `f32`
//! exponent and the special values.

use super::activation::tanh_value;

/// Values computed by vectors at a time: the lanes' `f64` values and flags stay in L1.
const CHUNK: usize = 64;

/// Below this magnitude the Taylor polynomial, above it the exponential form.
pub const SMALL: f64 = 0.125;

/// `f64` units in the last place, counted in the significand's low bits, within which a
/// vector value near an `f32` rounding midpoint takes the scalar call instead.
pub const MARGIN: u64 = 1 << 10;

/// The largest distance of [`tanh_wide`] from the host's (glibc's) `f64` tanh over every finite
/// `f32` input, in `f64` units in the last place (test `every_f32_by_vectors_is_the_scalar_call_bit_for_bit`):
/// far inside [`MARGIN`].
pub const MEASURED_ULPS: u64 = 14;

/// Inputs below this magnitude take the scalar call.
const TINY: f64 = 7.52316384526264e-37; // 2^-120

/// Each value `v` of `values` replaced by `tanh_value(v)`, by vectors where the CPU has them.
pub fn tanh_in_place(values: &mut [f32]) {
    for chunk in values.chunks_mut(CHUNK) {
        let mut scalar = [false; CHUNK];
        vectors(chunk, &mut scalar);
        for (v, _) in chunk.iter_mut().zip(scalar).filter(|(_, s)| *s) {
            *v = tanh_value(*v);
        }
    }
}

/// The vector pass over one chunk: each value's rounded [`tanh_wide`] where it is exact,
/// `scalar` set where the scalar call must give it (the value left as it was).
fn vectors(chunk: &mut [f32], scalar: &mut [bool; CHUNK]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked just above).
            unsafe { vectors_avx512(chunk, scalar) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { vectors_avx2(chunk, scalar) };
            return;
        }
    }
    vectors_plain(chunk, scalar)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn vectors_avx512(chunk: &mut [f32], scalar: &mut [bool; CHUNK]) {
    vectors_plain(chunk, scalar)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn vectors_avx2(chunk: &mut [f32], scalar: &mut [bool; CHUNK]) {
    vectors_plain(chunk, scalar)
}

#[inline(always)]
fn vectors_plain(chunk: &mut [f32], scalar: &mut [bool; CHUNK]) {
    let mut wide = [0f64; CHUNK];
    for (w, &v) in wide.iter_mut().zip(chunk.iter()) {
        *w = tanh_wide(v as f64);
    }
    for ((v, s), &w) in chunk.iter_mut().zip(scalar.iter_mut()).zip(&wide) {
        let a = (*v as f64).abs();
        *s = !(TINY..f64::INFINITY).contains(&a) || near_midpoint(w);
        *v = match *s {
            true => *v,
            false => w as f32,
        };
    }
}

/// Whether `w`'s 29 low significand bits lie within [`MARGIN`] of `2^28`, the `f32` rounding
/// midpoint (one unsigned comparison: the bits shifted so that the band starts at zero).
#[inline(always)]
pub fn near_midpoint(w: f64) -> bool {
    const LOW: u64 = (1 << 29) - 1;
    (w.to_bits().wrapping_add(MARGIN.wrapping_sub(1 << 28)) & LOW) < 2 * MARGIN
}

/// tanh of `x` in `f64` without branches (every lane computes both forms): an odd Taylor
/// polynomial to `x^15` below [`SMALL`] (the next term is under `2^-58` of the value),
/// `1 − 2 / (e^{2|x|} + 1)` above it with `|x|` capped at 20 (past it tanh rounds to 1), the
/// sign of `x` copied onto either. Within [`MEASURED_ULPS`] units in the last place of the
/// host's tanh for finite inputs; meaningless for non-finite ones.
#[inline(always)]
pub fn tanh_wide(x: f64) -> f64 {
    // tanh's Taylor coefficients of x³ … x^15: −1/3, 2/15, −17/315, 62/2835, −1382/155925,
    // 21844/6081075, −929569/638512875
    const T: [f64; 7] = [
        -1.0 / 3.0,
        2.0 / 15.0,
        -17.0 / 315.0,
        62.0 / 2835.0,
        -1382.0 / 155925.0,
        21844.0 / 6081075.0,
        -929569.0 / 638512875.0,
    ];
    let a = x.abs();
    let z = a * a;
    let series = T[3] + z * (T[4] + z * (T[5] + z * T[6]));
    let small = a + a * (z * (T[0] + z * (T[1] + z * (T[2] + z * series))));
    let e = exp_wide(2.0 * a.min(20.0));
    let large = 1.0 - 2.0 / (e + 1.0);
    let t = if a < SMALL { small } else { large };
    t.copysign(x)
}

/// `e^y` for `0 ≤ y ≤ 40` without branches: `y = k·ln 2 + r` (`ln 2` in two parts, so `k·ln 2`
/// loses nothing), `e^r` by its Taylor polynomial to `r^13` (`|r| ≤ ln 2 / 2`), times `2^k`
/// built from its exponent bits.
#[inline(always)]
fn exp_wide(y: f64) -> f64 {
    // 1.5 · 2^52: adding it rounds to an integer, which then sits in the low significand bits
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;
    let shifted = y * std::f64::consts::LOG2_E + SHIFT;
    let k = shifted - SHIFT;
    let r = (y - k * LN2_HI) - k * LN2_LO;
    let mut p = 1.0 / 6_227_020_800.0; // 1/13!
    for d in (1..=12).rev() {
        p = p * r + INVERSE_FACTORIALS[d];
    }
    p = p * r + 1.0;
    let scale = f64::from_bits(shifted.to_bits().wrapping_add(1023) << 52);
    p * scale
}

/// `1/n!` for `n = 0 ..= 12`.
const INVERSE_FACTORIALS: [f64; 13] = {
    let mut table = [1.0; 13];
    let mut n = 1;
    while n < 13 {
        table[n] = table[n - 1] / n as f64;
        n += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    use super::{MARGIN, MEASURED_ULPS, near_midpoint, tanh_in_place, tanh_wide};
    use crate::elementwise::activation::tanh_value;

    /// `f32` values over every exponent: a stride through all bit patterns, both signs.
    fn sweep(stride: u32) -> Vec<f32> {
        (0..u32::MAX / stride)
            .map(|i| f32::from_bits(i * stride))
            .collect()
    }

    #[test]
    fn tanh_by_vectors_is_the_scalar_call_bit_for_bit() {
        let mut values = sweep(4_099);
        let specials = [
            0.0,
            -0.0,
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MIN_POSITIVE,
            -1e-40,
            f32::MAX,
            f32::MIN,
            0.125,
            0.124_999_99,
            0.125_000_01,
            -0.125,
            9.010_913,
            20.0,
            -20.000_002,
            1e-30,
        ];
        values.extend(specials);
        values.extend((0..20_000).map(|i| (i as f32 - 10_000.0) / 1_000.0));
        let want: Vec<u32> = values.iter().map(|&v| tanh_value(v).to_bits()).collect();
        // a length past the chunk with a short last chunk
        tanh_in_place(&mut values);
        let got: Vec<u32> = values.iter().map(|v| v.to_bits()).collect();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g,
                w,
                "value {i}: {} against {}",
                f32::from_bits(*g),
                f32::from_bits(*w)
            );
        }
    }

    #[test]
    fn the_wide_tanh_is_within_its_measured_distance_of_the_hosts() {
        let mut worst = 0;
        for v in sweep(65_537).into_iter().filter(|v| v.is_finite()) {
            let (fast, host) = (tanh_wide(v as f64), (v as f64).tanh());
            assert_eq!(fast.is_sign_negative(), host.is_sign_negative(), "{v}");
            worst = worst.max(fast.to_bits().abs_diff(host.to_bits()));
        }
        assert!(worst <= MEASURED_ULPS, "{worst} units from the host's tanh");
    }

    #[test]
    fn values_near_an_f32_rounding_midpoint_take_the_scalar_call() {
        // 1 + 2^-24: the midpoint between 1 and the next f32
        let midpoint = f64::from_bits(1f64.to_bits() + (1 << 28));
        let at = |units: i64| f64::from_bits(midpoint.to_bits().wrapping_add_signed(units));
        assert!(near_midpoint(midpoint));
        assert!(near_midpoint(at(MARGIN as i64 - 1)) && near_midpoint(at(-(MARGIN as i64))));
        assert!(!near_midpoint(at(MARGIN as i64)) && !near_midpoint(at(-(MARGIN as i64) - 1)));
        assert!(!near_midpoint(1.0) && !near_midpoint(f64::from_bits(1f64.to_bits() - 1)));
    }

    /// Every `f32` bit pattern (about a minute on two cores in release):
    /// `cargo test --release -p cubecl-kernels --lib -- --ignored every_f32`.
    #[test]
    #[ignore = "4.3 billion values: run on purpose"]
    fn every_f32_by_vectors_is_the_scalar_call_bit_for_bit() {
        use rayon::prelude::*;
        let (worst, scalar) = (0..1u64 << 16)
            .into_par_iter()
            .map(|high| {
                let inputs: Vec<f32> = (0..1u32 << 16)
                    .map(|low| f32::from_bits(((high as u32) << 16) | low))
                    .collect();
                let mut values = inputs.clone();
                tanh_in_place(&mut values);
                let (mut worst, mut scalar) = (0, 0u64);
                for (&v, &got) in inputs.iter().zip(&values) {
                    let want = tanh_value(v);
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "tanh({v:e}): {got:e} against {want:e}"
                    );
                    if v.is_finite() {
                        let host = (v as f64).tanh().to_bits();
                        worst = worst.max(tanh_wide(v as f64).to_bits().abs_diff(host));
                        let a = (v as f64).abs();
                        scalar += u64::from(
                            a < 7.52316384526264e-37 || near_midpoint(tanh_wide(v as f64)),
                        );
                    }
                }
                (worst, scalar)
            })
            .reduce(|| (0, 0), |a, b| (a.0.max(b.0), a.1 + b.1));
        println!("worst {worst} units; {scalar} finite inputs took the scalar call");
        assert!(worst <= MEASURED_ULPS, "{worst} units from the host's tanh");
    }
}
