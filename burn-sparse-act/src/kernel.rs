//! The CubeCL path: on backends whose tensors live in CubeCL memory (wgpu, CUDA, and every
//! Ember decorator over them) pruning and the weight gradient run as the kernels of
//! [`cubecl_kernels::bsr`]; elsewhere ([`Stored::Tensors`]) they are Burn tensor ops
//! ([`crate::prune`]). Both keep the same arrays — `values: [S, k, b]` f32, `col: [S, k]` and
//! `crow: [S, ⌈d/b⌉ + 1]` 32-bit — and select the same blocks.

use crate::prune::{Pruned, prune};
use burn::tensor::{Tensor, TensorPrimitive};
use burn_backend::tensor::FloatTensor;
use burn_backend::{Backend, TensorMetadata};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;
use cubecl_kernels::approx::ApproxMultiply;
use cubecl_kernels::bsr::keep_count;
use cubecl_kernels::bsr::prune::{PrunedCube, launch_block_norms, launch_compress};
use cubecl_kernels::bsr::spmm::launch_weight_grad;
use cubecl_kernels::decorator::effects::{self, Pass};
use cubecl_kernels::decorator::{CubeVisitor, KernelBackend, MultiplyStrategy};

/// A pruned activation as the backward pass keeps it.
#[derive(Clone, Debug)]
pub enum Stored<B: Backend> {
    /// Burn tensors (the generic path).
    Tensors(Pruned<B>),
    /// The kernels' device buffers. `col` and `crow` are u32 buffers that travel as `B`'s float
    /// primitives (the only tensors a [`CubeVisitor`] carries); only the kernels read them.
    Kernel {
        /// `[samples, k, b]` kept blocks.
        values: FloatTensor<B>,
        /// `[samples, k]` rows of the kept blocks (u32).
        col: FloatTensor<B>,
        /// `[samples, ⌈d/b⌉ + 1]` block-column starts (u32).
        crow: FloatTensor<B>,
        /// `[samples, rows, d]` of the activation.
        dims: [usize; 3],
        /// Block width.
        block: usize,
    },
}

impl<B: Backend> Stored<B> {
    /// Bytes kept: the values (f32) and both index arrays (32-bit), as allocated.
    pub fn bytes(&self) -> u64 {
        let elements = match self {
            Stored::Tensors(p) => {
                p.values.shape().num_elements()
                    + p.col.shape().num_elements()
                    + p.crow.shape().num_elements()
            }
            Stored::Kernel {
                values, col, crow, ..
            } => {
                values.shape().num_elements()
                    + col.shape().num_elements()
                    + crow.shape().num_elements()
            }
        };
        (elements * 4) as u64
    }
}

struct Norms {
    block: usize,
}

impl<B: Backend> CubeVisitor<B> for Norms {
    type Output = Option<FloatTensor<B>>;

    fn cube<R: CubeRuntime>(
        self,
        inputs: Vec<CubeTensor<R>>,
        rewrap: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> Self::Output {
        Some(rewrap(launch_block_norms(&inputs[0], self.block)))
    }

    fn host(self, _: Vec<FloatTensor<B>>) -> Self::Output {
        None
    }
}

struct Compress {
    block: usize,
    keep: usize,
}

impl<B: Backend> CubeVisitor<B> for Compress {
    type Output = [FloatTensor<B>; 3];

