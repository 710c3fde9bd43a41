//! HiNM's sparse product against the dense matmul of the same dtype (f32) on ResNet and DeiT
//! layer shapes, on the host path (the ndarray route: row `0-dense` is burn-ndarray's matmul,
//! i.e. `matrixmultiply`'s sgemm) and on wgpu (lavapipe on machines without a GPU: row
//! `0-dense` is Burn's wgpu matmul, autotune off).
//!
//! Groups `hinm_<path>_<layer>_m<M>_k<K>_o<out>`; rows `0-dense`, `75` and `87.5` (total
//! sparsity, V = 64, random output and input permutations), and `75-unpermuted` (identity
//! output permutation, kept columns ascending): permuted ÷ unpermuted should be 1.00 within
//! noise, since the permutations are folded into the kernel's loads and stores. CubeCL has no
//! sparse tensor-core instruction: the kernel gains only by skipping pruned products.

use burn::backend::{NdArray, Wgpu};
use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use cubecl_kernels::hinm::{Packed, PackedCube, launch_spmm, reference};
use cubecl_kernels::testing::{random_packed, uniform};
use std::time::Duration;

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
        let x = uniform(m * k, 3);
        let device = Default::default();
        let xt = Tensor::<NdArray, 2>::from_data(TensorData::new(x.clone(), [m, k]), &device);
        let w = Tensor::<NdArray, 2>::from_data(
            TensorData::new(uniform(k * out, 4), [k, out]),
            &device,
        );
        c.bench_with_input(BenchmarkId::new(&group, "0-dense"), &(), |b, _| {
            b.iter(|| xt.clone().matmul(w.clone()).into_data())
        });
        for (level, packed) in levels(out, k) {
            c.bench_with_input(BenchmarkId::new(&group, level), &(), |b, _| {
                b.iter(|| reference::spmm(&x, m, &packed))
            });
        }
    }
}

fn wgpu(c: &mut Criterion) {
    if let Err(e) = cubecl_kernels::runtime::wgpu_adapter() {
        eprintln!("skipping the wgpu HiNM benches: {e}");
        return;
    }
    let device = Default::default();
    for (name, m, k, out) in SHAPES {
        let group = format!("hinm_wgpu_{name}_m{m}_k{k}_o{out}");
        let x = Tensor::<Wgpu, 2>::from_data(TensorData::new(uniform(m * k, 3), [m, k]), &device);
        let w =
            Tensor::<Wgpu, 2>::from_data(TensorData::new(uniform(k * out, 4), [k, out]), &device);
        c.bench_with_input(BenchmarkId::new(&group, "0-dense"), &(), |b, _| {
            b.iter(|| {
                let y = x.clone().matmul(w.clone());
                <Wgpu as Backend>::sync(&device).unwrap();
                y
            })
        });
        let xp = match x.clone().into_primitive() {
            TensorPrimitive::Float(t) => t,
            TensorPrimitive::QFloat(_) => unreachable!("f32 input"),
        };
        for (level, packed) in levels(out, k) {
            let cube = PackedCube::upload(&packed, &device);
            c.bench_with_input(BenchmarkId::new(&group, level), &(), |b, _| {
                b.iter(|| {
                    let y = launch_spmm(&xp, &cube);
                    <Wgpu as Backend>::sync(&device).unwrap();
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
    targets = host, wgpu
}
criterion_main!(benches);
