//! The softmax kernels against their host implementation on the runtime `EMBER_TEST_RUNTIME`
//! selects, within 2·10⁻⁷ (outputs in [0, 1]; the runtime's `exp` rounds as it does): rows
//! shorter than a cube's units and rows of several values a unit, more rows than 65,535, no
//! rows, a large shift, a NaN in one row, views; and what `softmax::ops` takes.

use crate::broadcast::{poison, read, upload};
use crate::{Cube, floats};
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{DType, TensorData, TensorMetadata};
use cubecl_kernels::softmax::{launch_softmax, launch_softmax_backward, ops, reference};
use cubecl_kernels::testing::{TestBackend, TestRuntime, uniform};

/// `(rows, d)`: DeiT-Ti's attention rows (65), fewer values than units, a row of several
/// values a unit, one value, more rows than 65,535, no rows.
const SHAPES: &[(usize, usize)] = &[(6, 65), (3, 5), (2, 1000), (4, 1), (66_000, 2), (0, 7)];

/// Equal within 2·10⁻⁷, NaN where the host has NaN.
fn assert_near(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= 2e-7 * w.abs().max(1.0);
        assert!(ok, "{what}: value {i} is {g}, the host {w}");
    }
}

fn scores(rows: usize, d: usize, seed: u64) -> Vec<f32> {
    uniform(rows * d, seed).iter().map(|v| v * 8.0).collect()
}

fn forward_matches<R: TestRuntime>(x: Cube<R>, host_x: &[f32], d: usize, what: &str) {
    let n = host_x.len();
    poison::<R>(&[n]);
    assert_near(
        &read(launch_softmax(&x, d)),
        &reference::softmax(host_x, d),
        what,
    );
}

cubecl_kernels::runtime_test! {
    fn forwards_and_backwards_equal_the_host<R>() {
        for &(rows, d) in SHAPES {
            let mut x = scores(rows, d, 1);
            if rows > 1 {
                // a large shift in row 0, a NaN in row 1
                x[..d].iter_mut().for_each(|v| *v += 1000.0);
                x[d] = f32::NAN;
            }
            let what = format!("softmax of {rows} × {d}");
            forward_matches::<R>(upload::<R>(&x, &[rows, d]), &x, d, &what);
            let x = scores(rows, d, 2);
            let y = reference::softmax(&x, d);
            let dy = uniform(rows * d, 3);
            poison::<R>(&[rows * d]);
            let got = launch_softmax_backward(&upload::<R>(&y, &[rows, d]), &upload::<R>(&dy, &[rows, d]), d);
            assert_near(&read(got), &reference::softmax_backward(&y, &dy, d), &format!("{what}: backward"));
        }
    }

    fn views_are_read_in_logical_order<R>() {
        // [5, 3] stored, swapped to [3, 5]: rows of 5 in logical order
        let stored = scores(5, 3, 4);
        let view = <TestBackend<R> as FloatTensorOps<TestBackend<R>>>::float_swap_dims(
            upload::<R>(&stored, &[5, 3]),
            0,
            1,
        );
        let logical: Vec<f32> = (0..15).map(|k| stored[(k % 5) * 3 + k / 5]).collect();
        forward_matches::<R>(view, &logical, 5, "softmax of a view");
    }

    fn the_ops_take_f32_along_the_last_axis<R>() {
        type B<R> = TestBackend<R>;
        let x = upload::<R>(&scores(2, 3, 5), &[2, 3]);
        assert!(ops::takes::<B<R>>(&x, 1));
        assert!(!ops::takes::<B<R>>(&x, 0), "not the last axis");
        assert!(!ops::takes::<B<R>>(&upload::<R>(&[], &[2, 0]), 1), "an empty last axis");
        let wide = B::<R>::float_from_data(TensorData::new(vec![1f64; 6], [2, 3]), &Default::default());
        assert_eq!(wide.dtype(), DType::F64);
        assert!(!ops::takes::<B<R>>(&wide, 1), "f64");
        let y = ops::softmax::<B<R>>(x);
        assert_near(&floats::<R, 2>(y), &reference::softmax(&scores(2, 3, 5), 3), "ops");
    }
}
