//! # cubecl-kernels
//!
//! Ember's CubeCL kernels and the plumbing every Ember backend decorator is built on.
//!
//! - [`decorator`]: [`Decorated<B, D>`](decorator::Decorated) implements every Burn 0.21 backend
//!   trait by forwarding to `B`; a decorator overrides only the ops it changes
//!   ([`DecoratorOps`](decorator::DecoratorOps)) and learns what it sits on through
//!   [`KernelBackend`](decorator::KernelBackend).
//!   Weight-sparsity decorators share their packed weights' plumbing
//!   ([`decorator::packed`]).
//! - [`runtime`]: finding a wgpu adapter before CubeCL does, so that a machine without a Vulkan
//!   driver gets a sentence saying what to install instead of a panic on a device thread.
//! - [`profiler`]: CubeCL's per-kernel profiler switched on for a process, and its log read back
//!   as timed launches (`ember profile`).
//! - [`reduce`]: sums and means along one axis on the cube routine where few outputs each reduce
//!   a long axis on a GPU (batch norm's statistics), burn-cubecl's unit routine otherwise.
//! - [`matmul`]: the native matmul on one of cubek's matmul kernels chosen by name
//!   (`--matmul`), burn-cubecl's own where the runtime or the shape refuses it.
//!
//! - [`approx`]: ApproxMul's contractions: the batched LUT GEMM kernel with its comptime multiply
//!   and the multi-threaded host reference beside it, im2col / col2im.
//! - [`conv`]: dense (exact) convolution and both of its gradients at GEMM speed on the host
//!   (per-sample im2col and the `gemm` crate), the native route of every convolution on
//!   backends without CubeCL kernels.
//! - [`elementwise`]: Burn's element-wise arithmetic (binary ops with broadcasting, ReLU's
//!   backward, the copy of a strided view) on host memory in one pass each, bit-identical to
//!   burn-ndarray's: the GEMM routes' element-wise ops on backends without CubeCL kernels.
//! - [`pool`]: 2-d max pooling (forward with the maxima's indices, backward) on host memory,
//!   bit-identical to burn-ndarray's: the GEMM routes' max pooling on backends without CubeCL
//!   kernels.
//! - [`bsr`]: SparseAct's block-sparse activations: pruning kernels (block norms, per-sample
//!   top-k, compression to BSR) and the block-sparse weight-gradient kernel, with their host
//!   reference.
//!
//! - [`hinm`]: HiNM's sparse product over packed hierarchical N:M weights (2:4 in kept column
//!   vectors, the permutations folded into its loads and stores), with its host implementation.
//! - [`bcrc`]: BCR's weights in the BCRC compact format and their sparse product, with its host
//!   implementation (load-redundancy elimination across the rows of a column pattern) and the
//!   CSR baseline.
//! - [`broadcast`]: per-channel broadcasts after OneFlow, each one fused kernel: PReLU and the
//!   affine map `x · α + β`, forward and backward (`dx` and the per-channel sums `dα`, `dβ` in
//!   one pass), vectorised in packs when the inner size allows, with the multi-threaded host
//!   implementation beside them that they equal bit for bit.
//! - [`norm`]: batch normalization over channels (training forward with the running
//!   statistics, inference forward, backward), a few fused kernels where Burn's `BatchNorm`
//!   launches tens of tensor ops, with the multi-threaded host implementation beside them.
//! - [`layer_norm`]: layer normalization over the last axis (forward, backward), one kernel
//!   each way plus the broadcast family's channel pass for `dγ` and `dβ`, where Burn's
//!   `layer_norm` and its autodiff launch 35 tensor ops; with the host implementation
//!   beside them.
//! - [`softmax`]: softmax over the last axis (attention's), one kernel each way where Burn's
//!   `softmax` and its autodiff launch 18 tensor ops; with the host implementation beside
//!   them.
//! - [`activation`]: ReLU, GELU and sigmoid, forward and backward, one kernel each (Burn's
//!   defaults launch 2 to 14 element-wise ops for each), in place where the tensor they replace
//!   allows.
//! - [`optim`]: Adam's and SGD's steps, one fused kernel per parameter (Burn's optimizers launch
//!   7 to 13 element-wise ops per parameter), with the host implementation beside them that
//!   they equal bit for bit.
//! - [`workers`]: a training step run on one of rayon's workers where the backend computes on
//!   the host, so that its parallel ops start in place instead of waking the pool each time.
//! - [`fs`]: how every Ember file is written: whole or not at all, through a synced temporary
//!   file renamed into place.
//!
//! - `testing` (feature `testing`, for this workspace's tests; not public API): deterministic
//!   test data and the set of multipliers every kernel test runs.
//!
//! ```
//! use burn::backend::{Autodiff, NdArray};
//! use burn::tensor::Tensor;
//! use cubecl_kernels::decorator::{Decorated, Identity};
//!
//! // A decorated backend is a Burn backend: stock tensors, modules and autodiff work on it.
//! type B = Autodiff<Decorated<NdArray, Identity>>;
//! let x = Tensor::<B, 1>::from_floats([1.0, 2.0, 3.0], &Default::default()).require_grad();
//! let grads = (x.clone() * x.clone()).sum().backward();
//! let dx = x.grad(&grads).unwrap().into_data().to_vec::<f32>().unwrap();
//! assert_eq!(dx, vec![2.0, 4.0, 6.0]);
//! ```
//!
//! # Feature flags
//!
//! - `cuda`: compiles the CUDA runtime (`burn-cuda`, `cubecl/cuda`). Building needs no CUDA
//!   toolkit; `libcuda` and `libnvrtc` are loaded when a CUDA device is first used.
//!
//! - `module`: the packed-model helpers the weight-sparsity decorators share
//!   (`decorator::module`: walking, packing and loading an unmodified `burn::nn` model's
//!   parameters; `decorator::file`: their packed model files, the framing, the JSON header
//!   and the loops over the parameters). Depends on `burn` (default features off),
//!   `crc32fast`, `serde` and `serde_json`.
//!
//! - `testing`: compiles `cubecl_kernels::testing` for the workspace's test suites (hidden
//!   from the docs; not public API).
//!
//! wgpu (Vulkan, Metal, DX12, and Mesa's lavapipe on machines without a GPU) is always built.
#![warn(missing_docs)]

pub mod activation;
pub mod approx;
pub mod bcrc;
pub mod broadcast;
pub mod bsr;
pub mod conv;
pub mod decorator;
pub mod elementwise;
pub mod fs;
mod grid;
pub mod hinm;
#[cfg(debug_assertions)]
#[doc(hidden)]
pub mod instances;
pub mod layer_norm;
pub mod matmul;
pub mod norm;
pub mod optim;
mod panel;
pub mod pool;
pub mod profiler;
pub mod reduce;
pub mod runtime;
mod scratch;
pub mod softmax;
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod testing;
pub mod workers;
