//! SparseAct's weight gradient: the block-sparse BSpMM kernel vs the dense matmul `Xᵀ · G` of
//! the same runtime, as in the paper's Figs. 4-5. The runtime is the one `EMBER_TEST_RUNTIME`
//! selects (`cubecl_kernels::testing`): wgpu by default (lavapipe on machines without a GPU),
//! `cuda` in a `--features cuda` build.
//!
//! Groups `bspmm_<runtime>_<samples>x<rows>x<d>_out<o>_b<b>`: row `0-dense` is Burn's matmul of
//! the dense input (Burn's autotune off), rows `s10` … `s90` the kernel on the input pruned at
//! that sparsity in the tile the device gets (`Tile::for_device`), and at 50 and 90 % the other
//! tile (`s50-staged` on wgpu, `s50-direct` on CUDA). The grid is cut where one product takes tens
//! of seconds on a CPU (see below); the pruning is not timed (it happens in the forward pass).
//! `cargo xtask bench` reports each row's ratio to `0-dense`. Shapes: the paper's input
//! (64, 196, 384) and the small ResMLP's channel-MLP inputs at batch 32 (64 patches; d 128 → 512
//! and 512 → 128).
//!
//! The host path's rows (ndarray, no device) come first: `bspmm_ndarray_…` and the pruning
//! apart, `bsr_prune_ndarray_…` ([`host_shape`]).

use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use cubecl_kernels::approx::ApproxMultiply;
use cubecl_kernels::bsr::keep_count;
use cubecl_kernels::bsr::prune::{launch_block_norms, launch_compress};
use cubecl_kernels::bsr::spmm::{Tile, device_tile, launch_weight_grad, launch_weight_grad_tiled};
use cubecl_kernels::testing::{TestBackend, TestRuntime};
use std::time::Duration;

mod common;

fn bench_shape<R: TestRuntime>(
    c: &mut Criterion,
    [samples, rows, d]: [usize; 3],
    out: usize,
    blocks: &[usize],
    sparsities: &[u32],
) {
    let device = Default::default();
    let dist = burn::tensor::Distribution::Normal(0.0, 1.0);
    let x = Tensor::<TestBackend<R>, 3>::random([samples, rows, d], dist, &device);
    let g = Tensor::<TestBackend<R>, 2>::random([samples * rows, out], dist, &device);
    let xt = x.clone().reshape([samples * rows, d]).transpose();
    let xp = match x.into_primitive() {
        TensorPrimitive::Float(t) => t,
        TensorPrimitive::QFloat(_) => unreachable!("f32 input"),
    };
    let gp = match g.clone().into_primitive() {
        TensorPrimitive::Float(t) => t,
        TensorPrimitive::QFloat(_) => unreachable!("f32 gradient"),
    };
    for &b in blocks {
        let group = format!("bspmm_{}_{samples}x{rows}x{d}_out{out}_b{b}", R::NAME);
        c.bench_with_input(BenchmarkId::new(&group, "0-dense"), &(), |bench, _| {
            bench.iter(|| {
                let dw = xt.clone().matmul(g.clone());
                <TestBackend<R> as Backend>::sync(&device).unwrap();
                dw
            })
        });
        let norms = launch_block_norms(&xp, b);
        let plain = ApproxMultiply::Plain;
        // the tile the device gets (rows `s…`), and at 50 and 90 % the other one (`s…-staged`,
        // `s…-direct`), to see the choice pay on this device
        let chosen = device_tile(&gp, b, plain.kind());
        let other = [Tile::staged(b), Tile::direct(b, plain.kind())]
            .into_iter()
            .find(|t| *t != chosen);
        for &s in sparsities {
            let keep = keep_count(rows * d.div_ceil(b), s as f64 / 100.0);
            let pruned = launch_compress(&xp, &norms, b, keep);
            let dims = [samples, rows, d];
            c.bench_with_input(
                BenchmarkId::new(&group, format!("s{s}")),
                &(),
                |bench, _| {
                    bench.iter(|| {
                        let dw = launch_weight_grad(&pruned, dims, b, &gp, &plain);
                        <TestBackend<R> as Backend>::sync(&device).unwrap();
                        dw
                    })
                },
            );
            let Some(tile) = other.filter(|_| s == 50 || s == 90) else {
                continue;
            };
            let row = format!("s{s}-{}", tile.name());
            c.bench_with_input(BenchmarkId::new(&group, row), &(), |bench, _| {
                bench.iter(|| {
                    let dw = launch_weight_grad_tiled(&pruned, dims, b, &gp, &plain, tile);
                    <TestBackend<R> as Backend>::sync(&device).unwrap();
                    dw
                })
            });
        }
    }
}

