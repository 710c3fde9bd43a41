//! `Autodiff<ApproxMul<B>>` on ndarray (host path) and on the CubeCL runtime
//! `EMBER_TEST_RUNTIME` selects (kernel path; wgpu by default): native is the inner backend bit
//! for bit; the im2col/GEMM lowering of every convolution and of linear/matmul agrees
//! with Burn's own ops under exact products; approximate products reach the forward pass and both
//! gradients; the kernel and host paths agree.

use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::module::{conv1d, conv2d, conv3d, linear};
use burn::tensor::ops::ConvOptions;
use burn::tensor::{Tensor, TensorData};
use burn_approx_mul::{ApproxDevice, ApproxMul, ConvRoute, MatmulKernel, Multiplier};

use cubecl_kernels::testing::{TestBackend, TestRuntime, lcg_data as data, leaf};

/// Named outputs and gradients of a suite of cases (shared with `transpose.rs`).
pub(crate) use cubecl_kernels::testing::cases::Record;
/// Every contraction Burn has, forward and both gradients.
use cubecl_kernels::testing::cases::contraction_cases as run_cases;

/// Asserts every value of `got` within `rel` of the largest magnitude of its case in `want`.
pub(crate) fn compare(got: &Record, want: &Record, rel: f32, what: &str) {
    assert_eq!(got.len(), want.len());
    for ((name, g), (_, w)) in got.iter().zip(want) {
        assert_eq!(g.len(), w.len(), "{what}: {name}: shape");
        let scale = w.iter().fold(1f32, |m, v| m.max(v.abs()));
        for (i, (a, b)) in g.iter().zip(w).enumerate() {
            assert!(
                (a - b).abs() <= rel * scale,
                "{what}: {name}[{i}]: {a} vs {b}"
            );
        }
    }
}

fn max_rel_diff(got: &Record, want: &Record) -> f32 {
    got.iter()
        .zip(want)
        .map(|((_, g), (_, w))| {
            let scale = w.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
            g.iter()
                .zip(w)
                .fold(0f32, |m, (a, b)| m.max((a - b).abs() / scale))
        })
        .fold(0.0, f32::max)
}

fn on_ndarray(mul: &str) -> Record {
    let device = ApproxDevice::<NdArray>::new(Default::default(), Multiplier::parse(mul).unwrap());
    run_cases::<Autodiff<ApproxMul<NdArray>>>(&device)
}

fn on_cubecl<R: TestRuntime>(mul: &str) -> Record {
    let device =
        ApproxDevice::<TestBackend<R>>::new(Default::default(), Multiplier::parse(mul).unwrap());
    run_cases::<Autodiff<ApproxMul<TestBackend<R>>>>(&device)
}

cubecl_kernels::runtime_test! {
    fn native_is_the_inner_backend_bit_for_bit<R>() {
        let plain = run_cases::<Autodiff<NdArray>>(&Default::default());
        assert_eq!(on_ndarray("native"), plain);
        let plain = run_cases::<Autodiff<TestBackend<R>>>(&Default::default());
        assert_eq!(on_cubecl::<R>("native"), plain);
    }
}

cubecl_kernels::runtime_test! {
    fn lowering_with_exact_products_matches_burns_own_ops<R>() {
        let plain = run_cases::<Autodiff<NdArray>>(&Default::default());
        compare(&on_ndarray("fp32"), &plain, 1e-5, "ndarray fp32");
        compare(
            &on_cubecl::<R>("fp32"),
            &plain,
            1e-5,
            &format!("{} fp32", R::NAME),
        );
    }
}

#[test]
fn approximate_products_reach_forward_and_both_gradients() {
    let plain = run_cases::<Autodiff<NdArray>>(&Default::default());
    let mitchell = on_ndarray("mitchell3");
    // every output and every gradient moves, none by more than Mitchell's worst case (~11 %);
    // bias gradients are sums without multiplies and stay exact
    for ((name, g), (_, w)) in mitchell.iter().zip(&plain) {
        if name.ends_with("dbias") {
            assert_eq!(g, w, "{name}");
            continue;
        }
        let diff = g.iter().zip(w).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        let scale = w.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(diff > 1e-4 * scale, "{name} unchanged by mitchell3");
        assert!(diff < 0.5 * scale, "{name} off by {diff} (scale {scale})");
    }
    let bf16 = on_ndarray("bf16");
    assert!(
        max_rel_diff(&bf16, &plain) < max_rel_diff(&mitchell, &plain),
        "bf16 is closer to FP32 than mitchell3"
    );
}

