//! Launches of the pruning kernels.

use super::kernel::{block_norms_kernel, compress_kernel, select_kernel};
use super::{Blocks, PrunedCube};
use crate::grid::Grid;
use burn_cubecl::CubeRuntime;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_std::{DType, Shape};
use cubecl::prelude::*;

/// One unit per element of `n` (the kernels read their linear `ABSOLUTE_POS` and skip past
/// `n`), 256 a cube, the cubes spread within the runtime's limits.
fn units<R: CubeRuntime>(client: &ComputeClient<R>, n: usize) -> (CubeCount, CubeDim) {
    (
        Grid::new(client, [n.div_ceil(256), 1, 1]).count,
        CubeDim::new_1d(256),
    )
}

fn geometry<R: CubeRuntime>(x: &CubeTensor<R>, b: usize) -> (usize, Blocks) {
    let [samples, rows, d] = x.meta.shape().dims::<3>();
    assert_eq!(x.dtype, DType::F32, "SparseAct prunes f32 activations");
    assert!(
        b > 0 && rows > 0 && d > 0,
        "blocks of {b} in [{samples}, {rows}, {d}]"
    );
    (samples, Blocks { rows, d, b })
}

/// Launches `block_norms_kernel`: `x: [samples, rows, d]` (any strides) → squared norms
/// `[samples, N]` in block-column-major order.
pub fn launch_block_norms<R: CubeRuntime>(x: &CubeTensor<R>, b: usize) -> CubeTensor<R> {
    let (samples, g) = geometry(x, b);
    let n = samples * g.per_sample();
    let norms = empty_device_contiguous_dtype(
        x.client.clone(),
        x.device.clone(),
        Shape::new([samples, g.per_sample()]),
        DType::F32,
    );
    if n > 0 {
        let (count, dim) = units(&x.client, n);
        block_norms_kernel::launch::<R>(
            &x.client,
            count,
            dim,
            x.clone().into_tensor_arg(),
            norms.clone().into_array_arg(),
            g,
        );
    }
    norms
}

/// Launches `select_kernel` and `compress_kernel`: keeps the `keep` blocks of every sample
/// of `x` with the largest `norms` (as [`launch_block_norms`] computes them, possibly jittered).
///
/// # Panics
/// If `norms` is not `[samples, N]` of `x`'s blocks or `keep` exceeds `N`.
pub fn launch_compress<R: CubeRuntime>(
    x: &CubeTensor<R>,
    norms: &CubeTensor<R>,
    b: usize,
    keep: usize,
) -> PrunedCube<R> {
    let (samples, g) = geometry(x, b);
    let n_per = g.per_sample();
    assert_eq!(
        norms.meta.shape().dims::<2>(),
        [samples, n_per],
        "block norms"
    );
    assert!(keep <= n_per, "keep {keep} of {n_per} blocks");
    let (client, device) = (&x.client, &x.device);
    let new = |dims: Vec<usize>, dtype| {
        empty_device_contiguous_dtype(client.clone(), device.clone(), Shape::from(dims), dtype)
    };
    let nb = g.columns();
    let kept = new(vec![samples, n_per], DType::U32);
    let out = PrunedCube {
        values: new(vec![samples, keep, b], DType::F32),
        col: new(vec![samples, keep], DType::U32),
        crow: new(vec![samples, nb + 1], DType::U32),
    };
    if samples == 0 {
        return out;
    }
    let (count, dim) = units(client, samples * n_per);
    select_kernel::launch::<R>(
        client,
        count,
        dim,
        // read as a flat array: jittered norms come from Burn's ops, pitched on CUDA
        burn_cubecl::kernel::into_contiguous(norms.clone()).into_array_arg(),
        kept.clone().into_array_arg(),
        keep as u32,
        n_per,
    );
    let (count, dim) = units(client, samples * nb);
    compress_kernel::launch::<R>(
        client,
        count,
        dim,
        x.clone().into_tensor_arg(),
        kept.into_array_arg(),
        out.values.clone().into_array_arg(),
        out.col.clone().into_array_arg(),
        out.crow.clone().into_array_arg(),
        samples as u32,
        keep as u32,
        g,
    );
    out
}
