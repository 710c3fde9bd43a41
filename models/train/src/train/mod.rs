//! Training (Ember's own loop: Adam or SGD on a per-step schedule, a checkpoint and manifest
//! update after every epoch, a non-finite loss, SIGINT/SIGTERM and `--time-limit` stopping
//! cleanly, resume) and evaluation of saved models.
//!
//! Laid out as burn-train is: this file holds the options ([`TrainOptions`]) and the entry
//! ([`train`]: checks, data, the run directory, the replicas); `data` the loaded splits and the
//! epochs' order; `manifest` a run's start (its manifest checked against the options, the
//! per-layer choices, the restored model and optimizer); `start` what a run starts from (source
//! runs, PyTorch weights) and the model shape they imply; `fit` the epoch loop with its pruning
//! hooks, checkpoints and the final export; `follower` the replicas after the first of a
//! process, which run the same epochs and write nothing (with the exchange itself in
//! [`crate::scale`], which knows nothing of training); `eval` the evaluation of saved models
//! ([`eval`]).

mod data;
mod eval;
mod fit;
mod follower;
mod manifest;
mod optim;
mod start;

use crate::backend::{BackendJob, BackendKind, TrainBackend};
use crate::error::{EmberError, Result};
pub use crate::optimizer::{OptimizerKind, OptimizerSettings, Schedule};
use crate::policy::{LayerPolicy, contraction_layers, tag_layers};
use crate::record;
use crate::report;
use crate::run::{self, Manifest, OnExisting};
use crate::scale::{self, Replica, Scale};
use crate::technique::{self, Technique};
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::{Dataset, InMemDataset};
use burn_approx_mul::Multiplier;
use burn_sparse_act::Policy;
use data::{Fallible, Splits};
use ember_models::act::Activation;
use ember_models::classifier::{ModelKind, ModelVisitor, TrainableClassifier};
use ember_models::data::cifar::CifarBatcher;
use ember_models::data::folder::FolderBatcher;
use ember_models::data::mnist::MnistBatcher;
use ember_models::data::sequence::SequenceBatcher;
use ember_models::data::{Batch, DataSource};
use ember_models::shape::Shape;
pub use eval::{EvalOptions, eval};
use fit::{Fit, Layers, fit};
use follower::{Follower, join, shared_settings};
use manifest::{layer_setup, restore, resumed, start_manifest};
use start::Start;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What training does when a batch's loss is NaN or infinite.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnNan {
    /// End the run with an error naming the epoch and batch; the last completed epoch's
    /// checkpoint stays, and the run resumes from it.
    #[default]
    Stop,
    /// Go on (the epoch's metrics become non-finite; plots show them as gaps).
    Continue,
}

ember_models::choices!(OnNan {
    Stop => "stop",
    Continue => "continue",
});

