//! The AVX2 build of the expansion: each step's expanded tables by 8 × 8 transposes of the
//! table's columns (one column per lane's key), the rows' sums in registers, several rows at a
//! time.
//!
//! An expanded entry `T[ma][l] = LUT[(ma << m) | key_l] · scale_l` is, for the 8 lanes of a
//! vector, entry `ma` of 8 table columns (the table by the expanded side's key holds each
//! key's column contiguous): 8 columns of 8 entries are read as 16 half-vectors and
//! transposed within the 128-bit halves (no lane-crossing shuffle), then multiplied by the
//! lanes' scales. The same multiplication as the portable build's, entry for entry.
//!
//! A task of fewer rows than the expansion needs runs [`direct`]ly: each row's entries read
//! at each step, no expanded tables. Both add a row's products by one fused multiply-add where
//! every product is exact ([`super::Sum::Fused`]; the same bits), so the build needs FMA beside
//! AVX2.

use super::{LANES, Operand, Rows, STEPS};
use std::arch::x86_64::*;

/// A vector of a table entry.
#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
struct Line([f32; 8]);

thread_local! {
    /// This thread's expanded tables (256 KiB at most), kept between tasks.
    static LINES: std::cell::RefCell<Vec<Line>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// [`STEPS`] expanded tables of `width` entries each, an entry `V` lines (`8 · V` lanes).
struct Tables<'a, const V: usize> {
    lines: &'a mut [Line],
    width: usize,
}

impl<const V: usize> Tables<'_, V> {
    /// Stores line `v` of entry `ma` of step `s`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn store(&mut self, s: usize, ma: usize, v: usize, t: __m256) {
        let line = &mut self.lines[(s * self.width + ma) * V + v];
        // SAFETY: one aligned line.
        unsafe { _mm256_store_ps(line.0.as_mut_ptr(), t) };
    }
}

/// The sums of a task of the AVX2 build, [`super::task_plain`]'s products in the same order:
/// `8 · V` values a row of `sums`, `V` from 1 to 4. (A plan of fewer packed rows than the
/// expansion needs runs its tasks by [`direct_in_place`] instead.) Where `fused`
/// ([`super::Sum::Fused`]: every product is exact), each multiply and add is one fused
/// multiply-add, the same bits.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn task(
    a: Rows<'_>,
    b: (&[u32], &[f32]),
    dims: [usize; 3],
    by_expanded: &[f32],
    (bits, fused): (u32, bool),
    sums: &mut [f32],
) {
    match fused {
        true => task_cols::<true>(a, b, dims, by_expanded, bits, sums),
        false => task_cols::<false>(a, b, dims, by_expanded, bits, sums),
    }
}

/// [`task`] of a `FUSED` sum.
#[target_feature(enable = "avx2,fma")]
fn task_cols<const FUSED: bool>(
    a: Rows<'_>,
    b: (&[u32], &[f32]),
    dims: [usize; 3],
    by_expanded: &[f32],
    bits: u32,
    sums: &mut [f32],
) {
    let cols = sums.len() / (a.r1 - a.r0).max(1);
    // rows a group adds at once: as many chains of additions as the registers hold
    match cols {
        8 => task_v::<1, 8, FUSED>(a, b, dims, by_expanded, bits, sums),
        16 => task_v::<2, 4, FUSED>(a, b, dims, by_expanded, bits, sums),
        24 => task_v::<3, 3, FUSED>(a, b, dims, by_expanded, bits, sums),
        32 => task_v::<4, 2, FUSED>(a, b, dims, by_expanded, bits, sums),
        _ => unreachable!("rows of 8 to 32 sums"),
    }
}

