//! Evaluation of a saved model (a run directory, a checkpoint or a packed model file) on a
//! test split.

use super::EvalReport;
use super::data::{Fallible, Splits};
use super::fit::{Sums, energy_name};
use super::manifest::{layer_setup, report_effects};
use crate::backend::{BackendJob, BackendKind, TrainBackend};
use crate::effects::report as effects_report;
use crate::error::{EmberError, Result};
use crate::policy::{LayerPolicy, tag_layers};
use crate::record;
use crate::run::{self};
use crate::technique::Packed;
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::Dataset;
use burn::prelude::*;
use burn_approx_mul::Multiplier;
use burn_sparse_act::Policy;
use cubecl_kernels::decorator::effects;
use ember_models::act::Activation;
use ember_models::classifier::{Classifier, ModelKind, ModelVisitor, TrainableClassifier};
use ember_models::data::cifar::CifarBatcher;
use ember_models::data::folder::FolderBatcher;
use ember_models::data::mnist::MnistBatcher;
use ember_models::data::sequence::SequenceBatcher;
use ember_models::data::{Batch, DataSource, DataSpec, DatasetKind};
use ember_models::pretrained::{Head, StateDict};
use ember_models::shape::Shape;
use std::path::{Path, PathBuf};

/// The accuracy and loss of `model` on `items`, in batches; an item that did not load (an
/// image that does not decode) is an error naming it, after the last batch.
pub(crate) fn evaluate_items<B, M, I, V>(
    model: &M,
    items: &impl Dataset<I>,
    batcher: &V,
    batch_size: usize,
    device: &B::Device,
) -> Result<EvalReport>
where
    B: Backend,
    M: Classifier<B>,
    I: Clone + Send + Sync,
    V: Batcher<B, I, Batch<B>> + Fallible,
{
    let mut sums = Sums::default();
    for start in (0..items.len()).step_by(batch_size) {
        let end = items.len().min(start.saturating_add(batch_size));
        let chunk = (start..end).map(|i| items.get(i).expect("an index below len"));
        let batch = batcher.batch(chunk.collect(), device);
        sums.add(&model.forward_classification(batch));
    }
    if let Some(e) = batcher.failure() {
        return Err(e);
    }
    Ok(EvalReport {
        accuracy: sums.accuracy(),
        loss: sums.loss(),
        images: sums.seen,
    })
}

/// Everything `ember eval` needs.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    /// A run directory, or a `.mpk` model or checkpoint file.
    pub checkpoint: PathBuf,
    /// The model the checkpoint must hold (read from the run's manifest when not given).
    pub model: Option<ModelKind>,
    /// Backend to evaluate on.
    pub backend: BackendKind,
    /// Multiplier to evaluate with (may differ from the one trained with: ApproxTrain's
    /// cross-format testing).
    pub multiplier: Multiplier,
    /// The dataset (when not given: the run's, a packed model's `about`, the one weights'
    /// shape says; MNIST for an Ember checkpoint without one; otherwise an error).
    pub dataset: Option<DatasetKind>,
    /// Directory of the test data (`None`: the embedded MNIST subset).
    pub data_dir: Option<PathBuf>,
    /// Batch size.
    pub batch_size: usize,
    /// Evaluate only the first N test images (`None`: all).
    pub test_limit: Option<usize>,
    /// Per-layer multipliers by module path (`--policy`; its SparseAct settings have no
    /// effect on evaluation).
    pub policy: Option<LayerPolicy>,
    /// Energy figures for the effects report (`--energy`).
    pub energy: Option<PathBuf>,
    /// The most frames a test sequence may have (`--max-frames`).
    pub max_frames: usize,
}

