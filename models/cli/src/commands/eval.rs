//! `ember eval`.

use super::parse_multiplier;
use crate::choice;
use burn_approx_mul::Multiplier;
use ember_models::classifier::ModelKind;
use ember_models::data::DatasetKind;
use ember_train::EmberError;
use ember_train::backend::BackendKind;
use ember_train::train::{self, EvalOptions};
use std::path::PathBuf;

/// Arguments of `ember eval`.
#[derive(clap::Args)]
pub struct EvalArgs {
    /// A run directory, its model.mpk, or a checkpoint/model-<epoch>.mpk.
    #[arg(long)]
    checkpoint: PathBuf,
    /// The model the checkpoint holds (read from the run's ember-run.json if omitted).
    #[arg(long, value_parser = choice::<ModelKind>())]
    model: Option<ModelKind>,
    /// Backend to evaluate on.
    #[arg(long, value_parser = choice::<BackendKind>(), default_value_t = BackendKind::Ndarray)]
    backend: BackendKind,
    /// Multiplier to evaluate with (may differ from training's): every matmul/linear/conv product, native (the
    /// backend's own ops), fp32, bf16, accM, mbmM, mitchellM, realmM (M = 1..=11; mbm and
    /// mitchell also 23), afm16/afm32, mit16, realm16, or a LUT file (NAME_M.bin or .lut).
    #[arg(long, default_value = "native", value_parser = parse_multiplier)]
    multiplier: Multiplier,
    /// Dataset (default: the one the run was trained on, else mnist).
    #[arg(long, value_parser = choice::<DatasetKind>())]
    dataset: Option<DatasetKind>,
    /// Directory of the dataset (see `ember train --help`); default for mnist: the
    /// embedded subset.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Batch size.
    #[arg(long, default_value_t = 256)]
    batch_size: usize,
}

/// Runs `ember eval`.
pub fn run(args: EvalArgs) -> Result<(), EmberError> {
    let report = train::eval(EvalOptions {
        checkpoint: args.checkpoint,
        model: args.model,
        backend: args.backend,
        multiplier: args.multiplier,
        dataset: args.dataset,
        data_dir: args.data_dir,
        batch_size: args.batch_size,
    })?;
    println!(
        "test accuracy {:.2}% (loss {:.4}, {} images)",
        report.accuracy, report.loss, report.images
    );
    Ok(())
}
