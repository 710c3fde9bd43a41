//! The layer-norm kernels against their host implementation on the runtime
//! `EMBER_TEST_RUNTIME` selects, bit for bit where it rounds as the host does: forwards with
//! and without `β` and backwards over rows shorter than a cube's units and rows of several
//! values a unit, more rows than a grid dimension holds, no rows, and inputs that are views;
//! and what `layer_norm::ops` takes. Outputs are allocated by the launches, so the pool is
//! poisoned before each launch (a value a kernel fails to write reads NaN).

use crate::broadcast::{poison, read, upload};
use crate::{Cube, floats};
use burn::backend::NdArray;
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{DType, TensorData};
use cubecl_kernels::layer_norm::{
    launch_layer_norm, launch_layer_norm_backward, ops, reference, units,
};
use cubecl_kernels::testing::{TestBackend, TestRuntime, assert_matches_host, uniform};

/// `(rows, d)`: fewer values than units (32), DeiT-Ti's width (64 units), a row of several
/// values a unit (256 units), one value, more rows than 65,535, no rows.
const SHAPES: &[(usize, usize)] = &[(3, 5), (9, 192), (2, 1000), (1, 1), (66_000, 2), (0, 7)];

/// `x` with row `r` around `r % 5` (a mean away from zero).
fn input(rows: usize, d: usize, seed: u64) -> Vec<f32> {
    let mut x = uniform(rows * d, seed);
    for (k, v) in x.iter_mut().enumerate() {
        *v = *v * 2.0 + (k / d % 5) as f32;
    }
    x
}

/// The forward's outputs on the device for `x` (`[rows, d]`), against the host's.
fn forward_matches<R: TestRuntime>(x: Cube<R>, host_x: &[f32], d: usize, with_beta: bool) {
    let rows = host_x.len() / d;
    let (gamma, beta) = (uniform(d, 2), uniform(d, 3));
    let beta = with_beta.then_some(beta);
    let want = reference::layer_norm(host_x, &gamma, beta.as_deref(), d, 1e-5);
    let what = format!("layer norm of {rows} × {d}, β {with_beta}");
    let (dg, db) = (
        upload::<R>(&gamma, &[d]),
        beta.map(|b| upload::<R>(&b, &[d])),
    );
    poison::<R>(&[rows * d, rows * d, rows]);
    let got = launch_layer_norm(&x, &dg, db.as_ref(), d, 1e-5);
    assert_matches_host::<R>(&read(got.y), &want.y, &format!("{what}: y"));
    assert_matches_host::<R>(&read(got.xhat), &want.xhat, &format!("{what}: x̂"));
    assert_matches_host::<R>(&read(got.sigma), &want.sigma, &format!("{what}: σ"));
}

