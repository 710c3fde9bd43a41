//! Launch of the block-sparse weight-gradient kernels.

use super::Tile;
use super::kernel::{weight_grad_direct_kernel, weight_grad_staged_kernel};
use crate::approx::{ApproxMultiply, MulKind};
use crate::bsr::prune::{Blocks, PrunedCube};
use crate::grid::Grid;
use burn_cubecl::CubeRuntime;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_std::{DType, Shape};
use cubecl::prelude::*;

/// Launches the weight gradient `dW: [d, out]` from a pruned input of `samples × rows × d`
/// in blocks of `b` and `grad: [samples · rows, out]` (any strides), in the tile
/// [`Tile::for_device`] picks for the gradient's device.
///
/// # Panics
/// If the shapes disagree or `grad` is not f32.
pub fn launch_weight_grad<R: CubeRuntime>(
    x: &PrunedCube<R>,
    dims: [usize; 3],
    b: usize,
    grad: &CubeTensor<R>,
    mul: &ApproxMultiply,
) -> CubeTensor<R> {
    let tile = device_tile(grad, b, mul.kind());
    launch_weight_grad_tiled(x, dims, b, grad, mul, tile)
}

/// The tile [`Tile::for_device`] picks for blocks of `b` under `kind` on the device of `grad`
/// (a GPU or not: [`is_gpu`](crate::runtime::is_gpu)).
pub fn device_tile<R: CubeRuntime>(grad: &CubeTensor<R>, b: usize, kind: MulKind) -> Tile {
    Tile::for_device(crate::runtime::is_gpu(&grad.client), b, kind)
}

/// [`launch_weight_grad`] in the given tile (the tests and the bench run both).
///
/// # Panics
/// As [`launch_weight_grad`], and if the tile does not [fit](Tile::fits) the multiply.
pub fn launch_weight_grad_tiled<R: CubeRuntime>(
    x: &PrunedCube<R>,
    [samples, rows, d]: [usize; 3],
    b: usize,
    grad: &CubeTensor<R>,
    mul: &ApproxMultiply,
    tile: Tile,
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
    assert!(
        tile.fits(kind),
        "weight gradient: {tile:?} does not fit {kind:?}"
    );
    let words = mul.lut_words();
    let lut = client.create_from_slice(words);
    let grid = Grid::new(
        &client,
        [
            out.div_ceil(tile.cols_per_cube()),
            g.columns() * tile.row_tiles(b),
            1,
        ],
    );
    let (gx, gy, gt) = grid.args();
    // the two kernels take the same arguments
    macro_rules! launch {
        ($kernel:ident, $rows:expr, $cols:expr) => {
            $kernel::launch::<R>(
                &client,
                grid.count,
                tile.cube_dim(),
                x.values.clone().into_array_arg(),
                x.col.clone().into_array_arg(),
                x.crow.clone().into_array_arg(),
                grad.clone().into_tensor_arg(),
                unsafe { ArrayArg::from_raw_parts(lut, words.len() / 4) },
                dw.clone().into_array_arg(),
                samples as u32,
                keep as u32,
                gx,
                gy,
                gt,
                g,
                $rows,
                $cols,
                kind,
            )
        };
    }
    match tile {
        Tile::Staged { rows, cols } => launch!(weight_grad_staged_kernel, rows, cols),
        Tile::Direct { rows, cols } => launch!(weight_grad_direct_kernel, rows, cols),
    }
    dw
}
