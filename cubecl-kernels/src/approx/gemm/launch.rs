//! Launch of the GEMM: tiling, split-K, the table words uploaded.

use super::Tiling;
use super::kernel::{approx_gemm_kernel, sum_chunks_kernel};
use crate::approx::{ApproxMultiply, split_k};
use burn_cubecl::CubeRuntime;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_std::{DType, Shape};
use cubecl::prelude::*;

/// Launches [`approx_gemm_kernel`]: `lhs: [batch, m, k]`, `rhs: [batch, k, n]` (f32, any
/// strides) → a new contiguous `[batch, m, n]`.
///
/// # Panics
/// If ranks, batch sizes, inner sizes or dtypes disagree (callers reshape and check first).
pub fn launch<R: CubeRuntime>(
    lhs: CubeTensor<R>,
    rhs: CubeTensor<R>,
    mul: &ApproxMultiply,
) -> CubeTensor<R> {
    let [batch, m, k] = lhs.meta.shape().dims();
    let [batch_r, k_r, n] = rhs.meta.shape().dims();
    assert_eq!(
        (batch, k),
        (batch_r, k_r),
        "approx_gemm: [b, m, k] · [b, k, n]"
    );
    assert!(
        lhs.dtype == DType::F32 && rhs.dtype == DType::F32,
        "approx_gemm works on f32 tensors"
    );
    let client = lhs.client.clone();
    let device = lhs.device.clone();
    let chunk = split_k([batch, m, k, n]);
    let splits = k.div_ceil(chunk).max(1);
    let new = |rows: usize| {
        empty_device_contiguous_dtype(
            client.clone(),
            device.clone(),
            Shape::new([rows, m, n]),
            DType::F32,
        )
    };
    let parts = new(splits * batch);
    if batch * m * n == 0 {
        return parts;
    }
    let kind = mul.kind();
    let words = mul.lut_words();
    let lut = client.create_from_slice(words);
    let tiling = Tiling::choose(m, n);
    let [ux, uy, ..] = tiling.dims();
    let count = CubeCount::Static(
        n.div_ceil(tiling.cols()) as u32,
        m.div_ceil(tiling.rows()) as u32,
        (splits * batch) as u32,
    );
    approx_gemm_kernel::launch::<R>(
        &client,
        count,
        CubeDim::new_2d(ux, uy),
        lhs.into_tensor_arg(),
        rhs.into_tensor_arg(),
        unsafe { ArrayArg::from_raw_parts(lut, words.len() / 4) },
        parts.clone().into_tensor_arg(),
        chunk as u32,
        kind,
        tiling,
    );
    if splits == 1 {
        return parts;
    }
    let out = new(batch);
    let units = 256u32;
    sum_chunks_kernel::launch::<R>(
        &client,
        CubeCount::Static(((batch * m * n) as u32).div_ceil(units), 1, 1),
        CubeDim::new_1d(units),
        parts.into_array_arg(),
        out.clone().into_array_arg(),
        splits as u32,
    );
    out
}
