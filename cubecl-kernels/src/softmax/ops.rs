//! The softmax kernels on any backend of an Ember stack: the CubeCL kernels where float
//! tensors live in CubeCL memory, the host implementation otherwise (the ndarray path: the
//! values are borrowed where the backend holds them in order, computed by
//! [`crate::softmax::reference`] and written back). Outputs carry the first input's
//! configuration on a decorated backend. [`takes`] says whether a tensor fits.

use super::reference;
use crate::decorator::{CubeVisitor, KernelBackend, with_f32s};
use crate::softmax;
use burn_backend::tensor::FloatTensor;
use burn_backend::{DType, Shape, TensorData, TensorMetadata};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;

/// Whether the fused softmax takes `x` along `dim`: f32, `dim` its last axis, of `d > 0`
/// values, and fewer than 2³¹ values in all.
pub fn takes<B: KernelBackend>(x: &FloatTensor<B>, dim: usize) -> bool {
    let shape = x.shape();
    x.dtype() == DType::F32
        && dim + 1 == shape.num_dims()
        && shape[dim] > 0
        && (shape.num_elements() as u64) < 1 << 31
}

/// Softmax over the last axis of `x`.
///
/// # Panics
/// Where [`takes`] is false for the last axis.
pub fn softmax<B: KernelBackend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let last = x.shape().num_dims().saturating_sub(1);
    assert!(
        takes::<B>(&x, last),
        "the fused softmax does not take {:?}",
        x.shape()
    );
    visit::<B>(false, vec![x])
}

/// Softmax's backward over the last axis from the forward's output `y` and `dy`.
///
/// # Panics
/// If `dy` is not of `y`'s shape or [`takes`] is false for it.
pub fn softmax_backward<B: KernelBackend>(y: FloatTensor<B>, dy: FloatTensor<B>) -> FloatTensor<B> {
    assert_eq!(y.shape(), dy.shape(), "softmax backward: y and dy");
    visit::<B>(true, vec![dy, y])
}

fn visit<B: KernelBackend>(backward: bool, inputs: Vec<FloatTensor<B>>) -> FloatTensor<B> {
    let shape = inputs[0].shape();
    let d = shape.as_slice().last().copied().unwrap_or(0);
    B::visit(Op { backward, shape, d }, inputs)
}

/// One softmax pass, run by [`KernelBackend::visit`]: its inputs `[x]` or `[dy, y]`.
struct Op {
    backward: bool,
    /// The first input's shape.
    shape: Shape,
    d: usize,
}

impl<B: KernelBackend> CubeVisitor<B> for Op {
    type Output = FloatTensor<B>;

    fn cube<R: CubeRuntime>(
        self,
        inputs: Vec<CubeTensor<R>>,
        rewrap: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> Self::Output {
        rewrap(match (self.backward, inputs.as_slice()) {
            (false, [x]) => softmax::launch_softmax(x, self.d),
            (true, [dy, y]) => softmax::launch_softmax_backward(y, dy, self.d),
            _ => unreachable!("softmax: inputs do not match the pass"),
        })
    }

    fn host(self, inputs: Vec<FloatTensor<B>>) -> Self::Output {
        let device = B::float_device(&inputs[0]);
        let (d, backward) = (self.d, self.backward);
        let values = with_f32s::<B, _>(inputs, |v| match (backward, v) {
            (false, [x]) => reference::softmax(x, d),
            (true, [dy, y]) => reference::softmax_backward(y, dy, d),
            _ => unreachable!("softmax: inputs do not match the pass"),
        });
        B::float_from_data(TensorData::new(values, self.shape), &device)
    }
}
