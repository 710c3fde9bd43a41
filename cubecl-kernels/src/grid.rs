//! What the sparse products (HiNM's and BCRC's kernels) share on the device: their weights'
//! arrays uploaded, and the output and launch grid — one unit per output of `y: [m, out]`,
//! units along `x` over the outputs' columns (consecutive weight rows, which share their loads)
//! and along `y` over the activation rows.

use burn_cubecl::CubeRuntime;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_std::{DType, Shape};
use cubecl::prelude::*;

/// Units of a cube along each axis.
const UNITS: u32 = 16;

/// For `x: [m, K]` times a weight `out × K`: `m`, a contiguous f32 `[m, out]` output on `x`'s
/// device (contiguous even where the runtime pads the rows of the tensors it creates: the
/// kernels write it as a flat array), and the grid of one unit per output, `None` when there is
/// no output to compute.
///
/// # Panics
/// If `x` is not f32 or its columns are not the weight's `k` (`what` names the product).
pub(crate) fn outputs<R: CubeRuntime>(
    x: &CubeTensor<R>,
    k: usize,
    out: usize,
    what: &str,
) -> (usize, CubeTensor<R>, Option<(CubeCount, CubeDim)>) {
    let [m, xk] = x.meta.shape().dims::<2>();
    assert_eq!(xk, k, "{what}: x has {xk} columns, the weight {k}");
    assert_eq!(x.dtype, DType::F32, "{what} works on f32 tensors");
    let y = empty_device_contiguous_dtype(
        x.client.clone(),
        x.device.clone(),
        Shape::new([m, out]),
        DType::F32,
    );
    let grid = (m * out > 0).then(|| {
        (
            CubeCount::Static((out as u32).div_ceil(UNITS), (m as u32).div_ceil(UNITS), 1),
            CubeDim::new_2d(UNITS, UNITS),
        )
    });
    (m, y, grid)
}

/// `values` as a contiguous tensor of `shape` on `device`. An empty array becomes one unused
/// element: a kernel argument needs a buffer.
pub(crate) fn upload<R: CubeRuntime, T: bytemuck::Pod + Default>(
    device: &R::Device,
    values: &[T],
    shape: &[usize],
    dtype: DType,
) -> CubeTensor<R> {
    let client = R::client(device);
    let one = [T::default()];
    let (values, shape) = if values.is_empty() {
        (&one[..], vec![1])
    } else {
        (values, shape.to_vec())
    };
    CubeTensor::new_contiguous(
        client.clone(),
        device.clone(),
        Shape::from(shape),
        client.create_from_slice(bytemuck::cast_slice(values)),
        dtype,
    )
}
