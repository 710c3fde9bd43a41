//! The host implementation of BCRC's sparse product (the kernel's test oracle and the path of
//! backends without CubeCL kernels), and the two products it is measured against: the same
//! arrays without load-redundancy elimination, and CSR.
//!
//! All three run on activation panels (`crate::panel`) in tasks of at most [`UNIT_ROWS`]
//! rows. With **load-redundancy elimination** ([`spmm`]) the rows of a pattern are taken four
//! at a time (a task: a run of reordered rows of one pattern): every activation line the
//! pattern names is loaded once and multiplied into four rows' sums (GRIM's register-level LRE,
//! Fig. 9), columns walked in chunks of [`CHUNK`] so that their lines stay in L1 while the four
//! rows use them. The rows left over (a pattern's last one to three rows, the common case for
//! small blocks) are computed apart, each loading its own lines, as every row is without LRE
//! ([`spmm_no_lre`]) and in CSR ([`spmm_csr`]): taken in the order of their output columns (so
//! that a task's outputs are stored as runs of consecutive columns), four such rows are
//! interleaved so that their sums are independent chains of additions (one row alone waits on
//! the latency of its own additions), all four to the end of the longest (a shorter row adds
//! `0 · 0 = +0` past its end, which changes no sum). Every output sums its products in pattern
//! order from `+0`, one product and one add each, in all three: the kernel's order, bit for
//! bit.

use super::{Bcrc, Csr};
use crate::panel::{Line, Orient, PanelWeight, product, product_as, product_into};

/// Rows of one task at most.
pub const UNIT_ROWS: usize = 32;
/// Columns of a pattern walked together (their lines: 16 KiB at 32 lanes).
pub const CHUNK: usize = 128;
/// Rows sharing each loaded line under load-redundancy elimination.
const ROWS: usize = 4;
// a shared task's runs are whole groups of `ROWS`
const _: () = assert!(UNIT_ROWS.is_multiple_of(ROWS));

/// `y = x · Wᵀ` through the BCRC weight, rows of a pattern together (LRE): `x: [m, K]`
/// row-major → `y: [m, out]`, rows in the view's order.
///
/// # Panics
/// If `x` does not have `m · K` values or `w` does not hold together (its permutation, groups
/// and offsets are checked as they are used; [`Bcrc::validate`] checks everything).
pub fn spmm(x: &[f32], m: usize, w: &Bcrc) -> Vec<f32> {
    product(x, m, &Units::new(w, true))
}

/// [`spmm`] on transposed operands: `xᵀ: [K, m]` row-major → `yᵀ: [out, m]` (a convolution's
/// im2col columns in, its output channels out), the same values bit for bit.
///
/// # Panics
/// As [`spmm`].
pub fn spmm_cols(xt: &[f32], m: usize, w: &Bcrc) -> Vec<f32> {
    product_as(xt, m, &Units::new(w, true), Orient::Cols)
}

/// [`spmm_cols`] written into `yt` (`out · m` values, whatever they held).
///
/// # Panics
/// As [`spmm`], and if `yt` does not have `out · m` values.
pub fn spmm_cols_into(xt: &[f32], m: usize, w: &Bcrc, yt: &mut [f32]) {
    product_into(xt, m, &Units::new(w, true), Orient::Cols, yt)
}

/// [`spmm`] without load-redundancy elimination: the same arrays, each row loading its lines
/// alone.
///
/// # Panics
/// As [`spmm`].
pub fn spmm_no_lre(x: &[f32], m: usize, w: &Bcrc) -> Vec<f32> {
    product(x, m, &Units::new(w, false))
}

