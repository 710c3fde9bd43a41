//! A training step (forward and backward) with the fused broadcast nodes ÷ the same step with
//! Burn's composites, measured in the same run, on ndarray (the host path) and on wgpu
//! (lavapipe without a GPU): LeNet-5 with PReLU(channels) at its four sites (`--act prelu`),
//! and the small ResMLP (its Affines and layer-scales), batch 64 of the embedded MNIST.
//!
//! Rows `1-composite`: `Autodiff<B>` (Burn's `prelu`: `lower_elem`, `mul`, `mask_where`, each
//! an autodiff node; `x * α + β` as two broadcast nodes). Rows `2-fused`:
//! `SparseAct<Autodiff<B>>` with SparseAct off and the affine registered
//! (`burn_sparse_act::fused`), i.e. Ember's training stack without its other decorators.
//!
//! Group `broadcast_lenet5_relu_step_b64`: the same two stacks on a ReLU LeNet-5, which has no
//! broadcast op (`1-autodiff`: `Autodiff<B>`, `2-stack`: `SparseAct<Autodiff<B>>`): what the
//! stack costs by itself, to be taken out of the fused ÷ composite ratios above.

use burn::backend::{Autodiff, NdArray, Wgpu};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn_sparse_act::{SparseAct, SparseDevice};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use cubecl_kernels::decorator::KernelBackend;
use ember_models::act::Activation;
use ember_models::broadcast::register_affine;
use ember_models::classifier::Classifier;
use ember_models::lenet::LeNet5;
use ember_models::resmlp::ResMlpConfig;

mod common;
use common::batch;

fn step<B: AutodiffBackend, M: Classifier<B>>(
    c: &mut Criterion,
    group: &str,
    variant: &str,
    model: M,
    device: B::Device,
) {
    let b = batch::<B>(&device);
    c.bench_with_input(BenchmarkId::new(group, variant), &(), |bench, _| {
        bench.iter(|| {
            let out = model.forward_classification(b.clone());
            drop(out.loss.backward());
            B::sync(&device).unwrap();
        })
    });
}

/// Both models on the plain backend and on the fused stack over `B`.
fn backend<B: KernelBackend>(c: &mut Criterion, name: &str) {
    type Fused<B> = SparseAct<Autodiff<B>>;
    register_affine::<Fused<B>>(
        burn_sparse_act::fused_affine::<
            B,
            burn::backend::autodiff::checkpoint::strategy::NoCheckpointing,
        >,
    );
    let plain: burn::tensor::Device<Autodiff<B>> = Default::default();
    let fused = SparseDevice::<B>::new(Default::default(), Default::default());
    let lenet = format!("broadcast_lenet5_prelu_step_b64/{name}");
    <Autodiff<B>>::seed(&plain, 1);
    let model = LeNet5::<Autodiff<B>>::init_with(Activation::Prelu, &plain);
    step(c, &lenet, "1-composite", model, plain.clone());
    let model = LeNet5::<Fused<B>>::init_with(Activation::Prelu, &fused);
    step(c, &lenet, "2-fused", model, fused.clone());
    // the same stacks without any broadcast op: what the stack itself costs
    let relu = format!("broadcast_lenet5_relu_step_b64/{name}");
    let model = LeNet5::<Autodiff<B>>::init_with(Activation::Relu, &plain);
    step(c, &relu, "1-autodiff", model, plain.clone());
    let model = LeNet5::<Fused<B>>::init_with(Activation::Relu, &fused);
    step(c, &relu, "2-stack", model, fused.clone());
    let resmlp = format!("broadcast_resmlp_small_step_b64/{name}");
    let config = ResMlpConfig::small(28, 4, 10).with_channels(1);
    step(
        c,
        &resmlp,
        "1-composite",
        config.init::<Autodiff<B>>(&plain),
        plain,
    );
    step(
        c,
        &resmlp,
        "2-fused",
        config.init::<Fused<B>>(&fused),
        fused,
    );
}

fn benches(c: &mut Criterion) {
    backend::<NdArray>(c, "ndarray");
    cubecl_kernels::runtime::wgpu_adapter().unwrap_or_else(|e| panic!("{e}"));
    backend::<Wgpu>(c, "wgpu");
}

criterion_group! {
    name = broadcast;
    config = Criterion::default().sample_size(10).measurement_time(std::time::Duration::from_secs(8));
    targets = benches
}
criterion_main!(broadcast);
