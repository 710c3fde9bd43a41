//! HiNM's sparse product against the dense matmul of the same dtype (f32) on ResNet and DeiT
//! layer shapes, on the host path (the ndarray route: row `0-dense` is burn-ndarray's matmul,
//! i.e. `matrixmultiply`'s sgemm) and on the CubeCL runtime `EMBER_TEST_RUNTIME` selects
//! (`cubecl_kernels::testing`): wgpu by default (lavapipe on machines without a GPU: row
//! `0-dense` is Burn's wgpu matmul, autotune off), CUDA with `cuda` in a `--features cuda`
//! build (row `0-dense` Burn's CUDA matmul, autotune off).
//!
//! Groups `hinm_<path>_<layer>_m<M>_k<K>_o<out>`; rows `0-dense`, `75` and `87.5` (total
//! sparsity, V = 64, random output and input permutations), and `75-unpermuted` (identity
//! output permutation, kept columns ascending): permuted ÷ unpermuted should be 1.00 within
//! noise, since the permutations are folded into the kernel's loads and stores. CubeCL has no
//! sparse tensor-core instruction: the kernel gains only by skipping pruned products.

use burn::backend::NdArray;
use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use cubecl_kernels::hinm::{Packed, PackedCube, launch_spmm, reference};
use cubecl_kernels::testing::{TestBackend, TestRuntime, random_packed};
use std::time::Duration;

mod common;

/// ResNet-18 (ImageNet, batch 1) and DeiT-S (batch 1) GEMMs: (name, M, K, out).
const SHAPES: [(&str, usize, usize, usize); 4] = [
    ("resnet18-layer3-conv", 196, 2304, 256),
    ("resnet18-layer4-conv", 49, 4608, 512),
    ("deit-s-fc1", 197, 384, 1536),
    ("deit-s-fc2", 197, 1536, 384),
];

/// `w` with no permutation: identity output order, each tile's kept columns ascending.
fn unpermuted(mut w: Packed) -> Packed {
    w.out_perm = (0..w.out as u32).collect();
    for tile in w.cols.chunks_mut(w.nnz) {
        tile.sort_unstable();
    }
    w
}

fn levels(out: usize, k: usize) -> Vec<(&'static str, Packed)> {
    let v = 64;
    // kept columns per tile: 2·(1 − total) of K (75 % → K/2, 87.5 % → K/4), in groups of 4
    let at = |total: f64| ((k as f64 * 2.0 * (1.0 - total)) as usize) / 4 * 4;
    let p75 = random_packed(out, k, v, at(0.75), 1);
    vec![
        ("75", p75.clone()),
        ("87.5", random_packed(out, k, v, at(0.875), 2)),
        ("75-unpermuted", unpermuted(p75)),
    ]
}

fn host(c: &mut Criterion) {
    for (name, m, k, out) in SHAPES {
        let group = format!("hinm_host_{name}_m{m}_k{k}_o{out}");
        let (x, _) =
            common::dense_row::<NdArray>(c, &group, [m, k, out], &Default::default(), |y| {
                y.into_data();
            });
        for (level, packed) in levels(out, k) {
            c.bench_with_input(BenchmarkId::new(&group, level), &(), |b, _| {
                b.iter(|| reference::spmm(&x, m, &packed))
            });
        }
    }
}

// The device rows, on the runtime `EMBER_TEST_RUNTIME` selects.
common::device_bench!(device, device_rows);

/// The kernel against the backend's dense matmul on runtime `R`, after comparing the kernel's
/// result with the host implementation on every level (printed).
fn device_rows<R: TestRuntime>(c: &mut Criterion) {
    type B<R> = TestBackend<R>;
    let (device, runtime) = (R::Device::default(), R::NAME);
    for (name, m, k, out) in SHAPES {
        let group = format!("hinm_{runtime}_{name}_m{m}_k{k}_o{out}");
        let (xs, x) = common::dense_row::<B<R>>(c, &group, [m, k, out], &device, |_| {
            B::<R>::sync(&device).unwrap();
        });
        let xp = common::primitive(x);
        for (level, packed) in levels(out, k) {
            let cube = PackedCube::upload(&packed, &device);
            let got: Vec<f32> =
                Tensor::<B<R>, 2>::from_primitive(TensorPrimitive::Float(launch_spmm(&xp, &cube)))
                    .into_data()
                    .to_vec()
                    .unwrap();
            common::report_difference(
                &format!("{group}/{level}"),
                &got,
                &reference::spmm(&xs, m, &packed),
            );
            c.bench_with_input(BenchmarkId::new(&group, level), &(), |b, _| {
                b.iter(|| {
                    let y = launch_spmm(&xp, &cube);
                    B::<R>::sync(&device).unwrap();
                    y
                })
            });
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = host, device
}
criterion_main!(benches);
