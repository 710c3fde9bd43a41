//! Fused broadcast nodes: PReLU with one `α` per channel and the per-channel affine
//! `x · α + β` (ResMLP's Affine; without `β`, its layer-scales) each as **one** autodiff node,
//! its forward one broadcast kernel and its backward one fused pass
//! ([`cubecl_kernels::broadcast`]; the host implementation on ndarray); batch norm's training
//! forward as one node too, a few kernels each way ([`cubecl_kernels::norm`]); layer norm and
//! softmax over the last axis as one node each ([`cubecl_kernels::layer_norm`],
//! [`cubecl_kernels::softmax`]).
//!
//! Burn 0.21 computes `prelu` as a composite (`lower_elem`, `mul`, `mask_where`), recorded by
//! autodiff op by op, and has no affine op at all; a decorator *under* autodiff never sees
//! either. This layer sits *above* autodiff, where SparseAct's `linear` sits, and records the
//! node itself: stock `burn::nn::PRelu` reaches it through the backend's `prelu` op, stock
//! `burn::nn::LayerNorm` through `layer_norm` (a composite of 35 launches under autodiff), stock
//! attention's softmax through `softmax`,
//! a model's affine through `burn_sparse_act::fused_affine` (registered for models by
//! `ember-train`).
//!
//! The nodes are generic over the backend under autodiff (`B`); SparseAct's layer
//! (`backend.rs`) calls them with its policy backend.
//!
//! With SparseAct's fused variant on (`Policy::scales`), the activation an affine keeps for
//! `dα` is pruned as a linear layer's input is, and `dα` is computed from the kept blocks.

use crate::kernel::{Stored, prune_stored};
use crate::policy::Pruning;
use crate::prune::{Pruned, prune, sample_view};
use burn::tensor::{Shape, Tensor, TensorData, TensorPrimitive};
use burn_autodiff::Autodiff;
use burn_autodiff::checkpoint::base::Checkpointer;
use burn_autodiff::checkpoint::strategy::CheckpointStrategy;
use burn_autodiff::grads::Gradients;
use burn_autodiff::ops::{Backward, Ops, OpsKind};
use burn_backend::Backend;
use burn_backend::TensorMetadata;
use burn_backend::tensor::FloatTensor;
use cubecl_kernels::broadcast::Layout;
use cubecl_kernels::broadcast::ops as kernels;
use cubecl_kernels::bsr::columns::Columns;
use cubecl_kernels::decorator::KernelBackend;
use cubecl_kernels::layer_norm::ops as layer_norm;
use cubecl_kernels::norm::BatchNormStep;
use cubecl_kernels::norm::ops as norm;
use cubecl_kernels::softmax::ops as softmax;

/// The layout of Burn's `prelu(x, α)` as the op receives it (`α` reshaped to `[1, C, 1, …]`,
/// or `[1; D]` for a single `α`): `None` for any other shape of `α` (Burn's composite then).
pub(crate) fn prelu_layout(x: &Shape, alpha: &Shape) -> Option<Layout> {
    let (x, a) = (x.as_slice(), alpha.as_slice());
    if a.len() != x.len() || x.is_empty() {
        return None;
    }
    let axes: Vec<usize> = (0..a.len()).filter(|&i| a[i] != 1).collect();
    match axes.as_slice() {
        [] => Some(Layout {
            outer: 1,
            channels: 1,
            inner: x.iter().product(),
        }),
        [axis] => Layout::of(x, *axis, a[*axis]).ok(),
        _ => None,
    }
}

/// `α` (any shape holding `channels` values) as `[channels]`.
fn flat<B: Backend>(alpha: FloatTensor<B>, layout: Layout) -> FloatTensor<B> {
    B::float_reshape(alpha, Shape::from(vec![layout.channels]))
}

/// What the fused PReLU keeps for backward.
#[derive(Clone, Debug)]
struct PreluState<B: Backend> {
    x: FloatTensor<B>,
    /// `[channels]`.
    alpha: FloatTensor<B>,
    alpha_shape: Shape,
    layout: Layout,
}

/// The backward of the fused PReLU: `dx` and `dα` in one pass.
#[derive(Debug)]
struct FusedPrelu;

impl<B: KernelBackend> Backward<B, 2> for FusedPrelu {
    type State = PreluState<B>;

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let [node_x, node_a] = ops.parents;
        let s = ops.state;
        let (dx, dalpha) = kernels::prelu_backward::<B>(s.x, s.alpha, grad, s.layout);
        if let Some(node) = node_x {
            grads.register::<B>(node.id, dx);
        }
        if let Some(node) = node_a {
            grads.register::<B>(node.id, B::float_reshape(dalpha, s.alpha_shape));
        }
    }
}