/// `y = x · Wᵀ` through CSR, one row at a time.
///
/// # Panics
/// If `x` does not have `m · K` values or a column is out of range.
pub fn spmm_csr(x: &[f32], m: usize, w: &Csr) -> Vec<f32> {
    assert!(
        w.row_ptr.len() == w.out + 1
            && w.row_ptr[0] == 0
            && w.row_ptr.windows(2).all(|p| p[0] <= p[1])
            && w.row_ptr[w.out] as usize == w.col_idx.len()
            && w.col_idx.len() == w.values.len(),
        "spmm_csr: the CSR arrays do not hold together"
    );
    columns_in_range(&w.col_idx, w.k);
    let rows: Vec<u32> = (0..w.out as u32).collect();
    product(
        x,
        m,
        &CsrRows {
            w,
            rows,
            units: w.out.div_ceil(UNIT_ROWS),
        },
    )
}

/// A validated BCRC weight cut into tasks of two kinds.
///
/// - **Shared** (load-redundancy elimination): runs of at most [`UNIT_ROWS`] consecutive rows of
///   the reordered matrix, all of one pattern and a multiple of [`ROWS`] rows, four of them
///   sharing every line they load.
/// - **Apart**: every other row (a pattern's last one to three rows, or all of them without
///   LRE, the common case for small blocks, whose rows rarely share a pattern), taken in the
///   order of their output columns, [`UNIT_ROWS`] a task. Their outputs are then mostly
///   consecutive columns, stored as whole lines rather than one scattered value per row of the
///   panel (measured: `docs/bcr.md`).
struct Units<'a> {
    w: &'a Bcrc,
    /// `(pattern, first reordered row, end)` of every shared task.
    shared: Vec<(usize, usize, usize)>,
    /// `(reordered row, its pattern)` of every row computed apart, by output column.
    apart: Vec<(u32, u32)>,
    /// The output column of each entry of `apart` (ascending).
    apart_columns: Vec<u32>,
}

impl<'a> Units<'a> {
    fn new(w: &'a Bcrc, lre: bool) -> Self {
        // what the tasks rely on beyond slicing (which checks the offsets as it goes): the
        // output permutation and the groups' rows (a full `validate` reads every weight, a cost
        // of the order of the product itself at 10×)
        let mut row_of = vec![u32::MAX; w.out];
        assert!(
            w.reorder.len() == w.out
                && w.reorder.iter().enumerate().all(|(p, &r)| {
                    (r as usize) < w.out
                        && std::mem::replace(&mut row_of[r as usize], p as u32) == u32::MAX
                }),
            "spmm: reorder is not a permutation of 0..{}",
            w.out
        );
        assert!(
            w.row_offset.len() == w.out + 1
                && !w.occurrence.is_empty()
                && w.occurrence.len() == w.column_stride.len()
                && w.occurrence[0] == 0
                && w.occurrence.windows(2).all(|o| o[0] <= o[1])
                && w.occurrence[w.occurrence.len() - 1] as usize == w.out,
            "spmm: occurrence does not rise from 0 to {} rows",
            w.out
        );
        columns_in_range(&w.compact_column, w.k);
        let mut shared = Vec::new();
        // the pattern of every row computed apart (`u32::MAX`: a shared row)
        let mut pattern_of = vec![u32::MAX; w.out];
        for (g, rows) in w.occurrence.windows(2).enumerate() {
            let (a, b) = (rows[0] as usize, rows[1] as usize);
            let together = if lre { (b - a) / ROWS * ROWS } else { 0 };
            for p0 in (a..a + together).step_by(UNIT_ROWS) {
                shared.push((g, p0, (p0 + UNIT_ROWS).min(a + together)));
            }
            pattern_of[a + together..b].fill(g as u32);
        }
        let (apart, apart_columns): (Vec<(u32, u32)>, Vec<u32>) = row_of
            .iter()
            .enumerate()
            .filter(|&(_, &p)| pattern_of[p as usize] != u32::MAX)
            .map(|(c, &p)| ((p, pattern_of[p as usize]), c as u32))
            .unzip();
        Self {
            w,
            shared,
            apart,
            apart_columns,
        }
    }
}

