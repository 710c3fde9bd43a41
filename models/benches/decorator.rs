//! What the decorator plumbing costs: a LeNet-5 forward/backward step and a 256³ matmul on the
//! plain backend and under the identity decorator, on ndarray and on wgpu (lavapipe without a
//! GPU), measured in the same run. The ratio should be 1.

use burn::backend::{Autodiff, NdArray, Wgpu};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use cubecl_kernels::decorator::{Decorated, DecoratedDevice, Identity};
use ember_models::classifier::Classifier;
use ember_models::lenet::LeNet5;

mod common;
use common::batch;

fn lenet_step<B: AutodiffBackend>(
    c: &mut Criterion,
    backend: &str,
    variant: &str,
    device: B::Device,
) {
    B::seed(&device, 1);
    let model = LeNet5::<B>::init(&device);
    let b = batch::<B>(&device);
    c.bench_with_input(
        BenchmarkId::new(format!("lenet5_fwd_bwd_b64/{backend}"), variant),
        &(),
        |bench, _| {
            bench.iter(|| {
                let out = model.forward_classification(b.clone());
                let grads = out.loss.backward();
                drop(grads);
                B::sync(&device).unwrap();
            })
        },
    );
}

fn matmul<B: Backend>(c: &mut Criterion, backend: &str, variant: &str, device: B::Device) {
    let x = Tensor::<B, 2>::random([256, 256], burn::tensor::Distribution::Default, &device);
    c.bench_with_input(
        BenchmarkId::new(format!("matmul_256/{backend}"), variant),
        &(),
        |bench, _| {
            bench.iter(|| {
                let y = x.clone().matmul(x.clone());
                B::sync(&device).unwrap();
                y
            })
        },
    );
}

fn benches(c: &mut Criterion) {
    lenet_step::<Autodiff<NdArray>>(c, "ndarray", "1-plain", Default::default());
    lenet_step::<Autodiff<Decorated<NdArray, Identity>>>(
        c,
        "ndarray",
        "2-identity",
        Default::default(),
    );
    matmul::<NdArray>(c, "ndarray", "1-plain", Default::default());
    matmul::<Decorated<NdArray, Identity>>(c, "ndarray", "2-identity", Default::default());
    cubecl_kernels::runtime::wgpu_adapter().unwrap_or_else(|e| panic!("{e}"));
    let wgpu = DecoratedDevice::new(Default::default(), ());
    lenet_step::<Autodiff<Wgpu>>(c, "wgpu", "1-plain", Default::default());
    lenet_step::<Autodiff<Decorated<Wgpu, Identity>>>(c, "wgpu", "2-identity", wgpu.clone());
    matmul::<Wgpu>(c, "wgpu", "1-plain", Default::default());
    matmul::<Decorated<Wgpu, Identity>>(c, "wgpu", "2-identity", wgpu);
}

criterion_group! {
    name = decorator;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(12));
    targets = benches
}
criterion_main!(decorator);
