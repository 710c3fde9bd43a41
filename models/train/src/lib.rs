//! # ember-train
//!
//! Training and evaluation of `ember-models`' zoo under Ember's decorators, and the tools around
//! a run: what the `ember` command line calls, usable as a library.
//!
//! - [`train`]: training (Adam; a checkpoint, metrics and the manifest written after every
//!   epoch; a non-finite loss or SIGINT/SIGTERM ends it cleanly; resume) and evaluation of
//!   saved models.
//! - [`run`]: run directories and their manifest (`ember-run.json`); [`record`]: model and
//!   optimizer records, checksummed; [`atomic`]: every file written whole or not at all.
//! - [`report`]: metrics as CSV and curves as PNG; [`progress`]: progress bar or lines.
//! - [`backend`]: the backends selectable at run time (`ndarray`, `wgpu`, `cuda`), each as
//!   [`backend::Stack`] (`SparseAct<Autodiff<Bcr<Hinm<ApproxMul<B>>>>>`, named there once)
//!   whose device carries the multiplier and the SparseAct policy.
//! - [`technique`]: each technique's part in a run — its registration (the flags, files and
//!   routes it adds, one [`technique::REGISTRY`]) and the [`technique::Technique`] trait the fit
//!   loop calls (gradients, after the optimizer step, end of epoch, checkpoint state, packed
//!   export); [`hinm`] and [`bcr`] hold the pruning techniques' implementations.
//! - [`fused_optim`]: Adam and SGD with one fused kernel per parameter, the optimizers every run
//!   steps with (Burn's arithmetic and records).
//! - [`scale`]: data-parallel training on several devices of one process (`--devices`, Burn's
//!   collective all-reduce) and across the processes of an MPI job (`--ddp mpi`).
//! - [`memory`]: training memory by component measured from the runtime (`ember memory`).
//! - [`profile`]: where a training step's time goes on wgpu or CUDA, kernel by kernel, beside
//!   its wall time (`ember profile`).
//! - [`compare`]: loss curves, accuracy heat map and table of several runs (`ember compare`).
//! - [`lut`]: generate, inspect and convert mantissa-product tables (`ember lut`).
//! - [`policy`]: a model's module paths and parameter shapes, what a per-layer policy names
//!   (`ember policy show`).
//!
//! ```no_run
//! use ember_models::classifier::ModelKind;
//! use ember_models::data::{mnist::MnistSource, DataSource};
//! use ember_train::train::{train, TrainOptions};
//!
//! let data = DataSource::Mnist(MnistSource::Embedded);
//! let report = train(TrainOptions {
//!     multiplier: burn_approx_mul::Multiplier::parse("afm16")?,
//!     sparse_act: burn_sparse_act::Policy::uniform(burn_sparse_act::Pruning::parse("0.5:4")?),
//!     // the first and the last layer exact (or LayerPolicy::from_arg("policy.toml")?)
//!     policy: Some(ember_train::policy::LayerPolicy::FirstLastExact),
//!     epochs: 2,
//!     batch_size: 64,
//!     lr: 1e-3,
//!     plain: true,
//!     // every other setting at `ember train`'s default
//!     ..TrainOptions::new(ModelKind::Lenet5, data, "runs/example")
//! })?;
//! if let Some(test) = report.test {
//!     println!("test accuracy {:.2}%", test.accuracy);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Feature flags
//!
//! - `cuda`: the CUDA backend ([`backend::BackendKind::Cuda`]). Builds without a CUDA toolkit;
//!   the driver libraries are loaded at run time.
//! - `mpi`: training across the processes of an MPI job ([`scale::Scale::mpi`], `mpirun -np N
//!   ember train --ddp mpi`), on rsmpi over the system's MPI. Building it needs an MPI
//!   (`mpicc`) and libclang: Debian's `openmpi-bin libopenmpi-dev libclang-dev`.
//!
//! `ndarray` and `wgpu` are always built.
#![warn(missing_docs)]

pub mod atomic;
pub mod backend;
pub mod bcr;
pub mod compare;
pub mod effects;
pub mod error;
pub mod fused_optim;
pub mod hinm;
pub mod lut;
pub mod memory;
pub mod optimizer;
pub mod policy;
pub mod profile;
pub mod progress;
pub mod record;
pub mod report;
pub mod run;
pub mod scale;
pub mod technique;
pub mod train;
pub mod weights;

pub use error::{EmberError, Result};
