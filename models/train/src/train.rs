//! Training with burn-train's `SupervisedTraining`, and evaluation of saved models.

use crate::backend::{BackendJob, BackendKind};
use crate::error::{EmberError, Result};
use crate::renderer::{EpochClock, EpochRenderer, ResumedFileLogger};
use crate::report;
use crate::run::{self, Manifest, OnExisting};
use burn::data::dataloader::DataLoaderBuilder;
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::{Dataset, InMemDataset};
use burn::optim::AdamConfig;
use burn::prelude::*;
use burn::record::{DefaultRecorder, Recorder};
use burn::tensor::backend::AutodiffBackend;
use burn::train::checkpoint::KeepLastNCheckpoints;
use burn::train::metric::{AccuracyMetric, LossMetric};
use burn::train::{Learner, SupervisedTraining};
use burn_approx_mul::Multiplier;
use burn_sparse_act::Policy;
use ember_models::classifier::{Classifier, ModelKind, ModelVisitor, TrainableClassifier};
use ember_models::data::cifar::{self, CifarBatcher};
use ember_models::data::mnist::{self, MnistBatcher};
use ember_models::data::{DataSource, DatasetKind, ImageBatch, ImageSpec};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Everything `ember train` needs.
#[derive(Clone, Debug)]
pub struct TrainOptions {
    /// Model to train.
    pub model: ModelKind,
    /// Backend to train on.
    pub backend: BackendKind,
    /// Multiplier of every contraction, forward and backward.
    pub multiplier: Multiplier,
    /// SparseAct pruning of the inputs linear layers keep for backward (`Policy::default()`:
    /// off).
    pub sparse_act: Policy,
    /// Total number of epochs.
    pub epochs: usize,
    /// Batch size.
    pub batch_size: usize,
    /// Adam learning rate.
    pub lr: f64,
    /// Seed for initialisation and shuffling.
    pub seed: u64,
    /// Run directory.
    pub out: PathBuf,
    /// Training and test data.
    pub data: DataSource,
    /// What to do when `out` already holds something.
    pub on_existing: OnExisting,
    /// Use only the first N training images.
    pub train_limit: Option<usize>,
    /// Use only the first N test images.
    pub test_limit: Option<usize>,
    /// Force plain progress lines even in a terminal.
    pub plain: bool,
}

impl TrainOptions {
    fn validate(&self) -> Result<()> {
        if self.epochs == 0 {
            return Err(EmberError::Invalid("--epochs must be at least 1".into()));
        }
        if self.batch_size == 0 {
            return Err(EmberError::Invalid(
                "--batch-size must be at least 1".into(),
            ));
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(EmberError::Invalid(format!(
                "--lr must be a positive number, got {}",
                self.lr
            )));
        }
        self.model
            .accepts(self.data.spec())
            .map_err(|why| EmberError::Invalid(format!("--dataset {}: {why}", self.data.kind())))
    }
}

/// What a training run produced.
#[derive(Clone, Debug)]
pub struct TrainReport {
    /// The run directory.
    pub out: PathBuf,
    /// Metrics of every epoch of the run (including epochs before a resume).
    pub epochs: Vec<report::EpochMetrics>,
    /// Final evaluation on the test split.
    pub test: EvalReport,
}

/// The result of evaluating a model on a test split.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalReport {
    /// Accuracy in percent.
    pub accuracy: f64,
    /// Mean cross-entropy.
    pub loss: f64,
    /// Number of images.
    pub images: usize,
}

/// Trains a model as `opts` says, writing the run directory.
pub fn train(opts: TrainOptions) -> Result<TrainReport> {
    opts.validate()?;
    // Load data first: a bad dataset must not leave a half-made run directory behind.
    let splits = Splits::load(&opts.data, true, opts.train_limit, opts.test_limit)?;
    opts.backend.dispatch(
        opts.multiplier.clone(),
        opts.sparse_act.clone(),
        TrainJob { opts, splits },
    )
}

/// The loaded splits of a dataset: training (when asked for) and test.
enum Splits {
    Mnist(Option<mnist::MnistSplit>, mnist::MnistSplit),
    Cifar10(Option<cifar::CifarSplit>, cifar::CifarSplit),
}

