//! The projection against brute force on small blocks, its feasibility and exact counts, and
//! its refusals.

use super::*;
use rand::{Rng, SeedableRng};

fn random_view(rows: usize, cols: usize, seed: u64) -> View {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let data = (0..rows * cols)
        .map(|_| rng.random_range(-1.0f32..1.0))
        .collect();
    View::new(rows, cols, data).unwrap()
}

/// The best energy of one block over every row subset and column subset of the shape, by
/// brute force.
fn brute(view: &View, r: usize, c: usize) -> f64 {
    let mut best = 0.0f64;
    for rm in 0u32..1 << view.rows {
        if rm.count_ones() as usize != r {
            continue;
        }
        for cm in 0u32..1 << view.cols {
            if cm.count_ones() as usize != c {
                continue;
            }
            let mut e = 0.0;
            for i in 0..view.rows {
                for j in 0..view.cols {
                    if rm >> i & 1 == 1 && cm >> j & 1 == 1 {
                        let w = f64::from(view.data[i * view.cols + j]);
                        e += w * w;
                    }
                }
            }
            best = best.max(e);
        }
    }
    best
}

#[test]
fn the_block_projection_is_brute_force_on_small_blocks() {
    for (rows, cols, seed) in [(4, 6, 1), (3, 7, 2), (6, 4, 3), (5, 5, 4), (2, 9, 5)] {
        let view = random_view(rows, cols, seed);
        let e = Energies::of(&view, 0..rows, 0..cols);
        let table = e.table();
        for r in 0..=rows {
            for c in 0..=cols {
                let (k, o) = if e.transposed { (c, r) } else { (r, c) };
                let want = brute(&view, r, c);
                let got = table.at(k, o);
                assert!(
                    (got - want).abs() <= 1e-12 * want.max(1.0),
                    "{rows}x{cols} shape {r}x{c}: {got} vs brute force {want}"
                );
                // the support found keeps that energy
                let (lines, others) = e.support(k, o);
                let (rs, cs) = if e.transposed {
                    (others, lines)
                } else {
                    (lines, others)
                };
                assert_eq!(
                    (rs.len(), cs.len()),
                    if k * o == 0 { (0, 0) } else { (r, c) }
                );
                let kept: f64 = rs
                    .iter()
                    .flat_map(|&i| cs.iter().map(move |&j| (i, j)))
                    .map(|(i, j)| f64::from(view.data[i * cols + j]).powi(2))
                    .sum();
                assert!((kept - want).abs() <= 1e-12 * want.max(1.0));
            }
        }
    }
}

/// Every block's zeros are whole rows and whole columns: the kept entries of a block are the
/// cross product of its kept rows and kept columns.
fn assert_bcr(mask: &BcrMask) {
    let dense = mask.dense();
    let (br, bc) = mask.blocks();
    for bi in 0..br {
        for bj in 0..bc {
            let (rs, cs) = mask.span(bi, bj);
            let kept_rows: Vec<usize> = rs
                .clone()
                .filter(|&i| cs.clone().any(|j| dense[i * mask.cols + j]))
                .collect();
            let kept_cols: Vec<usize> = cs
                .clone()
                .filter(|&j| rs.clone().any(|i| dense[i * mask.cols + j]))
                .collect();
            for i in rs.clone() {
                for j in cs.clone() {
                    let want = kept_rows.contains(&i) && kept_cols.contains(&j);
                    assert_eq!(dense[i * mask.cols + j], want, "block ({bi}, {bj})");
                }
            }
        }
    }
}

