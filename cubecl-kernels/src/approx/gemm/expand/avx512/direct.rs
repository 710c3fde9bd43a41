//! The AVX-512 build's direct tasks (a packed side of few rows, [`super::super::direct`]): no
//! expanded tables; at each step each row's entries are picked from its key's table row by
//! the lanes' keys, times the lanes' scales, times the row's scale, added to its sums.

use super::super::layouts::BYTE_ROW;
use super::super::{LANES, Operand, Rows};
use super::{ROWS, add_product, lanes_at, lookup};
use std::arch::x86_64::*;

/// A task of few rows, its lanes' keys and scales packed (`[k][n]` from column `c0`):
/// [`steps`] over every step, the entries by [`lookup`].
#[target_feature(enable = "avx512f")]
pub(super) fn packed<const G: usize, const V: usize, const BITS: u32, const FUSED: bool>(
    a: Rows<'_>,
    b: (&[u32], &[f32]),
    [k, n, c0]: [usize; 3],
    by_packed: &[f32],
    sums: &mut [f32],
) {
    let lanes = (n - c0).min(LANES);
    let at = |kk: usize| {
        let (kbs, sbs, bit_masks) = lanes_at::<V>(b, kk * n + c0, lanes);
        ((kbs, bit_masks), sbs)
    };
    let entries = by_table::<G, V, BITS>(by_packed);
    steps::<V, BITS, FUSED, _>(&a, [0, k], sums, at, entries);
}

/// Steps of a direct task whose lanes are read in place ([`in_place`]) a chunk at a time:
/// their keys and scales (16 KiB at 32 lanes) stay in L1 while every group of rows adds them.
const CHUNK: usize = 64;

/// Runs of lanes a vector from which a task reads its lanes a run at a time rather than by
/// gathers ([`in_place`]).
const RUNS: usize = 4;

