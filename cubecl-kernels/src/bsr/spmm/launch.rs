//! Launch of the block-sparse weight-gradient kernel.

use super::kernel::weight_grad_kernel;
use super::{UNITS, cols_per_unit, rows_per_unit};
use crate::approx::ApproxMultiply;
use crate::bsr::prune::{Blocks, PrunedCube};
use burn_cubecl::CubeRuntime;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_std::{DType, Shape};
use cubecl::prelude::*;

/// Launches [`weight_grad_kernel`]: `dW: [d, out]` from a pruned input of `samples × rows × d`
/// in blocks of `b` and `grad: [samples · rows, out]` (any strides).
///
/// # Panics
/// If the shapes disagree or `grad` is not f32.
pub fn launch_weight_grad<R: CubeRuntime>(
    x: &PrunedCube<R>,
    [samples, rows, d]: [usize; 3],
    b: usize,
    grad: &CubeTensor<R>,
    mul: &ApproxMultiply,
) -> CubeTensor<R> {
    let g = Blocks { rows, d, b };
    let [grad_rows, out] = grad.meta.shape().dims::<2>();
    assert_eq!(grad_rows, samples * rows, "weight gradient: grad rows");
    assert_eq!(grad.dtype, DType::F32, "weight gradient of f32 tensors");
    let [vs, keep, vb] = x.values.meta.shape().dims::<3>();
    assert_eq!((vs, vb), (samples, b), "pruned values");
    let client = grad.client.clone();
    let dw = empty_device_contiguous_dtype(
        client.clone(),
        grad.device.clone(),
        Shape::new([d, out]),
        DType::F32,
    );
    if d * out == 0 {
        return dw;
    }
    let kind = mul.kind();
    let words = mul.lut_words();
    let lut = client.create_from_slice(words);
    let row_tiles = b.div_ceil(UNITS as usize * rows_per_unit(b, kind));
    let count = CubeCount::Static(
        out.div_ceil(UNITS as usize * cols_per_unit(kind)) as u32,
        (g.columns() * row_tiles) as u32,
        1,
    );
    weight_grad_kernel::launch::<R>(
        &client,
        count,
        CubeDim::new_2d(UNITS, UNITS),
        x.values.clone().into_array_arg(),
        x.col.clone().into_array_arg(),
        x.crow.clone().into_array_arg(),
        grad.clone().into_tensor_arg(),
        unsafe { ArrayArg::from_raw_parts(lut, words.len() / 4) },
        dw.clone().into_array_arg(),
        samples as u32,
        keep as u32,
        g,
        kind,
    );
    dw
}