/// The CubeCL kernels give the host path's values under `mul`. One test per multiplier (MBM's
/// per-product path, Mitchell at full width, AFM32's table, an accurate 3-bit table): each
/// compiles its own kernels, so the test threads compile them side by side.
fn kernel_path_equals_host_path<R: TestRuntime>(mul: &str) {
    compare(&on_cubecl::<R>(mul), &on_ndarray(mul), 1e-5, mul);
}

cubecl_kernels::runtime_test! {
    fn kernel_path_equals_host_path_mbm7<R>() {
        kernel_path_equals_host_path::<R>("mbm7");
    }
    fn kernel_path_equals_host_path_mitchell23<R>() {
        kernel_path_equals_host_path::<R>("mitchell23");
    }
    fn kernel_path_equals_host_path_afm32<R>() {
        kernel_path_equals_host_path::<R>("afm32");
    }
    fn kernel_path_equals_host_path_acc3<R>() {
        kernel_path_equals_host_path::<R>("acc3");
    }
}

#[test]
fn contractions_equal_a_brute_force_reference() {
    let mul = Multiplier::parse("mbm5").unwrap();
    let device = ApproxDevice::<NdArray>::new(Default::default(), mul.clone());
    type B = Autodiff<ApproxMul<NdArray>>;
    let (n, k, m) = (3, 7, 4);
    let x = leaf::<B, 2>([n, k], 30, &device);
    let w = leaf::<B, 2>([k, m], 31, &device);
    let y = linear(x.clone(), w.clone(), None);
    let g = Tensor::<B, 2>::from_data(data(&[n, m], 32), &device);
    let grads = (y.clone() * g.clone()).sum().backward();
    let v = |t: TensorData| t.to_vec::<f32>().unwrap();
    let (xv, wv, gv) = (v(x.to_data()), v(w.to_data()), v(g.to_data()));
    let dot = |pairs: &mut dyn Iterator<Item = (f32, f32)>| {
        pairs.fold(0f32, |acc, (a, b)| acc + mul.multiply(a, b))
    };
    let want_y: Vec<f32> = (0..n * m)
        .map(|o| dot(&mut (0..k).map(|i| (xv[o / m * k + i], wv[i * m + o % m]))))
        .collect();
    let want_dw: Vec<f32> = (0..k * m)
        .map(|o| dot(&mut (0..n).map(|r| (xv[r * k + o / m], gv[r * m + o % m]))))
        .collect();
    let want_dx: Vec<f32> = (0..n * k)
        .map(|o| dot(&mut (0..m).map(|j| (gv[o / k * m + j], wv[(o % k) * m + j]))))
        .collect();
    assert_eq!(v(y.into_data()), want_y, "forward");
    assert_eq!(
        v(w.grad(&grads).unwrap().into_data()),
        want_dw,
        "weight gradient"
    );
    assert_eq!(
        v(x.grad(&grads).unwrap().into_data()),
        want_dx,
        "input gradient"
    );
}

/// A convolution's forward output, weight gradient and input gradient on the host path
/// (`W · cols` and `dy · colsᵀ`, the im2col columns read in place, and `col2im(Wᵀ · dy)` a
/// sample at a time) are the brute-force sums in order, every product through the multiplier,
/// padding contributing `w · 0` and `dy · 0`: under MBM (the
/// per-product path) and under AFM16's table with enough channels for the table expansion
/// (which reads the columns where they lie in the input).
#[test]
fn conv_forward_and_both_gradients_equal_a_brute_force_reference() {
    conv_equals_brute_force("mbm5", [2, 3, 5], [4, 3]);
    conv_equals_brute_force("afm16", [2, 8, 6], [16, 3]);
    // 64 positions a sample: the forward output written as `[B, C_out, L]` by the expansion
    conv_equals_brute_force("afm16", [3, 8, 8], [16, 3]);
}

