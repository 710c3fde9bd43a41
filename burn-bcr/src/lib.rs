//! # burn-bcr
//!
//! **Bcr** (GRIM: "A General, Real-Time Deep Learning Inference Framework for Mobile
//! Devices based on Fine-Grained Structured Weight Sparsity"): block column-row pruning trained with ADMM,
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
//!   `cubecl_kernels::bcrc`, Burn's weights to their GEMM views and back masked, and a
//!   weight's index bytes beside CSR's and a bitmask's.
//! - `backend` (feature `backend`): the `Bcr<B>` decorator, whose BCRC-packed weights stay
//!   packed: `linear`, `matmul` (Burn's `Gru`) and `conv2d` run BCRC's reordered sparse
//!   product (the CubeCL kernel, or the host implementation on ndarray), every other op
//!   densifies and says so (`docs/bcr.md`).
//! - `module` (feature `backend`): packing an unmodified `burn::nn` model's weights
//!   (`pack_module`), checking a BCRC weight against a model's (`check_fits`) and loading a
//!   packed model file into a model (`load_packed`).
//! - `file` (feature `backend`): the packed model file `model.bcr` (magic `EMBERBCR`, a JSON
//!   header, every parameter dense or in BCRC, a CRC-32), read with every check.
//!
//! HiNM's `Hinm<B>` is built on the same plumbing: `cubecl_kernels::decorator::packed` (the
//! float primitive, the sparse `linear` / `matmul` / `conv2d`), `decorator::module` (the model
//! walks) and `decorator::file` (the packed model file: framing, header and payload loops).
//!
//! # Feature flags
//!
//! - `backend` (default): BCRC packing, the `Bcr<B>` decorator, the packed model file and the
//!   model helpers (depends on Burn, `cubecl-kernels` with its `module` feature, serde). Without
//!   it the crate is the level, projection, ADMM and tuner library alone.
#![warn(missing_docs)]

pub mod admm;
#[cfg(feature = "backend")]
pub mod backend;
pub mod error;
#[cfg(feature = "backend")]
pub mod file;
pub mod level;
#[cfg(feature = "backend")]
pub mod module;
#[cfg(feature = "backend")]
pub mod pack;
pub mod project;
pub mod tune;

pub use error::BcrError;
pub use level::{Block, Level};
