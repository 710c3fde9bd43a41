//! HiNM's sparse product against the dense matmul of the same dtype (f32) on ResNet and DeiT
//! layer shapes, on the host path (the ndarray route: row `0-dense` is burn-ndarray's matmul,
//! i.e. `matrixmultiply`'s sgemm) and on wgpu (lavapipe on machines without a GPU: row
//! `0-dense` is Burn's wgpu matmul, autotune off), and with `--features cuda` on CUDA (row
//! `0-dense` Burn's CUDA matmul).
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
use cubecl_kernels::testing::random_packed;
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

fn wgpu(c: &mut Criterion) {
    if let Err(e) = cubecl_kernels::runtime::wgpu_adapter() {
        eprintln!("skipping the wgpu HiNM benches: {e}");
        return;
    }
    device_rows::<Wgpu, cubecl::wgpu::WgpuRuntime>(c, "wgpu");
}

#[cfg(feature = "cuda")]
fn cuda(c: &mut Criterion) {
    device_rows::<burn_cuda::Cuda, cubecl::cuda::CudaRuntime>(c, "cuda");
}

#[cfg(not(feature = "cuda"))]
fn cuda(_: &mut Criterion) {}

/// The kernel against the backend's dense matmul on runtime `R`, after checking the kernel's
/// result against the host implementation on every level (the largest difference relative to
/// the largest output is printed: 0 where the device rounds as the host does).
fn device_rows<B, R>(c: &mut Criterion, runtime: &str)
where
    R: burn_cubecl::CubeRuntime,
    B: Backend<FloatTensorPrimitive = burn_cubecl::tensor::CubeTensor<R>, Device = R::Device>,
{
    let device = R::Device::default();
    for (name, m, k, out) in SHAPES {
        let group = format!("hinm_{runtime}_{name}_m{m}_k{k}_o{out}");
        let (xs, x) = common::dense_row::<B>(c, &group, [m, k, out], &device, |_| {
            B::sync(&device).unwrap();
        });
        let xp = common::primitive(x);
        for (level, packed) in levels(out, k) {
            let cube = PackedCube::upload(&packed, &device);
            let got: Vec<f32> =
                Tensor::<B, 2>::from_primitive(TensorPrimitive::Float(launch_spmm(&xp, &cube)))
                    .into_data()
                    .to_vec()
                    .unwrap();
            let want = reference::spmm(&xs, m, &packed);
            let scale = want.iter().fold(0f32, |a, v| a.max(v.abs()));
            let worst = got
                .iter()
                .zip(&want)
                .fold(0f32, |a, (g, w)| a.max((g - w).abs()));
            eprintln!(
                "{group}/{level}: kernel vs host, max |Δ| / max |y| = {:.2e}",
                worst / scale
            );
            c.bench_with_input(BenchmarkId::new(&group, level), &(), |b, _| {
                b.iter(|| {
                    let y = launch_spmm(&xp, &cube);
                    B::sync(&device).unwrap();
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
    targets = host, wgpu, cuda
}
criterion_main!(benches);
