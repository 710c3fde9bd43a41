//! A training step (forward + backward) of the small ResMLP on CIFAR-sized input (32 px, 4×4
//! patches, batch 32) under SparseAct vs the plain backend, measured in the same run on ndarray
//! and on wgpu (lavapipe without a GPU). Rows: `1-dense` (policy off: the plain autodiff
//! backend), `2-s50-b16`, `3-s80-b16`, `4-s80-b64` (linear layers' inputs pruned), and
//! `5-s80-b16-scales` (the fused variant). On ndarray pruning and the weight gradients are the
//! host path (`cubecl_kernels::bsr::columns`: per-sample selection, one dense product per block
//! column); on wgpu the `cubecl_kernels::bsr` kernels. The pruning and the weight gradient
//! alone are measured in `cubecl-kernels`' `bspmm` bench.

use burn::backend::NdArray;
use burn::backend::Wgpu;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::prelude::*;
use burn_sparse_act::{Policy, Pruning, SparseAct, SparseDevice};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use ember_models::resmlp::ResMlpConfig;

fn step<B: cubecl_kernels::decorator::KernelBackend>(c: &mut Criterion, backend: &str) {
    let policies: [(&str, Policy); 5] = [
        ("1-dense", Policy::default()),
        ("2-s50-b16", Policy::uniform(Pruning::new(0.5, 16).unwrap())),
        ("3-s80-b16", Policy::uniform(Pruning::new(0.8, 16).unwrap())),
        ("4-s80-b64", Policy::uniform(Pruning::new(0.8, 64).unwrap())),
        (
            "5-s80-b16-scales",
            Policy {
                scales: true,
                ..Policy::uniform(Pruning::new(0.8, 16).unwrap())
            },
        ),
    ];
    for (variant, policy) in policies {
        type S<B> = SparseAct<burn::backend::Autodiff<B>>;
        let device = SparseDevice::<B>::new(Default::default(), policy);
        S::<B>::seed(&device, 1);
        let model = ResMlpConfig::small(32, 4, 10).init::<S<B>>(&device);
        let images = Tensor::<S<B>, 4>::random(
            [32, 3, 32, 32],
            burn::tensor::Distribution::Normal(0.0, 1.0),
            &device,
        );
        let targets = Tensor::<S<B>, 1, Int>::from_data(
            TensorData::new((0..32i64).map(|i| i % 10).collect::<Vec<_>>(), [32]),
            &device,
        );
        c.bench_with_input(
            BenchmarkId::new(
                format!("sparse_act_resmlp_small_step_b32/{backend}"),
                variant,
            ),
            &(),
            |bench, _| {
                bench.iter(|| {
                    let logits = model.forward(images.clone());
                    let loss = CrossEntropyLossConfig::new()
                        .init(&device)
                        .forward(logits, targets.clone());
                    drop(loss.backward());
                    S::<B>::sync(&device).unwrap();
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
    name = sparse_act;
    config = Criterion::default().sample_size(10).measurement_time(std::time::Duration::from_secs(8));
    targets = benches
}
criterion_main!(sparse_act);
