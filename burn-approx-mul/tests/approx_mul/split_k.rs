//! The native weight-gradient products split along their sum (`ops::split_k`): every split
//! equals an f64 sum within 1e-5 of the largest value (Burn's matmul on a runtime whose matmul
//! is TF32, CUDA: within its dense tolerance), in both layouts, on the CubeCL runtime
//! `EMBER_TEST_RUNTIME` selects (kernel path; wgpu by default) and on ndarray, where
//! `Split::Auto` is the one product bit for bit. (Which runtimes `Split::Auto` splits on is
//! `split_k::chunks`'s unit test.) A convolution's native weight gradient in runs of whole
//! samples (`ops::conv::native_weight_grad`, chunked im2col columns) equals its unsplit one.
//! Both also run their matmuls on cubek kernels chosen by name (`MatmulKernel`).

use burn::backend::NdArray;
use burn::tensor::ops::ConvOptions;
use burn::tensor::{Tensor, TensorPrimitive};
use burn_approx_mul::ops::conv::{Geometry, native_weight_grad};
use burn_approx_mul::ops::split_k::{Layout, Split, weight_product};
use cubecl_kernels::decorator::KernelBackend;
use cubecl_kernels::matmul::MatmulKernel;
use cubecl_kernels::testing::{TestBackend, lcg_data};

fn tensor<B: KernelBackend>(shape: [usize; 3], seed: u64, device: &B::Device) -> Tensor<B, 3> {
    Tensor::from_data(lcg_data(&shape, seed), device)
}

fn product<B: KernelBackend>(
    layout: Layout,
    a: &Tensor<B, 3>,
    b: &Tensor<B, 3>,
    split: Split,
    kernel: MatmulKernel,
) -> Vec<f32> {
    let prim = |t: &Tensor<B, 3>| match layout {
        Layout::Inner => t.clone().into_primitive().tensor(),
        // [1, k, m] as the 2-d rows a linear layer's weight gradient takes
        Layout::Outer => {
            let [_, k, m] = t.dims();
            t.clone().reshape([k, m]).into_primitive().tensor()
        }
    };
    let out = weight_product::<B>(layout, prim(a), prim(b), split, kernel);
    Tensor::<B, 3>::from_primitive(TensorPrimitive::Float(out))
        .into_data()
        .to_vec::<f32>()
        .unwrap()
}

/// `Σ_k` in f64: `a: [G, m, k]`, `b: [G, n, k]` (inner) or `a: [1, k, m]`, `b: [1, k, n]`
/// (outer), as `[G, m, n]`.
fn reference(layout: Layout, a: &[f32], b: &[f32], [g, m, n, k]: [usize; 4]) -> Vec<f32> {
    let mut out = vec![0f32; g * m * n];
    for gi in 0..g {
        for i in 0..m {
            for j in 0..n {
                let sum: f64 = (0..k)
                    .map(|t| {
                        let (x, y) = match layout {
                            Layout::Inner => (a[(gi * m + i) * k + t], b[(gi * n + j) * k + t]),
                            Layout::Outer => (a[t * m + i], b[t * n + j]),
                        };
                        x as f64 * y as f64
                    })
                    .sum();
                out[(gi * m + i) * n + j] = sum as f32;
            }
        }
    }
    out
}

/// `got` within `tolerance` of the largest |want| of `want`.
fn close(got: &[f32], want: &[f32], tolerance: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(f32::MIN_POSITIVE, |s, v| s.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tolerance * scale,
            "{what}: value {i} is {g}, want {w}"
        );
    }
}

