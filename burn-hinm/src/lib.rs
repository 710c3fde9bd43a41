//! # burn-hinm
//!
//! **Hinm** (Gyro-Permutation, `shared/papers/hinm_gyro-permutation.md`): hierarchical N:M
//! weight sparsity (column-vector pruning, then 2:4), with output-channel permutations found by
//! balanced k-means and assignment and tile-wise input permutations, fused into the sparse
//! kernel's loads and stores so the permutation costs nothing at run time.
//!
//! Status: this crate is empty until the Hinm issue lands.
//!
//! # Feature flags
//!
//! None yet.
#![warn(missing_docs)]