// SAFETY: a shared task returns the columns `reorder[p0..p1]` of its rows, an apart task the
// columns `reorder[p]` of its rows (`apart_columns`, built from the inverse of `reorder`); every
// reordered row is in exactly one task (a shared run or the apart list, each row once) and
// `reorder` is a permutation of `0..out` (validated in `Units::new`, the only constructor), so
// every column belongs to one task.
unsafe impl PanelWeight for Units<'_> {
    fn k(&self) -> usize {
        self.w.k
    }
    fn out(&self) -> usize {
        self.w.out
    }
    fn tasks(&self) -> usize {
        self.shared.len() + self.apart.len().div_ceil(UNIT_ROWS)
    }
    fn pairs(&self) -> usize {
        self.w.weights.len()
    }
    fn task<const L: usize>(&self, lines: &[Line<L>], t: usize) -> (Vec<[f32; L]>, &[u32]) {
        let w = self.w;
        if let Some(&(g, p0, p1)) = self.shared.get(t) {
            // rows of one pattern four at a time sharing their lines (LRE)
            let mut acc = vec![[0f32; L]; p1 - p0];
            let cols = w.pattern(g);
            for (q, sums) in (p0..p1).step_by(ROWS).zip(acc.chunks_exact_mut(ROWS)) {
                let rows = std::array::from_fn(|i| w.row_weights(q + i));
                shared_rows(lines, cols, rows, sums.try_into().expect("ROWS sums"));
            }
            return (acc, &w.reorder[p0..p1]);
        }
        let t = t - self.shared.len();
        let (a, b) = (t * UNIT_ROWS, ((t + 1) * UNIT_ROWS).min(self.apart.len()));
        let rows: Vec<Row> = self.apart[a..b]
            .iter()
            .map(|&(p, g)| Row {
                cols: w.pattern(g as usize),
                weights: w.row_weights(p as usize),
            })
            .collect();
        let mut acc = vec![[0f32; L]; b - a];
        rows_apart(lines, &rows, &mut acc);
        (acc, &self.apart_columns[a..b])
    }
}

/// A CSR weight cut into tasks of [`UNIT_ROWS`] rows.
struct CsrRows<'a> {
    w: &'a Csr,
    /// `0..out`: the output column of every row.
    rows: Vec<u32>,
    units: usize,
}

// SAFETY: task `t` returns the columns `t·UNIT_ROWS..` of its own rows, disjoint ranges of
// `0..out`.
unsafe impl PanelWeight for CsrRows<'_> {
    fn k(&self) -> usize {
        self.w.k
    }
    fn out(&self) -> usize {
        self.w.out
    }
    fn tasks(&self) -> usize {
        self.units
    }
    fn pairs(&self) -> usize {
        self.w.values.len()
    }
    fn task<const L: usize>(&self, lines: &[Line<L>], t: usize) -> (Vec<[f32; L]>, &[u32]) {
        let w = self.w;
        let (r0, r1) = (t * UNIT_ROWS, ((t + 1) * UNIT_ROWS).min(w.out));
        let mut acc = vec![[0f32; L]; r1 - r0];
        let rows: Vec<Row> = (r0..r1)
            .map(|r| {
                let (a, b) = (w.row_ptr[r] as usize, w.row_ptr[r + 1] as usize);
                Row {
                    cols: &w.col_idx[a..b],
                    weights: &w.values[a..b],
                }
            })
            .collect();
        rows_apart(lines, &rows, &mut acc);
        (acc, &self.rows[r0..r1])
    }
}

/// One output row's work: its columns and its weights (as many).
struct Row<'a> {
    cols: &'a [u32],
    weights: &'a [f32],
}

/// Asserts, once a product, that every column of a weight's index array is below `k` (the
/// panel's lines; the reads index them with bounds checks all the same, this names the fault).
fn columns_in_range(columns: &[u32], k: usize) {
    let top = columns.iter().fold(0, |m, &c| m.max(c));
    assert!(
        columns.is_empty() || (top as usize) < k,
        "spmm: a column out of range ({top} of {k})"
    );
}

