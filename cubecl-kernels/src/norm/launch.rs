//! Launch of the batch-norm kernels: inputs checked and made contiguous (the kernels read flat
//! arrays), new contiguous outputs, the channel sums through broadcast's segmented pass, and
//! the grids ([`calculate_cube_count_elemwise`] lays them within the runtime's limits).

use super::kernel::{
    gradients_kernel, input_gradient_kernel, mean_kernel, normalize_kernel, variance_kernel,
};
use super::{BatchNormStep, Normalized, count};
use crate::broadcast::kernel::BackwardOp;
use crate::broadcast::launch::{channel_pass, input};
use crate::broadcast::{Layout, PACK, Plan};
use crate::grid::f32_output as output;
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;
use burn_std::Shape;
use cubecl::calculate_cube_count_elemwise;
use cubecl::prelude::*;

/// Units of a cube.
const UNITS: u32 = 256;

/// A batch norm's training forward on the device over `x` (`[outer, channels, inner]` by `l`):
/// the batch's statistics, the output, and the running statistics after the step when
/// `running` gives them (the [arithmetic](super)).
///
/// # Panics
/// If `x` does not hold `l.len()` f32 values, `gamma`, `beta` or the running statistics
/// `l.channels`, or `x` more than 2³¹.
pub fn launch_batch_norm<R: CubeRuntime>(
    x: &CubeTensor<R>,
    gamma: &CubeTensor<R>,
    beta: &CubeTensor<R>,
    running: Option<(&CubeTensor<R>, &CubeTensor<R>)>,
    l: Layout,
    s: &BatchNormStep,
) -> Normalized<CubeTensor<R>> {
    let what = "batch norm";
    let x = input(x, l.len(), what, "x");
    let per = |t: &CubeTensor<R>, name| input(t, l.channels, what, name);
    let (gamma, beta) = (per(gamma, "γ"), per(beta, "β"));
    let running = running.map(|(m, v)| (per(m, "the running mean"), per(v, "the running var")));
    let client = x.client.clone();
    let channels = Shape::new([l.channels]);
    let segments = Plan::of(l).segments.max(1) as u32;
    let (units, grid) = per_channel(&x, l);

    let pass = channel_pass(None, &gamma, &x, l, BackwardOp::Total, what);
    let mean = output(&x, channels.clone());
    if l.channels > 0 {
        // SAFETY: unit `c < channels` reads its `segments` sums of `channels · segments` and
        // writes `mean[c]` of `channels`.
        unsafe {
            mean_kernel::launch_unchecked::<R>(
                &client,
                grid.clone(),
                units,
                pass.beta.expect("Σ x").into_array_arg(),
                mean.clone().into_array_arg(),
                l.channels as u32,
                segments,
                count(l),
            )
        };
    }

    let pass = channel_pass(None, &mean, &x, l, BackwardOp::CentredSquares, what);
    let var = output(&x, channels.clone());
    // without running statistics the kernel reads and writes none: `mean` stands in for them
    let (m_out, v_out) = match running {
        Some(_) => (output(&x, channels.clone()), output(&x, channels)),
        None => (mean.clone(), mean.clone()),
    };
    if l.channels > 0 {
        let (rm, rv) = running
            .clone()
            .unwrap_or_else(|| (mean.clone(), mean.clone()));
        // SAFETY: as the means; the running statistics are read and written only when given,
        // each of `channels` values.
        unsafe {
            variance_kernel::launch_unchecked::<R>(
                &client,
                grid,
                units,
                pass.alpha.expect("Σ (x − mean)²").into_array_arg(),
                mean.clone().into_array_arg(),
                rm.into_array_arg(),
                rv.into_array_arg(),
                var.clone().into_array_arg(),
                m_out.clone().into_array_arg(),
                v_out.clone().into_array_arg(),
                l.channels as u32,
                segments,
                count(l),
                s.keep,
                s.momentum,
                running.is_some(),
            )
        };
    }
    let y = normalize(&x, &mean, &var, &gamma, &beta, l, s.epsilon);
    Normalized {
        y,
        mean,
        var,
        running: running.map(|_| (m_out, v_out)),
    }
}

/// A batch norm's inference forward on the device: `y = ((x − mean) / √(var + ε)) · γ + β`
/// per channel of `x` (`[outer, channels, inner]` by `l`), with the running statistics as
/// `mean` and `var`.
///
/// # Panics
/// If `x` does not hold `l.len()` f32 values or a per-channel input `l.channels`.
pub fn launch_normalize<R: CubeRuntime>(
    x: &CubeTensor<R>,
    [mean, var, gamma, beta]: [&CubeTensor<R>; 4],
    l: Layout,
    epsilon: f32,
) -> CubeTensor<R> {
    let what = "batch norm (inference)";
    let x = input(x, l.len(), what, "x");
    let per = |t: &CubeTensor<R>, name| input(t, l.channels, what, name);
    let (mean, var) = (per(mean, "the mean"), per(var, "the variance"));
    let (gamma, beta) = (per(gamma, "γ"), per(beta, "β"));
    normalize(&x, &mean, &var, &gamma, &beta, l, epsilon)
}

