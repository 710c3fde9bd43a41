//! The `SparseAct` decorator: an autodiff backend whose linear layers keep their input for the
//! weight gradient pruned and block-sparse instead of dense.

use crate::fused;
use crate::kernel::{Stored, prune_stored, weight_grad};
use crate::policy::{Policy, Pruning};
use crate::prune::sample_view;
use burn::tensor::Shape;
use burn::tensor::backend::AutodiffBackend;
use burn_autodiff::checkpoint::base::Checkpointer;
use burn_autodiff::checkpoint::strategy::CheckpointStrategy;
use burn_autodiff::grads::Gradients;
use burn_autodiff::ops::{Backward, Ops, OpsKind};
use burn_autodiff::{Autodiff, NodeId};
use burn_backend::Backend;
use burn_backend::TensorMetadata;
use burn_backend::ops::{ActivationOps, FloatTensorOps, ModuleOps};
use burn_backend::tensor::FloatTensor;
use cubecl_kernels::broadcast::Layout;
use cubecl_kernels::decorator::effects;
use cubecl_kernels::decorator::{
    Decorated, DecoratedDevice, Decoration, DecoratorOps, KernelBackend, LayerSettings,
    Transparent, TransparentDecoration, TransparentOps,
};
use cubecl_kernels::layer_norm::ops as layer_norm;
use cubecl_kernels::norm::BatchNormStep;
use cubecl_kernels::softmax::ops as softmax;
use std::sync::Arc;

/// The decoration under the autodiff layer that carries the [`Policy`] in the device and every
/// tensor; every op forwards unchanged (`Autodiff<PolicyBackend<B>>` is `Autodiff<B>` bit for
/// bit). It is also the inner backend of [`SparseAct`] (validation runs on it, dense).
#[derive(Clone, Copy, Default, Debug)]
pub struct Carry;

impl Decoration for Carry {
    type Config = Policy;
    const NAME: &'static str = "policy";

    /// The policy's [`LayerPruning`] entry for the layer replaces the default and the shape
    /// overrides; either way the policy names the layer.
    fn for_layer(config: &Policy, layer: &LayerSettings) -> Policy {
        let mut policy = config.clone();
        if let Some(LayerPruning(pruning)) = layer.get::<LayerPruning>() {
            policy.default = *pruning;
            policy.overrides = Default::default();
        }
        policy.layer = Some(layer.shared_path());
        policy
    }
}

impl<B: Backend> DecoratorOps<B> for Carry {}
impl cubecl_kernels::decorator::PlainFloat for Carry {}

/// A per-layer policy's SparseAct entry for one layer ([`LayerSettings`]): its pruning, or
/// `None` to keep its input dense.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerPruning(pub Option<Pruning>);

/// `B` with a pruning [`Policy`] in its device and tensors (ops unchanged).
pub type PolicyBackend<B> = Decorated<B, Carry>;

/// The device of `SparseAct<Autodiff<B>>`: `B`'s device and the pruning [`Policy`].
pub type SparseDevice<B> = DecoratedDevice<B, Policy>;

/// The decoration above the autodiff layer: overrides `linear`.
#[derive(Clone, Copy, Default, Debug)]
pub struct Sparse;

impl TransparentDecoration for Sparse {
    const NAME: &'static str = "sparse-act";
}

/// Maps the autodiff backend a user names to the one SparseAct runs on (the same autodiff over
/// [`PolicyBackend`]).
pub trait SparseBase {
    /// `Autodiff<PolicyBackend<B>, C>` for `Autodiff<B, C>`.
    type Base: Backend;
}

impl<B: Backend, C: CheckpointStrategy> SparseBase for Autodiff<B, C> {
    type Base = Autodiff<PolicyBackend<B>, C>;
}

/// SparseAct over the autodiff backend `A` (`SparseAct<Autodiff<B>>`,
/// `SparseAct<Autodiff<ApproxMul<B>>>`): an `AutodiffBackend` whose device is a
/// [`SparseDevice<B>`].
pub type SparseAct<A> = Transparent<<A as SparseBase>::Base, Sparse>;

