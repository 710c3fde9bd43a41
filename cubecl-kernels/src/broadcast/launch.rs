//! Launch of the broadcast kernels: the pack size from the layout (OneFlow's rule), the grid,
//! and the outputs (new contiguous tensors; inputs made contiguous first where they are not,
//! since the kernels read them as flat arrays).

use super::kernel::{BackwardOp, ForwardOp, backward_kernel, forward_kernel, segments_kernel};
use super::{Layout, PACK, Plan};
use crate::grid::f32_output as output;
use burn_cubecl::CubeRuntime;
use burn_cubecl::ops::numeric::zeros_client;
use burn_cubecl::tensor::CubeTensor;
use burn_std::{DType, Shape};
use cubecl::calculate_cube_count_elemwise;
use cubecl::prelude::*;

/// Units of a cube of the element-wise kernels.
const UNITS: u32 = 256;

/// PReLU forward on the device: `y = x · α[c]` where `x < 0`, else `x`; `y` has `x`'s shape.
///
/// # Panics
/// If `x` does not hold `l.len()` f32 values, `alpha` `l.channels`, or `x` more than
/// `u32::MAX` (the layout comes from [`Layout::of`], which checks what the user gave).
pub fn launch_prelu<R: CubeRuntime>(
    x: &CubeTensor<R>,
    alpha: &CubeTensor<R>,
    l: Layout,
) -> CubeTensor<R> {
    forward(x, alpha, None, l, ForwardOp::Prelu, "prelu")
}

/// Affine forward on the device: `y = x · α[c] + β[c]` (product rounded, then the add), or
/// `x · α[c]` without `β`; `y` has `x`'s shape.
///
/// # Panics
/// As [`launch_prelu`], or if `beta` does not hold `l.channels` f32 values.
pub fn launch_affine<R: CubeRuntime>(
    x: &CubeTensor<R>,
    alpha: &CubeTensor<R>,
    beta: Option<&CubeTensor<R>>,
    l: Layout,
) -> CubeTensor<R> {
    let op = match beta {
        Some(_) => ForwardOp::Affine,
        None => ForwardOp::Scale,
    };
    forward(x, alpha, beta, l, op, "affine")
}

/// PReLU backward on the device, one pass over `x` and `dy`: `(dx, dα)`, `dx` with `dy`'s shape
/// and `dα: [channels]`, summed in [`reference`](super::reference)'s order.
///
/// # Panics
/// As [`launch_prelu`], or if `dy` does not hold `l.len()` f32 values.
pub fn launch_prelu_backward<R: CubeRuntime>(
    x: &CubeTensor<R>,
    alpha: &CubeTensor<R>,
    dy: &CubeTensor<R>,
    l: Layout,
) -> (CubeTensor<R>, CubeTensor<R>) {
    let (dx, da, _) = backward(Some(x), alpha, dy, l, BackwardOp::Prelu, "prelu backward");
    (dx, da.expect("PReLU sums dα"))
}

/// Affine backward on the device, one pass over `dy` (and `x`): `(dx, dα, dβ)`, `dx` with `dy`'s
/// shape, `dα: [channels]` when `x` is given, `dβ: [channels]`, summed in
/// [`reference`](super::reference)'s order.
///
/// # Panics
/// As [`launch_prelu_backward`].
pub fn launch_affine_backward<R: CubeRuntime>(
    x: Option<&CubeTensor<R>>,
    alpha: &CubeTensor<R>,
    dy: &CubeTensor<R>,
    l: Layout,
) -> (CubeTensor<R>, Option<CubeTensor<R>>, CubeTensor<R>) {
    let op = match x {
        Some(_) => BackwardOp::Affine,
        None => BackwardOp::Scale,
    };
    let (dx, da, db) = backward(x, alpha, dy, l, op, "affine backward");
    (dx, da, db.expect("affine sums dβ"))
}

/// `t` checked to hold `n` f32 values (the layout's), within 31-bit indices, contiguous.
pub(crate) fn input<R: CubeRuntime>(
    t: &CubeTensor<R>,
    n: usize,
    what: &str,
    name: &str,
) -> CubeTensor<R> {
    crate::grid::f32_input(t, n, 1 << 31, [what, name, "the layout"])
}

/// The values in a pack: [`PACK`] when the layout is vectorised, else 1 (OneFlow's rule).
fn vector_size(l: Layout) -> usize {
    if l.vectorised() { PACK } else { 1 }
}

fn forward<R: CubeRuntime>(
    x: &CubeTensor<R>,
    alpha: &CubeTensor<R>,
    beta: Option<&CubeTensor<R>>,
    l: Layout,
    op: ForwardOp,
    what: &str,
) -> CubeTensor<R> {
    let x = input(x, l.len(), what, "x");
    let alpha = input(alpha, l.channels, what, "α");
    let beta = beta.map(|b| input(b, l.channels, what, "β"));
    let y = output(&x, x.meta.shape().clone());
    if l.is_empty() {
        return y;
    }
    let client = x.client.clone();
    let vector = vector_size(l);
    let packs = l.len() / vector;
    let dim = CubeDim::new_1d(UNITS);
    let count = calculate_cube_count_elemwise(&client, packs, dim);
    let beta = beta.unwrap_or_else(|| alpha.clone()); // not read by PReLU and the scale
    // SAFETY: every unit checks its pack against `packs` (the arrays' length in packs) and
    // reads α and β at a channel below `channels` (their length).
    unsafe {
        forward_kernel::launch_unchecked::<R>(
            &client,
            count,
            dim,
            vector,
            x.into_array_arg(),
            alpha.into_array_arg(),
            beta.into_array_arg(),
            y.clone().into_array_arg(),
            packs as u32,
            l.inner as u32,
            l.channels as u32,
            op,
        )
    };
    y
}

