//! The kernel suite: every CubeCL kernel against its host reference on wgpu (lavapipe on a
//! machine without a GPU), and the decorator plumbing. One test binary, so Burn's backends are
//! monomorphised once for all of them.

use burn::backend::Wgpu;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use burn_cubecl::tensor::CubeTensor;
use cubecl::wgpu::WgpuRuntime;

mod approx_gemm;
mod bcrc;
mod broadcast;
mod bsr;
mod hinm;
mod identity;
mod identity_lenet;
mod im2col;

/// A wgpu tensor's CubeCL primitive.
pub(crate) type Cube = CubeTensor<WgpuRuntime>;

/// `values` of `shape` uploaded to the default wgpu device, as a CubeCL tensor.
pub(crate) fn cube<const D: usize>(values: &[f32], shape: [usize; D]) -> Cube {
    Tensor::<Wgpu, D>::from_data(TensorData::new(values.to_vec(), shape), &Default::default())
        .into_primitive()
        .tensor()
}

/// A rank-`D` f32 CubeCL tensor read back.
pub(crate) fn floats<const D: usize>(t: Cube) -> Vec<f32> {
    Tensor::<Wgpu, D>::from_primitive(TensorPrimitive::Float(t))
        .into_data()
        .to_vec()
        .unwrap()
}
