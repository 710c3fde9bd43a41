//! Burn's element-wise arithmetic on the GEMM routes of ndarray (Ember's host loops) equals
//! burn-ndarray's bit for bit: batch norm in training mode and ReLU, forward and every
//! gradient, broadcasts in both directions, permuted operands and reshapes of strided views,
//! with NaN and infinities in the data, and a convolution's bias gradient (a sum of the swapped
//! and reshaped output gradient); ReLU, GELU, sigmoid and tanh (one host pass each way for
//! sigmoid and GELU, one forward for tanh, shared out over rayon's threads on a long tensor),
//! forward and backward, sigmoid also at NaN, the infinities and past `exp`'s range. On the
//! CubeCL runtime `EMBER_TEST_RUNTIME` selects, ReLU, GELU and sigmoid, forward and backward
//! (one kernel each on the GEMM routes), in place and not, equal Burn's composites: ReLU and
//! GELU bit for bit (within 10⁻⁶ where the runtime contracts multiply-adds), sigmoid within
//! 10⁻⁶ of the largest value. Divisions by a scalar (one, which the GEMM routes answer with the tensor itself, and
//! others) and a batch norm's running statistics equal the plain backend's on both.

use burn::backend::{Autodiff, NdArray};
use burn::module::Module;
use burn::nn::BatchNormConfig;
use burn::tensor::activation::{gelu, relu, sigmoid, tanh};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, Tensor, TensorData};
use burn_approx_mul::{ApproxDevice, ApproxMul, ConvRoute, Multiplier};
use cubecl_kernels::testing::TestBackend;

/// Values, then every gradient, of the element-wise ops batch norm and ReLU are made of.
fn run<B: AutodiffBackend>(device: &B::Device) -> Vec<Vec<f32>> {
    let _rng = crate::seeded_rng();
    B::seed(device, 11);
    let mut out = Vec::new();
    let values = |t: burn::tensor::TensorData| t.to_vec::<f32>().unwrap();

    // batch norm (swap_dims + reshape of a strided view, per-channel broadcasts) and ReLU
    let bn = BatchNormConfig::new(5).init::<B>(device);
    let x =
        Tensor::<B, 4>::random([3, 5, 6, 7], Distribution::Normal(0.5, 2.0), device).require_grad();
    let y = relu(bn.forward(x.clone()));
    // broadcasts in both directions and a permuted operand
    let c = Tensor::<B, 4>::random([1, 5, 1, 1], Distribution::Default, device).require_grad();
    let row = Tensor::<B, 4>::random([3, 1, 1, 7], Distribution::Default, device).require_grad();
    let z =
        (c.clone() - y.clone()) / (row.clone() + 2.0) * y.clone().swap_dims(0, 1).swap_dims(0, 1);
    let z = z.clone() + z.swap_dims(2, 3).reshape([3, 5, 6, 7]);
    let w = Tensor::<B, 4>::random([3, 5, 6, 7], Distribution::Default, device);
    let grads = (z.clone() * w).sum().backward();
    out.push(values(y.into_data()));
    out.push(values(z.into_data()));
    for t in [x, c, row] {
        out.push(values(t.grad(&grads).expect("a gradient").into_data()));
    }
    let mut params = Vec::new();
    bn.visit(&mut ParamGrads {
        grads: &grads,
        out: &mut params,
    });
    out.extend(params);

    // NaN and infinities through ReLU's backward and the broadcasts
    let special = TensorData::new(
        vec![
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            0.0,
            1.5,
            -2.5,
            3.0,
        ],
        [1, 2, 2, 2],
    );
    let s = Tensor::<B, 4>::from_data(special, device).require_grad();
    let y = relu(s.clone()) * Tensor::<B, 4>::from_floats([[[[2.0]], [[-1.0]]]], device);
    let grads = y.clone().sum().backward();
    out.push(values(y.into_data()));
    out.push(values(s.grad(&grads).expect("a gradient").into_data()));
    out
}