/// Evaluates a saved model on the test split.
pub fn eval(opts: EvalOptions) -> Result<EvalReport> {
    if opts.batch_size == 0 {
        return Err(EmberError::Invalid(
            "--batch-size must be at least 1".into(),
        ));
    }
    opts.backend.check_available()?;
    if let Some(dict) = crate::weights::open(&opts.checkpoint)? {
        return eval_weights(opts, dict);
    }
    let packed = Packed::find(&opts.checkpoint)?;
    let (file, manifest, checksum) = match &packed {
        Some((f, m, crc)) => (f.clone(), packed_run(f, m, *crc)?, None),
        None => run::resolve_checkpoint(&opts.checkpoint)?,
    };
    let from_file = match &packed {
        Some((f, m, _)) => {
            Some(
                m.model()
                    .parse::<ModelKind>()
                    .map_err(|_| EmberError::BadCheckpoint {
                        path: f.clone(),
                        reason: format!(
                            "it holds a model this build does not know ({})",
                            m.model()
                        ),
                    })?,
            )
        }
        None => manifest.as_ref().map(|m| m.model),
    };
    let model = match (opts.model, from_file) {
        (Some(asked), Some(trained)) if asked != trained => {
            return Err(EmberError::BadCheckpoint {
                path: opts.checkpoint,
                reason: format!("it holds a {trained} model, not {asked}"),
            });
        }
        (Some(m), _) | (None, Some(m)) => m,
        (None, None) => {
            return Err(EmberError::BadCheckpoint {
                path: opts.checkpoint,
                reason: "no ember-run.json beside it: pass --model".into(),
            });
        }
    };
    let packed_dataset = packed
        .as_ref()
        .and_then(|(_, m, _)| m.about().get("dataset"))
        .and_then(|d| d.parse::<DatasetKind>().ok());
    let shape = match &packed {
        Some((f, m, _)) => m.shape().map_err(|reason| EmberError::BadCheckpoint {
            path: f.clone(),
            reason,
        })?,
        None => manifest.as_ref().and_then(|m| m.shape),
    };
    let found = Found {
        model,
        shape,
        act: manifest.as_ref().map_or(Activation::Relu, |m| m.act),
        dataset: manifest.as_ref().map(|m| m.dataset).or(packed_dataset),
        file,
        checksum,
        packed: packed.map(|(_, m, _)| m),
        weights: None,
    };
    evaluate(opts, found)
}

/// Evaluates PyTorch weights (a `.pth`/`.pt` state dict or a safetensors file) as the model
/// `--model` names, built at their shape.
fn eval_weights(opts: EvalOptions, dict: StateDict) -> Result<EvalReport> {
    let model = crate::weights::model_for(&opts.checkpoint, opts.model)?;
    let arch = model.check_weights(&dict)?;
    let found = Found {
        model,
        shape: None,
        act: Activation::Relu,
        dataset: crate::weights::arch_dataset(&arch),
        file: opts.checkpoint.clone(),
        checksum: None,
        packed: None,
        weights: Some(dict),
    };
    evaluate(opts, found)
}

/// What a checkpoint holds and how it loads.
struct Found {
    model: ModelKind,
    /// Its shape when not the kind's own (weights are built at theirs).
    shape: Option<Shape>,
    act: Activation,
    /// The dataset its run trained on, when known.
    dataset: Option<DatasetKind>,
    file: PathBuf,
    checksum: Option<u32>,
    packed: Option<Packed>,
    weights: Option<StateDict>,
}

/// Loads the test split (`--dataset`, else the run's or the one the weights' shape says, else
/// MNIST for an Ember checkpoint of a model that takes its images) and evaluates `found` on it.
fn evaluate(opts: EvalOptions, found: Found) -> Result<EvalReport> {
    let ember_checkpoint = found.weights.is_none() && found.packed.is_none();
    let dataset = match opts.dataset.or(found.dataset) {
        Some(d) => d,
        None if ember_checkpoint && found.model.accepts(DatasetKind::Mnist.spec()).is_ok() => {
            DatasetKind::Mnist
        }
        None => {
            return Err(EmberError::Invalid(format!(
                "{} does not say which dataset its {} classifies: pass --dataset (and \
                 --data-dir)",
                opts.checkpoint.display(),
                found.model
            )));
        }
    };
    let source = DataSource::new(dataset, opts.data_dir)?;
    found
        .model
        .accepts(source.spec())
        .map_err(|why| EmberError::Invalid(format!("--dataset {dataset}: {why}")))?;
    if opts.test_limit == Some(0) {
        return Err(EmberError::Invalid(
            "--test-limit must be at least 1".into(),
        ));
    }
    let test = Splits::load(&source, false, None, opts.test_limit, opts.max_frames)?;
    opts.backend.dispatch(
        opts.multiplier.clone(),
        Policy::default(),
        EvalJob {
            act: found.act,
            file: found.file,
            checksum: found.checksum,
            model: found.model,
            shape: found.shape,
            spec: source.spec(),
            test,
            batch_size: opts.batch_size,
            multiplier: opts.multiplier,
            policy: opts.policy,
            energy: opts.energy,
            packed: found.packed,
            weights: found.weights,
        },
    )
}

/// The manifest of the run a packed model file is in (`None` for one outside a run, as
/// `ember prune` writes them), after checking that the file is the one the run wrote: the
/// model it holds is the run's, and its CRC-32 the one the run recorded.
fn packed_run(file: &Path, packed: &Packed, checksum: u32) -> Result<Option<run::Manifest>> {
    let Some(dir) = run::manifest_dir(file) else {
        return Ok(None);
    };
    let Some(manifest) = run::Manifest::read_if_present(&dir)? else {
        return Ok(None);
    };
    let bad = |reason: String| EmberError::BadCheckpoint {
        path: file.to_path_buf(),
        reason,
    };
    if packed.model() != manifest.model.to_string() {
        return Err(bad(format!(
            "it holds a {} model, and its run ({}) trained a {}: it is not the file the run wrote",
            packed.model(),
            dir.display(),
            manifest.model
        )));
    }
    record::check_checksum(checksum, manifest.checksum(&dir, file)).map_err(bad)?;
    Ok(Some(manifest))
}