/// [`packed`] with the lanes read in place: the panel's lanes, `expanded`'s rows from `c0` (of
/// batch entry `bt`), read [`CHUNK`] steps at a time (a masked load a run of lanes whose
/// offsets follow one another, where each vector has at most [`RUNS`]; else a gather) and
/// split into keys and scales, with no packed copy of the side (LeNet-5's conv1 weight
/// gradient packed 1.25 M values, by runs of its five taps, with a zeroed allocation for each
/// chunk of `k`). With `bytes` (the table as bytes, [`BYTE_ROW`]), where the CPU supports
/// AVX-512 VBMI and BW, the entries come from byte permutes ([`by_bytes`]), else by
/// [`lookup`]. The same products in the same order. `expanded`'s values must lie below
/// `i32::MAX` ([`fits`]).
#[target_feature(enable = "avx512f")]
pub(super) fn in_place<const G: usize, const V: usize, const BITS: u32, const FUSED: bool>(
    a: Rows<'_>,
    (expanded, bt): (Operand<'_>, usize),
    [k, n, c0]: [usize; 3],
    (by_packed, bytes): (&[f32], Option<&[u8]>),
    sums: &mut [f32],
) {
    let lanes = (n - c0).min(LANES);
    assert!(
        fits(&expanded) && lanes <= 16 * V && c0 + lanes <= expanded.rows,
        "in-place direct task"
    );
    // the plan holds bytes only where the CPU has byte permutes; checked here too, so that the
    // byte path's soundness does not rest on the caller
    let bytes = bytes.filter(|_| super::super::build::byte_permutes());
    // the lanes' offsets from a step's value of entry `bt` (padded lanes: none, masked off)
    let base = expanded.base + bt * expanded.batch;
    let offset = |v: usize, l: usize| expanded.row.at(c0 + 16 * v + l);
    let offsets: [__m512i; V] = std::array::from_fn(|v| {
        let at: [i32; 16] = std::array::from_fn(|l| match 16 * v + l < lanes {
            true => offset(v, l) as i32,
            false => 0,
        });
        // SAFETY: 16 values of an array of 16.
        unsafe { _mm512_loadu_si512(at.as_ptr().cast()) }
    });
    let live: [__mmask16; V] = std::array::from_fn(|v| {
        let live = lanes.saturating_sub(16 * v).min(16);
        ((1u32 << live) - 1) as __mmask16
    });
    // each vector's runs of lanes whose offsets follow one another (a 5 × 5 kernel's taps:
    // runs of 5), each read by one masked load where they are few: two gathers of 16 a step
    // took about a sixth of LeNet-5's conv1 weight gradient
    let mut runs = [[(0 as __mmask16, 0usize); RUNS]; V];
    let mut counts = [0usize; V];
    for (v, (runs, count)) in runs.iter_mut().zip(&mut counts).enumerate() {
        for l in 0..lanes.saturating_sub(16 * v).min(16) {
            match *count {
                c if c > 0 && c <= RUNS && offset(v, l) == runs[c - 1].1.wrapping_add(l) => {
                    runs[c - 1].0 |= 1 << l;
                }
                c => {
                    // lane `l` at `from + l` (`from` wraps below zero where a run starts past
                    // lane 0 at a smaller offset)
                    if c < RUNS {
                        runs[c] = (1 << l, offset(v, l).wrapping_sub(l));
                    }
                    *count += 1;
                }
            }
        }
    }
    let by_runs = counts.iter().all(|&c| c <= RUNS);
    let shift = _mm_cvtsi32_si128((23 - BITS) as i32);
    let key_mask = _mm512_set1_epi32(((1u32 << BITS) - 1) as i32);
    let scale_mask = _mm512_set1_epi32(0xff80_0000u32 as i32);
    let mut keys = [[0u32; LANES]; CHUNK];
    let mut scales = [[0f32; LANES]; CHUNK];
    for k0 in (0..k).step_by(CHUNK) {
        let k1 = (k0 + CHUNK).min(k);
        for (kk, (keys, scales)) in (k0..k1).zip(keys.iter_mut().zip(&mut scales)) {
            let step = base + expanded.step.at(kk);
            assert!(
                step + expanded.row.last(c0 + lanes) < expanded.x.len(),
                "in-place direct task"
            );
            let x = expanded.x.as_ptr().wrapping_add(step);
            let mut bits = [_mm512_setzero_si512(); V];
            if by_runs {
                for ((bits, runs), &count) in bits.iter_mut().zip(&runs).zip(&counts) {
                    for &(mask, from) in &runs[..count] {
                        // SAFETY: the run's lanes `l` read `x[step + from + l]`, their offsets
                        // `step + row(c0 + 16·v + l)`, inside `x` (asserted); the other lanes
                        // are masked off and read nothing.
                        let run =
                            unsafe { _mm512_maskz_loadu_epi32(mask, x.wrapping_add(from).cast()) };
                        *bits = _mm512_or_si512(*bits, run);
                    }
                }
            } else {
                for v in 0..V {
                    // SAFETY: the live lanes read `x[step + row(c0 + l)]`, inside `x`
                    // (asserted).
                    bits[v] = unsafe {
                        let zero = _mm512_setzero_si512();
                        _mm512_mask_i32gather_epi32::<4>(zero, live[v], offsets[v], x.cast())
                    };
                }
            }
            for (v, bits) in bits.into_iter().enumerate() {
                // SAFETY: the stores write 16 values of arrays of 16 · V.
                unsafe {
                    let key = _mm512_and_si512(_mm512_srl_epi32(bits, shift), key_mask);
                    let scale = _mm512_and_si512(bits, scale_mask);
                    _mm512_storeu_si512(keys.as_mut_ptr().add(16 * v).cast(), key);
                    _mm512_storeu_si512(scales.as_mut_ptr().add(16 * v).cast(), scale);
                }
            }
        }
        let chunk = (keys.as_flattened(), scales.as_flattened());
        match bytes {
            // SAFETY: the CPU supports AVX-512 VBMI and BW (checked above).
            Some(bytes) if BITS <= 7 => unsafe {
                chunk_by_bytes::<V, BITS, FUSED>(&a, [k0, k1], chunk, lanes, bytes, sums)
            },
            _ => {
                let at = |kk: usize| {
                    let (kbs, sbs, bit_masks) = lanes_at::<V>(chunk, (kk - k0) * LANES, lanes);
                    ((kbs, bit_masks), sbs)
                };
                let entries = by_table::<G, V, BITS>(by_packed);
                steps::<V, BITS, FUSED, _>(&a, [k0, k1], sums, at, entries);
            }
        }
    }
}

/// Whether a direct task may read `expanded` in place ([`in_place`]): its values' offsets fit
/// the gathers' 32-bit ones.
pub(in crate::approx::gemm) fn fits(expanded: &Operand<'_>) -> bool {
    expanded.x.len() <= i32::MAX as usize
}

/// Steps `k0..k1` of [`in_place`] with the entries from the table's bytes ([`by_bytes`]), the
/// lanes' keys and scales of step `kk` at `(kk - k0) · LANES` of `chunk`.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
fn chunk_by_bytes<const V: usize, const BITS: u32, const FUSED: bool>(
    a: &Rows<'_>,
    [k0, k1]: [usize; 2],
    chunk: (&[u32], &[f32]),
    lanes: usize,
    bytes: &[u8],
    sums: &mut [f32],
) {
    let at = |kk: usize| {
        let (kbs, sbs, _) = lanes_at::<V>(chunk, (kk - k0) * LANES, lanes);
        // each lane's key in byte 2 of its word, where the permute picks its entry's byte
        (kbs.map(|kb| _mm512_slli_epi32::<16>(kb)), sbs)
    };
    steps::<V, BITS, FUSED, _>(a, [k0, k1], sums, at, by_bytes::<V, BITS>(bytes));
}

/// The lanes' keys and their bits 5, 6 and 7, as [`lookup`] reads them.
type Keys<const V: usize> = ([__m512i; V], [[__mmask16; 3]; V]);

/// A key's entries at the lanes' keys from the table by the packed side's key, `16 · G`
/// entries a row ([`lookup`]).
#[inline]
#[target_feature(enable = "avx512f")]
fn by_table<const G: usize, const V: usize, const BITS: u32>(
    by_packed: &[f32],
) -> impl Fn(Keys<V>, usize) -> [__m512; V] {
    assert!(by_packed.len() >= (1 << BITS) * 16 * G, "direct table");
    move |(kbs, bit_masks), key| {
        let row = &by_packed[key * 16 * G..(key + 1) * 16 * G];
        // SAFETY: G vectors of 16 within the row's 16·G entries.
        let r: [__m512; G] =
            std::array::from_fn(|g| unsafe { _mm512_loadu_ps(row.as_ptr().add(16 * g)) });
        std::array::from_fn(|v| lookup::<G>(&r, kbs[v], &bit_masks[v]))
    }
}

/// A key's entries at the lanes' keys (in byte 2 of each word) from the table's bytes
/// ([`BYTE_ROW`] a row): one byte permute a vector picks each lane's byte into byte 2 of its
/// word, the others zeroed, and the byte `(carry << m) | mantissa` shifted up to the
/// mantissa's top and added to the bits of 1.0 gives the entry, `0x3f80_0000 + (byte << (23 -
/// m))`, bit for bit.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
fn by_bytes<const V: usize, const BITS: u32>(
    bytes: &[u8],
) -> impl Fn([__m512i; V], usize) -> [__m512; V] {
    assert!(
        BITS <= 7 && bytes.len() >= (1 << BITS) * BYTE_ROW,
        "direct byte table"
    );
    // byte 2 of each word
    const PICK: __mmask64 = 0x4444_4444_4444_4444;
    move |idx, key| {
        let row = &bytes[key * BYTE_ROW..(key + 1) * BYTE_ROW];
        // SAFETY: two vectors of 64 bytes within the row's 128; the CPU supports AVX-512F,
        // BW and VBMI (this function's).
        unsafe {
            let lo = _mm512_loadu_si512(row.as_ptr().cast());
            let hi = _mm512_loadu_si512(row.as_ptr().add(64).cast());
            let one = _mm512_set1_epi32(0x3f80_0000);
            std::array::from_fn(|v| {
                let b = _mm512_maskz_permutex2var_epi8(PICK, lo, idx[v], hi);
                let b = _mm512_sll_epi32(b, _mm_cvtsi32_si128((7 - BITS) as i32));
                _mm512_castsi512_ps(_mm512_add_epi32(b, one))
            })
        }
    }
}

/// Steps `k0..k1` of a task of few rows without expanded tables: at each step, each row's
/// entries at the lanes (`entries(lanes(kk).0, key)`: the row's key's table entries at the
/// lanes' keys), times the lanes' scales (`lanes(kk).1`), times the row's scale, added to its
/// sums in registers (from `+0` at `k0 = 0`, else from `sums`); four rows at a time over the
/// steps. The same products in the same order as the expansion.
#[inline]
#[target_feature(enable = "avx512f")]
fn steps<const V: usize, const BITS: u32, const FUSED: bool, D: Copy>(
    a: &Rows<'_>,
    [k0, k1]: [usize; 2],
    sums: &mut [f32],
    lanes: impl Fn(usize) -> (D, [__m512; V]),
    entries: impl Fn(D, usize) -> [__m512; V],
) {
    let rows = a.r1 - a.r0;
    assert!(sums.len() == rows * 16 * V, "expansion sums");
    for i0 in (0..rows).step_by(ROWS) {
        let live = ROWS.min(rows - i0);
        let at = |j: usize, v: usize| (i0 + j) * 16 * V + 16 * v;
        let mut acc = [[_mm512_setzero_ps(); V]; ROWS];
        if k0 > 0 {
            for (j, acc) in acc.iter_mut().enumerate().take(live) {
                for (v, acc) in acc.iter_mut().enumerate() {
                    // SAFETY: 16 values of row i0 + j's sums (`rows · 16 · V`, asserted).
                    *acc = unsafe { _mm512_loadu_ps(sums.as_ptr().add(at(j, v))) };
                }
            }
        }
        for kk in k0..k1 {
            let (d, sbs) = lanes(kk);
            for (j, acc) in acc.iter_mut().enumerate().take(live) {
                let (scale, key) =
                    super::super::split(a.p.at(a.bt, a.r0 + i0 + j, kk).to_bits(), BITS);
                let scale = _mm512_set1_ps(scale);
                let e = entries(d, key);
                for (v, acc) in acc.iter_mut().enumerate() {
                    *acc = add_product::<FUSED>(*acc, scale, _mm512_mul_ps(e[v], sbs[v]));
                }
            }
        }
        for (j, acc) in acc.iter().enumerate().take(live) {
            for (v, &acc) in acc.iter().enumerate() {
                // SAFETY: 16 values of row i0 + j's sums (`rows · 16 · V` values, asserted).
                unsafe { _mm512_storeu_ps(sums.as_mut_ptr().add(at(j, v)), acc) };
            }
        }
    }
}