/// PReLU as one node (`layout` from [`prelu_layout`]).
pub(crate) fn prelu<B: KernelBackend, C: CheckpointStrategy>(
    x: FloatTensor<Autodiff<B, C>>,
    alpha: FloatTensor<Autodiff<B, C>>,
    layout: Layout,
) -> FloatTensor<Autodiff<B, C>> {
    let alpha_shape = alpha.primitive.shape();
    let a = flat::<B>(alpha.primitive.clone(), layout);
    let y = kernels::prelu::<B>(x.primitive.clone(), a.clone(), layout);
    match FusedPrelu
        .prepare::<C>([x.node.clone(), alpha.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let state = PreluState {
                x: x.primitive,
                alpha: a,
                alpha_shape,
                layout,
            };
            prep.finish(state, y)
        }
        OpsKind::UnTracked(prep) => prep.finish(y),
    }
}

/// The activation an affine keeps for `dα`.
#[derive(Clone, Debug)]
enum Kept<B: Backend> {
    Dense(FloatTensor<B>),
    /// SparseAct's fused variant: the kept blocks, and the activation's shape.
    Pruned(Pruned<B>, Shape),
    /// The fused variant on the host: the kept blocks, the activation's shape and device.
    Host(Columns, Shape, B::Device),
}

impl<B: Backend> Kept<B> {
    /// The activation (pruned blocks zero) in its own shape.
    fn dense(self) -> FloatTensor<B> {
        match self {
            Kept::Dense(x) => x,
            Kept::Pruned(p, shape) => {
                B::float_reshape(p.to_dense().into_primitive().tensor(), shape)
            }
            Kept::Host(c, shape, device) => {
                B::float_from_data(TensorData::new(c.to_dense(), shape), &device)
            }
        }
    }
}

/// The fused variant's pruning: on the host ([`prune_stored`]) where `B` has no CubeCL
/// kernels, with Burn tensor ops elsewhere (the kernels keep no dense form to rebuild).
fn prune_kept<B: KernelBackend>(
    x: FloatTensor<B>,
    pruning: Pruning,
    jitter: Option<f64>,
) -> Kept<B> {
    let shape = x.shape();
    let view = sample_view(&shape);
    if B::cube_runtime().is_none() {
        let device = B::float_device(&x);
        let x3 = B::float_reshape(x, Shape::from(view.to_vec()));
        return match prune_stored::<B>(x3, pruning.block, pruning.sparsity, jitter) {
            Stored::Host(c) => Kept::Host(c, shape, device),
            // nothing pruned (s = 0) or no samples: the generic path's arrays, as prune_stored
            // built them
            Stored::Tensors(p) => Kept::Pruned(p, shape),
            Stored::Kernel { .. } => unreachable!("no kernel storage without CubeCL"),
        };
    }
    let x3 = Tensor::<B, 3>::from_primitive(TensorPrimitive::Float(x)).reshape(view);
    Kept::Pruned(prune(x3, pruning.block, pruning.sparsity, jitter), shape)
}

/// What the fused affine keeps for backward.
#[derive(Clone, Debug)]
struct AffineState<B: Backend> {
    /// When `α` needs a gradient.
    x: Option<Kept<B>>,
    /// `[channels]`.
    alpha: FloatTensor<B>,
    alpha_shape: Shape,
    beta_shape: Option<Shape>,
    layout: Layout,
}

/// The backward of the fused affine with `N` parents (`x`, `α`[, `β`]): `dx`, `dα` and `dβ`
/// in one pass.
#[derive(Debug)]
struct FusedAffine<const N: usize>;

impl<B: KernelBackend, const N: usize> Backward<B, N> for FusedAffine<N> {
    type State = AffineState<B>;

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let mut parents = ops.parents.into_iter();
        let (node_x, node_a, node_b) = (
            parents.next().flatten(),
            parents.next().flatten(),
            parents.next().flatten(),
        );
        let s = ops.state;
        let x = s.x.map(Kept::dense);
        let (dx, dalpha, dbeta) = kernels::affine_backward::<B>(x, s.alpha, grad, s.layout);
        if let Some(node) = node_x {
            grads.register::<B>(node.id, dx);
        }
        if let (Some(node), Some(dalpha)) = (node_a, dalpha) {
            grads.register::<B>(node.id, B::float_reshape(dalpha, s.alpha_shape));
        }
        if let (Some(node), Some(shape)) = (node_b, s.beta_shape) {
            grads.register::<B>(node.id, B::float_reshape(dbeta, shape));
        }
    }
}