pub(crate) struct EvalJob {
    /// The activation the run was trained with (its manifest's; ReLU without one).
    pub(crate) act: Activation,
    /// The packed model when the checkpoint is one (`ember prune`, `ember train --hinm|--bcr`).
    pub(crate) packed: Option<Packed>,
    pub(crate) file: PathBuf,
    pub(crate) checksum: Option<u32>,
    pub(crate) model: ModelKind,
    /// The model's shape when not its kind's own.
    pub(crate) shape: Option<Shape>,
    pub(crate) spec: DataSpec,
    pub(crate) test: Splits,
    pub(crate) batch_size: usize,
    pub(crate) multiplier: Multiplier,
    pub(crate) policy: Option<LayerPolicy>,
    pub(crate) energy: Option<PathBuf>,
    /// PyTorch weights the model is built from (the model is then loaded before the visit).
    pub(crate) weights: Option<StateDict>,
}

impl BackendJob for EvalJob {
    type Output = EvalReport;
    fn run<B: TrainBackend>(mut self, device: B::Device) -> Result<EvalReport> {
        let (kind, act, spec) = (self.model, self.act, self.spec);
        match self.weights.take() {
            Some(dict) => {
                let visit = EvalVisit {
                    job: self,
                    device: device.clone(),
                    loaded: true,
                };
                kind.build_pretrained::<B, _>(&dict, Head::Keep, act, spec, &device, visit)?
            }
            None => {
                let shape = self.shape;
                let visit = EvalVisit {
                    job: self,
                    device: device.clone(),
                    loaded: false,
                };
                kind.build_shaped::<B, _>(shape, act, spec, &device, visit)?
            }
        }
    }
}

/// Loads the checkpoint into the inference form of the model [`ModelKind::build`] made, and
/// evaluates it.
pub(crate) struct EvalVisit<B: TrainBackend> {
    pub(crate) job: EvalJob,
    pub(crate) device: B::Device,
    /// The model comes loaded (from PyTorch weights): no record to load.
    pub(crate) loaded: bool,
}

impl<B: TrainBackend> ModelVisitor<B> for EvalVisit<B> {
    type Output = Result<EvalReport>;
    fn visit<M: TrainableClassifier<B>>(self, model: M) -> Result<EvalReport> {
        let job = self.job;
        let (choices, energy) = layer_setup(
            &model,
            job.policy.as_ref(),
            &job.multiplier,
            job.energy.as_deref(),
        )?;
        let model = match &job.packed {
            // a packed model: the weights of the pruned layers stay packed (Hinm's or Bcr's
            // primitive)
            Some(packed) => {
                let model = tag_layers::<B, M>(model, &choices).valid();
                packed
                    .load(model)
                    .map_err(|reason| EmberError::BadCheckpoint {
                        path: job.file.clone(),
                        reason: format!("cannot load it as {}: {reason}", job.model),
                    })?
            }
            None if self.loaded => tag_layers::<B, M>(model, &choices).valid(),
            None => {
                let model =
                    record::load_checked(&job.file, job.checksum, model, job.model, &self.device)?;
                tag_layers::<B, M>(model, &choices).valid()
            }
        };
        // weights that are not numbers evaluate to a loss of NaN and a chance accuracy
        record::refuse_non_finite(&model, &job.file, "there is no model to evaluate")?;
        let device: burn::tensor::Device<B::InnerBackend> = self.device;
        effects::start();
        let report = match job.test {
            Splits::Mnist(_, test) => evaluate_items(
                &model,
                &test.dataset(),
                &MnistBatcher,
                job.batch_size,
                &device,
            ),
            Splits::Cifar10(_, test) => evaluate_items(
                &model,
                &test.dataset(),
                &CifarBatcher::plain(),
                job.batch_size,
                &device,
            ),
            Splits::Sequences(_, test, features) => evaluate_items(
                &model,
                &test.dataset(),
                &SequenceBatcher { features },
                job.batch_size,
                &device,
            ),
            Splits::Folder(_, test) => evaluate_items(
                &model,
                &test.dataset(),
                &FolderBatcher::new(),
                job.batch_size,
                &device,
            ),
        }?;
        let seen = effects::finish();
        let batches = report.images.div_ceil(job.batch_size) as u64;
        let name = energy_name(job.energy.as_deref());
        let energy = energy.as_ref().map(|e| (name.as_str(), e));
        let step = "evaluation batch";
        let default = job.multiplier.name();
        report_effects(
            &effects_report(&seen, batches, step, &choices, default, energy),
            None,
        )?;
        Ok(report)
    }
}
