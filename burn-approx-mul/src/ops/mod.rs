//! The contractions of [`ApproxMul`](crate::ApproxMul), written against the inner backend `B`.
//!
//! Every multiply goes through one batched GEMM ([`matmul::gemm`]): on a CubeCL backend the
//! `cubecl-kernels` LUT GEMM kernel, elsewhere its multi-threaded host reference. Linear layers
//! reshape onto it; every convolution (1d/2d/3d, transposed, both gradients) is lowered onto it by
//! im2col / col2im ([`conv`]: `cubecl-kernels`' im2col kernels on CubeCL backends, their host
//! references elsewhere), which move and add values but never multiply them.
//!
//! On the GEMM routes of a backend without CubeCL kernels, Burn's element-wise arithmetic
//! (binary ops with broadcasting, sigmoid, tanh, GELU, ReLU's, sigmoid's and GELU's backward,
//! the reshape of a strided view) runs on Ember's host loops
//! ([`cubecl_kernels::elementwise`]), bit-identical to the inner backend's, and so does 2-d max
//! pooling, forward and backward ([`cubecl_kernels::pool`]).

pub mod conv;
pub(crate) mod elementwise;
pub mod matmul;
pub mod native;
pub(crate) mod pool;
pub mod split_k;