/// `acc[q] = Σ_t rows[q][t] · lines[cols[t]]` for [`ROWS`] rows over the same columns, each
/// loaded line used by all of them (load-redundancy elimination), columns in chunks of
/// [`CHUNK`] so that a chunk's lines stay in L1.
fn shared_rows<const L: usize>(
    lines: &[Line<L>],
    cols: &[u32],
    rows: [&[f32]; ROWS],
    acc: &mut [[f32; L]; ROWS],
) {
    for t0 in (0..cols.len()).step_by(CHUNK) {
        let t1 = (t0 + CHUNK).min(cols.len());
        accumulate::<L, ROWS, true>(lines, [&cols[t0..t1]; ROWS], rows.map(|r| &r[t0..t1]), acc);
    }
}

/// Every row's sums, each row loading its own lines, four rows interleaved (independent sums:
/// one row alone would wait on its own additions), each row's products still in column order.
/// `acc[i]`: the sums of `rows[i]`.
fn rows_apart<const L: usize>(lines: &[Line<L>], rows: &[Row], acc: &mut [[f32; L]]) {
    assert_eq!(rows.len(), acc.len(), "rows_apart: a sum for every row");
    for (rows, acc) in rows.chunks(ROWS).zip(acc.chunks_mut(ROWS)) {
        match rows.len() {
            4 => together::<L, 4>(lines, rows, acc),
            3 => together::<L, 3>(lines, rows, acc),
            2 => together::<L, 2>(lines, rows, acc),
            _ => together::<L, 1>(lines, rows, acc),
        }
    }
}

/// The sums of `R` rows (into `acc`, as many), interleaved to the end of the longest.
fn together<const L: usize, const R: usize>(lines: &[Line<L>], rows: &[Row], acc: &mut [[f32; L]]) {
    let cols = std::array::from_fn(|q| rows[q].cols);
    let weights = std::array::from_fn(|q| rows[q].weights);
    let acc: &mut [[f32; L]; R] = acc.try_into().expect("R sums");
    accumulate::<L, R, false>(lines, cols, weights, acc);
}

