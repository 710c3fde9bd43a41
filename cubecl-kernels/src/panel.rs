//! Activation panels: the layout both host sparse products (HiNM's and BCRC's) read their
//! activations in, and the parallel loop that runs them.
//!
//! Activation rows are taken 32 at a time (a *panel*; a remainder of more than 16 rows is one
//! more, partial, panel, a smaller one takes a panel of 16 or 8 rows) and transposed once, so
//! that one input column of a panel is one contiguous, aligned line of `L` lanes: a sparse
//! weight reads the columns it keeps as whole lines and multiplies them into `L` lanes at a
//! time, a contiguous multiply-add that the compiler vectorises. Work is shared among threads
//! by (panel, task), the tasks being the weight's own (HiNM: its tiles; BCRC: runs of rows of
//! one column pattern), and each task stores its outputs itself while they are still in L1.

use rayon::prelude::*;
use std::ops::Range;

/// Activation rows of a full panel.
pub(crate) const WIDE: usize = 32;
/// Activation rows of the remainder's panel when at most this many rows remain.
pub(crate) const NARROW: usize = 16;
/// Activation rows of the remainder's panel when at most this many rows remain.
pub(crate) const SLIM: usize = 8;

/// Below this many (panel, kept value) pairs a product runs on the calling thread. Measured on
/// 2 cores (`cargo bench -p cubecl-kernels --bench bcrc`, BCRC at 10×, serial against rayon):
/// 15.5 k pairs (GRU input, 32 × 152 → 1024) 72 against 88 µs, 52 k (GRU 512) 125 against 150 µs,
/// 100 k (GRU hidden, one panel) 216 against 200 µs, 110 k (VGG-16 conv128, 8 panels) 333
/// against 204 µs.
pub(crate) const SERIAL_PAIRS: usize = 1 << 16;

/// One input column of a panel: its `L` activations, on cache-line boundaries.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct Line<const L: usize>(pub(crate) [f32; L]);

/// A sparse weight whose product `y = x · Wᵀ` runs on panels: `tasks` independent pieces of
/// work per panel, each giving the `L` lanes of some output columns.
///
/// # Safety
/// The columns that [`PanelWeight::task`] returns are below [`PanelWeight::out`], and every
/// output column is returned by at most one task: [`product`] writes the tasks' results in
/// parallel, without locks, trusting that no two of them write the same place.
pub(crate) unsafe trait PanelWeight: Sync {
    /// Columns of `x` (the weight's `K`).
    fn k(&self) -> usize;
    /// Columns of `y`.
    fn out(&self) -> usize;
    /// Tasks per panel.
    fn tasks(&self) -> usize;
    /// Multiply-adds of a whole line per panel (the weight's kept values): the work's size.
    fn pairs(&self) -> usize;
    /// Task `t` on one panel: its outputs (`L` lanes each) and the output column of each.
    fn task<const L: usize>(&self, lines: &[Line<L>], t: usize) -> (Vec<[f32; L]>, &[u32]);
}

/// How a product's activations and result are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Orient {
    /// `x: [m, K]` and `y: [m, out]`, row-major (a linear layer's rows).
    Rows,
    /// Both transposed: `xᵀ: [K, m]` and `yᵀ: [out, m]`, row-major. A convolution's im2col
    /// columns are `xᵀ` and its output channels want `yᵀ`; a panel's line is then a contiguous
    /// copy, and a task's outputs contiguous runs: no transpose either way.
    Cols,
}

/// `y = x · Wᵀ` for `x: [m, K]` row-major → `y: [m, out]`, through `w`'s tasks on panels.
///
/// # Panics
/// If `x` does not have `m · K` values, or a task returns as many outputs as columns.
pub(crate) fn product<W: PanelWeight>(x: &[f32], m: usize, w: &W) -> Vec<f32> {
    product_as(x, m, w, Orient::Rows)
}