/// Everything `ember train` needs.
#[derive(Clone, Debug)]
pub struct TrainOptions {
    /// Model to train.
    pub model: ModelKind,
    /// Its activation (`--act`: ReLU, or PReLU(channels) on the LeNets and the ResNets).
    pub act: Activation,
    /// Backend to train on.
    pub backend: BackendKind,
    /// Multiplier of every contraction, forward and backward.
    pub multiplier: Multiplier,
    /// SparseAct pruning of the inputs linear layers keep for backward (`Policy::default()`:
    /// off).
    pub sparse_act: Policy,
    /// Per-layer multipliers and pruning by module path (`--policy`); layers it does not set
    /// run `multiplier` and `sparse_act`.
    pub policy: Option<LayerPolicy>,
    /// Energy figures for the effects report (`--energy`).
    pub energy: Option<PathBuf>,
    /// Total number of epochs.
    pub epochs: usize,
    /// Batch size.
    pub batch_size: usize,
    /// Learning rate (the schedule's peak).
    pub lr: f64,
    /// The optimizer and the learning rate's schedule (`--optimizer`, `--momentum`,
    /// `--weight-decay`, `--schedule`, `--warmup-epochs`).
    pub optimizer: OptimizerSettings,
    /// Seconds this invocation may take (`--time-limit`): before an epoch that would end past
    /// it, by the longest epoch so far, training stops with [`EmberError::TimeLimit`], its
    /// last completed epoch kept for `--resume`.
    pub time_limit: Option<f64>,
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
    /// What a non-finite loss does.
    pub on_nan: OnNan,
    /// The most frames a sequence of the data may have (a longer one is an error naming it).
    pub max_frames: usize,
    /// How many epochs' checkpoints to keep (`checkpoint/*-<epoch>.*`): the last `n` (at least
    /// 1: `--resume` continues from the last), or every one (`None`).
    pub keep_checkpoints: Option<usize>,
    /// HiNM fine-tuning (`--hinm LEVEL --from RUN`): start from the run's weights under the
    /// masks searched on them, re-apply the masks after every optimizer step (gradients of
    /// pruned weights masked too), and write the packed `model.hinm` at the end.
    pub hinm: Option<crate::hinm::HinmTune>,
    /// Fine-tuning from PyTorch weights (`--from FILE.pth|.safetensors`): the model is built at
    /// their shape and loaded ([`ember_models::pretrained`]); a head of other classes than the
    /// dataset's is replaced by a fresh one.
    pub pretrained: Option<PathBuf>,
    /// The model's shape when not its kind's own ([`ModelKind::own_shape`]): a ResNet's
    /// width, a DeiT's sizes. Set by [`train`] from what the run starts from (`pretrained`'s
    /// weights, a source run, the run resumed); one given here must agree with it.
    pub shape: Option<Shape>,
    /// BCR pruning (`--bcr LEVEL [--admm]`): ADMM training then hard pruning and masked
    /// retraining, or one-shot masks and masked training; the packed `model.bcr` at the end
    /// ([`crate::bcr`]).
    pub bcr: Option<crate::bcr::BcrTrain>,
    /// Set (by a signal handler, or another thread) to end training before the next batch;
    /// the run keeps its last completed epoch and resumes from it.
    pub interrupt: Option<Arc<AtomicBool>>,
    /// Data parallelism: replicas on several devices (`--devices`) and processes (`--ddp`);
    /// `batch_size` is per replica ([`crate::scale`]).
    pub scale: Scale,
}

/// How many epochs' checkpoints a run keeps unless told ([`TrainOptions::keep_checkpoints`]).
pub const DEFAULT_KEEP: usize = 3;

impl TrainOptions {
    /// The options of `ember train --model MODEL --out OUT` on `data` with every other flag at
    /// its default: ReLU, ndarray, the native multiplier with convolutions as GEMMs
    /// (`--conv gemm`), no SparseAct, no policy, 3 epochs of
    /// batch 32 with Adam at a constant learning rate 2e-3, no time limit, seed 42, an existing `out` refused, no limits, no
    /// pruning, one replica, the last [`DEFAULT_KEEP`] epochs' checkpoints kept, sequences of
    /// up to [`DEFAULT_MAX_FRAMES`](ember_models::data::sequence::DEFAULT_MAX_FRAMES) frames. Set the rest with struct update syntax:
    /// `TrainOptions { epochs: 10, ..TrainOptions::new(model, data, out) }`.
    pub fn new(model: ModelKind, data: DataSource, out: impl Into<PathBuf>) -> Self {
        Self {
            model,
            act: Activation::default(),
            backend: BackendKind::Ndarray,
            multiplier: Multiplier::native().with_conv(burn_approx_mul::ConvRoute::Gemm),
            sparse_act: Policy::default(),
            policy: None,
            energy: None,
            epochs: 3,
            batch_size: 32,
            lr: 2e-3,
            optimizer: OptimizerSettings::default(),
            time_limit: None,
            seed: 42,
            out: out.into(),
            data,
            on_existing: OnExisting::Refuse,
            train_limit: None,
            test_limit: None,
            plain: false,
            on_nan: OnNan::Stop,
            keep_checkpoints: Some(DEFAULT_KEEP),
            max_frames: ember_models::data::sequence::DEFAULT_MAX_FRAMES,
            hinm: None,
            pretrained: None,
            shape: None,
            bcr: None,
            interrupt: None,
            scale: Scale::default(),
        }
    }