/// Under AFM16 on the host (the columns read in place from operands kept at the caller's rank),
/// `conv1d` over `[B, C, L]` and `conv3d` over `[B, C, 1, H, W]` give the bits of `conv2d` over
/// the same values with a unit height (depth), forward and both gradients.
#[test]
fn host_convolutions_of_every_rank_give_the_bits_of_conv2d() {
    let device =
        ApproxDevice::<NdArray>::new(Default::default(), Multiplier::parse("afm16").unwrap());
    type B = Autodiff<ApproxMul<NdArray>>;
    let (b, c, o, k) = (3, 8, 16, 3);
    // x: [b, c, h, w] and w: [o, c, kh, k] (seeds 70, 71), the output gradient (seed 72) of
    // shape `[b, o, h, w]`, each reshaped to rank D
    let leaves = |[h, w]: [usize; 2], kh: usize| {
        let x = Tensor::<B, 4>::from_data(data(&[b, c, h, w], 70), &device);
        let wt = Tensor::<B, 4>::from_data(data(&[o, c, kh, k], 71), &device);
        let g = Tensor::<B, 4>::from_data(data(&[b, o, h, w], 72), &device);
        (x, wt, g)
    };
    // the bits of the output and of both gradients of `(y · g).sum()`
    fn bits_of<const D: usize>(
        conv: impl Fn(Tensor<B, D>, Tensor<B, D>) -> Tensor<B, D>,
        [x, wt, g]: [Tensor<B, D>; 3],
    ) -> [Vec<u32>; 3] {
        let (x, wt) = (x.detach().require_grad(), wt.detach().require_grad());
        let y = conv(x.clone(), wt.clone());
        let grads = (y.clone() * g).sum().backward();
        let (dx, dw) = (x.grad(&grads).unwrap(), wt.grad(&grads).unwrap());
        [y.into_data(), dx.into_data(), dw.into_data()].map(|t| {
            let v = t.to_vec::<f32>().unwrap();
            v.iter().map(|v| v.to_bits()).collect()
        })
    }
    let conv2d_of = |hw: [usize; 2], kh: usize| {
        let (x, wt, g) = leaves(hw, kh);
        let opts = ConvOptions::new([1, 1], [kh / 2, 1], [1, 1], 1);
        bits_of(|x, w| conv2d(x, w, None, opts.clone()), [x, wt, g])
    };
    // conv1d over [b, c, 24]: conv2d over [b, c, 1, 24] with a [o, c, 1, k] kernel
    let l = 24;
    let (x, wt, g) = leaves([1, l], 1);
    let rank3 = [
        x.reshape([b, c, l]),
        wt.reshape([o, c, k]),
        g.reshape([b, o, l]),
    ];
    let opts = ConvOptions::new([1], [1], [1], 1);
    let got = bits_of(|x, w| conv1d(x, w, None, opts.clone()), rank3);
    assert_eq!(got, conv2d_of([1, l], 1), "conv1d");
    // conv3d over [b, c, 1, 6, 8]: conv2d over [b, c, 6, 8] with a [o, c, 3, k] kernel
    let (h, w) = (6, 8);
    let (x, wt, g) = leaves([h, w], 3);
    let rank5 = [
        x.reshape([b, c, 1, h, w]),
        wt.reshape([o, c, 1, 3, k]),
        g.reshape([b, o, 1, h, w]),
    ];
    let opts = ConvOptions::new([1, 1, 1], [0, 1, 1], [1, 1, 1], 1);
    let got = bits_of(|x, w| conv3d(x, w, None, opts.clone()), rank5);
    assert_eq!(got, conv2d_of([h, w], 3), "conv3d");
}

