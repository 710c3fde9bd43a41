//! Dense (exact) convolution at GEMM speed: the native route of every convolution on a
//! backend without CubeCL kernels.
//!
//! burn-ndarray 0.21 convolves with a direct multiply-add loop, and burn-backend's default
//! weight gradient is a convolution whose kernel is as large as the feature map, the worst case
//! for such a loop. Here a convolution and both of its gradients are GEMMs over the im2col
//! columns of a few samples at a time: one sample where it has at least 128 output positions
//! (the columns of `batch` samples at once would not fit in a cache, and a sample's output rows
//! are already `[C_out, L]` in NCHW order, so no permute is needed), else a group of `S`
//! samples with at least 128 positions together, their columns side by side (`[K, S·L]`) and
//! their outputs or output gradients packed to `[C_out, S·L]` and back by runs of `L` (a GEMM
//! of 16 columns runs at less than half the `gemm` crate's speed):
//!
//! - forward: `y[S][g] = W[g] (C_out/G × K) · cols(x[S])[g] (K × S·L)`;
//! - input gradient: `dcols[g] = W[g]ᵀ · dy[S][g]`, added back into each `dx[b]` by col2im;
//! - weight gradient: `dW[g] = Σ_S dy[S][g] · cols(x[S])[g]ᵀ`, the groups split into one
//!   contiguous run per thread, each run's sum in a buffer of its own, the runs' sums added in
//!   order.
//!
//! With `G` groups, `K = C_in/G · kd·kh·kw` and `L` output positions per sample. A 1×1 kernel
//! with unit stride and no padding reads the input as its own columns (no copy), a sample at a
//! time. Groups of samples are spread over rayon's threads; each GEMM is one call of the `gemm`
//! crate (single-threaded unless there are fewer groups than threads). The result does not
//! depend on the number of threads except for the weight gradient's order of summation.
//!
//! [`im2col_batch`] and [`col2im_batch`] are the same data movement for a whole batch in
//! ApproxMul's layout (`[G, C/G · kvol, B·L]`): what its approximate convolutions run on the
//! host, equal to the host references of the im2col kernels bit for bit.
//!
//! The geometry is im2col's [`Window`](crate::approx::im2col::Window) (3-d; 1- and 2-d
//! convolutions have leading 1s).

mod host;

pub use host::{
    DenseConv, col2im_batch, forward, forward_with, im2col_batch, input_grad, weight_grad,
};
