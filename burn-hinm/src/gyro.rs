//! Gyro-Permutation: the output-channel permutation (random extraction, balanced k-means, a
//! linear assignment of clusters to tiles) and the tile-wise input-channel permutation (one
//! column out of each group of 4, reassigned by a linear assignment), with the baselines
//! "none" and OVW (output permutation only).
//!
//! It follows the public reference (sminy67/hinm_sp, `permutations.py`) except for its bugs:
//! the output cost is the sum of the `K − nnz_vec` **smallest** tile column saliencies (the
//! reference sums the `nnz_vec` smallest whenever `K ≠ 2·nnz_vec`); the input permutation is
//! applied once and kept with the mask (the reference applies it twice to the saliency and maps
//! it back once); one seeded RNG drives every random choice; the permutations are returned, not
//! thrown away. Saliency is accumulated in f64.

use crate::error::HinmError;
use crate::lap::{Cost, Lap};
use crate::mask::{
    HinmMask, Retained, Scores, check_tile, column_sums, mask_with, nnz_vec, smallest_sum,
    vector_columns,
};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::index::sample;

/// Which permutations a HiNM mask is searched with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// None: tiles of consecutive rows, kept columns in ascending order.
    None,
    /// Output-channel permutation only (output-channel vector-wise, OVW).
    Ovw,
    /// Output and tile-wise input permutations (Gyro-Permutation).
    Gyro,
}

impl std::str::FromStr for Method {
    type Err = HinmError;
    fn from_str(s: &str) -> Result<Self, HinmError> {
        match s {
            "none" => Ok(Self::None),
            "ovw" => Ok(Self::Ovw),
            "gyro" => Ok(Self::Gyro),
            other => Err(HinmError::Method(other.to_string())),
        }
    }
}

/// The reference's extension-size schedule (steps with `num_ext ≥ V` are skipped).
pub const SCHEDULE: [usize; 7] = [8, 1, 4, 1, 2, 1, 1];

/// Non-improving tries that end an input-permutation search of one tile.
pub const INPUT_PATIENCE: usize = 3;

/// Balanced k-means iterations at most, and the relative tolerance on the centroids' movement.
const KMEANS_ITERATIONS: usize = 20;
const KMEANS_TOLERANCE: f64 = 1e-4;

