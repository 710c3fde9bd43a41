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

mod assign;
mod input;
mod kmeans;
mod output;

pub use assign::assign;
pub use input::{input_permutation, input_permutations};
pub use kmeans::balanced_kmeans;
pub use output::{output_permutation, tile_cost};

use crate::error::HinmError;
use crate::mask::{HinmMask, Retained, Scores, check_tile, mask_with, nnz_vec, vector_columns};
use rand::SeedableRng;
use rand::rngs::StdRng;

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
    use super::assign::*;
    use super::input::*;
    use super::kmeans::*;
    use super::output::*;
    use super::*;
    use crate::mask::{column_sums, smallest_sum, top_k};
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
