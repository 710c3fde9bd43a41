//! Where pruning and the weight gradient run: on backends whose tensors live in CubeCL memory
//! (wgpu, CUDA, and every Ember decorator over them) as the kernels of [`cubecl_kernels::bsr`]
//! ([`Stored::Kernel`]); on ndarray (and Ember's decorators over it) on the host, per sample and
//! per block column in parallel ([`cubecl_kernels::bsr::columns`], [`Stored::Host`]). All keep
//! the same arrays — `values: [S, k, b]` f32, `col: [S, k]` and `crow: [S, ⌈d/b⌉ + 1]` 32-bit —
//! and select the same blocks. [`Stored::Tensors`], Burn tensor ops ([`crate::prune`]), is the
//! generic form: it holds an input with no samples, and on the host one where nothing is pruned
//! (`s = 0`), so that its weight gradient is the backend's own dense product, bit for bit.

use crate::prune::{Pruned, prune};
use burn::tensor::TensorData;
use burn::tensor::{Tensor, TensorPrimitive};
use burn_backend::tensor::FloatTensor;
use burn_backend::{Backend, TensorMetadata};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;
use cubecl_kernels::approx::ApproxMultiply;
use cubecl_kernels::bsr::columns::Columns;
use cubecl_kernels::bsr::keep_count;
use cubecl_kernels::bsr::prune::{PrunedCube, launch_block_norms, launch_compress};
use cubecl_kernels::bsr::spmm::launch_weight_grad;
use cubecl_kernels::decorator::effects::{self, Pass};
use cubecl_kernels::decorator::{CubeVisitor, KernelBackend, MultiplyStrategy, read_f32, with_f32};

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
    /// Host arrays (backends without CubeCL kernels).
    Host(Columns),
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
            Stored::Host(c) => return c.bytes(),
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

/// `f` of a host tensor's values in row-major order (borrowed: a visit hands ndarray tensors
/// over in order).
struct OnHost<F>(F);

impl<B: KernelBackend, T, F: FnOnce(&[f32]) -> T> CubeVisitor<B> for OnHost<F> {
    type Output = T;

    fn cube<R: CubeRuntime>(
        self,
        _: Vec<CubeTensor<R>>,
        _: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> Self::Output {
        unreachable!("host reads happen only on backends without CubeCL")
    }

    fn host(self, inputs: Vec<FloatTensor<B>>) -> Self::Output {
        with_f32::<B, _>(inputs.into_iter().next().expect("one tensor"), self.0)
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
    let n = rows * d.div_ceil(b);
    let keep = keep_count(n, s);
    let on_host = B::cube_runtime().is_none();
    // nothing to prune, or nothing pruned on the host: the weight gradient is then the
    // backend's own dense product, the bits of training without SparseAct
    if samples == 0 || (on_host && keep == n) {
        return Stored::Tensors(prune(from_primitive(x), b, s, jitter));
    }
    if on_host {
        let scale = jitter.map(|band| {
            read_f32::<B>(B::float_random(
                [samples, n].into(),
                burn::tensor::Distribution::Uniform(1.0 - band, 1.0 + band),
                &B::float_device(&x),
                burn::tensor::DType::F32.into(),
            ))
        });
        let prune = |x: &[f32]| Columns::prune(x, dims, b, keep, scale.as_deref());
        return Stored::Host(B::visit(OnHost(prune), vec![x]));
    }
    let Some(mut norms) = B::visit(Norms { block: b }, vec![x.clone()]) else {
        unreachable!("a backend with a CubeCL runtime visits as CubeCL tensors")
    };
    if let Some(band) = jitter {
        let noise = B::float_random(
            norms.shape(),
            burn::tensor::Distribution::Uniform(1.0 - band, 1.0 + band),
            &B::float_device(&norms),
            burn::tensor::DType::F32.into(),
        );
        norms = B::float_mul(norms, noise);
    }
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
            let (out, mul) = sparse_product::<B>(
                &grad,
                layer,
                values.shape().num_elements(),
                "block-sparse BSpMM kernel over the kept blocks",
            );
            let rows: usize = grad.shape().num_elements() / out.max(1);
            let grad = B::float_reshape(grad, [rows, out].into());
            B::visit(
                WeightGrad {
                    dims: *dims,
                    block: *block,
                    mul,
                },
                vec![values.clone(), col.clone(), crow.clone(), grad],
            )
        }
        Stored::Host(x) => {
            let (out, mul) = sparse_product::<B>(
                &grad,
                layer,
                x.values.len(),
                "block-sparse product over the kept blocks (host, one per block column)",
            );
            let device = B::float_device(&grad);
            let dw = B::visit(
                OnHost(|grad: &[f32]| x.weight_grad(grad, out, &mul)),
                vec![grad],
            );
            B::float_from_data(TensorData::new(dw, [x.dims[2], out]), &device)
        }
    }
}

/// The output width of a block-sparse weight gradient from `grad` and the multiply of the
/// decorators under SparseAct on its device (IEEE products without one); records the product of
/// `kept` stored values under `layer` (`how`) when effects are recorded.
fn sparse_product<B: KernelBackend>(
    grad: &FloatTensor<B>,
    layer: Option<&str>,
    kept: usize,
    how: &str,
) -> (usize, ApproxMultiply) {
    let out = *grad
        .shape()
        .as_slice()
        .last()
        .expect("grad has an out axis");
    let device = B::float_device(grad);
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
            (kept * out) as u64,
            how,
        );
    }
    (out, mul)
}
