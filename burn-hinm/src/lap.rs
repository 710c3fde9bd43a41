//! The linear assignment problem on a dense square cost matrix: Jonker and Volgenant's shortest
//! augmenting path algorithm (LAPJV; R. Jonker, A. Volgenant, "A shortest augmenting path
//! algorithm for dense and sparse linear assignment problems", Computing 38, 325–340, 1987),
//! with its row scans vectorised. It solves the input permutation search's assignments
//! ([`crate::gyro`]); `lapjv` 0.3 and `lsap` check it in the tests.
//!
//! **The algorithm.** The solver keeps a price `v[j]` per column; row `i`'s reduced cost of
//! column `j` is `c[i][j] − v[j]`, and a row is only ever assigned to a column of smallest
//! reduced cost in it.
//! 1. The prices start at the column minima (JV's column reduction) and every row is free.
//! 2. Two passes of *augmenting row reduction*: a free row takes the column of its smallest
//!    reduced cost and lowers that column's price by the gap to its second smallest (so that
//!    column stays a cheapest of the row); the row that held the column becomes free and, where
//!    the price fell, is served next. A pass ends when every row in it was served; a row is
//!    served again at most `n` times in all (JV's bound). Where the price cannot fall (the two
//!    smallest are equal, or their gap is below the price's precision) and the column is held,
//!    the row takes the second smallest's column instead.
//! 3. Each row still free is assigned by a *shortest augmenting path*: Dijkstra's algorithm on
//!    the reduced costs from the row to the nearest free column, through assigned columns and
//!    the rows that hold them; the prices of the columns settled on the way fall by how much
//!    nearer they are than the path's end, which keeps each assigned row on a cheapest column,
//!    and the path is flipped.
//!
//! **Why it is exact.** Every step keeps each assigned row on a column of smallest reduced cost
//! in it (a price only falls on a column that becomes, or stays, its row's cheapest, and a fall
//! makes the column dearer to every other row). When every row is assigned, the prices and the
//! rows' smallest reduced costs are a feasible dual solution of the same total as the
//! assignment, which is therefore optimal (linear programming duality), whatever the prices
//! started from. The comparisons are exact (no tolerance): in exact arithmetic the assignment
//! is optimal; in floating point a price update rounds, so the total can miss the optimum by the
//! rounding of the prices (a few units in the last place of the costs per row). Where no sum
//! rounds (small integer costs) the total is the optimum to the bit. Ties are broken
//! deterministically: the first column of a row's smallest reduced cost (as `lapjv`'s scan),
//! the first column of the smallest distance.
//!
//! **The vectorised scans.** Both hot loops read one row of the matrix against the prices: the
//! row reduction's scan for the two smallest reduced costs, and the shortest path's relaxation
//! of the unsettled columns through a row. They run in 16 independent lanes (each keeps its
//! smallest value, its second smallest and the chunk of its smallest) merged at the end of the
//! row, so that they compile to vector instructions (AVX-512 or AVX2 where the CPU has it,
//! chosen at run time; 16 lanes of `f32` are one AVX-512 register). The scans compute what the
//! plain loops compute, to the bit (tested). A settled column's distance is NaN while a path is
//! searched: no comparison takes it, so the relaxation needs no mask.
//!
//! **Not warm-started.** Starting from the previous matrix's prices instead of the column
//! minima was measured on the input search's 512 × 512 matrices and is slower: consecutive
//! tries take other columns out, so the prices do not carry over (about 12 600 row scans a
//! solve from the previous prices, 4 900 from the column minima).

use crate::error::HinmError;
use std::ops::{Add, Neg, Sub};

/// Independent lanes of the vectorised row scans (one AVX-512 register of `f32`).
const LANES: usize = 16;

/// A row or column without a partner.
const FREE: usize = usize::MAX;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// The number types the solver computes in: `f32` and `f64`.
pub trait Cost:
    Copy
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Neg<Output = Self>
    + std::fmt::LowerExp
    + sealed::Sealed
{
    /// `+∞`, above every reduced cost.
    const INFINITY: Self;
    /// Not a number: the distance of a settled column (no comparison takes it).
    const NAN: Self;
    /// The largest magnitude of a cost: `MAX / 16`, so that prices, reduced costs and
    /// distances (a few times the costs' span at most) stay finite.
    const LIMIT: Self;
    /// Whether the value is neither infinite nor NaN.
    fn is_finite(self) -> bool;
}

