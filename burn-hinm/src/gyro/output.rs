//! The output-channel permutation: extraction, clustering and a linear assignment of clusters
//! to tiles, with the bracketed selections of the output costs.

use super::SCHEDULE;
use super::assign::assign;
use super::kmeans::balanced_kmeans;
use crate::error::HinmError;
use crate::mask::{Scores, check_tile, column_sums, smallest_sum};
use rand::rngs::StdRng;
use rand::seq::index::sample;
use rayon::prelude::*;

/// Saliency a tile loses to column-vector pruning: the `K − nnz` smallest of its column sums.
pub fn tile_cost(sums: &[f64], nnz: usize) -> f64 {
    let mut v = sums.to_vec();
    smallest_sum(&mut v, sums.len() - nnz)
}

/// Lanes of the bracketing pass (independent partial sums the compiler keeps in vectors).
pub(super) const LANES: usize = 4;
/// Bracketing passes tried before a plain selection.
pub(super) const BRACKET_TRIES: usize = 4;

/// Over `y = r + c`: the sum and the number of values `< lo`, and the number `≤ hi`; `marks[i]`
/// is 1 where `lo ≤ y[i] ≤ hi`, else 0. Not inlined: inlined into its caller the loop is no
/// longer vectorised (measured: three times slower; compiled for AVX2, 15 % slower again).
#[inline(never)]
pub(super) fn bracket_pass(
    r: &[f64],
    c: &[f64],
    lo: f64,
    hi: f64,
    marks: &mut [u8],
) -> (f64, usize, usize) {
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
pub(super) fn collect_mid(r: &[f64], c: &[f64], marks: &[u8], mid: &mut Vec<f64>) {
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
pub(super) const TILE_BLOCK: usize = 8;

/// Buffers of [`Level::smallest_sum`].
#[derive(Default)]
pub(super) struct Scratch {
    marks: Vec<u8>,
    buf: Vec<f64>,
}

/// One tile's running prediction of the `m`-th smallest of `r + c` less the cluster's mean.
#[derive(Clone, Default)]
pub(super) struct Level {
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
    pub(super) fn smallest_sum(
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
pub(super) fn output_costs(
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
            let cluster_sums: Vec<Vec<f64>> = (0..tiles)
                .into_par_iter()
                .map(|j| column_sums(scores, &clusters[j]))
                .collect();
            let remaining: Vec<Vec<f64>> = (0..tiles)
                .into_par_iter()
                .map(|t| {
                    let out: Vec<u32> = picked[t].iter().map(|&i| perm[t * v + i]).collect();
                    let gone = column_sums(scores, &out);
                    sums[t].iter().zip(gone).map(|(a, b)| a - b).collect()
                })
                .collect();
            let means: Vec<f64> = cluster_sums
                .iter()
                .map(|c| c.iter().sum::<f64>() / k as f64)
                .collect();
            let blocks: Vec<(Vec<f64>, Vec<Level>)> = (0..tiles.div_ceil(TILE_BLOCK))
                .into_par_iter()
                .map(|b| {
                    let block = b * TILE_BLOCK..((b + 1) * TILE_BLOCK).min(tiles);
                    let (rows, levels) = (&remaining[block.clone()], &levels[block]);
                    output_costs(rows, levels, &cluster_sums, &means, k - nnz)
                })
                .collect();
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
