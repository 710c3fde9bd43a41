//! The solver against `lapjv` and `lsap`, and the vectorised scans against plain ones.

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
            let same = |a: &f64, b: &f64| a.to_bits() == b.to_bits() || a.is_nan() && b.is_nan();
            assert!(dist.iter().zip(&want_dist).all(|(a, b)| same(a, b)));
        }
    }
}
