//! # ember-models
//!
//! Ember's models, data loaders, training loop and the `ember` command-line tool.
//!
//! - [`classifier`]: the models the CLI knows and what the trainer needs of them.
//! - [`lenet`]: LeNet-300-100 and LeNet-5 written with stock `burn::nn` layers only, so every
//!   Ember backend decorator applies to them unchanged.
//! - [`data`]: local-file loaders (idx for MNIST / Fashion-MNIST, gz or raw) and a real MNIST
//!   subset compiled into the crate, so `ember train` runs offline with no arguments.
//! - [`train`]: training through burn-train's `SupervisedTraining` (progress display, accuracy
//!   and loss, a checkpoint every epoch, resume), metrics as CSV and curves as PNG
//!   ([`report`]), and evaluation of saved models.
//! - [`backend`]: the backends selectable at run time (`ndarray`, `wgpu`, `cuda`), each as
//!   `SparseAct<Autodiff<ApproxMul<B>>>` whose device carries the `--multiplier` and the
//!   `--sparse-act` policy.
//! - [`resmlp`]: ResMLP-S12/S24 (ImageNet and CIFAR configurations) and a small CPU variant.
//! - [`memory`]: `ember memory`, training memory by component measured from the runtime.
//! - [`compare`]: `ember compare RUN…`, loss curves, accuracy heat map and table of several runs.
//! - [`lut`]: `ember lut generate | inspect | convert`.
//!
//! ```no_run
//! use ember_models::{backend::BackendKind, data::{mnist::MnistSource, DataSource}, run::OnExisting};
//! use ember_models::train::{train, ModelKind, TrainOptions};
//!
//! let report = train(TrainOptions {
//!     model: ModelKind::Lenet5,
//!     backend: BackendKind::Ndarray,
//!     multiplier: burn_approx_mul::Multiplier::parse("afm16")?,
//!     sparse_act: burn_sparse_act::Policy::uniform(burn_sparse_act::Pruning::parse("0.5:4")?),
//!     epochs: 2,
//!     batch_size: 64,
//!     lr: 1e-3,
//!     seed: 42,
//!     out: "runs/example".into(),
//!     data: DataSource::Mnist(MnistSource::Embedded),
//!     on_existing: OnExisting::Refuse,
//!     train_limit: None,
//!     test_limit: None,
//!     plain: true,
//! })?;
//! println!("test accuracy {:.2}%", report.test.accuracy);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Feature flags
//!
//! - `cuda`: the CUDA backend (`--backend cuda`). Builds without a CUDA toolkit; the driver
//!   libraries are loaded at run time.
//!
//! `ndarray` and `wgpu` are always built.
#![warn(missing_docs)]

pub mod backend;
pub mod classifier;
pub mod compare;
pub mod data;
pub mod error;
pub mod lenet;
pub mod lut;
pub mod memory;
pub mod renderer;
pub mod report;
pub mod resmlp;
pub mod run;
pub mod train;