/// The product of [`product`] with activations and result laid out as `orient` says.
///
/// # Panics
/// As [`product`].
pub(crate) fn product_as<W: PanelWeight>(x: &[f32], m: usize, w: &W, orient: Orient) -> Vec<f32> {
    let mut y = vec![0f32; m * w.out()];
    product_into(x, m, w, orient, &mut y);
    y
}

/// The product of [`product_as`] written into `y` (`m · out` values, whatever they held).
///
/// # Panics
/// As [`product`], and if `y` does not have `m · out` values.
pub(crate) fn product_into<W: PanelWeight>(
    x: &[f32],
    m: usize,
    w: &W,
    orient: Orient,
    y: &mut [f32],
) {
    let (k, out) = (w.k(), w.out());
    assert_eq!(x.len(), m * k, "sparse product: x is not [{m}, {k}]");
    assert_eq!(y.len(), m * out, "sparse product: y is not [{m}, {out}]");
    // an output column that no task returns (a weight row without a kept value) is zero
    y.fill(0.0);
    // whole panels, and a remainder of more than `NARROW` rows as one more (partial) panel of
    // the same call; a smaller remainder in a panel just wide enough for it
    let wide = if m % WIDE > NARROW {
        m
    } else {
        m / WIDE * WIDE
    };
    let src = Src { x, m, k, orient };
    panels::<WIDE, W>(src, 0..wide, w, y);
    if m - wide > SLIM {
        panels::<NARROW, W>(src, wide..m, w, y);
    } else {
        panels::<SLIM, W>(src, wide..m, w, y);
    }
}

/// A product's activations: `m` rows of `k` values, laid out as `orient` says.
#[derive(Clone, Copy)]
struct Src<'a> {
    x: &'a [f32],
    m: usize,
    k: usize,
    orient: Orient,
}

impl Src<'_> {
    /// The panel of the `n ≤ L` rows from `r0`: line `c` holds column `c` of each, lanes past
    /// the last row zero.
    fn panel<const L: usize>(self, r0: usize, n: usize) -> Vec<Line<L>> {
        match self.orient {
            Orient::Rows => transpose::<L>(&self.x[r0 * self.k..][..n * self.k], self.k),
            Orient::Cols => (0..self.k)
                .map(|c| {
                    let run = &self.x[c * self.m + r0..][..n];
                    match <[f32; L]>::try_from(run) {
                        // a full panel: one copy, no zeroing first
                        Ok(full) => Line(full),
                        Err(_) => {
                            let mut line = Line([0.0; L]);
                            line.0[..n].copy_from_slice(run);
                            line
                        }
                    }
                })
                .collect(),
        }
    }
}

/// `y`'s values, written by the (panel, task) pairs at the places each owns.
struct Out(*mut f32);

// SAFETY: the tasks write through the pointer at disjoint places only (see `panels`).
unsafe impl Sync for Out {}

impl Out {
    /// Writes `value` at place `i`.
    ///
    /// # Safety
    /// `i` is in bounds of the slice the pointer came from, that slice is borrowed mutably for
    /// as long as this is used, and no other thread writes or reads place `i` meanwhile.
    unsafe fn write(&self, i: usize, value: f32) {
        // SAFETY: as the caller guarantees.
        unsafe { *self.0.add(i) = value };
    }

    /// The `n` places from `i` on, to write.
    ///
    /// # Safety
    /// `i + n` is in bounds of the slice the pointer came from, that slice is borrowed mutably
    /// for as long as this is used, and no other thread writes or reads those places meanwhile.
    #[allow(clippy::mut_from_ref)] // disjoint places per caller, as the caller guarantees
    unsafe fn run(&self, i: usize, n: usize) -> &mut [f32] {
        // SAFETY: as the caller guarantees.
        unsafe { std::slice::from_raw_parts_mut(self.0.add(i), n) }
    }
}