    fn validate(&self) -> Result<()> {
        self.scale.validate()?;
        if self.pretrained.is_some() && (self.hinm.is_some() || self.bcr.is_some()) {
            return Err(EmberError::Invalid(
                "--hinm and --bcr start from an Ember run, not from PyTorch weights: fine-tune \
                 the weights first (ember train --from FILE), then start from that run"
                    .into(),
            ));
        }
        self.model
            .takes_activation(self.act)
            .map_err(EmberError::Invalid)?;
        if let Some(shape) = self.shape {
            self.model
                .check_shape(shape, self.data.spec())
                .map_err(EmberError::Invalid)?;
        }
        if self.max_frames == 0 {
            return Err(EmberError::Invalid(
                "--max-frames must be at least 1".into(),
            ));
        }
        if self.keep_checkpoints == Some(0) {
            return Err(EmberError::Invalid(
                "--keep-checkpoints 0: keep at least the last epoch's checkpoint, which --resume \
                 continues from (or \"all\")"
                    .into(),
            ));
        }
        if self.epochs == 0 {
            return Err(EmberError::Invalid("--epochs must be at least 1".into()));
        }
        if self.batch_size == 0 {
            return Err(EmberError::Invalid(
                "--batch-size must be at least 1".into(),
            ));
        }
        for (name, limit) in [
            ("--train-limit", self.train_limit),
            ("--test-limit", self.test_limit),
        ] {
            if limit == Some(0) {
                return Err(EmberError::Invalid(format!("{name} must be at least 1")));
            }
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(EmberError::Invalid(format!(
                "--lr must be a positive number, got {}",
                self.lr
            )));
        }
        // The optimizer scales f32 tensors by it: outside f32's normal range it is 0 (nothing
        // trains) or infinite.
        let range = f64::from(f32::MIN_POSITIVE)..=f64::from(f32::MAX);
        if !range.contains(&self.lr) {
            return Err(EmberError::Invalid(format!(
                "--lr {:e} is outside what an f32 holds ({:e} to {:e}): the updates would be 0 \
                 or infinite",
                self.lr,
                f32::MIN_POSITIVE,
                f32::MAX
            )));
        }
        self.optimizer.validate(self.epochs)?;
        if let Some(limit) = self.time_limit {
            if !(limit.is_finite() && limit > 0.0) {
                return Err(EmberError::Invalid(format!(
                    "--time-limit must be a positive number of seconds, got {limit}"
                )));
            }
            if self.scale.devices > 1 || self.scale.mpi {
                return Err(EmberError::Invalid(
                    "--time-limit stops a single-replica run; a data-parallel run (--devices,                      --ddp) stops with SIGINT/SIGTERM and resumes the same way"
                        .into(),
                ));
            }
        }
        if let Some(b) = &self.bcr {
            if self.hinm.is_some() {
                return Err(EmberError::Invalid(
                    "--bcr and --hinm prune the same weights: choose one".into(),
                ));
            }
            b.validate(self.epochs)?;
        }
        self.model
            .accepts(self.data.spec())
            .map_err(|why| EmberError::Invalid(format!("--dataset {}: {why}", self.data.kind())))
    }

    fn interrupted(&self) -> bool {
        self.interrupt
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::SeqCst))
    }
}

