//! Launch of the activation kernels: inputs checked and made contiguous (the kernels read flat
//! arrays), packs of 4 values where the length allows, the grid within the runtime's limits
//! ([`crate::grid::packs`]), and the output written in place where the tensor it replaces is
//! contiguous and held by nothing else, or over the contiguous copy of a view.

use super::kernel::{
    Activation, ScalarsLaunch, activation_backward_in_place_kernel, activation_backward_kernel,
    activation_in_place_kernel, activation_kernel,
};
use super::reference::{GELU_BACKWARD, GELU_FORWARD, SIGMOID};
use crate::grid::{f32_input, f32_output, packs};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;

/// The values the kernels index with 32 bits.
const LIMIT: u64 = 1 << 32;

/// Whether the contiguous tensor the kernels read for `t` may be written over: `t` itself
/// where it is contiguous and its memory held by this handle alone, or the copy
/// [`f32_input`] makes of a view that is not contiguous (held by nothing else).
fn writable<R: CubeRuntime>(t: &CubeTensor<R>) -> bool {
    !t.is_contiguous() || t.can_mut()
}

/// `op`'s name in messages.
fn name(op: Activation) -> &'static str {
    match op {
        Activation::Relu => "ReLU",
        Activation::Gelu => "GELU",
        Activation::Sigmoid => "sigmoid",
    }
}

/// Burn's scalars of `op`'s forward (`backward: false`) or backward pass.
fn scalars<R: CubeRuntime>(op: Activation, backward: bool) -> ScalarsLaunch<R> {
    let c = match (op, backward) {
        (Activation::Relu, _) => [0.0; 5],
        (Activation::Gelu, false) => {
            let [sqrt_2, one, two] = GELU_FORWARD;
            [sqrt_2, one, two, 0.0, 0.0]
        }
        (Activation::Gelu, true) => {
            let [k1, k2, k3, k4, power] = GELU_BACKWARD;
            [k1, k2, k3, k4, power]
        }
        (Activation::Sigmoid, _) => {
            let [minus_one, one] = SIGMOID;
            [minus_one, one, 0.0, 0.0, 0.0]
        }
    };
    ScalarsLaunch::new(c[0], c[1], c[2], c[3], c[4])
}

/// `op` of `x` on the device: `x` itself, overwritten, where it is contiguous and held by
/// nothing else; a new contiguous tensor of its shape otherwise.
///
/// # Panics
/// If `x` is not f32 or holds `2³²` values or more.
pub fn launch_forward<R: CubeRuntime>(op: Activation, x: CubeTensor<R>) -> CubeTensor<R> {
    let what = name(op).to_string();
    let n = x.meta.num_elements();
    let in_place = writable(&x);
    let x = f32_input(&x, n, LIMIT, [&what, "x", "x"]);
    if n == 0 {
        return x;
    }
    let (client, vector, count_packs, count, dim) = packs(&x, n);
    if in_place {
        // SAFETY: every unit checks its pack against `count_packs`, the array's length in
        // packs.
        unsafe {
            activation_in_place_kernel::launch_unchecked::<R>(
                &client,
                count,
                dim,
                vector,
                x.clone().into_array_arg(),
                count_packs,
                scalars(op, false),
                op,
            )
        };
        return x;
    }
    let y = f32_output(&x, x.meta.shape().clone());
    // SAFETY: every unit checks its pack against `count_packs`, the length in packs of both
    // arrays.
    unsafe {
        activation_kernel::launch_unchecked::<R>(
            &client,
            count,
            dim,
            vector,
            x.into_array_arg(),
            y.clone().into_array_arg(),
            count_packs,
            scalars(op, false),
            op,
        )
    };
    y
}

/// `op`'s backward on the device from what it reads, `saved` (ReLU's and sigmoid's output,
/// GELU's input), and the gradient `g`: `g` itself, overwritten, where it is contiguous and
/// held by nothing else; a new contiguous tensor of `g`'s shape otherwise.
///
/// # Panics
/// If a tensor is not f32, `saved` holds another number of values than `g`, or `g` holds
/// `2³²` values or more.
pub fn launch_backward<R: CubeRuntime>(
    op: Activation,
    saved: &CubeTensor<R>,
    g: CubeTensor<R>,
) -> CubeTensor<R> {
    let what = format!("{} backward", name(op));
    let reads = match op {
        Activation::Relu | Activation::Sigmoid => "the output",
        Activation::Gelu => "the input",
    };
    let n = g.meta.num_elements();
    let in_place = writable(&g);
    let g = f32_input(&g, n, LIMIT, [&what, "the gradient", "the gradient"]);
    let s = f32_input(saved, n, LIMIT, [&what, reads, "the gradient"]);
    if n == 0 {
        return g;
    }
    let (client, vector, count_packs, count, dim) = packs(&g, n);
    if in_place {
        // SAFETY: every unit checks its pack against `count_packs`, the length in packs of
        // both arrays.
        unsafe {
            activation_backward_in_place_kernel::launch_unchecked::<R>(
                &client,
                count,
                dim,
                vector,
                s.into_array_arg(),
                g.clone().into_array_arg(),
                count_packs,
                scalars(op, true),
                op,
            )
        };
        return g;
    }
    let dx = f32_output(&g, g.meta.shape().clone());
    // SAFETY: as above, for all three arrays.
    unsafe {
        activation_backward_kernel::launch_unchecked::<R>(
            &client,
            count,
            dim,
            vector,
            s.into_array_arg(),
            g.into_array_arg(),
            dx.clone().into_array_arg(),
            count_packs,
            scalars(op, true),
            op,
        )
    };
    dx
}
