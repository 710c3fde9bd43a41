//! # burn-bcr
//!
//! **Bcr** (GRIM, `shared/papers/bcr_grim.md`): block column-row pruning trained with ADMM,
//! stored in the BCRC compact format (reorder, row offset, occurrence, column stride, compact
//! column, weights) and run by a reordered sparse GEMM, with a block-size tuner.
//!
//! ```
//! use burn_bcr::project::{project, View};
//! // a 16 × 64 GEMM view pruned 10× in blocks of 4 × 16
//! let w: Vec<f32> = (0..16 * 64).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();
//! let view = View::new(16, 64, w).unwrap();
//! let mask = project(&view, "10x:4x16".parse().unwrap()).unwrap();
//! assert_eq!(mask.nnz(), 16 * 64 / 10);
//! ```
//!
//! - [`level`]: the `RATEx:RxC` levels of the CLI and policy files, and block sizes.
//! - [`project`]: GEMM views and the Euclidean projection onto the BCR set (exact per block
//!   where the block's smaller side is small, a stated allocation across blocks).
//!
//! - [`admm`]: ADMM state per pruned layer (`Z`, `U`, the staged or smooth `ρ` from 1e-4 to
//!   1e-1), the penalty and its gradient, hard pruning.
//! - [`tune`]: the block-size tuner, GRIM's Listing 1 as written.
//! - `pack` (feature `backend`): a projected weight in the BCRC format of
//!   `cubecl_kernels::bcrc`, and its index bytes beside CSR's and a bitmask's.
//!
//! # Feature flags
//!
//! - `backend` (default): BCRC packing (depends on `cubecl-kernels`). Without it the crate is
//!   the level and projection library alone.
#![warn(missing_docs)]

pub mod admm;
pub mod error;
pub mod level;
#[cfg(feature = "backend")]
pub mod pack;
pub mod project;
pub mod tune;

pub use error::BcrError;
pub use level::{Block, Level};
