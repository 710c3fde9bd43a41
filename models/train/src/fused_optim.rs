//! Burn's Adam and SGD as one fused kernel per parameter ([`cubecl_kernels::optim`]): the
//! optimizers every run steps with.
//!
//! [`FusedAdam`] and [`FusedSgd`] are Burn [`SimpleOptimizer`]s over any backend Ember's code
//! can see into ([`KernelBackend`]), so `OptimizerAdaptor` drives them on a model as it drives
//! Burn's own. Their arithmetic is Burn 0.21's `Adam` and `Sgd` (momentum without Nesterov,
//! L2 weight decay) operation for operation: on ndarray and wgpu the parameters they give equal
//! Burn's bit for bit; on CUDA the kernel's multiply-adds may be fused (one rounding instead of
//! two). Their states are Burn's records field for field (`moment_1`, `moment_2`, `time`;
//! `velocity`), so checkpoints written by either load into the other.
//!
//! A step launches one kernel per parameter where Burn's optimizers launch 13 (Adam) or up to 7
//! (SGD with momentum and weight decay) element-wise ops. Parameters that are not f32 take
//! Burn's composed step.
//!
//! ```
//! use burn::backend::{Autodiff, NdArray};
//! use burn::module::Module;
//! use burn::nn::LinearConfig;
//! use burn::optim::{GradientsParams, Optimizer, adaptor::OptimizerAdaptor};
//! use burn::tensor::Tensor;
//! use ember_train::fused_optim::FusedAdam;
//!
//! type B = Autodiff<NdArray>;
//! let device = Default::default();
//! let layer = LinearConfig::new(4, 2).init::<B>(&device);
//! let mut optim: OptimizerAdaptor<FusedAdam, _, B> = FusedAdam::default().into();
//! let loss = layer.forward(Tensor::<B, 2>::ones([3, 4], &device)).sum();
//! let grads = GradientsParams::from_grads(loss.backward(), &layer);
//! let layer = optim.step(1e-3, layer, grads);
//! assert_eq!(layer.weight.dims(), [4, 2]);
//! ```

use burn::module::AutodiffModule;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::{
    Adam, AdamConfig, AdamState, AdaptiveMomentumState, LearningRate, SimpleOptimizer,
};
use burn::record::Record;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{ElementConversion, Tensor, TensorPrimitive};
use cubecl_kernels::decorator::KernelBackend;
use cubecl_kernels::optim::{AdamStep, SgdStep, ops};

/// Adam (Burn's, without AMSGrad) stepped by one kernel per parameter.
#[derive(Clone)]
pub struct FusedAdam {
    beta_1: f32,
    beta_2: f32,
    epsilon: f32,
    weight_decay: Option<f32>,
    /// Burn's Adam of the same settings, for parameters that are not f32.
    composed: Adam,
}

impl std::fmt::Debug for FusedAdam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FusedAdam")
            .field("beta_1", &self.beta_1)
            .field("beta_2", &self.beta_2)
            .field("epsilon", &self.epsilon)
            .field("weight_decay", &self.weight_decay)
            .finish()
    }
}

impl Default for FusedAdam {
    /// Burn's defaults: β = (0.9, 0.999), ε = 1e-5, no weight decay.
    fn default() -> Self {
        Self::new(0.9, 0.999, 1e-5, None)
    }
}

impl FusedAdam {
    /// Adam with `beta_1`, `beta_2`, `epsilon` and an optional L2 `weight_decay` (the penalty
    /// added to each gradient, `λ · w`), as `burn::optim::AdamConfig` takes them.
    pub fn new(beta_1: f32, beta_2: f32, epsilon: f32, weight_decay: Option<f32>) -> Self {
        let composed = AdamConfig::new()
            .with_beta_1(beta_1)
            .with_beta_2(beta_2)
            .with_epsilon(epsilon)
            .with_weight_decay(weight_decay.map(WeightDecayConfig::new))
            .build();
        Self {
            beta_1,
            beta_2,
            epsilon,
            weight_decay,
            composed,
        }
    }

    /// The optimizer of a model `M` on autodiff backend `B`.
    pub fn init<B: AutodiffBackend<InnerBackend: KernelBackend>, M: AutodiffModule<B>>(
        self,
    ) -> OptimizerAdaptor<Self, M, B> {
        self.into()
    }
}

impl<B: KernelBackend> SimpleOptimizer<B> for FusedAdam {
    type State<const D: usize> = AdamState<B, D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<B, D>,
        grad: Tensor<B, D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<B, D>, Option<Self::State<D>>) {
        let fused = f32s(&tensor)
            && f32s(&grad)
            && state.as_ref().is_none_or(|s| {
                s.momentum.max_moment_2.is_none()
                    && f32s(&s.momentum.moment_1)
                    && f32s(&s.momentum.moment_2)
            });
        if !fused {
            return self.composed.step(lr, tensor, grad, state);
        }
        let time = state.as_ref().map_or(1, |s| s.momentum.time + 1);
        let step = AdamStep::new(
            self.beta_1,
            self.beta_2,
            self.epsilon,
            self.weight_decay,
            time,
            lr,
        );
        let moments = state.map(|s| (float(s.momentum.moment_1), float(s.momentum.moment_2)));
        let (p, m, v) = ops::adam::<B>(float(tensor), float(grad), moments, &step);
        let momentum = AdaptiveMomentumState::new(time, tensor_of(m), tensor_of(v));
        (tensor_of(p), Some(AdamState::new(momentum)))
    }

    fn to_device<const D: usize>(state: Self::State<D>, device: &B::Device) -> Self::State<D> {
        <Adam as SimpleOptimizer<B>>::to_device(state, device)
    }
}

