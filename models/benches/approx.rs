//! A LeNet-5 training step (forward + backward, batch 64) under ApproxMul vs the plain backend,
//! measured in the same run on ndarray and on wgpu (lavapipe without a GPU). Rows:
//! `1-native` (the inner backend, through the decorator), `2-fp32` (Ember's kernels with a
//! plain `*`), `3-mbm7` (AFM16, the paper's 16-bit approximate multiplier).

use burn::backend::{Autodiff, NdArray, Wgpu};
use burn::prelude::*;
use burn_approx_mul::{ApproxDevice, ApproxMul, Multiplier};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use cubecl_kernels::decorator::KernelBackend;
use ember_models::classifier::Classifier;
use ember_models::lenet::LeNet5;

mod common;

fn step<B: KernelBackend>(c: &mut Criterion, backend: &str) {
    for (variant, spec) in [
        ("1-native", "native"),
        ("2-fp32", "fp32"),
        ("3-mbm7", "mbm7"),
    ] {
        type A<B> = Autodiff<ApproxMul<B>>;
        let device = ApproxDevice::<B>::new(Default::default(), Multiplier::parse(spec).unwrap());
        A::<B>::seed(&device, 1);
        let model = LeNet5::<A<B>>::init(&device);
        let batch = common::batch::<A<B>>(&device);
        c.bench_with_input(
            BenchmarkId::new(format!("approx_lenet5_step_b64/{backend}"), variant),
            &(),
            |bench, _| {
                bench.iter(|| {
                    let out = model.forward_classification(batch.clone());
                    let grads = out.loss.backward();
                    drop(grads);
                    A::<B>::sync(&device).unwrap();
                })
            },
        );
    }
}

fn benches(c: &mut Criterion) {
    step::<NdArray>(c, "ndarray");
    cubecl_kernels::runtime::wgpu_adapter().unwrap_or_else(|e| panic!("{e}"));
    step::<Wgpu>(c, "wgpu");
}

criterion_group! {
    name = approx;
    config = Criterion::default().sample_size(10).measurement_time(std::time::Duration::from_secs(8));
    targets = benches
}
criterion_main!(approx);
