//! What the sparse-product benches share: the dense matmul row each sparse product is measured
//! against, and the activations both use.
//!
//! Each bench binary uses a part of it.
#![allow(dead_code)]

use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use criterion::{BenchmarkId, Criterion};
use cubecl_kernels::testing::uniform;

/// Benches `group/0-dense`, `x · w` for `x: [m, K]` (uniform, seed 3) and a dense `w: [K, out]`
/// (seed 4) on `B`, each call ended by `finish` (reading the result back on the host path,
/// waiting for the device elsewhere); returns `x`'s values and tensor for the sparse rows.
pub fn dense_row<B: Backend>(
    c: &mut Criterion,
    group: &str,
    [m, k, out]: [usize; 3],
    device: &B::Device,
    finish: impl Fn(Tensor<B, 2>),
) -> (Vec<f32>, Tensor<B, 2>) {
    let xs = uniform(m * k, 3);
    let x = Tensor::<B, 2>::from_data(TensorData::new(xs.clone(), [m, k]), device);
    let w = Tensor::<B, 2>::from_data(TensorData::new(uniform(k * out, 4), [k, out]), device);
    c.bench_with_input(BenchmarkId::new(group, "0-dense"), &(), |b, _| {
        b.iter(|| finish(x.clone().matmul(w.clone())))
    });
    (xs, x)
}

/// An f32 tensor's primitive.
pub fn primitive<B: Backend>(x: Tensor<B, 2>) -> B::FloatTensorPrimitive {
    match x.into_primitive() {
        TensorPrimitive::Float(t) => t,
        TensorPrimitive::QFloat(_) => unreachable!("f32 input"),
    }
}

/// Prints how far a device result `got` is from the host reference `want` (the tests assert;
/// a bench reports, so a runtime that rounds differently still gets its rows): `bit-identical`,
/// or the count of differing values and the largest difference relative to the largest |want|.
pub fn report_difference(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let differing = got
        .iter()
        .zip(want)
        .filter(|(g, w)| g.to_bits() != w.to_bits())
        .count();
    if differing == 0 {
        eprintln!("{what}: device vs host, bit-identical");
        return;
    }
    let scale = want.iter().fold(0f32, |a, v| a.max(v.abs()));
    let worst = got
        .iter()
        .zip(want)
        .fold(0f32, |a, (g, w)| a.max((g - w).abs()));
    eprintln!(
        "{what}: device vs host, {differing} of {} values differ, max |Δ| / max |want| = {:.2e}",
        want.len(),
        worst / scale
    );
}

/// Defines `fn $name(c: &mut Criterion)`, which runs `$rows::<R>(c)` (a function generic over
/// `R: TestRuntime`) on the runtime `EMBER_TEST_RUNTIME` selects
/// (`cubecl_kernels::testing::on_selected_runtime`).
macro_rules! device_bench {
    ($name:ident, $rows:ident) => {
        fn $name(c: &mut criterion::Criterion) {
            struct Rows<'a>(&'a mut criterion::Criterion);
            impl cubecl_kernels::testing::RuntimeTest for Rows<'_> {
                fn run<R: cubecl_kernels::testing::TestRuntime>(self) {
                    $rows::<R>(self.0);
                }
            }
            cubecl_kernels::testing::on_selected_runtime(Rows(c));
        }
    };
}
pub(crate) use device_bench;
