//! The activation kernels against their host reference, bit for bit on every runtime (they
//! only compare and choose): lengths that take packs of 4 and lengths that do not, special
//! values, the in-place and the out-of-place launch, a strided view, an empty tensor. The pool
//! is poisoned before each out-of-place launch (a value the kernel fails to write reads NaN).

use crate::broadcast::{poison, read, upload};
use crate::{Cube, floats};
use burn::tensor::ops::FloatTensorOps;
use cubecl_kernels::activation::{launch_relu, launch_relu_backward, reference};
use cubecl_kernels::testing::{TestBackend, assert_matches_host, uniform};

/// Values of `n` with the special ones first: NaN, ±∞, ±0 and values either side of zero.
fn values(n: usize, seed: u64) -> Vec<f32> {
    let special = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        0.0,
        1.5,
        -2.5,
    ];
    let mut v = uniform(n, seed);
    for (slot, s) in v.iter_mut().zip(special) {
        *slot = s;
    }
    v
}

/// Lengths in packs of 4 and not, one value, none.
const LENGTHS: &[usize] = &[1024, 1027, 12, 1, 0];

cubecl_kernels::runtime_test! {
    fn relu_equals_the_host_bit_for_bit_in_place_and_not<R>() {
        for &n in LENGTHS {
            let x = values(n, 1);
            let want = reference::relu(&x);
            // held by this handle alone: overwritten
            let got = launch_relu(upload::<R>(&x, &[n]));
            assert_matches_host::<R>(&read(got), &want, &format!("ReLU of {n}, in place"));
            // held twice: a new output, the input untouched
            let input = upload::<R>(&x, &[n]);
            poison::<R>(&[n]);
            let got = launch_relu(input.clone());
            assert_matches_host::<R>(&read(got), &want, &format!("ReLU of {n}"));
            assert_matches_host::<R>(&read(input), &x, &format!("ReLU of {n}: its input"));
        }
    }

    fn the_backward_equals_the_host_bit_for_bit_in_place_and_not<R>() {
        for &n in LENGTHS {
            let (y, g) = (values(n, 2), values(n, 3));
            let want = reference::relu_backward(&y, &g);
            let dy = upload::<R>(&y, &[n]);
            let got = launch_relu_backward(&dy, upload::<R>(&g, &[n]));
            assert_matches_host::<R>(&read(got), &want, &format!("backward of {n}, in place"));
            let dg = upload::<R>(&g, &[n]);
            poison::<R>(&[n]);
            let got = launch_relu_backward(&dy, dg.clone());
            assert_matches_host::<R>(&read(got), &want, &format!("backward of {n}"));
            assert_matches_host::<R>(&read(dg), &g, &format!("backward of {n}: its gradient"));
        }
    }

    fn views_are_read_in_logical_order<R>() {
        // [3, 5] stored, swapped to [5, 3]: the kernels read (and write) row-major [5, 3]
        let (x, g) = (values(15, 4), values(15, 5));
        let swap = |v: &[f32]| -> Cube<R> {
            <TestBackend<R> as FloatTensorOps<TestBackend<R>>>::float_swap_dims(
                upload::<R>(v, &[3, 5]),
                0,
                1,
            )
        };
        let logical = |v: &[f32]| (0..15).map(|k| v[(k % 3) * 5 + k / 3]).collect::<Vec<_>>();
        let got = floats::<R, 2>(launch_relu(swap(&x)));
        assert_matches_host::<R>(&got, &reference::relu(&logical(&x)), "ReLU of a view");
        let got = floats::<R, 2>(launch_relu_backward(&swap(&x), swap(&g)));
        let want = reference::relu_backward(&logical(&x), &logical(&g));
        assert_matches_host::<R>(&got, &want, "backward of views");
    }

    #[should_panic(expected = "ReLU backward: the output holds 4 values, the gradient 5")]
    fn a_backward_of_other_lengths_is_refused<R>() {
        launch_relu_backward(&upload::<R>(&[1.0; 4], &[4]), upload::<R>(&[1.0; 5], &[5]));
    }
}
