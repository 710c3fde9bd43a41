//! The batch-norm kernels on any backend of an Ember stack: the CubeCL kernels where float
//! tensors live in CubeCL memory, the host implementation otherwise (the ndarray path: the
//! values are borrowed where the backend holds them in order, computed by
//! [`crate::norm::reference`] and written back).
//!
//! These take a backend's float tensors ([`KernelBackend`]); the launches take CubeCL tensors.
//! `x` is any float tensor viewed as `[outer, channels, inner]` ([`Layout`]); per-channel
//! inputs hold `channels` values (any shape: they are read flat). Outputs have `x`'s shape, or
//! `[channels]`, and carry `x`'s configuration on a decorated backend (the visit's first input).

use super::Normalized;
use super::{BatchNormStep, reference};
use crate::broadcast::Layout;
use crate::decorator::{CubeVisitor, KernelBackend, with_f32s};
use crate::norm;
use burn_backend::tensor::FloatTensor;
use burn_backend::{DType, Shape, TensorData, TensorMetadata};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;

/// A batch norm's training forward: the output, the batch's means and variances, and the
/// running statistics after the step when `running` gives them.
///
/// # Panics
/// If a tensor is not f32 or does not hold the values `layout` gives it.
pub fn batch_norm<B: KernelBackend>(
    x: FloatTensor<B>,
    gamma: FloatTensor<B>,
    beta: FloatTensor<B>,
    running: Option<(FloatTensor<B>, FloatTensor<B>)>,
    layout: Layout,
    step: &BatchNormStep,
) -> Normalized<FloatTensor<B>> {
    let with_running = running.is_some();
    let mut inputs = vec![x, gamma, beta];
    if let Some((m, v)) = running {
        inputs.extend([m, v]);
    }
    let mut out = visit::<B>(Kind::Train(*step), layout, inputs).into_iter();
    let mut next = || out.next().expect("a batch norm output");
    let (y, mean, var) = (next(), next(), next());
    let running = with_running.then(|| (next(), next()));
    Normalized {
        y,
        mean,
        var,
        running,
    }
}

/// A batch norm's inference forward with `mean` and `var` (the running statistics).
///
/// # Panics
/// As [`batch_norm`].
pub fn normalize<B: KernelBackend>(
    x: FloatTensor<B>,
    [mean, var, gamma, beta]: [FloatTensor<B>; 4],
    layout: Layout,
    epsilon: f32,
) -> FloatTensor<B> {
    let inputs = vec![x, mean, var, gamma, beta];
    visit::<B>(Kind::Normalize(epsilon), layout, inputs).remove(0)
}

/// A batch norm's backward given `dy`: `(dx, dγ, dβ)` from the forward's `x`, batch statistics
/// and `γ`.
///
/// # Panics
/// As [`batch_norm`].
pub fn batch_norm_backward<B: KernelBackend>(
    x: FloatTensor<B>,
    dy: FloatTensor<B>,
    [mean, var, gamma]: [FloatTensor<B>; 3],
    layout: Layout,
    epsilon: f32,
) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) {
    let inputs = vec![x, dy, mean, var, gamma];
    let mut out = visit::<B>(Kind::Backward(epsilon), layout, inputs).into_iter();
    let mut next = || out.next().expect("a batch norm gradient");
    (next(), next(), next())
}

fn visit<B: KernelBackend>(
    kind: Kind,
    layout: Layout,
    inputs: Vec<FloatTensor<B>>,
) -> Vec<FloatTensor<B>> {
    for t in &inputs {
        assert!(
            t.dtype() == DType::F32,
            "the fused batch norm takes f32 tensors, got {:?}",
            t.dtype()
        );
    }
    let shape = inputs[0].shape();
    B::visit(
        Op {
            kind,
            layout,
            shape,
        },
        inputs,
    )
}

