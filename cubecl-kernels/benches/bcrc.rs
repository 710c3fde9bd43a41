//! BCRC's sparse product against the dense matmul of the same dtype (f32) and against CSR, on
//! GRU and VGG-16 layer shapes at a pruning rate of about 10×: on the host path (the ndarray
//! route: row `0-dense` is burn-ndarray's matmul, i.e. `matrixmultiply`'s sgemm) and on the
//! CubeCL runtime `EMBER_TEST_RUNTIME` selects (`cubecl_kernels::testing`): wgpu by default
//! (lavapipe on machines without a GPU), `cuda` in a `--features cuda` build; row `0-dense` is
//! Burn's matmul on that runtime, autotune off.
//!
//! Groups `bcrc_<path>_<layer>_m<M>_k<K>_o<out>`. The weights are BCR patterns (every block
//! keeps a random sub-grid of rows × columns) in two block shapes: `4x16` (the paper's CNN
//! block; 2 rows × 3 columns kept of each, 10.7×) and `strip` (4 whole rows; 2 rows × K/20
//! columns kept, 10×: the kept rows of a strip share their columns). Rows per block shape:
//! `lre` (the rows of a column pattern together, each activation loaded once per pattern),
//! `no-lre` (the same arrays, rows one at a time) and `csr` (CSR, rows one at a time). On the device:
//! `lre` is the kernel on BCRC, `ungrouped` the same kernel with every row its own pattern.

use burn::backend::NdArray;
use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use cubecl_kernels::bcrc::{Bcrc, BcrcCube, Csr, launch_spmm, reference};
use cubecl_kernels::testing::{TestBackend, TestRuntime, random_bcrc};
use std::time::Duration;

mod common;

/// GRU (the paper's Fig. 15 matrices, batch 32 per step) and VGG-16 (CIFAR-10 conv at 16 × 16,
/// ImageNet conv at 14 × 14) GEMMs: (name, M, K, out).
const SHAPES: [(&str, usize, usize, usize); 5] = [
    ("gru-input", 32, 152, 1024),
    ("gru-512", 32, 512, 1024),
    ("gru-hidden", 32, 1024, 1024),
    ("vgg16-conv128", 256, 1152, 128),
    ("vgg16-conv512", 196, 4608, 512),
];

fn weights(out: usize, k: usize) -> [(&'static str, Bcrc); 2] {
    [
        ("4x16", random_bcrc(out, k, (4, 16), (2, 3), 1)),
        ("strip", random_bcrc(out, k, (4, k), (2, k / 20), 2)),
    ]
}

fn host(c: &mut Criterion) {
    for (name, m, k, out) in SHAPES {
        let group = format!("bcrc_host_{name}_m{m}_k{k}_o{out}");
        let (x, _) =
            common::dense_row::<NdArray>(c, &group, [m, k, out], &Default::default(), |y| {
                y.into_data();
            });
        for (shape, bcrc) in weights(out, k) {
            let csr = Csr::of(&bcrc);
            c.bench_with_input(
                BenchmarkId::new(&group, format!("{shape}-lre")),
                &(),
                |b, _| b.iter(|| reference::spmm(&x, m, &bcrc)),
            );
            c.bench_with_input(
                BenchmarkId::new(&group, format!("{shape}-no-lre")),
                &(),
                |b, _| b.iter(|| reference::spmm_no_lre(&x, m, &bcrc)),
            );
            c.bench_with_input(
                BenchmarkId::new(&group, format!("{shape}-csr")),
                &(),
                |b, _| b.iter(|| reference::spmm_csr(&x, m, &csr)),
            );
        }
    }
}

// The device rows, on the runtime `EMBER_TEST_RUNTIME` selects.
common::device_bench!(device, device_rows);

/// The kernel against the backend's dense matmul on runtime `R`, after comparing its result
/// with the host implementation (printed; the kernel tests assert it).
fn device_rows<R: TestRuntime>(c: &mut Criterion) {
    let device = R::Device::default();
    for (name, m, k, out) in SHAPES {
        let group = format!("bcrc_{}_{name}_m{m}_k{k}_o{out}", R::NAME);
        let (xs, x) = common::dense_row::<TestBackend<R>>(c, &group, [m, k, out], &device, |_| {
            <TestBackend<R> as Backend>::sync(&device).unwrap();
        });
        let xp = common::primitive(x);
        for (shape, bcrc) in weights(out, k) {
            for (label, layout) in [("lre", bcrc.clone()), ("ungrouped", bcrc.ungrouped())] {
                let cube = BcrcCube::upload(&layout, &device);
                let got: Vec<f32> = Tensor::<TestBackend<R>, 2>::from_primitive(
                    TensorPrimitive::Float(launch_spmm(&xp, &cube)),
                )
                .into_data()
                .to_vec()
                .unwrap();
                common::report_difference(
                    &format!("{group}/{shape}-{label}"),
                    &got,
                    &reference::spmm(&xs, m, &bcrc),
                );
                c.bench_with_input(
                    BenchmarkId::new(&group, format!("{shape}-{label}")),
                    &(),
                    |b, _| {
                        b.iter(|| {
                            let y = launch_spmm(&xp, &cube);
                            <TestBackend<R> as Backend>::sync(&device).unwrap();
                            y
                        })
                    },
                );
            }
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
