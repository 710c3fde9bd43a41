//! The linear assignment the searches solve: `lapjv` on a reduced matrix, or [`Lap`] in `f32`
//! for the input search.

use crate::error::HinmError;
use crate::lap::{Cost, Lap};

/// The optimal assignment of a square `n × n` cost matrix (row-major): `assign[i]` is row `i`'s
/// column, with the total cost (summed in row order from `cost`). Costs must be finite.
///
/// Solved by `lapjv` (Jonker-Volgenant) on an equivalent matrix: each row less its minimum,
/// then each column less its minimum (constants per row and per column change no assignment's
/// rank), its rows in a fixed scattered order (`i · stride mod n`). Both only speed `lapjv` up
/// (on the input search's 512 × 512 matrices about 3× together); the assignment is optimal for
/// `cost`, and deterministic. The input search reduces its matrices the same way, rounds them to
/// `f32` and solves them with [`Lap`] instead (six times faster on them; the same optimum).
pub fn assign(cost: &[f64], n: usize) -> Result<(Vec<usize>, f64), HinmError> {
    Assignment::<f64>::new(n, Solver::Lapjv).solve(cost)
}

/// The number type the reduced matrix is solved in: `f64`, or `f32` where the matrix is large
/// enough for its size to matter (the input search's, 512 × 512 at 75 % of a 4096-column
/// weight: 1 MiB fits the L2 cache, 2 MiB does not). The reduced costs are computed in `f64`
/// and rounded once; the assignment's total is summed from the `f64` costs.
pub(super) trait Solve: lapjv::LapJVCost + Cost {
    fn narrow(x: f64) -> Self;
}

impl Solve for f64 {
    fn narrow(x: f64) -> Self {
        x
    }
}

impl Solve for f32 {
    fn narrow(x: f64) -> Self {
        x as f32
    }
}

/// What solves the reduced matrix of an [`Assignment`].
pub(super) enum Solver<T: Solve> {
    /// `lapjv` 0.3 (the output search and balanced k-means).
    Lapjv,
    /// [`Lap`], Ember's LAPJV with vectorised row scans (the input search: on its 512 × 512
    /// matrices about six times faster than `lapjv`; the same optimum, and the same assignment
    /// but where ties, or totals equal to `f32` rounding, allow another).
    Lap(Lap<T>),
}

/// [`assign`] with its buffers kept from one matrix to the next (of one size).
pub(super) struct Assignment<T: Solve> {
    n: usize,
    order: Vec<usize>,
    col_min: Vec<f64>,
    row_min: Vec<f64>,
    solved: lapjv::Matrix<T>,
    solver: Solver<T>,
}

impl<T: Solve> Assignment<T> {
    pub(super) fn new(n: usize, solver: Solver<T>) -> Self {
        Self {
            n,
            order: scattered(n),
            col_min: vec![0.0; n],
            row_min: vec![0.0; n],
            solved: lapjv::Matrix::zeros((n, n)),
            solver,
        }
    }

    /// An assignment whose reduced matrices [`Lap`] solves (the input search's).
    pub(super) fn with_lap(n: usize) -> Self {
        Self::new(n, Solver::Lap(Lap::new(n)))
    }

    pub(super) fn solve(&mut self, cost: &[f64]) -> Result<(Vec<usize>, f64), HinmError> {
        let n = self.n;
        if cost.len() != n * n {
            return Err(HinmError::Shape(format!(
                "{} costs for {n} × {n}",
                cost.len()
            )));
        }
        // lapjv does not check: NaN or ±inf must not reach it (checked in the reduction's first
        // pass)
        let out = if n < 2 {
            if cost.iter().any(|c| !c.is_finite()) {
                return Err(HinmError::NonFinite("a cost of the assignment".into()));
            }
            (0..n).collect()
        } else {
            let (wide_ok, narrow_ok) = self.reduce(cost)?;
            let failed = |e: lapjv::LapJVError| {
                HinmError::NonFinite(format!("linear assignment failed: {e}"))
            };
            let cols = if wide_ok && narrow_ok {
                match &mut self.solver {
                    Solver::Lapjv => lapjv::lapjv(&self.solved).map_err(failed)?.0,
                    Solver::Lap(lap) => {
                        let solved = self.solved.as_slice().expect("a standard layout");
                        lap.solve(solved)?.to_vec()
                    }
                }
            } else {
                let wide: Vec<f64> = if wide_ok {
                    // too large for the narrow type (or for `Lap`: its sums would overflow): the
                    // same reduced costs, solved in f64
                    (self.order.iter().zip(&self.row_min))
                        .flat_map(|(&i, &lo)| reduced(&cost[i * n..(i + 1) * n], lo, &self.col_min))
                        .collect()
                } else {
                    // costs far apart enough to overflow the differences: solve them as they are
                    self.order
                        .iter()
                        .flat_map(|&i| cost[i * n..(i + 1) * n].iter().copied())
                        .collect()
                };
                let wide = lapjv::Matrix::from_shape_vec((n, n), wide).expect("n × n values");
                lapjv::lapjv(&wide).map_err(failed)?.0
            };
            let mut out = vec![0; n];
            for (&i, c) in self.order.iter().zip(cols) {
                out[i] = c;
            }
            out
        };
        let total = out.iter().enumerate().map(|(r, &c)| cost[r * n + c]).sum();
        Ok((out, total))
    }

