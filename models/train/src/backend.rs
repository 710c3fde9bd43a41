//! The backends the CLI can run on, and how a generic job is dispatched to one.

use crate::error::{EmberError, Result};
use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
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
pub type Stack<B> = SparseAct<Autodiff<Decorated<B>>>;
/// The decorators under autodiff in [`Stack<B>`]: Bcr over Hinm over ApproxMul over `B` (its
/// inference backend is this).
pub type Decorated<B> = Bcr<Hinm<ApproxMul<B>>>;
/// The device of [`Stack<B>`].
pub type StackDevice<B> = SparseDevice<Decorated<B>>;
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
) -> StackDevice<B> {
    stack_device_on::<B>(Default::default(), multiplier, policy)
}

/// [`stack_device`] on the inner device `inner`.
pub fn stack_device_on<B: cubecl_kernels::decorator::KernelBackend>(
    inner: B::Device,
    multiplier: Multiplier,
    policy: Policy,
) -> StackDevice<B> {
    register_fused::<B>();
    let approx = ApproxDevice::new(inner, multiplier);
    SparseDevice::new(BcrDevice::new(HinmDevice::new(approx, ()), ()), policy)
}

/// Makes ResMLP's affine and layer-scales ([`ember_models::broadcast::affine`]) and the zoo's
/// batch norms ([`ember_models::broadcast::batch_norm`]) fused ops on [`Stack<B>`] (one autodiff
/// node each: `burn_sparse_act::fused_affine`, `burn_sparse_act::fused_batch_norm`) and on its
/// inference backend (the forward kernels). PReLU needs no registration: it is a backend op.
pub fn register_fused<B: KernelBackend>() {
    use ember_models::broadcast::{register_affine, register_batch_norm, register_normalize};
    register_affine::<Stack<B>>(burn_sparse_act::fused_affine::<Decorated<B>, NoCheckpointing>);
    register_affine::<Decorated<B>>(cubecl_kernels::broadcast::ops::affine_on_axis::<Decorated<B>>);
    register_batch_norm::<Stack<B>>(
        burn_sparse_act::fused_batch_norm::<Decorated<B>, NoCheckpointing>,
    );
    register_normalize::<Decorated<B>>(
        cubecl_kernels::norm::ops::normalize_channels::<Decorated<B>>,
    );
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

    /// Runs the job on backend `B` and `devices` (at least one; the first is the main one,
    /// every one carrying the same decorator configuration). Jobs of one device run on the
    /// first.
    fn run_on<B: TrainBackend>(self, devices: Vec<B::Device>) -> Result<Self::Output>
    where
        Self: Sized,
    {
        let first = devices.into_iter().next().expect("at least one device");
        self.run::<B>(first)
    }
}

impl BackendKind {
    /// Checks that this backend can start here, before anything calls into its runtime:
    /// cubecl-wgpu and cubecl-cuda panic on their device threads when no adapter or driver
    /// exists; CUDA also needs the `cuda` feature.
    pub fn check_available(self) -> Result<()> {
        match self {
            Self::Ndarray => Ok(()),
            Self::Wgpu => cubecl_kernels::runtime::wgpu_adapter()
                .map(|_| ())
                .map_err(|e| EmberError::Backend(e.to_string())),
            // CubeCL's CUDA runtime panics on its device thread where the driver library
            // cannot be loaded: ask the driver first, here
            #[cfg(feature = "cuda")]
            Self::Cuda => match cuda_devices()?.len() {
                0 => Err(EmberError::Backend("CUDA reports no GPU here".into())),
                _ => Ok(()),
            },
            #[cfg(not(feature = "cuda"))]
            Self::Cuda => Err(EmberError::Backend(
                "this ember was built without CUDA support: rebuild with \
                 `cargo build --release --features cuda`"
                    .into(),
            )),
        }
    }

    /// The first `n` of `all`, this backend's devices here (`--devices`), or the error that
    /// lists them by Burn's name.
    fn first<D: std::fmt::Debug>(self, all: Vec<D>, n: usize) -> Result<Vec<D>> {
        if n > all.len() {
            let names: Vec<String> = all.iter().map(|d| format!("{d:?}")).collect();
            return Err(EmberError::Invalid(format!(
                "--devices {n}: the {self} backend has {} device{} here ({})",
                names.len(),
                if names.len() == 1 { "" } else { "s" },
                names.join(", ")
            )));
        }
        Ok(all.into_iter().take(n).collect())
    }