/// The product for the rows `rows` of `src` in panels of `L` (the last one possibly partial),
/// written into `y` (the whole result, laid out as `src`).
fn panels<const L: usize, W: PanelWeight>(src: Src<'_>, rows: Range<usize>, w: &W, y: &mut [f32]) {
    if rows.is_empty() {
        return;
    }
    assert_eq!(
        y.len(),
        src.m * w.out(),
        "sparse product: y is not [{}, {}]",
        src.m,
        w.out()
    );
    // a small product runs on the calling thread: handing work to rayon's pool from outside it
    // costs tens of µs, more than such a product takes
    let serial = rows.len().div_ceil(L) * w.pairs() < SERIAL_PAIRS;
    if serial {
        panels_on::<L, W>(src, rows, w, y, true);
    } else {
        // both parallel passes (the panels, then the tasks) started from inside the pool: one
        // hand-over from this thread to the pool and back, not one a pass
        rayon::scope(|_| panels_on::<L, W>(src, rows, w, y, false));
    }
}

/// [`panels`] on at least one row, on the calling thread or on rayon's pool.
fn panels_on<const L: usize, W: PanelWeight>(
    src: Src<'_>,
    rows: Range<usize>,
    w: &W,
    y: &mut [f32],
    serial: bool,
) {
    let (m, out, tasks) = (src.m, w.out(), w.tasks());
    assert!(rows.end <= m, "sparse product: rows past m");
    let count = |p: usize| L.min(rows.end - (rows.start + p * L));
    let panel = |p: usize| src.panel::<L>(rows.start + p * L, count(p));
    let n_panels = rows.len().div_ceil(L);
    let lines: Vec<Vec<Line<L>>> = if serial {
        (0..n_panels).map(panel).collect()
    } else {
        (0..n_panels).into_par_iter().map(panel).collect()
    };
    let y = Out(y.as_mut_ptr());
    let run = |at: usize| {
        let (p, t) = (at / tasks, at % tasks);
        let (block, columns) = w.task(&lines[p], t);
        assert!(
            block.len() == columns.len() && columns.iter().all(|&c| (c as usize) < out),
            "sparse product: a task's outputs and columns disagree"
        );
        let (r0, n) = (rows.start + p * L, count(p));
        if src.orient == Orient::Cols {
            for (&c, acc) in columns.iter().zip(&block) {
                // SAFETY: `c · m + r0 + n ≤ out · m = y.len()` (`c < out`, asserted above, and
                // `r0 + n ≤ rows.end ≤ m`); every output column belongs to one task only (the
                // contract of `PanelWeight`) and every row to one panel, so this run of column
                // `c` is written by this (panel, task) pair only, while `y` is borrowed mutably
                // for the whole call.
                let dst = unsafe { y.run(c as usize * m + r0, n) };
                dst.copy_from_slice(&acc[..n]);
            }
            return;
        }
        // consecutive columns (the common case of tasks in output order) are stored as runs
        let run = columns.windows(2).all(|c| c[1] == c[0] + 1);
        for l in 0..n {
            let row = (r0 + l) * out;
            match columns.first() {
                Some(&c0) if run => {
                    // SAFETY: `row + c0 + block.len() ≤ m · out = y.len()` (the columns are
                    // `c0..c0 + block.len()`, all below `out`, asserted above, and the row is
                    // one of the `m`); every output column belongs to one task only (the
                    // contract of `PanelWeight`), so the run is written by this (panel, task)
                    // pair only, while `y` is borrowed mutably for the whole call.
                    let dst = unsafe { y.run(row + c0 as usize, block.len()) };
                    for (d, acc) in dst.iter_mut().zip(&block) {
                        *d = acc[l];
                    }
                }
                _ => {
                    for (&c, acc) in columns.iter().zip(&block) {
                        // SAFETY: `row + c < m · out = y.len()` (`c < out`, asserted above, and
                        // the row is one of the `m`); every output column belongs to one task
                        // only, as above.
                        unsafe { y.write(row + c as usize, acc[l]) };
                    }
                }
            }
        }
    };
    if serial {
        (0..lines.len() * tasks).for_each(run);
    } else {
        (0..lines.len() * tasks).into_par_iter().for_each(run);
    }
}

