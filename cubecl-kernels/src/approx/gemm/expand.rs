//! The host LUT GEMM by table expansion: no table lookup per product.
//!
//! With an `m`-bit table, an lhs value has one of `2^m` mantissa keys. So for each step `kk`
//! along `k` and a panel of [`LANES`] output columns, the table is expanded once against that
//! row of the rhs: `T[ma][l] = LUT[(ma << m) | mb(kk, l)] · sb(kk, l)`, every lhs mantissa `ma`
//! against the panel's `LANES` rhs values. Then every output row `i` adds
//! `sa(i, kk) · T[ma(i, kk)]`: a contiguous multiply and add over the panel's columns, with no
//! per-product gather. Expanding costs `2^m · LANES` products per step and panel, against
//! `rows · LANES` products of work, so it pays when the rows far outnumber `2^m`
//! ([`expands`]).
//!
//! **Two builds of the loops.** With AVX-512 each table row `T[ma]` is built without a gather
//! either: the `2^m` entries of the lhs key's table row sit in `2^m / 16` vectors, and
//! two-source permutes indexed by the panel's rhs keys pick each lane's entry (`m ≤ 4`: one
//! permute; `m = 7`: four, blended by key bits 5 and 6), then one multiply by the rhs scales.
//! Elsewhere (and in the tests, to check one against the other) a portable loop builds the
//! same rows entry by entry, vectorised by the compiler with AVX2 where present. The lhs is
//! packed once per product, per block of [`STEPS`] steps and row, its sign and exponent bits
//! and its key in one `u32`, so a row's steps are one contiguous read.
//!
//! **Bit-identical to the per-product path.** There a product is `(LUT · sa) · sb`, here
//! `sa · (LUT · sb)`. The scales are powers of two (or zero), so both round the same real value
//! once, provided neither `LUT · sa` nor `LUT · sb` leaves the normal range (a subnormal or an
//! overflowed intermediate would be rounded first). [`expands`] checks that for every operand
//! against the table's smallest and largest non-zero entry; a matrix with an operand outside the
//! band (a magnitude near `2^127`, an infinity, a NaN) takes the per-product path whole. The
//! sum runs over `kk` in order from `+0`, as there.
//!
//! When the lhs has fewer rows than the rhs has columns, the caller expands the lhs instead:
//! the transposed product `Cᵀ = Bᵀ · Aᵀ`, each product `(LUT · sb) · sa`, the same bits inside
//! the band (its table in [`by_rhs_key`]'s layout is the table itself).

use crate::approx::LutTable;
use rayon::prelude::*;

/// Output columns of a panel (two 512-bit vectors).
pub(super) const LANES: usize = 32;
/// Steps along `k` expanded together (each output row then adds four steps while its sums
/// stay in registers).
const STEPS: usize = 4;
/// Rows the expansion is shared by must be at least this many times `2^m`.
const ROWS_PER_KEY: usize = 2;
/// Table widths the expansion runs at (a block's expanded tables: `STEPS · 2^m · LANES` f32,
/// 128 KiB at `m = 8`).
const MAX_BITS: u32 = 8;

/// Whether a `[batch, rows, k] · [batch, k, n]` product under `table` takes the expansion:
/// enough rows for the expansion to pay, a narrow enough table, and every operand inside the
/// band where the two orders of multiplication give the same bits (see the module docs).
pub(super) fn expands(lhs: &[f32], rhs: &[f32], rows: usize, n: usize, table: &LutTable) -> bool {
    let bits = table.bits();
    if bits > MAX_BITS || rows < ROWS_PER_KEY << bits || n == 0 {
        return false;
    }
    let (lo, hi) = table
        .significands()
        .iter()
        .map(|s| s.abs())
        .filter(|&s| s != 0.0)
        .fold((f64::INFINITY, 0f64), |(lo, hi), s| {
            (lo.min(f64::from(s)), hi.max(f64::from(s)))
        });
    if !lo.is_finite() {
        // an all-zero table: every product is ±0 in both orders
        return true;
    }
    // a scale s = ±2^e (the value's sign and exponent) is safe when lo·|s| is normal and
    // hi·|s| is finite; zero and subnormal values have scale ±0, always safe
    let (min_normal, max_finite) = (f64::from(f32::MIN_POSITIVE), f64::from(f32::MAX));
    let safe = |x: &f32| {
        let scale = f32::from_bits(x.to_bits() & 0xff80_0000).abs();
        if !scale.is_finite() {
            return false;
        }
        let scale = f64::from(scale);
        scale == 0.0 || (lo * scale >= min_normal && hi * scale <= max_finite)
    };
    lhs.par_iter().all(safe) && rhs.par_iter().all(safe)
}

