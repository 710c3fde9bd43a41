//! Transposed convolutions over a grid of stride, dilation, padding and `padding_out` (1 to 3
//! spatial dims, output and both gradients) under exact products (`fp32`) against Burn's own
//! ops, on ndarray (host path) and on the CubeCL runtime `EMBER_TEST_RUNTIME` selects (kernel
//! path; wgpu by default). `padding_out ≥ stride` (allowed while it is below the dilation) once
//! gave wrong shapes on ndarray and wrong values on wgpu.

use burn::backend::{Autodiff, NdArray};
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::module::{conv_transpose1d, conv_transpose2d, conv_transpose3d};
use burn::tensor::ops::ConvTransposeOptions;
use burn_approx_mul::{ApproxDevice, ApproxMul, Multiplier};
use cubecl_kernels::testing::{TestBackend, leaf};

use crate::decorator::{Record, compare};

/// Every (stride, dilation, padding, padding_out) Burn accepts with `padding_out` below
/// `max(stride, dilation)`, for strides and dilations 1..=3 and paddings 0..=1.
fn grid() -> Vec<(usize, usize, usize, usize)> {
    let mut out = Vec::new();
    for stride in 1..=3 {
        for dilation in 1..=3 {
            for padding in 0..=1 {
                for padding_out in 0..stride.max(dilation) {
                    out.push((stride, dilation, padding, padding_out));
                }
            }
        }
    }
    out
}

fn run<B: AutodiffBackend>(device: &B::Device) -> Record {
    let mut out = Vec::new();
    let mut record =
        |name: &str, t: TensorData| out.push((name.to_string(), t.to_vec::<f32>().unwrap()));
    macro_rules! case {
        ($($case:tt)*) => {
            cubecl_kernels::record_case!(record, device, B, $($case)*)
        };
    }
    for (i, (s, d, p, po)) in grid().into_iter().enumerate() {
        let seed = 10 * i as u64;
        let (x, w) = (
            leaf::<B, 3>([2, 4, 5], seed, device),
            leaf::<B, 3>([4, 3, 3], seed + 1, device),
        );
        let o = ConvTransposeOptions::new([s], [p], [po], [d], 2);
        case!(
            format!("1d s{s} d{d} p{p} po{po}"),
            [x, w],
            conv_transpose1d(x.clone(), w.clone(), None, o)
        );
        let (x, w) = (
            leaf::<B, 4>([1, 2, 3, 4], seed + 2, device),
            leaf::<B, 4>([2, 2, 2, 3], seed + 3, device),
        );
        let o = ConvTransposeOptions::new([s, 1], [p, 0], [po, 0], [d, 1], 1);
        case!(
            format!("2d s{s} d{d} p{p} po{po}"),
            [x, w],
            conv_transpose2d(x.clone(), w.clone(), None, o)
        );
    }
    // 3-d: the reported configuration (stride 1, dilation 2, padding 1, padding_out 1) on every
    // axis, and mixed axes.
    for (i, (s, d, p, po)) in [
        ([1, 1, 1], [2, 2, 2], [1, 1, 1], [1, 1, 1]),
        ([2, 1, 3], [1, 3, 2], [0, 1, 1], [1, 2, 1]),
    ]
    .into_iter()
    .enumerate()
    {
        let seed = 1000 + 10 * i as u64;
        let (x, w) = (
            leaf::<B, 5>([1, 2, 3, 2, 3], seed, device),
            leaf::<B, 5>([2, 2, 2, 2, 2], seed + 1, device),
        );
        let o = ConvTransposeOptions::new(s, p, po, d, 1);
        case!(
            format!("3d {i}"),
            [x, w],
            conv_transpose3d(x.clone(), w.clone(), None, o)
        );
    }
    out
}

cubecl_kernels::runtime_test! {
    fn transposed_convolutions_match_burn_over_the_whole_grid<R>() {
        let fp32 = || Multiplier::parse("fp32").unwrap();
        let plain = run::<Autodiff<NdArray>>(&Default::default());
        let device = ApproxDevice::<NdArray>::new(Default::default(), fp32());
        compare(
            &run::<Autodiff<ApproxMul<NdArray>>>(&device),
            &plain,
            1e-5,
            "ndarray fp32",
        );
        let device = ApproxDevice::<TestBackend<R>>::new(Default::default(), fp32());
        compare(
            &run::<Autodiff<ApproxMul<TestBackend<R>>>>(&device),
            &plain,
            1e-5,
            &format!("{} fp32", R::NAME),
        );
    }
}
