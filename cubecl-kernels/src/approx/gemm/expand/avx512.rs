//! The AVX-512 build of the expansion: each expanded table row by permutes (by transposes of
//! the lanes' table columns from `m = 7` on), the rows' sums in registers, four rows at a
//! time.

use super::{Operand, Rows, STEPS};
use std::arch::x86_64::*;

/// Tasks of few rows, without expanded tables.
mod direct;
pub(super) use direct::fits;

/// Rows a block adds at once (independent chains of multiply-adds).
const ROWS: usize = 4;

/// The entries of a packed key's table row (`G` vectors, `16 · G` entries) at the lanes' keys
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

/// `acc + scale · e`: a multiply, then an add, or one fused multiply-add (`FUSED`, where every
/// product is exact: [`super::Sum::Fused`]; the same bits, one instruction fewer).
#[inline]
#[target_feature(enable = "avx512f")]
fn add_product<const FUSED: bool>(acc: __m512, scale: __m512, e: __m512) -> __m512 {
    if FUSED {
        _mm512_fmadd_ps(scale, e, acc)
    } else {
        _mm512_add_ps(acc, _mm512_mul_ps(scale, e))
    }
}

/// A cache line of a table.
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Line([f32; 16]);

/// [`STEPS`] expanded tables of `2^m` entries each, an entry `V` lines (`16 · V` lanes), in
/// this thread's [`LINES`] (their contents unspecified: a block reads only the entries stored
/// for it).
struct Tables<'a, const V: usize> {
    lines: &'a mut [Line],
    width: usize,
}

thread_local! {
    /// This thread's expanded tables (256 KiB at most), kept between tasks: a zeroed
    /// allocation a task cost LeNet-5's small products a memset each.
    static LINES: std::cell::RefCell<Vec<Line>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl<const V: usize> Tables<'_, V> {
    /// Stores entry `ma` of step `s`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn store(&mut self, s: usize, ma: usize, t: [__m512; V]) {
        for (v, t) in t.into_iter().enumerate() {
            self.store_line(s, ma, v, t);
        }
    }

    /// Stores line `v` of entry `ma` of step `s`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn store_line(&mut self, s: usize, ma: usize, v: usize, t: __m512) {
        assert!(v < V, "expanded line");
        let line = &mut self.lines[(s * self.width + ma) * V + v];
        // SAFETY: one aligned line.
        unsafe { _mm512_store_ps(line.0.as_mut_ptr(), t) };
    }

    /// Step `s`'s first entry.
    fn step(&self, s: usize) -> *const Line {
        self.lines[s * self.width * V..].as_ptr()
    }
}

/// The first `S` steps from `k0` added to every row's sums (`16 · V` values a row): for each
/// row, each step in order, the value's scale times the entry of that step's table its key
/// picks. Four rows at a time, so that their sums' chains of additions overlap.
#[inline]
#[target_feature(enable = "avx512f")]
fn block<const V: usize, const BITS: u32, const S: usize, const FUSED: bool>(
    sums: &mut [f32],
    a: &Rows<'_>,
    k0: usize,
    tables: &Tables<'_, V>,
) {
    let p = a.p;
    let rows = a.r1 - a.r0;
    assert!(
        sums.len() >= rows * 16 * V && tables.width == 1 << BITS && S <= STEPS,
        "expansion block"
    );
    if rows == 0 || S == 0 {
        return;
    }
    // the steps' offsets; every row's value at each of them is in bounds (asserted)
    let (base, steps) = a.step_offsets::<S>(k0);
    let t: [*const Line; S] = std::array::from_fn(|s| tables.step(s));
    let x = p.x.as_ptr().cast::<u32>();
    // SAFETY: every value read, at `base + row(r0 + i) + steps[s]` for i < rows and s < S, is
    // in bounds (row offsets up to row `r1 - 1` are at most `row.last(r1)`, asserted above);
    // keys are below 2^BITS, each table's width (asserted); the sums hold `rows` rows of
    // `16 · V` values (asserted).
    let group = |i0: usize, live: usize, sums: &mut [f32]| unsafe {
        // rows past `live` repeat the last one (the same values stored again, in order)
        let at: [*const u32; ROWS] =
            std::array::from_fn(|j| x.add(base + p.row.at(a.r0 + i0 + j.min(live - 1))));
        let sum: [*mut f32; ROWS] =
            std::array::from_fn(|j| sums.as_mut_ptr().add((i0 + j.min(live - 1)) * 16 * V));
        // the first block's sums start from +0 (the buffer is not zeroed)
        let mut acc: [[__m512; V]; ROWS] = std::array::from_fn(|j| {
            std::array::from_fn(|v| match k0 {
                0 => _mm512_setzero_ps(),
                _ => _mm512_loadu_ps(sum[j].add(16 * v)),
            })
        });
        for (s, &table) in t.iter().enumerate() {
            for j in 0..ROWS {
                let (scale, key) = super::split(*at[j].add(steps[s]), BITS);
                let scale = _mm512_set1_ps(scale);
                let entry = table.add(key * V);
                for (v, acc) in acc[j].iter_mut().enumerate() {
                    let e = _mm512_load_ps(entry.add(v).cast());
                    *acc = add_product::<FUSED>(*acc, scale, e);
                }
            }
        }
        for j in 0..ROWS {
            for (v, acc) in acc[j].into_iter().enumerate() {
                _mm512_storeu_ps(sum[j].add(16 * v), acc);
            }
        }
    };
    // whole groups of four rows, then one at a time (one call site: the group is inlined)
    a.in_groups(ROWS, |i0, live| group(i0, live, sums));
}