/// A convolution's bias (on the host, one pass of the per-channel affine with `α = 1`) gives
/// the bits of Burn's broadcast add, with a negative zero, an infinity and a NaN among the
/// outputs.
#[test]
fn a_convolutions_bias_adds_as_burns_broadcast_add() {
    let device =
        ApproxDevice::<NdArray>::new(Default::default(), Multiplier::parse("afm16").unwrap());
    type B = ApproxMul<NdArray>;
    let mut xv = data(&[2, 3, 7, 6], 50).to_vec::<f32>().unwrap();
    (xv[0], xv[50], xv[100]) = (f32::INFINITY, f32::NAN, -0.0);
    let x = Tensor::<B, 4>::from_data(TensorData::new(xv, [2, 3, 7, 6]), &device);
    let w = Tensor::<B, 4>::from_data(data(&[5, 3, 3, 3], 51), &device);
    let bias = Tensor::<B, 1>::from_data(data(&[5], 52), &device);
    let o = ConvOptions::new([1, 1], [1, 1], [1, 1], 1);
    let with = conv2d(x.clone(), w.clone(), Some(bias.clone()), o.clone());
    let without = conv2d(x, w, None, o);
    let plain = Default::default();
    let want = Tensor::<NdArray, 4>::from_data(without.into_data(), &plain)
        + Tensor::<NdArray, 1>::from_data(bias.into_data(), &plain).reshape([1, 5, 1, 1]);
    let bits = |t: TensorData| {
        let v = t.to_vec::<f32>().unwrap();
        v.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    };
    let got = with.into_data();
    assert!(got.to_vec::<f32>().unwrap().iter().any(|v| v.is_nan()));
    assert_eq!(bits(got), bits(want.into_data()));
}

fn conv_equals_brute_force(name: &str, [b, c, h]: [usize; 3], [o, kh]: [usize; 2]) {
    let mul = Multiplier::parse(name).unwrap();
    let device = ApproxDevice::<NdArray>::new(Default::default(), mul.clone());
    type B = Autodiff<ApproxMul<NdArray>>;
    let x = leaf::<B, 4>([b, c, h, h], 40, &device);
    let w = leaf::<B, 4>([o, c, kh, kh], 41, &device);
    let y = conv2d(
        x.clone(),
        w.clone(),
        None,
        ConvOptions::new([1, 1], [1, 1], [1, 1], 1),
    );
    let g = Tensor::<B, 4>::from_data(data(&[b, o, h, h], 42), &device);
    let grads = (y.clone() * g.clone()).sum().backward();
    let v = |t: TensorData| t.to_vec::<f32>().unwrap();
    let (xv, wv, gv) = (v(x.to_data()), v(w.to_data()), v(g.to_data()));
    let at_x = |n: usize, ci: usize, r: isize, s: isize| {
        let inside = (0..h as isize).contains(&r) && (0..h as isize).contains(&s);
        if inside {
            xv[((n * c + ci) * h + r as usize) * h + s as usize]
        } else {
            0.0
        }
    };
    let tap =
        |p: usize, (i, j): (usize, usize)| ((p / h + i) as isize - 1, (p % h + j) as isize - 1);
    let mut want_y = Vec::new();
    for (n, oc) in (0..b * o).map(|t| (t / o, t % o)) {
        for p in 0..h * h {
            let mut acc = 0f32;
            for ci in 0..c {
                for t in 0..kh * kh {
                    let (r, s) = tap(p, (t / kh, t % kh));
                    let wi = (oc * c + ci) * kh * kh + t;
                    acc += mul.multiply(wv[wi], at_x(n, ci, r, s));
                }
            }
            want_y.push(acc);
        }
    }
    let mut want_dw = Vec::new();
    for oc in 0..o {
        for ci in 0..c {
            for t in 0..kh * kh {
                let mut acc = 0f32;
                for (n, p) in (0..b * h * h).map(|t| (t / (h * h), t % (h * h))) {
                    let (r, s) = tap(p, (t / kh, t % kh));
                    let dy = gv[(n * o + oc) * h * h + p];
                    acc += mul.multiply(dy, at_x(n, ci, r, s));
                }
                want_dw.push(acc);
            }
        }
    }
    // the input gradient in col2im's order: each input element's taps in order, each tap's
    // value the sum over output channels in order
    let mut want_dx = vec![0f32; b * c * h * h];
    for (n, ci) in (0..b * c).map(|t| (t / c, t % c)) {
        for t in 0..kh * kh {
            for p in 0..h * h {
                let (r, s) = tap(p, (t / kh, t % kh));
                if (0..h as isize).contains(&r) && (0..h as isize).contains(&s) {
                    let mut acc = 0f32;
                    for oc in 0..o {
                        let wi = (oc * c + ci) * kh * kh + t;
                        acc += mul.multiply(wv[wi], gv[(n * o + oc) * h * h + p]);
                    }
                    want_dx[((n * c + ci) * h + r as usize) * h + s as usize] += acc;
                }
            }
        }
    }
    let same = |got: Vec<f32>, want: &[f32], what: &str| {
        assert_eq!(got.len(), want.len());
        for (i, (a, e)) in got.iter().zip(want).enumerate() {
            assert_eq!(a.to_bits(), e.to_bits(), "{name} {what} [{i}]: {a} vs {e}");
        }
    };
    same(v(y.into_data()), &want_y, "forward");
    same(
        v(w.grad(&grads).unwrap().into_data()),
        &want_dw,
        "weight gradient",
    );
}

