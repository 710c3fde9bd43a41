//! The broadcast kernels on any backend of an Ember stack: the CubeCL
//! kernels where float tensors live in CubeCL memory, the host implementation otherwise (the
//! ndarray path: the values are read once, computed by [`crate::broadcast::reference`] and
//! written back).
//!
//! These take a backend's float tensors ([`KernelBackend`]); the launches above take CubeCL
//! tensors.
//!
//! `x` is any float tensor viewed as `[outer, channels, inner]` ([`Layout`]); `α` and `β` hold
//! `channels` values (any shape: they are read flat). Results have `x`'s shape; per-channel
//! gradients are `[channels]`.

use super::{Layout, reference};
use crate::broadcast;
use crate::decorator::{CubeVisitor, KernelBackend, with_f32s};
use burn_backend::tensor::FloatTensor;
use burn_backend::{Shape, TensorData, TensorMetadata};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;

/// PReLU with one `α` per channel: `x < 0 ? x · α[c] : x`.
pub fn prelu<B: KernelBackend>(
    x: FloatTensor<B>,
    alpha: FloatTensor<B>,
    layout: Layout,
) -> FloatTensor<B> {
    let shape = x.shape();
    let mut out = B::visit(
        Op {
            kind: Kind::Prelu,
            layout,
            shape,
        },
        vec![x, alpha],
    );
    out.remove(0)
}

/// PReLU's backward for the output gradient `dy`: `(dx, dα)`, `dα: [channels]`.
pub fn prelu_backward<B: KernelBackend>(
    x: FloatTensor<B>,
    alpha: FloatTensor<B>,
    dy: FloatTensor<B>,
    layout: Layout,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let shape = x.shape();
    let mut out = B::visit(
        Op {
            kind: Kind::PreluBackward,
            layout,
            shape,
        },
        vec![x, alpha, dy],
    )
    .into_iter();
    (out.next().expect("dx"), out.next().expect("dα"))
}

/// Per-channel affine `x · α[c] + β[c]` (a scale when `beta` is `None`).
pub fn affine<B: KernelBackend>(
    x: FloatTensor<B>,
    alpha: FloatTensor<B>,
    beta: Option<FloatTensor<B>>,
    layout: Layout,
) -> FloatTensor<B> {
    let shape = x.shape();
    let kind = Kind::Affine {
        beta: beta.is_some(),
    };
    let inputs = [Some(x), Some(alpha), beta].into_iter().flatten().collect();
    let mut out = B::visit(
        Op {
            kind,
            layout,
            shape,
        },
        inputs,
    );
    out.remove(0)
}

/// The affine's backward for the output gradient `dy`: `(dx, dα, dβ)`; `dα` only when `x` is
/// given (the activation `α` multiplied), both `[channels]`.
pub fn affine_backward<B: KernelBackend>(
    x: Option<FloatTensor<B>>,
    alpha: FloatTensor<B>,
    dy: FloatTensor<B>,
    layout: Layout,
) -> (FloatTensor<B>, Option<FloatTensor<B>>, FloatTensor<B>) {
    let shape = dy.shape();
    let with_x = x.is_some();
    let inputs = [x, Some(alpha), Some(dy)].into_iter().flatten().collect();
    let mut out = B::visit(
        Op {
            kind: Kind::AffineBackward { x: with_x },
            layout,
            shape,
        },
        inputs,
    )
    .into_iter();
    let dx = out.next().expect("dx");
    let dalpha = with_x.then(|| out.next().expect("dα"));
    (dx, dalpha, out.next().expect("dβ"))
}

/// Which op a visit runs, and which optional inputs it was given.
#[derive(Clone, Copy)]
enum Kind {
    Prelu,
    PreluBackward,
    Affine { beta: bool },
    AffineBackward { x: bool },
}

/// One broadcast op, run by [`KernelBackend::visit`]: its inputs in the order of the public
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
            (Kind::Prelu, [x, alpha]) => vec![broadcast::launch_prelu(x, alpha, l)],
            (Kind::PreluBackward, [x, alpha, dy]) => {
                let (dx, da) = broadcast::launch_prelu_backward(x, alpha, dy, l);
                vec![dx, da]
            }
            (Kind::Affine { beta: true }, [x, alpha, beta]) => {
                vec![broadcast::launch_affine(x, alpha, Some(beta), l)]
            }
            (Kind::Affine { beta: false }, [x, alpha]) => {
                vec![broadcast::launch_affine(x, alpha, None, l)]
            }
            (Kind::AffineBackward { x: true }, [x, alpha, dy]) => {
                let (dx, da, db) = broadcast::launch_affine_backward(Some(x), alpha, dy, l);
                vec![dx, da.expect("dα for a given x"), db]
            }
            (Kind::AffineBackward { x: false }, [alpha, dy]) => {
                let (dx, _, db) = broadcast::launch_affine_backward(None, alpha, dy, l);
                vec![dx, db]
            }
            _ => unreachable!("broadcast op: inputs do not match the op"),
        };
        outputs.into_iter().map(rewrap).collect()
    }

    fn host(self, inputs: Vec<FloatTensor<B>>) -> Self::Output {
        let device = B::float_device(&inputs[0]);
        let l = self.layout;
        let full =
            |v: Vec<f32>| B::float_from_data(TensorData::new(v, self.shape.clone()), &device);
        let channel = |v: Vec<f32>| B::float_from_data(TensorData::new(v, [l.channels]), &device);
        with_f32s::<B, _>(inputs, |v| match (self.kind, v) {
            (Kind::Prelu, [x, alpha]) => vec![full(reference::prelu(x, alpha, l))],
            (Kind::PreluBackward, [x, alpha, dy]) => {
                let (dx, da) = reference::prelu_backward(x, alpha, dy, l);
                vec![full(dx), channel(da)]
            }
            (Kind::Affine { beta: true }, [x, alpha, beta]) => {
                vec![full(reference::affine(x, alpha, Some(*beta), l))]
            }
            (Kind::Affine { beta: false }, [x, alpha]) => {
                vec![full(reference::affine(x, alpha, None, l))]
            }
            (Kind::AffineBackward { x: true }, [x, alpha, dy]) => {
                let (dx, da, db) = reference::affine_backward(Some(*x), alpha, dy, l);
                vec![
                    full(dx),
                    channel(da.expect("dα for a given x")),
                    channel(db),
                ]
            }
            (Kind::AffineBackward { x: false }, [alpha, dy]) => {
                let (dx, _, db) = reference::affine_backward(None, alpha, dy, l);
                vec![full(dx), channel(db)]
            }
            _ => unreachable!("broadcast op: inputs do not match the op"),
        })
    }
}

/// [`affine`] with `α` and `β` broadcast along `axis` of `x` (the form of a registered hook:
/// `ember_models::broadcast::affine` checks the shapes before calling it).
///
/// # Panics
/// If `axis` is not an axis of `x` or `α` does not hold one value per channel there.
pub fn affine_on_axis<B: KernelBackend>(
    x: FloatTensor<B>,
    alpha: FloatTensor<B>,
    beta: Option<FloatTensor<B>>,
    axis: usize,
) -> FloatTensor<B> {
    let layout = Layout::of(x.shape().as_slice(), axis, alpha.shape().num_elements())
        .unwrap_or_else(|e| panic!("fused affine: {e}"));
    affine::<B>(x, alpha, beta, layout)
}
