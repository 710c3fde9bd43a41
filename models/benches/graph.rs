//! A forward and backward pass of two stacked stock `burn::nn::Gru` layers on
//! `Autodiff<NdArray>`, as Burn runs it (`1-burn`) ÷ the same pass after
//! [`ember_models::graph::join_params`] (`2-joined`), measured in the same run: the cost of
//! burn-autodiff's graph merges, which grows with the square of the sequence length.
//!
//! Groups `gru_graph_h64_b16/T`: 64 hidden units, batch 16, T = 48 and 192 steps of 39
//! features; `gru_graph_h256_b64/48`: the FSDD model's shape (`--model gru`, 48 MFCC frames).

use burn::backend::{Autodiff, NdArray};
use burn::nn::gru::{Gru, GruConfig};
use burn::prelude::*;
use burn::tensor::Distribution;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use ember_models::graph::join_params;

type A = Autodiff<NdArray>;

fn pass(c: &mut Criterion, hidden: usize, batch: usize, steps: usize) {
    let device = Default::default();
    let group = format!("gru_graph_h{hidden}_b{batch}/{steps}");
    let x = Tensor::<A, 3>::random([batch, steps, 39], Distribution::Default, &device);
    for (variant, join) in [("1-burn", false), ("2-joined", true)] {
        c.bench_with_input(BenchmarkId::new(&group, variant), &(), |bench, _| {
            bench.iter(|| {
                // fresh parameters each pass, as after an optimizer step
                let grus: Vec<Gru<A>> = [39, hidden]
                    .into_iter()
                    .map(|d| GruConfig::new(d, hidden, true).init(&device))
                    .collect();
                if join {
                    join_params(&grus);
                }
                let h = grus.iter().fold(x.clone(), |h, gru| gru.forward(h, None));
                drop(h.sum().backward());
            })
        });
    }
}

fn benches(c: &mut Criterion) {
    pass(c, 64, 16, 48);
    pass(c, 64, 16, 192);
    pass(c, 256, 64, 48);
}

criterion_group! {
    name = graph;
    config = Criterion::default().sample_size(10).measurement_time(std::time::Duration::from_secs(8));
    targets = benches
}
criterion_main!(graph);
