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

mod scan;
#[cfg(test)]
mod tests;

use scan::{distances, relax, second_at, two_smallest};
