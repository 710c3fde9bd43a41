//! The kernel suite: every CubeCL kernel against its host reference on the runtime
//! `EMBER_TEST_RUNTIME` selects (wgpu by default, lavapipe on a machine without a GPU; `cuda`
//! with `--features cuda`), and the decorator plumbing. One test binary, so Burn's backends are
//! monomorphised once for all of them.

use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use burn_cubecl::tensor::CubeTensor;
use cubecl_kernels::testing::{TestBackend, TestRuntime};

mod activation;
mod approx_gemm;
mod bcrc;
mod broadcast;
mod bsr;
mod grid;
mod hinm;
mod identity;
mod identity_lenet;
mod im2col;
mod layer_norm;
mod matmul;
mod norm;
mod optim;
mod reduce;
mod softmax;

/// A CubeCL tensor of the test runtime `R`.
pub(crate) type Cube<R> = CubeTensor<R>;

/// `values` of `shape` uploaded to `R`'s default device, as a CubeCL tensor.
pub(crate) fn cube<R: TestRuntime, const D: usize>(values: &[f32], shape: [usize; D]) -> Cube<R> {
    Tensor::<TestBackend<R>, D>::from_data(
        TensorData::new(values.to_vec(), shape),
        &Default::default(),
    )
    .into_primitive()
    .tensor()
}

/// A rank-`D` f32 CubeCL tensor read back.
pub(crate) fn floats<R: TestRuntime, const D: usize>(t: Cube<R>) -> Vec<f32> {
    // An empty buffer's bytes need not be aligned for f32 (CUDA's are not): nothing to read.
    if t.meta.num_elements() == 0 {
        return Vec::new();
    }
    Tensor::<TestBackend<R>, D>::from_primitive(TensorPrimitive::Float(t))
        .into_data()
        .to_vec()
        .unwrap()
}
