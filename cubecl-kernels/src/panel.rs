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

/// `y = x · Wᵀ` for `x: [m, K]` row-major → `y: [m, out]`, through `w`'s tasks on panels.
///
/// # Panics
/// If `x` does not have `m · K` values, or a task returns as many outputs as columns.
pub(crate) fn product<W: PanelWeight>(x: &[f32], m: usize, w: &W) -> Vec<f32> {
    let (k, out) = (w.k(), w.out());
    assert_eq!(x.len(), m * k, "sparse product: x is not [{m}, {k}]");
    // whole panels, and a remainder of more than `NARROW` rows as one more (partial) panel of
    // the same call; a smaller remainder in a panel just wide enough for it
    let wide = if m % WIDE > NARROW {
        m
    } else {
        m / WIDE * WIDE
    };
    let mut y = vec![0f32; m * out];
    let (head, tail) = y.split_at_mut(wide * out);
    panels::<WIDE, W>(&x[..wide * k], w, head);
    let x = &x[wide * k..];
    if m - wide > SLIM {
        panels::<NARROW, W>(x, w, tail);
    } else {
        panels::<SLIM, W>(x, w, tail);
    }
    y
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

/// The product for `x`'s rows in panels of `L` (the last one possibly partial), written into
/// `y` (those rows of the result).
fn panels<const L: usize, W: PanelWeight>(x: &[f32], w: &W, y: &mut [f32]) {
    let (k, out, tasks) = (w.k(), w.out(), w.tasks());
    let m = x.len() / k;
    if m == 0 {
        return;
    }
    assert_eq!(y.len(), m * out, "sparse product: y is not [{m}, {out}]");
    // a small product runs on the calling thread: handing work to rayon's pool from outside it
    // costs tens of µs, more than such a product takes
    let serial = m.div_ceil(L) * w.pairs() < SERIAL_PAIRS;
    let transpose = |x: &[f32]| {
        let mut lines = vec![Line([0.0; L]); k];
        // by blocks of 64 columns, so that the lines being filled stay in L1
        for (b, block) in lines.chunks_mut(64).enumerate() {
            for (l, x) in x.chunks_exact(k).enumerate() {
                for (line, v) in block.iter_mut().zip(&x[b * 64..]) {
                    line.0[l] = *v;
                }
            }
        }
        lines
    };
    let lines: Vec<Vec<Line<L>>> = if serial {
        x.chunks(L * k).map(transpose).collect()
    } else {
        x.par_chunks(L * k).map(transpose).collect()
    };
    let y = Out(y.as_mut_ptr());
    let run = |at: usize| {
        let (panel, t) = (at / tasks, at % tasks);
        let (block, columns) = w.task(&lines[panel], t);
        assert!(
            block.len() == columns.len() && columns.iter().all(|&c| (c as usize) < out),
            "sparse product: a task's outputs and columns disagree"
        );
        // consecutive columns (the common case of tasks in output order) are stored as runs
        let run = columns.windows(2).all(|c| c[1] == c[0] + 1);
        for l in 0..L.min(m - panel * L) {
            let row = (panel * L + l) * out;
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
