//! The SparseAct suite: gradients under the decorator against the plain autodiff backend, and
//! the fused nodes (PReLU, the per-channel affine, batch norm, layer norm, softmax) against stock Burn.
//! One test binary, so Burn's backends are monomorphised once for all of them.

mod broadcast;
mod gradients;
mod layer_norm;
mod softmax;
