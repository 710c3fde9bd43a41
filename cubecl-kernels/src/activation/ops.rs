//! The activation kernels on the float tensors of any backend of an Ember stack: the CubeCL
//! kernels where float tensors live in CubeCL memory; elsewhere, and for tensors the kernels do
//! not take (other element types, more than `2³²` values, a backward whose operands differ in
//! shape), the tensors are handed back for the backend's own op.

use crate::decorator::{CubeVisitor, KernelBackend};
use burn_backend::tensor::FloatTensor;
use burn_backend::{DType, TensorMetadata};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;

/// ReLU of `x` by [`super::launch_relu`], or `x` back where the kernel does not apply.
pub fn relu<B: KernelBackend>(x: FloatTensor<B>) -> Result<FloatTensor<B>, FloatTensor<B>> {
    match applies::<B>(&[&x]) {
        true => Ok(B::visit(Kind::Relu, vec![x]).remove(0)),
        false => Err(x),
    }
}

/// ReLU's backward by [`super::launch_relu_backward`] given the forward's output `y` and the
/// gradient `g`, or both back where the kernel does not apply.
#[allow(clippy::type_complexity)]
pub fn relu_backward<B: KernelBackend>(
    y: FloatTensor<B>,
    g: FloatTensor<B>,
) -> Result<FloatTensor<B>, (FloatTensor<B>, FloatTensor<B>)> {
    match applies::<B>(&[&y, &g]) && y.shape() == g.shape() {
        true => Ok(B::visit(Kind::ReluBackward, vec![y, g]).remove(0)),
        false => Err((y, g)),
    }
}

/// Whether the kernels take `tensors`: CubeCL memory, f32, fewer than `2³²` values.
fn applies<B: KernelBackend>(tensors: &[&FloatTensor<B>]) -> bool {
    B::cube_runtime().is_some()
        && tensors
            .iter()
            .all(|t| t.dtype() == DType::F32 && (t.shape().num_elements() as u64) < 1 << 32)
}

/// Which kernel a visit launches.
#[derive(Clone, Copy)]
enum Kind {
    Relu,
    ReluBackward,
}

impl<B: KernelBackend> CubeVisitor<B> for Kind {
    type Output = Vec<FloatTensor<B>>;

    fn cube<R: CubeRuntime>(
        self,
        inputs: Vec<CubeTensor<R>>,
        rewrap: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> Self::Output {
        let mut inputs = inputs.into_iter();
        let first = inputs.next().expect("an input");
        let out = match (self, inputs.next()) {
            (Kind::Relu, None) => super::launch_relu(first),
            (Kind::ReluBackward, Some(g)) => super::launch_relu_backward(&first, g),
            _ => unreachable!("activation: inputs do not match the kernel"),
        };
        vec![rewrap(out)]
    }

    fn host(self, _: Vec<FloatTensor<B>>) -> Self::Output {
        unreachable!("the activation kernels are visited only on CubeCL backends")
    }
}