/// SGD (Burn's: heavy-ball momentum with dampening, no Nesterov; L2 weight decay) stepped by one
/// kernel per parameter.
#[derive(Clone, Debug)]
pub struct FusedSgd {
    /// `(momentum, dampening)`, `None` for plain SGD.
    momentum: Option<(f64, f64)>,
    weight_decay: Option<f32>,
}

impl FusedSgd {
    /// SGD with optional `(momentum, dampening)` (Burn's `MomentumConfig` without Nesterov) and
    /// an optional L2 `weight_decay`.
    pub fn new(momentum: Option<(f64, f64)>, weight_decay: Option<f32>) -> Self {
        Self {
            momentum,
            weight_decay,
        }
    }

    /// The optimizer of a model `M` on autodiff backend `B`.
    pub fn init<B: AutodiffBackend<InnerBackend: KernelBackend>, M: AutodiffModule<B>>(
        self,
    ) -> OptimizerAdaptor<Self, M, B> {
        self.into()
    }
}

/// [`FusedSgd`]'s state of one parameter: Burn's `SgdState`, field for field.
#[derive(Record, Clone)]
pub struct SgdState<B: Backend, const D: usize> {
    /// The velocity, with momentum.
    pub momentum: Option<VelocityState<B, D>>,
}

/// A parameter's velocity: Burn's `MomentumState`, field for field.
#[derive(Record, Clone)]
pub struct VelocityState<B: Backend, const D: usize> {
    /// The velocity `u`.
    pub velocity: Tensor<B, D>,
}

impl<B: KernelBackend> SimpleOptimizer<B> for FusedSgd {
    type State<const D: usize> = SgdState<B, D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<B, D>,
        grad: Tensor<B, D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<B, D>, Option<Self::State<D>>) {
        // Burn keeps no velocity without momentum, and a state `{ momentum: None }` then
        let velocity = state
            .and_then(|s| s.momentum)
            .map(|v| v.velocity)
            .filter(|_| self.momentum.is_some());
        let first = velocity.is_none();
        let fused = f32s(&tensor) && f32s(&grad) && velocity.as_ref().is_none_or(f32s);
        let (p, u) = if fused {
            let step = SgdStep::new(self.momentum, self.weight_decay, lr, first);
            let (p, u) = ops::sgd::<B>(float(tensor), float(grad), velocity.map(float), &step);
            (tensor_of(p), u.map(tensor_of))
        } else {
            self.composed(lr, tensor, grad, velocity)
        };
        let momentum = u.map(|velocity| VelocityState { velocity });
        (p, Some(SgdState { momentum }))
    }

    fn to_device<const D: usize>(state: Self::State<D>, device: &B::Device) -> Self::State<D> {
        SgdState {
            momentum: state.momentum.map(|v| VelocityState {
                velocity: v.velocity.to_device(device),
            }),
        }
    }
}

impl FusedSgd {
    /// Burn's `Sgd` step composed of tensor ops, for parameters that are not f32.
    fn composed<B: Backend, const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<B, D>,
        mut grad: Tensor<B, D>,
        velocity: Option<Tensor<B, D>>,
    ) -> (Tensor<B, D>, Option<Tensor<B, D>>) {
        if let Some(penalty) = self.weight_decay {
            grad = tensor.clone().mul_scalar(penalty).add(grad);
        }
        let mut kept = None;
        if let Some((momentum, dampening)) = self.momentum {
            let u = match velocity {
                // the momentum as Burn's `Momentum` holds it: an element of the backend
                Some(u) => grad
                    .mul_scalar(1.0 - dampening)
                    .add(u.mul_scalar(momentum.elem::<B::FloatElem>())),
                None => grad,
            };
            grad = u.clone();
            kept = Some(u);
        }
        (tensor - grad.mul_scalar(lr), kept)
    }
}

/// Whether `t` holds f32 values (what the fused kernels take).
fn f32s<B: KernelBackend, const D: usize>(t: &Tensor<B, D>) -> bool {
    t.dtype() == burn::tensor::DType::F32
}

fn float<B: Backend, const D: usize>(t: Tensor<B, D>) -> burn::tensor::ops::FloatTensor<B> {
    t.into_primitive().tensor()
}

fn tensor_of<B: Backend, const D: usize>(t: burn::tensor::ops::FloatTensor<B>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(t))
}
