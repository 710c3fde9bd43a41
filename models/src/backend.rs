//! The backends the CLI can run on, and how a generic job is dispatched to one.

use crate::error::{EmberError, Result};
use burn::backend::Autodiff;
use burn::tensor::backend::AutodiffBackend;
use burn_approx_mul::{ApproxDevice, ApproxMul, Multiplier};

/// A Burn backend selectable at run time.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// burn-ndarray on the CPU (the default: needs nothing installed).
    Ndarray,
    /// burn-wgpu (CubeCL): Vulkan/Metal/DX12, or Mesa's lavapipe on a machine without a GPU.
    Wgpu,
    /// burn-cuda (CubeCL) on an NVIDIA GPU; needs the `cuda` feature at build time.
    Cuda,
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Ndarray => "ndarray",
            Self::Wgpu => "wgpu",
            Self::Cuda => "cuda",
        })
    }
}

/// The ndarray stack used for training.
pub type NdarrayStack = Autodiff<ApproxMul<burn::backend::NdArray>>;
/// The wgpu stack used for training.
pub type WgpuStack = Autodiff<ApproxMul<burn::backend::Wgpu>>;
/// The CUDA stack used for training.
#[cfg(feature = "cuda")]
pub type CudaStack = Autodiff<ApproxMul<burn::backend::Cuda>>;

/// A job generic over the training backend.
pub trait BackendJob {
    /// What the job returns.
    type Output;
    /// Runs the job on backend `B` and its default device.
    fn run<B: AutodiffBackend>(self, device: B::Device) -> Result<Self::Output>;
}

impl BackendKind {
    /// Runs `job` on this backend's default device carrying `multiplier`, after checking that
    /// the backend can start here. Every stack is `Autodiff<ApproxMul<B>>`:
    /// [`Multiplier::native`] makes it `Autodiff<B>` bit for bit, so one monomorphisation serves
    /// every multiplier.
    pub fn dispatch<J: BackendJob>(self, multiplier: Multiplier, job: J) -> Result<J::Output> {
        match self {
            Self::Ndarray => {
                job.run::<NdarrayStack>(ApproxDevice::new(Default::default(), multiplier))
            }
            Self::Wgpu => {
                cubecl_kernels::runtime::wgpu_adapter()
                    .map_err(|e| EmberError::Backend(e.to_string()))?;
                job.run::<WgpuStack>(ApproxDevice::new(Default::default(), multiplier))
            }
            #[cfg(feature = "cuda")]
            Self::Cuda => job.run::<CudaStack>(ApproxDevice::new(Default::default(), multiplier)),
            #[cfg(not(feature = "cuda"))]
            Self::Cuda => Err(EmberError::Backend({
                let _ = multiplier;
                "this ember was built without CUDA support: rebuild with \
                 `cargo build --release --features cuda`"
                    .into()
            })),
        }
    }
}