/// Divisions by a scalar (by one, which the GEMM routes skip, and by two) of special values,
/// and a batch norm's running statistics after two training steps (Burn's `RunningState`
/// divides them by its count of threads, one).
fn scalar_run<B: AutodiffBackend>(device: &B::Device) -> Vec<Vec<f32>> {
    let values = |t: TensorData| t.to_vec::<f32>().unwrap();
    let x = Tensor::<B, 1>::from_data(
        TensorData::new(cubecl_kernels::testing::with_specials(12, 5, true), [12]),
        device,
    );
    let mut out = vec![
        values(x.clone().div_scalar(1.0).into_data()),
        values(x.clone().div_scalar(1).into_data()),
        values(x.div_scalar(2.0).into_data()),
    ];
    let _rng = crate::seeded_rng();
    B::seed(device, 3);
    let bn = BatchNormConfig::new(3).init::<B>(device);
    for _ in 0..2 {
        let x = Tensor::<B, 3>::random([4, 3, 5], Distribution::Normal(1.0, 2.0), device);
        out.push(values(bn.forward(x).into_data()));
    }
    out.push(values(bn.running_mean.value_sync().into_data()));
    out.push(values(bn.running_var.value_sync().into_data()));
    out
}

struct ParamGrads<'a, B: AutodiffBackend> {
    grads: &'a B::Gradients,
    out: &'a mut Vec<Vec<f32>>,
}

impl<B: AutodiffBackend> burn::module::ModuleVisitor<B> for ParamGrads<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<B, D>>) {
        if let Some(g) = param.val().grad(self.grads) {
            self.out.push(g.into_data().to_vec::<f32>().unwrap());
        }
    }
}

/// The values' bits, every NaN as one: IEEE 754 leaves a NaN's sign and payload to the
/// implementation, and CUDA's kernels give `0x7fc0_0000` where Burn's composite on the same
/// device gives `0x7fff_ffff` (`testing::assert_matches_host` takes NaNs alike too).
fn bits(runs: &[Vec<f32>]) -> Vec<Vec<u32>> {
    runs.iter()
        .map(|v| {
            v.iter()
                .map(|x| if x.is_nan() { f32::NAN } else { *x }.to_bits())
                .collect()
        })
        .collect()
}

#[test]
fn element_wise_ops_on_the_gemm_routes_equal_burn_ndarray_bit_for_bit() {
    let plain = run::<Autodiff<NdArray>>(&Default::default());
    assert_eq!(plain.len(), 9);
    for route in [ConvRoute::Gemm, ConvRoute::Im2col, ConvRoute::Burn] {
        for mul in [Multiplier::native(), Multiplier::parse("afm16").unwrap()] {
            let device = ApproxDevice::<NdArray>::new(Default::default(), mul.with_conv(route));
            let got = run::<Autodiff<ApproxMul<NdArray>>>(&device);
            assert_eq!(bits(&got), bits(&plain), "{route}");
        }
    }
}

/// ReLU's, GELU's, sigmoid's and tanh's outputs and input gradients (sixteen tensors each): packs of 4
/// and single values, special values (NaN and infinities through ReLU only), an input the
/// kernel overwrites (held by nothing else), one it must not (held twice), a strided view.
fn activation_run<B: AutodiffBackend>(device: &B::Device) -> Vec<Vec<f32>> {
    let values = |t: TensorData| t.to_vec::<f32>().unwrap();
    let mut out = Vec::new();
    for (act, finite) in [
        (relu as fn(Tensor<B, 2>) -> Tensor<B, 2>, false),
        (gelu, true),
        (sigmoid, true),
        (tanh, true),
    ] {
        // the last shape past the host passes' split over rayon's threads
        for (rows, cols) in [(4, 8), (5, 7), (1, 1), (64, 129)] {
            let n = rows * cols;
            let v = cubecl_kernels::testing::with_specials(n, n as u64, !finite);
            let x =
                Tensor::<B, 2>::from_data(TensorData::new(v, [rows, cols]), device).require_grad();
            let w = Tensor::<B, 2>::from_data(
                TensorData::new(cubecl_kernels::testing::uniform(n, 7), [rows, cols]),
                device,
            );
            // `x · 2` is held by the activation alone (in place); `x` by it and the product
            let a = act(x.clone() * 2.0);
            let b = act(x.clone());
            let c = act(x.clone().transpose()).transpose();
            let z = (a.clone() * w.clone() + b.clone() * x.clone() + c.clone() * w).sum();
            let grads = z.backward();
            out.extend([a, b, c].map(|t| values(t.into_data())));
            out.push(values(x.grad(&grads).expect("a gradient").into_data()));
        }
    }
    out
}

