//! Launch of the softmax kernels: inputs checked and made contiguous (the kernels read flat
//! arrays), a new contiguous output, one cube a row on a virtual grid within the runtime's
//! limits ([`Grid`]).

use super::kernel::{softmax_backward_kernel, softmax_kernel};
use crate::broadcast::launch::input;
use crate::grid::f32_output as output;
use crate::layer_norm::launch::{row_grid, rows};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;

/// Softmax on the device over the last axis (`d` values) of `x` (the [arithmetic](super)).
///
/// # Panics
/// If `d` is 0 or does not divide `x`'s values, or `x` is not f32 or holds 2³¹ or more.
pub fn launch_softmax<R: CubeRuntime>(x: &CubeTensor<R>, d: usize) -> CubeTensor<R> {
    let what = "softmax";
    let rows = rows(x, d, what);
    let x = input(x, rows * d, what, "x");
    let y = output(&x, x.meta.shape().clone());
    if rows > 0 {
        let (grid, dim, units) = row_grid(&x, rows, d);
        let (gx, gy, total) = grid.args();
        // SAFETY: cube `row < rows` (the others end at once) reads and writes the `d` values
        // of its row in `x` and `y`, each of `rows · d`.
        unsafe {
            softmax_kernel::launch_unchecked::<R>(
                &x.client,
                grid.count,
                dim,
                x.clone().into_array_arg(),
                y.clone().into_array_arg(),
                d as u32,
                gx,
                gy,
                total,
                units,
            )
        };
    }
    y
}

/// Softmax's backward on the device from the forward's output `y` and `dy`: `dx`.
///
/// # Panics
/// If `d` is 0 or does not divide `dy`'s values, `y` does not hold as many, or a tensor is
/// not f32.
pub fn launch_softmax_backward<R: CubeRuntime>(
    y: &CubeTensor<R>,
    dy: &CubeTensor<R>,
    d: usize,
) -> CubeTensor<R> {
    let what = "softmax backward";
    let rows = rows(dy, d, what);
    let dy = input(dy, rows * d, what, "dy");
    let y = input(y, rows * d, what, "y");
    let dx = output(&dy, dy.meta.shape().clone());
    if rows > 0 {
        let (grid, dim, units) = row_grid(&dy, rows, d);
        let (gx, gy, total) = grid.args();
        // SAFETY: cube `row < rows` reads the `d` values of its row in `y` and `dy` and writes
        // them in `dx`, each of `rows · d`.
        unsafe {
            softmax_backward_kernel::launch_unchecked::<R>(
                &dy.client,
                grid.count,
                dim,
                y.into_array_arg(),
                dy.clone().into_array_arg(),
                dx.clone().into_array_arg(),
                d as u32,
                gx,
                gy,
                total,
                units,
            )
        };
    }
    dx
}