/// What a training run produced.
#[derive(Clone, Debug)]
pub struct TrainReport {
    /// The run directory.
    pub out: PathBuf,
    /// Metrics of every epoch of the run (including epochs before a resume; empty on an MPI
    /// rank other than 0).
    pub epochs: Vec<report::EpochMetrics>,
    /// Final evaluation on the test split (`None` on an MPI rank other than 0: rank 0
    /// evaluates and writes the run).
    pub test: Option<EvalReport>,
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
pub fn train(mut opts: TrainOptions) -> Result<TrainReport> {
    let started = std::time::Instant::now();
    opts.validate()?;
    // Before the data: a missing driver is one line, whatever else is wrong.
    opts.backend.check_available()?;
    // Load data first: a bad dataset must not leave a half-made run directory behind.
    let splits = Splits::load(
        &opts.data,
        true,
        opts.train_limit,
        opts.test_limit,
        opts.max_frames,
    )?;
    let start = start::start(&mut opts)?;
    // The MPI job is joined before the run directory is touched.
    scale::connect(&mut opts.scale)?;
    opts.backend.dispatch_on(
        opts.scale.devices,
        opts.scale.job.map_or(0, |j| j.local_rank),
        opts.multiplier.clone(),
        opts.sparse_act.clone(),
        TrainJob {
            opts,
            splits,
            start,
            started,
        },
    )
}

struct TrainJob {
    opts: TrainOptions,
    splits: Splits,
    start: Start,
    started: std::time::Instant,
}

impl BackendJob for TrainJob {
    type Output = TrainReport;
    fn run<B: TrainBackend>(self, device: B::Device) -> Result<TrainReport> {
        self.run_on::<B>(vec![device])
    }

