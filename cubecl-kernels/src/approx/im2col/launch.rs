//! Launches of the im2col and col2im kernels.

use super::Window;
use super::kernel::{col2im_kernel, im2col_kernel};
use crate::grid::Grid;
use burn_cubecl::CubeRuntime;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_std::{DType, Shape};
use cubecl::prelude::*;

/// Rows of `len` elements, 256 units a cube.
fn cubes<R: CubeRuntime>(client: &ComputeClient<R>, len: usize, rows: usize) -> Grid {
    Grid::new(client, [len.div_ceil(256), rows, 1])
}

/// Launches `im2col_kernel`: `x: [B, C, d, h, w]` (any strides) → `[G, Cg·kvol, B·L]`.
///
/// # Panics
/// If `x` is not f32 or its channels or spatial size are not the window's.
pub fn launch_im2col<R: CubeRuntime>(x: CubeTensor<R>, w: &Window) -> CubeTensor<R> {
    let batch = x.meta.shape()[0];
    let [groups, rows, len] = w.cols_shape(batch);
    let cols = launch_im2col_chunked(x, w, 1);
    burn_cubecl::ops::reshape(cols, Shape::new([groups, rows, len]))
}

/// [`launch_im2col`] with the columns of every `B / chunks` samples stored together:
/// `x: [B, C, d, h, w]` → `[chunks, G, Cg·kvol, (B / chunks)·L]`, chunk `s` holding the
/// columns of samples `s·B/chunks ..` (a split-K weight gradient reads each chunk as one
/// contiguous matrix).
///
/// # Panics
/// As [`launch_im2col`], and if `chunks` does not divide the batch.
pub fn launch_im2col_chunked<R: CubeRuntime>(
    x: CubeTensor<R>,
    w: &Window,
    chunks: usize,
) -> CubeTensor<R> {
    let dims = x.meta.shape().dims::<5>();
    assert_eq!(dims, w.input_shape(dims[0]), "im2col input");
    assert_eq!(x.dtype, DType::F32, "im2col works on f32 tensors");
    assert!(
        chunks >= 1 && dims[0] % chunks == 0,
        "im2col: {chunks} chunks of a batch of {}",
        dims[0]
    );
    let client = x.client.clone();
    let [groups, rows, len] = w.cols_shape(dims[0]);
    let chunk = len / chunks;
    let cols = empty_device_contiguous_dtype(
        client.clone(),
        x.device.clone(),
        Shape::new([chunks, groups, rows, chunk]),
        DType::F32,
    );
    if len * rows * groups > 0 {
        let grid = cubes(&client, len, groups * rows);
        let (gx, gy, gt) = grid.args();
        im2col_kernel::launch::<R>(
            &client,
            grid.count,
            CubeDim::new_1d(256),
            x.into_tensor_arg(),
            cols.clone().into_array_arg(),
            chunk as u32,
            gx,
            gy,
            gt,
            *w,
        );
    }
    cols
}

/// Launches `col2im_kernel`: `cols: [G, Cg·kvol, B·L]` (copied to contiguous if it is not) → `[B, C, d, h, w]`.
pub fn launch_col2im<R: CubeRuntime>(
    cols: CubeTensor<R>,
    batch: usize,
    w: &Window,
) -> CubeTensor<R> {
    // read as a flat array: a pitched tensor (CUDA pads rows) is copied out first
    let cols = burn_cubecl::kernel::into_contiguous(cols);
    let client = cols.client.clone();
    let x = empty_device_contiguous_dtype(
        client.clone(),
        cols.device.clone(),
        Shape::new(w.input_shape(batch)),
        DType::F32,
    );
    let plane: usize = w.input.iter().product();
    if batch * w.channels * plane > 0 {
        let grid = cubes(&client, plane, batch * w.channels);
        let (gx, gy, gt) = grid.args();
        col2im_kernel::launch::<R>(
            &client,
            grid.count,
            CubeDim::new_1d(256),
            cols.into_array_arg(),
            x.clone().into_array_arg(),
            batch as u32,
            gx,
            gy,
            gt,
            *w,
        );
    }
    x
}