impl Cost for f32 {
    const INFINITY: Self = f32::INFINITY;
    const NAN: Self = f32::NAN;
    const LIMIT: Self = f32::MAX / 16.0;
    fn is_finite(self) -> bool {
        self.is_finite()
    }
}

impl Cost for f64 {
    const INFINITY: Self = f64::INFINITY;
    const NAN: Self = f64::NAN;
    const LIMIT: Self = f64::MAX / 16.0;
    fn is_finite(self) -> bool {
        self.is_finite()
    }
}

/// An assignment solver for `n × n` matrices, its buffers kept from one matrix to the next.
///
/// ```
/// use burn_hinm::lap::Lap;
/// let cost = [4.0f32, 1.0, 3.0, 2.0, 0.0, 5.0, 3.0, 2.0, 2.0];
/// let mut lap = Lap::new(3);
/// assert_eq!(lap.solve(&cost).unwrap(), [1, 0, 2]);
/// ```
pub struct Lap<T: Cost> {
    n: usize,
    /// `v[j]`: row `i`'s reduced cost of column `j` is `c[i][j] − v[j]`.
    prices: Vec<T>,
    /// Each row's column, [`FREE`] where none.
    row_col: Vec<usize>,
    /// Each column's row, [`FREE`] where none.
    col_row: Vec<usize>,
    /// Rows still free.
    free: Vec<usize>,
    /// The shortest path search: each column's distance (NaN once settled), its predecessor row,
    /// and the settled columns with their distances.
    dist: Vec<T>,
    pred: Vec<u32>,
    settled: Vec<(usize, T)>,
}

impl<T: Cost> Lap<T> {
    /// A solver of `n × n` matrices (`n < 2³²`).
    pub fn new(n: usize) -> Self {
        assert!(u32::try_from(n).is_ok(), "{n} rows: at most 2³² − 1");
        Self {
            n,
            prices: vec![T::INFINITY; n],
            row_col: vec![FREE; n],
            col_row: vec![FREE; n],
            free: Vec::with_capacity(n),
            dist: vec![T::INFINITY; n],
            pred: vec![0; n],
            settled: Vec::with_capacity(n),
        }
    }

    /// The optimal assignment of `cost` (`n × n`, row-major): entry `i` is row `i`'s column.
    /// Every cost must be finite and at most [`Cost::LIMIT`] in magnitude, else
    /// [`HinmError::NonFinite`]; `n × n` costs, else [`HinmError::Shape`].
    pub fn solve(&mut self, cost: &[T]) -> Result<&[usize], HinmError> {
        let n = self.n;
        if cost.len() != n * n {
            return Err(HinmError::Shape(format!(
                "{} costs for {n} × {n}",
                cost.len()
            )));
        }
        self.dispatch(cost)?;
        Ok(&self.row_col)
    }

