//! 2-d max pooling on the GEMM routes of ndarray (Ember's host loops) equals burn-ndarray's bit
//! for bit: outputs, the maxima's indices and the input gradients, for LeNet's and VGG's 2 × 2
//! windows, ResNet's padded 3 × 3 stem pool, overlapping windows (whose gradients add up),
//! dilation and `ceil_mode`, with ties, NaN and infinities in the data; a strided input (which
//! the host loops hand back to burn-ndarray), a backend without autodiff and one with i32
//! indices too. On the CubeCL
//! runtime `EMBER_TEST_RUNTIME` selects, the routes keep the runtime's own pooling.

use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::module::{max_pool2d, max_pool2d_with_indices};
use burn::tensor::{Tensor, TensorData};
use burn_approx_mul::{ApproxDevice, ApproxMul, ConvRoute, Multiplier};
use cubecl_kernels::testing::TestBackend;

/// `(kernel, stride, padding, dilation, ceil_mode)` and an input shape.
type Case = (
    ([usize; 2], [usize; 2], [usize; 2], [usize; 2], bool),
    [usize; 4],
);

const CASES: [Case; 5] = [
    (([2, 2], [2, 2], [0, 0], [1, 1], false), [3, 4, 8, 8]),
    (([3, 3], [2, 2], [1, 1], [1, 1], false), [2, 3, 9, 7]),
    (([3, 3], [1, 1], [1, 1], [1, 1], false), [2, 2, 6, 5]),
    (([2, 3], [1, 2], [1, 1], [2, 1], false), [1, 3, 7, 9]),
    (([2, 2], [2, 2], [0, 0], [1, 1], true), [2, 2, 7, 7]),
];

/// Values with ties (a few levels), NaN and infinities.
fn input(shape: [usize; 4]) -> TensorData {
    let n = shape.iter().product();
    let values = (0..n)
        .map(|i| match i % 29 {
            3 => f32::NAN,
            7 => f32::NEG_INFINITY,
            13 => f32::INFINITY,
            _ => ((i * 7919) % 13) as f32 * 0.5 - 3.0,
        })
        .collect::<Vec<f32>>();
    TensorData::new(values, shape)
}

/// Outputs, indices (as f32) and input gradients of every case, the input as it is and
/// transposed in its plane (a strided view).
fn run<B: AutodiffBackend>(device: &B::Device) -> Vec<Vec<f32>> {
    let values = |t: TensorData| t.convert::<f32>().to_vec::<f32>().unwrap();
    let mut out = Vec::new();
    for ((kernel, stride, padding, dilation, ceil), shape) in CASES {
        for strided in [false, true] {
            let x = Tensor::<B, 4>::from_data(input(shape), device).require_grad();
            let xs = match strided {
                true => x.clone().swap_dims(2, 3),
                false => x.clone(),
            };
            let (y, index) =
                max_pool2d_with_indices(xs.clone(), kernel, stride, padding, dilation, ceil);
            let z = max_pool2d(xs, kernel, stride, padding, dilation, ceil);
            let w = Tensor::<B, 4>::from_data(
                TensorData::new(
                    (0..y.shape().num_elements())
                        .map(|i| (i as f32 * 0.61).sin())
                        .collect(),
                    y.shape(),
                ),
                device,
            );
            let grads = (y.clone() * w.clone() + z.clone() * w * 0.5)
                .sum()
                .backward();
            out.push(values(y.into_data()));
            out.push(values(index.into_data()));
            out.push(values(z.into_data()));
            out.push(values(x.grad(&grads).expect("a gradient").into_data()));
        }
    }
    out
}

/// The pooled values of every case without autodiff (`max_pool2d` alone).
fn infer<B: Backend>(device: &B::Device) -> Vec<Vec<f32>> {
    CASES
        .iter()
        .map(|&((kernel, stride, padding, dilation, ceil), shape)| {
            let x = Tensor::<B, 4>::from_data(input(shape), device);
            max_pool2d(x, kernel, stride, padding, dilation, ceil)
                .into_data()
                .to_vec::<f32>()
                .unwrap()
        })
        .collect()
}

fn bits(runs: &[Vec<f32>]) -> Vec<Vec<u32>> {
    runs.iter()
        .map(|v| v.iter().map(|x| x.to_bits()).collect())
        .collect()
}

#[test]
fn max_pooling_on_the_gemm_routes_equals_burn_ndarray_bit_for_bit() {
    let plain = run::<Autodiff<NdArray>>(&Default::default());
    assert_eq!(plain.len(), CASES.len() * 8);
    // the data holds ties, NaN and infinities, and the overlapping windows add gradients
    assert!(plain.iter().flatten().any(|v| v.is_infinite()));
    let plain_infer = infer::<NdArray>(&Default::default());
    for route in [ConvRoute::Gemm, ConvRoute::Im2col, ConvRoute::Burn] {
        for mul in [Multiplier::native(), Multiplier::parse("afm16").unwrap()] {
            let device = ApproxDevice::<NdArray>::new(Default::default(), mul.with_conv(route));
            let got = run::<Autodiff<ApproxMul<NdArray>>>(&device);
            assert_eq!(bits(&got), bits(&plain), "{route}");
            let got = infer::<ApproxMul<NdArray>>(&device);
            assert_eq!(bits(&got), bits(&plain_infer), "{route}, no autodiff");
        }
    }
    // i32 indices, which the host cannot borrow as i64: read, then the same loops
    let device = ApproxDevice::<NdArray<f32, i32>>::new(Default::default(), Multiplier::native());
    let got = run::<Autodiff<ApproxMul<NdArray<f32, i32>>>>(&device);
    assert_eq!(bits(&got), bits(&plain), "i32 indices");
}

cubecl_kernels::runtime_test! {
    fn max_pooling_on_the_gemm_routes_equals_the_runtimes_bit_for_bit<R>() {
        let plain = run::<Autodiff<TestBackend<R>>>(&Default::default());
        for route in [ConvRoute::Gemm, ConvRoute::Burn] {
            let mul = Multiplier::native().with_conv(route);
            let device = ApproxDevice::<TestBackend<R>>::new(Default::default(), mul);
            let got = run::<Autodiff<ApproxMul<TestBackend<R>>>>(&device);
            assert_eq!(bits(&got), bits(&plain), "{route}");
        }
    }
}
