//! Batched GEMM through the approximate multiplier, and the linear-layer ops built on it.

use burn_backend::tensor::FloatTensor;
use burn_backend::{Backend, TensorData, TensorMetadata};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;
use burn_std::Shape;
use cubecl_kernels::approx::{ApproxMultiply, gemm as kernel, host};
use cubecl_kernels::decorator::{CubeVisitor, KernelBackend, with_f32};

struct Gemm<'a> {
    mul: &'a ApproxMultiply,
    dims: [usize; 4],
    out: Shape,
    /// Whether the rhs comes transposed, its values those of `[batch, n, k]`.
    rhs_t: bool,
}

impl<B: KernelBackend> CubeVisitor<B> for Gemm<'_> {
    type Output = FloatTensor<B>;

    fn cube<R: CubeRuntime>(
        self,
        inputs: Vec<CubeTensor<R>>,
        rewrap: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> FloatTensor<B> {
        let [batch, m, k, n] = self.dims;
        let mut operands = inputs.into_iter();
        let (lhs, rhs) = (operands.next().expect("lhs"), operands.next().expect("rhs"));
        let lhs = burn_cubecl::ops::reshape(lhs, Shape::from([batch, m, k]));
        let rhs = if self.rhs_t {
            // a strided view: the kernel reads it in place
            burn_cubecl::ops::permute(
                burn_cubecl::ops::reshape(rhs, Shape::from([batch, n, k])),
                &[0, 2, 1],
            )
        } else {
            burn_cubecl::ops::reshape(rhs, Shape::from([batch, k, n]))
        };
        let out = kernel::launch(lhs, rhs, self.mul);
        rewrap(burn_cubecl::ops::reshape(out, self.out))
    }

    fn host(self, inputs: Vec<FloatTensor<B>>) -> FloatTensor<B> {
        let mut operands = inputs.into_iter();
        let (lhs, rhs) = (operands.next().expect("lhs"), operands.next().expect("rhs"));
        let device = B::float_device(&lhs);
        // the host product reads values in row-major order: the operands' own shapes (which
        // only need the right order) are never reshaped here, as burn-ndarray's reshape copies,
        // and their values are borrowed, not copied
        let [batch, m, k, n] = self.dims;
        let out = with_f32::<B, _>(lhs, |a| {
            with_f32::<B, _>(rhs, |b| {
                assert_eq!(a.len(), batch * m * k, "gemm: lhs size");
                assert_eq!(b.len(), batch * k * n, "gemm: rhs size");
                if self.rhs_t {
                    host::gemm_nt(a, b, self.dims, self.mul)
                } else {
                    host::gemm(a, b, self.dims, self.mul)
                }
            })
        });
        B::float_from_data(TensorData::new(out, self.out), &device)
    }
}

/// `lhs: [batch, m, k] · rhs: [batch, k, n]` with every product through `mul`.
pub fn gemm<B: KernelBackend>(
    lhs: FloatTensor<B>,
    rhs: FloatTensor<B>,
    mul: &ApproxMultiply,
) -> FloatTensor<B> {
    gemm_shaped::<B>(lhs, rhs, mul, false)
}

/// `lhs: [batch, m, k] · rhs_tᵀ` for `rhs_t: [batch, n, k]`, with every product through `mul`:
/// the host path reads `rhs_t` in place instead of a transposed copy (the same bits as
/// [`gemm`] of `rhs_t.swap_dims(1, 2)`).
pub fn gemm_nt<B: KernelBackend>(
    lhs: FloatTensor<B>,
    rhs_t: FloatTensor<B>,
    mul: &ApproxMultiply,
) -> FloatTensor<B> {
    gemm_shaped::<B>(lhs, rhs_t, mul, true)
}

/// [`gemm`], or [`gemm_nt`] when `rhs_t`, with the dims read off the operands' shapes.
fn gemm_shaped<B: KernelBackend>(
    lhs: FloatTensor<B>,
    rhs: FloatTensor<B>,
    mul: &ApproxMultiply,
    rhs_t: bool,
) -> FloatTensor<B> {
    let [batch, m, k] = lhs.shape().dims();
    let n = rhs.shape()[if rhs_t { 1 } else { 2 }];
    let (dims, out) = ([batch, m, k, n], Shape::from([batch, m, n]));
    visit_gemm::<B>([lhs, rhs], dims, out, mul, rhs_t)
}

/// [`gemm`] of operands of any shapes whose row-major values are those of `[batch, m, k]` and
/// `[batch, k, n]` (`dims = [batch, m, k, n]`), the product returned with shape `out`: the
/// reshapes happen only where they cost nothing (CubeCL metadata).
pub(crate) fn gemm_as<B: KernelBackend>(
    lhs: FloatTensor<B>,
    rhs: FloatTensor<B>,
    dims: [usize; 4],
    out: Shape,
    mul: &ApproxMultiply,
) -> FloatTensor<B> {
    visit_gemm::<B>([lhs, rhs], dims, out, mul, false)
}

