//! Launch of the layer-norm kernels: inputs checked and made contiguous (the kernels read flat
//! arrays), new contiguous outputs, one cube a row on a virtual grid within the runtime's
//! limits ([`Grid`]), and the column sums through the broadcast family's channel pass.

use super::kernel::{layer_norm_backward_kernel, layer_norm_kernel};
use super::{LayerNormed, units};
use crate::broadcast::Layout;
use crate::broadcast::kernel::BackwardOp;
use crate::broadcast::launch::{channel_pass, input, segment_totals};
use crate::grid::{Grid, f32_output as output};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;
use burn_std::Shape;
use cubecl::prelude::*;

/// The rows of `x` over a last axis of `d` values.
///
/// # Panics
/// If `d` is 0 or does not divide `x`'s values.
pub(crate) fn rows<R: CubeRuntime>(x: &CubeTensor<R>, d: usize, what: &str) -> usize {
    let n = x.meta.num_elements();
    assert!(
        d > 0 && n.is_multiple_of(d),
        "{what}: {n} values are not rows of {d}"
    );
    n / d
}

/// One cube of [`units`] units a row of `d` values, `rows` rows on `like`'s device: the virtual
/// grid, the cube dim, and the units (the row kernels' comptime argument). Softmax's kernels
/// launch the same way.
pub(crate) fn row_grid<R: CubeRuntime>(
    like: &CubeTensor<R>,
    rows: usize,
    d: usize,
) -> (Grid, CubeDim, usize) {
    let units = units(d);
    let grid = Grid::new(&like.client, [rows, 1, 1]);
    (grid, CubeDim::new_1d(units as u32), units)
}

/// A layer norm's forward on the device over the last axis (`d` values) of `x`: the output,
/// `x̂` and each row's `σ` (the [arithmetic](super)); without `beta`, `y = x̂ · γ`.
///
/// # Panics
/// If `d` is 0 or does not divide `x`'s values, `gamma` (or `beta`) does not hold `d` f32
/// values, or `x` holds 2³¹ or more.
pub fn launch_layer_norm<R: CubeRuntime>(
    x: &CubeTensor<R>,
    gamma: &CubeTensor<R>,
    beta: Option<&CubeTensor<R>>,
    d: usize,
    epsilon: f32,
) -> LayerNormed<CubeTensor<R>> {
    let what = "layer norm";
    let rows = rows(x, d, what);
    let x = input(x, rows * d, what, "x");
    let gamma = input(gamma, d, what, "γ");
    let beta = beta.map(|b| input(b, d, what, "β"));
    let y = output(&x, x.meta.shape().clone());
    let xhat = output(&x, x.meta.shape().clone());
    let sigma = output(&x, Shape::new([rows]));
    if rows > 0 {
        let (grid, dim, units) = row_grid(&x, rows, d);
        let (gx, gy, total) = grid.args();
        // SAFETY: cube `row < rows` (the others end at once) reads and writes the `d` values
        // of its row in `x`, `y` and `x̂` of `rows · d`, `γ` and `β` below `d` (`β` only when
        // given), and `σ[row]` of `rows`.
        unsafe {
            layer_norm_kernel::launch_unchecked::<R>(
                &x.client,
                grid.count,
                dim,
                x.clone().into_array_arg(),
                gamma.clone().into_array_arg(),
                beta.clone()
                    .unwrap_or_else(|| gamma.clone())
                    .into_array_arg(),
                y.clone().into_array_arg(),
                xhat.clone().into_array_arg(),
                sigma.clone().into_array_arg(),
                d as u32,
                d as f32,
                epsilon,
                gx,
                gy,
                total,
                units,
                beta.is_some(),
            )
        };
    }
    LayerNormed { y, xhat, sigma }
}

/// A layer norm's backward on the device given `dy`: `(dx, dγ, dβ)` from the forward's `x̂`
/// and `σ` and `γ` (the [arithmetic](super)).
///
/// # Panics
/// If `d` is 0 or does not divide `dy`'s values, `x̂` does not hold as many, `σ` one per row,
/// `γ` `d`, or a tensor is not f32.
pub fn launch_layer_norm_backward<R: CubeRuntime>(
    xhat: &CubeTensor<R>,
    sigma: &CubeTensor<R>,
    gamma: &CubeTensor<R>,
    dy: &CubeTensor<R>,
    d: usize,
) -> (CubeTensor<R>, CubeTensor<R>, CubeTensor<R>) {
    let what = "layer norm backward";
    let rows = rows(dy, d, what);
    let dy = input(dy, rows * d, what, "dy");
    let xhat = input(xhat, rows * d, what, "x̂");
    let sigma = input(sigma, rows, what, "σ");
    let gamma = input(gamma, d, what, "γ");
    let dx = output(&dy, dy.meta.shape().clone());
    if rows > 0 {
        let (grid, dim, units) = row_grid(&dy, rows, d);
        let (gx, gy, total) = grid.args();
        // SAFETY: cube `row < rows` reads the `d` values of its row in `x̂`, `dy` and writes
        // them in `dx` (each of `rows · d`), `γ` below `d` and `σ[row]` of `rows`.
        unsafe {
            layer_norm_backward_kernel::launch_unchecked::<R>(
                &dy.client,
                grid.count,
                dim,
                xhat.clone().into_array_arg(),
                sigma.into_array_arg(),
                gamma.clone().into_array_arg(),
                dy.clone().into_array_arg(),
                dx.clone().into_array_arg(),
                d as u32,
                d as f32,
                gx,
                gy,
                total,
                units,
            )
        };
    }
    // dγ and dβ: the columns' sums over the rows, a channel pass over [rows, d, 1]
    let l = Layout {
        outer: rows,
        channels: d,
        inner: 1,
    };
    let pass = channel_pass(Some(&xhat), &gamma, &dy, l, BackwardOp::Products, what);
    let dgamma = segment_totals(pass.alpha.expect("Σ dy · x̂"), l);
    let dbeta = segment_totals(pass.beta.expect("Σ dy"), l);
    (dx, dgamma, dbeta)
}
