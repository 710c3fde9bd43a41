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
//! - [`multiply`]: the comptime multiply (`#[cube]` decode, product, the shared-memory table
//!   staging) every kernel reuses; [`host`] is its plain-Rust reference.
//! - [`gemm`]: the tiled batched LUT GEMM (shape-chosen tiles, split-K for long `k`; every
//!   convolution is lowered onto it by `burn-approx-mul` through im2col): `kernel.rs`,
//!   `launch.rs`, and `reference.rs`, the multi-threaded host reference (the test oracle and the
//!   path on backends without CubeCL kernels).
//! - [`im2col`]: the im2col / col2im kernels of that lowering, laid out the same way.

pub mod gemm;
pub mod host;
pub mod im2col;
pub mod multiply;

use std::sync::{Arc, OnceLock};

/// Mantissa-field mask.
pub const MANT_MASK: u32 = (1 << 23) - 1;
/// MBM's error-correction constant `2^-4 + 2^-6` in units of 2^-23.
pub const MBM_CORRECTION: u32 = (1 << 19) + (1 << 17);
/// Largest f32 table kept in shared memory, in entries (16 KiB: `m ≤ 6`).
pub const SHARED_LUT_ENTRIES: usize = 4096;
/// Widest table kept in shared memory as packed bytes (`m = 7`: 16 KiB).
pub const PACKED_LUT_BITS: u32 = 7;

/// The tile-chunks [`split_k`] aims at: enough for a CPU running the kernels (lavapipe) and
/// for the host reference. A GPU aims at [`gpu_tiles`] instead.
pub const CPU_TILES: usize = 32;

/// The tile-chunks split-K aims at on a GPU of `units` multiprocessors: two a multiprocessor,
/// never fewer than [`CPU_TILES`] (0 units, a CPU, gives [`CPU_TILES`]).
pub fn gpu_tiles(units: usize) -> usize {
    CPU_TILES.max(2 * units)
}

/// The length of the `k` chunks a contraction of `[batch, m, k] · [batch, k, n]` is split into
/// (`k` itself when it is not split), aiming at [`CPU_TILES`] tile-chunks
/// ([`split_k_for`]).
pub fn split_k(dims: [usize; 4]) -> usize {
    split_k_for(dims, CPU_TILES)
}

/// The length of the `k` chunks of [`split_k`], aiming at `target` tile-chunks.
///
/// A product with few output tiles and a long `k` (the weight gradients of convolutions: `m`,
/// `n` ≤ a few hundred, `k` = batch · pixels) would otherwise run on a handful of cubes (one
/// CPU thread on lavapipe, a few SMs on a GPU). It is cut into chunks of at least 512 so that
/// there are about `target` tile-chunks; each chunk is accumulated from zero in `k` order and
/// the partial sums are then added in chunk order. The host reference uses [`CPU_TILES`], as
/// the kernel does on a CPU, so the two stay bit-identical there; on a GPU the kernel aims at
/// [`gpu_tiles`] and its sums differ from the reference's in the last bits.
pub fn split_k_for([batch, m, k, n]: [usize; 4], target: usize) -> usize {
    const MIN_CHUNK: usize = 512;
    let tiles = batch * m.div_ceil(64) * n.div_ceil(64);
    let splits = (target / tiles.max(1)).min(k / MIN_CHUNK);
    if splits < 2 {
        return k.max(1);
    }
    // Whole tile depths (16) per chunk, so no chunk starts inside a shared tile.
    k.div_ceil(splits).next_multiple_of(16)
}