/// `table`'s entries with the rhs key first (`[mb][ma]`, a rhs key's `2^m` entries contiguous):
/// the layout [`gemm`] expands from. For the transposed product `Cᵀ = Bᵀ · Aᵀ`, whose rhs key
/// is the lhs key of `C`, that layout is `table` itself.
pub(super) fn by_rhs_key(table: &LutTable) -> Vec<f32> {
    let width = 1usize << table.bits();
    let lut = table.significands();
    (0..width * width)
        .map(|at| lut[((at % width) << table.bits()) | (at / width)])
        .collect()
}

/// The lhs packed for the accumulation, per batch entry `[k / STEPS][rows][steps]` (the last
/// block `k mod STEPS` steps wide): each value's sign and exponent bits (its scale) with its
/// table key `ma` in the low bits, `a_keys` being `ma << bits`.
fn pack_lhs(
    (a_keys, a_scales): (&[u32], &[f32]),
    [batch, rows, k]: [usize; 3],
    bits: u32,
) -> Vec<u32> {
    let mut out = vec![0u32; batch * rows * k];
    out.par_chunks_mut((rows * k).max(1))
        .enumerate()
        .for_each(|(bt, dst)| {
            for k0 in (0..k).step_by(STEPS) {
                let steps = STEPS.min(k - k0);
                let block = &mut dst[k0 * rows..(k0 + steps) * rows];
                for (i, row) in block.chunks_mut(steps).enumerate() {
                    let at = (bt * rows + i) * k + k0;
                    for (s, x) in row.iter_mut().enumerate() {
                        *x = a_scales[at + s].to_bits() | (a_keys[at + s] >> bits);
                    }
                }
            }
        });
    out
}

/// The table with the lhs key first, each key's row padded to at least 16 entries (the
/// AVX-512 build permutes whole vectors): `rows[ma · stride + mb]`, from the layout of
/// [`by_rhs_key`].
fn by_lhs_key(by_rhs: &[f32], bits: u32) -> (Vec<f32>, usize) {
    let width = 1usize << bits;
    let stride = width.max(16);
    let mut rows = vec![0f32; width * stride];
    for (ma, row) in rows.chunks_mut(stride).enumerate() {
        for (mb, entry) in row[..width].iter_mut().enumerate() {
            *entry = by_rhs[mb * width + ma];
        }
    }
    (rows, stride)
}

/// The product by expansion: `lhs` decoded keys (each `ma << m`) and scales `[batch, rows, k]`,
/// `rhs` keys and scales `[batch, k, n]`, both row-major; `out: [batch, rows, n]`; the `m`-bit
/// table in the layout of [`by_rhs_key`] (`by_rhs[mb · 2^m + ma]` multiplies `ma` by `mb`).
/// `simd`: whether the AVX-512 build may run (the tests run both builds).
pub(super) fn gemm(
    a: (&[u32], &[f32]),
    (b_keys, b_scales): (&[u32], &[f32]),
    [batch, rows, k, n]: [usize; 4],
    (by_rhs, bits): (&[f32], u32),
    simd: bool,
) -> Vec<f32> {
    let packed = pack_lhs(a, [batch, rows, k], bits);
    let by_lhs = by_lhs_key(by_rhs, bits);
    let panels = n.div_ceil(LANES);
    // tasks: (batch entry, panel, block of rows); rows split only when the panels alone leave
    // threads idle, never below `ROWS_PER_KEY · 2^m` rows a block
    let threads = rayon::current_num_threads();
    let splits = (2 * threads)
        .div_ceil(batch * panels)
        .min(rows / (ROWS_PER_KEY << bits))
        .max(1);
    let block = rows.div_ceil(splits);
    let blocks = rows.div_ceil(block);
    let parts: Vec<(usize, usize, usize, Vec<[f32; LANES]>)> = (0..batch * panels * blocks)
        .into_par_iter()
        .map(|t| {
            let (bt, p, r) = (t / (panels * blocks), t / blocks % panels, t % blocks);
            let (r0, r1) = (r * block, ((r + 1) * block).min(rows));
            let lhs = &packed[bt * rows * k..(bt + 1) * rows * k];
            let rhs = (&b_keys[bt * k * n..], &b_scales[bt * k * n..]);
            let sums = task(
                Rows {
                    packed: lhs,
                    rows,
                    r0,
                    r1,
                },
                rhs,
                [k, n, p * LANES],
                (by_rhs, (&by_lhs.0, by_lhs.1), bits),
                simd,
            );
            (bt, p, r0, sums)
        })
        .collect();
    let mut out = vec![0f32; batch * rows * n];
    for (bt, p, r0, sums) in parts {
        let (c0, c1) = (p * LANES, ((p + 1) * LANES).min(n));
        for (i, lanes) in sums.iter().enumerate() {
            let row = (bt * rows + r0 + i) * n;
            out[row + c0..row + c1].copy_from_slice(&lanes[..c1 - c0]);
        }
    }
    out
}

