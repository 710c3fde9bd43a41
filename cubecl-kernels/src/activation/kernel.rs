//! The activation kernels, generic over the vector size `N` of a pack (4 or 1, chosen at
//! launch) and over the activation (a comptime [`Activation`]): one unit per pack, out of place
//! or in place. Burn's scalars (`c`) are kernel arguments, as Burn's scalar ops take them.

use cubecl::prelude::*;

pub use op::Activation;
pub(super) use op::{Scalars, ScalarsLaunch};

mod op {
    // The `CubeType` derive generates undocumented expansion types.
    #![allow(missing_docs)]
    use cubecl::prelude::*;

    /// Which activation a kernel computes ([`super::super`]'s semantics).
    #[derive(CubeType, Clone, Copy, Hash, PartialEq, Eq, Debug)]
    pub enum Activation {
        /// `max(x, 0)`; its backward reads the forward's output.
        Relu,
        /// Burn's GELU (erf); its backward reads the forward's input.
        Gelu,
        /// Burn's sigmoid, `exp(−ln(exp(−x) + 1))`; its backward reads the forward's output.
        Sigmoid,
    }

    /// Burn's scalars of an activation's pass, in the order the kernels read them (unused ones
    /// are any value).
    #[derive(CubeLaunch, CubeType, Clone, Copy, Debug)]
    pub struct Scalars {
        pub c0: f32,
        pub c1: f32,
        pub c2: f32,
        pub c3: f32,
        pub c4: f32,
    }
}

/// The forward of a pack.
#[cube]
fn forward_of<N: Size>(
    v: Vector<f32, N>,
    c: Scalars,
    #[comptime] op: Activation,
) -> Vector<f32, N> {
    let zero = Vector::new(0.0f32);
    match op {
        Activation::Relu => select_many(v.less_equal(zero), zero, v),
        Activation::Gelu => {
            // x / √2, erf, + 1, · x, / 2
            let e = Vector::erf(v / Vector::new(c.c0));
            (v * (e + Vector::new(c.c1))) / Vector::new(c.c2)
        }
        Activation::Sigmoid => {
            // · −1, exp, + 1, ln, · −1, exp
            let e = Vector::exp(v * Vector::new(c.c0)) + Vector::new(c.c1);
            Vector::exp(Vector::ln(e) * Vector::new(c.c0))
        }
    }
}

/// The backward of a pack: `s` is what the backward reads (ReLU's and sigmoid's output, GELU's
/// input), `g` the gradient.
#[cube]
fn backward_of<N: Size>(
    s: Vector<f32, N>,
    g: Vector<f32, N>,
    c: Scalars,
    #[comptime] op: Activation,
) -> Vector<f32, N> {
    let zero = Vector::new(0.0f32);
    match op {
        Activation::Relu => select_many(s.less_equal(zero), zero, g),
        Activation::Gelu => {
            // Burn's derivative of the tanh approximation, operation for operation
            let x3 = Vector::powf(s, Vector::new(c.c4));
            let inner_1 = x3 * Vector::new(c.c0) + s * Vector::new(c.c1);
            let inner_2 = x3 * Vector::new(c.c2) + s * Vector::new(c.c3);
            let t = Vector::tanh(inner_1);
            let sech = (t * t) * Vector::new(-1.0f32) + Vector::new(1.0f32);
            let y = t * Vector::new(0.5f32) + (inner_2 * sech + Vector::new(0.5f32));
            y * g
        }
        Activation::Sigmoid => {
            // Burn's `sigmoid_backward`: `y · (y · −1 + 1) · g`
            (s * (s * Vector::new(c.c0) + Vector::new(c.c1))) * g
        }
    }
}

/// `y = op(x)`, `packs` packs.
#[cube(launch_unchecked)]
pub(super) fn activation_kernel<N: Size>(
    x: &Array<Vector<f32, N>>,
    y: &mut Array<Vector<f32, N>>,
    packs: u32,
    c: Scalars,
    #[comptime] op: Activation,
) {
    let pos = ABSOLUTE_POS;
    if pos < packs as usize {
        y[pos] = forward_of(x[pos], c, op);
    }
}

/// `x = op(x)` in place, `packs` packs.
#[cube(launch_unchecked)]
pub(super) fn activation_in_place_kernel<N: Size>(
    x: &mut Array<Vector<f32, N>>,
    packs: u32,
    c: Scalars,
    #[comptime] op: Activation,
) {
    let pos = ABSOLUTE_POS;
    if pos < packs as usize {
        x[pos] = forward_of(x[pos], c, op);
    }
}

/// `dx` of `op` from what its backward reads (`s`) and the gradient `g`, `packs` packs.
#[cube(launch_unchecked)]
pub(super) fn activation_backward_kernel<N: Size>(
    s: &Array<Vector<f32, N>>,
    g: &Array<Vector<f32, N>>,
    dx: &mut Array<Vector<f32, N>>,
    packs: u32,
    c: Scalars,
    #[comptime] op: Activation,
) {
    let pos = ABSOLUTE_POS;
    if pos < packs as usize {
        dx[pos] = backward_of(s[pos], g[pos], c, op);
    }
}

/// As [`activation_backward_kernel`], writing into the gradient `g`.
#[cube(launch_unchecked)]
pub(super) fn activation_backward_in_place_kernel<N: Size>(
    s: &Array<Vector<f32, N>>,
    g: &mut Array<Vector<f32, N>>,
    packs: u32,
    c: Scalars,
    #[comptime] op: Activation,
) {
    let pos = ABSOLUTE_POS;
    if pos < packs as usize {
        g[pos] = backward_of(s[pos], g[pos], c, op);
    }
}