/// Sigmoid's output and input gradient at NaN, the infinities, signed zeros, values past
/// `exp`'s range and a tiny one.
fn sigmoid_specials_run<B: AutodiffBackend>(device: &B::Device) -> Vec<Vec<f32>> {
    let v = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        100.0,
        -100.0,
        88.7,
        -88.7,
        1e-30,
    ];
    let x = Tensor::<B, 1>::from_floats(v, device).require_grad();
    let w = Tensor::<B, 1>::from_floats(
        [1.5, -2.0, 0.5, 3.0, 1.0, -1.0, 2.0, 0.25, 4.0, 1.0],
        device,
    );
    let y = sigmoid(x.clone());
    let grads = (y.clone() * w).sum().backward();
    let grad = x.grad(&grads).expect("a gradient");
    [y.into_data(), grad.into_data()]
        .map(|t| t.to_vec::<f32>().unwrap())
        .to_vec()
}

#[test]
fn activations_on_the_gemm_routes_equal_burn_ndarray_bit_for_bit() {
    let plain = activation_run::<Autodiff<NdArray>>(&Default::default());
    let specials = sigmoid_specials_run::<Autodiff<NdArray>>(&Default::default());
    assert_eq!(plain.len(), 64);
    assert!(specials[0][0].is_nan() && specials[0][1..3] == [1.0, 0.0]);
    for route in [ConvRoute::Gemm, ConvRoute::Im2col, ConvRoute::Burn] {
        let mul = Multiplier::native().with_conv(route);
        let device = ApproxDevice::<NdArray>::new(Default::default(), mul);
        let got = activation_run::<Autodiff<ApproxMul<NdArray>>>(&device);
        assert_eq!(bits(&got), bits(&plain), "{route}");
        let got = sigmoid_specials_run::<Autodiff<ApproxMul<NdArray>>>(&device);
        assert_eq!(
            bits(&got),
            bits(&specials),
            "sigmoid's special values, {route}"
        );
    }
}

#[test]
fn divisions_by_a_scalar_on_the_gemm_routes_equal_burn_ndarray_bit_for_bit() {
    let plain = scalar_run::<Autodiff<NdArray>>(&Default::default());
    assert_eq!(plain.len(), 7);
    for route in [ConvRoute::Gemm, ConvRoute::Burn] {
        let device =
            ApproxDevice::<NdArray>::new(Default::default(), Multiplier::native().with_conv(route));
        let got = scalar_run::<Autodiff<ApproxMul<NdArray>>>(&device);
        assert_eq!(bits(&got), bits(&plain), "{route}");
    }
}

/// The bias gradient of two convolutions (LeNet-5's shapes, batch 3) under a loss linear in
/// their outputs: the output gradient, and so the bias gradient, is the same on every route.
fn bias_grads<B: AutodiffBackend>(device: &B::Device) -> Vec<Vec<f32>> {
    use burn::tensor::module::conv2d;
    use burn::tensor::ops::ConvOptions;
    let mut out = Vec::new();
    for ([n, c, side], [co, k, pad]) in [([3, 1, 28], [6, 5, 2]), ([3, 6, 14], [16, 5, 0])] {
        let data = |len: usize, seed: u64, shape: Vec<usize>| {
            TensorData::new(cubecl_kernels::testing::uniform(len, seed), shape)
        };
        let x =
            Tensor::<B, 4>::from_data(data(n * c * side * side, 1, vec![n, c, side, side]), device);
        let w = Tensor::<B, 4>::from_data(data(co * c * k * k, 2, vec![co, c, k, k]), device);
        let b = Tensor::<B, 1>::from_data(data(co, 3, vec![co]), device).require_grad();
        let options = ConvOptions::new([1, 1], [pad, pad], [1, 1], 1);
        let y = conv2d(x, w, Some(b.clone()), options);
        let dy = Tensor::<B, 4>::from_data(
            TensorData::new(
                cubecl_kernels::testing::with_specials(y.shape().num_elements(), 4, false),
                y.shape(),
            ),
            device,
        );
        let grads = (y * dy).sum().backward();
        out.push(
            b.grad(&grads)
                .expect("a gradient")
                .into_data()
                .to_vec::<f32>()
                .unwrap(),
        );
    }
    out
}

#[test]
fn convolution_bias_gradients_on_the_gemm_routes_equal_burn_ndarray_bit_for_bit() {
    let plain = bias_grads::<Autodiff<NdArray>>(&Default::default());
    assert_eq!(plain.iter().map(Vec::len).collect::<Vec<_>>(), [6, 16]);
    for route in [ConvRoute::Gemm, ConvRoute::Im2col, ConvRoute::Burn] {
        let device =
            ApproxDevice::<NdArray>::new(Default::default(), Multiplier::native().with_conv(route));
        let got = bias_grads::<Autodiff<ApproxMul<NdArray>>>(&device);
        assert_eq!(bits(&got), bits(&plain), "{route}");
    }
}