/// A task's rows `r0..r1` of one batch entry's packed lhs ([`pack_lhs`], `rows` in all).
#[derive(Clone, Copy)]
struct Rows<'a> {
    packed: &'a [u32],
    rows: usize,
    r0: usize,
    r1: usize,
}

impl Rows<'_> {
    /// The task's rows of the block of steps from `k0` (`steps` wide): `steps` values a row.
    fn block(&self, k0: usize, steps: usize) -> &[u32] {
        &self.packed[k0 * self.rows + self.r0 * steps..k0 * self.rows + self.r1 * steps]
    }
}

/// One task's sums: its rows against the panel of columns from `c0` of the rhs (keys and
/// scales `[k, n]`), a row of [`LANES`] sums per row (the columns past `n` are padded with
/// key 0 and scale 0 and dropped by the caller). The table both ways: by rhs key (the
/// portable build) and by lhs key with its row stride (the AVX-512 build).
fn task(
    a: Rows<'_>,
    b: (&[u32], &[f32]),
    dims: [usize; 3],
    (by_rhs, by_lhs, bits): (&[f32], (&[f32], usize), u32),
    simd: bool,
) -> Vec<[f32; LANES]> {
    #[cfg(target_arch = "x86_64")]
    {
        if simd && std::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F, checked just above.
            return unsafe { avx512::task(a, b, dims, by_lhs, bits) };
        }
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { task_avx2(a, b, dims, by_rhs, bits) };
        }
    }
    let _ = (simd, by_lhs);
    task_plain(a, b, dims, by_rhs, bits)
}

/// [`task_plain`] compiled for AVX2 (the same operations in the same order).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn task_avx2(
    a: Rows<'_>,
    b: (&[u32], &[f32]),
    dims: [usize; 3],
    by_rhs: &[f32],
    bits: u32,
) -> Vec<[f32; LANES]> {
    task_plain(a, b, dims, by_rhs, bits)
}

/// The portable build: each expanded row entry by entry from the table's rhs-key columns.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // lanes indexed alike in several arrays: vectorised as is
fn task_plain(
    a: Rows<'_>,
    (b_keys, b_scales): (&[u32], &[f32]),
    [k, n, c0]: [usize; 3],
    by_rhs: &[f32],
    bits: u32,
) -> Vec<[f32; LANES]> {
    let width = 1usize << bits;
    let lanes = (n - c0).min(LANES);
    let mut sums = vec![[0f32; LANES]; a.r1 - a.r0];
    // STEPS expanded tables, each `[2^m][LANES]`
    let mut expanded = vec![[0f32; LANES]; STEPS * width];
    for k0 in (0..k).step_by(STEPS) {
        let steps = STEPS.min(k - k0);
        for s in 0..steps {
            let at = (k0 + s) * n + c0;
            let table = &mut expanded[s * width..(s + 1) * width];
            for l in 0..LANES {
                // padded columns: zero scale, key 0
                let (key, scale) = if l < lanes {
                    (b_keys[at + l] as usize, b_scales[at + l])
                } else {
                    (0, 0.0)
                };
                let column = &by_rhs[key * width..(key + 1) * width];
                for (entry, &lut) in table.iter_mut().zip(column) {
                    entry[l] = lut * scale;
                }
            }
        }
        for (sum, row) in sums.iter_mut().zip(a.block(k0, steps).chunks(steps)) {
            let mut acc = *sum;
            for (s, &x) in row.iter().enumerate() {
                let scale = f32::from_bits(x & 0xff80_0000);
                let t = &expanded[s * width + (x as usize & (width - 1))];
                for l in 0..LANES {
                    acc[l] += scale * t[l];
                }
            }
            *sum = acc;
        }
    }
    sums
}