/// A task of fewer rows than the expansion needs ([`super::direct`]) without expanded tables,
/// by [`direct`] for the panel's vectors of lanes. A plan of fewer packed rows than the
/// expansion needs runs every task this way. `fused` as in [`task`].
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn direct_in_place(
    a: Rows<'_>,
    expanded: (Operand<'_>, usize),
    dims: [usize; 3],
    by_expanded: &[f32],
    (bits, fused): (u32, bool),
    sums: &mut [f32],
) {
    let [_, n, c0] = dims;
    let vectors = n.saturating_sub(c0).div_ceil(8);
    match (vectors, fused) {
        (0 | 1, false) => direct::<1, false>(a, expanded, dims, by_expanded, bits, sums),
        (2, false) => direct::<2, false>(a, expanded, dims, by_expanded, bits, sums),
        (3, false) => direct::<3, false>(a, expanded, dims, by_expanded, bits, sums),
        (_, false) => direct::<4, false>(a, expanded, dims, by_expanded, bits, sums),
        (0 | 1, true) => direct::<1, true>(a, expanded, dims, by_expanded, bits, sums),
        (2, true) => direct::<2, true>(a, expanded, dims, by_expanded, bits, sums),
        (3, true) => direct::<3, true>(a, expanded, dims, by_expanded, bits, sums),
        (_, true) => direct::<4, true>(a, expanded, dims, by_expanded, bits, sums),
    }
}

/// A task without expanded tables: at each step the panel's lanes, `expanded`'s rows from
/// `c0` (of batch entry `bt`), are read in place and split into keys and scales (nothing is
/// packed: each lane's value is read once a step either way, and packing them first wrote and
/// read again every value, LeNet-5's conv1 weight gradient 1.25 M); then each row's entries
/// are read from its key's entries of the lanes' table columns (what [`expand_vector`] reads),
/// 8 lanes a vector, times the lanes' scales, times the row's scale, and added to its sums.
/// The same products in the same order as the expansion. Steps outside, rows inside: a step's
/// lanes are read once for all the rows, whose sums stay in L1 (with the sums of a few rows in
/// registers across the steps, the lanes' columns were spilled to the stack and read again for
/// every few rows).
#[target_feature(enable = "avx2,fma")]
fn direct<const V: usize, const FUSED: bool>(
    a: Rows<'_>,
    (expanded, bt): (Operand<'_>, usize),
    [k, n, c0]: [usize; 3],
    by_expanded: &[f32],
    bits: u32,
    sums: &mut [f32],
) {
    let [width, lanes, cols] = super::task_state(&a, sums, [n, c0], bits);
    assert!(
        cols == 8 * V && lanes <= 8 * V && by_expanded.len() >= width * width,
        "expansion direct task"
    );
    let table = by_expanded[..width * width].as_ptr();
    // the lanes' offsets in `expanded` (their rows, of entry `bt`)
    let base = expanded.base + bt * expanded.batch;
    let offsets: [usize; LANES] = std::array::from_fn(|l| {
        if l < lanes {
            base + expanded.row.at(c0 + l)
        } else {
            0
        }
    });
    // the sums run from +0; the rows in whole groups of three
    sums.fill(0.0);
    let grouped = sums.len() / cols / 3 * 3;
    for kk in 0..k {
        // the lanes' table columns (their keys times 2^m, below `width²`) and scales; padded
        // lanes: key 0, scale 0
        let (mut columns, mut scales) = ([[0u32; 8]; V], [[0f32; 8]; V]);
        let step = expanded.step.at(kk);
        for (l, &at) in offsets[..lanes].iter().enumerate() {
            let (scale, key) = super::split(expanded.x[at + step].to_bits(), bits);
            columns[l / 8][l % 8] = (key as u32 & (width as u32 - 1)) << bits;
            scales[l / 8][l % 8] = scale;
        }
        // SAFETY: 8 values of each vector of scales.
        let sbs: [__m256; V] =
            std::array::from_fn(|v| unsafe { _mm256_loadu_ps(scales[v].as_ptr()) });
        // rows in groups of three (each lane's column offset read once for the group), the
        // rest one by one
        let row = |i: usize| super::split(a.p.at(a.bt, a.r0 + i, kk).to_bits(), bits);
        let mut groups = sums.chunks_exact_mut(3 * cols);
        for (g, sums) in groups.by_ref().enumerate() {
            let rows = [row(3 * g), row(3 * g + 1), row(3 * g + 2)];
            // SAFETY: `table` holds `width²` values; `sums` three rows of `8 · V`.
            unsafe { direct_rows::<3, V, FUSED>(sums, rows, &columns, sbs, table) };
        }
        for (i, sums) in groups.into_remainder().chunks_exact_mut(cols).enumerate() {
            // SAFETY: as above, one row.
            unsafe { direct_rows::<1, V, FUSED>(sums, [row(grouped + i)], &columns, sbs, table) };
        }
    }
}

/// One step of `R` rows of a [`direct`] task added to their sums (`R` rows of `8 · V`): each
/// row's entries (its key's entry of each lane's column, read one by one: a `vgatherdps` took
/// 2.7 times as long on Zen 1) times the lanes' scales, times the row's scale. `rows`: each
/// row's scale and key.
///
/// # Safety
/// `table` holds `column + key` for every column and key (`width²` values); `sums` holds
/// `R · 8 · V` values.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn direct_rows<const R: usize, const V: usize, const FUSED: bool>(
    sums: &mut [f32],
    rows: [(f32, usize); R],
    columns: &[[u32; 8]; V],
    sbs: [__m256; V],
    table: *const f32,
) {
    assert!(sums.len() >= R * 8 * V, "direct rows");
    for v in 0..V {
        let c = &columns[v];
        for (j, &(scale, key)) in rows.iter().enumerate() {
            // SAFETY: by the caller's contract.
            unsafe {
                let e = |l: usize| *table.add(c[l] as usize + key);
                let e = _mm256_setr_ps(e(0), e(1), e(2), e(3), e(4), e(5), e(6), e(7));
                let e = _mm256_mul_ps(e, sbs[v]);
                let sum = sums.as_mut_ptr().add(j * 8 * V + 8 * v);
                let acc = _mm256_loadu_ps(sum);
                _mm256_storeu_ps(sum, add_product::<FUSED>(acc, _mm256_set1_ps(scale), e));
            }
        }
    }
}

#[target_feature(enable = "avx2,fma")]
fn task_v<const V: usize, const R: usize, const FUSED: bool>(
    a: Rows<'_>,
    (b_keys, b_scales): (&[u32], &[f32]),
    [k, n, c0]: [usize; 3],
    by_expanded: &[f32],
    bits: u32,
    sums: &mut [f32],
) {
    let [width, lanes, cols] = super::task_state(&a, sums, [n, c0], bits);
    assert!(
        cols == 8 * V && lanes <= 8 * V && by_expanded.len() >= width * width,
        "expansion sums"
    );
    crate::scratch::with_scratch(&LINES, STEPS * width * V, usize::MAX, |lines| {
        let mut tables = Tables::<V> { lines, width };
        for k0 in (0..k).step_by(STEPS) {
            let steps = STEPS.min(k - k0);
            for s in 0..steps {
                let at = (k0 + s) * n + c0;
                // padded lanes: key 0, scale 0
                let mut keys = [0usize; LANES];
                let mut scales = [0f32; LANES];
                for l in 0..lanes {
                    keys[l] = b_keys[at + l] as usize & (width - 1);
                    scales[l] = b_scales[at + l];
                }
                for v in 0..V {
                    expand_vector(&mut tables, [s, v], by_expanded, &keys, &scales);
                }
            }
            match steps {
                STEPS => block::<V, R, STEPS, FUSED>(&mut *sums, &a, k0, &tables, bits),
                1 => block::<V, R, 1, FUSED>(&mut *sums, &a, k0, &tables, bits),
                2 => block::<V, R, 2, FUSED>(&mut *sums, &a, k0, &tables, bits),
                3 => block::<V, R, 3, FUSED>(&mut *sums, &a, k0, &tables, bits),
                4 => block::<V, R, 4, FUSED>(&mut *sums, &a, k0, &tables, bits),
                5 => block::<V, R, 5, FUSED>(&mut *sums, &a, k0, &tables, bits),
                6 => block::<V, R, 6, FUSED>(&mut *sums, &a, k0, &tables, bits),
                7 => block::<V, R, 7, FUSED>(&mut *sums, &a, k0, &tables, bits),
                _ => unreachable!("1 to {STEPS} steps"),
            }
        }
    });
}

/// Line `v` of every entry of step `s`'s expanded table: lanes `8v..8v + 8` (their keys below
/// the table's width, checked by the caller's mask) times their scales.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn expand_vector<const V: usize>(
    tables: &mut Tables<'_, V>,
    [s, v]: [usize; 2],
    by_expanded: &[f32],
    keys: &[usize; LANES],
    scales: &[f32; LANES],
) {
    let width = tables.width;
    // the lanes' table columns, each `width` entries
    let col: [&[f32]; 8] = std::array::from_fn(|i| {
        let key = keys[8 * v + i];
        &by_expanded[key * width..(key + 1) * width]
    });
    // SAFETY: 8 values of `scales` from 8v (v < V ≤ 4).
    let sb = unsafe { _mm256_loadu_ps(scales.as_ptr().add(8 * v)) };
    if width < 8 {
        for ma in 0..width {
            let e: [f32; 8] = col.map(|c| c[ma]);
            // SAFETY: 8 values of `e`.
            let e = unsafe { _mm256_loadu_ps(e.as_ptr()) };
            tables.store(s, ma, v, _mm256_mul_ps(e, sb));
        }
        return;
    }
    for ma0 in (0..width).step_by(8) {
        // r[h·4 + i]: entries ma0 + 4h.. + 4 of lane i (low half) and lane i + 4 (high half)
        let r: [__m256; 8] = std::array::from_fn(|j| {
            let (h, i) = (j / 4, j % 4);
            let at = ma0 + 4 * h;
            // SAFETY: 4 entries of each column from `at`, `at + 4 ≤ width`.
            unsafe {
                _mm256_insertf128_ps::<1>(
                    _mm256_castps128_ps256(_mm_loadu_ps(col[i].as_ptr().add(at))),
                    _mm_loadu_ps(col[i + 4].as_ptr().add(at)),
                )
            }
        });
        for h in 0..2 {
            // a 4 × 4 transpose in each half: entry ma0 + 4h + j of the 8 lanes in order
            let q = &r[4 * h..4 * h + 4];
            let t0 = _mm256_unpacklo_ps(q[0], q[1]);
            let t1 = _mm256_unpackhi_ps(q[0], q[1]);
            let t2 = _mm256_unpacklo_ps(q[2], q[3]);
            let t3 = _mm256_unpackhi_ps(q[2], q[3]);
            let e = [
                _mm256_shuffle_ps::<0x44>(t0, t2),
                _mm256_shuffle_ps::<0xee>(t0, t2),
                _mm256_shuffle_ps::<0x44>(t1, t3),
                _mm256_shuffle_ps::<0xee>(t1, t3),
            ];
            for (j, e) in e.into_iter().enumerate() {
                tables.store(s, ma0 + 4 * h + j, v, _mm256_mul_ps(e, sb));
            }
        }
    }
}

