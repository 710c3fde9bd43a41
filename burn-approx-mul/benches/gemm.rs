//! ApproxMul's GEMM against the same runtime's native matmul, measured in the same run:
//! 512³ and layer shapes of LeNet-300-100, LeNet-5 (conv2 as im2col GEMM, batch 64) and
//! ResNet-18 (a 3×3 256→256 convolution at 14×14 as im2col GEMM, batch 4).
//!
//! Rows of a group: `1-native` (the inner backend's matmul, reached through the decorator with
//! `Multiplier::native`), `2-fp32` (Ember's kernel with a plain `*`), then the approximate
//! multipliers: `3-mbm5` (LUT in shared memory), `4-mbm7` (AFM16, LUT in shared memory as packed bytes),
//! `5-mbm23` (AFM32, evaluated in the kernel). On ndarray the Ember rows are the host path. On
//! the CubeCL runtime, `6-mbm5-<tile>` and `7-mbm7-<tile>` run the GEMM kernel in the tile the
//! device does not get (`staged` on a CPU running the kernels, `direct` on a GPU).
//!
//! Groups `gemm_<shape>/<backend>`: `ndarray`, then the CubeCL runtime `EMBER_TEST_RUNTIME`
//! selects (`cubecl_kernels::testing`): `wgpu` by default, `cuda` in a `--features cuda` build.

use burn::backend::NdArray;
use burn::prelude::*;
use burn_approx_mul::{ApproxDevice, ApproxMul, Multiplier};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use cubecl_kernels::decorator::KernelBackend;
use cubecl_kernels::testing::{RuntimeTest, TestBackend, TestRuntime, on_selected_runtime};

const SHAPES: [(&str, [usize; 3]); 4] = [
    ("512x512x512", [512, 512, 512]),
    ("lenet300_fc1_b64_64x784x300", [64, 784, 300]),
    ("lenet5_conv2_b64_16x150x6400", [16, 150, 6400]),
    ("resnet18_conv3x3_256_b4_256x2304x784", [256, 2304, 784]),
];

const MULTIPLIERS: [(&str, &str); 5] = [
    ("1-native", "native"),
    ("2-fp32", "fp32"),
    ("3-mbm5", "mbm5"),
    ("4-mbm7", "mbm7"),
    ("5-mbm23", "mbm23"),
];

fn gemm<B: KernelBackend>(c: &mut Criterion, backend: &str) {
    for (shape_name, [m, k, n]) in SHAPES {
        for (variant, spec) in MULTIPLIERS {
            let device =
                ApproxDevice::<B>::new(Default::default(), Multiplier::parse(spec).unwrap());
            type T<B> = Tensor<ApproxMul<B>, 2>;
            let a = T::<B>::random([m, k], burn::tensor::Distribution::Default, &device);
            let b = T::<B>::random([k, n], burn::tensor::Distribution::Default, &device);
            c.bench_with_input(
                BenchmarkId::new(format!("gemm_{shape_name}/{backend}"), variant),
                &(),
                |bench, _| {
                    bench.iter(|| {
                        let y = a.clone().matmul(b.clone());
                        ApproxMul::<B>::sync(&device).unwrap();
                        y
                    })
                },
            );
        }
    }
}

/// The rows on the runtime `EMBER_TEST_RUNTIME` selects.
struct Rows<'a>(&'a mut Criterion);

impl RuntimeTest for Rows<'_> {
    fn run<R: TestRuntime>(self) {
        gemm::<TestBackend<R>>(self.0, R::NAME);
        other_tile::<R>(self.0);
    }
}

/// The table rows in the kernel tile the runtime's device does not get (the staged tile on a
/// CPU running the kernels, the direct one on a GPU), launched below the decorator: the
/// before/after of the tile choice in one run.
fn other_tile<R: TestRuntime>(c: &mut Criterion) {
    use burn::tensor::TensorPrimitive;
    use cubecl_kernels::approx::gemm::{self, Tile};
    type T<R> = Tensor<TestBackend<R>, 3>;
    let device = Default::default();
    for (shape_name, [m, k, n]) in SHAPES {
        let a = T::<R>::random([1, m, k], burn::tensor::Distribution::Default, &device);
        let b = T::<R>::random([1, k, n], burn::tensor::Distribution::Default, &device);
        let primitive = |t: &T<R>| t.clone().into_primitive().tensor();
        let tile = match gemm::device_tile(&primitive(&a), n) {
            Tile::Direct { .. } => Tile::Staged(gemm::Tiling::choose(m, n)),
            Tile::Staged(_) => Tile::DIRECT,
        };
        let name = tile.name();
        for (variant, spec) in [("6-mbm5", "mbm5"), ("7-mbm7", "mbm7")] {
            let mul = Multiplier::parse(spec).unwrap().approx().unwrap().clone();
            c.bench_with_input(
                BenchmarkId::new(
                    format!("gemm_{shape_name}/{}", R::NAME),
                    format!("{variant}-{name}"),
                ),
                &(),
                |bench, _| {
                    bench.iter(|| {
                        let y = gemm::launch_tiled(primitive(&a), primitive(&b), &mul, tile);
                        let y = T::<R>::from_primitive(TensorPrimitive::Float(y));
                        TestBackend::<R>::sync(&device).unwrap();
                        y
                    })
                },
            );
        }
    }
}

fn benches(c: &mut Criterion) {
    gemm::<NdArray>(c, "ndarray");
    on_selected_runtime(Rows(c));
}

criterion_group! {
    name = approx_gemm;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(4));
    targets = benches
}
criterion_main!(approx_gemm);