pub(crate) type Inner<B> = PolicyBackend<B>;
type Ad<B, C> = Autodiff<Inner<B>, C>;
pub(crate) type T<B, C> = FloatTensor<Transparent<Ad<B, C>, Sparse>>;

impl<B: KernelBackend, C: CheckpointStrategy> TransparentOps<Ad<B, C>> for Sparse {
    /// The layer view: the weight's policy decides the pruning, and the input takes the
    /// weight's configuration at every level of the stack for the layer's contractions (so an
    /// ApproxMul underneath runs all three with the layer's multiplier, even the weight
    /// gradient Autodiff computes from the input alone); the output returns to the input's.
    fn linear(x: T<B, C>, weight: T<B, C>, bias: Option<T<B, C>>) -> T<B, C> {
        let policy = weight.primitive.config.clone();
        let dims = weight.primitive.shape().dims::<2>();
        let incoming = x.primitive.clone();
        let x = adopt::<B, C>(x, &weight.primitive);
        let out = match policy.for_layer(dims[0], dims[1]) {
            None => {
                if weight.is_tracked() && effects::recording() {
                    let bytes = (x.primitive.shape().num_elements() * 4) as u64;
                    let layer = policy.layer.as_deref();
                    effects::record_stored(layer, bytes, bytes, "dense: the layer is not pruned");
                }
                Ad::<B, C>::linear(x, weight, bias)
            }
            Some(pruning) => {
                let jitter = policy.stochastic;
                sparse_linear::<B, C>(x, weight, bias, pruning, jitter, policy.layer.clone())
            }
        };
        adopt::<B, C>(out, &incoming)
    }

    /// A channel scale of an activation (`x ⊙ γ`, `γ: [1, …, 1, d]`) under the fused variant:
    /// the fused affine node without `β`, its activation kept pruned for `dγ`.
    fn float_mul(lhs: T<B, C>, rhs: T<B, C>) -> T<B, C> {
        let policy = &lhs.primitive.config;
        match policy.default.filter(|_| policy.scales) {
            Some(pruning) if is_channel_scale(&lhs.primitive.shape(), &rhs.primitive.shape()) => {
                let shape = lhs.primitive.shape();
                let layout = Layout::of(
                    shape.as_slice(),
                    shape.num_dims() - 1,
                    shape[shape.num_dims() - 1],
                )
                .expect("a channel scale's layout");
                let jitter = policy.stochastic;
                fused::affine_node::<Inner<B>, C>(lhs, rhs, None, layout, Some((pruning, jitter)))
            }
            _ => Ad::<B, C>::float_mul(lhs, rhs),
        }
    }

    /// PReLU with one `α` per channel (or one for all) as one node whose backward is the
    /// fused pass ([`crate::fused`]); any other shape of `α` goes to Burn's composite.
    fn prelu(x: T<B, C>, alpha: T<B, C>) -> T<B, C> {
        match fused::prelu_layout(&x.primitive.shape(), &alpha.primitive.shape()) {
            Some(layout) => fused::prelu::<Inner<B>, C>(x, alpha, layout),
            None => Ad::<B, C>::prelu(x, alpha),
        }
    }

    /// Layer norm over the last axis (stock `burn::nn::LayerNorm`) as one node whose forward is
    /// one kernel and backward one kernel and a channel pass ([`cubecl_kernels::layer_norm`];
    /// the host implementation on ndarray); tensors it does not take (not f32, `γ` or `β` not
    /// of the last axis's length, 2³¹ values or more) go to Burn's composite.
    fn layer_norm(x: T<B, C>, gamma: T<B, C>, beta: Option<T<B, C>>, epsilon: f64) -> T<B, C> {
        let beta_inner = beta.as_ref().map(|b| &b.primitive);
        match layer_norm::takes::<Inner<B>>(&x.primitive, &gamma.primitive, beta_inner) {
            true => fused::layer_norm_node::<Inner<B>, C>(x, gamma, beta, epsilon as f32),
            false => Ad::<B, C>::layer_norm(x, gamma, beta, epsilon),
        }
    }