#[test]
fn nan_and_inf_in_the_data_propagate_as_in_ieee_fp32() {
    type B = ApproxMul<NdArray>;
    let device =
        ApproxDevice::<NdArray>::new(Default::default(), Multiplier::parse("afm16").unwrap());
    let x =
        Tensor::<B, 2>::from_floats([[1.0, f32::NAN], [2.0, 3.0], [f32::INFINITY, 0.0]], &device);
    let w = Tensor::<B, 2>::from_floats([[1.0, 0.0], [1.0, 2.0]], &device);
    let y = x.matmul(w).into_data().to_vec::<f32>().unwrap();
    assert!(
        y[0].is_nan() && y[1].is_nan(),
        "a NaN input poisons its row: {y:?}"
    );
    assert!(
        y[2].is_finite() && y[3].is_finite(),
        "other rows are untouched: {y:?}"
    );
    assert_eq!(y[4], f32::INFINITY, "Inf · 1 + 0 · 1");
    assert!(y[5].is_nan(), "Inf · 0 is NaN");
}

cubecl_kernels::runtime_test! {
    fn native_convolutions_on_the_gemm_routes_equal_burns_own_kernels<R>() {
        // host im2col + GEMM on ndarray; on CubeCL implicit GEMM where the runtime has CMMA and
        // the shape allows, else im2col + matmul (the cases have groups: always im2col there)
        let plain = run_cases::<Autodiff<NdArray>>(&Default::default());
        for route in [ConvRoute::Gemm, ConvRoute::Im2col] {
            let mul = Multiplier::native().with_conv(route);
            let nd = ApproxDevice::<NdArray>::new(Default::default(), mul.clone());
            let got = run_cases::<Autodiff<ApproxMul<NdArray>>>(&nd);
            compare(&got, &plain, 1e-5, &format!("ndarray {route}"));
            let cube = ApproxDevice::<TestBackend<R>>::new(Default::default(), mul);
            let got = run_cases::<Autodiff<ApproxMul<TestBackend<R>>>>(&cube);
            // Burn's matmul under the im2col route is TF32 on CUDA
            let tolerance = R::dense_tolerance(1e-5);
            compare(&got, &plain, tolerance, &format!("{} {route}", R::NAME));
        }
    }
}

cubecl_kernels::runtime_test! {
    fn unfold4d_on_the_gemm_routes_equals_burns_own<R>() {
        // the packed HiNM/BCR convolutions unfold their input with it: every geometry knob,
        // and an infinity, which Burn's one-hot convolution turns into NaNs around it
        use burn::tensor::module::unfold4d;
        use burn::tensor::ops::UnfoldOptions;
        fn unfold<B: burn::tensor::backend::Backend>(
            device: &B::Device,
            [c, h, w, k, s, p, d]: [usize; 7],
            inf: bool,
        ) -> Vec<f32> {
            let mut x = data(&[2, c, h, w], 11);
            if inf {
                x = TensorData::new(
                    x.to_vec::<f32>()
                        .unwrap()
                        .into_iter()
                        .enumerate()
                        .map(|(i, v)| if i == 5 { f32::INFINITY } else { v })
                        .collect(),
                    [2, c, h, w],
                );
            }
            let x = Tensor::<B, 4>::from_data(x, device);
            let options = UnfoldOptions::new([s, s + 1], [p, p], [d, 1]);
            unfold4d(x, [k, k + 1], options)
                .into_data()
                .to_vec()
                .unwrap()
        }
        for shape in [[3, 7, 8, 3, 1, 1, 1], [2, 9, 6, 2, 2, 0, 2], [4, 5, 5, 1, 1, 2, 1]] {
            let want = unfold::<NdArray>(&Default::default(), shape, false);
            for route in [ConvRoute::Gemm, ConvRoute::Im2col] {
                let mul = Multiplier::native().with_conv(route);
                let nd = ApproxDevice::<NdArray>::new(Default::default(), mul.clone());
                assert_eq!(unfold::<ApproxMul<NdArray>>(&nd, shape, false), want, "{shape:?}");
                let cube = ApproxDevice::<TestBackend<R>>::new(Default::default(), mul);
                let got = unfold::<ApproxMul<TestBackend<R>>>(&cube, shape, false);
                assert_eq!(got, want, "{} {route} {shape:?}", R::NAME);
                // an infinity is copied where it falls, the rest stays finite
                let inf = unfold::<ApproxMul<NdArray>>(&nd, shape, true);
                assert_eq!(inf.iter().filter(|v| v.is_nan()).count(), 0, "{shape:?}");
                assert!(inf.iter().any(|v| v.is_infinite()), "{shape:?}");
            }
        }
    }
}