    /// The reduction of `cost` into `solved` (its rows in the scattered order), and whether
    /// every reduced cost is finite and whether every one rounded to `T` is at most
    /// `T::LIMIT`; an error where a cost is not finite. Compiled for AVX-512 or AVX2 where the
    /// CPU has it: the same operations in the same order, so the same bits.
    pub(super) fn reduce(&mut self, cost: &[f64]) -> Result<(bool, bool), HinmError> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU supports AVX-512F, checked just above.
                return unsafe { self.reduce_avx512(cost) };
            }
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2, checked just above.
                return unsafe { self.reduce_avx2(cost) };
            }
        }
        self.reduce_passes(cost)
    }

    /// [`Assignment::reduce_passes`] compiled for AVX-512.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    pub(super) fn reduce_avx512(&mut self, cost: &[f64]) -> Result<(bool, bool), HinmError> {
        self.reduce_passes(cost)
    }

    /// [`Assignment::reduce_passes`] compiled for AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    pub(super) fn reduce_avx2(&mut self, cost: &[f64]) -> Result<(bool, bool), HinmError> {
        self.reduce_passes(cost)
    }

    /// [`Assignment::reduce`] in two passes over `cost`.
    #[inline(always)]
    pub(super) fn reduce_passes(&mut self, cost: &[f64]) -> Result<(bool, bool), HinmError> {
        let n = self.n;
        // first pass: each row's minimum (rows in the scattered order), and the column minima
        // of the rows less theirs
        self.col_min.fill(f64::INFINITY);
        for (lo, &i) in self.row_min.iter_mut().zip(&self.order) {
            let row = &cost[i * n..(i + 1) * n];
            let finite;
            (*lo, finite) = row_min(row);
            if !finite {
                return Err(HinmError::NonFinite("a cost of the assignment".into()));
            }
            for (&x, m) in row.iter().zip(self.col_min.iter_mut()) {
                let d = x - *lo;
                *m = if d < *m { d } else { *m };
            }
        }
        // second pass: each row less its minimum and the column minima, rounded once to the
        // solver's type (where they are at most `T::LIMIT`, which `Lap` takes: no sum of its
        // overflows)
        let solved = self.solved.as_slice_mut().expect("a standard layout");
        let (mut wide_ok, mut narrow_ok) = (true, true);
        let rows = solved.chunks_mut(n).zip(&self.order).zip(&self.row_min);
        for ((dst, &i), &lo) in rows {
            for (s, w) in dst
                .iter_mut()
                .zip(reduced(&cost[i * n..(i + 1) * n], lo, &self.col_min))
            {
                *s = T::narrow(w);
                wide_ok &= w.is_finite();
                narrow_ok &= *s <= T::LIMIT;
            }
        }
        Ok((wide_ok, narrow_ok))
    }
}

/// A row of costs less its minimum `lo` and the column minima `col_min` of the rows less
/// theirs: the reduced row.
#[inline(always)]
pub(super) fn reduced<'a>(
    row: &'a [f64],
    lo: f64,
    col_min: &'a [f64],
) -> impl Iterator<Item = f64> + 'a {
    row.iter().zip(col_min).map(move |(&x, &m)| (x - lo) - m)
}

/// The minimum of `row`, and whether every entry of it is finite. Computed in lanes so that it
/// vectorises (without NaN, the minimum does not depend on the order).
#[inline(always)]
pub(super) fn row_min(row: &[f64]) -> (f64, bool) {
    const LANES: usize = 8;
    let (mut m, mut finite) = ([f64::INFINITY; LANES], [true; LANES]);
    let chunks = row.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for ((m, f), &x) in m.iter_mut().zip(&mut finite).zip(c) {
            *m = if x < *m { x } else { *m };
            *f &= x.is_finite();
        }
    }
    m.iter()
        .zip(&finite)
        .map(|(&m, &f)| (m, f))
        .chain(rest.iter().map(|&x| (x, x.is_finite())))
        .fold((f64::INFINITY, true), |(lo, all), (x, f)| {
            (if x < lo { x } else { lo }, all & f)
        })
}

/// `0..n` in the order `i · stride mod n`, the stride coprime to `n` near `0.618 n`.
pub(super) fn scattered(n: usize) -> Vec<usize> {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    let stride = (n * 618 / 1000..n).find(|&s| gcd(s, n) == 1).unwrap_or(1);
    (0..n).map(|i| i * stride % n).collect()
}
