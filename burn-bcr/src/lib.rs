//! # burn-bcr
//!
//! **Bcr** (GRIM, `shared/papers/bcr_grim.md`): block column-row pruning trained with ADMM,
//! stored in the BCRC compact format (reorder, row offset, occurrence, column stride, compact
//! column, weights) and run by a reordered sparse GEMM, with a block-size tuner.
//!
//! Status: this crate is empty until the Bcr issue lands.
//!
//! # Feature flags
//!
//! None yet.
#![warn(missing_docs)]