/// `f(i)` for every `i < n`, in order, computed on the available threads (`f` is pure, so the
/// result does not depend on their number).
fn par_map<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let per = n.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = (0..n)
            .step_by(per)
            .map(|start| s.spawn(move || (start..(start + per).min(n)).map(f).collect::<Vec<T>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a search thread does not panic"))
            .collect()
    })
}

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
trait Solve: lapjv::LapJVCost + Cost {
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
enum Solver<T: Solve> {
    /// `lapjv` 0.3 (the output search and balanced k-means).
    Lapjv,
    /// [`Lap`], Ember's LAPJV with vectorised row scans (the input search: on its 512 × 512
    /// matrices about six times faster than `lapjv`; the same optimum, and the same assignment
    /// but where ties, or totals equal to `f32` rounding, allow another).
    Lap(Lap<T>),
}

/// [`assign`] with its buffers kept from one matrix to the next (of one size).
struct Assignment<T: Solve> {
    n: usize,
    order: Vec<usize>,
    col_min: Vec<f64>,
    row_min: Vec<f64>,
    solved: lapjv::Matrix<T>,
    solver: Solver<T>,
}

impl<T: Solve> Assignment<T> {
    fn new(n: usize, solver: Solver<T>) -> Self {
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
    fn with_lap(n: usize) -> Self {
        Self::new(n, Solver::Lap(Lap::new(n)))
    }

    fn solve(&mut self, cost: &[f64]) -> Result<(Vec<usize>, f64), HinmError> {
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
    fn reduce(&mut self, cost: &[f64]) -> Result<(bool, bool), HinmError> {
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
    fn reduce_avx512(&mut self, cost: &[f64]) -> Result<(bool, bool), HinmError> {
        self.reduce_passes(cost)
    }

    /// [`Assignment::reduce_passes`] compiled for AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn reduce_avx2(&mut self, cost: &[f64]) -> Result<(bool, bool), HinmError> {
        self.reduce_passes(cost)
    }

    /// [`Assignment::reduce`] in two passes over `cost`.
    #[inline(always)]
    fn reduce_passes(&mut self, cost: &[f64]) -> Result<(bool, bool), HinmError> {
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
fn reduced<'a>(row: &'a [f64], lo: f64, col_min: &'a [f64]) -> impl Iterator<Item = f64> + 'a {
    row.iter().zip(col_min).map(move |(&x, &m)| (x - lo) - m)
}

/// The minimum of `row`, and whether every entry of it is finite. Computed in lanes so that it
/// vectorises (without NaN, the minimum does not depend on the order).
#[inline(always)]
fn row_min(row: &[f64]) -> (f64, bool) {
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
fn scattered(n: usize) -> Vec<usize> {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    let stride = (n * 618 / 1000..n).find(|&s| gcd(s, n) == 1).unwrap_or(1);
    (0..n).map(|i| i * stride % n).collect()
}

/// Saliency a tile loses to column-vector pruning: the `K − nnz` smallest of its column sums.
pub fn tile_cost(sums: &[f64], nnz: usize) -> f64 {
    let mut v = sums.to_vec();
    smallest_sum(&mut v, sums.len() - nnz)
}

/// Points and centroids whose distances are computed together: a block of squared distances
/// that stays in registers over the dimensions.
const POINT_BLOCK: usize = 4;
const CENTROID_BLOCK: usize = 8;

/// The Euclidean distances of `points` (row-major, `dim` values each) to `k` centroids given
/// transposed (`dim × wk`, `wk ≥ k` a multiple of [`CENTROID_BLOCK`], the padding computed and
/// dropped), row-major `points × k`. Each squared distance is summed over the dimensions in
/// order, as a sequential sum (the lanes run over points and centroids, no addition is
/// reordered: the result equals the plain loop's to the bit, with or without AVX2).
fn distances_to(points: &[f64], transposed: &[f64], dim: usize, k: usize) -> Vec<f64> {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { distances_avx2(points, transposed, dim, k) };
    }
    distances_blocks(points, transposed, dim, k)
}

/// [`distances_blocks`] compiled for AVX2 (the same operations in the same order).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn distances_avx2(points: &[f64], transposed: &[f64], dim: usize, k: usize) -> Vec<f64> {
    distances_blocks(points, transposed, dim, k)
}

#[inline(always)]
fn distances_blocks(points: &[f64], transposed: &[f64], dim: usize, k: usize) -> Vec<f64> {
    let n = points.len() / dim;
    let wk = transposed.len() / dim;
    let mut out = vec![0.0; n * k];
    for pb in (0..n).step_by(POINT_BLOCK) {
        let rows = POINT_BLOCK.min(n - pb);
        // the block's points, interleaved: x[r][p]
        let mut x = vec![0.0; dim * POINT_BLOCK];
        for p in 0..rows {
            for (r, &v) in points[(pb + p) * dim..(pb + p + 1) * dim]
                .iter()
                .enumerate()
            {
                x[r * POINT_BLOCK + p] = v;
            }
        }
        for cb in (0..k).step_by(CENTROID_BLOCK) {
            let mut acc = [[0.0f64; CENTROID_BLOCK]; POINT_BLOCK];
            for (xr, cr) in x.chunks_exact(POINT_BLOCK).zip(transposed.chunks_exact(wk)) {
                let c: &[f64; CENTROID_BLOCK] = cr[cb..cb + CENTROID_BLOCK]
                    .try_into()
                    .expect("a whole block");
                for (acc, &x) in acc.iter_mut().zip(xr) {
                    for (a, &c) in acc.iter_mut().zip(c) {
                        *a += (x - c) * (x - c);
                    }
                }
            }
            for (p, acc) in acc.iter().enumerate().take(rows) {
                let row = &mut out[(pb + p) * k + cb..(pb + p) * k + (cb + CENTROID_BLOCK).min(k)];
                for (d, &a) in row.iter_mut().zip(acc) {
                    *d = a.sqrt();
                }
            }
        }
    }
    out
}

/// Balanced k-means: `data` (n points of `dim` values, row-major) into `k` clusters of exactly
/// `n / k` points, Euclidean, at most 20 iterations, stopping when the centroids move less than
/// a relative tolerance; assignment by a linear assignment against each centroid replicated
/// `n / k` times. Returns each point's cluster.
pub fn balanced_kmeans(
    data: &[f64],
    dim: usize,
    k: usize,
    rng: &mut StdRng,
) -> Result<Vec<usize>, HinmError> {
    let n = data.len() / dim;
    let size = n / k;
    let point = |i: usize| &data[i * dim..(i + 1) * dim];
    let mut centroids: Vec<f64> = sample(rng, n, k)
        .into_iter()
        .flat_map(|i| point(i).to_vec())
        .collect();
    let mut clusters = vec![0; n];
    for _ in 0..KMEANS_ITERATIONS {
        // centroids transposed (dim × k, padded): the distances run in lanes over them
        let wk = k.div_ceil(CENTROID_BLOCK) * CENTROID_BLOCK;
        let mut transposed = vec![0.0; dim * wk];
        for (c, centroid) in centroids.chunks(dim).enumerate() {
            for (r, &x) in centroid.iter().enumerate() {
                transposed[r * wk + c] = x;
            }
        }
        // a few blocks of points per job
        let per = n.div_ceil(POINT_BLOCK * 8).max(1) * POINT_BLOCK;
        let distances = par_map(n.div_ceil(per), |b| {
            let points = b * per..((b + 1) * per).min(n);
            distances_to(
                &data[points.start * dim..points.end * dim],
                &transposed,
                dim,
                k,
            )
        })
        .concat();
        let mut cost = vec![0.0; n * n];
        for (row, d) in cost.chunks_mut(n).zip(distances.chunks(k)) {
            for (slots, &d) in row.chunks_mut(size).zip(d) {
                slots.fill(d);
            }
        }
        let (slots, _) = assign(&cost, n)?;
        clusters = slots.iter().map(|s| s / size).collect();
        let mut next = vec![0.0; k * dim];
        for (i, &c) in clusters.iter().enumerate() {
            for (x, v) in next[c * dim..(c + 1) * dim].iter_mut().zip(point(i)) {
                *x += v / size as f64;
            }
        }
        let moved: f64 = next
            .iter()
            .zip(&centroids)
            .map(|(a, b)| (a - b) * (a - b))
            .sum();
        let scale: f64 = next.iter().map(|a| a * a).sum();
        centroids = next;
        if moved.sqrt() <= KMEANS_TOLERANCE * scale.sqrt().max(f64::MIN_POSITIVE) {
            break;
        }
    }
    Ok(clusters)
}

/// Lanes of the bracketing pass (independent partial sums the compiler keeps in vectors).
const LANES: usize = 4;
/// Bracketing passes tried before a plain selection.
const BRACKET_TRIES: usize = 4;

/// Over `y = r + c`: the sum and the number of values `< lo`, and the number `≤ hi`; `marks[i]`
/// is 1 where `lo ≤ y[i] ≤ hi`, else 0. Not inlined: inlined into its caller the loop is no
/// longer vectorised (measured: three times slower; compiled for AVX2, 15 % slower again).
#[inline(never)]
fn bracket_pass(r: &[f64], c: &[f64], lo: f64, hi: f64, marks: &mut [u8]) -> (f64, usize, usize) {
    let mut sum = [0.0f64; LANES];
    let mut below = [0u64; LANES];
    let mut upto = [0u64; LANES];
    let (rc, rr) = r.as_chunks::<LANES>();
    let (cc, cr) = c.as_chunks::<LANES>();
    let (mc, mr) = marks.as_chunks_mut::<LANES>();
    for ((rv, cv), mv) in rc.iter().zip(cc).zip(mc) {
        for l in 0..LANES {
            let y = rv[l] + cv[l];
            let (b, u) = (y < lo, y <= hi);
            sum[l] += if b { y } else { 0.0 };
            below[l] += u64::from(b);
            upto[l] += u64::from(u);
            mv[l] = u8::from(u & !b);
        }
    }
    let mut sum = sum.iter().sum::<f64>();
    let mut below = below.iter().sum::<u64>() as usize;
    let mut upto = upto.iter().sum::<u64>() as usize;
    for ((&a, &b), m) in rr.iter().zip(cr).zip(mr) {
        let y = a + b;
        if y < lo {
            sum += y;
            below += 1;
        }
        upto += usize::from(y <= hi);
        *m = u8::from((y >= lo) & (y <= hi));
    }
    (sum, below, upto)
}

/// The values of `y = r + c` that `marks` marks, into `mid` (few: the marks are read eight at a
/// time, as one word).
fn collect_mid(r: &[f64], c: &[f64], marks: &[u8], mid: &mut Vec<f64>) {
    mid.clear();
    let (words, tail) = marks.as_chunks::<8>();
    for (w, word) in words.iter().enumerate() {
        let mut bits = u64::from_le_bytes(*word);
        while bits != 0 {
            let i = w * 8 + bits.trailing_zeros() as usize / 8;
            mid.push(r[i] + c[i]);
            bits &= bits - 1;
        }
    }
    let start = words.len() * 8;
    for (i, &m) in tail.iter().enumerate() {
        if m != 0 {
            mid.push(r[start + i] + c[start + i]);
        }
    }
}

/// Tiles whose costs are computed together, cluster by cluster (the cluster's sums are read
/// once for all of them while they are in cache).
const TILE_BLOCK: usize = 8;

/// Buffers of [`Level::smallest_sum`].
#[derive(Default)]
struct Scratch {
    marks: Vec<u8>,
    buf: Vec<f64>,
}

/// One tile's running prediction of the `m`-th smallest of `r + c` less the cluster's mean.
#[derive(Clone, Default)]
struct Level {
    level: Option<f64>,
    spread: f64,
}

impl Level {
    /// The sum of the `m` smallest of `r + c` (what tile `r` loses to column-vector pruning
    /// when it takes cluster `c`, of mean `mean`), exactly. The `m`-th smallest is predicted
    /// from the previous clusters' (a running level plus the cluster's mean); a vectorised pass
    /// sums and counts the values below a bracket around the prediction and counts those up to
    /// its top. When the bracket holds the `m`-th smallest, the result is the sum below plus the
    /// smallest of the few values inside it; otherwise the bracket is moved by the counts and
    /// tried again, and after [`BRACKET_TRIES`] the whole vector is selected from. Either way
    /// the result is the sum of the `m` smallest (only the order of the additions differs from
    /// a plain selection's).
    fn smallest_sum(
        &mut self,
        r: &[f64],
        c: &[f64],
        mean: f64,
        m: usize,
        scratch: &mut Scratch,
    ) -> f64 {
        let Scratch { marks, buf } = scratch;
        marks.resize(r.len(), 0);
        let mut done = None;
        if let Some(level) = self.level {
            let width = self.spread.max(1e-9 * level.abs());
            let (mut lo, mut hi) = (level + mean - width, level + mean + width);
            for _ in 0..BRACKET_TRIES {
                let (sum_below, below, upto) = bracket_pass(r, c, lo, hi, marks);
                if below < m && m <= upto {
                    collect_mid(r, c, marks, buf);
                    let mid = &mut buf[..];
                    let need = m - below;
                    mid.select_nth_unstable_by(need - 1, f64::total_cmp);
                    done = Some((sum_below + mid[..need].iter().sum::<f64>(), mid[need - 1]));
                    break;
                }
                // move the bracket past the side that missed, by the density seen in it
                let density = (upto - below).max(1) as f64 / (hi - lo);
                if below >= m {
                    let gap = (below + 1 - m) as f64 / density;
                    (lo, hi) = (lo - 2.0 * gap - width, lo);
                } else {
                    let gap = (m - upto) as f64 / density;
                    (lo, hi) = (hi, hi + 2.0 * gap + width);
                }
            }
        }
        let (sum, nth) = done.unwrap_or_else(|| {
            buf.clear();
            buf.extend(r.iter().zip(c).map(|(&a, &b)| a + b));
            let (_, &mut nth, _) = buf.select_nth_unstable_by(m - 1, f64::total_cmp);
            (buf[..m].iter().sum::<f64>(), nth)
        });
        let here = nth - mean;
        match self.level {
            None => self.level = Some(here),
            Some(l) => {
                self.spread = 0.8 * self.spread + 0.6 * (here - l).abs();
                self.level = Some(0.7 * l + 0.3 * here);
            }
        }
        sum
    }
}

/// The output cost of `rows` (a block of tiles' remaining column sums) against every cluster:
/// per row, per cluster, the sum of the `m` smallest of the row plus the cluster's sums; with
/// the rows' predictions (`levels`) carried on. Each row's clusters are taken in order, so the
/// result does not depend on the blocking.
fn output_costs(
    rows: &[Vec<f64>],
    levels: &[Level],
    clusters: &[Vec<f64>],
    means: &[f64],
    m: usize,
) -> (Vec<f64>, Vec<Level>) {
    let n = clusters.len();
    let mut levels = levels.to_vec();
    let mut scratch = Scratch::default();
    let mut out = vec![0.0; rows.len() * n];
    for (j, (c, &mean)) in clusters.iter().zip(means).enumerate() {
        for (q, (r, level)) in rows.iter().zip(&mut levels).enumerate() {
            out[q * n + j] = level.smallest_sum(r, c, mean, m, &mut scratch);
        }
    }
    (out, levels)
}

/// The output permutation: rows of `scores` regrouped into tiles of `v` so that the saliency
/// lost to column-vector pruning (`nnz` kept columns per tile) falls. A move is accepted only
/// when the total strictly falls; each step of [`SCHEDULE`] ends at its first non-improving try.
/// An assignment that gives every tile back the rows it gave up changes nothing and is a
/// non-improving try, whatever the rounding of its total (which is the old total computed
/// another way, and may come out a few ulps below it).
///
/// The tiles' column sums are kept as the cost was computed from them (what stays plus what
/// comes; they drift from sums taken afresh by about 1e-15 relative over a whole search).
pub fn output_permutation(
    scores: &Scores,
    v: usize,
    nnz: usize,
    rng: &mut StdRng,
) -> Result<Vec<u32>, HinmError> {
    let tiles = check_tile(scores.rows(), v)?;
    let k = scores.cols();
    let mut perm: Vec<u32> = (0..scores.rows() as u32).collect();
    let mut sums: Vec<Vec<f64>> = perm.chunks(v).map(|t| column_sums(scores, t)).collect();
    let mut total: f64 = sums.iter().map(|s| tile_cost(s, nnz)).sum();
    // per tile, the prediction of its output costs' selections, carried from try to try
    let mut levels = vec![Level::default(); tiles];
    for num_ext in SCHEDULE.into_iter().filter(|&e| e < v) {
        loop {
            // extraction: num_ext positions of every tile
            let picked: Vec<Vec<usize>> = (0..tiles)
                .map(|_| {
                    let mut p = sample(rng, v, num_ext).into_vec();
                    p.sort_unstable();
                    p
                })
                .collect();
            let extracted: Vec<u32> = picked
                .iter()
                .enumerate()
                .flat_map(|(t, p)| p.iter().map(move |&i| (t, i)))
                .map(|(t, i)| perm[t * v + i])
                .collect();
            // clusters of num_ext extracted rows
            let clusters: Vec<Vec<u32>> = if num_ext > 1 {
                let data: Vec<f64> = extracted
                    .iter()
                    .flat_map(|&r| scores.row(r as usize).to_vec())
                    .collect();
                let of = balanced_kmeans(&data, k, tiles, rng)?;
                let mut c = vec![Vec::with_capacity(num_ext); tiles];
                for (&row, &j) in extracted.iter().zip(&of) {
                    c[j].push(row);
                }
                c
            } else {
                extracted.iter().map(|&r| vec![r]).collect()
            };
            let cluster_sums: Vec<Vec<f64>> = par_map(tiles, |j| column_sums(scores, &clusters[j]));
            let remaining: Vec<Vec<f64>> = par_map(tiles, |t| {
                let out: Vec<u32> = picked[t].iter().map(|&i| perm[t * v + i]).collect();
                let gone = column_sums(scores, &out);
                sums[t].iter().zip(gone).map(|(a, b)| a - b).collect()
            });
            let means: Vec<f64> = cluster_sums
                .iter()
                .map(|c| c.iter().sum::<f64>() / k as f64)
                .collect();
            let blocks = par_map(tiles.div_ceil(TILE_BLOCK), |b| {
                let block = b * TILE_BLOCK..((b + 1) * TILE_BLOCK).min(tiles);
                let (rows, levels) = (&remaining[block.clone()], &levels[block]);
                output_costs(rows, levels, &cluster_sums, &means, k - nnz)
            });
            let mut cost = Vec::with_capacity(tiles * tiles);
            levels.clear();
            for (c, l) in blocks {
                cost.extend(c);
                levels.extend(l);
            }
            let (to, new_total) = assign(&cost, tiles)?;
            // every tile taking back what it gave: no move
            let noop = (0..tiles).all(|t| {
                let mut a: Vec<u32> = picked[t].iter().map(|&i| perm[t * v + i]).collect();
                let mut b = clusters[to[t]].clone();
                a.sort_unstable();
                b.sort_unstable();
                a == b
            });
            if new_total >= total || noop {
                break;
            }
            total = new_total;
            let old = perm.clone();
            for t in 0..tiles {
                let kept = (0..v)
                    .filter(|i| !picked[t].contains(i))
                    .map(|i| old[t * v + i]);
                let tile: Vec<u32> = kept.chain(clusters[to[t]].iter().copied()).collect();
                perm[t * v..(t + 1) * v].copy_from_slice(&tile);
            }
            // the sums the cost was computed from: what stays plus what comes
            for (t, sum) in sums.iter_mut().enumerate() {
                for ((s, &r), &c) in sum.iter_mut().zip(&remaining[t]).zip(&cluster_sums[to[t]]) {
                    *s = r + c;
                }
            }
        }
    }
    Ok(perm)
}

/// Saliency 2:4 prunes from one row's group of 4 values: the two smallest.
fn pruned(g: [f64; 4]) -> f64 {
    let mut g = g;
    g.sort_by(f64::total_cmp);
    g[0] + g[1]
}

/// The input cost matrix's operands, packed in panels: [`PANEL_ROWS`] groups (the `b` values)
/// or [`PANEL_COLS`] taken-out columns (the `x` values) side by side for each tile row `r`, one
/// panel after the other. A block of entries then reads its operands from consecutive memory,
/// one tile row after the next. The padding (up to whole panels) is zero, computed and dropped.
struct Panels {
    v: usize,
    n: usize,
    b: Vec<f64>,
    x: Vec<f64>,
}

/// Groups and taken-out columns a panel of [`Panels`] holds side by side.
const PANEL_ROWS: usize = 8;
const PANEL_COLS: usize = 16;

impl Panels {
    fn new(v: usize, n: usize) -> Self {
        Self {
            v,
            n,
            b: vec![0.0; v * n.div_ceil(PANEL_ROWS) * PANEL_ROWS],
            x: vec![0.0; v * n.div_ceil(PANEL_COLS) * PANEL_COLS],
        }
    }

    /// Where group `i`'s value of tile row 0 is in `b` (row `r` is `r · PANEL_ROWS` further).
    fn b_at(&self, i: usize) -> usize {
        (i / PANEL_ROWS) * self.v * PANEL_ROWS + i % PANEL_ROWS
    }

    /// Where taken-out column `j`'s value of tile row 0 is in `x` (row `r` is
    /// `r · PANEL_COLS` further).
    fn x_at(&self, j: usize) -> usize {
        (j / PANEL_COLS) * self.v * PANEL_COLS + j % PANEL_COLS
    }
}

/// The input search's cost matrix, `n × n` row-major into `cost`:
/// `cost[i][j] = base[i] + Σ_r min(b[r][i], x[r][j])` over the `v` tile rows `r`. Each entry is
/// summed in row order `r` exactly as a sequential sum (the vector lanes run over `i` and `j`,
/// no addition is reordered, so the result equals the plain loop's to the bit, whatever the
/// instruction set). A block of `R × C` entries stays in registers over the tile's rows (one
/// load of `x`, one of `b` per row serve all of them): 4 × 16 with AVX-512, 4 × 8 otherwise.
fn min_plus(p: &Panels, base: &[f64], cost: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F, checked just above.
            return unsafe { min_plus_avx512(p, base, cost) };
        }
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { min_plus_avx2(p, base, cost) };
        }
    }
    min_plus_blocks::<4, 8>(p, base, cost);
}

/// [`min_plus_blocks`] compiled for AVX-512 (4 × 16 entries in 8 vector registers).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn min_plus_avx512(p: &Panels, base: &[f64], cost: &mut [f64]) {
    min_plus_blocks::<4, 16>(p, base, cost);
}