impl Splits {
    fn load(
        source: &DataSource,
        with_train: bool,
        train_limit: Option<usize>,
        test_limit: Option<usize>,
    ) -> Result<Self> {
        let empty = |train: usize, test: usize| {
            if (with_train && train == 0) || test == 0 {
                Err(EmberError::Invalid(format!(
                    "{source} has no training or no test images"
                )))
            } else {
                Ok(())
            }
        };
        Ok(match source {
            DataSource::Mnist(src) => {
                let train = with_train
                    .then(|| mnist::load(src, true))
                    .transpose()?
                    .map(|s| s.truncate(train_limit.unwrap_or(usize::MAX)));
                let test = mnist::load(src, false)?;
                let test = test.truncate(test_limit.unwrap_or(usize::MAX));
                empty(train.as_ref().map_or(0, |s| s.len()), test.len())?;
                Self::Mnist(train, test)
            }
            DataSource::Cifar10(src) => {
                let train = with_train
                    .then(|| cifar::load(src, true))
                    .transpose()?
                    .map(|s| s.truncate(train_limit.unwrap_or(usize::MAX)));
                let test = cifar::load(src, false)?;
                let test = test.truncate(test_limit.unwrap_or(usize::MAX));
                empty(train.as_ref().map_or(0, |s| s.len()), test.len())?;
                Self::Cifar10(train, test)
            }
        })
    }
}

struct TrainJob {
    opts: TrainOptions,
    splits: Splits,
}

impl BackendJob for TrainJob {
    type Output = TrainReport;
    fn run<B: AutodiffBackend>(self, device: B::Device) -> Result<TrainReport> {
        // Seeded before the model is built: the seed fixes its initialisation.
        B::seed(&device, self.opts.seed);
        let (kind, spec) = (self.opts.model, self.opts.data.spec());
        kind.build::<B, _>(spec, &device.clone(), TrainVisit { job: self, device })?
    }
}

/// Trains the model [`ModelKind::build`] made.
struct TrainVisit<B: AutodiffBackend> {
    job: TrainJob,
    device: B::Device,
}

impl<B: AutodiffBackend> ModelVisitor<B> for TrainVisit<B> {
    type Output = Result<TrainReport>;
    fn visit<M: TrainableClassifier<B>>(self, model: M) -> Result<TrainReport> {
        train_on::<B, M>(self.job, self.device, model)
    }
}

/// The batchers of a dataset: training (augmenting where the dataset is), validation, and
/// the final evaluation.
struct Batchers<T, V> {
    train: T,
    valid: V,
    eval: V,
}

fn train_on<B: AutodiffBackend, M: TrainableClassifier<B>>(
    job: TrainJob,
    device: B::Device,
    model: M,
) -> Result<TrainReport> {
    let seed = job.opts.seed;
    match job.splits {
        Splits::Mnist(train, test) => train_model::<B, M, _, _, _>(
            job.opts,
            device,
            model,
            train.expect("training split loaded").dataset(),
            test.dataset(),
            Batchers {
                train: MnistBatcher,
                valid: MnistBatcher,
                eval: MnistBatcher,
            },
        ),
        Splits::Cifar10(train, test) => train_model::<B, M, _, _, _>(
            job.opts,
            device,
            model,
            train.expect("training split loaded").dataset(),
            test.dataset(),
            Batchers {
                train: CifarBatcher::augmented(seed),
                valid: CifarBatcher::plain(),
                eval: CifarBatcher::plain(),
            },
        ),
    }
}

