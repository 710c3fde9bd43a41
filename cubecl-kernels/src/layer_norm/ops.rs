//! The layer-norm kernels on any backend of an Ember stack: the CubeCL kernels where float
//! tensors live in CubeCL memory, the host implementation otherwise (the ndarray path: the
//! values are borrowed where the backend holds them in order, computed by
//! [`crate::layer_norm::reference`] and written back).
//!
//! `x` is any float tensor normalized over its last axis (`d` values); `γ` and `β` hold `d`
//! values (any shape: they are read flat). Outputs carry `x`'s configuration on a decorated
//! backend (the visit's first input). [`takes`] says whether tensors fit.

use super::{LayerNormed, reference};
use crate::decorator::{CubeVisitor, KernelBackend, with_f32s};
use crate::layer_norm;
use burn_backend::tensor::FloatTensor;
use burn_backend::{DType, Shape, TensorData, TensorMetadata};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;

/// Whether the fused layer norm takes `x`, `gamma` and `beta`: all f32, `x` of rank 1 or more
/// with a last axis of `d > 0` values and fewer than 2³¹ in all, `γ` (and `β`) of `d` values.
pub fn takes<B: KernelBackend>(
    x: &FloatTensor<B>,
    gamma: &FloatTensor<B>,
    beta: Option<&FloatTensor<B>>,
) -> bool {
    let shape = x.shape();
    let d = shape.as_slice().last().copied().unwrap_or(0);
    let per = |t: &FloatTensor<B>| t.dtype() == DType::F32 && t.shape().num_elements() == d;
    x.dtype() == DType::F32
        && d > 0
        && (shape.num_elements() as u64) < 1 << 31
        && per(gamma)
        && beta.is_none_or(per)
}

/// A layer norm's forward over the last axis of `x`: the output, `x̂` and each row's `σ`
/// (`[rows]`); without `beta`, `y = x̂ · γ`.
///
/// # Panics
/// Where [`takes`] is false.
pub fn layer_norm<B: KernelBackend>(
    x: FloatTensor<B>,
    gamma: FloatTensor<B>,
    beta: Option<FloatTensor<B>>,
    epsilon: f32,
) -> LayerNormed<FloatTensor<B>> {
    assert!(
        takes::<B>(&x, &gamma, beta.as_ref()),
        "the fused layer norm does not take {:?} with γ {:?}",
        x.shape(),
        gamma.shape()
    );
    let with_beta = beta.is_some();
    let mut inputs = vec![x, gamma];
    inputs.extend(beta);
    let mut out = visit::<B>(Kind::Forward { epsilon, with_beta }, inputs).into_iter();
    let mut next = || out.next().expect("a layer norm output");
    let (y, xhat, sigma) = (next(), next(), next());
    LayerNormed { y, xhat, sigma }
}

/// A layer norm's backward given `dy`: `(dx, dγ, dβ)` from the forward's `x̂` and `σ` and
/// `γ`; `dγ` and `dβ` are `[d]`.
///
/// # Panics
/// If the tensors are not what [`layer_norm()`] made of the forward's and `dy` is not of `x̂`'s
/// shape.
pub fn layer_norm_backward<B: KernelBackend>(
    xhat: FloatTensor<B>,
    sigma: FloatTensor<B>,
    gamma: FloatTensor<B>,
    dy: FloatTensor<B>,
) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) {
    assert_eq!(xhat.shape(), dy.shape(), "layer norm backward: x̂ and dy");
    let inputs = vec![dy, xhat, sigma, gamma];
    let mut out = visit::<B>(Kind::Backward, inputs).into_iter();
    let mut next = || out.next().expect("a layer norm gradient");
    (next(), next(), next())
}

fn visit<B: KernelBackend>(kind: Kind, inputs: Vec<FloatTensor<B>>) -> Vec<FloatTensor<B>> {
    let shape = inputs[0].shape();
    let d = shape.as_slice().last().copied().unwrap_or(0);
    B::visit(Op { kind, shape, d }, inputs)
}

/// Which pass a visit runs.
#[derive(Clone, Copy)]
enum Kind {
    Forward { epsilon: f32, with_beta: bool },
    Backward,
}

/// One layer-norm pass, run by [`KernelBackend::visit`]: its inputs `[x, γ, (β)]` or
/// `[dy, x̂, σ, γ]`, its outputs in the order the public functions return them.
struct Op {
    kind: Kind,
    /// The first input's shape.
    shape: Shape,
    d: usize,
}

impl<B: KernelBackend> CubeVisitor<B> for Op {
    type Output = Vec<FloatTensor<B>>;

    fn cube<R: CubeRuntime>(
        self,
        inputs: Vec<CubeTensor<R>>,
        rewrap: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> Self::Output {
        let d = self.d;
        let outputs = match (self.kind, inputs.as_slice()) {
            (Kind::Forward { epsilon, .. }, [x, gamma, beta @ ..]) => {
                let o = layer_norm::launch_layer_norm(x, gamma, beta.first(), d, epsilon);
                vec![o.y, o.xhat, o.sigma]
            }
            (Kind::Backward, [dy, xhat, sigma, gamma]) => {
                let (dx, dg, db) =
                    layer_norm::launch_layer_norm_backward(xhat, sigma, gamma, dy, d);
                vec![dx, dg, db]
            }
            _ => unreachable!("layer norm: inputs do not match the pass"),
        };
        outputs.into_iter().map(rewrap).collect()
    }

    fn host(self, inputs: Vec<FloatTensor<B>>) -> Self::Output {
        let device = B::float_device(&inputs[0]);
        let (d, kind) = (self.d, self.kind);
        let outputs = with_f32s::<B, _>(inputs, |v| match (kind, v) {
            (Kind::Forward { epsilon, with_beta }, [x, gamma, rest @ ..]) => {
                let beta = rest.first().copied().filter(|_| with_beta);
                let o = reference::layer_norm(x, gamma, beta, d, epsilon);
                vec![o.y, o.xhat, o.sigma]
            }
            (Kind::Backward, [dy, xhat, sigma, gamma]) => {
                let (dx, dg, db) = reference::layer_norm_backward(xhat, sigma, gamma, dy, d);
                vec![dx, dg, db]
            }
            _ => unreachable!("layer norm: inputs do not match the pass"),
        });
        let rows = self.shape.num_elements() / d.max(1);
        // forward: y and x̂ of x's shape, σ per row; backward: dx of dy's shape, dγ and dβ [d]
        let shapes = match kind {
            Kind::Forward { .. } => [self.shape.clone(), self.shape, Shape::new([rows])],
            Kind::Backward => [self.shape, Shape::new([d]), Shape::new([d])],
        };
        outputs
            .into_iter()
            .zip(shapes)
            .map(|(v, shape)| B::float_from_data(TensorData::new(v, shape), &device))
            .collect()
    }
}