/// The panel of `x`'s rows (at most `L`, each of `k` values, row-major): line `c` holds column
/// `c` of every row, lanes past the last row zero.
///
/// A full panel (the common case) is written into fresh memory without zeroing it first (the
/// zeroing cost as much as the transpose itself: a profile of VGG-16 conv128 at 10×,
/// `docs/bcr.md`); a partial one is zeroed first and its rows written over.
fn transpose<const L: usize>(x: &[f32], k: usize) -> Vec<Line<L>> {
    let rows = x.len() / k;
    assert!(
        rows <= L && x.len() == rows * k,
        "transpose: x is not [≤{L}, {k}]"
    );
    let mut lines = if rows == L {
        Vec::with_capacity(k)
    } else {
        vec![Line([0.0; L]); k]
    };
    let dst = Lanes::of(&mut lines, k);
    // SAFETY: `dst` is the room of `k` lines of `L` lanes (the vector's capacity, at least
    // `k`), which nothing else reads or writes meanwhile.
    unsafe {
        let done = tiles(x, k, dst);
        transpose_plain(x, k, done, dst);
    }
    // SAFETY: every lane of the `k` lines is initialised: those of a partial panel were zeroed,
    // and the two passes above write every (column, row) of `x` (the tiles the whole tiles,
    // `transpose_plain` the rest), which for a full panel is every lane.
    unsafe { lines.set_len(k) };
    lines
}

/// The lanes of `k` lines of `l` lanes each, `stride` values apart (a line's lanes and its
/// alignment's padding: `Line<8>` is 64 bytes), to write (possibly uninitialised memory).
#[derive(Clone, Copy)]
struct Lanes {
    at: *mut f32,
    k: usize,
    l: usize,
    stride: usize,
}

impl Lanes {
    /// The room of `lines`' capacity (at least `k` lines of `L` lanes).
    fn of<const L: usize>(lines: &mut Vec<Line<L>>, k: usize) -> Self {
        assert!(lines.capacity() >= k, "transpose: room for {k} lines");
        Lanes {
            at: lines.as_mut_ptr().cast(),
            k,
            l: L,
            stride: std::mem::size_of::<Line<L>>() / std::mem::size_of::<f32>(),
        }
    }

    /// The place of lane `row` of line `column`.
    ///
    /// # Safety
    /// `at` is the room of `k` lines of `l` lanes.
    unsafe fn place(self, column: usize, row: usize) -> *mut f32 {
        assert!(
            column < self.k && row < self.l,
            "transpose: lane out of range"
        );
        // SAFETY: in bounds of the `k` lines (asserted just above).
        unsafe { self.at.add(column * self.stride + row) }
    }
}

/// The whole 8 × 8 tiles of the transpose, where the CPU turns them in registers: returns
/// `(rows, columns)` done (`(0, 0)` where it does not).
///
/// # Safety
/// `dst` is the room of `k` lines of `L` lanes, written by nothing else meanwhile.
unsafe fn tiles(x: &[f32], k: usize, dst: Lanes) -> (usize, usize) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU has AVX (checked just above); `dst` as the caller guarantees.
        return unsafe { transpose_avx(x, k, dst) };
    }
    let _ = (x, k, dst);
    (0, 0)
}

/// The part of the transpose that [`tiles`] leaves: every value of the rows from `done.0` on,
/// and the columns from `done.1` on of the rows before.
///
/// # Safety
/// As [`tiles`].
unsafe fn transpose_plain(x: &[f32], k: usize, done: (usize, usize), dst: Lanes) {
    for (l, x) in x.chunks_exact(k).enumerate() {
        let from = if l < done.0 { done.1 } else { 0 };
        for (c, &v) in x.iter().enumerate().skip(from) {
            // SAFETY: `c < k` and `l` is a row of a panel (below `L`), as the caller guarantees.
            unsafe { dst.place(c, l).write(v) };
        }
    }
}

