//! A small net with a Conv2d and a Linear: packed on ndarray and on the CubeCL runtime
//! `EMBER_TEST_RUNTIME` selects (wgpu by default), unpacked, and through Autodiff.

use crate::{TOLERANCE, close, net, packed_weights, with_weights};
use burn::backend::{Autodiff, NdArray};
use burn::tensor::{Distribution, Tensor};
use burn_bcr::backend::{Bcr, BcrDevice, BcrFloat};
use burn_bcr::module::pack_module;
use cubecl_kernels::decorator::KernelBackend;
use cubecl_kernels::decorator::effects::{self, Pass};
use cubecl_kernels::testing::{TestBackend, assert_close, assert_packed_net_matches};

/// `tolerance`: of the comparisons with the masked dense model on `B` (Burn's own matmul and
/// convolution there).
fn packed_model_equals_masked_dense<B: KernelBackend>(route: &str, tolerance: f32) {
    let device = BcrDevice::<B>::new(Default::default(), ());
    let model = net::<Bcr<B>>(&device);
    let (packed, dense) = packed_weights(&model, |_| true);
    assert_eq!(packed.len(), 2);
    let reference = with_weights(model.clone(), &dense);
    let sparse = pack_module(model, &packed);
    let weight = sparse.fc.weight.val();
    assert_eq!(weight.dims(), [24, 16], "a packed weight keeps its shape");
    let primitive = weight.into_primitive().tensor();
    assert!(
        matches!(primitive.inner, BcrFloat::Packed(_)),
        "the weight is packed"
    );

    let seen = assert_packed_net_matches(&sparse, &reference, route, tolerance, TOLERANCE);
    // the conv's 16 × 54 view keeps a quarter: 2 · 4 · 5 output positions times 216 weights
    let conv = &seen.layers["conv"].passes[Pass::Forward.index()][0];
    assert_eq!(conv.multiplies, 2 * 4 * 5 * 216);
    let mm = &seen.layers["fc"].passes[Pass::Matmul.index()];
    assert_eq!((mm[0].route.as_str(), mm[0].multiplies), (route, 5 * 96));

    // a linear layer over a rank-3 input runs the packed product too
    let v3 = Tensor::<Bcr<B>, 3>::random([2, 3, 24], Distribution::Default, &device);
    effects::start();
    let fc3 = sparse.fc.forward(v3.clone());
    let seen = effects::finish();
    assert_close(fc3, reference.fc.forward(v3), tolerance, "linear of rank 3");
    let forward = &seen.layers["fc"].passes[Pass::Forward.index()];
    assert!(
        !forward.is_empty() && forward.iter().all(|c| c.route == route),
        "{forward:?}"
    );
}

#[test]
fn ndarray_runs_the_host_product() {
    packed_model_equals_masked_dense::<NdArray>("bcrc host", TOLERANCE);
}

cubecl_kernels::runtime_test! {
    fn cubecl_runs_the_kernel<R>() {
        packed_model_equals_masked_dense::<TestBackend<R>>("bcrc kernel", R::dense_tolerance(TOLERANCE));
    }
}

#[test]
fn unpacked_models_are_the_inner_backend_bit_for_bit() {
    let device = BcrDevice::<NdArray>::new(Default::default(), ());
    cubecl_kernels::testing::assert_unpacked_is_inner::<Bcr<NdArray>, NdArray>(
        &device,
        &Default::default(),
    );
}

#[test]
fn autodiff_runs_the_packed_forward_and_a_dense_backward() {
    type A = Autodiff<Bcr<NdArray>>;
    let device = BcrDevice::<NdArray>::new(Default::default(), ());
    let model = net::<Bcr<NdArray>>(&device);
    let (packed, dense) = packed_weights(&model, |l| l == "fc");
    let reference = with_weights(model.clone(), &dense);
    let sparse = pack_module(model, &packed);
    let v = Tensor::<Bcr<NdArray>, 2>::random([4, 24], Distribution::Default, &device);
    let grad_of = |w: Tensor<Bcr<NdArray>, 2>| {
        let w = Tensor::<A, 2>::from_inner(w);
        let x = Tensor::<A, 2>::from_inner(v.clone()).require_grad();
        let y = x.clone().matmul(w);
        let grads = (y.clone() * y.clone()).sum().backward();
        (y.inner(), x.grad(&grads).unwrap())
    };
    effects::start();
    let (y, dx) = grad_of(sparse.fc.weight.val());
    let seen = effects::finish();
    let (y_ref, dx_ref) = grad_of(reference.fc.weight.val());
    close(y, y_ref, "forward under autodiff");
    close(dx, dx_ref, "input gradient");
    let fc = &seen.layers["fc"];
    assert_eq!(fc.passes[Pass::Matmul.index()][0].route, "bcrc host");
    // the backward multiplies by the transposed weight: densified, and said so
    assert_eq!(fc.densified.get("float_transpose"), Some(&1), "{fc:?}");
}
