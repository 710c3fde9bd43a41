//! The optimizer steps on any backend of an Ember stack: the CubeCL kernels where float tensors
//! live in CubeCL memory, the host implementation otherwise (the ndarray path: the values are
//! read once, stepped by [`crate::optim::reference`] and written back).
//!
//! These take a backend's float tensors ([`KernelBackend`]); the launches above take CubeCL
//! tensors. Results are new tensors of the parameter's shape; on a decorated backend they carry
//! the parameter's configuration at every level (it is the first input of the visit).

use super::{AdamStep, SgdStep, reference};
use crate::decorator::{CubeVisitor, KernelBackend, with_f32s};
use burn_backend::tensor::FloatTensor;
use burn_backend::{DType, Shape, TensorData, TensorMetadata};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;

/// Adam's step: `(parameter, first moment, second moment)` after it. `moments` are the moments
/// before it, `None` at a first step (`s.first`).
///
/// # Panics
/// If a tensor is not f32 or holds another number of values than `param`, or if `moments` is
/// given at a first step or missing at a later one.
pub fn adam<B: KernelBackend>(
    param: FloatTensor<B>,
    grad: FloatTensor<B>,
    moments: Option<(FloatTensor<B>, FloatTensor<B>)>,
    s: &AdamStep,
) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) {
    let mut inputs = vec![param, grad];
    if let Some((m, v)) = moments {
        inputs.extend([m, v]);
    }
    let mut out = visit::<B>(Kind::Adam(*s), inputs).into_iter();
    let p = out.next().expect("the parameter");
    let m = out.next().expect("the first moment");
    (p, m, out.next().expect("the second moment"))
}

/// SGD's step: `(parameter, velocity)` after it (no velocity without momentum). `velocity` is
/// the velocity before it, given only with momentum after a first step.
///
/// # Panics
/// As [`adam`], for the velocity.
pub fn sgd<B: KernelBackend>(
    param: FloatTensor<B>,
    grad: FloatTensor<B>,
    velocity: Option<FloatTensor<B>>,
    s: &SgdStep,
) -> (FloatTensor<B>, Option<FloatTensor<B>>) {
    let inputs = [Some(param), Some(grad), velocity]
        .into_iter()
        .flatten()
        .collect();
    let mut out = visit::<B>(Kind::Sgd(*s), inputs).into_iter();
    (out.next().expect("the parameter"), out.next())
}

fn visit<B: KernelBackend>(kind: Kind, inputs: Vec<FloatTensor<B>>) -> Vec<FloatTensor<B>> {
    for t in &inputs {
        assert!(
            t.dtype() == DType::F32,
            "the fused optimizer steps take f32 tensors, got {:?}",
            t.dtype()
        );
    }
    let shape = inputs[0].shape();
    B::visit(Step { kind, shape }, inputs)
}

/// Which step a visit runs.
#[derive(Clone, Copy)]
enum Kind {
    Adam(AdamStep),
    Sgd(SgdStep),
}

/// One step, run by [`KernelBackend::visit`]: its inputs in the order of the public functions
/// above (parameter, gradient, state), its outputs in the order they return them.
struct Step {
    kind: Kind,
    shape: Shape,
}

impl<B: KernelBackend> CubeVisitor<B> for Step {
    type Output = Vec<FloatTensor<B>>;

    fn cube<R: CubeRuntime>(
        self,
        inputs: Vec<CubeTensor<R>>,
        rewrap: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> Self::Output {
        let outputs = match (self.kind, inputs.as_slice()) {
            (Kind::Adam(s), [p, g]) => {
                let (p, m, v) = super::launch_adam(p, g, None, &s);
                vec![p, m, v]
            }
            (Kind::Adam(s), [p, g, m, v]) => {
                let (p, m, v) = super::launch_adam(p, g, Some((m, v)), &s);
                vec![p, m, v]
            }
            (Kind::Sgd(s), [p, g, rest @ ..]) => {
                let (p, u) = super::launch_sgd(p, g, rest.first(), &s);
                [Some(p), u].into_iter().flatten().collect()
            }
            _ => unreachable!("optimizer step: inputs do not match the step"),
        };
        outputs.into_iter().map(rewrap).collect()
    }

    fn host(self, inputs: Vec<FloatTensor<B>>) -> Self::Output {
        let device = B::float_device(&inputs[0]);
        let full =
            |v: Vec<f32>| B::float_from_data(TensorData::new(v, self.shape.clone()), &device);
        // the values borrowed where the backend holds them in order (ndarray), read otherwise
        let outputs = with_f32s::<B, _>(inputs, |v| step(self.kind, v));
        outputs.into_iter().map(full).collect()
    }
}

/// The host step of `kind` on the values of its inputs (parameter, gradient, state).
fn step(kind: Kind, v: &[&[f32]]) -> Vec<Vec<f32>> {
    match (kind, v) {
        (Kind::Adam(s), [p, g, state @ ..]) => {
            let moments = match state {
                [m, v] => Some((*m, *v)),
                _ => None,
            };
            let (p, m, v) = reference::adam(p, g, moments, &s);
            vec![p, m, v]
        }
        (Kind::Sgd(s), [p, g, state @ ..]) => {
            let (p, u) = reference::sgd(p, g, state.first().copied(), &s);
            [Some(p), u].into_iter().flatten().collect()
        }
        _ => unreachable!("optimizer step: inputs do not match the step"),
    }
}