/// [`super::task_plain`]'s sums, the same products in the same order, for a table of
/// `2^bits` entries a key (`by_packed.1` apart: 16 for `bits ≤ 4`); `fused`: each multiply and
/// add fused ([`super::Sum::Fused`], the same bits).
///
/// # Safety
/// The CPU must support AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn task(
    a: Rows<'_>,
    (keys, scales): (&[u32], &[f32]),
    dims: [usize; 3],
    (by_expanded, (by_packed, stride), bits): (&[f32], (&[f32], usize), u32),
    fused: bool,
    sums: &mut [f32],
) {
    debug_assert_eq!(stride, (1usize << bits).max(16), "table row stride");
    let tables = (by_expanded, by_packed);
    let b = Lanes::Packed(keys, scales);
    match fused {
        true => task_bits::<true>(a, b, dims, tables, bits, sums),
        false => task_bits::<false>(a, b, dims, tables, bits, sums),
    }
}

/// A task of few rows ([`super::direct`]) with its lanes read in place: `expanded`'s batch
/// entry `bt` (`direct::in_place`; `expanded` must pass [`fits`]). `bytes`: the table by the
/// packed side's key as bytes (`layouts::BYTE_ROW` a row), read where the CPU supports
/// AVX-512 VBMI and BW. `by_packed`, `bits` and `fused` as for [`task`].
///
/// # Safety
/// The CPU must support AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn direct_task(
    a: Rows<'_>,
    expanded: (Operand<'_>, usize),
    dims: [usize; 3],
    (by_packed, bytes): (&[f32], Option<&[u8]>),
    (bits, fused): (u32, bool),
    sums: &mut [f32],
) {
    let tables = (&[][..], by_packed);
    let b = Lanes::InPlace(expanded.0, expanded.1, bytes);
    match fused {
        true => task_bits::<true>(a, b, dims, tables, bits, sums),
        false => task_bits::<false>(a, b, dims, tables, bits, sums),
    }
}

/// Where a task reads the expanded side's lanes.
#[derive(Clone, Copy)]
enum Lanes<'a> {
    /// Packed keys and scales, `[k][n]`.
    Packed(&'a [u32], &'a [f32]),
    /// In place from an operand's batch entry (a direct task: `direct::in_place`), with the
    /// table as bytes where the byte permutes run.
    InPlace(Operand<'a>, usize, Option<&'a [u8]>),
}