cubecl_kernels::runtime_test! {
    fn divisions_by_a_scalar_on_the_gemm_routes_equal_the_runtimes_bit_for_bit<R>() {
        let plain = scalar_run::<Autodiff<TestBackend<R>>>(&Default::default());
        for route in [ConvRoute::Gemm, ConvRoute::Burn] {
            let mul = Multiplier::native().with_conv(route);
            let device = ApproxDevice::<TestBackend<R>>::new(Default::default(), mul);
            let got = scalar_run::<Autodiff<ApproxMul<TestBackend<R>>>>(&device);
            assert_eq!(bits(&got), bits(&plain), "{route}");
        }
    }

    fn activations_on_the_gemm_routes_equal_burns_composites_bit_for_bit<R>() {
        let plain = activation_run::<Autodiff<TestBackend<R>>>(&Default::default());
        assert_eq!(plain.len(), 64);
        for route in [ConvRoute::Gemm, ConvRoute::Burn] {
            let mul = Multiplier::native().with_conv(route);
            let device = ApproxDevice::<TestBackend<R>>::new(Default::default(), mul);
            let got = activation_run::<Autodiff<ApproxMul<TestBackend<R>>>>(&device);
            // ReLU's sixteen tensors, then GELU's, sigmoid's and tanh's
            assert_eq!(bits(&got[..16]), bits(&plain[..16]), "ReLU, {route}");
            let (gelu, want) = (&got[16..32], &plain[16..32]);
            match R::CONTRACTS_MUL_ADD {
                // CUDA contracts GELU's multiply-adds inside the one kernel
                true => cubecl_kernels::testing::assert_all_close(gelu, want, 1e-6, "GELU"),
                false => assert_eq!(bits(gelu), bits(want), "GELU, {route}"),
            }
            // the runtime's shader compiler rewrites sigmoid's chain of `exp` and `ln` inside
            // one kernel (lavapipe: up to 5 ulps from the composite's launches)
            let (sigmoid, want) = (&got[32..48], &plain[32..48]);
            cubecl_kernels::testing::assert_all_close(sigmoid, want, 1e-6, "sigmoid");
            // tanh is the runtime's own kernel on every route
            assert_eq!(bits(&got[48..]), bits(&plain[48..]), "tanh, {route}");
        }
    }
}

/// Zero and empty tensors of both float widths (an f32 one is a zeroed allocation on the GEMM
/// routes of ndarray, an f64 one the inner backend's), and the input gradient of a sequence of
/// slices (autodiff's backward of each slice starts from a zero tensor of the input's size).
fn zeros_run<B: AutodiffBackend>(device: &B::Device) -> Vec<Vec<f32>> {
    use burn::tensor::DType;
    let mut out = Vec::new();
    for dtype in [DType::F32, DType::F64] {
        let zeros = Tensor::<B, 3>::zeros([2, 3, 5], (device, dtype));
        let empty = Tensor::<B, 3>::empty([2, 3, 5], (device, dtype));
        for t in [zeros, empty] {
            assert_eq!((t.dtype(), t.dims()), (dtype, [2, 3, 5]));
            out.push(t.cast(DType::F32).into_data().to_vec::<f32>().unwrap());
        }
    }
    let _rng = crate::seeded_rng();
    B::seed(device, 5);
    let x = Tensor::<B, 3>::random([4, 6, 3], Distribution::Default, device).require_grad();
    let steps: Vec<_> = (0..6)
        .map(|t| x.clone().slice([0..4, t..t + 1, 0..3]) * (t as f32 + 0.5))
        .collect();
    let grads = Tensor::cat(steps, 1).sum().backward();
    out.push(
        x.grad(&grads)
            .expect("a gradient")
            .into_data()
            .to_vec()
            .unwrap(),
    );
    out
}

#[test]
fn zero_tensors_and_slice_gradients_on_every_route_equal_burn_ndarray() {
    let plain = zeros_run::<Autodiff<NdArray>>(&Default::default());
    assert_eq!(plain.len(), 5);
    assert!(plain[..4].iter().flatten().all(|v| v.to_bits() == 0));
    for route in [ConvRoute::Gemm, ConvRoute::Im2col, ConvRoute::Burn] {
        let device =
            ApproxDevice::<NdArray>::new(Default::default(), Multiplier::native().with_conv(route));
        let got = zeros_run::<Autodiff<ApproxMul<NdArray>>>(&device);
        assert_eq!(bits(&got), bits(&plain), "{route}");
    }
}