/// The transpose in tiles of 8 rows × 8 columns, each turned in registers ([`turn`]) in blocks
/// of 64 columns, so that the lines being filled stay in L1. Returns `(rows, columns)` done: the whole tiles.
///
/// # Safety
/// As [`tiles`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn transpose_avx(x: &[f32], k: usize, dst: Lanes) -> (usize, usize) {
    use std::arch::x86_64::*;
    let (rows, cols) = (x.len() / k / 8 * 8, k / 8 * 8);
    for block in (0..cols).step_by(64) {
        for r in (0..rows).step_by(8) {
            for c in (block..cols.min(block + 64)).step_by(8) {
                let row = |i: usize| {
                    let src: &[f32; 8] = x[(r + i) * k + c..][..8].try_into().expect("8 values");
                    // SAFETY: `src` is 8 readable values.
                    unsafe { _mm256_loadu_ps(src.as_ptr()) }
                };
                let columns = turn(std::array::from_fn(row));
                for (j, column) in columns.into_iter().enumerate() {
                    // SAFETY: lanes `r..r + 8` of line `c + j` (`r + 8 ≤` the panel's rows
                    // `≤ L`, checked for the first by `place`, and `c + j < k`), in the room
                    // the caller guarantees.
                    unsafe {
                        let at = dst.place(c + j, r + 7).sub(7);
                        _mm256_storeu_ps(at, column);
                    }
                }
            }
        }
    }
    (rows, cols)
}

/// An 8 × 8 tile turned in registers: `turn(r)[j][i] = r[i][j]` (pairs of rows interleaved,
/// then quadruples, then the two halves exchanged: 24 shuffles).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
fn turn(r: [std::arch::x86_64::__m256; 8]) -> [std::arch::x86_64::__m256; 8] {
    use std::arch::x86_64::*;
    let mut t = [_mm256_setzero_ps(); 8];
    for i in (0..8).step_by(2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    let mut q = [_mm256_setzero_ps(); 8];
    for h in [0, 4] {
        for j in 0..2 {
            q[h + 2 * j] = _mm256_shuffle_ps::<0x44>(t[h + j], t[h + j + 2]);
            q[h + 2 * j + 1] = _mm256_shuffle_ps::<0xEE>(t[h + j], t[h + j + 2]);
        }
    }
    let mut out = [_mm256_setzero_ps(); 8];
    for i in 0..4 {
        out[i] = _mm256_permute2f128_ps::<0x20>(q[i], q[i + 4]);
        out[i + 4] = _mm256_permute2f128_ps::<0x31>(q[i], q[i + 4]);
    }
    out
}

/// `x: [rows, cols]` row-major, transposed: `[cols, rows]` (the tests' oracle of
/// [`Orient::Cols`]).
#[cfg(test)]
pub(crate) fn transposed(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..cols * rows)
        .map(|i| x[(i % rows) * cols + i / rows])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every panel width, row count and column count around the tiles' edges, in tiles and
    /// plainly: each line is its column, lanes past the rows zero.
    #[test]
    fn a_panel_is_the_transpose_with_zero_lanes_past_the_rows() {
        fn check<const L: usize>() {
            for k in [1, 7, 8, 9, 64, 71, 130] {
                for rows in 0..=L {
                    let x: Vec<f32> = (0..rows * k).map(|i| i as f32 + 0.5).collect();
                    let lines = transpose::<L>(&x, k);
                    let mut plain = vec![Line([0.0; L]); k];
                    let dst = Lanes::of(&mut plain, k);
                    // SAFETY: `dst` is `plain`'s `k` lines, borrowed by nothing else.
                    unsafe { transpose_plain(&x, k, (0, 0), dst) };
                    assert_eq!(lines.len(), k);
                    for (c, line) in lines.iter().chain(&plain).enumerate() {
                        let c = c % k;
                        for (l, &v) in line.0.iter().enumerate() {
                            let want = if l < rows { x[l * k + c] } else { 0.0 };
                            assert_eq!(v.to_bits(), want.to_bits(), "L {L} k {k} rows {rows}");
                        }
                    }
                }
            }
        }
        check::<WIDE>();
        check::<NARROW>();
        check::<SLIM>();
    }
}