fn train_model<B, M, I, T, V>(
    opts: TrainOptions,
    device: B::Device,
    model: M,
    train_split: InMemDataset<I>,
    test_split: InMemDataset<I>,
    batchers: Batchers<T, V>,
) -> Result<TrainReport>
where
    B: AutodiffBackend,
    M: TrainableClassifier<B>,
    I: Clone + Send + Sync + core::fmt::Debug + 'static,
    T: Batcher<B, I, ImageBatch<B>> + 'static,
    V: Batcher<B::InnerBackend, I, ImageBatch<B::InnerBackend>> + 'static,
{
    let out = opts.out.clone();
    let previous = run::prepare(&out, opts.model, opts.on_existing)?;
    if let Some(prev) = previous
        .as_ref()
        .filter(|m| m.multiplier != opts.multiplier.name())
    {
        return Err(EmberError::CannotResume {
            path: out,
            reason: format!(
                "it was trained with --multiplier {}, not {}",
                prev.multiplier,
                opts.multiplier.name()
            ),
        });
    }
    let dataset = opts.data.kind();
    if let Some(prev) = previous.as_ref().filter(|m| m.dataset != dataset) {
        return Err(EmberError::CannotResume {
            path: out,
            reason: format!(
                "it was trained on --dataset {}, not {dataset}",
                prev.dataset
            ),
        });
    }
    let policy = &opts.sparse_act;
    if let Some(prev) = previous.as_ref().filter(|m| m.sparse_act != *policy) {
        return Err(EmberError::CannotResume {
            path: out,
            reason: format!(
                "it was trained with --sparse-act {}, not {policy}",
                prev.sparse_act
            ),
        });
    }
    let start_epoch = previous.as_ref().map_or(0, |m| m.completed_epochs);
    if start_epoch >= opts.epochs {
        return Err(EmberError::CannotResume {
            path: out,
            reason: format!(
                "it has already completed {start_epoch} epochs; pass --epochs larger than that"
            ),
        });
    }
    let mut manifest = Manifest {
        version: run::MANIFEST_VERSION,
        model: opts.model,
        backend: opts.backend,
        multiplier: opts.multiplier.name().to_string(),
        sparse_act: policy.clone(),
        epochs: opts.epochs,
        batch_size: opts.batch_size,
        lr: opts.lr,
        seed: opts.seed,
        dataset,
        data: opts.data.to_string(),
        completed_epochs: start_epoch,
        epoch_seconds: previous.map(|m| m.epoch_seconds).unwrap_or_default(),
        test_accuracy: None,
        test_loss: None,
    };
    manifest.write(&out)?;
    eprintln!(
        "training {} on {} with multiplier {}, sparse-act {} ({} train / {} test images from {}) for epochs {}..={}, into {}",
        opts.model,
        B::name(&device),
        opts.multiplier,
        policy,
        train_split.len(),
        test_split.len(),
        opts.data,
        start_epoch + 1,
        opts.epochs,
        out.display()
    );

    let test_for_eval = std::sync::Arc::new(test_split);
    let train_loader = DataLoaderBuilder::<B, _, _>::new(batchers.train)
        .batch_size(opts.batch_size)
        .shuffle(opts.seed)
        .build(train_split);
    let valid_loader = DataLoaderBuilder::<B::InnerBackend, _, _>::new(batchers.valid)
        .batch_size(opts.batch_size.max(256))
        .build(test_for_eval.clone());

    let clock: EpochClock = Default::default();
    let tui: Option<Box<dyn burn::train::renderer::MetricsRenderer>> =
        if !opts.plain && std::io::stdout().is_terminal() && std::io::stderr().is_terminal() {
            let interrupter = burn::train::Interrupter::new();
            Some(Box::new(
                burn::train::renderer::tui::TuiMetricsRendererWrapper::new(
                    interrupter,
                    (start_epoch > 0).then_some(start_epoch),
                ),
            ))
        } else {
            None
        };
    let mut training = SupervisedTraining::new(&out, train_loader, valid_loader)
        .metrics((AccuracyMetric::new(), LossMetric::new()))
        .with_file_checkpointer(DefaultRecorder::new())
        .with_checkpointing_strategy(KeepLastNCheckpoints::new(usize::MAX))
        .with_application_logger(None)
        .with_metric_logger(ResumedFileLogger::new(&out, start_epoch))
        .renderer(EpochRenderer::new(tui, clock.clone()))
        .num_epochs(opts.epochs);
    if start_epoch > 0 {
        training = training.checkpoint(start_epoch);
    }
    let optim = AdamConfig::new().init::<B, M>();
    let result = training.launch(Learner::new(model, optim, opts.lr));

    let seconds = clock.lock().unwrap_or_else(|e| e.into_inner()).clone();
    manifest.epoch_seconds.extend(seconds);
    manifest.completed_epochs = run::checkpoint_epochs(&out).last().copied().unwrap_or(0);
    let trained = result.model;
    trained
        .clone()
        .save_file(out.join(run::MODEL_FILE), &DefaultRecorder::new())
        .map_err(|e| EmberError::io(&out, std::io::Error::other(e.to_string())))?;

    let test = evaluate_model::<B::InnerBackend, M::InnerModule, I, V>(
        &trained,
        test_for_eval,
        &batchers.eval,
        opts.batch_size.max(256),
        &device,
    );
    manifest.test_accuracy = Some(test.accuracy);
    manifest.test_loss = Some(test.loss);
    manifest.write(&out)?;

    let rows = report::read_metrics(&out, manifest.completed_epochs, &manifest.epoch_seconds);
    report::write_csv(&out.join("metrics.csv"), &rows)?;
    report::plot_curves(
        &out.join("curves.png"),
        &format!(
            "{} on {}, multiplier {} ({})",
            opts.model, opts.backend, opts.multiplier, opts.data
        ),
        &rows,
    )?;
    Ok(TrainReport {
        out,
        epochs: rows,
        test,
    })
}

fn evaluate_model<B, M, I, V>(
    model: &M,
    items: impl Dataset<I>,
    batcher: &V,
    batch_size: usize,
    device: &B::Device,
) -> EvalReport
where
    B: Backend,
    M: Classifier<B>,
    I: Clone + Send + Sync,
    V: Batcher<B, I, ImageBatch<B>>,
{
    let (mut correct, mut loss_sum, mut n) = (0usize, 0.0f64, 0usize);
    let all: Vec<_> = items.iter().collect();
    for chunk in all.chunks(batch_size) {
        let batch = batcher.batch(chunk.to_vec(), device);
        let out = model.forward_classification(batch);
        let pred = out.output.argmax(1).squeeze_dim::<1>(1);
        correct += pred
            .equal(out.targets)
            .int()
            .sum()
            .into_scalar()
            .elem::<i64>() as usize;
        loss_sum += out.loss.into_scalar().elem::<f64>() * chunk.len() as f64;
        n += chunk.len();
    }
    EvalReport {
        accuracy: 100.0 * correct as f64 / n.max(1) as f64,
        loss: loss_sum / n.max(1) as f64,
        images: n,
    }
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
    /// The dataset (read from the run's manifest when not given; MNIST without one).
    pub dataset: Option<DatasetKind>,
    /// Directory of the test data (`None`: the embedded MNIST subset).
    pub data_dir: Option<PathBuf>,
    /// Batch size.
    pub batch_size: usize,
}