    /// [`Lap::run`] compiled for the widest vectors the CPU has: AVX-512, AVX2 or the target's
    /// default (on the input search's matrices 0.35, 0.39 and 0.70 ms a 512 × 512 solve).
    fn dispatch(&mut self, cost: &[T]) -> Result<(), HinmError> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU supports AVX-512F, checked just above.
                return unsafe { self.run_avx512(cost) };
            }
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2, checked just above.
                return unsafe { self.run_avx2(cost) };
            }
        }
        self.run(cost)
    }

    /// [`Lap::run`] compiled for AVX-512 (the same operations in the same order).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    fn run_avx512(&mut self, cost: &[T]) -> Result<(), HinmError> {
        self.run(cost)
    }

    /// [`Lap::run`] compiled for AVX2 (the same operations in the same order).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn run_avx2(&mut self, cost: &[T]) -> Result<(), HinmError> {
        self.run(cost)
    }

    /// Checks the costs, then the three steps of the module's algorithm.
    #[inline(always)]
    fn run(&mut self, cost: &[T]) -> Result<(), HinmError> {
        check(cost, self.n)?;
        if self.n < 2 {
            // nothing to choose: the one row, if any, takes the one column
            self.row_col.fill(0);
            return Ok(());
        }
        self.start(cost);
        for _ in 0..2 {
            if self.free.is_empty() {
                break;
            }
            self.reduce_rows(cost);
        }
        let free = std::mem::take(&mut self.free);
        for &f in &free {
            self.augment(cost, f);
        }
        self.free = free;
        Ok(())
    }

    /// Step 1: the prices at the column minima, every row free.
    #[inline(always)]
    fn start(&mut self, cost: &[T]) {
        self.prices.fill(T::INFINITY);
        for row in cost.chunks_exact(self.n) {
            for (v, &c) in self.prices.iter_mut().zip(row) {
                *v = less(c, *v);
            }
        }
        self.row_col.fill(FREE);
        self.col_row.fill(FREE);
        self.free.clear();
        self.free.extend(0..self.n);
    }

    /// Step 2, one pass of augmenting row reduction over the free rows; the rows it leaves free
    /// stay in `free`.
    #[inline(always)]
    fn reduce_rows(&mut self, cost: &[T]) {
        let n = self.n;
        let todo = self.free.len();
        let (mut next, mut left, mut served) = (0, 0, 0);
        while next < todo {
            served += 1;
            let i = self.free[next];
            next += 1;
            let row = &cost[i * n..(i + 1) * n];
            let (u1, u2, mut j) = two_smallest(row, &self.prices);
            let mut held = self.col_row[j];
            let lowered = self.prices[j] - (u2 - u1);
            let falls = lowered < self.prices[j];
            if served < next * n {
                if falls {
                    self.prices[j] = lowered;
                } else if held != FREE {
                    j = second_at(row, &self.prices, j, u2);
                    held = self.col_row[j];
                }
                if held != FREE {
                    if falls {
                        // the displaced row is served next
                        next -= 1;
                        self.free[next] = held;
                    } else {
                        self.free[left] = held;
                        left += 1;
                    }
                }
            } else if held != FREE {
                self.free[left] = held;
                left += 1;
            }
            self.row_col[i] = j;
            self.col_row[j] = i;
        }
        self.free.truncate(left);
    }

    /// Step 3 for free row `f`: the shortest augmenting path, the settled columns' prices, and
    /// the path flipped.
    #[inline(always)]
    fn augment(&mut self, cost: &[T], f: usize) {
        let n = self.n;
        self.settled.clear();
        let row = &cost[f * n..(f + 1) * n];
        let (mut near, mut j) =
            distances(row, &self.prices, f as u32, &mut self.dist, &mut self.pred);
        while self.col_row[j] != FREE {
            let i = self.col_row[j];
            self.settled.push((j, near));
            self.dist[j] = T::NAN;
            let row = &cost[i * n..(i + 1) * n];
            // row i's smallest reduced cost (its column's) less the distance it is reached at
            let h = (row[j] - self.prices[j]) - near;
            (near, j) = relax(
                row,
                &self.prices,
                h,
                i as u32,
                &mut self.dist,
                &mut self.pred,
            );
        }
        for &(k, d) in &self.settled {
            self.prices[k] = self.prices[k] + (d - near);
        }
        loop {
            let i = self.pred[j] as usize;
            self.col_row[j] = i;
            let before = std::mem::replace(&mut self.row_col[i], j);
            if i == f {
                break;
            }
            j = before;
        }
    }
}

/// `a` where it is below `b`, else `b` (one vector minimum).
#[inline(always)]
fn less<T: Cost>(a: T, b: T) -> T {
    if a < b { a } else { b }
}

/// `a` where it is above `b`, else `b` (one vector maximum).
#[inline(always)]
fn more<T: Cost>(a: T, b: T) -> T {
    if a > b { a } else { b }
}

