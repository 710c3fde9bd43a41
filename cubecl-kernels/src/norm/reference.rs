//! The host implementation of the batch-norm kernels: their bit-exact oracle, and the path of
//! backends without CubeCL kernels (ndarray). Multi-threaded with rayon through the broadcast
//! family's passes: the sums in [`broadcast::reference`](crate::broadcast::reference)'s order,
//! the element-wise values one expression each (the [arithmetic](super)).

use super::Normalized;
use super::{BatchNormStep, count};
use crate::broadcast::Layout;
use crate::broadcast::reference::{channel_sums, map_channels};

/// A batch norm's training forward over `x` (`[outer, channels, inner]` by `l`): the output,
/// the batch's means and variances, and the running statistics after the step when `running`
/// gives them.
///
/// # Panics
/// If `x` does not hold `l.len()` values or a per-channel input `l.channels` (internal
/// invariants: callers check shapes).
pub fn batch_norm(
    x: &[f32],
    gamma: &[f32],
    beta: &[f32],
    running: Option<(&[f32], &[f32])>,
    l: Layout,
    s: &BatchNormStep,
) -> Normalized<Vec<f32>> {
    check(l, x, &[gamma, beta]);
    let n = count(l);
    let [sums] = channel_sums(l, x, x, gamma, |[s], _, v, _| *s += v);
    let mean: Vec<f32> = sums.into_iter().map(|s| s / n).collect();
    let [sums] = channel_sums(l, x, x, &mean, |[s], _, v, m| {
        let d = v - m;
        *s += d * d
    });
    let var: Vec<f32> = sums.into_iter().map(|s| s / n).collect();
    let running = running.map(|(rm, rv)| {
        check(l, x, &[rm, rv]);
        let update = |r: &[f32], stat: &[f32]| -> Vec<f32> {
            r.iter()
                .zip(stat)
                .map(|(&r, &v)| r * s.keep + v * s.momentum)
                .collect()
        };
        (update(rm, &mean), update(rv, &var))
    });
    let y = normalize(x, [&mean, &var, gamma, beta], l, s.epsilon);
    Normalized {
        y,
        mean,
        var,
        running,
    }
}

/// A batch norm's inference forward: `y = ((x − mean) / √(var + ε)) · γ + β` per channel.
///
/// # Panics
/// As [`batch_norm`].
pub fn normalize(
    x: &[f32],
    [mean, var, gamma, beta]: [&[f32]; 4],
    l: Layout,
    epsilon: f32,
) -> Vec<f32> {
    check(l, x, &[mean, var, gamma, beta]);
    let per: Vec<[f32; 4]> = (0..l.channels)
        .map(|c| [mean[c], (var[c] + epsilon).sqrt(), gamma[c], beta[c]])
        .collect();
    map_channels(l, x, x, &per, |v, _, [m, s, g, b]| {
        let centred = v - m;
        let scaled = (centred / s) * g;
        scaled + b
    })
}

/// A batch norm's backward given `dy`: `(dx, dγ, dβ)` from the forward's `x`, batch
/// statistics and `γ`.
///
/// # Panics
/// If `x` or `dy` does not hold `l.len()` values or a per-channel input `l.channels`.
pub fn batch_norm_backward(
    x: &[f32],
    dy: &[f32],
    [mean, var, gamma]: [&[f32]; 3],
    l: Layout,
    epsilon: f32,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    check(l, x, &[mean, var, gamma]);
    check(l, dy, &[]);
    let n = count(l);
    let [sums_gamma, dbeta] = channel_sums(l, x, dy, mean, |[a, b], v, g, m| {
        let d = v - m;
        *a += g * d;
        *b += g;
    });
    let roots: Vec<f32> = var.iter().map(|&v| (v + epsilon).sqrt()).collect();
    let dgamma: Vec<f32> = sums_gamma.iter().zip(&roots).map(|(a, s)| a / s).collect();
    let per: Vec<[f32; 5]> = (0..l.channels)
        .map(|c| {
            let s = roots[c];
            [mean[c], s, gamma[c] / s, dbeta[c] / n, dgamma[c] / n]
        })
        .collect();
    let dx = map_channels(l, x, dy, &per, |v, g, [m, s, scale, shift, slope]| {
        let xhat = (v - m) / s;
        let centred = g - shift;
        let t = centred - xhat * slope;
        scale * t
    });
    (dx, dgamma, dbeta)
}

