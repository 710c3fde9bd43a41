//! Sums and means along one axis on each routine `cubecl_kernels::reduce` picks from, against
//! the host's sums in f64; and the routing: the cube routine only where the device is a GPU and
//! the shape has few outputs over a long axis, the backend's own op otherwise.

use crate::{cube, floats};
use cubecl_kernels::reduce::{self, Reduction, Routine};
use cubecl_kernels::testing::{TestBackend, uniform};

/// `x: [a, b, c]` (row-major) summed or averaged along `dim`, in f64, and each output's sum of
/// magnitudes (the scale of its rounding).
fn host(x: &[f32], shape: [usize; 3], dim: usize, reduction: Reduction) -> (Vec<f64>, Vec<f64>) {
    let strides = [shape[1] * shape[2], shape[2], 1];
    let mut out_shape = shape;
    out_shape[dim] = 1;
    let outputs: usize = out_shape.iter().product();
    let (mut sums, mut scale) = (vec![0f64; outputs], vec![0f64; outputs]);
    for (o, (sum, mag)) in sums.iter_mut().zip(scale.iter_mut()).enumerate() {
        let idx = [
            o / (out_shape[1] * out_shape[2]),
            (o / out_shape[2]) % out_shape[1],
            o % out_shape[2],
        ];
        let base: usize = (0..3).map(|d| idx[d] * strides[d]).sum();
        for k in 0..shape[dim] {
            let v = f64::from(x[base + k * strides[dim]]);
            *sum += v;
            *mag += v.abs();
        }
        if reduction == Reduction::Mean {
            *sum /= shape[dim] as f64;
            *mag /= shape[dim] as f64;
        }
    }
    (sums, scale)
}

fn assert_close(got: &[f32], (want, scale): &(Vec<f64>, Vec<f64>), what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, (w, s))) in got.iter().zip(want.iter().zip(scale)).enumerate() {
        assert!(
            (f64::from(*g) - w).abs() <= 1e-5 * s + 1e-30,
            "{what}: output {i} is {g}, the host's {w}"
        );
    }
}

/// Long and short axes, contiguous and strided, few and many outputs.
const CASES: [([usize; 3], usize); 5] = [
    ([1, 3, 5000], 2),
    ([5000, 3, 1], 0),
    ([2, 1500, 4], 1),
    ([64, 2048, 1], 1),
    ([300, 7, 2], 1),
];

cubecl_kernels::runtime_test! {
    fn each_routine_sums_and_averages_as_the_host_does<R>() {
        for (shape, dim) in CASES {
            let x = uniform(shape.iter().product(), 11);
            for reduction in [Reduction::Sum, Reduction::Mean] {
                let want = host(&x, shape, dim, reduction);
                for routine in [Routine::Unit, Routine::Cube] {
                    let got = reduce::reduce_with(cube::<R, 3>(&x, shape), dim, reduction, routine)
                        .unwrap_or_else(|e| panic!("{routine:?} on {shape:?}: {e}"));
                    let mut kept = shape;
                    kept[dim] = 1;
                    assert_eq!(got.meta.shape().as_slice(), kept.as_slice());
                    assert_close(
                        &floats::<R, 3>(got),
                        &want,
                        &format!("{reduction:?} of {shape:?} along {dim} on {routine:?}"),
                    );
                }
            }
        }
    }
}

cubecl_kernels::runtime_test! {
    fn the_routed_reduction_takes_the_cube_routine_only_on_a_gpu<R>() {
        let gpu = cubecl_kernels::runtime::is_gpu(&R::client(&Default::default()));
        // batch norm's statistics at ResNet's first stage (64 channels), at batch 2
        let shape = [64, 2048, 1];
        let x = uniform(shape.iter().product(), 12);
        let routed =
            reduce::reduce_dim_routed::<TestBackend<R>>(cube::<R, 3>(&x, shape), 1, Reduction::Mean);
        match (gpu, routed) {
            (true, Ok(t)) => assert_close(
                &floats::<R, 3>(t),
                &host(&x, shape, 1, Reduction::Mean),
                "routed mean",
            ),
            (false, Err(t)) => assert_eq!(floats::<R, 3>(t), x, "declined: the input handed back"),
            (gpu, Ok(_)) => panic!("routed on a device that is a GPU: {gpu}, expected the backend's op"),
            (gpu, Err(_)) => panic!("declined on a device that is a GPU: {gpu}"),
        }
        // many outputs over a short axis stay with the backend's unit routine everywhere
        let x = uniform(8192 * 8, 13);
        assert!(
            reduce::reduce_dim_routed::<TestBackend<R>>(cube::<R, 3>(&x, [8, 8192, 1]), 0, Reduction::Sum)
                .is_err()
        );
    }
}
