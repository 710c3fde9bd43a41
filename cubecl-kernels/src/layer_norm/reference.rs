//! The host implementation of the layer-norm kernels: their bit-exact oracle, and the path of
//! backends without CubeCL kernels (ndarray). Rows in parallel with rayon, each row's sums in
//! the kernels' [order](super), the column sums through the broadcast family's.

use super::{LayerNormed, units};
use crate::broadcast::Layout;
use crate::broadcast::reference::channel_sums;
use rayon::prelude::*;

/// Rows a task covers (about `2¹⁵` values).
fn rows_per_task(d: usize) -> usize {
    (1usize << 15).div_ceil(d.max(1)).max(1)
}

/// The sum over a row of `d` values of `term(j)`, in the kernels' order: unit `u` of
/// [`units`] adds the terms of `j = u, u + U, …` from `+0`, then the halving tree.
pub(crate) fn row_sum(d: usize, term: impl Fn(usize) -> f32) -> f32 {
    let units = units(d);
    let mut sums = vec![0.0f32; units];
    for j in 0..d {
        sums[j % units] += term(j);
    }
    let mut half = units / 2;
    while half > 0 {
        for u in 0..half {
            sums[u] += sums[u + half];
        }
        half /= 2;
    }
    sums[0]
}

/// A layer norm's forward over the last axis (`d` values) of `x`: the output, `x̂` and each
/// row's `σ`; without `beta`, `y = x̂ · γ`.
///
/// # Panics
/// If `d` is 0 or does not divide `x`'s values, or `gamma` (or `beta`) does not hold `d`
/// (internal invariants: callers check shapes).
pub fn layer_norm(
    x: &[f32],
    gamma: &[f32],
    beta: Option<&[f32]>,
    d: usize,
    epsilon: f32,
) -> LayerNormed<Vec<f32>> {
    check(x.len(), d, gamma, beta);
    let rows = x.len() / d;
    let n = d as f32;
    let mut y = vec![0.0f32; x.len()];
    let mut xhat = vec![0.0f32; x.len()];
    let mut sigma = vec![0.0f32; rows];
    let per = rows_per_task(d);
    y.par_chunks_mut(per * d)
        .zip(xhat.par_chunks_mut(per * d))
        .zip(sigma.par_chunks_mut(per))
        .zip(x.par_chunks(per * d))
        .for_each(|(((y, xhat), sigma), x)| {
            for (r, s_out) in sigma.iter_mut().enumerate() {
                let row = &x[r * d..(r + 1) * d];
                let mean = row_sum(d, |j| row[j]) / n;
                let var = row_sum(d, |j| {
                    let c = row[j] - mean;
                    c * c
                }) / n;
                let s = (var + epsilon).sqrt();
                *s_out = s;
                for j in 0..d {
                    let h = (row[j] - mean) / s;
                    xhat[r * d + j] = h;
                    let scaled = h * gamma[j];
                    y[r * d + j] = match beta {
                        Some(b) => scaled + b[j],
                        None => scaled,
                    };
                }
            }
        });
    LayerNormed { y, xhat, sigma }
}

/// A layer norm's backward given `dy`: `(dx, dγ, dβ)` from the forward's `x̂`, `σ` and `γ`.
///
/// # Panics
/// If `d` is 0 or does not divide `dy`'s values, or `x̂`, `σ` or `γ` does not hold the values
/// that gives them.
pub fn layer_norm_backward(
    xhat: &[f32],
    sigma: &[f32],
    gamma: &[f32],
    dy: &[f32],
    d: usize,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    check(dy.len(), d, gamma, None);
    let rows = dy.len() / d;
    assert_eq!(xhat.len(), dy.len(), "layer norm backward: x̂ and dy");
    assert_eq!(sigma.len(), rows, "layer norm backward: σ, one per row");
    let n = d as f32;
    let mut dx = vec![0.0f32; dy.len()];
    let per = rows_per_task(d);
    dx.par_chunks_mut(per * d)
        .zip(xhat.par_chunks(per * d))
        .zip(dy.par_chunks(per * d))
        .zip(sigma.par_chunks(per))
        .for_each(|(((dx, xhat), dy), sigma)| {
            for (r, &s) in sigma.iter().enumerate() {
                let (h, g) = (&xhat[r * d..(r + 1) * d], &dy[r * d..(r + 1) * d]);
                let shift = row_sum(d, |j| g[j] * gamma[j]) / n;
                let slope = row_sum(d, |j| (g[j] * gamma[j]) * h[j]) / n;
                for j in 0..d {
                    let gh = g[j] * gamma[j];
                    dx[r * d + j] = ((gh - shift) - h[j] * slope) / s;
                }
            }
        });
    let l = Layout {
        outer: rows,
        channels: d,
        inner: 1,
    };
    let [dgamma, dbeta] = channel_sums(l, xhat, dy, gamma, |[sg, sb], h, g, _| {
        *sg += g * h;
        *sb += g;
    });
    (dx, dgamma, dbeta)
}