/// `(dx, Σ for dα, Σ for dβ)`, the sums as `op` asks for them.
fn backward<R: CubeRuntime>(
    x: Option<&CubeTensor<R>>,
    alpha: &CubeTensor<R>,
    dy: &CubeTensor<R>,
    l: Layout,
    op: BackwardOp,
    what: &str,
) -> (CubeTensor<R>, Option<CubeTensor<R>>, Option<CubeTensor<R>>) {
    let pass = channel_pass(x, alpha, dy, l, op, what);
    let dx = pass.dx.expect("the broadcast backwards write dx");
    let total = |sums: CubeTensor<R>| segment_totals(sums, l);
    (dx, pass.alpha.map(total), pass.beta.map(total))
}

/// What one [`channel_pass`] wrote.
pub(crate) struct Pass<R: CubeRuntime> {
    /// `dx`, when the op writes it.
    pub(crate) dx: Option<CubeTensor<R>>,
    /// The first sums: `[channels · segments]` partials (`[channels]` zeros when the layout
    /// has no values).
    pub(crate) alpha: Option<CubeTensor<R>>,
    /// The second sums, as the first.
    pub(crate) beta: Option<CubeTensor<R>>,
}

/// One pass of [`backward_kernel`] with `op` over `dy` (and `x`): `dx` where the op writes it,
/// and each channel's segment partials of the sums it takes ([`Plan`] gives the segments; the
/// partials are added in order by [`segment_totals`], or by a kernel of the caller's that
/// reads them as `sums[c · segments + s]`).
///
/// # Panics
/// If `dy` (and `x`) do not hold `l.len()` f32 values, or `alpha` `l.channels`.
pub(crate) fn channel_pass<R: CubeRuntime>(
    x: Option<&CubeTensor<R>>,
    alpha: &CubeTensor<R>,
    dy: &CubeTensor<R>,
    l: Layout,
    op: BackwardOp,
    what: &str,
) -> Pass<R> {
    let dy = input(dy, l.len(), what, "dy");
    let x = x.map(|x| input(x, l.len(), what, "x"));
    let alpha = input(alpha, l.channels, what, "α");
    let client = dy.client.clone();
    let dx = op.writes_dx().then(|| output(&dy, dy.meta.shape().clone()));
    let p = Plan::of(l);
    if p.packs == 0 || l.channels == 0 {
        let zeros = || {
            zeros_client(
                client.clone(),
                dy.device.clone(),
                Shape::new([l.channels]),
                DType::F32,
            )
        };
        return Pass {
            dx,
            alpha: op.sums_alpha().then(zeros),
            beta: op.sums_beta().then(zeros),
        };
    }
    let parts = Shape::new([l.channels * p.segments]);
    let unused = || output(&dy, Shape::new([1]));
    let sums_alpha = op.sums_alpha().then(|| output(&dy, parts.clone()));
    let sums_beta = op.sums_beta().then(|| output(&dy, parts.clone()));
    let width = p.channels_per_cube;
    let dim = CubeDim::new_1d((width * p.units) as u32);
    let cubes = l.channels.div_ceil(width) * p.segments;
    let count = calculate_cube_count_elemwise(&client, cubes * width * p.units, dim);
    // SAFETY: a unit reads and writes the packs of its channel below `packs` (`dx` only where
    // the op writes it, when it was allocated with `dy`'s length), `α` at its channel below
    // `channels`, the sums at `c · segments + s` of `channels · segments`; cubes past the last
    // segment end at once.
    unsafe {
        backward_kernel::launch_unchecked::<R>(
            &client,
            count,
            dim,
            p.vector,
            x.unwrap_or_else(|| dy.clone()).into_array_arg(),
            dy.clone().into_array_arg(),
            alpha.into_array_arg(),
            dx.clone().unwrap_or_else(unused).into_array_arg(),
            sums_alpha.clone().unwrap_or_else(unused).into_array_arg(),
            sums_beta.clone().unwrap_or_else(unused).into_array_arg(),
            l.channels as u32,
            l.inner as u32,
            p.packs as u32,
            p.segment as u32,
            p.segments as u32,
            width as u32,
            cubes as u32,
            p.units,
            op,
        )
    };
    Pass {
        dx,
        alpha: sums_alpha,
        beta: sums_beta,
    }
}

/// The channels' sums from a [`channel_pass`]'s partials: its segments added in order
/// (`[channels]`; the partials themselves when there is one segment or none).
pub(crate) fn segment_totals<R: CubeRuntime>(sums: CubeTensor<R>, l: Layout) -> CubeTensor<R> {
    let p = Plan::of(l);
    if p.segments <= 1 || l.channels == 0 {
        return sums;
    }
    let client = sums.client.clone();
    let total = output(&sums, Shape::new([l.channels]));
    let dim = CubeDim::new_1d(UNITS);
    let count = calculate_cube_count_elemwise(&client, l.channels, dim);
    // SAFETY: unit `c < channels` reads its `segments` sums of `channels · segments`.
    unsafe {
        segments_kernel::launch_unchecked::<R>(
            &client,
            count,
            dim,
            sums.into_array_arg(),
            total.clone().into_array_arg(),
            l.channels as u32,
            p.segments as u32,
        )
    };
    total
}