cubecl_kernels::runtime_test! {
    fn native_convolutions_report_the_route_they_ran<R>() {
        use cubecl_kernels::decorator::effects::{self, Pass};
        fn routes<B: AutodiffBackend>(device: &B::Device) -> Vec<String> {
            effects::start();
            run_cases::<B>(device);
            let seen = effects::finish();
            let mut routes: Vec<String> = seen.layers[""].passes[Pass::Forward.index()]
                .iter()
                .map(|c| c.route.clone())
                .collect();
            routes.sort();
            routes.dedup();
            routes
        }
        let mul = Multiplier::native().with_conv(ConvRoute::Gemm);
        let nd = routes::<Autodiff<ApproxMul<NdArray>>>(&ApproxDevice::new(
            Default::default(),
            mul.clone(),
        ));
        assert!(nd.iter().any(|r| r == "native, host im2col + GEMM"), "{nd:?}");
        // the linear case's [2, 3, 6] input: its rows as one GEMM
        assert!(nd.iter().any(|r| r == "native, rows as one GEMM"), "{nd:?}");
        // transposed convolutions keep Burn's kernels
        assert!(nd.iter().any(|r| r == "native: the inner backend's own op"), "{nd:?}");
        let cube = routes::<Autodiff<ApproxMul<TestBackend<R>>>>(&ApproxDevice::new(
            Default::default(),
            mul,
        ));
        // grouped convolutions never run implicit GEMM: the fallback says why
        assert!(
            cube.iter().any(|r| r.starts_with("native, im2col + matmul; in place of implicit GEMM")),
            "{cube:?}"
        );
        let burn = routes::<Autodiff<ApproxMul<NdArray>>>(&ApproxDevice::new(
            Default::default(),
            Multiplier::native(),
        ));
        assert!(burn.iter().all(|r| r == "native: the inner backend's own op"), "{burn:?}");
    }
}

/// Native products on a CubeCL runtime under `--conv conv --matmul kernel` equal the plain
/// backend's, the effects report names the kernel (or why it refused), and ndarray runs its own
/// matmul whatever the name. One test per pair, each its own kernels, compiled side by side.
fn native_products_run_on_the_matmul_kernel_named<R: TestRuntime>(
    conv: ConvRoute,
    kernel: MatmulKernel,
) {
    use cubecl_kernels::decorator::effects;
    let plain = run_cases::<Autodiff<NdArray>>(&Default::default());
    let tolerance = R::dense_tolerance(1e-5);
    let what = format!("{} --conv {conv} --matmul {kernel}", R::NAME);
    let mul = Multiplier::native().with_conv(conv).with_matmul(kernel);
    effects::start();
    let got = run_cases::<Autodiff<ApproxMul<TestBackend<R>>>>(&ApproxDevice::new(
        Default::default(),
        mul.clone(),
    ));
    let seen = effects::finish();
    compare(&got, &plain, tolerance, &what);
    let routes: Vec<String> = seen.layers[""]
        .passes
        .iter()
        .flatten()
        .map(|c| c.route.clone())
        .collect();
    // the matmul case and the linear layers name the kernel, or why it refused
    let named = |r: &String| {
        r == &format!("native, matmul on {kernel}")
            || r.ends_with(&format!("({kernel})"))
            || r.contains(&format!("{kernel} refused: "))
    };
    assert!(routes.iter().any(named), "{what}: {routes:?}");
    // ndarray runs its own matmul whatever the name
    let host =
        run_cases::<Autodiff<ApproxMul<NdArray>>>(&ApproxDevice::new(Default::default(), mul));
    compare(
        &host,
        &plain,
        1e-5,
        &format!("ndarray --conv {conv} --matmul {kernel}"),
    );
}

