//! The batch-norm kernels: the per-channel finishing steps (one unit per channel, adding the
//! segment sums of a [`channel_pass`](crate::broadcast::launch::channel_pass) in order), and the
//! element-wise passes, generic over the vector size `N` of a pack (4 or 1, chosen at launch).

use crate::broadcast::kernel::segments_sum;
use cubecl::prelude::*;
use cubecl::std::FastDivmod;

/// One unit per channel: `mean[c] = (Σ x) / n`.
#[cube(launch_unchecked)]
pub(super) fn mean_kernel(
    sums: &Array<f32>,
    mean: &mut Array<f32>,
    channels: u32,
    segments: u32,
    n: f32,
) {
    let c = ABSOLUTE_POS;
    if c < channels as usize {
        mean[c] = segments_sum(sums, c, segments as usize) / n;
    }
}

/// One unit per channel: `var[c] = (Σ (x − mean)²) / n`, and with `running` the running
/// statistics `r · keep + stat · momentum` (not read or written without).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub(super) fn variance_kernel(
    sums: &Array<f32>,
    mean: &Array<f32>,
    running_mean: &Array<f32>,
    running_var: &Array<f32>,
    var: &mut Array<f32>,
    mean_out: &mut Array<f32>,
    var_out: &mut Array<f32>,
    channels: u32,
    segments: u32,
    n: f32,
    keep: f32,
    momentum: f32,
    #[comptime] running: bool,
) {
    let c = ABSOLUTE_POS;
    if c < channels as usize {
        let v = segments_sum(sums, c, segments as usize) / n;
        var[c] = v;
        if running {
            mean_out[c] = running_mean[c] * keep + mean[c] * momentum;
            var_out[c] = running_var[c] * keep + v * momentum;
        }
    }
}

/// One unit per channel: `dγ[c] = (Σ dy · (x − mean)) / √(var + ε)` and `dβ[c] = Σ dy`.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub(super) fn gradients_kernel(
    sums_gamma: &Array<f32>,
    sums_beta: &Array<f32>,
    var: &Array<f32>,
    dgamma: &mut Array<f32>,
    dbeta: &mut Array<f32>,
    channels: u32,
    segments: u32,
    epsilon: f32,
) {
    let c = ABSOLUTE_POS;
    if c < channels as usize {
        let segments = segments as usize;
        let s = f32::sqrt(var[c] + epsilon);
        dgamma[c] = segments_sum(sums_gamma, c, segments) / s;
        dbeta[c] = segments_sum(sums_beta, c, segments);
    }
}

/// One unit per pack: `y = ((x − mean[c]) / √(var[c] + ε)) · γ[c] + β[c]`, `c = (pos · N /
/// inner) mod channels` (one channel for the whole pack: `N > 1` only when `N` divides
/// `inner`).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub(super) fn normalize_kernel<N: Size>(
    x: &Array<Vector<f32, N>>,
    mean: &Array<f32>,
    var: &Array<f32>,
    gamma: &Array<f32>,
    beta: &Array<f32>,
    y: &mut Array<Vector<f32, N>>,
    packs: u32,
    inner: FastDivmod<u32>,
    channels: FastDivmod<u32>,
    epsilon: f32,
) {
    let pos = ABSOLUTE_POS;
    if pos < packs as usize {
        let c = channels.modulo(inner.div(pos as u32 * N::value() as u32)) as usize;
        let s = Vector::<f32, N>::new(f32::sqrt(var[c] + epsilon));
        let centred = x[pos] - Vector::new(mean[c]);
        let scaled = (centred / s) * Vector::new(gamma[c]);
        y[pos] = scaled + Vector::new(beta[c]);
    }
}

/// One unit per pack: `dx = (γ / s) · ((dy − dβ / n) − ((x − mean) / s) · (dγ / n))` with
/// `s = √(var + ε)` and `n = per_channel`, per channel as [`normalize_kernel`].
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub(super) fn input_gradient_kernel<N: Size>(
    x: &Array<Vector<f32, N>>,
    dy: &Array<Vector<f32, N>>,
    mean: &Array<f32>,
    var: &Array<f32>,
    gamma: &Array<f32>,
    dgamma: &Array<f32>,
    dbeta: &Array<f32>,
    dx: &mut Array<Vector<f32, N>>,
    packs: u32,
    inner: FastDivmod<u32>,
    channels: FastDivmod<u32>,
    epsilon: f32,
    per_channel: f32,
) {
    let pos = ABSOLUTE_POS;
    if pos < packs as usize {
        let c = channels.modulo(inner.div(pos as u32 * N::value() as u32)) as usize;
        let s = f32::sqrt(var[c] + epsilon);
        let (scale, shift, slope) = (
            gamma[c] / s,
            dbeta[c] / per_channel,
            dgamma[c] / per_channel,
        );
        let xhat = (x[pos] - Vector::new(mean[c])) / Vector::new(s);
        let centred = dy[pos] - Vector::new(shift);
        let t = centred - xhat * Vector::new(slope);
        dx[pos] = Vector::new(scale) * t;
    }
}
