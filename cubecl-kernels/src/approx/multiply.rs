//! The comptime multiply shared by every kernel that contracts (the GEMM here, the sparse
//! kernels of the other techniques): operands are decoded once into a key and a scale (see
//! [`crate::approx`]), and a product is one table read (or a few integer ops for the FP32-width
//! models) and two multiplies.
// `#[cube]` generates undocumented expansion items for public functions.
#![allow(missing_docs)]

use super::{LutStaging, MANT_MASK, MBM_CORRECTION, MulKind};
use cubecl::prelude::*;

/// Words of the table a kernel stages in shared memory for `kind` (1 when it stages none: the
/// one-word array is then never read).
pub fn staged_words(kind: MulKind) -> usize {
    match kind {
        MulKind::Lut(m, LutStaging::Shared) => 1usize << (2 * m),
        MulKind::Lut(m, LutStaging::Packed) => 1usize << (2 * m - 2),
        _ => 1usize,
    }
}

/// The table copied into shared memory by the `units` units of a cube (`unit` is this unit's
/// index), once per cube, for the kinds that stage it ([`staged_words`]). Readers must pass a
/// `sync_cube` first (every kernel syncs after staging its first operand tiles).
#[cube]
pub fn stage_lut(
    lut: &Array<u32>,
    unit: usize,
    #[comptime] units: usize,
    #[comptime] kind: MulKind,
) -> SharedMemory<u32> {
    let len = comptime!(staged_words(kind));
    let mut staged = SharedMemory::<u32>::new(len);
    if comptime!(len > 1) {
        let mut i = unit;
        while i < len {
            staged[i] = lut[i];
            i += units;
        }
    }
    staged
}

/// Decodes `x` into `keys[pos]` / `scales[pos]` as a left (`lhs`) or right operand.
#[cube]
pub fn decode_into(
    x: f32,
    keys: &mut SharedMemory<u32>,
    scales: &mut SharedMemory<f32>,
    pos: usize,
    #[comptime] kind: MulKind,
    #[comptime] lhs: bool,
) {
    keys[pos] = decode_key(x, kind, lhs);
    scales[pos] = decode_scale(x, kind);
}

/// The key of `x` as a left (`lhs`) or right operand: LUT keys keep the top m mantissa bits
/// (shifted up by m for the lhs), the FP32-width models all 23; `0` for the plain product.
#[cube]
pub fn decode_key(x: f32, #[comptime] kind: MulKind, #[comptime] lhs: bool) -> u32 {
    match kind {
        MulKind::Plain => 0u32,
        _ => {
            let down = comptime!(match kind {
                MulKind::Lut(m, _) => 23 - m,
                _ => 0u32,
            });
            let up = comptime!(match kind {
                MulKind::Lut(m, _) if lhs => m,
                _ => 0u32,
            });
            ((u32::reinterpret(x) & MANT_MASK) >> down) << up
        }
    }
}

/// The scale of `x`: its sign and exponent (NaN kept whole); `x` itself for the plain product.
#[cube]
pub fn decode_scale(x: f32, #[comptime] kind: MulKind) -> f32 {
    match kind {
        MulKind::Plain => x,
        _ => {
            let bits = u32::reinterpret(x);
            let nan = (bits & 0x7fff_ffffu32) > 0x7f80_0000u32;
            f32::reinterpret(select(nan, bits, bits & 0xff80_0000u32))
        }
    }
}

/// The significand product `(1 + carry)(1.mantissa)` of two decoded keys. `lut` holds the
/// table's words as the launch staged them: f32 bits, or four packed bytes per word for
/// [`LutStaging::Packed`]; `staged` is its shared-memory copy when there is one.
#[cube]
pub fn significand(
    ka: u32,
    kb: u32,
    lut: &Array<u32>,
    staged: &SharedMemory<u32>,
    #[comptime] kind: MulKind,
) -> f32 {
    match kind {
        MulKind::Plain => 1.0f32,
        MulKind::Lut(m, staging) => {
            let i = ka | kb;
            match staging {
                LutStaging::Global => f32::reinterpret(lut[i as usize]),
                LutStaging::Shared => f32::reinterpret(staged[i as usize]),
                LutStaging::Packed => unpack(staged[(i >> 2u32) as usize], i, m),
            }
        }
        MulKind::Mitchell => {
            let s = ka + kb;
            f32::reinterpret(((127u32 + (s >> 23)) << 23) | (s & MANT_MASK))
        }
        MulKind::Mbm => {
            let s = ka + kb;
            let carry = s >> 23;
            let frac = (s & MANT_MASK) + (MBM_CORRECTION >> carry);
            let over = frac > MANT_MASK;
            let normalised = ((8_388_608u32 + frac) >> 1) & MANT_MASK;
            let mant = select(over, select(carry == 1u32, s & MANT_MASK, normalised), frac);
            let c = select(over, 1u32, carry);
            f32::reinterpret(((127u32 + c) << 23) | mant)
        }
    }
}

/// The significand of table entry `i` from `word`, the packed word that holds it (four bytes,
/// [`LutStaging::Packed`]): f32 bits `0x3f80_0000 + (byte << (23 - m))`.
#[cube]
fn unpack(word: u32, i: u32, #[comptime] m: u32) -> f32 {
    let byte = (word >> ((i & 3u32) << 3u32)) & 0xffu32;
    f32::reinterpret(0x3f80_0000u32 + (byte << comptime!(23 - m)))
}

/// The table copied into the unit's private memory for the kinds a kernel would stage in shared
/// memory ([`staged_words`]; a one-word array, never read, for the others). On a CPU running
/// the kernel (lavapipe) a read of a private array at an index of each unit's own is a gather
/// of the SIMD lanes without the per-lane branches of a shared- or global-memory read: the
/// direct GEMM runs 2–2.7× faster with it than with the shared table (`docs/approx-mul.md`).
/// Readers must pass a `sync_cube` first: without one after the copy, lavapipe (Mesa 22.3)
/// compiled the kernel for minutes.
#[cube]
pub fn private_lut(lut: &Array<u32>, #[comptime] kind: MulKind) -> Array<u32> {
    let len = comptime!(staged_words(kind));
    let mut table = Array::<u32>::new(len);
    if comptime!(len > 1) {
        for i in 0..len {
            table[i] = lut[i];
        }
    }
    table
}

/// [`product()`] with a staged kind's table read from the unit's [`private_lut()`] (`table`)
/// instead of shared memory; the other kinds as [`product()`], which never reads `staged` for
/// them.
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn product_private(
    ka: u32,
    sa: f32,
    kb: u32,
    sb: f32,
    lut: &Array<u32>,
    table: &Array<u32>,
    staged: &SharedMemory<u32>,
    #[comptime] kind: MulKind,
) -> f32 {
    match kind {
        MulKind::Lut(_, LutStaging::Shared) => {
            (f32::reinterpret(table[(ka | kb) as usize]) * sa) * sb
        }
        MulKind::Lut(m, LutStaging::Packed) => {
            let i = ka | kb;
            (unpack(table[(i >> 2u32) as usize], i, m) * sa) * sb
        }
        _ => product(ka, sa, kb, sb, lut, staged, kind),
    }
}

/// One approximate product of decoded operands: `(significand · sa) · sb`.
#[cube]
pub fn product(
    ka: u32,
    sa: f32,
    kb: u32,
    sb: f32,
    lut: &Array<u32>,
    staged: &SharedMemory<u32>,
    #[comptime] kind: MulKind,
) -> f32 {
    match kind {
        MulKind::Plain => sa * sb,
        _ => (significand(ka, kb, lut, staged, kind) * sa) * sb,
    }
}