    /// Runs `job` on this backend's default device carrying `multiplier` and the SparseAct
    /// `policy`, after checking that the backend can start here. Every stack is
    /// [`Stack<B>`]: [`Multiplier::native`], the default (off)
    /// policy and dense weights make it `Autodiff<B>` bit for bit, so one monomorphisation serves every combination.
    pub fn dispatch<J: BackendJob>(
        self,
        multiplier: Multiplier,
        policy: Policy,
        job: J,
    ) -> Result<J::Output> {
        self.dispatch_on(1, 0, multiplier, policy, job)
    }

    /// [`Self::dispatch`] on this backend's first `devices` devices, each carrying `multiplier`
    /// and `policy` ([`BackendJob::run_on`]): ndarray has one; wgpu one per adapter
    /// ([`cubecl_kernels::runtime::wgpu_devices`]); CUDA one per GPU. One device is the
    /// backend's default device, except on CUDA under an MPI job: there the process of local rank
    /// `local_rank` (its rank among the job's processes on this machine) takes GPU
    /// `local_rank` modulo the GPUs here. More devices than there are is refused, naming them.
    pub fn dispatch_on<J: BackendJob>(
        self,
        devices: usize,
        local_rank: usize,
        multiplier: Multiplier,
        policy: Policy,
        job: J,
    ) -> Result<J::Output> {
        self.check_available()?;
        #[cfg(not(feature = "cuda"))]
        let _ = local_rank;
        fn stack<B: KernelBackend>(
            inner: Vec<B::Device>,
            multiplier: &Multiplier,
            policy: &Policy,
        ) -> Vec<StackDevice<B>> {
            inner
                .into_iter()
                .map(|d| stack_device_on::<B>(d, multiplier.clone(), policy.clone()))
                .collect()
        }
        let (m, p) = (&multiplier, &policy);
        match self {
            Self::Ndarray => {
                let inner = self.first(vec![Default::default()], devices)?;
                job.run_on::<NdarrayStack>(stack::<burn::backend::NdArray>(inner, m, p))
            }
            Self::Wgpu => {
                let inner = match devices {
                    1 => vec![Default::default()],
                    n => self.first(wgpu_devices()?, n)?,
                };
                job.run_on::<WgpuStack>(stack::<burn::backend::Wgpu>(inner, m, p))
            }
            #[cfg(feature = "cuda")]
            Self::Cuda => {
                let inner = match (devices, local_rank) {
                    (1, 0) => vec![Default::default()],
                    (1, r) => {
                        let all = cuda_devices()?;
                        let Some(d) = all.get(r % all.len().max(1)) else {
                            return Err(EmberError::Backend("CUDA reports no GPU here".into()));
                        };
                        vec![d.clone()]
                    }
                    (n, _) => self.first(cuda_devices()?, n)?,
                };
                job.run_on::<CudaStack>(stack::<burn::backend::Cuda>(inner, m, p))
            }
            #[cfg(not(feature = "cuda"))]
            Self::Cuda => unreachable!("check_available refuses CUDA without the feature"),
        }
    }
}

fn wgpu_devices() -> Result<Vec<burn::backend::wgpu::WgpuDevice>> {
    cubecl_kernels::runtime::wgpu_devices().map_err(|e| EmberError::Backend(e.to_string()))
}

/// One device per GPU the CUDA driver reports.
#[cfg(feature = "cuda")]
fn cuda_devices() -> Result<Vec<burn::backend::cuda::CudaDevice>> {
    use burn::tensor::backend::Backend;
    let count = crate::record::catch(|| <burn::backend::Cuda as Backend>::device_count(0))
        .map_err(|_| {
            EmberError::Backend(
                "CUDA cannot start: no NVIDIA driver or GPU (set LD_LIBRARY_PATH to CUDA's \
                 lib64)"
                    .into(),
            )
        })?;
    Ok((0..count)
        .map(burn::backend::cuda::CudaDevice::new)
        .collect())
}

#[cfg(all(test, feature = "cuda"))]
mod tests {
    use super::BackendKind;

    #[test]
    fn cuda_starts_where_the_nvidia_driver_is_loaded_and_is_refused_elsewhere() {
        // the kernel module's file: present where the driver is loaded
        let driver = std::path::Path::new("/proc/driver/nvidia/version").exists();
        match BackendKind::Cuda.check_available() {
            Ok(()) => assert!(driver, "CUDA started without an NVIDIA driver"),
            Err(e) => {
                assert!(!driver, "CUDA refused beside a loaded driver: {e}");
                assert!(e.to_string().contains("CUDA cannot start"), "{e}");
            }
        }
    }
}
