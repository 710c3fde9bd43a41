//! The activation kernels on the float tensors of any backend of an Ember stack: the CubeCL
//! kernels where float tensors live in CubeCL memory; elsewhere, and for tensors the kernels do
//! not take (other element types, `2³²` values or more, a backward whose operands differ in
//! shape), the tensors are handed back for the backend's own op.

use super::Activation;
use crate::decorator::{CubeVisitor, KernelBackend};
use burn_backend::tensor::FloatTensor;
use burn_backend::{DType, TensorMetadata};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;

/// `op` of `x` by [`super::launch_forward`], or `x` back where the kernel does not apply.
pub fn forward<B: KernelBackend>(
    op: Activation,
    x: FloatTensor<B>,
) -> Result<FloatTensor<B>, FloatTensor<B>> {
    match applies::<B>(&[&x]) {
        true => Ok(B::visit(
            Pass {
                op,
                backward: false,
            },
            vec![x],
        )
        .remove(0)),
        false => Err(x),
    }
}

/// `op`'s backward by [`super::launch_backward`] from what it reads, `saved` (ReLU's output,
/// GELU's input), and the gradient `g`; or both back where the kernel does not apply.
#[allow(clippy::type_complexity)]
pub fn backward<B: KernelBackend>(
    op: Activation,
    saved: FloatTensor<B>,
    g: FloatTensor<B>,
) -> Result<FloatTensor<B>, (FloatTensor<B>, FloatTensor<B>)> {
    match applies::<B>(&[&saved, &g]) && saved.shape() == g.shape() {
        true => Ok(B::visit(Pass { op, backward: true }, vec![saved, g]).remove(0)),
        false => Err((saved, g)),
    }
}

/// Whether the kernels take `tensors`: CubeCL memory, f32, fewer than `2³²` values.
fn applies<B: KernelBackend>(tensors: &[&FloatTensor<B>]) -> bool {
    B::cube_runtime().is_some()
        && tensors
            .iter()
            .all(|t| t.dtype() == DType::F32 && (t.shape().num_elements() as u64) < 1 << 32)
}

/// The pass a visit launches.
#[derive(Clone, Copy)]
struct Pass {
    op: Activation,
    backward: bool,
}

impl<B: KernelBackend> CubeVisitor<B> for Pass {
    type Output = Vec<FloatTensor<B>>;

    fn cube<R: CubeRuntime>(
        self,
        inputs: Vec<CubeTensor<R>>,
        rewrap: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> Self::Output {
        let mut inputs = inputs.into_iter();
        let first = inputs.next().expect("an input");
        let out = match (self.backward, inputs.next()) {
            (false, None) => super::launch_forward(self.op, first),
            (true, Some(g)) => super::launch_backward(self.op, &first, g),
            _ => unreachable!("activation: inputs do not match the pass"),
        };
        vec![rewrap(out)]
    }

    fn host(self, _: Vec<FloatTensor<B>>) -> Self::Output {
        unreachable!("the activation kernels are visited only on CubeCL backends")
    }
}
