//! `ember export`.

use crate::choice;
use ember_models::classifier::ModelKind;
use ember_models::pretrained::Naming;
use ember_train::EmberError;
use ember_train::weights::{self, ExportOptions};
use std::path::PathBuf;

/// The file formats `ember export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One safetensors file of dense f32 tensors (header metadata `format: pt`).
    Safetensors,
}

/// Arguments of `ember export`.
#[derive(clap::Args)]
pub struct ExportArgs {
    /// A run directory, its model.mpk or a checkpoint/model-<epoch>.mpk (pruned, fine-tuned or
    /// approximately trained alike), or PyTorch weights (`.pth`/`.pt`/`.safetensors`).
    #[arg(long)]
    checkpoint: PathBuf,
    /// The model the checkpoint holds (read from the run's ember-run.json if omitted; required
    /// for a weights file).
    #[arg(long, value_parser = choice::<ModelKind>())]
    model: Option<ModelKind>,
    /// The file format.
    #[arg(long, value_enum, default_value_t = Format::Safetensors)]
    format: Format,
    /// Key names: torchvision (the ResNets, as `torchvision.models.resnet18()` loads them),
    /// timm (the DeiTs), or ember (Ember's module paths, Burn's layouts: any model). Default:
    /// torchvision for a ResNet, timm for a DeiT, ember otherwise.
    #[arg(long, value_parser = choice::<Naming>())]
    names: Option<Naming>,
    /// The file to write.
    #[arg(long)]
    out: PathBuf,
    /// Replace --out if it exists (refused otherwise).
    #[arg(long)]
    overwrite: bool,
}

/// Runs `ember export`.
pub fn run(args: ExportArgs) -> Result<(), EmberError> {
    let Format::Safetensors = args.format;
    let report = weights::export(ExportOptions {
        checkpoint: args.checkpoint,
        model: args.model,
        names: args.names,
        out: args.out.clone(),
        overwrite: args.overwrite,
    })?;
    println!(
        "wrote {} ({} tensors, {} bytes, {} under {} names)",
        args.out.display(),
        report.tensors,
        report.bytes,
        report.model,
        report.names
    );
    Ok(())
}