    fn cube<R: CubeRuntime>(
        self,
        inputs: Vec<CubeTensor<R>>,
        rewrap: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> Self::Output {
        let p = launch_compress(&inputs[0], &inputs[1], self.block, self.keep);
        [rewrap(p.values), rewrap(p.col), rewrap(p.crow)]
    }

    fn host(self, _: Vec<FloatTensor<B>>) -> Self::Output {
        unreachable!("compression runs only where block norms did (a CubeCL backend)")
    }
}

/// Prunes `x: [samples, rows, d]` (see [`prune`]): with the kernels where `B` has CubeCL
/// tensors, with Burn tensor ops elsewhere.
pub fn prune_stored<B: KernelBackend>(
    x: FloatTensor<B>,
    b: usize,
    s: f64,
    jitter: Option<f64>,
) -> Stored<B> {
    let dims = x.shape().dims::<3>();
    let [samples, rows, d] = dims;
    if samples == 0 {
        return Stored::Tensors(prune(from_primitive(x), b, s, jitter));
    }
    let Some(mut norms) = B::visit(Norms { block: b }, vec![x.clone()]) else {
        return Stored::Tensors(prune(from_primitive(x), b, s, jitter));
    };
    let n = rows * d.div_ceil(b);
    if let Some(band) = jitter {
        let noise = B::float_random(
            norms.shape(),
            burn::tensor::Distribution::Uniform(1.0 - band, 1.0 + band),
            &B::float_device(&norms),
            burn::tensor::DType::F32.into(),
        );
        norms = B::float_mul(norms, noise);
    }
    let keep = keep_count(n, s);
    let [values, col, crow] = B::visit(Compress { block: b, keep }, vec![x, norms]);
    Stored::Kernel {
        values,
        col,
        crow,
        dims,
        block: b,
    }
}

fn from_primitive<B: Backend>(x: FloatTensor<B>) -> Tensor<B, 3> {
    Tensor::from_primitive(TensorPrimitive::Float(x))
}

struct WeightGrad {
    dims: [usize; 3],
    block: usize,
    mul: ApproxMultiply,
}

impl<B: Backend> CubeVisitor<B> for WeightGrad {
    type Output = FloatTensor<B>;

    fn cube<R: CubeRuntime>(
        self,
        inputs: Vec<CubeTensor<R>>,
        rewrap: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> Self::Output {
        let mut it = inputs.into_iter();
        let (values, col, crow, grad) = (
            it.next().expect("values"),
            it.next().expect("col"),
            it.next().expect("crow"),
            it.next().expect("grad"),
        );
        let x = PrunedCube { values, col, crow };
        rewrap(launch_weight_grad(
            &x, self.dims, self.block, &grad, &self.mul,
        ))
    }

    fn host(self, _: Vec<FloatTensor<B>>) -> Self::Output {
        unreachable!("kernel-stored activations exist only on CubeCL backends")
    }
}

/// `dW = Xᵀ · G` of a linear layer from its stored input: the BSpMM kernel (with the multiply
/// of the ApproxMul underneath, if any) for [`Stored::Kernel`]; for [`Stored::Tensors`], the
/// masked input through `B`'s own weight-gradient op. `grad: [.., out]` of `x_shape[..−1]` rows.
/// The multiply is the stored input's (its layer's); the kernel's products are reported under
/// `layer` (`cubecl_kernels::decorator::effects`).
pub fn weight_grad<B: KernelBackend>(
    x: &Stored<B>,
    x_shape: &burn::tensor::Shape,
    grad: FloatTensor<B>,
    layer: Option<&str>,
) -> FloatTensor<B> {
    match x {
        Stored::Tensors(p) => {
            let masked = B::float_reshape(p.to_dense().into_primitive().tensor(), x_shape.clone());
            B::linear_weight_backward(masked, grad)
        }
        Stored::Kernel {
            values,
            col,
            crow,
            dims,
            block,
        } => {
            let out = *grad
                .shape()
                .as_slice()
                .last()
                .expect("grad has an out axis");
            let rows: usize = grad.shape().num_elements() / out.max(1);
            let grad = B::float_reshape(grad, [rows, out].into());
            let device = B::float_device(values);
            let mul = match B::multiply_strategy(&device) {
                MultiplyStrategy::Exact => ApproxMultiply::Plain,
                MultiplyStrategy::Approx(mul) => mul,
            };
            if effects::recording() {
                effects::record_contraction(
                    layer,
                    Pass::WeightGrad,
                    &B::multiply_name(&device),
                    mul.is_approximate(),
                    (values.shape().num_elements() * out) as u64,
                    "block-sparse BSpMM kernel over the kept blocks",
                );
            }
            B::visit(
                WeightGrad {
                    dims: *dims,
                    block: *block,
                    mul,
                },
                vec![values.clone(), col.clone(), crow.clone(), grad],
            )
        }
    }
}
