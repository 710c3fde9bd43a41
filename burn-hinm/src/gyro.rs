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
/// column, with the total cost. Costs must be finite.
pub fn assign(cost: &[f64], n: usize) -> Result<(Vec<usize>, f64), HinmError> {
    if cost.len() != n * n {
        return Err(HinmError::Shape(format!(
            "{} costs for {n} × {n}",
            cost.len()
        )));
    }
    if cost.iter().any(|c| !c.is_finite()) {
        return Err(HinmError::NonFinite("a cost of the assignment".into()));
    }
    let (rows, cols) = lsap::solve(n, n, &cost.to_vec(), false)
        .map_err(|e| HinmError::NonFinite(format!("linear assignment failed: {e:?}")))?;
    let mut out = vec![0; n];
    let mut total = 0.0;
    for (r, c) in rows.into_iter().zip(cols) {
        out[r] = c;
        total += cost[r * n + c];
    }
    Ok((out, total))
}

/// Saliency a tile loses to column-vector pruning: the `K − nnz` smallest of its column sums.
pub fn tile_cost(sums: &[f64], nnz: usize) -> f64 {
    let mut v = sums.to_vec();
    smallest_sum(&mut v, sums.len() - nnz)
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
        let distances = par_map(n, |i| {
            (0..k)
                .map(|c| {
                    point(i)
                        .iter()
                        .zip(&centroids[c * dim..(c + 1) * dim])
                        .map(|(a, b)| (a - b) * (a - b))
                        .sum::<f64>()
                        .sqrt()
                })
                .collect::<Vec<f64>>()
        });
        let mut cost = vec![0.0; n * n];
        for (i, d) in distances.iter().enumerate() {
            for (c, &d) in d.iter().enumerate() {
                cost[i * n + c * size..i * n + (c + 1) * size].fill(d);
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

/// The output permutation: rows of `scores` regrouped into tiles of `v` so that the saliency
/// lost to column-vector pruning (`nnz` kept columns per tile) falls. A move is accepted only
/// when the total strictly falls; each step of [`SCHEDULE`] ends at its first non-improving try.
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
            let cluster_sums: Vec<Vec<f64>> =
                clusters.iter().map(|c| column_sums(scores, c)).collect();
            let remaining: Vec<Vec<f64>> = (0..tiles)
                .map(|t| {
                    let out: Vec<u32> = picked[t].iter().map(|&i| perm[t * v + i]).collect();
                    let gone = column_sums(scores, &out);
                    sums[t].iter().zip(gone).map(|(a, b)| a - b).collect()
                })
                .collect();
            let cost: Vec<f64> = par_map(tiles, |i| {
                let mut buf = vec![0.0; k];
                (0..tiles)
                    .map(|j| {
                        for ((b, r), c) in buf.iter_mut().zip(&remaining[i]).zip(&cluster_sums[j]) {
                            *b = r + c;
                        }
                        smallest_sum(&mut buf, k - nnz)
                    })
                    .collect::<Vec<f64>>()
            })
            .concat();
            let (to, new_total) = assign(&cost, tiles)?;
            if new_total >= total {
                break;
            }
            total = new_total;
            let old = perm.clone();
            for t in 0..tiles {
                let kept: Vec<u32> = (0..v)
                    .filter(|i| !picked[t].contains(i))
                    .map(|i| old[t * v + i])
                    .collect();
                let tile: Vec<u32> = kept.into_iter().chain(clusters[to[t]].clone()).collect();
                perm[t * v..(t + 1) * v].copy_from_slice(&tile);
                sums[t] = column_sums(scores, &tile);
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

/// The input permutation of one tile: its kept `columns` (groups of 4 consecutive entries)
/// reordered so that the saliency 2:4 prunes from the tile's `rows` falls. Per try, one column
/// of each group is taken out (a random position) and the columns are reassigned to the groups
/// by a linear assignment; with the other three of a group sorted `a ≤ b ≤ c`, adding `x` prunes
/// `a + min(b, x)`. Ends after [`INPUT_PATIENCE`] non-improving tries in all (as the reference
/// counts them).
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
    let gather = |cols: &[u32]| -> Vec<f64> {
        cols.iter()
            .flat_map(|&c| {
                rows.iter()
                    .map(move |&r| scores.row(r as usize)[c as usize])
            })
            .collect()
    };
    let mut vals = gather(&cols);
    let group_cost = |vals: &[f64], g: usize| -> f64 {
        (0..v)
            .map(|i| pruned(std::array::from_fn(|q| vals[(g * 4 + q) * v + i])))
            .sum()
    };
    let mut total: f64 = (0..groups).map(|g| group_cost(&vals, g)).sum();
    let mut misses = 0;
    let (mut a, mut b) = (vec![0.0; groups * v], vec![0.0; groups * v]);
    let mut cost = vec![0.0; groups * groups];
    while misses < INPUT_PATIENCE && groups > 1 {
        let out: Vec<usize> = (0..groups)
            .map(|g| g * 4 + rand::Rng::random_range(rng, 0..4))
            .collect();
        // per group and row: the two smallest of the other three
        for g in 0..groups {
            let others: Vec<usize> = (g * 4..g * 4 + 4).filter(|&p| p != out[g]).collect();
            for i in 0..v {
                let [x, y, z] = [0, 1, 2].map(|q| vals[others[q] * v + i]);
                let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
                let (first, second) = if z < lo { (z, lo) } else { (lo, hi.min(z)) };
                a[g * v + i] = first;
                b[g * v + i] = second;
            }
        }
        for i in 0..groups {
            let (ai, bi) = (&a[i * v..(i + 1) * v], &b[i * v..(i + 1) * v]);
            let base: f64 = ai.iter().sum();
            for (j, &p) in out.iter().enumerate() {
                let x = &vals[p * v..(p + 1) * v];
                cost[i * groups + j] =
                    base + bi.iter().zip(x).map(|(&b, &x)| b.min(x)).sum::<f64>();
            }
        }
        let (to, new_total) = assign(&cost, groups)?;
        if new_total < total {
            total = new_total;
            let taken: Vec<u32> = out.iter().map(|&p| cols[p]).collect();
            for (g, &p) in out.iter().enumerate() {
                cols[p] = taken[to[g]];
            }
            vals = gather(&cols);
        } else {
            misses += 1;
        }
    }
    Ok(cols)
}

/// [`input_permutation`] of every tile (`perm`: rows in tile order), the tiles shared among the
/// available threads; each tile draws from its own RNG seeded from `rng`, so the result does
/// not depend on the number of threads.
pub fn input_permutations(
    scores: &Scores,
    perm: &[u32],
    v: usize,
    columns: Vec<Vec<u32>>,
    rng: &mut StdRng,
) -> Result<Vec<Vec<u32>>, HinmError> {
    let seeds: Vec<u64> = (0..columns.len()).map(|_| rand::Rng::random(rng)).collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per = columns.len().div_ceil(threads).max(1);
    let jobs: Vec<(usize, Vec<u32>)> = columns.into_iter().enumerate().collect();
    type Tiles = Vec<(usize, Vec<u32>)>;
    let results: Vec<Result<Tiles, HinmError>> = std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .chunks(per)
            .map(|chunk| {
                let seeds = &seeds;
                s.spawn(move || {
                    chunk
                        .iter()
                        .map(|(t, cols)| {
                            let mut rng = StdRng::seed_from_u64(seeds[*t]);
                            let rows = &perm[t * v..(t + 1) * v];
                            input_permutation(scores, rows, cols, &mut rng).map(|c| (*t, c))
                        })
                        .collect()
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