#[test]
fn the_layer_projection_is_feasible_exact_in_count_and_idempotent() {
    for (rows, cols, block, rate, seed) in [
        (16, 64, (4, 16), 10.0, 1),
        (18, 70, (4, 16), 10.0, 2), // remainder strips both ways
        (32, 48, (4, 16), 3.0, 3),
        (24, 40, (12, 10), 5.0, 4), // the greedy (both sides above EXACT_SIDE)
        (8, 8, (1, 1), 4.0, 5),     // 1×1 blocks: unstructured top-k
        (12, 30, (12, 30), 7.5, 6), // one block
    ] {
        let view = random_view(rows, cols, seed);
        let level = Level {
            rate,
            block: Block::new(block.0, block.1).unwrap(),
        };
        let mask = project(&view, level).unwrap();
        let budget = level.budget(rows * cols);
        assert_eq!(mask.nnz(), budget, "{rows}x{cols} at {rate}x:{block:?}");
        assert_eq!(mask.dense().iter().filter(|&&k| k).count(), budget);
        assert_bcr(&mask);
        let z = mask.apply(&view);
        let again = project(&z, level).unwrap().apply(&z);
        assert_eq!(again, z, "Π(Π(W)) = Π(W) at {rate}x:{block:?}");
    }
}

#[test]
fn one_by_one_blocks_keep_the_largest_weights() {
    let view = random_view(10, 10, 9);
    let level: Level = "4x:1x1".parse().unwrap();
    let mask = project(&view, level).unwrap();
    let mut mags: Vec<f32> = view.data.iter().map(|w| w.abs()).collect();
    mags.sort_by(|a, b| b.total_cmp(a));
    let floor = mags[24];
    for (w, k) in view.data.iter().zip(mask.dense()) {
        assert_eq!(k, w.abs() >= floor, "{w}");
    }
}

#[test]
fn the_projection_keeps_more_than_uniform_per_block_pruning() {
    // a layer whose energy sits in a few blocks: a free allocation keeps more than giving
    // every block the same share
    let mut view = random_view(16, 64, 11);
    for (at, w) in view.data.iter_mut().enumerate() {
        if at / 64 >= 4 {
            *w *= 0.01;
        }
    }
    let level: Level = "8x:4x16".parse().unwrap();
    let mask = project(&view, level).unwrap();
    // uniform: every one of the 16 blocks keeps 8 of its 64 (e.g. 2 rows × 4 columns)
    let mut uniform = BcrMask::empty(16, 64, level.block);
    let (br, bc) = uniform.blocks();
    for bi in 0..br {
        for bj in 0..bc {
            let e = Energies::of(&view, bi * 4..bi * 4 + 4, bj * 16..bj * 16 + 16);
            let (rows, cols) = e.support(2, 4);
            for i in rows {
                uniform.row_keep[bj * 16 + bi * 4 + i] = true;
            }
            for j in cols {
                uniform.col_keep[bi * 64 + bj * 16 + j] = true;
            }
        }
    }
    assert_eq!(uniform.nnz(), mask.nnz());
    assert!(retained(&view, &mask) > retained(&view, &uniform));
}

#[test]
fn bad_weights_and_blocks_are_refused() {
    let mut view = random_view(4, 16, 1);
    view.data[5] = f32::NAN;
    let e = project(&view, "10x:4x16".parse().unwrap()).unwrap_err();
    assert!(matches!(e, BcrError::NonFinite(_)), "{e}");
    assert!(e.to_string().contains("row 0, column 5"), "{e}");
    view.data[5] = f32::INFINITY;
    assert!(project(&view, "10x:4x16".parse().unwrap()).is_err());
    let view = random_view(4, 16, 1);
    let e = project(&view, "10x:8x16".parse().unwrap()).unwrap_err();
    assert!(e.to_string().contains("does not fit"), "{e}");
    assert!(View::new(2, 2, vec![0.0; 3]).is_err());
    assert!(View::new(1, 2, vec![0.0, f32::NEG_INFINITY]).is_err());
}

#[test]
fn linear_views_transpose_and_come_back() {
    // Burn's Linear weight [d_in = 3, d_out = 2]
    let w = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let v = View::linear(&w, 3, 2).unwrap();
    assert_eq!((v.rows, v.cols), (2, 3));
    assert_eq!(v.data, [1.0, 3.0, 5.0, 2.0, 4.0, 6.0]);
    assert_eq!(v.to_linear(), w);
    let c = View::conv(&[0.5; 24], &[2, 3, 2, 2]).unwrap();
    assert_eq!((c.rows, c.cols), (2, 12));
}