cubecl_kernels::runtime_test! {
    fn forwards_equal_the_host_bit_for_bit<R>() {
        for &(rows, d) in SHAPES {
            let x = input(rows, d, 1);
            for with_beta in [true, false] {
                forward_matches::<R>(upload::<R>(&x, &[rows, d]), &x, d, with_beta);
            }
        }
    }

    fn backwards_equal_the_host_bit_for_bit<R>() {
        for &(rows, d) in SHAPES {
            let x = input(rows, d, 4);
            let (gamma, dy) = (uniform(d, 5), uniform(rows * d, 6));
            let f = reference::layer_norm(&x, &gamma, None, d, 1e-5);
            let want = reference::layer_norm_backward(&f.xhat, &f.sigma, &gamma, &dy, d);
            let what = format!("layer norm backward of {rows} × {d}");
            let (dh, ds) = (upload::<R>(&f.xhat, &[rows, d]), upload::<R>(&f.sigma, &[rows]));
            let (dg, ddy) = (upload::<R>(&gamma, &[d]), upload::<R>(&dy, &[rows, d]));
            poison::<R>(&[rows * d, d, d]);
            let (dx, dgamma, dbeta) = launch_layer_norm_backward(&dh, &ds, &dg, &ddy, d);
            assert_matches_host::<R>(&read(dx), &want.0, &format!("{what}: dx"));
            assert_matches_host::<R>(&read(dgamma), &want.1, &format!("{what}: dγ"));
            assert_matches_host::<R>(&read(dbeta), &want.2, &format!("{what}: dβ"));
        }
    }

    fn views_are_read_in_logical_order<R>() {
        // [6, 4] stored, swapped to [4, 6]: rows of 6 in logical order
        let stored = input(6, 4, 7);
        let view = <TestBackend<R> as FloatTensorOps<TestBackend<R>>>::float_swap_dims(
            upload::<R>(&stored, &[6, 4]),
            0,
            1,
        );
        let logical: Vec<f32> = (0..24).map(|k| stored[(k % 6) * 4 + k / 6]).collect();
        forward_matches::<R>(view, &logical, 6, true);
    }

    fn the_ops_take_f32_rows_with_one_gamma_value_a_column<R>() {
        type B<R> = TestBackend<R>;
        let device = Default::default();
        let f32s = |v: &[f32], shape: &[usize]| upload::<R>(v, shape);
        let (x, gamma) = (f32s(&input(2, 3, 8), &[2, 3]), f32s(&uniform(3, 9), &[3]));
        assert!(ops::takes::<B<R>>(&x, &gamma, Some(&gamma)));
        assert!(ops::takes::<B<R>>(&x, &gamma, None));
        // γ or β of another length than the last axis
        let short = f32s(&uniform(2, 10), &[2]);
        assert!(!ops::takes::<B<R>>(&x, &short, None));
        assert!(!ops::takes::<B<R>>(&x, &gamma, Some(&short)));
        // an empty last axis
        let empty = f32s(&[], &[2, 0]);
        assert!(!ops::takes::<B<R>>(&empty, &f32s(&[], &[0]), None));
        // f64 (uploaded, never launched on)
        let wide = B::<R>::float_from_data(TensorData::new(vec![1f64; 6], [2, 3]), &device);
        assert_eq!(burn::tensor::TensorMetadata::dtype(&wide), DType::F64);
        assert!(!ops::takes::<B<R>>(&wide, &gamma, None));
        // through the ops, the kernels' values and shapes
        let out = ops::layer_norm::<B<R>>(x, gamma.clone(), None, 1e-5);
        let want = reference::layer_norm(&input(2, 3, 8), &uniform(3, 9), None, 3, 1e-5);
        assert_matches_host::<R>(&floats::<R, 2>(out.y), &want.y, "ops: y");
        assert_matches_host::<R>(&floats::<R, 1>(out.sigma), &want.sigma, "ops: σ");
    }
}

#[test]
fn the_host_ops_equal_the_reference_with_per_row_and_per_column_shapes() {
    use burn::tensor::{Tensor, TensorMetadata, TensorPrimitive};
    type H = NdArray<f32>;
    let (x, gamma, dy) = (input(4, 6, 11), uniform(6, 12), uniform(24, 13));
    let t = |v: &[f32], shape: &[usize]| {
        H::float_from_data(
            TensorData::new(v.to_vec(), shape.to_vec()),
            &Default::default(),
        )
    };
    let values = |t: burn::tensor::ops::FloatTensor<H>| -> Vec<f32> {
        let n = t.shape().num_elements();
        let flat = H::float_reshape(t, burn::tensor::Shape::new([n]));
        let flat = Tensor::<H, 1>::from_primitive(TensorPrimitive::Float(flat));
        flat.into_data().to_vec().unwrap()
    };
    let out = ops::layer_norm::<H>(t(&x, &[2, 2, 6]), t(&gamma, &[6]), None, 1e-5);
    let want = reference::layer_norm(&x, &gamma, None, 6, 1e-5);
    assert_eq!(out.y.shape().dims::<3>(), [2, 2, 6]);
    assert_eq!(out.sigma.shape().dims::<1>(), [4]);
    assert_eq!(values(out.y), want.y);
    let (dx, dgamma, dbeta) =
        ops::layer_norm_backward::<H>(out.xhat, out.sigma, t(&gamma, &[6]), t(&dy, &[2, 2, 6]));
    let (wdx, wdg, wdb) = reference::layer_norm_backward(&want.xhat, &want.sigma, &gamma, &dy, 6);
    assert_eq!(dx.shape().dims::<3>(), [2, 2, 6]);
    assert_eq!(dgamma.shape().dims::<1>(), [6]);
    assert_eq!((values(dx), values(dgamma), values(dbeta)), (wdx, wdg, wdb));
    assert_eq!(units(6), 32);
}