fn check(len: usize, d: usize, gamma: &[f32], beta: Option<&[f32]>) {
    assert!(
        d > 0 && len.is_multiple_of(d),
        "layer norm: {len} values are not rows of {d}"
    );
    assert_eq!(gamma.len(), d, "layer norm: γ holds one value per column");
    if let Some(b) = beta {
        assert_eq!(b.len(), d, "layer norm: β holds one value per column");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values of a row normalised in f64, for the f32 results to be near.
    fn f64_norm(row: &[f32], epsilon: f64) -> Vec<f64> {
        let n = row.len() as f64;
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
        row.iter()
            .map(|&v| (v as f64 - mean) / (var + epsilon).sqrt())
            .collect()
    }

    #[test]
    fn the_forward_normalizes_each_row_then_scales_and_shifts() {
        let d = 7;
        let x: Vec<f32> = (0..3 * d)
            .map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.5)
            .collect();
        let gamma: Vec<f32> = (0..d).map(|j| 0.5 + j as f32 * 0.25).collect();
        let beta: Vec<f32> = (0..d).map(|j| j as f32 - 3.0).collect();
        let out = layer_norm(&x, &gamma, Some(&beta), d, 1e-5);
        for r in 0..3 {
            let want = f64_norm(&x[r * d..(r + 1) * d], 1e-5);
            for j in 0..d {
                let y = want[j] * gamma[j] as f64 + beta[j] as f64;
                assert!(
                    (out.y[r * d + j] as f64 - y).abs() < 1e-5,
                    "row {r} value {j}"
                );
                assert!((out.xhat[r * d + j] as f64 - want[j]).abs() < 1e-5);
            }
        }
        let plain = layer_norm(&x, &gamma, None, d, 1e-5);
        assert_eq!(plain.xhat, out.xhat);
        let scaled: Vec<f32> = (0..x.len()).map(|i| out.xhat[i] * gamma[i % d]).collect();
        assert_eq!(plain.y, scaled);
    }

    #[test]
    fn the_backward_is_the_derivative_of_the_forward() {
        // a central difference in f64 of Σ dy · y, against dx, dγ and dβ
        let (rows, d, eps) = (4, 5, 1e-5f32);
        let x: Vec<f32> = (0..rows * d)
            .map(|i| ((i * 29 % 13) as f32 - 6.0) * 0.3)
            .collect();
        let gamma: Vec<f32> = (0..d).map(|j| 0.75 + j as f32 * 0.2).collect();
        let beta: Vec<f32> = (0..d).map(|j| j as f32 * 0.1).collect();
        let dy: Vec<f32> = (0..rows * d)
            .map(|i| ((i * 17 % 7) as f32 - 3.0) * 0.25)
            .collect();
        let out = layer_norm(&x, &gamma, Some(&beta), d, eps);
        let (dx, dgamma, dbeta) = layer_norm_backward(&out.xhat, &out.sigma, &gamma, &dy, d);
        let loss = |x: &[f32], gamma: &[f32], beta: &[f32]| -> f64 {
            let mut total = 0.0;
            for r in 0..rows {
                let h = f64_norm(&x[r * d..(r + 1) * d], eps as f64);
                for j in 0..d {
                    let y = h[j] * gamma[j] as f64 + beta[j] as f64;
                    total += dy[r * d + j] as f64 * y;
                }
            }
            total
        };
        let step = 1e-2f32;
        let numeric = |f: &dyn Fn(f32) -> f64| (f(step) - f(-step)) / (2.0 * step as f64);
        for i in 0..rows * d {
            let want = numeric(&|e| {
                let mut x = x.clone();
                x[i] += e;
                loss(&x, &gamma, &beta)
            });
            assert!(
                (dx[i] as f64 - want).abs() < 2e-3,
                "dx[{i}]: {} against {want}",
                dx[i]
            );
        }
        for j in 0..d {
            let want = numeric(&|e| {
                let mut g = gamma.clone();
                g[j] += e;
                loss(&x, &g, &beta)
            });
            assert!((dgamma[j] as f64 - want).abs() < 2e-3, "dγ[{j}]");
            let want = numeric(&|e| {
                let mut b = beta.clone();
                b[j] += e;
                loss(&x, &gamma, &b)
            });
            assert!((dbeta[j] as f64 - want).abs() < 2e-3, "dβ[{j}]");
        }
    }

    #[test]
    fn a_row_is_reduced_by_a_power_of_two_of_units_from_32_to_256() {
        let d = [1, 128, 129, 192, 768, 1024, 4096];
        assert_eq!(d.map(units), [32, 32, 64, 64, 256, 256, 256]);
    }
}