    /// Softmax over the last axis (stock `burn::nn::attention`'s scores) as one node of one
    /// kernel each way ([`cubecl_kernels::softmax`]; the host implementation on ndarray); other
    /// axes and tensors it does not take (not f32, 2³¹ values or more) go to Burn's composite.
    fn softmax(x: T<B, C>, dim: usize) -> T<B, C> {
        match softmax::takes::<Inner<B>>(&x.primitive, dim) {
            true => fused::softmax_node::<Inner<B>, C>(x),
            false => Ad::<B, C>::softmax(x, dim),
        }
    }
}

/// `x` (same graph node, same values) with the configuration of `like` at every level.
fn adopt<B: KernelBackend, C: CheckpointStrategy>(
    mut x: T<B, C>,
    like: &FloatTensor<Inner<B>>,
) -> T<B, C> {
    x.primitive = Inner::<B>::float_adopt(x.primitive, like);
    x
}

/// `x ⊙ γ` with `γ` broadcast along every axis but the last (`[1, …, 1, d]`): ResMLP's Affine
/// and layer-scale, where `x` is an activation.
fn is_channel_scale(x: &Shape, gamma: &Shape) -> bool {
    let (x, g) = (x.as_slice(), gamma.as_slice());
    x.len() >= 2
        && x.len() == g.len()
        && g[g.len() - 1] == x[x.len() - 1]
        && g[..g.len() - 1].iter().all(|&n| n == 1)
        && x[..x.len() - 1].iter().product::<usize>() > 1
}

/// What the sparse linear keeps for backward.
#[derive(Clone, Debug)]
struct LinearState<B: Backend> {
    /// The pruned input, when the weight needs a gradient.
    x: Option<Stored<B>>,
    /// The input's shape.
    x_shape: Shape,
    /// The weight, when the input needs a gradient.
    weight: Option<NodeId>,
    /// The layer's path, when a policy named it.
    layer: Option<Arc<str>>,
}

/// The backward step of a linear layer with `N` parents (input, weight[, bias]).
#[derive(Debug)]
struct SparseLinear<const N: usize>;

impl<B: KernelBackend, const N: usize> Backward<B, N> for SparseLinear<N> {
    type State = LinearState<B>;

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, ckpt: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let mut parents = ops.parents.into_iter();
        let node_x = parents.next().flatten();
        let node_w = parents.next().flatten();
        let node_b = parents.next().flatten();
        let state = ops.state;
        if let Some(node) = node_x {
            let weight = state
                .weight
                .map(|id| ckpt.retrieve_node_output::<B::FloatTensorPrimitive>(id))
                .expect("the weight is kept whenever the input is tracked");
            grads.register::<B>(node.id, B::linear_x_backward(weight, grad.clone()));
        }
        if let Some(node) = node_w {
            let x = state
                .x
                .expect("the pruned input is kept whenever the weight is tracked");
            let dw = weight_grad(&x, &state.x_shape, grad.clone(), state.layer.as_deref());
            grads.register::<B>(node.id, dw);
        }
        if let Some(node) = node_b {
            grads.register::<B>(node.id, B::linear_bias_backward(grad));
        }
    }
}

/// Prunes the primitive `x` of a linear layer's input, with the kernels where `B` has them.
fn prune_linear_input<B: KernelBackend>(
    x: FloatTensor<B>,
    pruning: Pruning,
    jitter: Option<f64>,
) -> Stored<B> {
    let view = sample_view(&x.shape());
    let x = B::float_reshape(x, Shape::from(view.to_vec()));
    prune_stored(x, pruning.block, pruning.sparsity, jitter)
}

