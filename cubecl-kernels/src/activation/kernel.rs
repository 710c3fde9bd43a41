//! The activation kernels, generic over the vector size `N` of a pack (4 or 1, chosen at
//! launch): one unit per pack, out of place or in place.

use cubecl::prelude::*;

/// ReLU of a pack ([`super`]'s semantics).
#[cube]
fn relu_of<N: Size>(v: Vector<f32, N>) -> Vector<f32, N> {
    select_many(v.less_equal(Vector::new(0.0f32)), Vector::new(0.0f32), v)
}

/// ReLU's backward of a pack given the forward's output `y` and the gradient `g`.
#[cube]
fn masked<N: Size>(y: Vector<f32, N>, g: Vector<f32, N>) -> Vector<f32, N> {
    select_many(y.less_equal(Vector::new(0.0f32)), Vector::new(0.0f32), g)
}

/// `y = relu(x)`, `packs` packs.
#[cube(launch_unchecked)]
pub(super) fn relu_kernel<N: Size>(
    x: &Array<Vector<f32, N>>,
    y: &mut Array<Vector<f32, N>>,
    packs: u32,
) {
    let pos = ABSOLUTE_POS;
    if pos < packs as usize {
        y[pos] = relu_of(x[pos]);
    }
}

/// `x = relu(x)` in place, `packs` packs.
#[cube(launch_unchecked)]
pub(super) fn relu_in_place_kernel<N: Size>(x: &mut Array<Vector<f32, N>>, packs: u32) {
    let pos = ABSOLUTE_POS;
    if pos < packs as usize {
        x[pos] = relu_of(x[pos]);
    }
}

/// `dx = g` where `y > 0` (or NaN), else 0; `packs` packs.
#[cube(launch_unchecked)]
pub(super) fn relu_backward_kernel<N: Size>(
    y: &Array<Vector<f32, N>>,
    g: &Array<Vector<f32, N>>,
    dx: &mut Array<Vector<f32, N>>,
    packs: u32,
) {
    let pos = ABSOLUTE_POS;
    if pos < packs as usize {
        dx[pos] = masked(y[pos], g[pos]);
    }
}

/// As [`relu_backward_kernel`], writing into the gradient `g`.
#[cube(launch_unchecked)]
pub(super) fn relu_backward_in_place_kernel<N: Size>(
    y: &Array<Vector<f32, N>>,
    g: &mut Array<Vector<f32, N>>,
    packs: u32,
) {
    let pos = ABSOLUTE_POS;
    if pos < packs as usize {
        g[pos] = masked(y[pos], g[pos]);
    }
}