/// Every cost finite and within [`Cost::LIMIT`], else the first one that is not, as an error.
#[inline(always)]
fn check<T: Cost>(cost: &[T], n: usize) -> Result<(), HinmError> {
    let (hi, lo) = (T::LIMIT, -T::LIMIT);
    let within = |c: T| (c <= hi) & (c >= lo);
    // no early exit: one vectorised pass (the matrix is nearly always fine)
    if cost.iter().fold(true, |ok, &c| ok & within(c)) {
        return Ok(());
    }
    let at = (cost.iter())
        .position(|&c| !within(c))
        .expect("a cost out of range");
    let (c, i, j) = (cost[at], at / n, at % n);
    Err(HinmError::NonFinite(if c.is_finite() {
        format!("assignment cost {c:e} at ({i}, {j}): beyond ±{hi:e}, its sums would overflow")
    } else {
        format!("assignment cost {c:e} at ({i}, {j})")
    }))
}

/// The smallest and the second smallest of `row − v` (equal where the smallest is there twice),
/// and the first column of the smallest.
#[inline(always)]
fn two_smallest<T: Cost>(row: &[T], v: &[T]) -> (T, T, usize) {
    let (mut m1, mut m2, mut at) = ([T::INFINITY; LANES], [T::INFINITY; LANES], [0u32; LANES]);
    let (rows, row_tail) = row.as_chunks::<LANES>();
    let (prices, price_tail) = v.as_chunks::<LANES>();
    for (k, (c, v)) in rows.iter().zip(prices).enumerate() {
        for l in 0..LANES {
            let h = c[l] - v[l];
            at[l] = if h < m1[l] { k as u32 } else { at[l] };
            m2[l] = less(m2[l], more(m1[l], h));
            m1[l] = less(m1[l], h);
        }
    }
    let (mut u1, first) = lane_min(m1, at);
    // the second smallest: every lane's second smallest and the other lanes' smallest
    let mut rest = m2;
    for l in 0..LANES {
        let other = if key(at, l) == first {
            T::INFINITY
        } else {
            m1[l]
        };
        rest[l] = less(rest[l], other);
    }
    let mut u2 = lane_min(rest, at).0;
    let mut j1 = first as usize;
    let start = rows.len() * LANES;
    for (k, (&c, &v)) in row_tail.iter().zip(price_tail).enumerate() {
        let h = c - v;
        u2 = less(u2, more(u1, h));
        if h < u1 {
            (u1, j1) = (h, start + k);
        }
    }
    (u1, u2, j1)
}

/// The column of lane `l`'s smallest, found in chunk `at[l]`.
#[inline(always)]
fn key(at: [u32; LANES], l: usize) -> u32 {
    at[l] * LANES as u32 + l as u32
}

/// The smallest of the lanes' `m` and its first column (the lanes' smallest were found in the
/// chunks `at`); `u32::MAX` as the column where every lane is `+∞` (no chunk, or every column
/// settled).
#[inline(always)]
fn lane_min<T: Cost>(m: [T; LANES], at: [u32; LANES]) -> (T, u32) {
    let mut low = m;
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            low[l] = less(low[l], low[l + width]);
        }
    }
    let low = low[0];
    let mut keys = [u32::MAX; LANES];
    for (l, k) in keys.iter_mut().enumerate() {
        if m[l] == low && low < T::INFINITY {
            *k = key(at, l);
        }
    }
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            keys[l] = keys[l].min(keys[l + width]);
        }
    }
    (low, keys[0])
}

/// The first column other than `j1` where `row − v` is `u2` (rare: only where the two smallest
/// reduced costs are equal or too close to lower a price).
fn second_at<T: Cost>(row: &[T], v: &[T], j1: usize, u2: T) -> usize {
    (row.iter().zip(v).enumerate())
        .position(|(j, (&c, &v))| j != j1 && c - v == u2)
        .expect("the second smallest is in the row")
}

/// The shortest path search from free row `f`: every column's distance `row − v` and
/// predecessor `f`; the smallest distance and its first column.
#[inline(always)]
fn distances<T: Cost>(row: &[T], v: &[T], f: u32, dist: &mut [T], pred: &mut [u32]) -> (T, usize) {
    pred.fill(f);
    for ((d, &c), &v) in dist.iter_mut().zip(row).zip(v) {
        *d = c - v;
    }
    nearest(dist)
}

