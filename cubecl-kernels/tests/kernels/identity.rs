//! The identity decorators (wrapping and transparent) reproduce their inner backend bit for bit,
//! forward and backward, for the ops later decorators override (every contraction of the shared
//! suite, `cubecl_kernels::testing::cases`, and prelu), on ndarray and on the runtime
//! `EMBER_TEST_RUNTIME` selects (wgpu by default, lavapipe where there is no GPU).

use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData, activation::prelu};
use cubecl_kernels::decorator::{
    CubeVisitor, Decorated, DecoratedDevice, Identity, KernelBackend, Transparent,
    TransparentIdentity,
};

use cubecl_kernels::testing::cases::contraction_cases;
use cubecl_kernels::testing::{TestBackend, lcg_data as data, leaf};

/// Outputs and gradients of every case, by name: every contraction, and PReLU.
fn run_cases<B: AutodiffBackend>(device: &B::Device) -> Vec<(String, Vec<f32>)> {
    let mut out = contraction_cases::<B>(device);
    let mut record =
        |name: &str, t: TensorData| out.push((name.to_string(), t.to_vec::<f32>().unwrap()));
    macro_rules! case {
        ($($case:tt)*) => {
            cubecl_kernels::record_case!(record, device, B, $($case)*)
        };
    }
    let (x, alpha) = (
        leaf::<B, 3>([2, 3, 4], 15, device),
        leaf::<B, 1>([3], 16, device),
    );
    case!("prelu", [x, alpha], prelu(x.clone(), alpha.clone()));
    out
}

fn assert_bit_identical(plain: &[(String, Vec<f32>)], decorated: &[(String, Vec<f32>)]) {
    assert_eq!(plain.len(), decorated.len());
    for ((name, p), (name2, d)) in plain.iter().zip(decorated) {
        assert_eq!(name, name2);
        assert_eq!(p.len(), d.len(), "{name}: lengths");
        assert!(
            p.iter().any(|v| *v != 0.0),
            "{name}: all zeros, the test would prove nothing"
        );
        for (i, (x, y)) in p.iter().zip(d).enumerate() {
            assert_eq!(x.to_bits(), y.to_bits(), "{name}[{i}]: {x} vs {y}");
        }
    }
}

#[test]
fn identity_is_bit_exact_on_ndarray() {
    // burn-ndarray's multi-threaded reductions are not bit-reproducible run to run: compare on
    // one thread, where the plain backend agrees with itself.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let plain = pool.install(|| run_cases::<Autodiff<NdArray>>(&Default::default()));
    let decorated =
        pool.install(|| run_cases::<Autodiff<Decorated<NdArray, Identity>>>(&Default::default()));
    assert_bit_identical(&plain, &decorated);
    // The transparent forwarder over an autodiff backend is that backend, gradients included.
    let transparent = pool.install(|| {
        run_cases::<Transparent<Autodiff<NdArray>, TransparentIdentity>>(&Default::default())
    });
    assert_bit_identical(&plain, &transparent);
}

cubecl_kernels::runtime_test! {
    fn identity_is_bit_exact_on_cubecl<R>() {
        let plain = run_cases::<Autodiff<TestBackend<R>>>(&Default::default());
        let decorated = run_cases::<Autodiff<Decorated<TestBackend<R>, Identity>>>(
            &DecoratedDevice::new(Default::default(), ()),
        );
        assert_bit_identical(&plain, &decorated);
    }
}

/// Returns the first input's data after a trip through the CubeCL view (or the host view).
struct RoundTrip;

impl<B: burn::tensor::backend::Backend> CubeVisitor<B> for RoundTrip {
    type Output = (bool, burn::tensor::ops::FloatTensor<B>);
    fn cube<R: burn_cubecl::CubeRuntime>(
        self,
        mut inputs: Vec<burn_cubecl::tensor::CubeTensor<R>>,
        rewrap: &dyn Fn(burn_cubecl::tensor::CubeTensor<R>) -> burn::tensor::ops::FloatTensor<B>,
    ) -> Self::Output {
        let t = inputs.remove(0);
        assert_eq!(t.meta.shape().dims::<2>().to_vec(), vec![2, 3]);
        (true, rewrap(t))
    }
    fn host(self, mut inputs: Vec<burn::tensor::ops::FloatTensor<B>>) -> Self::Output {
        (false, inputs.remove(0))
    }
}

fn visit_round_trip<B: KernelBackend>(device: &B::Device) -> bool {
    let x = Tensor::<B, 2>::from_data(data(&[2, 3], 5), device);
    let expected = x.to_data();
    let (cube, back) = B::visit(RoundTrip, vec![x.into_primitive().tensor()]);
    let back = Tensor::<B, 2>::from_primitive(burn::tensor::TensorPrimitive::Float(back));
    assert_eq!(back.into_data(), expected);
    cube
}

cubecl_kernels::runtime_test! {
    fn kernel_backend_reports_what_lies_underneath<R>() {
        assert_eq!(NdArray::<f32>::cube_runtime(), None);
        assert_eq!(Decorated::<NdArray, Identity>::cube_runtime(), None);
        assert!(!visit_round_trip::<Decorated<NdArray, Identity>>(
            &DecoratedDevice::new(Default::default(), ())
        ));
        assert!(TestBackend::<R>::cube_runtime().is_some());
        assert!(
            Decorated::<Decorated<TestBackend<R>, Identity>, Identity>::cube_runtime().is_some()
        );
        assert!(visit_round_trip::<Decorated<TestBackend<R>, Identity>>(
            &DecoratedDevice::new(Default::default(), ())
        ));
    }
}