/// The first `S` steps from `k0` added to every row's sums (`8 · V` values a row): for each
/// row, each step in order, the value's scale times the entry of that step's table its key
/// picks. `R` rows at a time, so that their sums' chains of additions overlap.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn block<const V: usize, const R: usize, const S: usize, const FUSED: bool>(
    sums: &mut [f32],
    a: &Rows<'_>,
    k0: usize,
    tables: &Tables<'_, V>,
    bits: u32,
) {
    let p = a.p;
    let rows = a.r1 - a.r0;
    let width = tables.width;
    assert!(
        sums.len() >= rows * 8 * V && width == 1 << bits && S <= STEPS,
        "expansion block"
    );
    assert!(tables.lines.len() >= S * width * V, "expansion tables");
    if rows == 0 || S == 0 {
        return;
    }
    // the steps' offsets; every row's value at each of them is in bounds (asserted)
    let (base, steps) = a.step_offsets::<S>(k0);
    let t: [*const Line; S] = std::array::from_fn(|s| tables.lines[s * width * V..].as_ptr());
    let x = p.x.as_ptr();
    let shift = 23 - bits;
    let key_mask = (1u32 << bits) - 1;
    let scale_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0xff80_0000u32 as i32));
    // SAFETY: every value read, at `base + row(r0 + i) + steps[s]` for i < rows and s < S, is
    // in bounds (row offsets up to row `r1 - 1` are at most `row.last(r1)`, asserted above);
    // keys are below 2^bits, each table's width, and the tables hold S steps (asserted); the
    // sums hold `rows` rows of `8 · V` values (asserted).
    let group = |i0: usize, live: usize, sums: &mut [f32]| unsafe {
        // rows past `live` repeat the last one (the same values stored again, in order)
        let at: [*const f32; R] =
            std::array::from_fn(|j| x.add(base + p.row.at(a.r0 + i0 + j.min(live - 1))));
        let sum: [*mut f32; R] =
            std::array::from_fn(|j| sums.as_mut_ptr().add((i0 + j.min(live - 1)) * 8 * V));
        // the first block's sums start from +0 (the buffer is not zeroed)
        let mut acc: [[__m256; V]; R] = std::array::from_fn(|j| {
            std::array::from_fn(|v| match k0 {
                0 => _mm256_setzero_ps(),
                _ => _mm256_loadu_ps(sum[j].add(8 * v)),
            })
        });
        for (s, &table) in t.iter().enumerate() {
            for j in 0..R {
                let value = at[j].add(steps[s]);
                // the scale (sign and exponent bits) as `split` takes it, in a vector
                let scale = _mm256_and_ps(_mm256_broadcast_ss(&*value), scale_mask);
                // its key from a second, scalar read of the value: with one read, LLVM moves
                // the broadcast value's bits to an integer register through the vector unit,
                // and the rows' additions took a third longer on Zen 1
                let key = ((value.cast::<u32>().read_volatile() >> shift) & key_mask) as usize;
                let entry = table.add(key * V);
                for (v, acc) in acc[j].iter_mut().enumerate() {
                    let e = _mm256_load_ps(entry.add(v).cast());
                    *acc = add_product::<FUSED>(*acc, scale, e);
                }
            }
        }
        for j in 0..R {
            for (v, acc) in acc[j].into_iter().enumerate() {
                _mm256_storeu_ps(sum[j].add(8 * v), acc);
            }
        }
    };
    // whole groups of `R` rows, then one at a time (one call site: the group is inlined)
    a.in_groups(R, |i0, live| group(i0, live, sums));
}

