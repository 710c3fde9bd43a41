//! Launch of the activation kernels: inputs checked and made contiguous (the kernels read flat
//! arrays), packs of 4 values where the length allows, the grid within the runtime's limits
//! ([`crate::grid::packs`]), and the output written in place where the tensor it replaces is
//! contiguous and held by nothing else.

use super::kernel::{
    relu_backward_in_place_kernel, relu_backward_kernel, relu_in_place_kernel, relu_kernel,
};
use crate::grid::{f32_input, f32_output, packs};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;

/// Where a tensor the kernels read may be written over: contiguous, and its memory held by
/// this handle alone.
fn writable<R: CubeRuntime>(t: &CubeTensor<R>) -> bool {
    t.can_mut() && t.is_contiguous()
}

/// The values the kernels index with 32 bits.
const LIMIT: u64 = 1 << 32;

/// ReLU of `x` on the device: `x` itself, overwritten, where it is contiguous and held by
/// nothing else; a new contiguous tensor of its shape otherwise.
///
/// # Panics
/// If `x` is not f32 or holds `2³²` values or more.
pub fn launch_relu<R: CubeRuntime>(x: CubeTensor<R>) -> CubeTensor<R> {
    let n = x.meta.num_elements();
    let in_place = writable(&x);
    let x = f32_input(&x, n, LIMIT, ["ReLU", "x", "x"]);
    if n == 0 {
        return x;
    }
    let (client, vector, count_packs, count, dim) = packs(&x, n);
    if in_place {
        // SAFETY: every unit checks its pack against the array's length in packs.
        unsafe {
            relu_in_place_kernel::launch_unchecked::<R>(
                &client,
                count,
                dim,
                vector,
                x.clone().into_array_arg(),
                count_packs,
            )
        };
        return x;
    }
    let y = f32_output(&x, x.meta.shape().clone());
    // SAFETY: every unit checks its pack against `count_packs`, the length in packs of both
    // arrays.
    unsafe {
        relu_kernel::launch_unchecked::<R>(
            &client,
            count,
            dim,
            vector,
            x.into_array_arg(),
            y.clone().into_array_arg(),
            count_packs,
        )
    };
    y
}

/// ReLU's backward on the device, given the forward's output `y` and the gradient `g`: `g`
/// itself, overwritten, where it is contiguous and held by nothing else; a new contiguous
/// tensor of `g`'s shape otherwise.
///
/// # Panics
/// If a tensor is not f32, `y` holds another number of values than `g`, or `g` holds `2³²`
/// values or more.
pub fn launch_relu_backward<R: CubeRuntime>(y: &CubeTensor<R>, g: CubeTensor<R>) -> CubeTensor<R> {
    let n = g.meta.num_elements();
    let in_place = writable(&g);
    let g = f32_input(
        &g,
        n,
        LIMIT,
        ["ReLU backward", "the gradient", "the gradient"],
    );
    let y = f32_input(y, n, LIMIT, ["ReLU backward", "the output", "the gradient"]);
    if n == 0 {
        return g;
    }
    let (client, vector, count_packs, count, dim) = packs(&g, n);
    if in_place {
        // SAFETY: every unit checks its pack against `count_packs`, the length in packs of
        // both arrays.
        unsafe {
            relu_backward_in_place_kernel::launch_unchecked::<R>(
                &client,
                count,
                dim,
                vector,
                y.into_array_arg(),
                g.clone().into_array_arg(),
                count_packs,
            )
        };
        return g;
    }
    let dx = f32_output(&g, g.meta.shape().clone());
    // SAFETY: as above, for all three arrays.
    unsafe {
        relu_backward_kernel::launch_unchecked::<R>(
            &client,
            count,
            dim,
            vector,
            y.into_array_arg(),
            g.into_array_arg(),
            dx.clone().into_array_arg(),
            count_packs,
        )
    };
    dx
}