/// Which pass a visit runs.
#[derive(Clone, Copy)]
enum Kind {
    Train(BatchNormStep),
    Normalize(f32),
    Backward(f32),
}

/// One batch-norm pass, run by [`KernelBackend::visit`]: its inputs in the order of the public
/// functions above, its outputs in the order they return them.
struct Op {
    kind: Kind,
    layout: Layout,
    shape: Shape,
}

impl<B: KernelBackend> CubeVisitor<B> for Op {
    type Output = Vec<FloatTensor<B>>;

    fn cube<R: CubeRuntime>(
        self,
        inputs: Vec<CubeTensor<R>>,
        rewrap: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> Self::Output {
        let l = self.layout;
        let outputs = match (self.kind, inputs.as_slice()) {
            (Kind::Train(s), [x, gamma, beta, running @ ..]) => {
                let running = match running {
                    [m, v] => Some((m, v)),
                    _ => None,
                };
                let o = norm::launch_batch_norm(x, gamma, beta, running, l, &s);
                train_outputs(o)
            }
            (Kind::Normalize(eps), [x, m, v, g, b]) => {
                vec![norm::launch_normalize(x, [m, v, g, b], l, eps)]
            }
            (Kind::Backward(eps), [x, dy, m, v, g]) => {
                let (dx, dg, db) = norm::launch_batch_norm_backward(x, dy, [m, v, g], l, eps);
                vec![dx, dg, db]
            }
            _ => unreachable!("batch norm: inputs do not match the pass"),
        };
        outputs.into_iter().map(rewrap).collect()
    }

    fn host(self, inputs: Vec<FloatTensor<B>>) -> Self::Output {
        let device = B::float_device(&inputs[0]);
        let l = self.layout;
        let outputs = with_f32s::<B, _>(inputs, |v| pass(self.kind, l, v));
        // the first output has x's shape, the others are per channel
        outputs
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                let shape = match i {
                    0 => self.shape.clone(),
                    _ => Shape::new([l.channels]),
                };
                B::float_from_data(TensorData::new(v, shape), &device)
            })
            .collect()
    }
}

fn train_outputs<T>(o: Normalized<T>) -> Vec<T> {
    let mut out = vec![o.y, o.mean, o.var];
    if let Some((m, v)) = o.running {
        out.extend([m, v]);
    }
    out
}

/// The host pass of `kind` on its inputs' values.
fn pass(kind: Kind, l: Layout, v: &[&[f32]]) -> Vec<Vec<f32>> {
    match (kind, v) {
        (Kind::Train(s), [x, gamma, beta, running @ ..]) => {
            let running = match running {
                [m, v] => Some((*m, *v)),
                _ => None,
            };
            train_outputs(reference::batch_norm(x, gamma, beta, running, l, &s))
        }
        (Kind::Normalize(eps), [x, m, v, g, b]) => {
            vec![reference::normalize(x, [m, v, g, b], l, eps)]
        }
        (Kind::Backward(eps), [x, dy, m, v, g]) => {
            let (dx, dg, db) = reference::batch_norm_backward(x, dy, [m, v, g], l, eps);
            vec![dx, dg, db]
        }
        _ => unreachable!("batch norm: inputs do not match the pass"),
    }
}

/// [`normalize`] over channel axis 1 of `x` (the form of a registered hook:
/// `ember_models::broadcast::batch_norm` checks the shapes before calling it).
///
/// # Panics
/// If `x` has rank below 2 or a per-channel input does not hold one value per channel.
pub fn normalize_channels<B: KernelBackend>(
    x: FloatTensor<B>,
    stats: [FloatTensor<B>; 4],
    epsilon: f64,
) -> FloatTensor<B> {
    let layout = Layout::of(x.shape().as_slice(), 1, stats[2].shape().num_elements())
        .unwrap_or_else(|e| panic!("fused batch norm: {e}"));
    normalize::<B>(x, stats, layout, epsilon as f32)
}