/// The rows on runtime `R`.
fn device_rows<R: TestRuntime>(c: &mut Criterion) {
    // On a 2-core CPU (lavapipe) one BSpMM at b = 4, s = 10 % takes ~41 s: the grid is cut to
    // what fits a bench run there; the sweep over s runs at the block sizes the paper's speed
    // claim is about.
    let sweep = [10, 30, 50, 70, 90];
    bench_shape::<R>(c, [64, 196, 384], 384, &[32, 64], &sweep);
    bench_shape::<R>(c, [64, 196, 384], 384, &[16], &[50, 90]);
    bench_shape::<R>(c, [64, 196, 384], 384, &[4, 8], &[90]);
    bench_shape::<R>(c, [32, 64, 128], 512, &[16, 64], &[50, 90]);
    bench_shape::<R>(c, [32, 64, 512], 128, &[16, 64], &[50, 90]);
}

/// The host path (ndarray, `cubecl_kernels::bsr::columns`) on one shape: the weight gradient
/// `bspmm_ndarray_<shape>_b<b>` against `0-dense` (burn-ndarray's matmul of the flat `Xᵀ · G`,
/// what a dense layer costs at least) and `1-burn` (Burn's own weight gradient of the 3-D input:
/// a matmul per sample, then their sum); and the pruning apart,
/// `bsr_prune_ndarray_<shape>_b<b>`: `0-copy` (copying the activation, which a dense layer
/// keeps) against the pruning at every sparsity.
fn host_shape(
    c: &mut Criterion,
    dims: [usize; 3],
    out: usize,
    blocks: &[usize],
    sparsities: &[u32],
) {
    use burn::backend::NdArray;
    use cubecl_kernels::bsr::columns::Columns;
    use cubecl_kernels::testing::uniform;
    let [samples, rows, d] = dims;
    let device = Default::default();
    let (xs, gs) = (
        uniform(samples * rows * d, 3),
        uniform(samples * rows * out, 4),
    );
    let x = Tensor::<NdArray, 3>::from_data(TensorData::new(xs.clone(), dims), &device);
    let g =
        Tensor::<NdArray, 3>::from_data(TensorData::new(gs.clone(), [samples, rows, out]), &device);
    let xt = x.clone().reshape([samples * rows, d]).transpose();
    let g2 = g.clone().reshape([samples * rows, out]);
    let (xp, gp) = (x.into_primitive().tensor(), g.into_primitive().tensor());
    let shape = format!("{samples}x{rows}x{d}");
    for &b in blocks {
        let group = format!("bspmm_ndarray_{shape}_out{out}_b{b}");
        c.bench_with_input(BenchmarkId::new(&group, "0-dense"), &(), |bench, _| {
            bench.iter(|| xt.clone().matmul(g2.clone()).into_data())
        });
        c.bench_with_input(BenchmarkId::new(&group, "1-burn"), &(), |bench, _| {
            bench.iter(|| {
                let dw = <NdArray as burn::tensor::ops::ModuleOps<NdArray>>::linear_weight_backward(
                    xp.clone(),
                    gp.clone(),
                );
                Tensor::<NdArray, 2>::from_primitive(TensorPrimitive::Float(dw)).into_data()
            })
        });
        let prune_group = format!("bsr_prune_ndarray_{shape}_b{b}");
        c.bench_with_input(BenchmarkId::new(&prune_group, "0-copy"), &(), |bench, _| {
            bench.iter(|| xs.to_vec())
        });
        for &s in sparsities {
            let keep = keep_count(rows * d.div_ceil(b), s as f64 / 100.0);
            c.bench_with_input(
                BenchmarkId::new(&prune_group, format!("s{s}")),
                &(),
                |bench, _| bench.iter(|| Columns::prune(&xs, dims, b, keep, None)),
            );
            let pruned = Columns::prune(&xs, dims, b, keep, None);
            c.bench_with_input(
                BenchmarkId::new(&group, format!("s{s}")),
                &(),
                |bench, _| bench.iter(|| pruned.weight_grad(&gs, out, &ApproxMultiply::Plain)),
            );
        }
    }
}

/// The host rows (always: they need no device).
fn host_rows(c: &mut Criterion) {
    let sweep = [50, 80, 90];
    host_shape(c, [64, 196, 384], 384, &[16, 32, 64], &sweep);
    host_shape(c, [32, 64, 128], 512, &[16, 64], &sweep);
    host_shape(c, [32, 64, 512], 128, &[16, 64], &sweep);
}

// The rows, on the runtime `EMBER_TEST_RUNTIME` selects.
common::device_bench!(bspmm, device_rows);

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = host_rows, bspmm
}
criterion_main!(benches);