cubecl_kernels::runtime_test! {
    fn native_products_run_on_double_unit_with_gemm_convolutions<R>() {
        native_products_run_on_the_matmul_kernel_named::<R>(
            ConvRoute::Gemm,
            MatmulKernel::DoubleUnit,
        );
    }
    fn native_products_run_on_simple_unit_with_burn_convolutions<R>() {
        native_products_run_on_the_matmul_kernel_named::<R>(
            ConvRoute::Burn,
            MatmulKernel::SimpleUnit,
        );
    }
    fn native_products_run_on_double_cyclic_cmma_with_im2col_convolutions<R>() {
        native_products_run_on_the_matmul_kernel_named::<R>(
            ConvRoute::Im2col,
            MatmulKernel::DoubleCyclicCmma,
        );
    }
}

cubecl_kernels::runtime_test! {
    fn burn_cubecl_strided_input_gradients_are_wrong<R>() {
        // ResNet's shortcut: a 1×1 convolution of stride 2. burn-cubecl 0.21 takes its input
        // gradient as a transposed convolution (`conv_data_backward_fallback`) that gets it
        // wrong; Ember's routes agree with ndarray. The other ResNet shapes agree everywhere.
        fn run<B: AutodiffBackend>(device: &B::Device, c: [usize; 5]) -> Vec<Vec<f32>> {
            let [cin, cout, k, s, side] = c;
            let p = k / 2;
            let o = (side + 2 * p - k) / s + 1;
            let x = leaf::<B, 4>([4, cin, side, side], 1, device);
            let w = leaf::<B, 4>([cout, cin, k, k], 2, device);
            let dy = Tensor::<B, 4>::from_data(data(&[4, cout, o, o], 3), device);
            let options = ConvOptions::new([s, s], [p, p], [1, 1], 1);
            let y = conv2d(x.clone(), w.clone(), None, options);
            let g = (y.clone() * dy).sum().backward();
            [Some(y.inner()), w.grad(&g), x.grad(&g)]
                .map(|t| t.unwrap().into_data().to_vec().unwrap())
                .to_vec()
        }
        let as_record = |g: Vec<Vec<f32>>| -> Record {
            ["output", "dweight", "dx"].iter().map(|n| n.to_string()).zip(g).collect()
        };
        // each product of each shape on its own: a GPU run reports every one that is off
        let mut wrong = Vec::new();
        let gemm = Multiplier::native().with_conv(ConvRoute::Gemm);
        // Burn's own kernel and Ember's route differ from f32 by TF32 rounding on CUDA
        let tolerance = R::dense_tolerance(1e-5);
        for (c, burn_is_right) in [
            ([3, 16, 3, 1, 32], true),
            ([16, 32, 3, 2, 32], true),
            ([16, 32, 1, 2, 32], false),
            ([64, 128, 3, 2, 8], true),
            ([64, 64, 3, 1, 16], true),
        ] {
            let want = as_record(run::<Autodiff<NdArray>>(&Default::default(), c));
            let device = ApproxDevice::<TestBackend<R>>::new(Default::default(), gemm.clone());
            let ember = as_record(run::<Autodiff<ApproxMul<TestBackend<R>>>>(&device, c));
            let burn = as_record(run::<Autodiff<TestBackend<R>>>(&Default::default(), c));
            for ((name, e), ((_, b), (_, w))) in ember.iter().zip(burn.iter().zip(&want)) {
                let one = |r: &Vec<f32>| -> Record { vec![(name.clone(), r.clone())] };
                let ember_off = max_rel_diff(&one(e), &one(w));
                if ember_off > tolerance {
                    wrong.push(format!("Ember's route, {c:?}, {name}: {ember_off:e} off"));
                }
                // only the strided shortcut's input gradient is Burn's known error
                let burn_off = max_rel_diff(&one(b), &one(w));
                let expected_right = burn_is_right || name != "dx";
                if (burn_off <= tolerance) != expected_right {
                    wrong.push(format!("burn-cubecl's own kernel, {c:?}, {name}: {burn_off:e} off"));
                }
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }
}