/// The smallest distance that is not NaN and its first column.
#[inline(always)]
fn nearest<T: Cost>(dist: &[T]) -> (T, usize) {
    let (mut m, mut at) = ([T::INFINITY; LANES], [0u32; LANES]);
    let (chunks, tail) = dist.as_chunks::<LANES>();
    for (k, d) in chunks.iter().enumerate() {
        for l in 0..LANES {
            at[l] = if d[l] < m[l] { k as u32 } else { at[l] };
            m[l] = less(d[l], m[l]);
        }
    }
    finish(lane_min(m, at), tail, chunks.len() * LANES)
}

/// The lanes' smallest `(value, column)` and the `tail` after them (columns from `start`): the
/// smallest and its first column.
#[inline(always)]
fn finish<T: Cost>((mut m, key): (T, u32), tail: &[T], start: usize) -> (T, usize) {
    let mut j = key as usize;
    for (k, &d) in tail.iter().enumerate() {
        if d < m {
            (m, j) = (d, start + k);
        }
    }
    (m, j)
}

/// Relaxes the unsettled columns (distance not NaN) through row `i`, reached at its column's
/// distance: column `k` is at `row[k] − v[k] − h` from the start through it, its predecessor
/// `i` where that is shorter. Returns the smallest distance left and its first column.
#[inline(always)]
fn relax<T: Cost>(
    row: &[T],
    v: &[T],
    h: T,
    i: u32,
    dist: &mut [T],
    pred: &mut [u32],
) -> (T, usize) {
    let (mut m, mut at) = ([T::INFINITY; LANES], [0u32; LANES]);
    let (rows, row_tail) = row.as_chunks::<LANES>();
    let (prices, price_tail) = v.as_chunks::<LANES>();
    let (dists, dist_tail) = dist.as_chunks_mut::<LANES>();
    let (preds, pred_tail) = pred.as_chunks_mut::<LANES>();
    let chunks = rows.iter().zip(prices).zip(dists).zip(preds);
    for (k, (((c, v), d), p)) in chunks.enumerate() {
        for l in 0..LANES {
            let r = (c[l] - v[l]) - h;
            let shorter = r < d[l];
            p[l] = if shorter { i } else { p[l] };
            d[l] = if shorter { r } else { d[l] };
            at[l] = if d[l] < m[l] { k as u32 } else { at[l] };
            m[l] = less(d[l], m[l]);
        }
    }
    let tails = row_tail.iter().zip(price_tail).zip(dist_tail.iter_mut());
    for (((&c, &v), d), p) in tails.zip(pred_tail) {
        let r = (c - v) - h;
        if r < *d {
            (*d, *p) = (r, i);
        }
    }
    let start = rows.len() * LANES;
    finish(lane_min(m, at), &dist[start..], start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// How the test matrices' costs are drawn.
    #[derive(Clone, Copy, Debug)]
    enum Costs {
        /// Uniform in [-30, 70): one optimal assignment.
        Spread,
        /// Integers in `0..k`: many equal costs and many optimal assignments.
        Ties(u32),
    }

    fn matrix(rng: &mut StdRng, n: usize, costs: Costs) -> Vec<f64> {
        values(rng, n * n, costs)
    }

    fn values(rng: &mut StdRng, len: usize, costs: Costs) -> Vec<f64> {
        (0..len)
            .map(|_| match costs {
                Costs::Spread => rng.random::<f64>() * 100.0 - 30.0,
                Costs::Ties(k) => f64::from(rng.random_range(0..k)),
            })
            .collect()
    }

    /// The total of `cols` on `cost`, checking that it is a permutation.
    fn total(cost: &[f64], cols: &[usize]) -> f64 {
        let n = cols.len();
        let mut seen = vec![false; n];
        for &j in cols {
            assert!(
                !std::mem::replace(&mut seen[j], true),
                "{cols:?}: a permutation"
            );
        }
        cols.iter().enumerate().map(|(i, &j)| cost[i * n + j]).sum()
    }

    /// The optimal totals found by `lsap` (SciPy's algorithm) and `lapjv` 0.3.
    fn oracles(cost: &[f64], n: usize) -> [f64; 2] {
        let (_, cols) = lsap::solve(n, n, &cost.to_vec(), false).unwrap();
        let matrix = lapjv::Matrix::from_shape_vec((n, n), cost.to_vec()).unwrap();
        let (rows, _) = lapjv::lapjv(&matrix).unwrap();
        [total(cost, &cols), total(cost, &rows)]
    }

    /// Solves `cost` as `T` (rounded to it first) with `lap`; returns the costs as `T` holds
    /// them (in f64) and the total of the assignment found.
    fn solved<T: Cost>(lap: &mut Lap<T>, cost: &[f64], narrow: fn(f64) -> T) -> (Vec<f64>, f64)
    where
        f64: From<T>,
    {
        let narrowed: Vec<T> = cost.iter().map(|&c| narrow(c)).collect();
        let cols = lap.solve(&narrowed).unwrap().to_vec();
        let exact: Vec<f64> = narrowed.into_iter().map(f64::from).collect();
        let t = total(&exact, &cols);
        (exact, t)
    }

    /// Solved in f32 and in f64, each total against both oracles': within `tolerance · n ·
    /// ε · max |c|` (the rounding of the solver's arithmetic), exactly where `tolerance` is 0.
    fn check_optimal(lap32: &mut Lap<f32>, lap64: &mut Lap<f64>, cost: &[f64], tolerance: f64) {
        let n = (cost.len() as f64).sqrt() as usize;
        let scale = cost.iter().fold(1.0f64, |m, c| m.max(c.abs())) * n as f64;
        let runs = [
            (solved(lap32, cost, |c| c as f32), f64::from(f32::EPSILON)),
            (solved(lap64, cost, |c| c), f64::EPSILON),
        ];
        for ((exact, got), eps) in runs {
            for best in oracles(&exact, n) {
                assert!(
                    (got - best).abs() <= tolerance * eps * scale,
                    "n {n}: {got} against the optimum {best}"
                );
            }
        }
    }

    #[test]
    fn random_costs_are_solved_to_the_optimum() {
        let mut rng = StdRng::seed_from_u64(1);
        for n in [1, 2, 3, 5, 15, 16, 17, 33, 64, 100, 200] {
            let (mut lap32, mut lap64) = (Lap::new(n), Lap::new(n));
            for _ in 0..3 {
                let cost = matrix(&mut rng, n, Costs::Spread);
                check_optimal(&mut lap32, &mut lap64, &cost, 2.0);
            }
        }
    }

    #[test]
    fn tied_costs_are_solved_to_the_optimum_exactly() {
        let mut rng = StdRng::seed_from_u64(2);
        for n in [2, 3, 4, 7, 16, 31, 48, 100, 150] {
            let (mut lap32, mut lap64) = (Lap::new(n), Lap::new(n));
            for k in [2, 3, 5] {
                let cost = matrix(&mut rng, n, Costs::Ties(k));
                check_optimal(&mut lap32, &mut lap64, &cost, 0.0);
            }
        }
    }

    #[test]
    fn degenerate_matrices_are_solved_to_the_optimum_exactly() {
        let mut rng = StdRng::seed_from_u64(3);
        for n in [1, 2, 3, 17, 64] {
            let (mut lap32, mut lap64) = (Lap::new(n), Lap::new(n));
            let ties = matrix(&mut rng, n, Costs::Ties(4));
            // all equal
            check_optimal(&mut lap32, &mut lap64, &vec![7.0; n * n], 0.0);
            // one row, then one column far above the rest
            for row in [true, false] {
                let dominant = |k: usize| if row { k / n == 0 } else { k % n == n / 2 };
                let cost: Vec<f64> = (0..n * n)
                    .map(|k| ties[k] + if dominant(k) { 1e6 } else { 0.0 })
                    .collect();
                check_optimal(&mut lap32, &mut lap64, &cost, 0.0);
            }
            // one row far below the rest, the others all equal
            let cost: Vec<f64> = (0..n * n).map(|k| if k < n { -5.0 } else { 1.0 }).collect();
            check_optimal(&mut lap32, &mut lap64, &cost, 0.0);
        }
        // n = 2 both ways round, and n = 1
        let mut lap = Lap::<f64>::new(2);
        assert_eq!(lap.solve(&[1.0, 2.0, 3.0, 1.0]).unwrap(), [0, 1]);
        assert_eq!(lap.solve(&[2.0, 1.0, 1.0, 3.0]).unwrap(), [1, 0]);
        assert_eq!(Lap::<f32>::new(1).solve(&[-3.5]).unwrap(), [0]);
        assert!(Lap::<f32>::new(0).solve(&[]).unwrap().is_empty());
    }

    #[test]
    fn only_square_matrices_are_taken() {
        let mut lap = Lap::<f64>::new(3);
        for len in [0, 6, 8, 12] {
            let err = lap.solve(&vec![1.0; len]).unwrap_err();
            assert!(matches!(err, HinmError::Shape(_)), "{len}: {err}");
        }
        assert_eq!(lap.solve(&[1.0; 9]).unwrap().len(), 3);
    }

    #[test]
    fn non_finite_and_huge_costs_are_refused_wherever_they_are() {
        // 19 × 19: whole chunks of 16 and a tail in the flattened matrix
        let n = 19;
        let fine: Vec<f64> = (0..n * n).map(|k| (k % 7) as f64).collect();
        let mut lap = Lap::<f64>::new(n);
        for bad in [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
            -f64::MAX / 8.0,
        ] {
            for at in [0, 5, 16, 18, 7 * n + 3, n * n - 1] {
                let mut cost = fine.clone();
                cost[at] = bad;
                let err = lap.solve(&cost).unwrap_err();
                assert!(
                    matches!(err, HinmError::NonFinite(_)),
                    "{bad} at {at}: {err}"
                );
                let narrow: Vec<f32> = cost.iter().map(|&c| c as f32).collect();
                assert!(
                    Lap::<f32>::new(n).solve(&narrow).is_err(),
                    "{bad} at {at}, f32"
                );
            }
        }
        // the limit itself is taken, and a refusal leaves the solver as good as new
        let mut cost = fine.clone();
        cost[3] = f64::LIMIT;
        assert!(lap.solve(&cost).is_ok());
        let (_, got) = solved(&mut lap, &fine, |c| c);
        assert_eq!(got, oracles(&fine, n)[0]);
    }

    #[test]
    fn one_solver_solves_unrelated_matrices_in_turn() {
        // nothing carries over from one matrix to the next: large, tiny, negative, tied
        let mut rng = StdRng::seed_from_u64(4);
        let n = 40;
        let (mut lap32, mut lap64) = (Lap::new(n), Lap::new(n));
        for _ in 0..4 {
            for (scale, costs) in [
                (1e6, Costs::Spread),
                (1.0, Costs::Ties(3)),
                (-1e-3, Costs::Spread),
                (1.0, Costs::Ties(2)),
            ] {
                let cost: Vec<f64> = (matrix(&mut rng, n, costs).into_iter())
                    .map(|c| c * scale)
                    .collect();
                let tolerance = if let Costs::Ties(_) = costs { 0.0 } else { 2.0 };
                check_optimal(&mut lap32, &mut lap64, &cost, tolerance);
            }
        }
    }

    #[test]
    fn the_prices_certify_the_assignment() {
        // integer costs, so the reduced costs are exact: each row's column is a smallest
        // reduced cost in it (with the prices, a dual of the assignment's total)
        let mut rng = StdRng::seed_from_u64(5);
        for n in [5, 16, 50] {
            let cost: Vec<f64> = matrix(&mut rng, n, Costs::Ties(9));
            let mut lap = Lap::<f64>::new(n);
            let cols = lap.solve(&cost).unwrap().to_vec();
            for (i, &j) in cols.iter().enumerate() {
                let reduced = |k: usize| cost[i * n + k] - lap.prices[k];
                let smallest = (0..n).map(reduced).fold(f64::INFINITY, f64::min);
                assert_eq!(reduced(j), smallest, "n {n}, row {i}");
            }
        }
    }

    #[test]
    fn every_instruction_set_gives_the_same_assignment_and_prices() {
        let mut rng = StdRng::seed_from_u64(7);
        for (n, costs) in [
            (37, Costs::Spread),
            (64, Costs::Ties(3)),
            (100, Costs::Spread),
        ] {
            let cost: Vec<f32> = (matrix(&mut rng, n, costs).into_iter())
                .map(|c| c as f32)
                .collect();
            let mut plain = Lap::new(n);
            plain.run(&cost).unwrap();
            let mut runs = Vec::new();
            #[cfg(target_arch = "x86_64")]
            {
                if std::is_x86_feature_detected!("avx2") {
                    let mut lap = Lap::new(n);
                    // SAFETY: the CPU supports AVX2, checked just above.
                    unsafe { lap.run_avx2(&cost) }.unwrap();
                    runs.push(("avx2", lap));
                }
                if std::is_x86_feature_detected!("avx512f") {
                    let mut lap = Lap::new(n);
                    // SAFETY: the CPU supports AVX-512F, checked just above.
                    unsafe { lap.run_avx512(&cost) }.unwrap();
                    runs.push(("avx512", lap));
                }
            }
            for (name, lap) in runs {
                assert_eq!(lap.row_col, plain.row_col, "{name}, n {n}");
                let bits = |v: &[f32]| v.iter().map(|p| p.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&lap.prices), bits(&plain.prices), "{name}, n {n}");
            }
        }
    }

    /// The plain scans the vectorised ones stand for.
    fn plain_two_smallest(row: &[f64], v: &[f64]) -> (f64, f64, usize) {
        let (mut u1, mut u2, mut j1) = (f64::INFINITY, f64::INFINITY, 0);
        for (j, (&c, &v)) in row.iter().zip(v).enumerate() {
            let h = c - v;
            if h < u1 {
                (u2, u1, j1) = (u1, h, j);
            } else if h < u2 {
                u2 = h;
            }
        }
        (u1, u2, j1)
    }

    #[test]
    fn the_vectorised_scans_are_the_plain_scans() {
        let mut rng = StdRng::seed_from_u64(6);
        for len in [1, 2, 15, 16, 17, 40, 64, 100] {
            for costs in [Costs::Spread, Costs::Ties(3)] {
                let (row, v) = (values(&mut rng, len, costs), values(&mut rng, len, costs));
                let (u1, u2, j1) = two_smallest(&row, &v);
                assert_eq!(
                    (u1, u2, j1),
                    plain_two_smallest(&row, &v),
                    "{len} {costs:?}"
                );
                if len > 1 {
                    let j2 = second_at(&row, &v, j1, u2);
                    assert!(j2 != j1 && row[j2] - v[j2] == u2);
                }
                // relaxation through row i of the columns not yet settled (every third is)
                let (h, i) = (rng.random::<f64>(), 7);
                let mut dist: Vec<f64> = (0..len)
                    .map(|k| match k % 3 {
                        0 => f64::NAN,
                        _ => rng.random::<f64>() * 50.0,
                    })
                    .collect();
                let mut pred = vec![1u32; len];
                let (mut want_dist, mut want_pred) = (dist.clone(), pred.clone());
                for k in 0..len {
                    let r = (row[k] - v[k]) - h;
                    if r < want_dist[k] {
                        (want_dist[k], want_pred[k]) = (r, i);
                    }
                }
                let want = (want_dist.iter().enumerate())
                    .filter(|(_, d)| !d.is_nan())
                    .fold((f64::INFINITY, u32::MAX as usize), |(m, j), (k, &d)| {
                        if d < m { (d, k) } else { (m, j) }
                    });
                let got = relax(&row, &v, h, i, &mut dist, &mut pred);
                assert_eq!(got, want, "{len} {costs:?}");
                assert_eq!(pred, want_pred);
                let same =
                    |a: &f64, b: &f64| a.to_bits() == b.to_bits() || a.is_nan() && b.is_nan();
                assert!(dist.iter().zip(&want_dist).all(|(a, b)| same(a, b)));
            }
        }
    }
}
