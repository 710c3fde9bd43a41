//! `ember`: train and evaluate models under Ember's hardware-efficiency techniques.

use clap::{Parser, Subcommand};
use ember_models::backend::BackendKind;
use ember_models::data::mnist::MnistSource;
use ember_models::error::EmberError;
use ember_models::run::{self, OnExisting};
use ember_models::train::{self, EvalOptions, ModelKind, TrainOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "ember",
    version,
    about = "Train and evaluate Burn models under Ember's techniques"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train a model (defaults: LeNet-5 on the embedded MNIST subset, ndarray backend).
    Train {
        /// Model to train.
        #[arg(long, value_enum, default_value_t = ModelKind::Lenet5)]
        model: ModelKind,
        /// Backend to train on.
        #[arg(long, value_enum, default_value_t = BackendKind::Ndarray)]
        backend: BackendKind,
        /// Total number of epochs.
        #[arg(long, default_value_t = 3)]
        epochs: usize,
        /// Batch size.
        #[arg(long, default_value_t = 32)]
        batch_size: usize,
        /// Adam learning rate.
        #[arg(long, default_value_t = 2e-3)]
        lr: f64,
        /// Seed for parameter initialisation and shuffling.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Run directory (default: runs/<model>-<date>-<time>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Directory with the standard idx files (MNIST or Fashion-MNIST, gz or raw);
        /// default: the MNIST subset embedded in the binary.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Continue the run in --out from its last checkpoint.
        #[arg(long, conflicts_with = "overwrite", requires = "out")]
        resume: bool,
        /// Replace the run in --out (never a directory that is not an Ember run).
        #[arg(long, requires = "out")]
        overwrite: bool,
        /// Use only the first N training images.
        #[arg(long)]
        train_limit: Option<usize>,
        /// Use only the first N test images.
        #[arg(long)]
        test_limit: Option<usize>,
        /// Plain progress lines even in a terminal (no TUI).
        #[arg(long)]
        plain: bool,
    },
    /// Evaluate a saved model on the test split.
    Eval {
        /// A run directory, its model.mpk, or a checkpoint/model-<epoch>.mpk.
        #[arg(long)]
        checkpoint: PathBuf,
        /// The model the checkpoint holds (read from the run's ember-run.json if omitted).
        #[arg(long, value_enum)]
        model: Option<ModelKind>,
        /// Backend to evaluate on.
        #[arg(long, value_enum, default_value_t = BackendKind::Ndarray)]
        backend: BackendKind,
        /// Directory with the standard idx files; default: the embedded MNIST subset.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Batch size.
        #[arg(long, default_value_t = 256)]
        batch_size: usize,
    },
}

fn source(dir: Option<PathBuf>) -> MnistSource {
    dir.map_or(MnistSource::Embedded, MnistSource::Dir)
}

fn run(cli: Cli) -> Result<(), EmberError> {
    match cli.command {
        Command::Train {
            model,
            backend,
            epochs,
            batch_size,
            lr,
            seed,
            out,
            data_dir,
            resume,
            overwrite,
            train_limit,
            test_limit,
            plain,
        } => {
            let on_existing = match (resume, overwrite) {
                (true, _) => OnExisting::Resume,
                (_, true) => OnExisting::Overwrite,
                _ => OnExisting::Refuse,
            };
            let report = train::train(TrainOptions {
                model,
                backend,
                epochs,
                batch_size,
                lr,
                seed,
                out: out.unwrap_or_else(|| run::default_out(model)),
                data: source(data_dir),
                on_existing,
                train_limit,
                test_limit,
                plain,
            })?;
            println!(
                "test accuracy {:.2}% (loss {:.4}, {} images); run in {} (metrics.csv, curves.png, model.mpk)",
                report.test.accuracy,
                report.test.loss,
                report.test.images,
                report.out.display()
            );
        }
        Command::Eval {
            checkpoint,
            model,
            backend,
            data_dir,
            batch_size,
        } => {
            let report = train::eval(EvalOptions {
                checkpoint,
                model,
                backend,
                data: source(data_dir),
                batch_size,
            })?;
            println!(
                "test accuracy {:.2}% (loss {:.4}, {} images)",
                report.accuracy, report.loss, report.images
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