/// A batch norm's backward on the device given `dy`: `(dx, dγ, dβ)` from the forward's `x`,
/// batch statistics and `γ` (the [arithmetic](super)).
///
/// # Panics
/// If `x` or `dy` does not hold `l.len()` f32 values or a per-channel input `l.channels`.
pub fn launch_batch_norm_backward<R: CubeRuntime>(
    x: &CubeTensor<R>,
    dy: &CubeTensor<R>,
    [mean, var, gamma]: [&CubeTensor<R>; 3],
    l: Layout,
    epsilon: f32,
) -> (CubeTensor<R>, CubeTensor<R>, CubeTensor<R>) {
    let what = "batch norm backward";
    let (x, dy) = (input(x, l.len(), what, "x"), input(dy, l.len(), what, "dy"));
    let per = |t: &CubeTensor<R>, name| input(t, l.channels, what, name);
    let (mean, var, gamma) = (
        per(mean, "the mean"),
        per(var, "the variance"),
        per(gamma, "γ"),
    );
    let client = x.client.clone();
    let channels = Shape::new([l.channels]);
    let pass = channel_pass(Some(&x), &mean, &dy, l, BackwardOp::CentredProducts, what);
    let (dgamma, dbeta) = (output(&x, channels.clone()), output(&x, channels));
    if l.channels > 0 {
        let (units, grid) = per_channel(&x, l);
        // SAFETY: unit `c < channels` reads its `segments` sums of `channels · segments` and
        // `var[c]`, and writes `dγ[c]`, `dβ[c]`, all of `channels` values.
        unsafe {
            gradients_kernel::launch_unchecked::<R>(
                &client,
                grid,
                units,
                pass.alpha.expect("Σ dy · (x − mean)").into_array_arg(),
                pass.beta.expect("Σ dy").into_array_arg(),
                var.clone().into_array_arg(),
                dgamma.clone().into_array_arg(),
                dbeta.clone().into_array_arg(),
                l.channels as u32,
                Plan::of(l).segments.max(1) as u32,
                epsilon,
            )
        };
    }
    let dx = output(&dy, dy.meta.shape().clone());
    if !l.is_empty() {
        let (vector, packs, count_, dim) = packs(&x, l);
        // SAFETY: every unit checks its pack against `packs`, the length in packs of `x`,
        // `dy` and `dx`, and reads the per-channel inputs at a channel below `channels`.
        unsafe {
            input_gradient_kernel::launch_unchecked::<R>(
                &client,
                count_,
                dim,
                vector,
                x.into_array_arg(),
                dy.into_array_arg(),
                mean.into_array_arg(),
                var.into_array_arg(),
                gamma.into_array_arg(),
                dgamma.clone().into_array_arg(),
                dbeta.clone().into_array_arg(),
                dx.clone().into_array_arg(),
                packs as u32,
                l.inner as u32,
                l.channels as u32,
                epsilon,
                count(l),
            )
        };
    }
    (dx, dgamma, dbeta)
}

/// The normalization pass over contiguous, checked inputs.
fn normalize<R: CubeRuntime>(
    x: &CubeTensor<R>,
    mean: &CubeTensor<R>,
    var: &CubeTensor<R>,
    gamma: &CubeTensor<R>,
    beta: &CubeTensor<R>,
    l: Layout,
    epsilon: f32,
) -> CubeTensor<R> {
    let y = output(x, x.meta.shape().clone());
    if l.is_empty() {
        return y;
    }
    let (vector, packs, count, dim) = packs(x, l);
    // SAFETY: every unit checks its pack against `packs`, the length in packs of `x` and `y`,
    // and reads the per-channel inputs at a channel below `channels`.
    unsafe {
        normalize_kernel::launch_unchecked::<R>(
            &x.client,
            count,
            dim,
            vector,
            x.clone().into_array_arg(),
            mean.clone().into_array_arg(),
            var.clone().into_array_arg(),
            gamma.clone().into_array_arg(),
            beta.clone().into_array_arg(),
            y.clone().into_array_arg(),
            packs as u32,
            l.inner as u32,
            l.channels as u32,
            epsilon,
        )
    };
    y
}

/// `(vector size, packs, cube count, cube dim)` of an element-wise pass over `l`'s values:
/// packs of [`PACK`] where the inner size divides it (a pack then holds one channel).
fn packs<R: CubeRuntime>(like: &CubeTensor<R>, l: Layout) -> (usize, usize, CubeCount, CubeDim) {
    let vector = if l.vectorised() { PACK } else { 1 };
    let packs = l.len() / vector;
    let dim = CubeDim::new_1d(UNITS);
    let count = calculate_cube_count_elemwise(&like.client, packs, dim);
    (vector, packs, count, dim)
}

/// `(cube dim, cube count)` of one unit per channel.
fn per_channel<R: CubeRuntime>(like: &CubeTensor<R>, l: Layout) -> (CubeDim, CubeCount) {
    let dim = CubeDim::new_1d(UNITS);
    (
        dim,
        calculate_cube_count_elemwise(&like.client, l.channels.max(1), dim),
    )
}