/// The model file and the manifest (if any) that `path` designates.
fn resolve_checkpoint(path: &Path) -> Result<(PathBuf, Option<Manifest>)> {
    let bad = |reason: String| EmberError::BadCheckpoint {
        path: path.to_path_buf(),
        reason,
    };
    if path.is_dir() {
        let manifest = Manifest::read_if_present(path)?;
        let model = path.join(format!("{}.mpk", run::MODEL_FILE));
        if model.is_file() {
            return Ok((model, manifest));
        }
        let last = run::checkpoint_epochs(path).last().copied();
        return match last {
            Some(e) => Ok((path.join(format!("checkpoint/model-{e}.mpk")), manifest)),
            None => Err(bad(
                "no model.mpk and no checkpoint/model-<epoch>.mpk in it".into(),
            )),
        };
    }
    if !path.is_file() {
        return Err(bad("no such file or directory".into()));
    }
    // model.mpk sits in the run directory, checkpoint/model-<e>.mpk one level deeper.
    let parent = path.parent().unwrap_or(Path::new("."));
    let manifest = match Manifest::read_if_present(parent)? {
        Some(m) => Some(m),
        None => Manifest::read_if_present(parent.parent().unwrap_or(Path::new(".")))?,
    };
    Ok((path.to_path_buf(), manifest))
}

/// Evaluates a saved model on the test split.
pub fn eval(opts: EvalOptions) -> Result<EvalReport> {
    if opts.batch_size == 0 {
        return Err(EmberError::Invalid(
            "--batch-size must be at least 1".into(),
        ));
    }
    let (file, manifest) = resolve_checkpoint(&opts.checkpoint)?;
    let model = match (opts.model, manifest.as_ref().map(|m| m.model)) {
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
    let dataset = opts
        .dataset
        .or(manifest.as_ref().map(|m| m.dataset))
        .unwrap_or(DatasetKind::Mnist);
    let source = DataSource::new(dataset, opts.data_dir)?;
    model
        .accepts(source.spec())
        .map_err(|why| EmberError::Invalid(format!("--dataset {dataset}: {why}")))?;
    let test = Splits::load(&source, false, None, None)?;
    opts.backend.dispatch(
        opts.multiplier,
        Policy::default(),
        EvalJob {
            file,
            model,
            spec: source.spec(),
            test,
            batch_size: opts.batch_size,
        },
    )
}

struct EvalJob {
    file: PathBuf,
    model: ModelKind,
    spec: ImageSpec,
    test: Splits,
    batch_size: usize,
}

impl BackendJob for EvalJob {
    type Output = EvalReport;
    fn run<B: AutodiffBackend>(self, device: B::Device) -> Result<EvalReport> {
        let (kind, spec) = (self.model, self.spec);
        kind.build::<B, _>(spec, &device.clone(), EvalVisit { job: self, device })?
    }
}

/// Loads the checkpoint into the inference form of the model [`ModelKind::build`] made, and
/// evaluates it.
struct EvalVisit<B: AutodiffBackend> {
    job: EvalJob,
    device: B::Device,
}

impl<B: AutodiffBackend> ModelVisitor<B> for EvalVisit<B> {
    type Output = Result<EvalReport>;
    fn visit<M: TrainableClassifier<B>>(self, model: M) -> Result<EvalReport> {
        let job = self.job;
        let device: burn::tensor::Device<B::InnerBackend> = self.device;
        let record = DefaultRecorder::new()
            .load::<<M::InnerModule as Module<B::InnerBackend>>::Record>(
                job.file.with_extension(""),
                &device,
            )
            .map_err(|e| EmberError::BadCheckpoint {
                path: job.file.clone(),
                reason: format!("cannot load it as {}: {e}", job.model),
            })?;
        let model = model.valid().load_record(record);
        Ok(match job.test {
            Splits::Mnist(_, test) => evaluate_model(
                &model,
                test.dataset(),
                &MnistBatcher,
                job.batch_size,
                &device,
            ),
            Splits::Cifar10(_, test) => evaluate_model(
                &model,
                test.dataset(),
                &CifarBatcher::plain(),
                job.batch_size,
                &device,
            ),
        })
    }
}