/// `acc + scale · e`: one fused multiply-add where `FUSED` (every product exact: the same
/// bits), else a multiply and an add.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn add_product<const FUSED: bool>(acc: __m256, scale: __m256, e: __m256) -> __m256 {
    match FUSED {
        true => _mm256_fmadd_ps(scale, e, acc),
        false => _mm256_add_ps(acc, _mm256_mul_ps(scale, e)),
    }
}

/// The 16 rows of 8 values from `src` (rows `stride` apart) transposed: result `j` is value
/// `j` of every row, in order (two 8 × 8 blocks transposed in registers).
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn transpose16x8(src: &[f32], stride: usize) -> [[f32; 16]; 8] {
    assert!(src.len() >= 15 * stride + 8, "transposed block");
    // SAFETY: the CPU supports AVX2 (this function's contract).
    unsafe { transpose16x8_at(src, std::array::from_fn(|i| i * stride)) }
}

/// [`transpose16x8`] of the 16 rows of 8 values from `src[at[i]]`.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
unsafe fn transpose16x8_at(src: &[f32], at: [usize; 16]) -> [[f32; 16]; 8] {
    assert!(at.iter().all(|&a| a + 8 <= src.len()), "transposed block");
    let mut out = [[0f32; 16]; 8];
    for half in 0..2 {
        // SAFETY: 8 rows of 8 values inside `src` (asserted).
        let r: [__m256; 8] =
            std::array::from_fn(|i| unsafe { _mm256_loadu_ps(src.as_ptr().add(at[8 * half + i])) });
        // pairs of rows interleaved, then 4 × 4 blocks in each 128-bit half
        let t: [__m256; 8] = std::array::from_fn(|i| {
            let (a, b) = (r[i & !1], r[i | 1]);
            if i % 2 == 0 {
                _mm256_unpacklo_ps(a, b)
            } else {
                _mm256_unpackhi_ps(a, b)
            }
        });
        let u: [__m256; 8] = std::array::from_fn(|i| {
            let (a, b) = (t[(i & !3) + i % 4 / 2], t[(i & !3) + 2 + i % 4 / 2]);
            if i % 2 == 0 {
                _mm256_shuffle_ps::<0x44>(a, b)
            } else {
                _mm256_shuffle_ps::<0xee>(a, b)
            }
        });
        // then the halves: value j of rows 0..4 and of rows 4..8
        for j in 0..8 {
            let (a, b) = (u[j % 4], u[4 + j % 4]);
            let v = if j < 4 {
                _mm256_permute2f128_ps::<0x20>(a, b)
            } else {
                _mm256_permute2f128_ps::<0x31>(a, b)
            };
            // SAFETY: 8 values of `out[j]` from 8 · half.
            unsafe { _mm256_storeu_ps(out[j].as_mut_ptr().add(8 * half), v) };
        }
    }
    out
}

/// Each value's scale and key ([`super::split`]) at 8 steps of `n` lanes, lane `l`'s 8 values
/// one after another from `x[lane(l)]`: `keys` and `scales` hold `[8][n]`
/// ([`super::operand::split_transposed`], 16 × 8 transposes).
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn split_steps(
    x: &[f32],
    lane: impl Fn(usize) -> usize,
    keys: &mut [u32],
    scales: &mut [f32],
    bits: u32,
) {
    super::operand::split_transposed::<8>(
        x,
        lane,
        (keys, scales),
        // SAFETY: the CPU supports AVX2 (this function's contract).
        |x, at| unsafe { transpose16x8_at(x, at) },
        |v, keys, scales| super::split_each(v, keys, scales, bits),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn transpose16x8_transposes() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        // 16 rows of 8 values, 11 apart (padding between rows)
        let src: Vec<f32> = (0..15 * 11 + 8).map(|i| i as f32).collect();
        // SAFETY: the CPU supports AVX2, checked above.
        let t = unsafe { super::transpose16x8(&src, 11) };
        for (j, run) in t.iter().enumerate() {
            for (i, &v) in run.iter().enumerate() {
                assert_eq!(v, src[i * 11 + j], "[{j}][{i}]");
            }
        }
    }
}