    fn run_on<B: TrainBackend>(mut self, devices: Vec<B::Device>) -> Result<TrainReport> {
        let device = devices[0].clone();
        // Seeded before the model is built: the seed fixes its initialisation.
        B::seed(&device, self.opts.seed);
        let (kind, act, spec) = (self.opts.model, self.opts.act, self.opts.data.spec());
        match self.start.weights.take() {
            Some(dict) => {
                let head = ember_models::pretrained::Head::Replace;
                let visit = TrainVisit { job: self, devices };
                kind.build_pretrained::<B, _>(&dict, head, act, spec, &device, visit)?
            }
            None => {
                let shape = self.opts.shape;
                let visit = TrainVisit { job: self, devices };
                kind.build_shaped::<B, _>(shape, act, spec, &device, visit)?
            }
        }
    }
}

/// Trains the model [`ModelKind::build`] made.
struct TrainVisit<B: TrainBackend> {
    job: TrainJob,
    devices: Vec<B::Device>,
}

impl<B: TrainBackend> ModelVisitor<B> for TrainVisit<B> {
    type Output = Result<TrainReport>;
    fn visit<M: TrainableClassifier<B>>(self, model: M) -> Result<TrainReport> {
        train_on::<B, M>(self.job, self.devices, model)
    }
}

/// The batchers of a dataset: training (by epoch: augmentation is seeded by the run's seed and
/// the epoch, so a resumed run augments as an uninterrupted one would; shared with the
/// replica threads of a parallel run) and validation.
pub(crate) struct Batchers<T, V> {
    pub(crate) train: Arc<dyn Fn(usize) -> T + Send + Sync>,
    pub(crate) valid: V,
}

fn train_on<B: TrainBackend, M: TrainableClassifier<B>>(
    job: TrainJob,
    devices: Vec<B::Device>,
    model: M,
) -> Result<TrainReport> {
    let seed = job.opts.seed;
    let (start, started) = (job.start, job.started);
    // each dataset's splits with its batchers (training: by epoch, for seeded augmentation)
    macro_rules! fit_on {
        ($train:expr, $test:expr, $train_batcher:expr, $valid:expr) => {
            train_model::<B, M, _, _, _>(
                job.opts,
                start,
                started,
                devices,
                model,
                $train.expect("training split loaded").dataset(),
                $test.dataset(),
                Batchers {
                    train: Arc::new($train_batcher),
                    valid: $valid,
                },
            )
        };
    }
    match job.splits {
        Splits::Mnist(train, test) => fit_on!(train, test, |_| MnistBatcher, MnistBatcher),
        Splits::Cifar10(train, test) => fit_on!(
            train,
            test,
            move |epoch| CifarBatcher::augmented(seed.wrapping_add(epoch as u64)),
            CifarBatcher::plain()
        ),
        Splits::Sequences(train, test, features) => fit_on!(
            train,
            test,
            move |_| SequenceBatcher { features },
            SequenceBatcher { features }
        ),
        Splits::Folder(train, test) => fit_on!(
            train,
            test,
            move |epoch| FolderBatcher::augmented(seed.wrapping_add(epoch as u64)),
            FolderBatcher::new()
        ),
    }
}

/// The techniques of a run, in [`technique::REGISTRY`]'s order: ApproxMul's and SparseAct's
/// settings (their work is on the device), HiNM fine-tuning, BCR with its plan of the model's
/// layers. What each needs of the model is checked here, before the run directory is touched.
fn techniques<B: TrainBackend, M: TrainableClassifier<B>>(
    opts: &TrainOptions,
    start: Start,
    model: &M,
) -> Result<Vec<Box<dyn Technique<B, M>>>> {
    let mut all: Vec<Box<dyn Technique<B, M>>> = vec![
        Box::new(opts.multiplier.clone()),
        Box::new(opts.sparse_act.clone()),
    ];
    if let Some(hinm) = start.hinm {
        all.push(Box::new(hinm));
    }
    if let Some(b) = &opts.bcr {
        let shapes = ember_models::params::float_shapes(model);
        let layers = contraction_layers(&shapes);
        let (plan, notes) = crate::bcr::plan(
            &shapes.into_iter().collect(),
            &layers,
            opts.policy.as_ref(),
            b.level,
        )?;
        for note in notes {
            eprintln!("--bcr: {note}");
        }
        all.push(Box::new(crate::bcr::BcrRun::new(
            b.clone(),
            opts.model,
            opts.epochs,
            plan,
            start.bcr_source,
        )));
    }
    Ok(all)
}

#[allow(clippy::too_many_arguments)]
fn train_model<B, M, I, T, V>(
    opts: TrainOptions,
    start: Start,
    started: std::time::Instant,
    devices: Vec<B::Device>,
    model: M,
    train_split: InMemDataset<I>,
    test_split: InMemDataset<I>,
    batchers: Batchers<T, V>,
) -> Result<TrainReport>
where
    B: TrainBackend,
    M: TrainableClassifier<B>,
    I: Clone + Send + Sync + core::fmt::Debug + 'static,
    T: Batcher<B, I, Batch<B>> + Fallible + 'static,
    V: Batcher<B::InnerBackend, I, Batch<B::InnerBackend>> + Fallible,
{
    let device = devices[0].clone();
    let train_split = Arc::new(train_split);
    // Everything that can be refused is checked before the run directory is touched.
    let (train_len, test_len) = (train_split.len(), test_split.len());
    if opts.batch_size > train_len {
        return Err(EmberError::Invalid(format!(
            "--batch-size {} is larger than the {train_len} training {}",
            opts.batch_size,
            opts.data.spec().noun()
        )));
    }
    for warning in opts
        .sparse_act
        .check_layers(&ember_models::params::linear_layers(&model))
        .map_err(|e| EmberError::Invalid(e.to_string()))?
    {
        eprintln!("warning: --sparse-act: {warning}");
    }
    let (choices, energy) = layer_setup(
        &model,
        opts.policy.as_ref(),
        &opts.multiplier,
        opts.energy.as_deref(),
    )?;
    crate::policy::check_levels_apply(
        &choices,
        opts.hinm.is_some(),
        opts.bcr.is_some(),
        opts.policy.as_ref(),
    )?;
    let mut techniques = techniques::<B, M>(&opts, start, &model)?;
    let out = opts.out.clone();
    let existed = out.exists();
    // Only rank 0 of an MPI job writes the run directory; the other ranks read it (what a
    // --resume continues from) before rank 0 may change it.
    let writes = opts.scale.writes();
    // One process writes a run directory at a time: held until this function returns.
    let _lock = match writes {
        true => run::lock(&out, opts.on_existing)?,
        false => None,
    };
    let previous = match writes {
        true => {
            scale::barrier(&opts.scale);
            run::prepare(&out, opts.model, opts.on_existing)?
        }
        false => {
            let previous = run::inspect(&out, opts.model, opts.on_existing)?;
            scale::barrier(&opts.scale);
            previous
        }
    };
    let fresh = writes && previous.is_none();
    let result = (|| {
        let settings = technique::settings(&techniques);
        let mut manifest = start_manifest(&opts, &choices, &settings, previous)?;
        let (mut model, optim) = restore::<B, M>(&out, &manifest, model, &device)?;
        if manifest.completed_epochs == 0 {
            for (file, checksum) in techniques.iter().filter_map(|t| t.source()) {
                model = record::load_checked(&file, checksum, model, opts.model, &device)?;
            }
        }
        // A loaded record brings untagged weights: tag after restoring. Tagging also
        // initialises Burn's lazy parameters, from the seed the model was built under.
        let mut model = tag_layers::<B, M>(model, &choices);
        for t in &mut techniques {
            let state = resumed(&out, &manifest, t.registration())?;
            model = t.start(model, state)?;
        }
        if writes {
            manifest.write(&out)?;
        }
        let replicas = Replica::local_replicas(&opts.scale, opts.interrupt.clone());
        let settings = shared_settings(&opts, &manifest, &settings, train_len, test_len);
        if !writes {
            // an MPI rank other than 0: trains in step and writes nothing
            Follower {
                opts: opts.clone(),
                replica: replicas[0].clone(),
                settings,
                device: device.clone(),
                model,
                optim: optim.to_record(),
                techniques,
                first: manifest.completed_epochs + 1,
                train: train_split.clone(),
                batcher: batchers.train.clone(),
            }
            .run()?;
            return Ok(None);
        }
        for (replica, device) in replicas.iter().zip(&devices).skip(1) {
            let follower = Follower {
                opts: opts.clone(),
                replica: replica.clone(),
                settings: settings.clone(),
                device: device.clone(),
                model: model.clone().fork(device),
                optim: optim.to_record(),
                techniques: techniques.iter().map(|t| t.boxed()).collect(),
                first: manifest.completed_epochs + 1,
                train: train_split.clone(),
                batcher: batchers.train.clone(),
            };
            let replica = replica.clone();
            std::thread::Builder::new()
                .name(format!("ember-replica-{}", replica.local()))
                .spawn(move || {
                    let local = replica.local();
                    let outcome =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| follower.run()));
                    match outcome {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => replica.fail(format!("replica {local}: {e}")),
                        Err(_) => replica.fail(format!("replica {local} panicked")),
                    }
                })
                .map_err(|e| EmberError::Collective(format!("cannot start a replica: {e}")))?;
        }
        let replica = &replicas[0];
        replica.fresh_run((manifest.completed_epochs == 0 && fresh).then_some((&out, !existed)));
        join::<B, M>(replica, &opts.scale, &settings, &model, &device)?;
        // A panic of the runtime in a step (an allocation the device cannot make at this
        // batch, a failed launch) ends the run as an error naming the batch, not a panic.
        let batch = opts.batch_size;
        record::catch(|| {
            fit(
                &opts,
                &mut manifest,
                &device,
                replica,
                Fit {
                    model,
                    optim,
                    train: &train_split,
                    test: &test_split,
                    batchers: &batchers,
                    started,
                },
                &Layers {
                    choices: &choices,
                    energy: energy.as_ref(),
                },
                &mut techniques,
            )
        })
        .map_err(|c| {
            let message = c.message.unwrap_or_default();
            EmberError::device_failure(batch, &message, c.location.as_deref())
        })
        .and_then(|fitted| fitted)
        .map(|test| Some((manifest, test)))
    })();
    match result {
        Ok(Some((manifest, test))) => Ok(TrainReport {
            out,
            epochs: manifest.history,
            test: Some(test),
        }),
        Ok(None) => Ok(TrainReport {
            out,
            epochs: Vec::new(),
            test: None,
        }),
        Err(e) => {
            // A new run that did not complete an epoch leaves nothing behind (its directory
            // would only block the same --out).
            let completed = Manifest::read_if_present(&out)
                .ok()
                .flatten()
                .map_or(0, |m| m.completed_epochs);
            if fresh && completed == 0 {
                let _ = run::clear(&out);
                if !existed {
                    let _ = std::fs::remove_dir(&out);
                }
            }
            eprintln!(
                "({train_len} training / {test_len} test {}; run directory {})",
                opts.data.spec().noun(),
                out.display()
            );
            Err(e)
        }
    }
}
