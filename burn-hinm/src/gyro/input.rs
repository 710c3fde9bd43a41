//! The tile-wise input-channel permutation: one column out of each group of 4, reassigned by
//! a linear assignment whose cost matrix is a min-plus product on panels.

use super::INPUT_PATIENCE;
use super::assign::Assignment;
use crate::error::HinmError;
use crate::mask::Scores;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rayon::prelude::*;

/// Saliency 2:4 prunes from one row's group of 4 values: the two smallest.
pub(super) fn pruned(g: [f64; 4]) -> f64 {
    let mut g = g;
    g.sort_by(f64::total_cmp);
    g[0] + g[1]
}

/// The input cost matrix's operands, packed in panels: [`PANEL_ROWS`] groups (the `b` values)
/// or [`PANEL_COLS`] taken-out columns (the `x` values) side by side for each tile row `r`, one
/// panel after the other. A block of entries then reads its operands from consecutive memory,
/// one tile row after the next. The padding (up to whole panels) is zero, computed and dropped.
pub(super) struct Panels {
    v: usize,
    n: usize,
    pub(super) b: Vec<f64>,
    pub(super) x: Vec<f64>,
}

/// Groups and taken-out columns a panel of [`Panels`] holds side by side.
pub(super) const PANEL_ROWS: usize = 8;
pub(super) const PANEL_COLS: usize = 16;

impl Panels {
    pub(super) fn new(v: usize, n: usize) -> Self {
        Self {
            v,
            n,
            b: vec![0.0; v * n.div_ceil(PANEL_ROWS) * PANEL_ROWS],
            x: vec![0.0; v * n.div_ceil(PANEL_COLS) * PANEL_COLS],
        }
    }

    /// Where group `i`'s value of tile row 0 is in `b` (row `r` is `r · PANEL_ROWS` further).
    pub(super) fn b_at(&self, i: usize) -> usize {
        (i / PANEL_ROWS) * self.v * PANEL_ROWS + i % PANEL_ROWS
    }

    /// Where taken-out column `j`'s value of tile row 0 is in `x` (row `r` is
    /// `r · PANEL_COLS` further).
    pub(super) fn x_at(&self, j: usize) -> usize {
        (j / PANEL_COLS) * self.v * PANEL_COLS + j % PANEL_COLS
    }
}

/// The input search's cost matrix, `n × n` row-major into `cost`:
/// `cost[i][j] = base[i] + Σ_r min(b[r][i], x[r][j])` over the `v` tile rows `r`. Each entry is
/// summed in row order `r` exactly as a sequential sum (the vector lanes run over `i` and `j`,
/// no addition is reordered, so the result equals the plain loop's to the bit, whatever the
/// instruction set). A block of `R × C` entries stays in registers over the tile's rows (one
/// load of `x`, one of `b` per row serve all of them): 4 × 16 with AVX-512, 4 × 8 otherwise.
pub(super) fn min_plus(p: &Panels, base: &[f64], cost: &mut [f64]) {
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
pub(super) fn min_plus_avx512(p: &Panels, base: &[f64], cost: &mut [f64]) {
    min_plus_blocks::<4, 16>(p, base, cost);
}

/// [`min_plus_blocks`] compiled for AVX2 (4 × 8 entries in 8 vector registers).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) fn min_plus_avx2(p: &Panels, base: &[f64], cost: &mut [f64]) {
    min_plus_blocks::<4, 8>(p, base, cost);
}

/// [`min_plus`] in blocks of `R` groups × `C` columns (`R` divides [`PANEL_ROWS`], `C` divides
/// [`PANEL_COLS`]).
#[inline(always)]
pub(super) fn min_plus_blocks<const R: usize, const C: usize>(
    p: &Panels,
    base: &[f64],
    cost: &mut [f64],
) {
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

/// [`input_permutation`] of every tile (`perm`: rows in tile order), on rayon's pool (which
/// balances the tiles' different numbers of tries); each tile draws from its own RNG seeded
/// from `rng`, so the result does not depend on the number of threads or on which thread
/// searched which tile.
pub fn input_permutations(
    scores: &Scores,
    perm: &[u32],
    v: usize,
    columns: Vec<Vec<u32>>,
    rng: &mut StdRng,
) -> Result<Vec<Vec<u32>>, HinmError> {
    let seeds: Vec<u64> = (0..columns.len()).map(|_| rand::Rng::random(rng)).collect();
    columns
        .par_iter()
        .enumerate()
        .map(|(t, cols)| {
            let mut rng = StdRng::seed_from_u64(seeds[t]);
            input_permutation(scores, &perm[t * v..(t + 1) * v], cols, &mut rng)
        })
        .collect()
}
