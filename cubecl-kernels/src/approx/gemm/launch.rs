//! Launch of the GEMM: the tile, split-K, the table words uploaded.

use super::Tile;
use super::kernel::{approx_gemm_direct_kernel, approx_gemm_kernel, sum_chunks_kernel};
use crate::approx::{ApproxMultiply, gpu_tiles, split_k_for};
use crate::grid::Grid;
use burn_cubecl::CubeRuntime;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_std::{DType, Shape};
use cubecl::prelude::*;

/// Launches the GEMM `lhs: [batch, m, k]` · `rhs: [batch, k, n]` (f32, any strides) → a new
/// contiguous `[batch, m, n]`, in the tile [`device_tile`] picks for `lhs`'s device.
///
/// # Panics
/// If ranks, batch sizes, inner sizes or dtypes disagree (callers reshape and check first).
pub fn launch<R: CubeRuntime>(
    lhs: CubeTensor<R>,
    rhs: CubeTensor<R>,
    mul: &ApproxMultiply,
) -> CubeTensor<R> {
    let tile = device_tile(&lhs, rhs.meta.shape().dims::<3>()[2]);
    launch_tiled(lhs, rhs, mul, tile)
}

/// The tile [`Tile::for_device`] picks for `lhs · rhs` with `n` output columns on `lhs`'s
/// device (a GPU or not: [`is_gpu`](crate::runtime::is_gpu)).
pub fn device_tile<R: CubeRuntime>(lhs: &CubeTensor<R>, n: usize) -> Tile {
    let m = lhs.meta.shape().dims::<3>()[1];
    Tile::for_device(crate::runtime::is_gpu(&lhs.client), m, n)
}

/// [`launch`] in the given tile (the tests and the bench run both kinds).
///
/// # Panics
/// As [`launch`].
pub fn launch_tiled<R: CubeRuntime>(
    lhs: CubeTensor<R>,
    rhs: CubeTensor<R>,
    mul: &ApproxMultiply,
    tile: Tile,
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
    let target = gpu_tiles(crate::runtime::gpu_units(&client));
    let chunk = split_k_for([batch, m, k, n], target);
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
    let lut = unsafe { ArrayArg::from_raw_parts(client.create_from_slice(words), words.len() / 4) };
    let [tile_m, tile_n] = tile.cube_outputs();
    let grid = Grid::new(
        &client,
        [n.div_ceil(tile_n), m.div_ceil(tile_m), splits * batch],
    );
    let (gx, gy, gt) = grid.args();
    // Both kernels take the same arguments but their tile's comptime ones.
    macro_rules! launch {
        ($kernel:ident, $($tile:expr),+) => {
            $kernel::launch::<R>(
                &client,
                grid.count,
                tile.cube_dim(),
                lhs.into_tensor_arg(),
                rhs.into_tensor_arg(),
                lut,
                parts.clone().into_tensor_arg(),
                chunk as u32,
                gx,
                gy,
                gt,
                kind,
                $($tile),+
            )
        };
    }
    match tile {
        Tile::Staged(tiling) => launch!(approx_gemm_kernel, tiling),
        Tile::Direct { rows, cols } => launch!(approx_gemm_direct_kernel, rows, cols),
    }
    if splits == 1 {
        return parts;
    }
    let out = new(batch);
    let units = 256u32;
    sum_chunks_kernel::launch::<R>(
        &client,
        Grid::new(&client, [(batch * m * n).div_ceil(units as usize), 1, 1]).count,
        CubeDim::new_1d(units),
        parts.into_array_arg(),
        out.clone().into_array_arg(),
        splits as u32,
    );
    out
}