fn check(l: Layout, values: &[f32], per_channel: &[&[f32]]) {
    assert_eq!(
        values.len(),
        l.len(),
        "batch norm: {l:?} and {} values",
        values.len()
    );
    for p in per_channel {
        assert_eq!(
            p.len(),
            l.channels,
            "batch norm: {l:?} and {} per-channel values",
            p.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::uniform;

    fn layouts() -> Vec<Layout> {
        [(2, 3, 7), (3, 4, 1), (4, 2, 16), (1, 2, 40000), (300, 5, 3)]
            .into_iter()
            .map(|(outer, channels, inner)| Layout {
                outer,
                channels,
                inner,
            })
            .collect()
    }

    /// `x` with channel `c` around `c` (a mean far from 0, so centring matters).
    fn input(l: Layout, seed: u64) -> Vec<f32> {
        let mut x = uniform(l.len(), seed);
        for (k, v) in x.iter_mut().enumerate() {
            *v += ((k / l.inner) % l.channels) as f32;
        }
        x
    }

    /// f64 statistics of channel `c`.
    fn stats(x: &[f32], l: Layout, c: usize) -> (f64, f64) {
        let values: Vec<f64> = (0..l.outer)
            .flat_map(|o| (0..l.inner).map(move |i| (o * l.channels + c) * l.inner + i))
            .map(|k| x[k] as f64)
            .collect();
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        (
            mean,
            values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n,
        )
    }

    #[test]
    fn the_forward_normalizes_each_channel_and_updates_the_running_statistics() {
        let s = BatchNormStep::new(1e-5, 0.1);
        for l in layouts() {
            let x = input(l, 3);
            let gamma = uniform(l.channels, 4);
            let beta = uniform(l.channels, 5);
            let (rm, rv) = (vec![0.5; l.channels], vec![2.0; l.channels]);
            let out = batch_norm(&x, &gamma, &beta, Some((&rm, &rv)), l, &s);
            let (run_m, run_v) = out.running.unwrap();
            for c in 0..l.channels {
                let (mean, var) = stats(&x, l, c);
                assert!(
                    (out.mean[c] as f64 - mean).abs() < 1e-5 * (1.0 + mean.abs()),
                    "{l:?}"
                );
                assert!((out.var[c] as f64 - var).abs() < 1e-5 * var, "{l:?}");
                assert!((run_m[c] as f64 - (0.45 + 0.1 * mean)).abs() < 1e-5 * (1.0 + mean.abs()));
                assert!((run_v[c] as f64 - (1.8 + 0.1 * var)).abs() < 1e-5);
            }
            for (k, &y) in out.y.iter().enumerate() {
                let c = (k / l.inner) % l.channels;
                let (mean, var) = stats(&x, l, c);
                let want =
                    (x[k] as f64 - mean) / (var + 1e-5).sqrt() * gamma[c] as f64 + beta[c] as f64;
                assert!(
                    (y as f64 - want).abs() < 1e-4,
                    "{l:?} value {k}: {y} vs {want}"
                );
            }
        }
    }

    #[test]
    fn the_backward_is_the_gradient_of_the_forward() {
        // a finite difference of L = Σ w · y (w fixed) against the backward's dx, dγ, dβ
        let s = BatchNormStep::new(1e-5, 0.1);
        let l = Layout {
            outer: 3,
            channels: 2,
            inner: 5,
        };
        let x = input(l, 6);
        let w = uniform(l.len(), 7);
        let gamma = vec![1.5, -0.5];
        let beta = vec![0.25, 1.0];
        let loss = |x: &[f32], gamma: &[f32], beta: &[f32]| -> f64 {
            let out = batch_norm(x, gamma, beta, None, l, &s);
            out.y
                .iter()
                .zip(&w)
                .map(|(&y, &w)| y as f64 * w as f64)
                .sum()
        };
        let out = batch_norm(&x, &gamma, &beta, None, l, &s);
        let (dx, dgamma, dbeta) =
            batch_norm_backward(&x, &w, [&out.mean, &out.var, &gamma], l, s.epsilon);
        let h = 1e-2f32;
        let slope = |f: &dyn Fn(f32) -> f64| (f(h) - f(-h)) / (2.0 * h as f64);
        for k in [0, 4, 7, 12, 29] {
            let fd = slope(&|d| {
                let mut x = x.clone();
                x[k] += d;
                loss(&x, &gamma, &beta)
            });
            assert!(
                (dx[k] as f64 - fd).abs() < 2e-2 * (1.0 + fd.abs()),
                "dx[{k}]: {} vs {fd}",
                dx[k]
            );
        }
        for c in 0..2 {
            let fd = slope(&|d| {
                let mut g = gamma.clone();
                g[c] += d;
                loss(&x, &g, &beta)
            });
            assert!(
                (dgamma[c] as f64 - fd).abs() < 1e-2 * (1.0 + fd.abs()),
                "dγ[{c}]"
            );
            let fd = slope(&|d| {
                let mut b = beta.clone();
                b[c] += d;
                loss(&x, &gamma, &b)
            });
            assert!(
                (dbeta[c] as f64 - fd).abs() < 1e-2 * (1.0 + fd.abs()),
                "dβ[{c}]"
            );
        }
    }

    #[test]
    fn inference_uses_the_statistics_it_is_given() {
        let l = Layout {
            outer: 1,
            channels: 2,
            inner: 2,
        };
        let y = normalize(
            &[1.0, 3.0, -1.0, 0.0],
            [&[2.0, 0.0], &[4.0, 1.0], &[1.0, 2.0], &[0.0, 1.0]],
            l,
            0.0,
        );
        assert_eq!(y, vec![-0.5, 0.5, -1.0, 1.0]);
    }
}
