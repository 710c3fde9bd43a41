//! The activation kernels against their host reference on the runtime `EMBER_TEST_RUNTIME`
//! selects: ReLU bit for bit on every runtime (it only compares and chooses), GELU within the
//! rounding of the runtime's `exp`, `erf`, `tanh` and `pow`; lengths that take packs of 4 and
//! lengths that do not, special values, the in-place and the out-of-place launch, a strided
//! view, an empty tensor. The pool is poisoned before each out-of-place launch (a value the
//! kernel fails to write reads NaN).

use crate::broadcast::{poison, read, upload};
use crate::{Cube, floats};
use burn::tensor::ops::FloatTensorOps;
use cubecl_kernels::activation::{Activation, launch_backward, launch_forward, reference};
use cubecl_kernels::testing::{TestBackend, TestRuntime, assert_matches_host, uniform};

/// Values of `n` in [-4, 4) with the special ones first: ±0 and values either side of zero,
/// then (for ReLU) NaN and ±∞.
fn values(op: Activation, n: usize, seed: u64) -> Vec<f32> {
    let special: &[f32] = match op {
        Activation::Relu => &[
            -0.0,
            0.0,
            1.5,
            -2.5,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ],
        Activation::Gelu => &[-0.0, 0.0, 1.5, -2.5],
    };
    let mut v: Vec<f32> = uniform(n, seed).iter().map(|v| v * 4.0).collect();
    for (slot, s) in v.iter_mut().zip(special) {
        *slot = *s;
    }
    v
}

/// The host's forward of `op`.
fn forward(op: Activation, x: &[f32]) -> Vec<f32> {
    match op {
        Activation::Relu => reference::relu(x),
        Activation::Gelu => reference::gelu(x),
    }
}

/// The host's backward of `op` from what it reads and the gradient.
fn backward(op: Activation, saved: &[f32], g: &[f32]) -> Vec<f32> {
    match op {
        Activation::Relu => reference::relu_backward(saved, g),
        Activation::Gelu => reference::gelu_backward(saved, g),
    }
}

/// ReLU bit for bit; GELU within 2·10⁻⁶ of the largest value (the runtime's transcendental
/// functions), NaN where the host has NaN.
fn assert_activation<R: TestRuntime>(op: Activation, got: &[f32], want: &[f32], what: &str) {
    match op {
        Activation::Relu => assert_matches_host::<R>(got, want, what),
        Activation::Gelu => {
            assert_eq!(got.len(), want.len(), "{what}: lengths");
            let scale = want.iter().fold(1f32, |m, v| m.max(v.abs()));
            for (i, (g, w)) in got.iter().zip(want).enumerate() {
                assert!(
                    (g - w).abs() <= 2e-6 * scale,
                    "{what}: value {i} is {g}, the host {w}"
                );
            }
        }
    }
}

/// Lengths in packs of 4 and not, one value, none.
const LENGTHS: &[usize] = &[1024, 1027, 12, 1, 0];

cubecl_kernels::runtime_test! {
    fn forwards_equal_the_host_in_place_and_not<R>() {
        for op in [Activation::Relu, Activation::Gelu] {
            for &n in LENGTHS {
                let x = values(op, n, 1);
                let want = forward(op, &x);
                // held by this handle alone: overwritten
                let got = launch_forward(op, upload::<R>(&x, &[n]));
                assert_activation::<R>(op, &read(got), &want, &format!("{op:?} of {n}, in place"));
                // held twice: a new output, the input untouched
                let input = upload::<R>(&x, &[n]);
                poison::<R>(&[n]);
                let got = launch_forward(op, input.clone());
                assert_activation::<R>(op, &read(got), &want, &format!("{op:?} of {n}"));
                assert_matches_host::<R>(&read(input), &x, &format!("{op:?} of {n}: its input"));
            }
        }
    }

    fn backwards_equal_the_host_in_place_and_not<R>() {
        for op in [Activation::Relu, Activation::Gelu] {
            for &n in LENGTHS {
                let (s, g) = (values(op, n, 2), values(op, n, 3));
                let want = backward(op, &s, &g);
                let ds = upload::<R>(&s, &[n]);
                let got = launch_backward(op, &ds, upload::<R>(&g, &[n]));
                let what = format!("{op:?} backward of {n}");
                assert_activation::<R>(op, &read(got), &want, &format!("{what}, in place"));
                let dg = upload::<R>(&g, &[n]);
                poison::<R>(&[n]);
                let got = launch_backward(op, &ds, dg.clone());
                assert_activation::<R>(op, &read(got), &want, &what);
                assert_matches_host::<R>(&read(dg), &g, &format!("{what}: its gradient"));
            }
        }
    }

    fn views_are_read_in_logical_order<R>() {
        // [3, 5] stored, swapped to [5, 3]: the kernels read (and write) row-major [5, 3]
        let swap = |v: &[f32]| -> Cube<R> {
            <TestBackend<R> as FloatTensorOps<TestBackend<R>>>::float_swap_dims(
                upload::<R>(v, &[3, 5]),
                0,
                1,
            )
        };
        let logical = |v: &[f32]| (0..15).map(|k| v[(k % 3) * 5 + k / 3]).collect::<Vec<_>>();
        for op in [Activation::Relu, Activation::Gelu] {
            let (x, g) = (values(op, 15, 4), values(op, 15, 5));
            let got = floats::<R, 2>(launch_forward(op, swap(&x)));
            let want = forward(op, &logical(&x));
            assert_activation::<R>(op, &got, &want, &format!("{op:?} of a view"));
            let got = floats::<R, 2>(launch_backward(op, &swap(&x), swap(&g)));
            let want = backward(op, &logical(&x), &logical(&g));
            assert_activation::<R>(op, &got, &want, &format!("{op:?} backward of views"));
        }
    }

    #[should_panic(expected = "ReLU backward: the output holds 4 values, the gradient 5")]
    fn a_backward_of_other_lengths_is_refused<R>() {
        let saved = upload::<R>(&[1.0; 4], &[4]);
        launch_backward(Activation::Relu, &saved, upload::<R>(&[1.0; 5], &[5]));
    }
}