/// The per-channel affine `x · α + β` (a scale without `β`) as one node; with `pruning`, the
/// activation kept for `dα` is pruned ([`prune`]).
pub(crate) fn affine_node<B: KernelBackend, C: CheckpointStrategy>(
    x: FloatTensor<Autodiff<B, C>>,
    alpha: FloatTensor<Autodiff<B, C>>,
    beta: Option<FloatTensor<Autodiff<B, C>>>,
    layout: Layout,
    pruning: Option<(Pruning, Option<f64>)>,
) -> FloatTensor<Autodiff<B, C>> {
    let alpha_shape = alpha.primitive.shape();
    let a = flat::<B>(alpha.primitive.clone(), layout);
    let b = beta
        .as_ref()
        .map(|b| flat::<B>(b.primitive.clone(), layout));
    let y = kernels::affine::<B>(x.primitive.clone(), a.clone(), b, layout);
    let state = |x: FloatTensor<B>, alpha_tracked: bool, beta_shape: Option<Shape>| {
        let kept = alpha_tracked.then(|| match pruning {
            Some((pruning, jitter)) => prune_kept(x, pruning, jitter),
            None => Kept::Dense(x),
        });
        AffineState {
            x: kept,
            alpha: a,
            alpha_shape,
            beta_shape,
            layout,
        }
    };
    let alpha_tracked = alpha.is_tracked();
    match beta {
        Some(beta) => match FusedAffine::<3>
            .prepare::<C>([x.node.clone(), alpha.node.clone(), beta.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let state = state(x.primitive, alpha_tracked, Some(beta.primitive.shape()));
                prep.finish(state, y)
            }
            OpsKind::UnTracked(prep) => prep.finish(y),
        },
        None => match FusedAffine::<2>
            .prepare::<C>([x.node.clone(), alpha.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(state(x.primitive, alpha_tracked, None), y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        },
    }
}

/// What the fused batch norm keeps for backward.
#[derive(Clone, Debug)]
struct NormState<B: Backend> {
    x: FloatTensor<B>,
    /// The batch's statistics, `[channels]`.
    mean: FloatTensor<B>,
    var: FloatTensor<B>,
    /// `[channels]`.
    gamma: FloatTensor<B>,
    gamma_shape: Shape,
    beta_shape: Shape,
    layout: Layout,
    epsilon: f32,
}

/// The backward of the fused batch norm: `dx`, `dγ` and `dβ` (through the batch's statistics)
/// in three launches.
#[derive(Debug)]
struct FusedBatchNorm;

impl<B: KernelBackend> Backward<B, 3> for FusedBatchNorm {
    type State = NormState<B>;

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let [node_x, node_g, node_b] = ops.parents;
        let s = ops.state;
        let stats = [s.mean, s.var, s.gamma];
        let (dx, dgamma, dbeta) =
            norm::batch_norm_backward::<B>(s.x, grad, stats, s.layout, s.epsilon);
        if let Some(node) = node_x {
            grads.register::<B>(node.id, dx);
        }
        if let Some(node) = node_g {
            grads.register::<B>(node.id, B::float_reshape(dgamma, s.gamma_shape));
        }
        if let Some(node) = node_b {
            grads.register::<B>(node.id, B::float_reshape(dbeta, s.beta_shape));
        }
    }
}

/// Batch norm's training forward as one node over `x` (`[outer, channels, inner]` by
/// `layout`): the output, and the running mean and variance (`running`) after the step
/// (untracked: Burn's `BatchNorm` detaches them too).
pub(crate) fn batch_norm_node<B: KernelBackend, C: CheckpointStrategy>(
    x: FloatTensor<Autodiff<B, C>>,
    [gamma, beta]: [FloatTensor<Autodiff<B, C>>; 2],
    running: (FloatTensor<B>, FloatTensor<B>),
    layout: Layout,
    step: &BatchNormStep,
) -> (FloatTensor<Autodiff<B, C>>, FloatTensor<B>, FloatTensor<B>) {
    let (gamma_shape, beta_shape) = (gamma.primitive.shape(), beta.primitive.shape());
    let g = flat::<B>(gamma.primitive.clone(), layout);
    let b = flat::<B>(beta.primitive.clone(), layout);
    let out = norm::batch_norm::<B>(
        x.primitive.clone(),
        g.clone(),
        b,
        Some(running),
        layout,
        step,
    );
    let y = match FusedBatchNorm
        .prepare::<C>([x.node.clone(), gamma.node.clone(), beta.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let state = NormState {
                x: x.primitive,
                mean: out.mean,
                var: out.var,
                gamma: g,
                gamma_shape,
                beta_shape,
                layout,
                epsilon: step.epsilon,
            };
            prep.finish(state, out.y)
        }
        OpsKind::UnTracked(prep) => prep.finish(out.y),
    };
    let (mean, var) = out.running.expect("the running statistics were given");
    (y, mean, var)
}

/// What the fused layer norm keeps for backward.
#[derive(Clone, Debug)]
struct LayerNormState<B: Backend> {
    /// The normalized input, of `x`'s shape.
    xhat: FloatTensor<B>,
    /// Each row's `σ`.
    sigma: FloatTensor<B>,
    gamma: FloatTensor<B>,
    gamma_shape: Shape,
    /// `β`'s shape, when there is one.
    beta_shape: Option<Shape>,
}

/// The backward of the fused layer norm with `N` parents (`x`, `γ`[, `β`]): `dx` in one
/// kernel, `dγ` and `dβ` in the broadcast family's channel pass.
#[derive(Debug)]
struct FusedLayerNorm<const N: usize>;

impl<B: KernelBackend, const N: usize> Backward<B, N> for FusedLayerNorm<N> {
    type State = LayerNormState<B>;

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let s = ops.state;
        let (dx, dgamma, dbeta) =
            layer_norm::layer_norm_backward::<B>(s.xhat, s.sigma, s.gamma, grad);
        let mut parents = ops.parents.into_iter();
        if let Some(node) = parents.next().flatten() {
            grads.register::<B>(node.id, dx);
        }
        if let Some(node) = parents.next().flatten() {
            grads.register::<B>(node.id, B::float_reshape(dgamma, s.gamma_shape));
        }
        if let (Some(node), Some(shape)) = (parents.next().flatten(), s.beta_shape) {
            grads.register::<B>(node.id, B::float_reshape(dbeta, shape));
        }
    }
}

