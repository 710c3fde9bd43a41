//! What the sparse-product benches share: the dense matmul row each sparse product is measured
//! against, and the activations both use.

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
