//! `ember eval`.

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
    /// A run directory, its model.mpk, a checkpoint/model-<epoch>.mpk, a packed model (an
    /// `ember prune` directory or its model.hinm), or PyTorch weights (a `.pth`/`.pt` state
    /// dict or a `.safetensors` file under torchvision's or timm's names; pass --model).
    #[arg(long)]
    checkpoint: PathBuf,
    /// The model the checkpoint holds (read from the run's ember-run.json if omitted).
    #[arg(long, value_parser = choice::<ModelKind>())]
    model: Option<ModelKind>,
    /// Backend to evaluate on.
    #[arg(long, value_parser = choice::<BackendKind>(), default_value_t = BackendKind::Ndarray)]
    backend: BackendKind,
    #[arg(long, default_value = "native", help = super::multiplier_help(
        "Multiplier of every matmul/linear/conv product, may differ from training's (native: the backend's own ops)"
    ))]
    multiplier: Multiplier,
    #[command(flatten)]
    conv: super::ConvArgs,
    /// Dataset (default: the one the run was trained on, or the one weights' shape names;
    /// else mnist for an Ember checkpoint).
    #[arg(long, value_parser = choice::<DatasetKind>())]
    dataset: Option<DatasetKind>,
    /// Directory of the dataset (see `ember train --help`); default for mnist: the
    /// embedded subset.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Batch size.
    #[arg(long, default_value_t = 256)]
    batch_size: usize,
    /// Evaluate only the first N test images.
    #[arg(long)]
    test_limit: Option<usize>,
    /// The most frames a sequence of the data may have (FSDD, Japanese Vowels); a longer one is
    /// an error naming it.
    #[arg(long, default_value_t = ember_models::data::sequence::DEFAULT_MAX_FRAMES)]
    max_frames: usize,
    #[command(flatten)]
    layers: super::LayerArgs,
}

/// Runs `ember eval`.
pub fn run(args: EvalArgs) -> Result<(), EmberError> {
    let (policy, energy) = args.layers.parse()?;
    let report = train::eval(EvalOptions {
        checkpoint: args.checkpoint,
        model: args.model,
        backend: args.backend,
        multiplier: args.conv.apply(args.multiplier),
        dataset: args.dataset,
        data_dir: args.data_dir,
        batch_size: args.batch_size,
        test_limit: args.test_limit,
        policy,
        energy,
        max_frames: args.max_frames,
    })?;
    println!(
        "test accuracy {:.2}% (loss {:.4}, {} images)",
        report.accuracy, report.loss, report.images
    );
    Ok(())
}
