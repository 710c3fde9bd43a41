//! The host convolution (`cubecl_kernels::conv`: im2col per sample + the `gemm` crate, the
//! native convolution of ndarray's GEMM routes) at batch 64, every core, against the forward
//! product's GEMM alone on columns made beforehand.
//!
//! Shapes: ResNet-18-w16's 3 × 3 convolutions at CIFAR-10's sizes (padding 1: the stem, each
//! stage's stride-1 layer, and the first stage's stride-2 downsampling, whose rows are not
//! contiguous),
//! LeNet-5's two 5 × 5 layers (the first padded by 2, the second unpadded).
//!
//! Groups `conv_host_<shape>`, rows:
//!
//! - `0-gemm`: the forward product `W [C_out, K] · cols [K, B·L]` by the `gemm` crate on the
//!   batch's im2col columns, made before timing: the convolution's multiply-adds without its
//!   data movement.
//! - `1-forward`, `2-input-grad`, `3-weight-grad`: `conv::forward` (no bias), `conv::input_grad`
//!   and `conv::weight_grad`.
//! - `4-lut7-forward`, `5-lut7-input-grad`, `6-lut7-weight-grad`: the same three products under
//!   a 7-bit multiplier table (AFM16's width; Mitchell's table, its contents do not change the
//!   time), `approx::gemm::conv_forward`, `conv_input_grad` and `conv_weight_grad`: ApproxMul's
//!   host convolution, to read against rows 1-3 (the step-level target is AFM16 within 2× of
//!   the native step).

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use cubecl_kernels::approx::gemm::{conv_forward, conv_input_grad, conv_weight_grad};
use cubecl_kernels::approx::im2col::Window;
use cubecl_kernels::conv::{DenseConv, forward, im2col_batch, input_grad, weight_grad};
use cubecl_kernels::testing::{mitchell_table, uniform};
use std::time::Duration;

const BATCH: usize = 64;

/// (name, input channels, input side, output channels, kernel, stride, padding).
const SHAPES: [(&str, usize, usize, usize, usize, usize, usize); 8] = [
    ("r18w16_3x32", 3, 32, 16, 3, 1, 1),
    ("r18w16_16x32", 16, 32, 16, 3, 1, 1),
    ("r18w16_16x32_s2", 16, 32, 32, 3, 2, 1),
    ("r18w16_32x16", 32, 16, 32, 3, 1, 1),
    ("r18w16_64x8", 64, 8, 64, 3, 1, 1),
    ("r18w16_128x4", 128, 4, 128, 3, 1, 1),
    ("lenet5_1x28", 1, 28, 6, 5, 1, 2),
    ("lenet5_6x14", 6, 14, 16, 5, 1, 0),
];

fn bench(c: &mut Criterion) {
    for (name, channels, side, out_channels, kernel, stride, padding) in SHAPES {
        let window = Window {
            channels,
            input: [1, side, side],
            kernel: [1, kernel, kernel],
            stride: [1, stride, stride],
            padding: [0, padding, padding],
            dilation: [1; 3],
            groups: 1,
        };
        let conv = DenseConv {
            batch: BATCH,
            window,
            out_channels,
        };
        let k = channels * kernel * kernel;
        let n = BATCH * window.positions();
        let x = uniform(BATCH * channels * side * side, 1);
        let w = uniform(out_channels * k, 2);
        let dy = uniform(n * out_channels, 3);
        let cols = im2col_batch(&x, BATCH, &window);
        let group = format!("conv_host_{name}");
        c.bench_with_input(BenchmarkId::new(&group, "0-gemm"), &(), |b, _| {
            b.iter(|| {
                let mut y = vec![0f32; out_channels * n];
                // SAFETY: `w` is `[C_out, K]`, `cols` `[K, n]` and `y` `[C_out, n]`, row-major.
                unsafe {
                    gemm::gemm(
                        out_channels,
                        n,
                        k,
                        y.as_mut_ptr(),
                        1,
                        n as isize,
                        false,
                        w.as_ptr(),
                        1,
                        k as isize,
                        cols.as_ptr(),
                        1,
                        n as isize,
                        1.0,
                        1.0,
                        false,
                        false,
                        false,
                        gemm::Parallelism::Rayon(0),
                    )
                };
                y
            })
        });
        c.bench_with_input(BenchmarkId::new(&group, "1-forward"), &(), |b, _| {
            b.iter(|| forward(&x, &w, None, &conv))
        });
        c.bench_with_input(BenchmarkId::new(&group, "2-input-grad"), &(), |b, _| {
            b.iter(|| input_grad(&dy, &w, &conv))
        });
        c.bench_with_input(BenchmarkId::new(&group, "3-weight-grad"), &(), |b, _| {
            b.iter(|| weight_grad(&x, &dy, &conv))
        });
        let lut = mitchell_table(7);
        let expanded = |y: Option<Vec<f32>>| y.expect("the expansion takes every shape here");
        c.bench_with_input(BenchmarkId::new(&group, "4-lut7-forward"), &(), |b, _| {
            b.iter(|| expanded(conv_forward(&x, &w, BATCH, &window, &lut)))
        });
        c.bench_with_input(
            BenchmarkId::new(&group, "5-lut7-input-grad"),
            &(),
            |b, _| b.iter(|| expanded(conv_input_grad(&dy, &w, BATCH, &window, &lut))),
        );
        c.bench_with_input(
            BenchmarkId::new(&group, "6-lut7-weight-grad"),
            &(),
            |b, _| b.iter(|| expanded(conv_weight_grad(&x, &dy, BATCH, &window, &lut))),
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