/// Layer norm over the last axis of `x` as one node (the caller checks that
/// [`layer_norm::takes`] the tensors): its forward one kernel, its backward one kernel and the
/// channel pass ([`cubecl_kernels::layer_norm`]).
pub(crate) fn layer_norm_node<B: KernelBackend, C: CheckpointStrategy>(
    x: FloatTensor<Autodiff<B, C>>,
    gamma: FloatTensor<Autodiff<B, C>>,
    beta: Option<FloatTensor<Autodiff<B, C>>>,
    epsilon: f32,
) -> FloatTensor<Autodiff<B, C>> {
    let gamma_shape = gamma.primitive.shape();
    let g = gamma.primitive.clone();
    let b = beta.as_ref().map(|b| b.primitive.clone());
    let out = layer_norm::layer_norm::<B>(x.primitive.clone(), g.clone(), b, epsilon);
    let state = |beta_shape| LayerNormState {
        xhat: out.xhat,
        sigma: out.sigma,
        gamma: g,
        gamma_shape,
        beta_shape,
    };
    match beta {
        Some(beta) => match FusedLayerNorm::<3>
            .prepare::<C>([x.node.clone(), gamma.node.clone(), beta.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(state(Some(beta.primitive.shape())), out.y),
            OpsKind::UnTracked(prep) => prep.finish(out.y),
        },
        None => match FusedLayerNorm::<2>
            .prepare::<C>([x.node.clone(), gamma.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(state(None), out.y),
            OpsKind::UnTracked(prep) => prep.finish(out.y),
        },
    }
}

/// The backward of the fused softmax: `dx` from the forward's output in one kernel.
#[derive(Debug)]
struct FusedSoftmax;

impl<B: KernelBackend> Backward<B, 1> for FusedSoftmax {
    /// The forward's output.
    type State = FloatTensor<B>;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let [node] = ops.parents;
        if let Some(node) = node {
            grads.register::<B>(node.id, softmax::softmax_backward::<B>(ops.state, grad));
        }
    }
}

/// Softmax over the last axis of `x` as one node (the caller checks that [`softmax::takes`]
/// the tensor): one kernel each way ([`cubecl_kernels::softmax`]).
pub(crate) fn softmax_node<B: KernelBackend, C: CheckpointStrategy>(
    x: FloatTensor<Autodiff<B, C>>,
) -> FloatTensor<Autodiff<B, C>> {
    let y = softmax::softmax::<B>(x.primitive.clone());
    match FusedSoftmax
        .prepare::<C>([x.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(y.clone(), y),
        OpsKind::UnTracked(prep) => prep.finish(y),
    }
}