/// `dense`: the tolerance of products on Burn's matmul (1e-5, or the runtime's TF32 one); the
/// unit kernels' products stay within 1e-5.
fn check<B: KernelBackend>(device: &B::Device, name: &str, host: bool, dense: f32) {
    // [groups, m, n, k] with k = 2^4 · 3 · 5 · 7: 2, 3, 8 and 16 chunks divide it
    for (dims, layout) in [
        ([1, 7, 9, 1680], Layout::Inner),
        ([3, 5, 4, 1680], Layout::Inner),
        ([1, 6, 11, 1680], Layout::Outer),
    ] {
        let [g, m, n, k] = dims;
        let (a, b) = match layout {
            Layout::Inner => (
                tensor::<B>([g, m, k], 1, device),
                tensor::<B>([g, n, k], 2, device),
            ),
            Layout::Outer => (
                tensor::<B>([1, k, m], 1, device),
                tensor::<B>([1, k, n], 2, device),
            ),
        };
        let values = |t: &Tensor<B, 3>| t.clone().into_data().to_vec::<f32>().unwrap();
        let want = reference(layout, &values(&a), &values(&b), dims);
        let burn = MatmulKernel::Burn;
        let one = product::<B>(layout, &a, &b, Split::Chunks(1), burn);
        close(
            &one,
            &want,
            dense,
            &format!("{name} {layout:?} {dims:?} unsplit"),
        );
        let auto = product::<B>(layout, &a, &b, Split::Auto, burn);
        close(
            &auto,
            &want,
            dense,
            &format!("{name} {layout:?} {dims:?} auto"),
        );
        if host {
            assert_eq!(
                auto, one,
                "{name} {layout:?} {dims:?}: the host splits nothing"
            );
        }
        for s in [2, 3, 8, 16] {
            let got = product::<B>(layout, &a, &b, Split::Chunks(s), burn);
            close(
                &got,
                &want,
                dense,
                &format!("{name} {layout:?} {dims:?} in {s} chunks"),
            );
        }
        for kernel in [MatmulKernel::SimpleUnit, MatmulKernel::DoubleUnit] {
            for s in [1, 8] {
                let got = product::<B>(layout, &a, &b, Split::Chunks(s), kernel);
                close(
                    &got,
                    &want,
                    1e-5,
                    &format!("{name} {layout:?} {dims:?} in {s} chunks on {kernel}"),
                );
            }
        }
    }
}

/// The weight gradient of `x: [6, 3, 7, 5]` convolved with a `[4, 3, 3, 3]` kernel at `stride`
/// (padding 1), in `split` runs of samples.
fn conv_weight_grad<B: KernelBackend>(
    stride: usize,
    split: Split,
    kernel: MatmulKernel,
) -> Vec<f32> {
    let device = Default::default();
    let options = ConvOptions::new([stride, stride], [1, 1], [1, 1], 1);
    let (oh, ow) = ((7 + 2 - 3) / stride + 1, (5 + 2 - 3) / stride + 1);
    let x = Tensor::<B, 4>::from_data(lcg_data(&[6, 3, 7, 5], 3), &device);
    let dy = Tensor::<B, 4>::from_data(lcg_data(&[6, 4, oh, ow], 4), &device);
    let dw = native_weight_grad::<B>(
        x.into_primitive().tensor(),
        dy.into_primitive().tensor(),
        &Geometry::conv(&options),
        &burn::tensor::Shape::new([4, 3, 3, 3]),
        split,
        kernel,
    );
    Tensor::<B, 4>::from_primitive(TensorPrimitive::Float(dw))
        .into_data()
        .to_vec::<f32>()
        .unwrap()
}

cubecl_kernels::runtime_test! {
    fn conv_weight_gradients_in_runs_of_samples_equal_the_unsplit_one<R>() {
        let dense = R::dense_tolerance(1e-5);
        for stride in [1, 2] {
            let burn = MatmulKernel::Burn;
            let want = conv_weight_grad::<NdArray>(stride, Split::Auto, burn);
            for runs in [1, 2, 3, 6] {
                let got = conv_weight_grad::<TestBackend<R>>(stride, Split::Chunks(runs), burn);
                close(&got, &want, dense, &format!("{} stride {stride} in {runs} runs", R::NAME));
                let unit = MatmulKernel::DoubleUnit;
                let got = conv_weight_grad::<TestBackend<R>>(stride, Split::Chunks(runs), unit);
                let what = format!("{} stride {stride} in {runs} runs, {unit}", R::NAME);
                close(&got, &want, 1e-5, &what);
            }
            close(
                &conv_weight_grad::<TestBackend<R>>(stride, Split::Auto, burn),
                &want,
                dense,
                &format!("{} stride {stride} auto", R::NAME),
            );
        }
    }
}

cubecl_kernels::runtime_test! {
    fn split_products_equal_the_one_product_in_both_layouts<R>() {
        check::<NdArray>(&Default::default(), "ndarray", true, 1e-5);
        check::<TestBackend<R>>(&Default::default(), R::NAME, false, R::dense_tolerance(1e-5));
    }
}

#[test]
#[should_panic(expected = "11 chunks of a 1680-term sum")]
fn a_split_that_does_not_divide_the_sum_is_refused() {
    let device = Default::default();
    let (a, b) = (
        tensor::<NdArray>([1, 2, 1680], 1, &device),
        tensor::<NdArray>([1, 3, 1680], 2, &device),
    );
    product::<NdArray>(Layout::Inner, &a, &b, Split::Chunks(11), MatmulKernel::Burn);
}
