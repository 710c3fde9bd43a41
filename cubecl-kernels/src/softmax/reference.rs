//! The host implementation of the softmax kernels: their oracle (bit for bit where the
//! runtime's `exp` rounds as the host's does), and the path of backends without CubeCL kernels
//! (ndarray). Rows in parallel with rayon, each row's sums in the kernels' [order](super).

use crate::layer_norm::reference::row_sum;
use rayon::prelude::*;

/// Rows a task covers (about `2¹⁵` values).
fn rows_per_task(d: usize) -> usize {
    (1usize << 15).div_ceil(d.max(1)).max(1)
}

/// Softmax over the last axis (`d` values) of `x`.
///
/// # Panics
/// If `d` is 0 or does not divide `x`'s values (internal invariants: callers check shapes).
pub fn softmax(x: &[f32], d: usize) -> Vec<f32> {
    assert!(
        d > 0 && x.len().is_multiple_of(d),
        "softmax: {} values are not rows of {d}",
        x.len()
    );
    let mut y = vec![0.0f32; x.len()];
    let per = rows_per_task(d) * d;
    y.par_chunks_mut(per)
        .zip(x.par_chunks(per))
        .for_each(|(y, x)| {
            for (y, x) in y.chunks_mut(d).zip(x.chunks(d)) {
                let max = x.iter().fold(x[0], |m, &v| if v > m { v } else { m });
                let sum = row_sum(d, |j| (x[j] - max).exp());
                for (y, &v) in y.iter_mut().zip(x) {
                    *y = (v - max).exp() / sum;
                }
            }
        });
    y
}

/// Softmax's backward from the forward's output `y` and `dy`: `dx = y · (dy − Σ dy · y)`.
///
/// # Panics
/// If `d` is 0 or does not divide `dy`'s values, or `y` does not hold as many.
pub fn softmax_backward(y: &[f32], dy: &[f32], d: usize) -> Vec<f32> {
    assert!(
        d > 0 && dy.len().is_multiple_of(d),
        "softmax backward: {} values are not rows of {d}",
        dy.len()
    );
    assert_eq!(y.len(), dy.len(), "softmax backward: y and dy");
    let mut dx = vec![0.0f32; dy.len()];
    let per = rows_per_task(d) * d;
    dx.par_chunks_mut(per)
        .zip(y.par_chunks(per))
        .zip(dy.par_chunks(per))
        .for_each(|((dx, y), dy)| {
            for ((dx, y), g) in dx.chunks_mut(d).zip(y.chunks(d)).zip(dy.chunks(d)) {
                let dot = row_sum(d, |j| g[j] * y[j]);
                for j in 0..d {
                    dx[j] = y[j] * (g[j] - dot);
                }
            }
        });
    dx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_sum_to_one_and_follow_their_exponentials() {
        let d = 9;
        let x: Vec<f32> = (0..4 * d)
            .map(|i| ((i * 31 % 17) as f32 - 8.0) * 0.7)
            .collect();
        let y = softmax(&x, d);
        for (row, ys) in x.chunks(d).zip(y.chunks(d)) {
            let max = row.iter().cloned().fold(f64::MIN, |m, v| m.max(v as f64));
            let total: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
            for (&v, &got) in row.iter().zip(ys) {
                let want = (v as f64 - max).exp() / total;
                assert!((got as f64 - want).abs() < 1e-6, "{got} against {want}");
            }
        }
        // a large shift is removed by the maximum: no overflow
        let shifted: Vec<f32> = x.iter().map(|v| v + 1000.0).collect();
        let ys = softmax(&shifted, d);
        assert!(ys.iter().zip(&y).all(|(a, b)| (a - b).abs() < 1e-4));
        // a NaN makes its row NaN, and only its row
        let mut with_nan = x.clone();
        with_nan[d + 3] = f32::NAN;
        let ys = softmax(&with_nan, d);
        assert!(ys[d..2 * d].iter().all(|v| v.is_nan()));
        assert_eq!(ys[..d], y[..d]);
    }

    #[test]
    fn the_backward_is_the_derivative_of_the_forward() {
        // a central difference in f64 of Σ dy · y against dx
        let d = 6;
        let x: Vec<f32> = (0..2 * d)
            .map(|i| ((i * 13 % 7) as f32 - 3.0) * 0.4)
            .collect();
        let dy: Vec<f32> = (0..2 * d)
            .map(|i| ((i * 5 % 11) as f32 - 5.0) * 0.3)
            .collect();
        let dx = softmax_backward(&softmax(&x, d), &dy, d);
        let loss = |x: &[f32]| -> f64 {
            x.chunks(d)
                .zip(dy.chunks(d))
                .map(|(row, g)| {
                    let total: f64 = row.iter().map(|&v| (v as f64).exp()).sum();
                    row.iter()
                        .zip(g)
                        .map(|(&v, &g)| g as f64 * (v as f64).exp() / total)
                        .sum::<f64>()
                })
                .sum()
        };
        let step = 1e-2f32;
        for i in 0..x.len() {
            let (mut up, mut down) = (x.clone(), x.clone());
            up[i] += step;
            down[i] -= step;
            let want = (loss(&up) - loss(&down)) / (2.0 * step as f64);
            assert!(
                (dx[i] as f64 - want).abs() < 1e-3,
                "dx[{i}]: {} against {want}",
                dx[i]
            );
        }
    }
}