/// The GEMM visit of `[lhs, rhs]`, the rhs transposed when `rhs_t`.
fn visit_gemm<B: KernelBackend>(
    [lhs, rhs]: [FloatTensor<B>; 2],
    dims: [usize; 4],
    out: Shape,
    mul: &ApproxMultiply,
    rhs_t: bool,
) -> FloatTensor<B> {
    B::visit(
        Gemm {
            mul,
            dims,
            out,
            rhs_t,
        },
        vec![lhs, rhs],
    )
}

/// `t` reshaped to `dims` (no op when it already has them).
pub(crate) fn reshape<B: Backend>(t: FloatTensor<B>, dims: &[usize]) -> FloatTensor<B> {
    if t.shape().as_slice() == dims {
        return t;
    }
    B::float_reshape(t, Shape::from(dims.to_vec()))
}

/// Burn's `float_matmul` (batch dimensions broadcast) with every product through `mul`.
pub fn matmul<B: KernelBackend>(
    lhs: FloatTensor<B>,
    rhs: FloatTensor<B>,
    mul: &ApproxMultiply,
) -> FloatTensor<B> {
    let (ls, rs) = (lhs.shape(), rhs.shape());
    let rank = ls.num_dims();
    assert!(
        rank >= 2 && rs.num_dims() == rank,
        "matmul needs two tensors of equal rank ≥ 2, got {ls} and {rs}"
    );
    let (m, k, n) = (ls[rank - 2], ls[rank - 1], rs[rank - 1]);
    assert_eq!(
        k,
        rs[rank - 2],
        "matmul: inner dimensions differ ({ls} · {rs})"
    );
    let batch: Vec<usize> = (0..rank - 2)
        .map(|i| {
            let (a, b) = (ls[i], rs[i]);
            assert!(
                a == b || a == 1 || b == 1,
                "matmul: batch dimensions {ls} and {rs} do not broadcast"
            );
            a.max(b)
        })
        .collect();
    let count: usize = batch.iter().product();
    let expand = |t: FloatTensor<B>, rows: usize, cols: usize| {
        let mut full = batch.clone();
        full.extend([rows, cols]);
        if t.shape().as_slice() == full.as_slice() {
            t
        } else {
            B::float_expand(t, Shape::from(full))
        }
    };
    let (lhs, rhs) = (expand(lhs, m, k), expand(rhs, k, n));
    let mut dims = batch;
    dims.extend([m, n]);
    gemm_as::<B>(lhs, rhs, [count, m, k, n], Shape::from(dims), mul)
}

/// `x: [..., d_in] · weight: [d_in, d_out] (+ bias)`.
pub fn linear<B: KernelBackend>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
    mul: &ApproxMultiply,
) -> FloatTensor<B> {
    let xs = x.shape();
    let [d_in, d_out] = weight.shape().dims();
    let rows = xs.num_elements() / d_in.max(1);
    let mut dims = xs.to_vec();
    *dims.last_mut().expect("rank ≥ 1") = d_out;
    let out = gemm_as::<B>(
        x,
        weight,
        [1, rows, d_in, d_out],
        Shape::from(dims.clone()),
        mul,
    );
    match bias {
        None => out,
        Some(bias) => {
            let mut b = vec![1; dims.len()];
            b[dims.len() - 1] = d_out;
            B::float_add(out, reshape::<B>(bias, &b))
        }
    }
}

/// `dx = output_grad · weightᵀ`.
pub fn linear_x_backward<B: KernelBackend>(
    weight: FloatTensor<B>,
    grad: FloatTensor<B>,
    mul: &ApproxMultiply,
) -> FloatTensor<B> {
    let [d_in, d_out] = weight.shape().dims();
    let gs = grad.shape();
    let rows = gs.num_elements() / d_out.max(1);
    let wt = B::float_swap_dims(weight, 0, 1);
    let mut dims = gs.to_vec();
    *dims.last_mut().expect("rank ≥ 1") = d_in;
    gemm_as::<B>(grad, wt, [1, rows, d_out, d_in], Shape::from(dims), mul)
}

/// `dW = xᵀ · output_grad`, summed over every leading dimension (one GEMM over all rows).
pub fn linear_weight_backward<B: KernelBackend>(
    x: FloatTensor<B>,
    grad: FloatTensor<B>,
    mul: &ApproxMultiply,
) -> FloatTensor<B> {
    let xs = x.shape();
    let d_in = xs[xs.num_dims() - 1];
    let d_out = grad.shape()[xs.num_dims() - 1];
    let rows = xs.num_elements() / d_in.max(1);
    let xt = B::float_swap_dims(reshape::<B>(x, &[rows, d_in]), 0, 1);
    gemm_as::<B>(
        xt,
        grad,
        [1, d_in, rows, d_out],
        Shape::from([d_in, d_out]),
        mul,
    )
}