fn sparse_linear<B: KernelBackend, C: CheckpointStrategy>(
    x: T<B, C>,
    weight: T<B, C>,
    bias: Option<T<B, C>>,
    pruning: Pruning,
    jitter: Option<f64>,
    layer: Option<Arc<str>>,
) -> T<B, C> {
    let (x_tracked, w_tracked) = (x.is_tracked(), weight.is_tracked());
    let x_shape = x.primitive.shape();
    let state = |prep_weight: Option<NodeId>, x: &FloatTensor<Inner<B>>| {
        let stored = w_tracked.then(|| prune_linear_input::<Inner<B>>(x.clone(), pruning, jitter));
        if let Some(stored) = &stored {
            let how = format!("block-sparse {pruning}");
            let dense = (x_shape.num_elements() * 4) as u64;
            effects::record_stored(layer.as_deref(), stored.bytes(), dense, &how);
        }
        LinearState {
            x: stored,
            x_shape: x_shape.clone(),
            weight: prep_weight,
            layer: layer.clone(),
        }
    };
    match bias {
        Some(bias) => match SparseLinear::<3>
            .prepare::<C>([x.node.clone(), weight.node.clone(), bias.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(mut prep) => {
                let w = x_tracked.then(|| prep.checkpoint(&weight));
                let state = state(w, &x.primitive);
                let out = Inner::<B>::linear(x.primitive, weight.primitive, Some(bias.primitive));
                prep.finish(state, out)
            }
            OpsKind::UnTracked(prep) => prep.finish(Inner::<B>::linear(
                x.primitive,
                weight.primitive,
                Some(bias.primitive),
            )),
        },
        None => match SparseLinear::<2>
            .prepare::<C>([x.node.clone(), weight.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(mut prep) => {
                let w = x_tracked.then(|| prep.checkpoint(&weight));
                let state = state(w, &x.primitive);
                prep.finish(
                    state,
                    Inner::<B>::linear(x.primitive, weight.primitive, None),
                )
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(Inner::<B>::linear(x.primitive, weight.primitive, None))
            }
        },
    }
}

/// `x · α + β` with `α` and `β` (`[channels]`) broadcast along `axis` of `x`, as one autodiff
/// node on `SparseAct<Autodiff<B>>` (a scale without `β`). With the fused variant of the
/// policy `x` carries, the activation kept for `dα` is pruned.
///
/// # Panics
/// If `axis` is not an axis of `x` or `α` does not hold one value per channel there (callers
/// check the shapes first: ResMLP's Affine returns that as an error).
pub fn fused_affine<B: KernelBackend, C: CheckpointStrategy>(
    x: T<B, C>,
    alpha: T<B, C>,
    beta: Option<T<B, C>>,
    axis: usize,
) -> T<B, C> {
    let layout = Layout::of(
        x.primitive.shape().as_slice(),
        axis,
        alpha.primitive.shape().num_elements(),
    )
    .unwrap_or_else(|e| panic!("fused affine: {e}"));
    let policy = &x.primitive.config;
    let pruning = policy
        .default
        .filter(|_| policy.scales)
        .map(|p| (p, policy.stochastic));
    fused::affine_node::<Inner<B>, C>(x, alpha, beta, layout, pruning)
}

/// Batch norm's training forward over channel axis 1 of `x` (Burn's `BatchNorm` in training)
/// as one autodiff node on `SparseAct<Autodiff<B>>`, its forward five kernels and its backward
/// three ([`cubecl_kernels::norm`]): `(y, running mean, running variance)`, the running
/// statistics given as the last two of `[γ, β, mean, var]` and returned after the step
/// (untracked).
///
/// # Panics
/// If `x` has rank below 2, or a per-channel tensor does not hold one value per channel
/// (callers check the shapes first: `ember_models::broadcast::batch_norm`).
pub fn fused_batch_norm<B: KernelBackend, C: CheckpointStrategy>(
    x: T<B, C>,
    [gamma, beta, mean, var]: [T<B, C>; 4],
    epsilon: f64,
    momentum: f64,
) -> (T<B, C>, T<B, C>, T<B, C>) {
    let shape = x.primitive.shape();
    assert!(
        shape.num_dims() >= 2,
        "batch norm: x has rank {}",
        shape.num_dims()
    );
    let layout = Layout::of(shape.as_slice(), 1, gamma.primitive.shape().num_elements())
        .unwrap_or_else(|e| panic!("fused batch norm: {e}"));
    let running = (mean.primitive, var.primitive);
    let step = BatchNormStep::new(epsilon, momentum);
    let (y, mean, var) =
        fused::batch_norm_node::<Inner<B>, C>(x, [gamma, beta], running, layout, &step);
    let wrap = <Ad<B, C> as AutodiffBackend>::from_inner;
    (y, wrap(mean), wrap(var))
}