/// [`min_plus_blocks`] compiled for AVX2 (4 × 8 entries in 8 vector registers).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn min_plus_avx2(p: &Panels, base: &[f64], cost: &mut [f64]) {
    min_plus_blocks::<4, 8>(p, base, cost);
}

/// [`min_plus`] in blocks of `R` groups × `C` columns (`R` divides [`PANEL_ROWS`], `C` divides
/// [`PANEL_COLS`]).
#[inline(always)]
fn min_plus_blocks<const R: usize, const C: usize>(p: &Panels, base: &[f64], cost: &mut [f64]) {
    let (v, n) = (p.v, p.n);
    for ib in (0..n).step_by(R) {
        let (b_off, b_panel) = (ib % PANEL_ROWS, p.b_at(ib - ib % PANEL_ROWS));
        let b_panel = &p.b[b_panel..b_panel + v * PANEL_ROWS];
        for jb in (0..n).step_by(C) {
            let (x_off, x_panel) = (jb % PANEL_COLS, p.x_at(jb - jb % PANEL_COLS));
            let x_panel = &p.x[x_panel..x_panel + v * PANEL_COLS];
            let mut acc = [[0.0f64; C]; R];
            for (xs, bs) in x_panel
                .chunks_exact(PANEL_COLS)
                .zip(b_panel.chunks_exact(PANEL_ROWS))
            {
                let x: [f64; C] = std::array::from_fn(|k| xs[x_off + k]);
                let b: [f64; R] = std::array::from_fn(|k| bs[b_off + k]);
                for (acc, b) in acc.iter_mut().zip(b) {
                    for (a, x) in acc.iter_mut().zip(x) {
                        // min(b, x) as a compare-select (the values are never NaN)
                        *a += if x < b { x } else { b };
                    }
                }
            }
            for (q, acc) in acc.iter().enumerate().take(n - ib) {
                let i = ib + q;
                let row = &mut cost[i * n + jb..i * n + (jb + C).min(n)];
                for (c, &a) in row.iter_mut().zip(acc) {
                    *c = base[i] + a;
                }
            }
        }
    }
}

