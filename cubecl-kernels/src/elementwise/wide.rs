//! `f64` functions of many `f32` values at once by vectors, bit for bit the scalar calls
//! burn-ndarray makes: its tanh.
//!
//! burn-ndarray's tanh widens each value to `f64`, calls the host's `f64` tanh and rounds the
//! result to `f32` ([`super::activation::tanh_value`]). That call (glibc's goes through
//! `expm1`) was about a seventh of DeiT-Ti's training step on ndarray. [`tanh_in_place`]
//! computes the same `f64` function by vectors instead ([`tanh_wide`]: a polynomial and an
//! exponential without branches) and rounds it to `f32`.
//!
//! # Why the bits are the scalar call's
//!
//! An `f64` value rounds to the `f32` on its side of the nearest `f32` rounding midpoint, and
//! where it lies relative to that midpoint shows in its 29 low significand bits (`2^28` is the
//! midpoint). Each vector value lies within [`MEASURED_ULPS`] `f64` units in the last
//! place of the `f64` function the scalar call rounds (14 for tanh; measured over every `f32`
//! input on glibc, and any libm's tanh is within a unit or two of the true function), so
//! wherever the vector value lies at least [`MARGIN`] units from a midpoint both round to the
//! same `f32`. Values nearer a midpoint (under one in a million of all `f32` inputs),
//! non-finite inputs and inputs below `2^-120` (results near `f32`'s subnormal range, where its
//! midpoints lie elsewhere) take the scalar call. Tests: every `f32` input
//! (`every_f32_by_vectors_is_the_scalar_call_bit_for_bit`, ignored in the suite: about five
//! minutes on two cores in release), and in the suite a sweep of every exponent and the special
//! values.
//!
//! GELU's `erf` (libm's, `f64`) stays the scalar call: its series of positive terms
//! (`2/√π · a · e^{−a²} · Σ (2a²)^n / (2n + 1)!!`, 60 terms to reach `f32`'s range of `erf`)
//! gave the call's bits for every `f32` input but took longer by vectors than libm's call
//! (about 6.6 % of the samples of DeiT-Ti's native step against libm's 4.3 %, `perf record`).
//! `powf`'s `x³` stays the host's call: glibc's `powf` is not correctly rounded (its documented
//! bound is 0.82 units of `f32`), so no vector value gives its bits on every libm.

use super::activation::tanh_value;

/// Values computed by vectors at a time: the lanes' `f64` values and flags stay in L1.
const CHUNK: usize = 64;

/// `f64` units in the last place, counted in the significand's low bits, within which a vector
/// value near an `f32` rounding midpoint takes the scalar call instead.
pub const MARGIN: u64 = 1 << 10;

/// Inputs below this magnitude (`2^-120`) take the scalar call.
const TINY: f64 = f64::from_bits((1023 - 120) << 52);

/// The largest distance of [`tanh_wide`] from the host's `f64` tanh over every finite `f32`
/// input below [`TANH_CAP`], in `f64` units in the last place (glibc; test
/// `every_f32_by_vectors_is_the_scalar_call_bit_for_bit`): far inside [`MARGIN`].
pub const MEASURED_ULPS: u64 = 14;

/// The magnitude from which [`tanh_wide`] computes `tanh(20)`: past it tanh rounds to `±1`.
pub const TANH_CAP: f64 = 20.0;

