//! The backends the CLI can run on, and how a generic job is dispatched to one.

use crate::error::{EmberError, Result};
use burn::backend::Autodiff;
use burn::tensor::backend::AutodiffBackend;
use burn_approx_mul::{ApproxDevice, ApproxMul, Multiplier};
use burn_bcr::backend::{Bcr, BcrDevice};
use burn_hinm::backend::{Hinm, HinmDevice};
use burn_sparse_act::{Policy, SparseAct, SparseDevice};
use cubecl_kernels::decorator::KernelBackend;

/// A Burn backend selectable at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// burn-ndarray on the CPU (the default: needs nothing installed).
    Ndarray,
    /// burn-wgpu (CubeCL): Vulkan/Metal/DX12, or Mesa's lavapipe on a machine without a GPU.
    Wgpu,
    /// burn-cuda (CubeCL) on an NVIDIA GPU; needs the `cuda` feature at build time.
    Cuda,
}

ember_models::choices!(BackendKind {
    Ndarray => "ndarray",
    Wgpu => "wgpu",
    Cuda => "cuda",
});

/// The training stack over `B`: SparseAct over autodiff over Bcr and Hinm (packed weights of
/// either format) over ApproxMul.
pub type Stack<B> = SparseAct<Autodiff<Bcr<Hinm<ApproxMul<B>>>>>;
/// The ndarray stack used for training.
pub type NdarrayStack = Stack<burn::backend::NdArray>;
/// The wgpu stack used for training.
pub type WgpuStack = Stack<burn::backend::Wgpu>;
/// The CUDA stack used for training.
#[cfg(feature = "cuda")]
pub type CudaStack = Stack<burn::backend::Cuda>;

/// The device of [`Stack<B>`] carrying `multiplier` and `policy`; registers the stack's fused
/// affine for the zoo's models ([`register_fused`]).
pub fn stack_device<B: cubecl_kernels::decorator::KernelBackend>(
    multiplier: Multiplier,
    policy: Policy,
) -> SparseDevice<Bcr<Hinm<ApproxMul<B>>>> {
    register_fused::<B>();
    let approx = ApproxDevice::new(Default::default(), multiplier);
    SparseDevice::new(BcrDevice::new(HinmDevice::new(approx, ()), ()), policy)
}

/// Makes ResMLP's affine and layer-scales ([`ember_models::broadcast::affine`]) one fused op on
/// [`Stack<B>`] (one autodiff node: `burn_sparse_act::fused_affine`) and on its inference
/// backend (the forward kernel). PReLU needs no registration: it is a backend op.
pub fn register_fused<B: KernelBackend>() {
    use ember_models::broadcast::register_affine;
    type Inner<B> = Bcr<Hinm<ApproxMul<B>>>;
    register_affine::<Stack<B>>(
        burn_sparse_act::fused_affine::<
            Inner<B>,
            burn::backend::autodiff::checkpoint::strategy::NoCheckpointing,
        >,
    );
    type Infer<B> = <Stack<B> as AutodiffBackend>::InnerBackend;
    register_affine::<Infer<B>>(cubecl_kernels::broadcast::ops::affine_on_axis::<Infer<B>>);
}

/// An autodiff backend whose inner backend tells Ember's code what it sits on (every
/// [`Stack`] is one): what a job needs to tag a model's layers with a per-layer policy.
pub trait TrainBackend: AutodiffBackend<InnerBackend: KernelBackend> {}
impl<B: AutodiffBackend<InnerBackend: KernelBackend>> TrainBackend for B {}

/// A job generic over the training backend.
pub trait BackendJob {
    /// What the job returns.
    type Output;
    /// Runs the job on backend `B` and its default device.
    fn run<B: TrainBackend>(self, device: B::Device) -> Result<Self::Output>;
}

impl BackendKind {
    /// Checks that this backend can start here, before anything calls into its runtime:
    /// cubecl-wgpu panics on its device thread when no adapter exists, and CUDA needs the
    /// `cuda` feature.
    pub fn check_available(self) -> Result<()> {
        match self {
            Self::Ndarray => Ok(()),
            Self::Wgpu => cubecl_kernels::runtime::wgpu_adapter()
                .map(|_| ())
                .map_err(|e| EmberError::Backend(e.to_string())),
            #[cfg(feature = "cuda")]
            Self::Cuda => Ok(()),
            #[cfg(not(feature = "cuda"))]
            Self::Cuda => Err(EmberError::Backend(
                "this ember was built without CUDA support: rebuild with \
                 `cargo build --release --features cuda`"
                    .into(),
            )),
        }
    }

    /// Runs `job` on this backend's default device carrying `multiplier` and the SparseAct
    /// `policy`, after checking that the backend can start here. Every stack is
    /// `SparseAct<Autodiff<Bcr<Hinm<ApproxMul<B>>>>>`: [`Multiplier::native`], the default (off)
    /// policy and dense weights make it `Autodiff<B>` bit for bit, so one monomorphisation serves every combination.
    pub fn dispatch<J: BackendJob>(
        self,
        multiplier: Multiplier,
        policy: Policy,
        job: J,
    ) -> Result<J::Output> {
        self.check_available()?;
        match self {
            Self::Ndarray => {
                job.run::<NdarrayStack>(stack_device::<burn::backend::NdArray>(multiplier, policy))
            }
            Self::Wgpu => {
                job.run::<WgpuStack>(stack_device::<burn::backend::Wgpu>(multiplier, policy))
            }
            #[cfg(feature = "cuda")]
            Self::Cuda => {
                job.run::<CudaStack>(stack_device::<burn::backend::Cuda>(multiplier, policy))
            }
            #[cfg(not(feature = "cuda"))]
            Self::Cuda => unreachable!("check_available refuses CUDA without the feature"),
        }
    }
}
