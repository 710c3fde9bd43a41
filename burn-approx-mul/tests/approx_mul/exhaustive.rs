//! The simulator (Algorithm 2 on a generated table) equals the functional model for every
//! mantissa pair at every supported width of every built-in multiplier; the kernels' decoded
//! form equals the simulator; the FP32-width kernel models equal the functional models.

use burn_approx_mul::{Family, Lut, MAX_LUT_BITS, Multiplier, model};
use cubecl_kernels::approx::{ApproxMultiply, LutTable, host};
use rand::{Rng, SeedableRng, rngs::StdRng};

/// Any bit pattern except the documented band's exponent 254.
fn lhs_bits(rng: &mut StdRng) -> f32 {
    loop {
        let x = rng.random::<u32>();
        if (x >> 23) & 0xff != 254 {
            return f32::from_bits(x);
        }
    }
}

/// A normal operand with mantissa top bits `top` (width `m`), random low bits, sign and exponent.
fn operand(rng: &mut StdRng, top: u32, m: u32) -> f32 {
    let low = if m < 23 {
        rng.random::<u32>() & ((1 << (23 - m)) - 1)
    } else {
        0
    };
    let exp = rng.random_range(64u32..=190);
    let sign = rng.random::<u32>() & 0x8000_0000;
    f32::from_bits(sign | (exp << 23) | (top << (23 - m)) | low)
}

#[test]
fn simulator_equals_functional_model_for_every_mantissa_pair() {
    let mut rng = StdRng::seed_from_u64(7);
    for family in Family::ALL {
        for m in 1..=MAX_LUT_BITS {
            let f = family.function(m);
            let lut = Lut::generate("t", m, f).unwrap();
            let n = 1u32 << m;
            for ia in 0..n {
                for ib in 0..n {
                    let (a, b) = (operand(&mut rng, ia, m), operand(&mut rng, ib, m));
                    let (want, got) = (f(a, b), lut.multiply(a, b));
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{family:?} m={m}: {a:e} × {b:e}: simulator {got:e}, model {want:e}"
                    );
                }
            }
        }
    }
}

#[test]
fn kernels_decoded_form_equals_the_simulator() {
    let mut rng = StdRng::seed_from_u64(11);
    for family in Family::ALL {
        for m in [1, 3, 5, 7, 11] {
            let lut = Lut::generate("t", m, family.function(m)).unwrap();
            let mul = ApproxMultiply::Lut(LutTable::new(m, lut.significands()));
            for _ in 0..20_000 {
                // full exponent range except the documented band (|a| ≥ 2^127)
                let a = lhs_bits(&mut rng);
                let b = f32::from_bits(rng.random::<u32>());
                let (want, got) = (lut.multiply(a, b), host::multiply(a, b, &mul));
                let same = want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan());
                assert!(
                    same,
                    "{family:?} m={m}: {a:e} × {b:e}: decoded {got:e}, simulator {want:e}"
                );
            }
        }
    }
}

#[test]
fn fp32_width_kernel_models_equal_the_functional_models() {
    let mut rng = StdRng::seed_from_u64(13);
    for (family, mul) in [
        (Family::Mbm, ApproxMultiply::Mbm),
        (Family::Mitchell, ApproxMultiply::Mitchell),
    ] {
        let f = family.function(23);
        for _ in 0..200_000 {
            let a = lhs_bits(&mut rng);
            let b = f32::from_bits(rng.random::<u32>());
            let (want, got) = (f(a, b), host::multiply(a, b, &mul));
            let same = want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan());
            assert!(
                same,
                "{family:?}: {a:e} × {b:e}: kernel {got:e}, model {want:e}"
            );
        }
        // every carry/correction corner of the mantissa sum
        for (ma, mb) in [
            (0, 0),
            (0x7f_ffff, 0x7f_ffff),
            (0x40_0000, 0x40_0000),
            (0x7a_0000, 0x05_0000),
            (0x3f_ffff, 0x3f_ffff),
        ] {
            let (a, b) = (
                f32::from_bits(0x3f80_0000 | ma),
                f32::from_bits(0x3f80_0000 | mb),
            );
            assert_eq!(
                host::multiply(a, b, &mul).to_bits(),
                f(a, b).to_bits(),
                "{family:?} {ma:#x} {mb:#x}"
            );
        }
    }
}

#[test]
fn documented_overflow_band_of_the_decoded_form() {
    // |a| ≥ 2^127 with a significand product ≥ 2 and |b| < 1/2: the intermediate overflows.
    let m = Multiplier::parse("mitchell7").unwrap();
    let (a, b) = (f32::from_bits(0x7f60_0000), 0.375f32); // 1.75·2^127 · 1.5·2^-2
    let exact_model = model::apply(model::mitchell, 7, a, b);
    assert!(exact_model.is_finite());
    assert_eq!(m.multiply(a, b), f32::INFINITY);
}
