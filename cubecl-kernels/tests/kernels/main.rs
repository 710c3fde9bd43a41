//! The kernel suite: every CubeCL kernel against its host reference on wgpu (lavapipe on a
//! machine without a GPU), and the decorator plumbing. One test binary, so Burn's backends are
//! monomorphised once for all of them.

mod approx_gemm;
mod bcrc;
mod bsr;
mod hinm;
mod identity;
mod identity_lenet;
mod im2col;
