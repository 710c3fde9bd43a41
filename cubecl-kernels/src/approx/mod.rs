//! Approximate-multiplier contractions (ApproxMul).
//!
//! Every kernel here takes the multiply as a comptime [`MulKind`] and works on **decoded
//! operands**: when a tile is loaded, each operand `x` is split once into a key (its mantissa
//! bits, pre-shifted for the table index) and a scale `±2^(e - 127)` (its sign and exponent with a
//! zero mantissa; `±0` for zero and subnormal inputs, `±Inf` for infinities, NaN for NaN). A
//! product is then one table read and two multiplies:
//!
//! ```text
//! p = (significand(key_a, key_b) · scale_a) · scale_b        acc += p   (FP32, k ascending)
//! ```
//!
//! where `significand` is the LUT entry `(1 + carry)(1.mantissa) ∈ [1, 4)` (f32), or, for the
//! FP32-width models, Mitchell's or MBM's significand computed from the two 23-bit mantissas.
//! This equals `burn-approx-mul`'s scalar semantics (gradual underflow, overflow to Inf, DAZ
//! inputs, NaN/Inf rules) for every operand pair except one band: `|a| ≥ 2^127` with a
//! significand product ≥ 2 overflows in the intermediate `significand · scale_a` although
//! `|a·b|` may be finite when `|b| < 1/2`.
//!
//! - [`host`]: the plain-Rust reference (multi-threaded); the test oracle and the path on
//!   backends without CubeCL kernels.
//! - [`multiply`]: the comptime multiply (`#[cube]` decode and product) every kernel reuses.
//! - [`gemm`]: the tiled batched LUT GEMM kernel (every convolution is lowered onto it by
//!   `burn-approx-mul` through im2col).

pub mod gemm;
pub mod host;
pub mod multiply;

use std::sync::Arc;

/// Mantissa-field mask.
pub const MANT_MASK: u32 = (1 << 23) - 1;
/// MBM's error-correction constant `2^-4 + 2^-6` in units of 2^-23.
pub const MBM_CORRECTION: u32 = (1 << 19) + (1 << 17);
/// Largest f32 table kept in shared memory, in entries (16 KiB: `m ≤ 6`).
pub const SHARED_LUT_ENTRIES: usize = 4096;

/// A significand table for `bits`-bit mantissas: entry `(a_m << m) | b_m` is the f32
/// `(1 + carry)(1.mantissa)` of the approximate product of `1.a_m` and `1.b_m`.
#[derive(Clone)]
pub struct LutTable {
    bits: u32,
    significands: Arc<[f32]>,
}

impl LutTable {
    /// A table of `2^(2·bits)` significands (`bits` in `1..=11`).
    ///
    /// # Panics
    /// If the length or width is inconsistent (a programming error: `burn-approx-mul` builds
    /// these from validated tables).
    pub fn new(bits: u32, significands: Vec<f32>) -> Self {
        assert!((1..=11).contains(&bits), "LUT width {bits} out of 1..=11");
        assert_eq!(significands.len(), 1 << (2 * bits), "LUT length");
        Self {
            bits,
            significands: significands.into(),
        }
    }

    /// Mantissa bits.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// The significands.
    pub fn significands(&self) -> &[f32] {
        &self.significands
    }
}

impl std::fmt::Debug for LutTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "LutTable(m = {}, {} entries)",
            self.bits,
            self.significands.len()
        )
    }
}

impl PartialEq for LutTable {
    fn eq(&self, other: &Self) -> bool {
        self.bits == other.bits
            && (Arc::ptr_eq(&self.significands, &other.significands)
                || self.significands == other.significands)
    }
}

/// How a kernel multiplies (the runtime description; [`MulKind`] is its comptime shape).
#[derive(Clone, Debug, PartialEq)]
pub enum ApproxMultiply {
    /// IEEE `a * b` inside Ember's kernels (the baseline for kernel-overhead ratios).
    Plain,
    /// Mitchell's logarithmic multiplier at FP32 width, evaluated in the kernel.
    Mitchell,
    /// The minimally biased multiplier at FP32 width (AFM32), evaluated in the kernel.
    Mbm,
    /// A significand lookup table.
    Lut(LutTable),
}

impl ApproxMultiply {
    /// The comptime shape of this multiply.
    pub fn kind(&self) -> MulKind {
        match self {
            Self::Plain => MulKind::Plain,
            Self::Mitchell => MulKind::Mitchell,
            Self::Mbm => MulKind::Mbm,
            Self::Lut(t) => MulKind::Lut(t.bits, t.significands.len() <= SHARED_LUT_ENTRIES),
        }
    }

    /// The table a kernel reads (a single dummy entry when there is none).
    pub fn table(&self) -> &[f32] {
        match self {
            Self::Lut(t) => &t.significands,
            _ => &[1.0],
        }
    }
}

pub use kind::MulKind;

mod kind {
    // The `CubeType` derive generates undocumented expansion types.
    #![allow(missing_docs)]
    use cubecl::prelude::*;

    /// The comptime multiply of a kernel.
    #[derive(CubeType, Clone, Copy, Hash, PartialEq, Eq, Debug)]
    pub enum MulKind {
        /// `a * b`.
        Plain,
        /// Mitchell, FP32 width.
        Mitchell,
        /// MBM, FP32 width.
        Mbm,
        /// LUT with `m` mantissa bits; `true` when the table is staged in shared memory.
        Lut(u32, bool),
    }
}