/// [`task`] for one table width and panel width (the sums' vectors a row).
#[target_feature(enable = "avx512f")]
fn task_bits<const FUSED: bool>(
    a: Rows<'_>,
    b: Lanes<'_>,
    dims: [usize; 3],
    tables: (&[f32], &[f32]),
    bits: u32,
    sums: &mut [f32],
) {
    // a panel of at most 16 columns (a narrow product, the last panel): rows of sums of
    // one vector
    let narrow = sums.len() == 16 * (a.r1 - a.r0);
    match (bits, narrow) {
        (1, true) => task_g::<1, 1, 1, FUSED>(a, b, dims, tables, sums),
        (2, true) => task_g::<1, 1, 2, FUSED>(a, b, dims, tables, sums),
        (3, true) => task_g::<1, 1, 3, FUSED>(a, b, dims, tables, sums),
        (4, true) => task_g::<1, 1, 4, FUSED>(a, b, dims, tables, sums),
        (5, true) => task_g::<2, 1, 5, FUSED>(a, b, dims, tables, sums),
        (6, true) => task_g::<4, 1, 6, FUSED>(a, b, dims, tables, sums),
        (7, true) => task_g::<8, 1, 7, FUSED>(a, b, dims, tables, sums),
        (8, true) => task_g::<16, 1, 8, FUSED>(a, b, dims, tables, sums),
        (1, false) => task_g::<1, 2, 1, FUSED>(a, b, dims, tables, sums),
        (2, false) => task_g::<1, 2, 2, FUSED>(a, b, dims, tables, sums),
        (3, false) => task_g::<1, 2, 3, FUSED>(a, b, dims, tables, sums),
        (4, false) => task_g::<1, 2, 4, FUSED>(a, b, dims, tables, sums),
        (5, false) => task_g::<2, 2, 5, FUSED>(a, b, dims, tables, sums),
        (6, false) => task_g::<4, 2, 6, FUSED>(a, b, dims, tables, sums),
        (7, false) => task_g::<8, 2, 7, FUSED>(a, b, dims, tables, sums),
        (8, false) => task_g::<16, 2, 8, FUSED>(a, b, dims, tables, sums),
        _ => unreachable!("tables of 1 to 8 bits"),
    }
}

#[target_feature(enable = "avx512f")]
fn task_g<const G: usize, const V: usize, const BITS: u32, const FUSED: bool>(
    a: Rows<'_>,
    b: Lanes<'_>,
    [k, n, c0]: [usize; 3],
    (by_expanded, by_packed): (&[f32], &[f32]),
    sums: &mut [f32],
) {
    let [width, lanes, cols] = super::task_state(&a, sums, [n, c0], BITS);
    assert_eq!(cols, 16 * V, "expansion sums");
    let few = super::direct(a.r1 - a.r0, BITS, super::Build::Avx512, lanes);
    let (b_keys, b_scales) = match b {
        Lanes::InPlace(expanded, bt, bytes) => {
            assert!(few, "an in-place task runs directly");
            let (b, tables) = ((expanded, bt), (by_packed, bytes));
            return direct::in_place::<G, V, BITS, FUSED>(a, b, [k, n, c0], tables, sums);
        }
        Lanes::Packed(keys, scales) if few => {
            let b = (keys, scales);
            return direct::packed::<G, V, BITS, FUSED>(a, b, [k, n, c0], by_packed, sums);
        }
        Lanes::Packed(keys, scales) => (keys, scales),
    };
    let len = STEPS * width * V;
    crate::scratch::with_scratch(&LINES, len, usize::MAX, |lines| {
        let mut tables = Tables::<V> { lines, width };
        for k0 in (0..k).step_by(STEPS) {
            let steps = STEPS.min(k - k0);
            // the steps' rhs keys and scales (padded lanes: key 0, scale 0), and key bits 5-7
            let mut kbs = [[_mm512_setzero_si512(); V]; STEPS];
            let mut sbs = [[_mm512_setzero_ps(); V]; STEPS];
            let mut bit_masks = [[[0; 3]; V]; STEPS];
            for s in 0..steps {
                (kbs[s], sbs[s], bit_masks[s]) =
                    lanes_at::<V>((b_keys, b_scales), (k0 + s) * n + c0, lanes);
            }
            if BITS >= TRANSPOSED_BITS {
                for (s, sbs) in sbs.iter().enumerate().take(steps) {
                    let at = (k0 + s) * n + c0;
                    for (v, &sb) in sbs.iter().enumerate() {
                        let live = lanes.saturating_sub(16 * v).min(16);
                        let keys = &b_keys[at + 16 * v..at + 16 * v + live];
                        expand_transposed(&mut tables, [s, v], by_expanded, keys, sb);
                    }
                }
            } else {
                for ma in 0..width {
                    let row = &by_packed[ma * 16 * G..(ma + 1) * 16 * G];
                    // SAFETY: G vectors of 16 within the row's 16·G entries.
                    let r: [__m512; G] = std::array::from_fn(|j| unsafe {
                        _mm512_loadu_ps(row.as_ptr().add(16 * j))
                    });
                    for s in 0..steps {
                        let t = std::array::from_fn(|v| {
                            _mm512_mul_ps(lookup::<G>(&r, kbs[s][v], &bit_masks[s][v]), sbs[s][v])
                        });
                        tables.store(s, ma, t);
                    }
                }
            }
            match steps {
                STEPS => block::<V, BITS, STEPS, FUSED>(&mut *sums, &a, k0, &tables),
                1 => block::<V, BITS, 1, FUSED>(&mut *sums, &a, k0, &tables),
                2 => block::<V, BITS, 2, FUSED>(&mut *sums, &a, k0, &tables),
                3 => block::<V, BITS, 3, FUSED>(&mut *sums, &a, k0, &tables),
                4 => block::<V, BITS, 4, FUSED>(&mut *sums, &a, k0, &tables),
                5 => block::<V, BITS, 5, FUSED>(&mut *sums, &a, k0, &tables),
                6 => block::<V, BITS, 6, FUSED>(&mut *sums, &a, k0, &tables),
                7 => block::<V, BITS, 7, FUSED>(&mut *sums, &a, k0, &tables),
                _ => unreachable!("1 to {STEPS} steps"),
            }
        }
    });
}