/// The input permutation of one tile: its kept `columns` (groups of 4 consecutive entries)
/// reordered so that the saliency 2:4 prunes from the tile's `rows` falls. Per try, one column
/// of each group is taken out (a random position) and the columns are reassigned to the groups
/// by a linear assignment; with the other three of a group sorted `a ≤ b ≤ c`, adding `x` prunes
/// `a + min(b, x)`. Ends after [`INPUT_PATIENCE`] non-improving tries in all (as the reference
/// counts them); an assignment that gives every group its own column back changes nothing and
/// is a non-improving try, whatever the rounding of its total.
pub fn input_permutation(
    scores: &Scores,
    rows: &[u32],
    columns: &[u32],
    rng: &mut StdRng,
) -> Result<Vec<u32>, HinmError> {
    let groups = columns.len() / 4;
    let v = rows.len();
    let mut cols = columns.to_vec();
    // the tile's kept values, column-major: vals[p * v + i] = scores[rows[i], cols[p]]
    let mut vals: Vec<f64> = cols
        .iter()
        .flat_map(|&c| {
            rows.iter()
                .map(move |&r| scores.row(r as usize)[c as usize])
        })
        .collect();
    let group_cost = |vals: &[f64], g: usize| -> f64 {
        (0..v)
            .map(|i| pruned(std::array::from_fn(|q| vals[(g * 4 + q) * v + i])))
            .sum()
    };
    let mut total: f64 = (0..groups).map(|g| group_cost(&vals, g)).sum();
    let mut misses = 0;
    // per try: the two smallest of each group's other three, and the taken-out columns, by tile row
    let mut base = vec![0.0; groups];
    let mut panels = Panels::new(v, groups);
    let mut cost = vec![0.0; groups * groups];
    let mut assignment = Assignment::<f32>::with_lap(groups);
    while misses < INPUT_PATIENCE && groups > 1 {
        let out: Vec<usize> = (0..groups)
            .map(|g| g * 4 + rand::Rng::random_range(rng, 0..4))
            .collect();
        // per group and row: the two smallest of the other three (base: the sum of the smallest)
        for g in 0..groups {
            // the other three positions of the group, in order
            let others = [0, 1, 2].map(|q| g * 4 + q + usize::from(g * 4 + q >= out[g]));
            let [ox, oy, oz] = others.map(|p| &vals[p * v..(p + 1) * v]);
            let at = panels.b_at(g);
            let mut sum = 0.0;
            for i in 0..v {
                // the smallest and the second smallest of three, without branches (the values
                // are random: a branch would be mispredicted half the time)
                let (x, y, z) = (ox[i], oy[i], oz[i]);
                let (lo, hi) = (x.min(y), x.max(y));
                sum += lo.min(z);
                panels.b[at + i * PANEL_ROWS] = lo.max(hi.min(z));
            }
            base[g] = sum;
        }
        for (j, &p) in out.iter().enumerate() {
            let at = panels.x_at(j);
            for (i, &x) in vals[p * v..(p + 1) * v].iter().enumerate() {
                panels.x[at + i * PANEL_COLS] = x;
            }
        }
        min_plus(&panels, &base, &mut cost);
        let (to, new_total) = assignment.solve(&cost)?;
        // a gain, and a move (every group taking its own column back is none, whatever the rounding)
        if new_total < total && to.iter().enumerate().any(|(g, &j)| g != j) {
            total = new_total;
            let taken: Vec<u32> = out.iter().map(|&p| cols[p]).collect();
            for (g, &p) in out.iter().enumerate() {
                if to[g] != g {
                    cols[p] = taken[to[g]];
                    // the column's values, from the taken-out columns' panel
                    let at = panels.x_at(to[g]);
                    for (i, x) in vals[p * v..(p + 1) * v].iter_mut().enumerate() {
                        *x = panels.x[at + i * PANEL_COLS];
                    }
                }
            }
        } else {
            misses += 1;
        }
    }
    Ok(cols)
}

