//! `Hinm<B>` on unmodified `burn::nn` layers, on ndarray (host path) and on the CubeCL runtime
//! `EMBER_TEST_RUNTIME` selects (the kernel; wgpu by default):
//! a packed model's outputs equal the masked dense model's, packed contractions run the sparse
//! product, and every other op densifies and says so.

use burn::backend::NdArray;
use burn_hinm::backend::{Hinm, HinmDevice};
use burn_hinm::gyro::{Method, search};
use burn_hinm::mask::Saliency;
use burn_hinm::module::{pack_module, weights};
use burn_hinm::pack::{masked, pack, scores};
use cubecl_kernels::decorator::KernelBackend;
use cubecl_kernels::hinm::Packed;
use cubecl_kernels::testing::{TestBackend, assert_packed_net_matches, net, with_weights};
use std::collections::BTreeMap;
use std::sync::Arc;

/// How close a packed model's results are to the masked dense model's, relative.
const TOLERANCE: f32 = 1e-5;

/// `tolerance`: of the comparisons with the masked dense model on `B` (Burn's own matmul and
/// convolution there).
fn packed_model_equals_masked_dense<B: KernelBackend>(route: &str, tolerance: f32) {
    let device = HinmDevice::<B>::new(Default::default(), ());
    let model = net::<Hinm<B>>(&device);
    let mut packed = BTreeMap::new();
    let mut dense = BTreeMap::new();
    for (layer, (dims, w)) in weights(&model) {
        let s = scores(&w, &dims, Saliency::Magnitude).unwrap();
        let (mask, _) = search(&s, 8, 0.5, Method::Gyro, 7).unwrap();
        let p: Packed = pack(&w, &dims, &mask).unwrap();
        dense.insert(layer.clone(), masked(&p, &dims).unwrap());
        packed.insert(layer, Arc::new(p));
    }
    let reference = with_weights(model.clone(), &dense);
    let sparse = pack_module(model, &packed);
    assert_eq!(
        sparse.fc.weight.val().dims(),
        [24, 16],
        "a packed weight keeps its shape"
    );
    assert_packed_net_matches(&sparse, &reference, route, tolerance, TOLERANCE);
}

#[test]
fn ndarray_runs_the_host_product() {
    packed_model_equals_masked_dense::<NdArray>("hinm host", TOLERANCE);
}

cubecl_kernels::runtime_test! {
    fn cubecl_runs_the_kernel<R>() {
        packed_model_equals_masked_dense::<TestBackend<R>>("hinm kernel", R::dense_tolerance(TOLERANCE));
    }
}

#[test]
fn unpacked_models_are_the_inner_backend_bit_for_bit() {
    let device = HinmDevice::<NdArray>::new(Default::default(), ());
    cubecl_kernels::testing::assert_unpacked_is_inner::<Hinm<NdArray>, NdArray>(
        &device,
        &Default::default(),
    );
}