/// For every column `t` in order and every row `q`: `acc[q] += rows[q][t] · lines[cols[q][t]]`;
/// `SHARED`: all rows have the same columns (`cols[0]`), each line loaded once for all; else
/// each row has its own columns, as many as its weights, and the rows may differ in length.
fn accumulate<const L: usize, const R: usize, const SHARED: bool>(
    lines: &[Line<L>],
    cols: [&[u32]; R],
    rows: [&[f32]; R],
    acc: &mut [[f32; L]; R],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked just above).
            unsafe { accumulate_avx512::<L, R, SHARED>(lines, cols, rows, acc) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: the CPU has AVX (checked just above).
            unsafe { accumulate_avx::<L, R, SHARED>(lines, cols, rows, acc) };
            return;
        }
    }
    accumulate_plain::<L, R, SHARED>(lines, cols, rows, acc)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn accumulate_avx512<const L: usize, const R: usize, const SHARED: bool>(
    lines: &[Line<L>],
    cols: [&[u32]; R],
    rows: [&[f32]; R],
    acc: &mut [[f32; L]; R],
) {
    accumulate_plain::<L, R, SHARED>(lines, cols, rows, acc)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn accumulate_avx<const L: usize, const R: usize, const SHARED: bool>(
    lines: &[Line<L>],
    cols: [&[u32]; R],
    rows: [&[f32]; R],
    acc: &mut [[f32; L]; R],
) {
    accumulate_plain::<L, R, SHARED>(lines, cols, rows, acc)
}

#[inline(always)]
#[allow(clippy::needless_range_loop)] // lanes indexed alike in both arrays: vectorised as is
fn accumulate_plain<const L: usize, const R: usize, const SHARED: bool>(
    lines: &[Line<L>],
    cols: [&[u32]; R],
    rows: [&[f32]; R],
    acc: &mut [[f32; L]; R],
) {
    let n = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    assert!(
        if SHARED {
            rows.iter().all(|r| r.len() == n) && cols[0].len() == n
        } else {
            rows.iter().zip(&cols).all(|(r, c)| r.len() == c.len())
        },
        "accumulate: rows and columns of different lengths"
    );
    // past its end a row adds `0 · 0 = +0`, which leaves every sum as it is (a sum that starts
    // at `+0` is never `-0`, and `+0` changes no other value): the rows run together to the end
    // of the longest, their sums in registers throughout
    let zero = [0f32; L];
    let mut sum = *acc;
    for t in 0..n {
        if SHARED {
            let x = &lines[cols[0][t] as usize].0;
            for (sum, row) in sum.iter_mut().zip(&rows) {
                let v = row[t];
                for l in 0..L {
                    sum[l] += v * x[l];
                }
            }
        } else {
            for ((sum, row), cols) in sum.iter_mut().zip(&rows).zip(&cols) {
                let (x, v) = match cols.get(t) {
                    Some(&c) => (&lines[c as usize].0, row[t]),
                    None => (&zero, 0.0),
                };
                for l in 0..L {
                    sum[l] += v * x[l];
                }
            }
        }
    }
    *acc = sum;
}

/// The same product one output at a time, in the order of the definition: the oracle of the
/// three products above.
pub fn spmm_naive(x: &[f32], m: usize, w: &Bcrc) -> Vec<f32> {
    let mut y = vec![0f32; m * w.out];
    for i in 0..m {
        for g in 0..w.groups() {
            let cols = w.pattern(g);
            for p in w.occurrence[g] as usize..w.occurrence[g + 1] as usize {
                let mut acc = 0f32;
                for (&c, &v) in cols.iter().zip(w.row_weights(p)) {
                    acc += v * x[i * w.k + c as usize];
                }
                y[i * w.out + w.reorder[p] as usize] = acc;
            }
        }
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bcrc::random_bcrc;
    use crate::panel::{SERIAL_PAIRS, transposed};

    #[test]
    fn the_large_case_runs_on_the_pool() {
        let w = random_bcrc(256, 1152, (4, 16), (2, 3), 7);
        assert!(3 * w.weights.len() >= SERIAL_PAIRS && w.weights.len() < SERIAL_PAIRS);
    }

    fn input(m: usize, k: usize) -> Vec<f32> {
        (0..m * k)
            .map(|i| ((i * 37 % 97) as f32 - 48.0) / 17.0)
            .collect()
    }

    #[test]
    fn every_product_is_the_definition_bit_for_bit() {
        for (out, k, block, keep, m) in [
            (16, 40, (4, 16), (2, 5), 5),
            (64, 96, (4, 96), (3, 20), 33), // wide blocks: rows share patterns
            (30, 50, (4, 16), (2, 5), 40),  // remainders in the view and in the panels
            (40, 300, (8, 300), (5, 200), 20), // patterns longer than one chunk
            (8, 8, (1, 1), (1, 1), 1),
            // above `SERIAL_PAIRS`: three panels on rayon's pool, the remainder's on this thread
            (256, 1152, (4, 16), (2, 3), 100),
        ] {
            let w = random_bcrc(out, k, block, keep, 7);
            let x = input(m, k);
            let want = spmm_naive(&x, m, &w);
            assert_eq!(spmm(&x, m, &w), want, "{out}x{k} m={m}");
            assert_eq!(spmm_no_lre(&x, m, &w), want, "{out}x{k} m={m}");
            assert_eq!(spmm_csr(&x, m, &Csr::of(&w)), want, "{out}x{k} m={m}");
            let cols = spmm_cols(&transposed(&x, m, k), m, &w);
            assert_eq!(
                cols,
                transposed(&want, m, out),
                "{out}x{k} m={m}, transposed"
            );
            // into a buffer that held something else: every value overwritten
            let mut into = vec![f32::NAN; m * out];
            spmm_cols_into(&transposed(&x, m, k), m, &w, &mut into);
            assert_eq!(into, cols, "{out}x{k} m={m}, into a used buffer");
        }
    }

    #[test]
    fn rows_of_any_length_run_together_without_touching_each_others_sums() {
        // four interleaved rows of 0, 1, 7 and 3 columns, a fifth alone; column 5 of the input
        // is infinite and only the long row names it: the others, padded with `0 · 0` past
        // their ends, keep finite sums, and every sum has the bits of the definition
        let cols: [&[u32]; 5] = [&[], &[0], &[0, 1, 2, 3, 4, 5, 6], &[1, 3, 7], &[2, 8]];
        let (k, m) = (9, 3);
        let mut w = Csr {
            out: cols.len(),
            k,
            row_ptr: vec![0],
            col_idx: Vec::new(),
            values: Vec::new(),
        };
        for row in cols {
            w.col_idx.extend(row);
            w.values.extend(row.iter().map(|&c| (c as f32 - 3.5) / 3.0));
            w.row_ptr.push(w.col_idx.len() as u32);
        }
        let mut x = input(m, k);
        for i in 0..m {
            x[i * k + 5] = f32::INFINITY;
        }
        let mut want = vec![0f32; m * w.out];
        for i in 0..m {
            for r in 0..w.out {
                let (a, b) = (w.row_ptr[r] as usize, w.row_ptr[r + 1] as usize);
                want[i * w.out + r] = (a..b).fold(0f32, |s, e| {
                    s + w.values[e] * x[i * k + w.col_idx[e] as usize]
                });
            }
        }
        let got = spmm_csr(&x, m, &w);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want));
        assert!(
            got.iter()
                .enumerate()
                .all(|(i, y)| y.is_finite() == (i % w.out != 2))
        );
    }

    #[test]
    fn the_product_is_the_dense_product() {
        let w = random_bcrc(24, 32, (4, 8), (2, 3), 9);
        let dense = w.dense();
        let m = 3;
        let x: Vec<f32> = (0..m * 32).map(|i| (i % 7) as f32 - 3.0).collect();
        let y = spmm(&x, m, &w);
        for i in 0..m {
            for o in 0..24 {
                // another summation order: equal up to rounding
                let want: f32 = (0..32).map(|c| x[i * 32 + c] * dense[o * 32 + c]).sum();
                assert!((y[i * 24 + o] - want).abs() <= 1e-4 * want.abs().max(1.0));
            }
        }
    }

    #[test]
    #[should_panic(expected = "spmm: a column out of range (16 of 16)")]
    fn a_column_beyond_the_input_is_named() {
        let mut w = Csr::of(&random_bcrc(8, 16, (4, 16), (2, 4), 1));
        *w.col_idx.last_mut().expect("kept entries") = 16;
        spmm_csr(&input(2, 16), 2, &w);
    }

    #[test]
    #[should_panic(expected = "permutation")]
    fn a_weight_that_does_not_hold_together_is_refused() {
        let mut w = random_bcrc(8, 16, (4, 16), (2, 4), 1);
        w.reorder[0] = w.reorder[1];
        spmm(&input(2, 16), 2, &w);
    }

    #[test]
    #[should_panic(expected = "occurrence does not rise")]
    fn groups_that_do_not_cover_the_rows_are_refused() {
        let mut w = random_bcrc(8, 16, (4, 16), (2, 4), 1);
        let last = w.occurrence.len() - 1;
        w.occurrence[last] -= 1;
        spmm(&input(2, 16), 2, &w);
    }

    #[test]
    #[should_panic(expected = "CSR arrays do not hold together")]
    fn csr_arrays_that_do_not_hold_together_are_refused() {
        let mut csr = Csr::of(&random_bcrc(8, 16, (4, 16), (2, 4), 1));
        csr.col_idx.pop();
        spmm_csr(&input(2, 16), 2, &csr);
    }
}
