//! The activation kernels against their host reference on the runtime `EMBER_TEST_RUNTIME`
//! selects: ReLU bit for bit on every runtime (it only compares and chooses), GELU and sigmoid
//! within the rounding of the runtime's `exp`, `ln`, `erf`, `tanh` and `pow`; lengths that take packs of 4 and
//! lengths that do not, special values, the in-place and the out-of-place launch, a strided
//! view, an empty tensor; what `activation::ops` hands back (f64, operands of other shapes, a
//! host backend). The pool is poisoned before each out-of-place launch (a value the
//! kernel fails to write reads NaN).

use crate::broadcast::{poison, read, upload};
use crate::{Cube, floats};
use burn::backend::NdArray;
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{DType, TensorData, TensorMetadata};
use cubecl_kernels::activation::{Activation, launch_backward, launch_forward, ops, reference};
use cubecl_kernels::testing::{TestBackend, TestRuntime, assert_matches_host, with_specials};

/// Values of `n` in [-4, 4) with the special ones first (NaN and ±∞ for ReLU only).
fn values(op: Activation, n: usize, seed: u64) -> Vec<f32> {
    with_specials(n, seed, op == Activation::Relu)
}

/// The host's forward of `op`.
fn forward(op: Activation, x: &[f32]) -> Vec<f32> {
    match op {
        Activation::Relu => reference::relu(x),
        Activation::Gelu => reference::gelu(x),
        Activation::Sigmoid => reference::sigmoid(x),
    }
}

/// The host's backward of `op` from what it reads and the gradient.
fn backward(op: Activation, saved: &[f32], g: &[f32]) -> Vec<f32> {
    match op {
        Activation::Relu => reference::relu_backward(saved, g),
        Activation::Gelu => reference::gelu_backward(saved, g),
        Activation::Sigmoid => reference::sigmoid_backward(saved, g),
    }
}

/// ReLU bit for bit; GELU and sigmoid within 2·10⁻⁶ of the largest value (the runtime's
/// transcendental functions).
fn assert_activation<R: TestRuntime>(op: Activation, got: &[f32], want: &[f32], what: &str) {
    match op {
        Activation::Relu => assert_matches_host::<R>(got, want, what),
        Activation::Gelu | Activation::Sigmoid => {
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

/// Every activation.
const ALL: [Activation; 3] = [Activation::Relu, Activation::Gelu, Activation::Sigmoid];

/// Lengths in packs of 4 and not, one value, none.
const LENGTHS: &[usize] = &[1024, 1027, 12, 1, 0];

cubecl_kernels::runtime_test! {
    fn forwards_equal_the_host_in_place_and_not<R>() {
        for op in ALL {
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
        for op in ALL {
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
        for op in ALL {
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

    fn the_ops_hand_back_what_the_kernels_do_not_take<R>() {
        let device = Default::default();
        // an f32 tensor in CubeCL memory: taken
        let x = values(Activation::Gelu, 8, 6);
        let got = ops::forward::<TestBackend<R>>(Activation::Gelu, upload::<R>(&x, &[8]));
        let got = read(got.unwrap_or_else(|_| panic!("an f32 tensor was declined")));
        assert_activation::<R>(Activation::Gelu, &got, &forward(Activation::Gelu, &x), "taken");
        // f64: handed back as it was (uploaded, never launched on)
        let wide: Vec<f64> = (0..8).map(|i| i as f64 - 3.5).collect();
        let t = TestBackend::<R>::float_from_data(TensorData::new(wide.clone(), [2, 4]), &device);
        let back = ops::forward::<TestBackend<R>>(Activation::Relu, t)
            .expect_err("an f64 tensor is declined");
        assert_eq!(back.dtype(), DType::F64);
        let back = burn::tensor::Tensor::<TestBackend<R>, 2>::from_primitive(
            burn::tensor::TensorPrimitive::Float(back),
        );
        assert_eq!(back.into_data().to_vec::<f64>().unwrap(), wide);
        // a backward whose operands differ in shape (as a broadcast would): both back
        let (s, g) = (values(Activation::Relu, 4, 7), values(Activation::Relu, 16, 8));
        let (s_back, g_back) = ops::backward::<TestBackend<R>>(
            Activation::Relu,
            upload::<R>(&s, &[4, 1]),
            upload::<R>(&g, &[4, 4]),
        )
        .expect_err("operands of other shapes are declined");
        assert_matches_host::<R>(&floats::<R, 2>(s_back), &s, "the saved operand");
        assert_matches_host::<R>(&floats::<R, 2>(g_back), &g, "the gradient");
        // a host backend: handed back
        let host = NdArray::<f32>::float_from_data(TensorData::new(x.clone(), [8]), &Default::default());
        assert!(ops::forward::<NdArray<f32>>(Activation::Relu, host).is_err());
    }
}