/// Each value `v` of `values` replaced by `tanh_value(v)`, by vectors where the CPU has them.
pub fn tanh_in_place(values: &mut [f32]) {
    for chunk in values.chunks_mut(CHUNK) {
        let mut scalar = [false; CHUNK];
        vectors(chunk, &mut scalar);
        if scalar.contains(&true) {
            for (v, _) in chunk.iter_mut().zip(scalar).filter(|(_, s)| *s) {
                *v = tanh_value(*v);
            }
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
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX2 and FMA (checked just above).
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
#[target_feature(enable = "avx2,fma")]
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
        *s = !(TINY..f64::INFINITY).contains(&a) || near_midpoint(w, MARGIN);
        *v = match *s {
            true => *v,
            false => w as f32,
        };
    }
}

/// Whether `w`'s 29 low significand bits lie within `margin` of `2^28`, the `f32` rounding
/// midpoint (one unsigned comparison: the bits shifted so that the band starts at zero).
#[inline(always)]
pub fn near_midpoint(w: f64, margin: u64) -> bool {
    const LOW: u64 = (1 << 29) - 1;
    (w.to_bits().wrapping_add(margin.wrapping_sub(1 << 28)) & LOW) < 2 * margin
}

/// Below this magnitude [`tanh_wide`] takes the Taylor polynomial, above it the exponential
/// form.
pub const SMALL: f64 = 0.125;

/// burn-ndarray's tanh in `f64` without branches, every lane both ways: an odd Taylor polynomial to `x^15` below
/// [`SMALL`] (the next term is under `2^-58` of the value), `1 − 2 / (e^{2|x|} + 1)` above
/// it with `|x|` capped at 20 (past it tanh rounds to 1), the sign of `x` copied onto
/// either.
#[inline(always)]
pub fn tanh_wide(x: f64) -> f64 {
    // tanh's Taylor coefficients of x³ … x^15
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
    let e = exp_wide(2.0 * a.min(TANH_CAP));
    let large = 1.0 - 2.0 / (e + 1.0);
    let t = if a < SMALL { small } else { large };
    t.copysign(x)
}

/// `e^y` for `0 ≤ y ≤ 40` without branches: `y = k·ln 2 + r` (`ln 2` in two parts, so
/// `k·ln 2` loses nothing), `e^r` by its Taylor polynomial to `r^13` (`|r| ≤ ln 2 / 2`), times
/// `2^k` built from its exponent bits.
#[inline(always)]
fn exp_wide(y: f64) -> f64 {
    // 1.5 · 2^52: adding it rounds to an integer, which then sits in the low significand bits
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    // ln 2's leading 32 significand bits (the rest zero), and the remainder
    const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
    const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
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
    use super::{MARGIN, MEASURED_ULPS, TANH_CAP, near_midpoint, tanh_in_place, tanh_wide};
    use crate::elementwise::activation::tanh_value;

    /// `f32` values over every exponent: a stride through all bit patterns, both signs.
    fn sweep(stride: u32) -> Vec<f32> {
        (0..u32::MAX / stride)
            .map(|i| f32::from_bits(i * stride))
            .collect()
    }

    /// The sweep, the special values, the edges of tanh's two forms and its cap, and a dense
    /// stretch of the range that matters to GELU, `by_vectors` of them against `scalar` bit
    /// for bit.
    fn matches_the_scalar_call(by_vectors: fn(&mut [f32]), scalar: fn(f32) -> f32) {
        let mut values = sweep(4_099);
        values.extend([
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
        ]);
        values.extend((0..20_000).map(|i| (i as f32 - 10_000.0) / 1_000.0));
        let want: Vec<u32> = values.iter().map(|&v| scalar(v).to_bits()).collect();
        // a length past the chunk with a short last chunk
        by_vectors(&mut values);
        for (i, (g, w)) in values.iter().zip(&want).enumerate() {
            let w = f32::from_bits(*w);
            assert_eq!(g.to_bits(), w.to_bits(), "value {i}: {g} against {w}");
        }
    }

    #[test]
    fn tanh_by_vectors_is_the_scalar_call_bit_for_bit() {
        matches_the_scalar_call(tanh_in_place, tanh_value);
    }

    /// The largest distance of [`tanh_wide`] from the host's tanh over inputs below the cap, in
    /// `f64` units in the last place, the signs checked equal.
    fn worst_distance(values: impl Iterator<Item = f32>) -> u64 {
        let mut worst = 0;
        for v in values.filter(|v| (v.abs() as f64) < TANH_CAP) {
            let (fast, exact) = (tanh_wide(v as f64), (v as f64).tanh());
            assert_eq!(fast.is_sign_negative(), exact.is_sign_negative(), "{v}");
            worst = worst.max(fast.to_bits().abs_diff(exact.to_bits()));
        }
        worst
    }

    #[test]
    fn the_wide_functions_are_within_their_measured_distance() {
        let tanh = worst_distance(sweep(65_537).into_iter());
        assert!(tanh <= MEASURED_ULPS, "tanh: {tanh} units");
    }

    #[test]
    fn values_near_an_f32_rounding_midpoint_take_the_scalar_call() {
        let margin = MARGIN;
        // 1 + 2^-24: the midpoint between 1 and the next f32
        let midpoint = f64::from_bits(1f64.to_bits() + (1 << 28));
        let at = |units: i64| f64::from_bits(midpoint.to_bits().wrapping_add_signed(units));
        assert!(near_midpoint(midpoint, margin));
        assert!(near_midpoint(at(margin as i64 - 1), margin));
        assert!(near_midpoint(at(-(margin as i64)), margin));
        assert!(!near_midpoint(at(margin as i64), margin));
        assert!(!near_midpoint(at(-(margin as i64) - 1), margin));
        assert!(!near_midpoint(1.0, margin));
        assert!(!near_midpoint(f64::from_bits(1f64.to_bits() - 1), margin));
    }

    /// Every `f32` bit pattern through the vectors against the scalar call, and
    /// [`tanh_wide`]'s largest distance from the host's tanh.
    fn every_f32() {
        use rayon::prelude::*;
        let (worst, scalar) = (0..1u32 << 16)
            .into_par_iter()
            .map(|high| {
                let inputs: Vec<f32> = (0..1u32 << 16)
                    .map(|low| f32::from_bits((high << 16) | low))
                    .collect();
                let mut values = inputs.clone();
                tanh_in_place(&mut values);
                for (&v, &got) in inputs.iter().zip(&values) {
                    let want = tanh_value(v);
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{v:e}: {got:e} against {want:e}"
                    );
                }
                let near = inputs
                    .iter()
                    .filter(|v| near_midpoint(tanh_wide(**v as f64), MARGIN));
                (worst_distance(inputs.iter().copied()), near.count())
            })
            .reduce(|| (0, 0), |a, b| (a.0.max(b.0), a.1 + b.1));
        println!("worst {worst} units; {scalar} values near a midpoint");
        assert!(worst <= MEASURED_ULPS, "{worst} units");
    }

    /// `cargo test --release -p cubecl-kernels --lib -- --ignored every_f32`: about five minutes
    /// a function on two cores.
    #[test]
    #[ignore = "4.3 billion values a function: run on purpose"]
    fn every_f32_by_vectors_is_the_scalar_call_bit_for_bit() {
        every_f32();
    }
}
