//! # burn-sparse-act
//!
//! **SparseAct** (Barley & Fröning, `shared/papers/sparse-act_barley-froening_structured-activation-pruning.md`):
//! a dense forward pass, but the input activation a linear or convolution layer keeps for its
//! weight gradient is pruned per sample to its top-k blocks by L2 norm and stored in BSR; the
//! weight gradient is then a block-sparse matmul. The goal is less training memory.
//!
//! Status: in progress (issue 4). [`policy`] (the validated pruning policy) is here; the
//! decorator of an autodiff backend (`SparseAct<Autodiff<B>>`: only the autodiff layer decides
//! what is saved for backward) follows, on `cubecl-kernels::bsr`.
//!
//! # Feature flags
//!
//! None yet.
#![warn(missing_docs)]

pub mod policy;
