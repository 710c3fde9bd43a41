//! What a run starts from, resolved before the run directory is touched: HiNM's masks
//! searched on the source run, the model file `--bcr --from` starts from, PyTorch weights
//! (`--from FILE`), and the model's shape that all of them (or the resumed run) imply.

use super::TrainOptions;
use crate::error::{EmberError, Result};
use crate::run::{self, OnExisting};
use ember_models::classifier::ModelKind;
use ember_models::shape::Shape;
use std::path::{Path, PathBuf};

/// What the pruning techniques prepared before the run directory: HiNM's fine-tuning (its
/// masks searched on the source run), the model file `--bcr --from` starts from and its
/// checksum.
pub(super) struct Start {
    pub(super) hinm: Option<crate::hinm::HinmRun>,
    pub(super) bcr_source: Option<(PathBuf, Option<u32>)>,
    /// The PyTorch weights the model starts from (`--from FILE`).
    pub(super) weights: Option<ember_models::pretrained::StateDict>,
}

/// Resolves what the run starts from, and sets `opts.shape` to the shape it implies: that of
/// the weights, of the source run, or (resuming) of the run in `--out`. Shapes that disagree
/// are refused, naming both.
pub(super) fn start(opts: &mut TrainOptions) -> Result<Start> {
    // The masks before the run directory: a level the model cannot take writes nothing.
    let hinm = opts
        .hinm
        .as_ref()
        .map(|tune| {
            let tuning = crate::hinm::tuning(tune, opts.model, opts.policy.as_ref(), opts.seed)?;
            Ok::<_, EmberError>(crate::hinm::HinmRun {
                tune: tune.clone(),
                tuning,
            })
        })
        .transpose()?;
    if let Some(h) = &hinm {
        adopt(opts, h.tuning.shape, &h.tune.from)?;
    }
    let bcr_source = match opts.bcr.as_ref().and_then(|b| b.from.clone()) {
        Some(from) => {
            let (file, checksum, shape) = source_run(&from, opts.model)?;
            adopt(opts, shape, &from)?;
            Some((file, checksum))
        }
        None => None,
    };
    let weights = match opts.pretrained.clone() {
        Some(file) => {
            let dict = crate::weights::open(&file)?.ok_or_else(|| {
                EmberError::Invalid(format!(
                    "--from {}: not a weights file (.pth, .pt, .bin or .safetensors)",
                    file.display()
                ))
            })?;
            let arch = opts.model.check_weights(&dict)?;
            adopt(opts, opts.model.shape_of(&arch), &file)?;
            Some(dict)
        }
        None => None,
    };
    // A resumed run is rebuilt at the shape it was started with (a run of another shape is
    // refused when its manifest is checked against the options).
    if opts.shape.is_none()
        && opts.on_existing == OnExisting::Resume
        && let Ok(Some(previous)) = run::Manifest::read_if_present(&opts.out)
        && previous.model == opts.model
    {
        opts.shape = previous.shape;
    }
    Ok(Start {
        hinm,
        bcr_source,
        weights,
    })
}

/// Takes `found`, the shape of what the run starts from (`from`), as the run's, unless the
/// options already hold another.
fn adopt(opts: &mut TrainOptions, found: Option<Shape>, from: &Path) -> Result<()> {
    let kind = opts.model;
    let full = |s: Option<Shape>| s.or(kind.own_shape());
    if opts.shape.is_some() && full(opts.shape) != full(found) {
        let show = |s: Option<Shape>| full(s).map_or_else(String::new, |s| s.to_string());
        return Err(EmberError::Invalid(format!(
            "{} holds a {kind} of {}; this run's is of {}",
            from.display(),
            show(found),
            show(opts.shape)
        )));
    }
    opts.shape = found.filter(|s| Some(*s) != kind.own_shape());
    Ok(())
}

/// The model file of a trained run (`--from`), its recorded checksum and the model's shape;
/// the run must hold a `model` model.
fn source_run(from: &Path, model: ModelKind) -> Result<(PathBuf, Option<u32>, Option<Shape>)> {
    let (file, manifest, checksum) = run::resolve_checkpoint(from)?;
    if let Some(m) = &manifest
        && m.model != model
    {
        return Err(EmberError::BadCheckpoint {
            path: from.to_path_buf(),
            reason: format!("it holds a {} model, not {model}", m.model),
        });
    }
    Ok((file, checksum, manifest.and_then(|m| m.shape)))
}