/// The table width from which the expansion transposes the lanes' table columns
/// ([`expand_transposed`]) rather than permuting each packed key's table row ([`lookup`]):
/// four shuffles an entry-vector against four permutes and three blends at `m = 7`, eight
/// and seven at `m = 8` (at `m = 6`, two permutes and a blend; below, one permute).
const TRANSPOSED_BITS: u32 = 7;

/// Line `v` of every entry of step `s`'s table: the lanes' table columns (`keys`: their keys,
/// the live lanes of vector `v`; padded lanes read key 0 and have scale 0), 16 entries at a
/// time transposed in registers into 16 entries of 16 lanes, times the lanes' scales `sb`.
/// The entries [`lookup`] picks, bit for bit.
#[inline]
#[target_feature(enable = "avx512f")]
fn expand_transposed<const V: usize>(
    tables: &mut Tables<'_, V>,
    [s, v]: [usize; 2],
    by_expanded: &[f32],
    keys: &[u32],
    sb: __m512,
) {
    let width = tables.width;
    assert!(
        keys.len() <= 16
            && width.is_multiple_of(16)
            && by_expanded.len() >= width * width
            && keys.iter().all(|&key| (key as usize) < width),
        "transposed expansion"
    );
    let at: [usize; 16] = std::array::from_fn(|l| keys.get(l).map_or(0, |&key| key as usize));
    for ma0 in (0..width).step_by(16) {
        // SAFETY: 16 values of row `at[l] < width` from `ma0 ≤ width - 16`, inside the table
        // of `width · width` entries (asserted).
        let r: [__m512; 16] = std::array::from_fn(|l| unsafe {
            _mm512_loadu_ps(by_expanded.as_ptr().add(at[l] * width + ma0))
        });
        for (j, w) in transposed(r).into_iter().enumerate() {
            tables.store_line(s, ma0 + j, v, _mm512_mul_ps(w, sb));
        }
    }
}

/// A panel's lanes at step `kk`: their keys and scales (padded lanes: key 0, scale 0) and the
/// keys' bits 5, 6 and 7 (for [`lookup`]), `V` vectors of 16.
#[inline]
#[target_feature(enable = "avx512f")]
fn lanes_at<const V: usize>(
    (b_keys, b_scales): (&[u32], &[f32]),
    at: usize,
    lanes: usize,
) -> ([__m512i; V], [__m512; V], [[__mmask16; 3]; V]) {
    let (keys, scales) = (&b_keys[at..at + lanes], &b_scales[at..at + lanes]);
    let mut kbs = [_mm512_setzero_si512(); V];
    let mut sbs = [_mm512_setzero_ps(); V];
    let mut bit_masks = [[0; 3]; V];
    for v in 0..V {
        let live = lanes.saturating_sub(16 * v).min(16);
        let mask = ((1u32 << live) - 1) as __mmask16;
        // SAFETY: the masked loads read the live lanes only, inside `keys` and `scales`.
        unsafe {
            kbs[v] = _mm512_maskz_loadu_epi32(mask, keys.as_ptr().add(16 * v).cast());
            sbs[v] = _mm512_maskz_loadu_ps(mask, scales.as_ptr().add(16 * v));
        }
        for (bit, m) in bit_masks[v].iter_mut().enumerate() {
            *m = _mm512_test_epi32_mask(kbs[v], _mm512_set1_epi32(32 << bit));
        }
    }
    (kbs, sbs, bit_masks)
}

