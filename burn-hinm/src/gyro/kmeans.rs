//! Balanced k-means: the clusters of extracted rows the output search moves between tiles.

use super::assign::assign;
use crate::error::HinmError;
use rand::rngs::StdRng;
use rand::seq::index::sample;
use rayon::prelude::*;

/// Balanced k-means iterations at most, and the relative tolerance on the centroids' movement.
pub(super) const KMEANS_ITERATIONS: usize = 20;
pub(super) const KMEANS_TOLERANCE: f64 = 1e-4;

/// Points and centroids whose distances are computed together: a block of squared distances
/// that stays in registers over the dimensions.
pub(super) const POINT_BLOCK: usize = 4;
pub(super) const CENTROID_BLOCK: usize = 8;

/// The Euclidean distances of `points` (row-major, `dim` values each) to `k` centroids given
/// transposed (`dim × wk`, `wk ≥ k` a multiple of [`CENTROID_BLOCK`], the padding computed and
/// dropped), row-major `points × k`. Each squared distance is summed over the dimensions in
/// order, as a sequential sum (the lanes run over points and centroids, no addition is
/// reordered: the result equals the plain loop's to the bit, with or without AVX2).
pub(super) fn distances_to(points: &[f64], transposed: &[f64], dim: usize, k: usize) -> Vec<f64> {
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
pub(super) fn distances_avx2(points: &[f64], transposed: &[f64], dim: usize, k: usize) -> Vec<f64> {
    distances_blocks(points, transposed, dim, k)
}

#[inline(always)]
pub(super) fn distances_blocks(
    points: &[f64],
    transposed: &[f64],
    dim: usize,
    k: usize,
) -> Vec<f64> {
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
        let distances = (0..n.div_ceil(per))
            .into_par_iter()
            .map(|b| {
                let points = b * per..((b + 1) * per).min(n);
                distances_to(
                    &data[points.start * dim..points.end * dim],
                    &transposed,
                    dim,
                    k,
                )
            })
            .collect::<Vec<_>>()
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
