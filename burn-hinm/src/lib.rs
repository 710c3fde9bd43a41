//! # burn-hinm
//!
//! **Hinm** (Gyro-Permutation: "Toward Efficient Permutation for Hierarchical N:M Sparsity on GPUs"): hierarchical N:M
//! weight sparsity (column-vector pruning per tile of `V` output rows, then 2:4), with
//! output-channel permutations found by balanced k-means and linear assignment and tile-wise
//! input permutations.
//!
//! ```
//! use burn_hinm::gyro::{search, Method};
//! use burn_hinm::mask::{Saliency, Scores};
//! // a Linear weight [d_in = 16, d_out = 8] as Burn stores it
//! let w: Vec<f32> = (0..128).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();
//! let scores = Scores::linear(&w, 16, 8, Saliency::Magnitude).unwrap();
//! let (none, kept_none) = search(&scores, 4, 0.5, Method::None, 1).unwrap();
//! let (gyro, kept_gyro) = search(&scores, 4, 0.5, Method::Gyro, 1).unwrap();
//! assert!(kept_gyro.nm >= kept_none.nm);
//! // 75 % of the weights pruned: 8 of 16 columns per tile, then 2 of every 4
//! assert_eq!(gyro.dense().iter().filter(|&&k| k).count(), 8 * 16 / 4);
//! # let _ = none;
//! ```
//!
//! - [`mask`]: GEMM views of Burn's Linear and convolution weights, saliency scores, `nnz_vec`,
//!   the stable top-k masks and the saliency they keep at each stage.
//! - [`gyro`]: the permutation search (none / OVW / Gyro) from one seeded RNG, on the
//!   reference's algorithm minus its bugs (listed there).
//! - [`lap`]: the input search's linear assignment solver (Jonker-Volgenant's LAPJV, its row
//!   scans vectorised; exact).
//! - [`level`]: the `TOTAL:vV` levels of the CLI and policy files.
//! - `pack`, `file`, `module`, `backend` (feature `backend`): a mask turned into the packed
//!   layout the kernel runs, the packed model file `model.hinm`, packing and loading unmodified
//!   `burn::nn` models, and the `Hinm<B>` decorator whose packed weights run the HiNM sparse
//!   product (`docs/hinm.md`).
//!
//! # Feature flags
//!
//! - `backend` (default): the decorator, packed weights and files (depends on Burn and
//!   `cubecl-kernels`). Without it the crate is the mask and search library alone.
#![warn(missing_docs)]

#[cfg(feature = "backend")]
pub mod backend;
pub mod error;
#[cfg(feature = "backend")]
pub mod file;
pub mod gyro;
pub mod lap;
pub mod level;
pub mod mask;
#[cfg(feature = "backend")]
pub mod module;
#[cfg(feature = "backend")]
pub mod pack;

pub use error::HinmError;
pub use level::Level;