/// Each value's scale and key ([`super::split`]), 16 values at a time (the expanded side's
/// runs of contiguous lanes).
///
/// # Safety
/// The CPU must support AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn split_run(x: &[f32], keys: &mut [u32], scales: &mut [f32], bits: u32) {
    assert!(
        keys.len() == x.len() && scales.len() == x.len() && (1..=23).contains(&bits),
        "split run"
    );
    let shift = _mm_cvtsi32_si128((23 - bits) as i32);
    let key_mask = _mm512_set1_epi32(((1u32 << bits) - 1) as i32);
    let scale_mask = _mm512_set1_epi32(0xff80_0000u32 as i32);
    for i in (0..x.len()).step_by(16) {
        let live = (x.len() - i).min(16);
        let m = ((1u32 << live) - 1) as __mmask16;
        // SAFETY: the masked loads and stores touch the `live` values from `i` on, inside the
        // three slices of one length (asserted).
        unsafe {
            let v = _mm512_maskz_loadu_epi32(m, x.as_ptr().add(i).cast());
            let k = _mm512_and_si512(_mm512_srl_epi32(v, shift), key_mask);
            let s = _mm512_and_si512(v, scale_mask);
            _mm512_mask_storeu_epi32(keys.as_mut_ptr().add(i).cast(), m, k);
            _mm512_mask_storeu_epi32(scales.as_mut_ptr().add(i).cast(), m, s);
        }
    }
}

/// Each value's scale and key ([`super::split`]) at 16 steps of `n` lanes, lane `l`'s 16
/// values one after another from `x[lane(l)]`: `keys` and `scales` hold `[16][n]`
/// ([`super::operand::split_transposed`], 16 × 16 transposes and [`split_run`]).
///
/// # Safety
/// The CPU must support AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn split_steps(
    x: &[f32],
    lane: impl Fn(usize) -> usize,
    keys: &mut [u32],
    scales: &mut [f32],
    bits: u32,
) {
    super::operand::split_transposed::<16>(
        x,
        lane,
        (keys, scales),
        // SAFETY (both): the CPU supports AVX-512F (this function's contract).
        |x, at| unsafe { transpose16_at(x, at) },
        |v, keys, scales| unsafe { split_run(v, keys, scales, bits) },
    )
}

/// The 16 × 16 values from `src` (16 rows `stride` apart, 16 values each) transposed: entry `j`
/// holds value `j` of every row, in row order.
///
/// # Safety
/// The CPU must support AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn transpose16(src: &[f32], stride: usize) -> [[f32; 16]; 16] {
    assert!(src.len() >= 15 * stride + 16, "transposed block");
    // SAFETY: the CPU supports AVX-512F (this function's contract).
    unsafe { transpose16_at(src, std::array::from_fn(|i| i * stride)) }
}

/// [`transpose16`] of the 16 rows of 16 values from `src[at[i]]`.
///
/// # Safety
/// The CPU must support AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn transpose16_at(src: &[f32], at: [usize; 16]) -> [[f32; 16]; 16] {
    assert!(at.iter().all(|&a| a + 16 <= src.len()), "transposed block");
    // SAFETY: 16 rows of 16 values inside `src` (asserted).
    let r: [__m512; 16] =
        std::array::from_fn(|i| unsafe { _mm512_loadu_ps(src.as_ptr().add(at[i])) });
    let w = transposed(r);
    let mut out = [[0f32; 16]; 16];
    for (row, w) in out.iter_mut().zip(w) {
        // SAFETY: 16 values into a 16-value array.
        unsafe { _mm512_storeu_ps(row.as_mut_ptr(), w) };
    }
    out
}