/// The AVX-512 build: expanded rows by permutes, sums in registers.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{LANES, Rows, STEPS};
    use std::arch::x86_64::*;

    /// 16-lane vectors in a panel.
    const V: usize = LANES / 16;

    /// The entries of an lhs key's table row (`G` vectors, `16 · G` entries) at the rhs keys
    /// `kb`: a two-source permute per pair of vectors (one permute when `G = 1`), the results
    /// blended by key bits 5, 6, 7 (`bit_masks`).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn lookup<const G: usize>(r: &[__m512; G], kb: __m512i, bit_masks: &[__mmask16; 3]) -> __m512 {
        if G == 1 {
            return _mm512_permutexvar_ps(kb, r[0]);
        }
        let mut q = [_mm512_setzero_ps(); 8];
        for j in 0..G / 2 {
            q[j] = _mm512_permutex2var_ps(r[2 * j], kb, r[2 * j + 1]);
        }
        let (mut live, mut level) = (G / 2, 0);
        while live > 1 {
            for j in 0..live / 2 {
                q[j] = _mm512_mask_blend_ps(bit_masks[level], q[2 * j], q[2 * j + 1]);
            }
            live /= 2;
            level += 1;
        }
        q[0]
    }

    /// [`super::task_plain`]'s sums, the same products in the same order, for a table row of
    /// `by_lhs.1` entries (16, 32, 64, 128 or 256).
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn task(
        a: Rows<'_>,
        b: (&[u32], &[f32]),
        dims: [usize; 3],
        (by_lhs, stride): (&[f32], usize),
        bits: u32,
    ) -> Vec<[f32; LANES]> {
        match stride / 16 {
            1 => task_g::<1>(a, b, dims, by_lhs, bits),
            2 => task_g::<2>(a, b, dims, by_lhs, bits),
            4 => task_g::<4>(a, b, dims, by_lhs, bits),
            8 => task_g::<8>(a, b, dims, by_lhs, bits),
            16 => task_g::<16>(a, b, dims, by_lhs, bits),
            _ => unreachable!("table rows of 16 to 256 entries"),
        }
    }

    #[target_feature(enable = "avx512f")]
    fn task_g<const G: usize>(
        a: Rows<'_>,
        (b_keys, b_scales): (&[u32], &[f32]),
        [k, n, c0]: [usize; 3],
        by_lhs: &[f32],
        bits: u32,
    ) -> Vec<[f32; LANES]> {
        let width = 1usize << bits;
        let lanes = (n - c0).min(LANES);
        let mut sums = vec![[0f32; LANES]; a.r1 - a.r0];
        let mut expanded = vec![[0f32; LANES]; STEPS * width];
        for k0 in (0..k).step_by(STEPS) {
            let steps = STEPS.min(k - k0);
            // the steps' rhs keys and scales (padded lanes: key 0, scale 0), and key bits 5-7
            let mut kbs = [[_mm512_setzero_si512(); V]; STEPS];
            let mut sbs = [[_mm512_setzero_ps(); V]; STEPS];
            let mut bit_masks = [[[0; 3]; V]; STEPS];
            for s in 0..steps {
                let at = (k0 + s) * n + c0;
                let (mut keys, mut scales) = ([0u32; LANES], [0f32; LANES]);
                keys[..lanes].copy_from_slice(&b_keys[at..at + lanes]);
                scales[..lanes].copy_from_slice(&b_scales[at..at + lanes]);
                for v in 0..V {
                    // SAFETY: 16 values from lane 16·v of a LANES-long array.
                    unsafe {
                        kbs[s][v] = _mm512_loadu_si512(keys.as_ptr().add(16 * v).cast());
                        sbs[s][v] = _mm512_loadu_ps(scales.as_ptr().add(16 * v));
                    }
                    for (bit, mask) in bit_masks[s][v].iter_mut().enumerate() {
                        *mask = _mm512_test_epi32_mask(kbs[s][v], _mm512_set1_epi32(32 << bit));
                    }
                }
            }
            for ma in 0..width {
                let row = &by_lhs[ma * 16 * G..(ma + 1) * 16 * G];
                // SAFETY: G vectors of 16 within the row's 16·G entries.
                let r: [__m512; G] =
                    std::array::from_fn(|j| unsafe { _mm512_loadu_ps(row.as_ptr().add(16 * j)) });
                for s in 0..steps {
                    let entry = &mut expanded[s * width + ma];
                    for v in 0..V {
                        let t =
                            _mm512_mul_ps(lookup::<G>(&r, kbs[s][v], &bit_masks[s][v]), sbs[s][v]);
                        // SAFETY: 16 values from lane 16·v of a LANES-long row.
                        unsafe { _mm512_storeu_ps(entry.as_mut_ptr().add(16 * v), t) };
                    }
                }
            }
            let mask = width as u32 - 1;
            for (sum, row) in sums.iter_mut().zip(a.block(k0, steps).chunks(steps)) {
                // SAFETY: V vectors of 16 within LANES-long rows.
                unsafe {
                    let mut acc: [__m512; V] =
                        std::array::from_fn(|v| _mm512_loadu_ps(sum.as_ptr().add(16 * v)));
                    for (s, &x) in row.iter().enumerate() {
                        let scale = _mm512_set1_ps(f32::from_bits(x & 0xff80_0000));
                        let t = &expanded[s * width + (x & mask) as usize];
                        for (v, acc) in acc.iter_mut().enumerate() {
                            let tv = _mm512_loadu_ps(t.as_ptr().add(16 * v));
                            *acc = _mm512_add_ps(*acc, _mm512_mul_ps(scale, tv));
                        }
                    }
                    for (v, acc) in acc.into_iter().enumerate() {
                        _mm512_storeu_ps(sum.as_mut_ptr().add(16 * v), acc);
                    }
                }
            }
        }
        sums
    }
}
