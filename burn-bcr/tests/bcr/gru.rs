//! A stock `burn::nn::gru::Gru` whose gate weights are packed: Burn multiplies them with
//! `input.matmul(weight)`, which runs BCRC's sparse product.

use crate::{TOLERANCE, packed_weights, with_weights};
use burn::backend::NdArray;
use burn::module::Module;
use burn::nn::gru::{Gru, GruConfig};
use burn::tensor::{Distribution, Tensor};
use burn_bcr::backend::{Bcr, BcrDevice};
use burn_bcr::module::pack_module;
use cubecl_kernels::decorator::KernelBackend;
use cubecl_kernels::decorator::effects::{self, Pass};
use cubecl_kernels::testing::{TestBackend, assert_close};

const BATCH: usize = 3;
const STEPS: usize = 4;

/// `tolerance`: of the comparison with the masked dense GRU on `B`.
fn packed_gru_equals_masked_dense<B: KernelBackend>(route: &str, tolerance: f32) {
    let device = BcrDevice::<B>::new(Default::default(), ());
    let lazy = GruConfig::new(8, 12, true).init::<Bcr<B>>(&device);
    let gru: Gru<Bcr<B>> = GruConfig::new(8, 12, true)
        .init(&device)
        .load_record(lazy.into_record());
    let gates = |l: &str| l.ends_with("input_transform") || l.ends_with("hidden_transform");
    let (packed, dense) = packed_weights(&gru, gates);
    assert_eq!(packed.len(), 6, "{:?}", packed.keys());
    let reference = with_weights(gru.clone(), &dense);
    let sparse = pack_module(gru, &packed);

    let x = Tensor::<Bcr<B>, 3>::random([BATCH, STEPS, 8], Distribution::Default, &device);
    effects::start();
    let y = sparse.forward(x.clone(), None);
    let seen = effects::finish();
    assert_close(y, reference.forward(x, None), tolerance, "GRU");
    for layer in packed.keys() {
        let l = &seen.layers[layer.as_str()];
        assert!(l.densified.is_empty(), "{layer}: {:?}", l.densified);
        let mm = &l.passes[Pass::Matmul.index()];
        assert_eq!(mm.len(), 1, "{layer}: {mm:?}");
        assert_eq!(mm[0].route, route, "{layer}");
        // one product per time step, a quarter of the weights kept
        let (dims, _) = &crate::weights(&reference)[layer.as_str()];
        let kept = (dims[0] * dims[1] / 4) as u64;
        assert_eq!(
            (mm[0].calls, mm[0].multiplies),
            (STEPS as u64, (STEPS * BATCH) as u64 * kept)
        );
    }
}

#[test]
fn gru_gates_run_the_host_product_on_ndarray() {
    packed_gru_equals_masked_dense::<NdArray>("bcrc host", TOLERANCE);
}

cubecl_kernels::runtime_test! {
    fn gru_gates_run_the_kernel_on_cubecl<R>() {
        packed_gru_equals_masked_dense::<TestBackend<R>>("bcrc kernel", R::dense_tolerance(TOLERANCE));
    }
}