/// [`input_permutation`] of every tile (`perm`: rows in tile order). The available threads
/// take the tiles one at a time as they finish (their searches take different numbers of
/// tries); each tile draws from its own RNG seeded from `rng`, so the result does not depend on
/// the number of threads or on which thread searched which tile.
pub fn input_permutations(
    scores: &Scores,
    perm: &[u32],
    v: usize,
    columns: Vec<Vec<u32>>,
    rng: &mut StdRng,
) -> Result<Vec<Vec<u32>>, HinmError> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let seeds: Vec<u64> = (0..columns.len()).map(|_| rand::Rng::random(rng)).collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = AtomicUsize::new(0);
    type Tiles = Vec<(usize, Vec<u32>)>;
    let results: Vec<Result<Tiles, HinmError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.min(columns.len()))
            .map(|_| {
                let (seeds, next, columns) = (&seeds, &next, &columns);
                s.spawn(move || {
                    let mut done = Vec::new();
                    loop {
                        let t = next.fetch_add(1, Ordering::Relaxed);
                        let Some(cols) = columns.get(t) else {
                            return Ok(done);
                        };
                        let mut rng = StdRng::seed_from_u64(seeds[t]);
                        let rows = &perm[t * v..(t + 1) * v];
                        done.push((t, input_permutation(scores, rows, cols, &mut rng)?));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a search thread does not panic"))
            .collect()
    });
    let mut out: Tiles = Vec::new();
    for r in results {
        out.extend(r?);
    }
    out.sort_by_key(|(t, _)| *t);
    Ok(out.into_iter().map(|(_, c)| c).collect())
}

/// The HiNM mask of `scores` at `vector_sparsity` with tiles of `v` rows, searched with
/// `method` from `seed` (same seed, same permutations), and the saliency it keeps.
pub fn search(
    scores: &Scores,
    v: usize,
    vector_sparsity: f64,
    method: Method,
    seed: u64,
) -> Result<(HinmMask, Retained), HinmError> {
    check_tile(scores.rows(), v)?;
    let nnz = nnz_vec(scores.cols(), vector_sparsity)?;
    let mut rng = StdRng::seed_from_u64(seed);
    let perm = match method {
        Method::None => (0..scores.rows() as u32).collect(),
        Method::Ovw | Method::Gyro => output_permutation(scores, v, nnz, &mut rng)?,
    };
    let mut columns = vector_columns(scores, &perm, v, nnz);
    if method == Method::Gyro {
        columns = input_permutations(scores, &perm, v, columns, &mut rng)?;
    }
    Ok(mask_with(scores, v, perm, columns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mask::top_k;
    use rand::Rng;

    fn random_scores(rows: usize, cols: usize, seed: u64) -> Scores {
        let mut rng = StdRng::seed_from_u64(seed);
        // a few heavy columns and rows, as trained weights have
        let col_scale: Vec<f64> = (0..cols).map(|_| rng.random::<f64>() * 2.0).collect();
        let data = (0..rows * cols)
            .map(|i| rng.random::<f64>().powi(2) * col_scale[i % cols] * (1 + i / cols % 3) as f64)
            .collect();
        Scores::new(rows, cols, data).unwrap()
    }

    fn permutations(n: usize) -> Vec<Vec<usize>> {
        if n == 0 {
            return vec![vec![]];
        }
        let mut all = Vec::new();
        for p in permutations(n - 1) {
            for i in 0..n {
                let mut q = p.clone();
                q.insert(i, n - 1);
                all.push(q);
            }
        }
        all
    }

    #[test]
    fn the_assignment_cost_is_the_brute_force_optimum() {
        let mut rng = StdRng::seed_from_u64(3);
        for round in 0..5 {
            // integer costs: ties between assignments are common, only the cost must agree
            let cost: Vec<f64> = (0..36).map(|_| rng.random_range(0..5) as f64).collect();
            let (_, total) = assign(&cost, 6).unwrap();
            let best = permutations(6)
                .iter()
                .map(|p| (0..6).map(|i| cost[i * 6 + p[i]]).sum::<f64>())
                .fold(f64::INFINITY, f64::min);
            assert_eq!(total, best, "round {round}");
        }
        assert!(assign(&[1.0, f64::NAN, 0.0, 1.0], 2).is_err());
        assert!(assign(&[1.0, f64::INFINITY, 0.0, 1.0], 2).is_err());
        // costs whose differences overflow are solved as they are
        let (to, _) = assign(&[f64::MAX, -f64::MAX, -f64::MAX, f64::MAX], 2).unwrap();
        assert_eq!(to, vec![1, 0]);
    }

    #[test]
    fn non_finite_costs_are_refused_wherever_they_are() {
        // 12 × 12: each row is one vector chunk of the row minimum and four values after it
        let n = 12;
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            for at in [0, 5, 8, 11, 7 * n + 3, n * n - 1] {
                let mut cost: Vec<f64> = (0..n * n).map(|k| (k % 7) as f64).collect();
                cost[at] = bad;
                assert!(assign(&cost, n).is_err(), "{bad} at {at}");
                // the input search's: rounded to f32 and solved by `Lap`
                let mut narrow = Assignment::<f32>::with_lap(n);
                assert!(narrow.solve(&cost).is_err(), "{bad} at {at}, f32");
                let mut lapjv = Assignment::<f32>::new(n, Solver::Lapjv);
                assert!(lapjv.solve(&cost).is_err(), "{bad} at {at}, f32 lapjv");
            }
        }
    }

    #[test]
    fn row_minima_are_the_plain_minima() {
        let mut rng = StdRng::seed_from_u64(21);
        for len in [1usize, 7, 8, 9, 16, 29] {
            let row: Vec<f64> = (0..len).map(|_| rng.random::<f64>()).collect();
            let plain = row.iter().copied().fold(f64::INFINITY, f64::min);
            assert_eq!(row_min(&row), (plain, true), "{len}");
            let mut bad = row.clone();
            bad[len / 2] = f64::NAN;
            assert!(!row_min(&bad).1, "{len}");
        }
    }

    #[test]
    fn narrow_assignments_are_optimal_and_fall_back_to_f64_beyond_f32() {
        let mut rng = StdRng::seed_from_u64(5);
        for scale in [1.0, 1e37, 1e300] {
            // at 1e37 the reduced costs fit f32 but are beyond what `Lap` takes in it, at 1e300
            // they overflow f32: both solved in f64 instead
            let cost: Vec<f64> = (0..36)
                .map(|_| rng.random_range(0..5) as f64 * scale)
                .collect();
            let best = permutations(6)
                .iter()
                .map(|p| (0..6).map(|i| cost[i * 6 + p[i]]).sum::<f64>())
                .fold(f64::INFINITY, f64::min);
            let narrow = [
                Assignment::<f32>::with_lap(6),
                Assignment::<f32>::new(6, Solver::Lapjv),
            ];
            for mut assignment in narrow {
                let (_, total) = assignment.solve(&cost).unwrap();
                assert_eq!(total, best, "scale {scale}");
            }
        }
    }

    #[test]
    fn the_assignment_cost_is_lsaps() {
        // lapjv and `Lap` on the reduced, reordered matrix against lsap (SciPy's algorithm) on
        // the plain one
        let mut rng = StdRng::seed_from_u64(8);
        for (round, n) in [1, 2, 3, 17, 64, 200].into_iter().enumerate() {
            for ties in [false, true] {
                let cost: Vec<f64> = (0..n * n)
                    .map(|_| match ties {
                        true => rng.random_range(0..4) as f64,
                        false => rng.random::<f64>() * 100.0 - 30.0,
                    })
                    .collect();
                let (rows, cols) = lsap::solve(n, n, &cost, false).unwrap();
                let best: f64 = rows.iter().zip(&cols).map(|(&r, &c)| cost[r * n + c]).sum();
                let solved = [
                    assign(&cost, n).unwrap(),
                    Assignment::<f64>::with_lap(n).solve(&cost).unwrap(),
                ];
                for (to, total) in solved {
                    let mut seen = vec![false; n];
                    for &c in &to {
                        assert!(!std::mem::replace(&mut seen[c], true), "a permutation");
                    }
                    assert!(
                        (total - best).abs() <= 1e-12 * best.abs().max(1.0),
                        "round {round}, n {n}, ties {ties}: {total} vs {best}"
                    );
                }
            }
        }
    }

    /// The sum of the `m` smallest, by a plain selection.
    fn plain_smallest(r: &[f64], c: &[f64], m: usize) -> f64 {
        let mut y: Vec<f64> = r.iter().zip(c).map(|(a, b)| a + b).collect();
        smallest_sum(&mut y, m)
    }

    #[test]
    fn bracketed_selections_are_plain_selections() {
        let mut rng = StdRng::seed_from_u64(12);
        for (k, tiles, ties) in [
            (3, 3, false),
            (37, 6, true),
            (512, 9, false),
            (1000, 7, true),
        ] {
            for m in [1, k / 2, k - k / 4, k - 1, k] {
                let value = |rng: &mut StdRng, scale: f64| match ties {
                    true => rng.random_range(0..6) as f64 * scale,
                    false => rng.random::<f64>() * scale,
                };
                let rows: Vec<Vec<f64>> = (0..tiles)
                    .map(|_| (0..k).map(|_| value(&mut rng, 20.0)).collect())
                    .collect();
                // clusters of very different levels: the prediction misses, the bracket moves
                let clusters: Vec<Vec<f64>> = (0..tiles)
                    .map(|j| {
                        (0..k)
                            .map(|_| value(&mut rng, 1.0 + 10.0 * (j % 3) as f64))
                            .collect()
                    })
                    .collect();
                let means: Vec<f64> = clusters
                    .iter()
                    .map(|c| c.iter().sum::<f64>() / k as f64)
                    .collect();
                let mut levels = vec![Level::default(); tiles];
                for _ in 0..2 {
                    let (cost, next) = output_costs(&rows, &levels, &clusters, &means, m);
                    levels = next;
                    for (i, r) in rows.iter().enumerate() {
                        for (j, c) in clusters.iter().enumerate() {
                            let plain = plain_smallest(r, c, m);
                            assert!(
                                (cost[i * tiles + j] - plain).abs() <= 1e-12 * plain,
                                "k {k} m {m} ({i}, {j}): {} vs {plain}",
                                cost[i * tiles + j]
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_input_costs_are_the_plain_sums_to_the_bit() {
        let mut rng = StdRng::seed_from_u64(13);
        for (v, n) in [(1usize, 1usize), (5, 13), (64, 40), (3, 17)] {
            let mut p = Panels::new(v, n);
            let b: Vec<f64> = (0..v * n).map(|_| rng.random::<f64>()).collect();
            let x: Vec<f64> = (0..v * n).map(|_| rng.random::<f64>()).collect();
            for r in 0..v {
                for i in 0..n {
                    let (bi, xi) = (p.b_at(i), p.x_at(i));
                    p.b[bi + r * PANEL_ROWS] = b[r * n + i];
                    p.x[xi + r * PANEL_COLS] = x[r * n + i];
                }
            }
            let base: Vec<f64> = (0..n).map(|_| rng.random::<f64>() * 10.0).collect();
            let mut each = vec![
                min_plus_blocks::<4, 8>,
                min_plus_blocks::<4, 16>,
                min_plus_blocks::<8, 16>,
            ];
            each.push(min_plus);
            for f in each {
                let mut cost = vec![0.0; n * n];
                f(&p, &base, &mut cost);
                for i in 0..n {
                    for j in 0..n {
                        let plain =
                            base[i] + (0..v).map(|r| b[r * n + i].min(x[r * n + j])).sum::<f64>();
                        assert_eq!(cost[i * n + j].to_bits(), plain.to_bits(), "({i}, {j})");
                    }
                }
            }
        }
    }

    #[test]
    fn the_distances_are_the_plain_sums_to_the_bit() {
        let mut rng = StdRng::seed_from_u64(14);
        let (n, k, dim) = (7usize, 11usize, 9usize);
        let wk = k.div_ceil(CENTROID_BLOCK) * CENTROID_BLOCK;
        let points: Vec<f64> = (0..n * dim).map(|_| rng.random::<f64>()).collect();
        let centroids: Vec<f64> = (0..k * dim).map(|_| rng.random::<f64>()).collect();
        let mut transposed = vec![0.0; dim * wk];
        for c in 0..k {
            for r in 0..dim {
                transposed[r * wk + c] = centroids[c * dim + r];
            }
        }
        let d = distances_to(&points, &transposed, dim, k);
        for p in 0..n {
            for c in 0..k {
                let plain = (0..dim)
                    .map(|r| {
                        let d = points[p * dim + r] - centroids[c * dim + r];
                        d * d
                    })
                    .sum::<f64>()
                    .sqrt();
                assert_eq!(d[p * k + c].to_bits(), plain.to_bits(), "({p}, {c})");
            }
        }
    }

    #[test]
    fn balanced_clusters_have_exact_sizes() {
        let mut rng = StdRng::seed_from_u64(5);
        let data: Vec<f64> = (0..24 * 5).map(|_| rng.random::<f64>()).collect();
        let of = balanced_kmeans(&data, 5, 6, &mut rng).unwrap();
        for c in 0..6 {
            assert_eq!(of.iter().filter(|&&j| j == c).count(), 4, "cluster {c}");
        }
    }

    #[test]
    fn the_output_cost_is_the_sum_of_the_k_minus_nnz_smallest_columns() {
        // K = 16 at 75 %: nnz_vec = 4 kept, 12 pruned. The reference sums the 4 smallest.
        let sums: Vec<f64> = (1..=16).map(f64::from).collect();
        assert_eq!(tile_cost(&sums, 4), (1..=12).sum::<i32>() as f64);
        assert_ne!(tile_cost(&sums, 4), (1..=4).sum::<i32>() as f64);
        let kept: f64 = top_k(&sums, 4).iter().map(|&i| sums[i as usize]).sum();
        assert_eq!(tile_cost(&sums, 4) + kept, sums.iter().sum::<f64>());
    }

    #[test]
    fn each_stage_keeps_at_least_what_no_permutation_keeps() {
        for (vs, seed) in [(0.5, 1), (0.75, 2), (0.875, 3)] {
            let s = random_scores(128, 256, seed);
            let (_, none) = search(&s, 16, vs, Method::None, seed).unwrap();
            let (ovw_mask, ovw) = search(&s, 16, vs, Method::Ovw, seed).unwrap();
            let (gyro_mask, gyro) = search(&s, 16, vs, Method::Gyro, seed).unwrap();
            // stage 1: the output permutation (the same for OVW and Gyro from one seed)
            assert!(ovw.vector >= none.vector, "vs {vs}: {ovw:?} vs {none:?}");
            assert_eq!(ovw_mask.out_perm, gyro_mask.out_perm);
            // the same kept columns, summed in another order
            assert!((ovw.vector - gyro.vector).abs() <= 1e-12 * ovw.vector);
            // stage 2: the input permutation on the same kept columns
            assert!(gyro.nm >= ovw.nm, "vs {vs}: {gyro:?} vs {ovw:?}");
            assert!(
                gyro.nm > none.nm,
                "vs {vs}: Gyro must gain on skewed scores"
            );
        }
    }

    #[test]
    fn the_input_permutation_is_applied_once_and_its_gain_is_real() {
        // The reference permutes the saliency twice and maps back once: its 2:4 stage keeps
        // less than no permutation. Here the mask built from the stored order keeps what the
        // search computed, and never less than the unpermuted order.
        let s = random_scores(256, 512, 11);
        let (_, none) = search(&s, 64, 0.5, Method::None, 4).unwrap();
        let (mask, gyro) = search(&s, 64, 0.5, Method::Gyro, 4).unwrap();
        let (again, replay) = mask_with(&s, 64, mask.out_perm.clone(), mask.columns.clone());
        assert_eq!(again, mask);
        assert_eq!(replay, gyro);
        assert!(gyro.nm >= none.nm, "{} < {}", gyro.nm, none.nm);
        let dense = mask.dense();
        let kept: f64 = (0..256 * 512)
            .filter(|&i| dense[i])
            .map(|i| s.row(i / 512)[i % 512])
            .sum();
        assert!((kept - gyro.nm).abs() <= 1e-9 * kept);
    }

    #[test]
    fn one_seed_one_permutation() {
        let s = random_scores(64, 64, 9);
        let a = search(&s, 8, 0.75, Method::Gyro, 42).unwrap();
        let b = search(&s, 8, 0.75, Method::Gyro, 42).unwrap();
        assert_eq!(a, b);
    }

    /// The best HiNM mask of an 8-row matrix with V = 4 over every output partition and every
    /// grouping of each tile's kept columns.
    fn brute_force(s: &Scores, nnz: usize) -> f64 {
        let mut best = 0.0f64;
        for first in 0..(1u32 << 8) {
            if first.count_ones() != 4 || first & 1 == 0 {
                continue;
            }
            let a: Vec<u32> = (0..8).filter(|r| first >> r & 1 == 1).collect();
            let b: Vec<u32> = (0..8).filter(|r| first >> r & 1 == 0).collect();
            let mut kept = 0.0;
            for tile in [a, b] {
                let cols = top_k(&column_sums(s, &tile), nnz);
                // groupings of 8 columns into two groups of 4 (first group holds column 0)
                let mut tile_best = 0.0f64;
                for g in 0..(1u32 << 8) {
                    if g.count_ones() != 4 || g & 1 == 0 {
                        continue;
                    }
                    let order: Vec<u32> = (0..8)
                        .filter(|i| g >> i & 1 == 1)
                        .chain((0..8).filter(|i| g >> i & 1 == 0))
                        .map(|i| cols[i as usize])
                        .collect();
                    let (_, r) = mask_with(s, 4, tile.clone(), vec![order]);
                    tile_best = tile_best.max(r.nm);
                }
                kept += tile_best;
            }
            best = best.max(kept);
        }
        best
    }

    #[test]
    fn brute_force_then_gyro_then_none_on_8_by_32() {
        for seed in 0..4 {
            let s = random_scores(8, 32, 100 + seed);
            let (_, none) = search(&s, 4, 0.75, Method::None, seed).unwrap();
            let (_, gyro) = search(&s, 4, 0.75, Method::Gyro, seed).unwrap();
            let brute = brute_force(&s, nnz_vec(32, 0.75).unwrap());
            assert!(
                brute >= gyro.nm - 1e-12,
                "seed {seed}: {brute} < {}",
                gyro.nm
            );
            assert!(gyro.nm >= none.nm, "seed {seed}: {} < {}", gyro.nm, none.nm);
        }
    }
}
