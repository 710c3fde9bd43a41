//! The layer-norm kernels: one cube of [`units`](super::units) units per row, the row's sums
//! in the [order](super) of the module docs.

use crate::grid::cube_at;
use cubecl::prelude::*;

/// The sum of the units' `value`s over the cube's `units` units (a power of two) by the
/// halving tree of the [module docs](super), returned to every unit.
#[cube]
pub(crate) fn row_sum(value: f32, #[comptime] units: usize) -> f32 {
    let mut shared = SharedMemory::<f32>::new(units);
    let u = UNIT_POS as usize;
    shared[u] = value;
    sync_cube();
    let mut half = comptime!(units / 2).runtime();
    while half > 0 {
        if u < half {
            shared[u] += shared[u + half];
        }
        sync_cube();
        half /= 2;
    }
    shared[0]
}

/// One cube per row of `d` values (the row from the virtual grid, [`cube_at`]): `x̂`, `y` and
/// the row's `σ` ([module docs](super)). Without `with_beta`, `beta` is not read.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub(super) fn layer_norm_kernel(
    x: &Array<f32>,
    gamma: &Array<f32>,
    beta: &Array<f32>,
    y: &mut Array<f32>,
    xhat: &mut Array<f32>,
    sigma: &mut Array<f32>,
    d: u32,
    n: f32,
    epsilon: f32,
    grid_x: u32,
    grid_y: u32,
    total: u32,
    #[comptime] units: usize,
    #[comptime] with_beta: bool,
) {
    let row = cube_at(grid_x, grid_y, total).x;
    let d = d as usize;
    let u = UNIT_POS as usize;
    let base = row * d;
    let mut sum = 0.0f32;
    let mut j = u;
    while j < d {
        sum += x[base + j];
        j += units;
    }
    let mean = row_sum(sum, units) / n;
    let mut squares = 0.0f32;
    let mut k = u;
    while k < d {
        let c = x[base + k] - mean;
        squares += c * c;
        k += units;
    }
    let var = row_sum(squares, units) / n;
    let s = f32::sqrt(var + epsilon);
    let mut i = u;
    while i < d {
        let h = (x[base + i] - mean) / s;
        xhat[base + i] = h;
        let scaled = h * gamma[i];
        if with_beta {
            y[base + i] = scaled + beta[i];
        } else {
            y[base + i] = scaled;
        }
        i += units;
    }
    if u == 0 {
        sigma[row] = s;
    }
}

/// One cube per row: `dx = ((ĝ − a / d) − x̂ · (b / d)) / σ` with `ĝ = dy · γ`, `a = Σ ĝ` and
/// `b = Σ ĝ · x̂` over the row ([module docs](super)).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub(super) fn layer_norm_backward_kernel(
    xhat: &Array<f32>,
    sigma: &Array<f32>,
    gamma: &Array<f32>,
    dy: &Array<f32>,
    dx: &mut Array<f32>,
    d: u32,
    n: f32,
    grid_x: u32,
    grid_y: u32,
    total: u32,
    #[comptime] units: usize,
) {
    let row = cube_at(grid_x, grid_y, total).x;
    let d = d as usize;
    let u = UNIT_POS as usize;
    let base = row * d;
    let mut sum_a = 0.0f32;
    let mut sum_b = 0.0f32;
    let mut j = u;
    while j < d {
        let g = dy[base + j] * gamma[j];
        sum_a += g;
        sum_b += g * xhat[base + j];
        j += units;
    }
    let shift = row_sum(sum_a, units) / n;
    let slope = row_sum(sum_b, units) / n;
    let s = sigma[row];
    let mut i = u;
    while i < d {
        let g = dy[base + i] * gamma[i];
        dx[base + i] = ((g - shift) - xhat[base + i] * slope) / s;
        i += units;
    }
}
