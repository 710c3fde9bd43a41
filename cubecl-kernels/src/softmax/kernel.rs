//! The softmax kernels: one cube of [`units`](crate::layer_norm::units) units per row, the
//! row's maximum and sums in the [order](super) of the module docs.

use crate::grid::cube_at;
use crate::layer_norm::kernel::row_sum;
use cubecl::prelude::*;

/// The maximum of the units' `value`s over the cube's `units` units (a power of two) by a
/// halving tree, returned to every unit (a NaN compares false: it is kept only where it is
/// the value compared against).
#[cube]
fn row_max(value: f32, #[comptime] units: usize) -> f32 {
    let mut shared = SharedMemory::<f32>::new(units);
    let u = UNIT_POS as usize;
    shared[u] = value;
    sync_cube();
    let mut half = comptime!(units / 2).runtime();
    while half > 0 {
        if u < half {
            let other = shared[u + half];
            shared[u] = select(other > shared[u], other, shared[u]);
        }
        sync_cube();
        half /= 2;
    }
    shared[0]
}

/// One cube per row of `d > 0` values (the row from the virtual grid, [`cube_at`]):
/// `y = exp(x − max x) / Σ exp(x − max x)` ([module docs](super)).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub(super) fn softmax_kernel(
    x: &Array<f32>,
    y: &mut Array<f32>,
    d: u32,
    grid_x: u32,
    grid_y: u32,
    total: u32,
    #[comptime] units: usize,
) {
    let row = cube_at(grid_x, grid_y, total).x;
    let d = d as usize;
    let u = UNIT_POS as usize;
    let base = row * d;
    // a unit past the row starts from the row's first value, which cannot raise its maximum
    let mut m = x[base + select(u < d, u, 0)];
    let mut j = u;
    while j < d {
        let v = x[base + j];
        m = select(v > m, v, m);
        j += units;
    }
    let max = row_max(m, units);
    let mut sum = 0.0f32;
    let mut k = u;
    while k < d {
        sum += f32::exp(x[base + k] - max);
        k += units;
    }
    let sum = row_sum(sum, units);
    let mut i = u;
    while i < d {
        y[base + i] = f32::exp(x[base + i] - max) / sum;
        i += units;
    }
}

/// One cube per row: `dx = y · (dy − Σ dy · y)` ([module docs](super)).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub(super) fn softmax_backward_kernel(
    y: &Array<f32>,
    dy: &Array<f32>,
    dx: &mut Array<f32>,
    d: u32,
    grid_x: u32,
    grid_y: u32,
    total: u32,
    #[comptime] units: usize,
) {
    let row = cube_at(grid_x, grid_y, total).x;
    let d = d as usize;
    let u = UNIT_POS as usize;
    let base = row * d;
    let mut dot = 0.0f32;
    let mut j = u;
    while j < d {
        dot += dy[base + j] * y[base + j];
        j += units;
    }
    let dot = row_sum(dot, units);
    let mut i = u;
    while i < d {
        dx[base + i] = y[base + i] * (dy[base + i] - dot);
        i += units;
    }
}