/// A significand table for `bits`-bit mantissas: entry `(a_m << m) | b_m` is the f32
/// `(1 + carry)(1.mantissa)` of the approximate product of `1.a_m` and `1.b_m`.
#[derive(Clone)]
pub struct LutTable {
    bits: u32,
    significands: Arc<[f32]>,
    packed: Option<Arc<[u32]>>,
    /// The host expansion's layouts of the table, made on first use and shared by clones.
    layouts: Arc<OnceLock<gemm::Layouts>>,
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
        let packed = pack_bytes(bits, &significands);
        Self {
            bits,
            significands: significands.into(),
            packed,
            layouts: Arc::default(),
        }
    }

    /// The table in the layouts the host expansion reads, made once (at `bits ≤ 8`, where
    /// the expansion runs).
    pub(in crate::approx) fn expansion_layouts(&self) -> &gemm::Layouts {
        self.layouts
            .get_or_init(|| gemm::Layouts::new(&self.significands, self.bits))
    }

    /// The table as bytes `(carry << m) | mantissa`, four per word (little end first), when
    /// `m ≤ 7` and every entry is `(1 + carry)(1 + mantissa · 2^-m)`, as every table built by
    /// Algorithm 1 is (the f32 bits are then `0x3f80_0000 + (byte << (23 - m))`).
    pub fn packed(&self) -> Option<&[u32]> {
        self.packed.as_deref()
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

/// Packs `(carry << m) | mantissa` bytes of a table whose every entry is
/// `(1 + carry)(1 + mantissa · 2^-m)`.
fn pack_bytes(bits: u32, significands: &[f32]) -> Option<Arc<[u32]>> {
    if bits > PACKED_LUT_BITS {
        return None;
    }
    let shift = 23 - bits;
    let bytes = significands
        .iter()
        .map(|s| {
            let offset = s.to_bits().checked_sub(0x3f80_0000)?;
            let byte = offset >> shift;
            (byte << shift == offset && byte < 1 << (bits + 1)).then_some(byte)
        })
        .collect::<Option<Vec<u32>>>()?;
    Some(
        bytes
            .chunks(4)
            .map(|c| c.iter().rev().fold(0, |w, &b| (w << 8) | b))
            .collect(),
    )
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
    /// Whether products go through a simulated approximate multiplier (everything but
    /// [`ApproxMultiply::Plain`], IEEE products inside the kernels).
    pub fn is_approximate(&self) -> bool {
        !matches!(self, Self::Plain)
    }

    /// The comptime shape of this multiply.
    pub fn kind(&self) -> MulKind {
        match self {
            Self::Plain => MulKind::Plain,
            Self::Mitchell => MulKind::Mitchell,
            Self::Mbm => MulKind::Mbm,
            Self::Lut(t) => MulKind::Lut(
                t.bits,
                if t.significands.len() <= SHARED_LUT_ENTRIES {
                    LutStaging::Shared
                } else if t.packed.is_some() {
                    LutStaging::Packed
                } else {
                    LutStaging::Global
                },
            ),
        }
    }

    /// The bytes a kernel launch uploads as its `lut` array: packed significand bytes for
    /// [`LutStaging::Packed`], f32 significands otherwise (a single dummy entry when there is no
    /// table).
    pub fn lut_words(&self) -> &[u8] {
        match (self.kind(), self) {
            (MulKind::Lut(_, LutStaging::Packed), Self::Lut(t)) => {
                cubecl::prelude::CubeElement::as_bytes(
                    t.packed().expect("packed staging has a packed table"),
                )
            }
            _ => cubecl::prelude::CubeElement::as_bytes(self.table()),
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

pub use kind::{LutStaging, MulKind};

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
        /// LUT with `m` mantissa bits, read from where [`LutStaging`] says.
        Lut(u32, LutStaging),
    }

    /// Where a kernel reads its table from.
    #[derive(CubeType, Clone, Copy, Hash, PartialEq, Eq, Debug)]
    pub enum LutStaging {
        /// Global memory, f32 significands (tables too large for shared memory).
        Global,
        /// Shared memory, f32 significands (`m ≤ 6`, ≤ 16 KiB), staged once per cube.
        Shared,
        /// Shared memory, packed bytes (`m = 7`, 16 KiB), staged once per cube and expanded
        /// to the f32 significand (f32 bits `0x3f80_0000 + (byte << (23 - m))`) at each read.
        Packed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_of_algorithm_one_pack_into_bytes() {
        // m = 2: entry i is byte i % 8 = carry (bit 2) and mantissa
        let sig: Vec<f32> = (0..16)
            .map(|i| (1 + (i % 8) / 4) as f32 * (1.0 + (i % 4) as f32 / 4.0))
            .collect();
        let t = LutTable::new(2, sig);
        let words = t.packed().expect("packable");
        assert_eq!(words.len(), 4);
        assert_eq!(words[0], 0x0302_0100);
        assert_eq!(words[3], 0x0706_0504);
        // an extra bit below the m-bit mantissa, a value below 1, or m > 7: no bytes
        assert!(
            LutTable::new(1, vec![1.0, 1.25, 1.5, 2.0])
                .packed()
                .is_none()
        );
        assert!(
            LutTable::new(1, vec![0.5, 1.5, 1.5, 2.0])
                .packed()
                .is_none()
        );
        assert!(LutTable::new(8, vec![1.0; 1 << 16]).packed().is_none());
    }

    #[test]
    fn long_k_with_few_tiles_is_split_into_whole_depths() {
        // big outputs and short k stay whole
        assert_eq!(split_k([1, 512, 512, 512]), 512);
        assert_eq!(split_k([64, 6, 25, 784]), 25);
        assert_eq!(split_k([1, 6, 1000, 25]), 1000);
        // LeNet-5's first weight gradient: 6 × 25 outputs, k = 64 · 28 · 28
        let chunk = split_k([1, 6, 50_176, 25]);
        assert_eq!(50_176usize.div_ceil(chunk), 32);
        assert_eq!(chunk % 16, 0);
        // three tiles: about ten chunks
        let chunk = split_k([1, 16, 6400, 150]);
        assert_eq!((chunk, 6400usize.div_ceil(chunk)), (640, 10));
    }

    #[test]
    fn a_gpu_splits_to_two_chunks_a_multiprocessor() {
        assert_eq!(gpu_tiles(0), CPU_TILES);
        assert_eq!(gpu_tiles(132), 264);
        // ResNet-18-CIFAR's first-stage weight gradient at b128: 9 tiles, k = 131,072;
        // 32 / 9 = 3 chunks on a CPU, 264 / 9 = 29 on an H200
        let dims = [1, 64, 131_072, 576];
        assert_eq!(131_072usize.div_ceil(split_k(dims)), 3);
        assert_eq!(131_072usize.div_ceil(split_k_for(dims, gpu_tiles(132))), 29);
        // outputs that fill the GPU stay whole
        assert_eq!(split_k_for([1, 512, 4096, 4608], gpu_tiles(132)), 4096);
    }
}
