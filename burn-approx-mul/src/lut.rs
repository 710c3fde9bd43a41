//! Mantissa-product lookup tables: generation (ApproxTrain's Algorithm 1), the simulator
//! (Algorithm 2) and the table the kernels use.

use crate::error::ApproxError;
use crate::model::{MANT_MASK, assemble};

/// Largest mantissa width a LUT supports (2^22 entries).
pub const MAX_LUT_BITS: u32 = 11;

/// A mantissa-product lookup table for `m`-bit mantissas.
///
/// Entry `(a_m << m) | b_m` holds the carry bit (bit `m`) and the top `m` mantissa bits of the
/// product (bits `0..m`), for the top `m` mantissa bits `a_m`, `b_m` of the operands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lut {
    name: String,
    m: u32,
    entries: Vec<u16>,
}

impl Lut {
    /// A table from raw entries (carry at bit `m`, mantissa in bits `0..m`).
    pub fn from_entries(name: &str, m: u32, entries: Vec<u16>) -> Result<Self, ApproxError> {
        check_bits(m)?;
        let expected = 1usize << (2 * m);
        if entries.len() != expected {
            return Err(ApproxError::LutSize {
                m,
                expected,
                found: entries.len(),
            });
        }
        if let Some(index) = entries.iter().position(|e| u32::from(*e) >> (m + 1) != 0) {
            return Err(ApproxError::LutEntry {
                index,
                value: u32::from(entries[index]),
                m,
            });
        }
        Ok(Self {
            name: name.to_string(),
            m,
            entries,
        })
    }

    /// Algorithm 1: tabulates `multiply` on `1.a_m × 1.b_m` for every pair of `m`-bit mantissas.
    ///
    /// Both operands get the exponent of 1.0 (any normal exponents whose product is normal would
    /// do); the carry is set when the product's exponent exceeds the unnormalised one. A
    /// multiplier whose product of two numbers in `[1, 2)` is not in `[1, 4)` is rejected.
    pub fn generate(
        name: &str,
        m: u32,
        multiply: impl Fn(f32, f32) -> f32,
    ) -> Result<Self, ApproxError> {
        check_bits(m)?;
        let shift = 23 - m;
        let n = 1u32 << m;
        let mut entries = Vec::with_capacity(1 << (2 * m));
        for k in 0..n {
            for j in 0..n {
                let a = f32::from_bits(0x3f80_0000 | (k << shift));
                let b = f32::from_bits(0x3f80_0000 | (j << shift));
                let c = multiply(a, b);
                let exp = (c.to_bits() >> 23) & 0xff;
                if !(1.0..4.0).contains(&c) {
                    return Err(ApproxError::NotAMantissaProduct {
                        name: name.into(),
                        a,
                        b,
                        c,
                    });
                }
                let carry = u32::from(exp > 127);
                let mant = (c.to_bits() & MANT_MASK) >> shift;
                entries.push(((carry << m) | mant) as u16);
            }
        }
        Ok(Self {
            name: name.to_string(),
            m,
            entries,
        })
    }

    /// The table's name (ApproxTrain's `NAME` in `NAME_M.bin`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Mantissa bits.
    pub fn bits(&self) -> u32 {
        self.m
    }

    /// Raw entries (carry at bit `m`, mantissa in bits `0..m`).
    pub fn entries(&self) -> &[u16] {
        &self.entries
    }

    /// `(carry, 23-bit mantissa)` for two 23-bit mantissa fields.
    pub fn lookup(&self, ma: u32, mb: u32) -> (u32, u32) {
        let shift = 23 - self.m;
        let index = ((ma >> shift) << self.m) | (mb >> shift);
        let e = u32::from(self.entries[index as usize]);
        (e >> self.m, (e & ((1 << self.m) - 1)) << shift)
    }

    /// Algorithm 2, with Ember's IEEE semantics (see [`crate::model`]).
    pub fn multiply(&self, a: f32, b: f32) -> f32 {
        assemble(a, b, |ma, mb| self.lookup(ma, mb))
    }

    /// The table the kernels read: entry `i` as the f32 significand product
    /// `(1 + carry) · (1.mantissa)`, in `[1, 4)`.
    pub fn significands(&self) -> Vec<f32> {
        let shift = 23 - self.m;
        self.entries
            .iter()
            .map(|&e| f32::from_bits(0x3f80_0000 + (u32::from(e) << shift)))
            .collect()
    }

    /// Mean and maximum relative error of the mantissa products against exact multiplication,
    /// over all entries (operands at the centre of each mantissa interval).
    pub fn error_stats(&self) -> ErrorStats {
        let n = 1u32 << self.m;
        let half = 0.5 / f64::from(n);
        let (mut sum, mut sum_abs, mut max) = (0.0f64, 0.0f64, 0.0f64);
        let sig = self.significands();
        for k in 0..n {
            for j in 0..n {
                let exact = (1.0 + f64::from(k) / f64::from(n) + half)
                    * (1.0 + f64::from(j) / f64::from(n) + half);
                let r = (f64::from(sig[(k * n + j) as usize]) - exact) / exact;
                sum += r;
                sum_abs += r.abs();
                max = max.max(r.abs());
            }
        }
        let count = f64::from(n * n);
        ErrorStats {
            mean: sum / count,
            mean_abs: sum_abs / count,
            max_abs: max,
        }
    }
}

/// Relative-error summary of a table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorStats {
    /// Mean signed relative error (bias).
    pub mean: f64,
    /// Mean absolute relative error.
    pub mean_abs: f64,
    /// Largest absolute relative error.
    pub max_abs: f64,
}

pub(crate) fn check_bits(m: u32) -> Result<(), ApproxError> {
    if (1..=MAX_LUT_BITS).contains(&m) {
        Ok(())
    } else {
        Err(ApproxError::Bits {
            m,
            max: MAX_LUT_BITS,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{self, apply};

    #[test]
    fn exact_multiply_tabulates_to_the_truncating_model() {
        for m in 1..=MAX_LUT_BITS {
            let lut = Lut::generate("t", m, |a, b| a * b).unwrap();
            let model = Lut::generate("t", m, |a, b| apply(model::truncated, m, a, b)).unwrap();
            assert_eq!(lut, model, "m = {m}");
        }
    }

    #[test]
    fn rejects_multipliers_that_are_not_mantissa_products() {
        let err = Lut::generate("bad", 3, |a, b| a * b * 10.0).unwrap_err();
        assert!(err.to_string().contains("bad"), "{err}");
        assert!(Lut::generate("nan", 3, |_, _| f32::NAN).is_err());
        assert!(Lut::generate("neg", 3, |a, b| -a * b).is_err());
    }

    #[test]
    fn widths_out_of_range_are_errors() {
        for m in [0, 12, 23] {
            let err = Lut::generate("x", m, |a, b| a * b).unwrap_err();
            assert!(matches!(err, ApproxError::Bits { .. }), "{err}");
        }
        assert!(Lut::from_entries("x", 2, vec![0; 15]).is_err());
        assert!(
            Lut::from_entries("x", 2, vec![0x8; 16]).is_err(),
            "bit above the carry"
        );
    }

    #[test]
    fn significands_carry_the_exponent_bump() {
        let lut = Lut::generate("mit", 1, |a, b| apply(model::mitchell, 1, a, b)).unwrap();
        // m = 1: 1.0·1.0 = 1, 1.0·1.5 = 1.5, 1.5·1.5 → Mitchell 2.0
        assert_eq!(lut.significands(), vec![1.0, 1.5, 1.5, 2.0]);
    }
}
