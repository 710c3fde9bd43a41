//! Block-sparse activations (SparseAct): per-sample top-k pruning by block L2 norm, the BSR
//! format the pruned activations are stored in, and the block-sparse weight-gradient product.
//!
//! An activation `x: [samples, rows, d]` (rows are patches or tokens, `d` the embedding) is cut
//! into `1 × b` blocks along `d` (the paper's Fig. 1; when `b` does not divide `d` the last block
//! of each row is shorter, i.e. zero-padded); each sample keeps exactly `keep = N − ⌊s·N⌋` of its
//! `N = rows · ⌈d / b⌉` blocks, those with the largest L2 norms. Ties go to the lower block index,
//! blocks numbered block-column major (`c · rows + r`, `c` the block column along `d`);
//! a block holding a NaN ranks as +∞ (it is kept, so the NaN reaches the weight gradient as it
//! would densely).
//!
//! - [`prune`]: the pruning kernels (block norms, per-sample top-k, compression to the
//!   column-oriented BSR the weight gradient reads), with their host reference.
//! - [`spmm`]: the block-sparse weight-gradient kernel (BSpMM) with ApproxMul's comptime
//!   multiply, with its host reference.
//! - [`columns`]: the host path of backends without CubeCL (ndarray): pruning to the kernels'
//!   layout and the weight gradient as one dense product per block column.
//! - [`host`]: both host references (plain Rust, multi-threaded) in one place: the test oracle.
//!
//! Backends without CubeCL run [`columns`] (`burn_sparse_act::prune` keeps the same selection
//! and layout in Burn tensor ops: the generic path).

pub mod columns;
pub mod prune;
pub mod spmm;

/// The host references of this folder's kernels (`prune/reference.rs`, `spmm/reference.rs`).
pub mod host {
    pub use super::prune::reference::*;
    pub use super::spmm::reference::weight_grad;
}

/// Blocks kept per sample out of `blocks` at sparsity `s` (`s ∈ [0, 1)`): `blocks − ⌊s · blocks⌋`.
pub fn keep_count(blocks: usize, s: f64) -> usize {
    blocks - (s * blocks as f64).floor() as usize
}