/// The 16 × 16 values of `r` transposed in registers: vector `j` holds value `j` of every
/// vector of `r`, in order.
#[inline]
#[target_feature(enable = "avx512f")]
fn transposed(r: [__m512; 16]) -> [__m512; 16] {
    // pairs of rows interleaved, then pairs of pairs: 4 × 4 blocks transposed in each 128-bit
    // lane
    let t: [__m512; 16] = std::array::from_fn(|i| {
        let (a, b) = (r[i & !1], r[i | 1]);
        if i % 2 == 0 {
            _mm512_unpacklo_ps(a, b)
        } else {
            _mm512_unpackhi_ps(a, b)
        }
    });
    let u: [__m512; 16] = std::array::from_fn(|i| {
        let base = i & !3;
        let (a, b) = (
            _mm512_castps_pd(t[base + (i & 2) / 2]),
            _mm512_castps_pd(t[base + 2 + (i & 2) / 2]),
        );
        _mm512_castpd_ps(if i % 2 == 0 {
            _mm512_unpacklo_pd(a, b)
        } else {
            _mm512_unpackhi_pd(a, b)
        })
    });
    // then the 128-bit lanes: of registers 4 apart, and of those 8 apart
    let v: [__m512; 16] = std::array::from_fn(|i| {
        let (group, k) = (i / 8, i % 4);
        let (a, b) = (u[8 * group + k], u[8 * group + 4 + k]);
        if i % 8 < 4 {
            _mm512_shuffle_f32x4::<0x88>(a, b)
        } else {
            _mm512_shuffle_f32x4::<0xdd>(a, b)
        }
    });
    std::array::from_fn(|i| {
        let (a, b) = (v[i % 8], v[8 + i % 8]);
        if i < 8 {
            _mm512_shuffle_f32x4::<0x88>(a, b)
        } else {
            _mm512_shuffle_f32x4::<0xdd>(a, b)
        }
    })
}

#[cfg(test)]
mod tests {
    /// `len` values of every sign, exponent and mantissa pattern an LCG gives, a negative zero,
    /// a subnormal and a NaN first.
    fn values(len: usize) -> Vec<f32> {
        let mut s = 7u64;
        (0..len)
            .map(|i| match i {
                0 => -0.0,
                1 => f32::from_bits(3),
                2 => f32::NAN,
                _ => {
                    s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    f32::from_bits((s >> 32) as u32)
                }
            })
            .collect()
    }

    #[test]
    fn split_run_splits_as_split() {
        if !std::is_x86_feature_detected!("avx512f") {
            return;
        }
        // lengths around whole vectors
        let x = values(53);
        for bits in [1, 5, 7, 8] {
            for len in [0, 1, 15, 16, 17, 53] {
                let (mut keys, mut scales) = (vec![9u32; len], vec![9f32; len]);
                // SAFETY: the CPU supports AVX-512F, checked above.
                unsafe { super::split_run(&x[..len], &mut keys, &mut scales, bits) };
                for (i, v) in x[..len].iter().enumerate() {
                    let (scale, key) = super::super::split(v.to_bits(), bits);
                    assert_eq!(
                        (keys[i] as usize, scales[i].to_bits()),
                        (key, scale.to_bits())
                    );
                }
            }
        }
    }

    #[test]
    fn split_steps_splits_each_lane_as_split() {
        if !std::is_x86_feature_detected!("avx512f") {
            return;
        }
        // lane counts below, at and past whole vectors of 16; strides with padding between
        // lanes, and one under 16 (lanes overlapping)
        let x = values(40 * 35 + 16);
        for bits in [5, 7] {
            for n in [1, 6, 16, 17, 35] {
                for stride in [5, 16, 40] {
                    let (mut keys, mut scales) = (vec![9u32; 16 * n], vec![9f32; 16 * n]);
                    // SAFETY: the CPU supports AVX-512F, checked above.
                    let lane = |l: usize| l * stride;
                    unsafe { super::split_steps(&x, lane, &mut keys, &mut scales, bits) };
                    for (i, (key, scale)) in keys.iter().zip(&scales).enumerate() {
                        let (j, l) = (i / n, i % n);
                        let (want_scale, want_key) =
                            super::super::split(x[l * stride + j].to_bits(), bits);
                        assert_eq!(
                            (*key as usize, scale.to_bits()),
                            (want_key, want_scale.to_bits()),
                            "{n} lanes {stride} apart, step {j}, lane {l}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn transpose16_transposes() {
        if !std::is_x86_feature_detected!("avx512f") {
            return;
        }
        // 16 rows of 16 values, 19 apart (padding between rows)
        let src: Vec<f32> = (0..15 * 19 + 16).map(|i| i as f32).collect();
        // SAFETY: the CPU supports AVX-512F, checked above.
        let t = unsafe { super::transpose16(&src, 19) };
        for (j, row) in t.iter().enumerate() {
            for (i, &v) in row.iter().enumerate() {
                assert_eq!(v, src[i * 19 + j], "[{j}][{i}]");
            }
        }
    }
}
