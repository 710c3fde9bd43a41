//! Training (Ember's own loop: Adam, a checkpoint and manifest update after every epoch, a
//! non-finite loss and SIGINT/SIGTERM stopping cleanly between batches, resume) and
//! evaluation of saved models.

use crate::backend::{BackendJob, BackendKind, TrainBackend};
use crate::effects::{EffectsReport, EnergyTable, report as effects_report};
use crate::error::{EmberError, Result};
use crate::policy::{LayerChoice, LayerPolicy, contraction_layers, tag_layers};
use crate::progress::{Progress, Running};
use crate::record;
use crate::report;
use crate::run::{self, Manifest, OnExisting};
use crate::scale::{self, Replica, Scale};
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::{Dataset, InMemDataset};
use burn::optim::{AdamConfig, Optimizer};
use burn::prelude::*;
use burn::train::ClassificationOutput;
use burn_approx_mul::Multiplier;
use burn_hinm::gyro::Method;
use burn_sparse_act::Policy;
use cubecl_kernels::decorator::effects;
use ember_models::act::Activation;
use ember_models::classifier::{Classifier, ModelKind, ModelVisitor, TrainableClassifier};
use ember_models::data::cifar::{self, CifarBatcher};
use ember_models::data::mnist::{self, MnistBatcher};
use ember_models::data::sequence::{self, SequenceBatcher, SequenceSplit};
use ember_models::data::{Batch, DataSource, DataSpec, DatasetKind};
use std::path::{Path, PathBuf};
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
    /// What a non-finite loss does.
    pub on_nan: OnNan,
    /// HiNM fine-tuning (`--hinm LEVEL --from RUN`): start from the run's weights under the
    /// masks searched on them, re-apply the masks after every optimizer step (gradients of
    /// pruned weights masked too), and write the packed `model.hinm` at the end.
    pub hinm: Option<crate::hinm::HinmTune>,
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

impl TrainOptions {
    fn validate(&self) -> Result<()> {
        self.scale.validate()?;
        self.model
            .takes_activation(self.act)
            .map_err(EmberError::Invalid)?;
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
    opts.validate()?;
    // Before the data: a missing driver is one line, whatever else is wrong.
    opts.backend.check_available()?;
    // Load data first: a bad dataset must not leave a half-made run directory behind.
    let splits = Splits::load(&opts.data, true, opts.train_limit, opts.test_limit)?;
    // The masks before the run directory: a level the model cannot take writes nothing.
    let tuning = opts
        .hinm
        .as_ref()
        .map(|t| crate::hinm::tuning(t, opts.model, opts.policy.as_ref(), opts.seed))
        .transpose()?;
    let bcr_source = opts
        .bcr
        .as_ref()
        .and_then(|b| b.from.as_ref())
        .map(|from| source_run(from, opts.model))
        .transpose()?;
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
            tuning,
            bcr_source,
        },
    )
}

/// The model file of a trained run (`--from`) and its recorded checksum; the run must hold a
/// `model` model.
fn source_run(from: &Path, model: ModelKind) -> Result<(PathBuf, Option<u32>)> {
    let (file, manifest, checksum) = run::resolve_checkpoint(from)?;
    if let Some(m) = &manifest
        && m.model != model
    {
        return Err(EmberError::BadCheckpoint {
            path: from.to_path_buf(),
            reason: format!("it holds a {} model, not {model}", m.model),
        });
    }
    Ok((file, checksum))
}

/// The loaded splits of a dataset: training (when asked for) and test.
enum Splits {
    Mnist(Option<mnist::MnistSplit>, mnist::MnistSplit),
    Cifar10(Option<cifar::CifarSplit>, cifar::CifarSplit),
    /// FSDD or Japanese Vowels, with the values per frame.
    Sequences(Option<SequenceSplit>, SequenceSplit, usize),
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
                    "{source} has no training or no test {}",
                    source.spec().noun()
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
            DataSource::Fsdd(_) | DataSource::JapaneseVowels(_) => {
                let (train, test) = match source {
                    DataSource::Fsdd(archive) => sequence::load_fsdd(archive)?,
                    DataSource::JapaneseVowels(dir) => sequence::load_japanese_vowels(dir)?,
                    _ => unreachable!("matched above"),
                };
                let train = with_train.then(|| train.truncate(train_limit.unwrap_or(usize::MAX)));
                let test = test.truncate(test_limit.unwrap_or(usize::MAX));
                empty(train.as_ref().map_or(0, |s| s.len()), test.len())?;
                let DataSpec::Sequences { features, .. } = source.spec() else {
                    unreachable!("a sequence dataset")
                };
                Self::Sequences(train, test, features)
            }
        })
    }
}

struct TrainJob {
    opts: TrainOptions,
    splits: Splits,
    tuning: Option<crate::hinm::Tuning>,
    /// The model file `--bcr --from` starts from, and its checksum.
    bcr_source: Option<(PathBuf, Option<u32>)>,
}

impl BackendJob for TrainJob {
    type Output = TrainReport;
    fn run<B: TrainBackend>(self, device: B::Device) -> Result<TrainReport> {
        self.run_on::<B>(vec![device])
    }

    fn run_on<B: TrainBackend>(self, devices: Vec<B::Device>) -> Result<TrainReport> {
        let device = devices[0].clone();
        // Seeded before the model is built: the seed fixes its initialisation.
        B::seed(&device, self.opts.seed);
        let (kind, act, spec) = (self.opts.model, self.opts.act, self.opts.data.spec());
        kind.build_with::<B, _>(act, spec, &device, TrainVisit { job: self, devices })?
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
struct Batchers<T, V> {
    train: Arc<dyn Fn(usize) -> T + Send + Sync>,
    valid: V,
}

fn train_on<B: TrainBackend, M: TrainableClassifier<B>>(
    job: TrainJob,
    devices: Vec<B::Device>,
    model: M,
) -> Result<TrainReport> {
    let seed = job.opts.seed;
    let tuning = Start {
        hinm: job.tuning,
        bcr_source: job.bcr_source,
    };
    match job.splits {
        Splits::Mnist(train, test) => train_model::<B, M, _, _, _>(
            job.opts,
            tuning,
            devices.clone(),
            model,
            train.expect("training split loaded").dataset(),
            test.dataset(),
            Batchers {
                train: Arc::new(|_| MnistBatcher),
                valid: MnistBatcher,
            },
        ),
        Splits::Cifar10(train, test) => train_model::<B, M, _, _, _>(
            job.opts,
            tuning,
            devices.clone(),
            model,
            train.expect("training split loaded").dataset(),
            test.dataset(),
            Batchers {
                train: Arc::new(move |epoch| {
                    CifarBatcher::augmented(seed.wrapping_add(epoch as u64))
                }),
                valid: CifarBatcher::plain(),
            },
        ),
        Splits::Sequences(train, test, features) => train_model::<B, M, _, _, _>(
            job.opts,
            tuning,
            devices.clone(),
            model,
            train.expect("training split loaded").dataset(),
            test.dataset(),
            Batchers {
                train: Arc::new(move |_| SequenceBatcher { features }),
                valid: SequenceBatcher { features },
            },
        ),
    }
}

/// Where a pruning run's weights start: HiNM's fine-tuning masks, BCR's source run.
struct Start {
    hinm: Option<crate::hinm::Tuning>,
    bcr_source: Option<(PathBuf, Option<u32>)>,
}

fn train_model<B, M, I, T, V>(
    opts: TrainOptions,
    start: Start,
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
    T: Batcher<B, I, Batch<B>> + 'static,
    V: Batcher<B::InnerBackend, I, Batch<B::InnerBackend>>,
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
    let tuning = start.hinm;
    let bcr_plan = opts
        .bcr
        .as_ref()
        .map(|b| {
            let shapes = ember_models::params::float_shapes(&model);
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
            Ok::<_, EmberError>(plan)
        })
        .transpose()?;
    let out = opts.out.clone();
    let existed = out.exists();
    // Only rank 0 of an MPI job writes the run directory; the other ranks read it (what a
    // --resume continues from) before rank 0 may change it.
    let writes = opts.scale.writes();
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
        let mut manifest = start_manifest(&opts, &choices, previous)?;
        let (mut model, optim) = restore::<B, M>(&out, &manifest, model, &device)?;
        if let Some(t) = &tuning
            && manifest.completed_epochs == 0
        {
            model = record::load_checked(&t.file, t.checksum, model, opts.model, &device)?;
        }
        if let Some((file, checksum)) = &start.bcr_source
            && manifest.completed_epochs == 0
        {
            model = record::load_checked(file, *checksum, model, opts.model, &device)?;
        }
        // A loaded record brings untagged weights: tag after restoring. Tagging also
        // initialises Burn's lazy parameters, from the seed the model was built under.
        let model = tag_layers::<B, M>(model, &choices);
        let bcr = match (&opts.bcr, &bcr_plan) {
            (Some(b), Some(plan)) => Some(bcr_state(&opts, b, plan, &manifest, &model)?),
            _ => None,
        };
        let mut masks = match (&tuning, &bcr) {
            (Some(t), _) => t.masks.clone(),
            (None, Some(state)) => state.masks(),
            (None, None) => Default::default(),
        };
        let model = crate::hinm::apply_masks(model, &masks);
        if writes {
            manifest.write(&out)?;
        }
        let replicas = Replica::local_replicas(&opts.scale, opts.interrupt.clone());
        let settings = shared_settings(&opts, &manifest, train_len, test_len);
        if !writes {
            // an MPI rank other than 0: trains in step and writes nothing
            Follower {
                opts: opts.clone(),
                replica: replicas[0].clone(),
                settings,
                device: device.clone(),
                model,
                optim: optim.to_record(),
                masks,
                bcr,
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
                masks: masks.clone(),
                bcr: bcr.clone(),
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
            },
            &Layers {
                choices: &choices,
                energy: energy.as_ref(),
                tuning: tuning.as_ref(),
            },
            Pruning {
                masks: &mut masks,
                bcr,
            },
        )
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

/// The BCR state of this attempt: from the model's weights for a new run (ADMM's `Z = Π(W)` or
/// the one-shot masks), from the checkpoint of the last completed epoch for a resumed one.
fn bcr_state<B: Backend, M: Module<B>>(
    opts: &TrainOptions,
    b: &crate::bcr::BcrTrain,
    plan: &[crate::bcr::Pruned],
    manifest: &Manifest,
    model: &M,
) -> Result<crate::bcr::BcrState> {
    let epoch = manifest.completed_epochs;
    if epoch == 0 {
        let params = burn_hinm::module::params(model);
        return crate::bcr::BcrState::start(b, opts.epochs, plan, &params);
    }
    let file = run::bcr_state_file(&opts.out, epoch);
    let bad = |reason: String| EmberError::BadCheckpoint {
        path: file.clone(),
        reason,
    };
    let bytes = std::fs::read(&file).map_err(|e| bad(format!("cannot read it: {e}")))?;
    if let Some(expected) = manifest.checksum(&opts.out, &file) {
        let actual = record::checksum(&bytes);
        if actual != expected {
            return Err(bad(format!(
                "it is corrupt: its CRC-32 is {actual:08x}, the run recorded {expected:08x}"
            )));
        }
    }
    crate::bcr::BcrState::from_bytes(&bytes, b, opts.epochs, plan).map_err(bad)
}

/// The manifest of this attempt: a new one, or the previous one checked against the options
/// (every setting that shapes training must be the one the run was started with; only
/// `--epochs` may grow).
fn start_manifest(
    opts: &TrainOptions,
    choices: &[LayerChoice],
    previous: Option<Manifest>,
) -> Result<Manifest> {
    let dataset = opts.data.kind();
    let Some(prev) = previous else {
        return Ok(Manifest {
            version: run::MANIFEST_VERSION,
            model: opts.model,
            act: opts.act,
            backend: opts.backend,
            multiplier: opts.multiplier.name().to_string(),
            conv: Some(opts.multiplier.conv().to_string()),
            sparse_act: opts.sparse_act.clone(),
            epochs: opts.epochs,
            batch_size: opts.batch_size,
            lr: opts.lr,
            seed: opts.seed,
            dataset,
            data: opts.data.to_string(),
            train_limit: opts.train_limit,
            test_limit: opts.test_limit,
            policy: policy_lines(choices, opts.policy.is_some()),
            hinm: opts.hinm.as_ref().map(|h| h.describe()),
            bcr: opts.bcr.as_ref().map(|b| b.describe()),
            replicas: opts.scale.replicas(),
            completed_epochs: 0,
            epoch_seconds: Vec::new(),
            history: Vec::new(),
            test_accuracy: None,
            test_loss: None,
            tested_epoch: None,
            files: Default::default(),
        });
    };
    let refuse = |reason: String| EmberError::CannotResume {
        path: opts.out.clone(),
        reason,
    };
    let differs = |what: &str, was: String, now: String| {
        (was != now).then(|| {
            refuse(format!(
                "it was started with {what} {was}, not {now} (a resumed run keeps every \
                 setting; only --epochs may grow)"
            ))
        })
    };
    let limit = |l: Option<usize>| l.map_or("(all)".to_string(), |n| n.to_string());
    let mut checks = vec![
        differs(
            "--multiplier",
            prev.multiplier.clone(),
            opts.multiplier.name().to_string(),
        ),
        differs("--dataset", prev.dataset.to_string(), dataset.to_string()),
        differs(
            "--sparse-act",
            prev.sparse_act.to_string(),
            opts.sparse_act.to_string(),
        ),
        differs(
            "--backend",
            prev.backend.to_string(),
            opts.backend.to_string(),
        ),
        differs("--lr", prev.lr.to_string(), opts.lr.to_string()),
        differs(
            "--batch-size",
            prev.batch_size.to_string(),
            opts.batch_size.to_string(),
        ),
        differs("--seed", prev.seed.to_string(), opts.seed.to_string()),
        differs("--act", prev.act.to_string(), opts.act.to_string()),
        differs(
            "--hinm",
            prev.hinm.clone().unwrap_or_else(|| "off".into()),
            opts.hinm.as_ref().map_or("off".into(), |h| h.describe()),
        ),
        differs(
            "--bcr",
            prev.bcr.clone().unwrap_or_else(|| "off".into()),
            opts.bcr.as_ref().map_or("off".into(), |b| b.describe()),
        ),
        differs("data", prev.data.clone(), opts.data.to_string()),
        differs(
            "replicas (--devices × --world)",
            prev.replicas.to_string(),
            opts.scale.replicas().to_string(),
        ),
    ];
    // Runs before `--conv` ran Burn's kernels and did not record it.
    checks.push(differs(
        "--conv",
        prev.conv.clone().unwrap_or_else(|| "burn".into()),
        opts.multiplier.conv().to_string(),
    ));
    // Version 3 records the limits; older manifests did not.
    if prev.version >= 3 {
        checks.push(differs(
            "--train-limit",
            limit(prev.train_limit),
            limit(opts.train_limit),
        ));
        checks.push(differs(
            "--test-limit",
            limit(prev.test_limit),
            limit(opts.test_limit),
        ));
    }
    let policy = policy_lines(choices, opts.policy.is_some());
    if prev.policy != policy {
        let show = |p: &Option<Vec<String>>| match p {
            None => "no --policy".to_string(),
            Some(lines) => format!("--policy [{}]", lines.join("; ")),
        };
        checks.push(Some(refuse(format!(
            "it was started with {}, not {} (a resumed run keeps every setting; only --epochs \
             may grow)",
            show(&prev.policy),
            show(&policy)
        ))));
    }
    if let Some(refusal) = checks.into_iter().flatten().next() {
        return Err(refusal);
    }
    if prev.completed_epochs >= opts.epochs {
        return Err(refuse(format!(
            "it has already completed {} epochs; pass --epochs larger than that",
            prev.completed_epochs
        )));
    }
    Ok(Manifest {
        version: run::MANIFEST_VERSION,
        epochs: opts.epochs,
        train_limit: opts.train_limit,
        test_limit: opts.test_limit,
        ..prev
    })
}

/// What a manifest records of a resolved policy: one line per layer, `None` without `--policy`.
fn policy_lines(choices: &[LayerChoice], given: bool) -> Option<Vec<String>> {
    given.then(|| choices.iter().map(|c| c.to_string()).collect())
}

/// The resolved per-layer choices of `model` under `policy` (every layer with the run's own
/// settings without one), and the energy table when `energy` names a file: both checked
/// before anything runs.
fn layer_setup<B: Backend, M: Module<B>>(
    model: &M,
    policy: Option<&LayerPolicy>,
    multiplier: &Multiplier,
    energy: Option<&Path>,
) -> Result<(Vec<LayerChoice>, Option<EnergyTable>)> {
    let layers = contraction_layers(&ember_models::params::float_shapes(model));
    let choices = match policy {
        None => crate::policy::uniform(&layers),
        Some(p) => p.resolve(&layers)?,
    };
    let energy = energy
        .map(|path| {
            let mut needed: Vec<String> = choices
                .iter()
                .filter_map(|c| c.multiplier.as_ref().map(|m| m.name().to_string()))
                .collect();
            needed.push(multiplier.name().to_string());
            needed.sort();
            EnergyTable::read(path, &needed)
        })
        .transpose()?;
    Ok((choices, energy))
}

/// Prints the effects table and, with `dir`, writes `effects.json` / `effects.md` there.
fn report_effects(report: &EffectsReport, dir: Option<&Path>) -> Result<()> {
    eprintln!("\nWhat each layer ran:\n{}", report.markdown());
    match dir {
        Some(dir) => report.write(dir),
        None => Ok(()),
    }
}

/// The model and optimizer to train: fresh, or loaded from the checkpoint of the last
/// completed epoch (checked before anything in the run changes).
fn restore<B: TrainBackend, M: TrainableClassifier<B>>(
    out: &Path,
    manifest: &Manifest,
    model: M,
    device: &B::Device,
) -> Result<(M, Optim<B, M>)> {
    let optim = AdamConfig::new().init::<B, M>();
    let epoch = manifest.completed_epochs;
    if epoch == 0 {
        return Ok((model, optim));
    }
    let model = load_model(
        &run::checkpoint_file(out, "model", epoch),
        manifest,
        model,
        manifest.model,
        device,
    )?;
    let file = run::checkpoint_file(out, "optim", epoch);
    let record =
        record::load::<B, _>(&file, manifest.checksum(out, &file), device).map_err(|reason| {
            EmberError::BadCheckpoint {
                path: file.clone(),
                reason,
            }
        })?;
    Ok((model, optim.load_record(record)))
}

/// Loads `file` into `model`, refusing a record of another shape (naming the first parameter
/// that differs) or one whose checksum is not the one the manifest recorded.
fn load_model<B: Backend, M: Module<B>>(
    file: &Path,
    manifest: &Manifest,
    model: M,
    kind: ModelKind,
    device: &B::Device,
) -> Result<M> {
    let dir = run::manifest_dir(file);
    let checksum = dir.as_deref().and_then(|d| manifest.checksum(d, file));
    record::load_checked(file, checksum, model, kind, device)
}

type Optim<B, M> = burn::optim::adaptor::OptimizerAdaptor<burn::optim::Adam, M, B>;

/// What [`fit`] trains, and on what.
struct Fit<'a, B: TrainBackend, M: TrainableClassifier<B>, I, T, V> {
    model: M,
    optim: Optim<B, M>,
    train: &'a InMemDataset<I>,
    test: &'a InMemDataset<I>,
    batchers: &'a Batchers<T, V>,
}

/// The epochs after the manifest's completed ones: after each, the checkpoint, the manifest,
/// `metrics.csv` and `curves.png` are written (atomically), so a killed run resumes from it.
/// At the end, `model.mpk` and the test figures. Returns the final test evaluation.
fn fit<B, M, I, T, V>(
    opts: &TrainOptions,
    manifest: &mut Manifest,
    device: &B::Device,
    replica: &Replica,
    fit: Fit<'_, B, M, I, T, V>,
    layers: &Layers<'_>,
    mut pruning: Pruning<'_>,
) -> Result<EvalReport>
where
    B: TrainBackend,
    M: TrainableClassifier<B>,
    I: Clone + Send + Sync + 'static,
    T: Batcher<B, I, Batch<B>>,
    V: Batcher<B::InnerBackend, I, Batch<B::InnerBackend>>,
{
    let Fit {
        mut model,
        mut optim,
        train,
        test,
        batchers,
    } = fit;
    let out = &opts.out;
    let first = manifest.completed_epochs + 1;
    let replicas = match opts.scale.replicas() {
        1 => String::new(),
        n => format!(" ({n} replicas, {} items a step)", n * opts.batch_size),
    };
    eprintln!(
        "training {} on {}{replicas} with multiplier {}, sparse-act {} ({} train / {} test {} from {}) for epochs {first}..={}, into {}",
        opts.model,
        B::name(device),
        opts.multiplier,
        opts.sparse_act,
        train.len(),
        test.len(),
        opts.data.spec().noun(),
        opts.data,
        opts.epochs,
        out.display()
    );
    let mut progress = Progress::new(opts.plain, opts.epochs);
    let kept = |m: &Manifest| match m.completed_epochs {
        0 => "no epoch was completed, so nothing was kept".to_string(),
        e => format!(
            "the checkpoint of epoch {e} is kept in {}: continue with --resume",
            out.display()
        ),
    };
    let mut last_test = None;
    let mut recorded = None;
    for epoch in first..=opts.epochs {
        let clock = std::time::Instant::now();
        effects::start();
        let batcher = (batchers.train)(epoch);
        let training = std::time::Instant::now();
        let (next, sums, batches) = match train_epoch::<B, M, I, T>(
            opts,
            replica,
            epoch,
            device,
            Shard {
                model,
                optim: &mut optim,
                train,
                batcher: &batcher,
            },
            &mut pruning,
            Some(&mut progress),
        ) {
            Ok(done) => done,
            Err(stop) => {
                progress.finish();
                replica.finish::<B::InnerBackend>();
                return Err(match stop {
                    Stop::Interrupted => EmberError::Interrupted {
                        epoch,
                        kept: kept(manifest),
                    },
                    Stop::NonFinite { batch, loss } => EmberError::NonFinite {
                        epoch,
                        batch,
                        loss,
                        kept: kept(manifest),
                    },
                    Stop::Failed(e) => e,
                });
            }
        };
        model = next;
        let exchange = replica.exchange_report(training.elapsed().as_secs_f64());
        recorded = Some((effects::finish(), batches as u64, epoch));
        if pruning.bcr.as_ref().is_some_and(|s| s.in_admm()) {
            progress.finish();
        }
        for line in end_bcr_epoch(&mut model, &mut pruning, epoch)? {
            eprintln!("  bcr: {line}");
        }
        let valid = evaluate_items::<B::InnerBackend, _, I, V>(
            &model.valid(),
            test,
            &batchers.valid,
            opts.batch_size.max(256),
            device,
        );
        // A parallel run stops at the next batch, where every replica learns of it at once.
        if !replica.is_parallel() && opts.interrupted() {
            progress.finish();
            return Err(EmberError::Interrupted {
                epoch,
                kept: kept(manifest),
            });
        }
        let seconds = clock.elapsed().as_secs_f64();
        let row = report::EpochMetrics {
            epoch,
            train_loss: sums.loss(),
            train_accuracy: sums.accuracy(),
            valid_loss: valid.loss,
            valid_accuracy: valid.accuracy,
            seconds: Some(seconds),
        };
        progress.end(&row);
        if let Some(line) = exchange {
            eprintln!("  {line}");
        }
        // The checkpoint first, the manifest that points at it last: a kill in between leaves
        // the previous epoch's state, which the manifest still names.
        for (kind, bytes) in [
            ("model", record::bytes::<B, _>(model.clone().into_record())?),
            ("optim", record::bytes::<B, _>(optim.to_record())?),
        ] {
            let file = run::checkpoint_file(out, kind, epoch);
            std::fs::create_dir_all(file.parent().expect("in checkpoint/"))
                .map_err(|e| EmberError::write(&file, e))?;
            crate::atomic::write(&file, &bytes)?;
            manifest.record_file(out, &file, &bytes);
        }
        if let Some(state) = &pruning.bcr {
            let (file, bytes) = (run::bcr_state_file(out, epoch), state.to_bytes());
            crate::atomic::write(&file, &bytes)?;
            manifest.record_file(out, &file, &bytes);
        }
        manifest.completed_epochs = epoch;
        manifest.epoch_seconds.truncate(epoch - 1);
        manifest.epoch_seconds.push(seconds);
        manifest.history.retain(|r| r.epoch < epoch);
        manifest.history.push(row);
        manifest.write(out)?;
        replica.fresh_run(None);
        write_reports(opts, manifest)?;
        last_test = Some(valid);
        replica.end_epoch()?;
    }
    progress.finish();
    replica.finish::<B::InnerBackend>();
    let test = last_test.expect("at least one epoch trained");
    let bytes = record::bytes::<B::InnerBackend, _>(model.valid().into_record())?;
    let file = out.join(format!("{}.mpk", run::MODEL_FILE));
    crate::atomic::write(&file, &bytes)?;
    manifest.record_file(out, &file, &bytes);
    manifest.test_accuracy = Some(test.accuracy);
    manifest.test_loss = Some(test.loss);
    manifest.tested_epoch = Some(opts.epochs);
    // the provenance a packed model file records
    let about = |level: String, perm: Option<Method>| {
        [
            ("level", Some(level)),
            (
                "perm",
                perm.map(|p| crate::hinm::method_name(p).to_string()),
            ),
            ("seed", Some(opts.seed.to_string())),
            ("source", Some(file.display().to_string())),
            ("dataset", Some(opts.data.kind().to_string())),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_string(), v?)))
        .collect()
    };
    if let (Some(t), Some(h)) = (layers.tuning, &opts.hinm) {
        // the fine-tuned weights, packed with the masks they were trained under
        let about = about(h.level.to_string(), Some(h.perm));
        let params = burn_hinm::module::params(&model.valid());
        let packed = crate::hinm::packed_model(opts.model, &params, &t.plans, about)?;
        let file = out.join(crate::hinm::PACKED_FILE);
        crate::atomic::write(&file, &packed.to_bytes())?;
    }
    if let (Some(state), Some(b)) = (&pruning.bcr, &opts.bcr) {
        let about = about(b.describe(), None);
        let params = burn_hinm::module::params(&model.valid());
        let packed = crate::bcr::packed_model(opts.model, &params, state, about)?;
        let file = out.join(crate::bcr::PACKED_FILE);
        crate::atomic::write(&file, &packed.to_bytes())?;
        eprintln!("packed BCR model: {}", file.display());
    }
    manifest.write(out)?;
    if let Some((seen, steps, epoch)) = recorded {
        let step = format!("training step of epoch {epoch}");
        let name = energy_name(opts.energy.as_deref());
        let energy = layers.energy.map(|e| (name.as_str(), e));
        let default = opts.multiplier.name();
        let report = effects_report(&seen, steps, &step, layers.choices, default, energy);
        report_effects(&report, Some(out))?;
    }
    Ok(test)
}

/// One replica's model and optimizer, with its share of the training data.
struct Shard<'a, B: TrainBackend, M: TrainableClassifier<B>, I, T> {
    model: M,
    optim: &'a mut Optim<B, M>,
    train: &'a InMemDataset<I>,
    batcher: &'a T,
}

/// Why an epoch ended before its last batch.
enum Stop {
    /// SIGINT/SIGTERM (on any replica of a parallel run).
    Interrupted,
    /// A non-finite loss under `--on-nan stop` (the loss of the whole step, all replicas).
    NonFinite { batch: usize, loss: f64 },
    /// Something else failed (a collective operation, a replica check).
    Failed(EmberError),
}

/// One replica's epoch: its shard of the epoch's order ([`Replica::shard`]) in batches, each a
/// forward and backward pass, the gradients averaged over the replicas, the pruning hooks and an
/// optimizer step. The replicas of a parallel run exchange each step's loss, accuracy and stop
/// request, so they report the whole step and stop at the same batch; one replica runs exactly
/// the single-device loop. Returns the model, the epoch's sums and its number of steps.
fn train_epoch<B, M, I, T>(
    opts: &TrainOptions,
    replica: &Replica,
    epoch: usize,
    device: &B::Device,
    shard: Shard<'_, B, M, I, T>,
    pruning: &mut Pruning<'_>,
    mut progress: Option<&mut Progress>,
) -> std::result::Result<(M, Sums, usize), Stop>
where
    B: TrainBackend,
    M: TrainableClassifier<B>,
    I: Clone + Send + Sync + 'static,
    T: Batcher<B, I, Batch<B>>,
{
    let Shard {
        mut model,
        optim,
        train,
        batcher,
    } = shard;
    // The backend's RNG (SparseAct's stochastic variant draws from it) restarts from the
    // seed and the epoch, like the data order: a resumed epoch draws what it would have.
    B::seed(device, opts.seed.wrapping_add(epoch as u64));
    let order = replica.shard(epoch_order(train.len(), opts.seed, epoch));
    let batches = order.len().div_ceil(opts.batch_size);
    if let Some(p) = progress.as_deref_mut() {
        p.start(epoch, batches);
    }
    let mut sums = Sums::default();
    for (b, chunk) in order.chunks(opts.batch_size).enumerate() {
        if !replica.is_parallel() && opts.interrupted() {
            return Err(Stop::Interrupted);
        }
        let items = chunk
            .iter()
            .map(|&i| train.get(i).expect("an index below len"));
        let batch = batcher.batch(items.collect(), device);
        let step = model.step(batch);
        let loss = if replica.is_parallel() {
            let (loss, correct, seen) = Sums::stats(&step.item);
            let stop = f32::from(u8::from(opts.interrupted()));
            let all = replica
                .sum::<B::InnerBackend>(
                    &[
                        (loss * seen as f64) as f32,
                        correct as f32,
                        seen as f32,
                        stop,
                    ],
                    device,
                )
                .map_err(Stop::Failed)?;
            if all[3] > 0.0 {
                return Err(Stop::Interrupted);
            }
            let seen = all[2] as usize;
            let loss = f64::from(all[0]) / seen.max(1) as f64;
            sums.add_stats(loss, all[1] as usize, seen);
            loss
        } else {
            sums.add(&step.item)
        };
        if !loss.is_finite() && opts.on_nan == OnNan::Stop {
            return Err(Stop::NonFinite { batch: b + 1, loss });
        }
        let mut grads = replica
            .mean_grads::<B, M>(&model, step.grads)
            .map_err(Stop::Failed)?;
        if let Some(state) = &pruning.bcr {
            state.add_penalty_grads(&model, &mut grads);
        }
        if !pruning.masks.is_empty() {
            crate::hinm::mask_grads(&model, &mut grads, pruning.masks);
        }
        model = optim.step(opts.lr, model, grads);
        if !pruning.masks.is_empty() {
            model = crate::hinm::apply_masks(model, pruning.masks);
        }
        model = replica
            .mean_state::<B, M>(model, device)
            .map_err(Stop::Failed)?;
        if let Some(state) = pruning
            .bcr
            .as_mut()
            .filter(|s| s.update_due(epoch, b + 1, batches))
        {
            state
                .step_update(&burn_hinm::module::params(&model))
                .map_err(Stop::Failed)?;
        }
        if replica.verifies() {
            replica
                .verify_step::<B::InnerBackend>(scale::param_digest(&model), device, epoch, b + 1)
                .map_err(Stop::Failed)?;
        }
        if let Some(p) = progress.as_deref_mut() {
            p.batch(b + 1, &sums);
        }
    }
    Ok((model, sums, batches))
}

/// BCR's end of an epoch during ADMM (Z and U updated, or hard pruning with its masks applied):
/// the lines to report. Every replica runs it on equal parameters, so their states stay equal.
fn end_bcr_epoch<B: TrainBackend, M: TrainableClassifier<B>>(
    model: &mut M,
    pruning: &mut Pruning<'_>,
    epoch: usize,
) -> Result<Vec<String>> {
    let Some(state) = pruning.bcr.as_mut().filter(|s| s.in_admm()) else {
        return Ok(Vec::new());
    };
    let params = burn_hinm::module::params(&*model);
    let (lines, hard) = state.end_epoch(epoch, &params)?;
    if hard {
        *pruning.masks = state.masks();
        *model = crate::hinm::apply_masks(model.clone(), pruning.masks);
    }
    Ok(lines)
}

/// What every replica of a parallel run must share: the settings that decide what it computes
/// (not where it writes or reads from) and the epoch it starts at, by name.
fn shared_settings(
    opts: &TrainOptions,
    manifest: &Manifest,
    train: usize,
    test: usize,
) -> Vec<(&'static str, String)> {
    vec![
        ("--model", opts.model.to_string()),
        ("--act", opts.act.to_string()),
        ("--backend", opts.backend.to_string()),
        ("--multiplier", opts.multiplier.name().to_string()),
        ("--conv", opts.multiplier.conv().to_string()),
        ("--sparse-act", opts.sparse_act.to_string()),
        ("--policy", format!("{:?}", manifest.policy)),
        ("--epochs", opts.epochs.to_string()),
        ("--batch-size", opts.batch_size.to_string()),
        ("--lr", opts.lr.to_string()),
        ("--seed", opts.seed.to_string()),
        ("--dataset", opts.data.kind().to_string()),
        ("training/test sizes", format!("{train}/{test}")),
        ("--on-nan", opts.on_nan.to_string()),
        (
            "--hinm",
            format!("{:?}", opts.hinm.as_ref().map(|h| h.describe())),
        ),
        (
            "--bcr",
            format!("{:?}", opts.bcr.as_ref().map(|b| b.describe())),
        ),
        ("replica count", opts.scale.replicas().to_string()),
        ("--verify-replicas", opts.scale.verify.to_string()),
        (
            "first epoch (--resume)",
            (manifest.completed_epochs + 1).to_string(),
        ),
    ]
}

/// Joins a replica to the others (every replica of every process calls it, in the same order)
/// and checks that they all train the same run from the same weights.
fn join<B: TrainBackend, M: TrainableClassifier<B>>(
    replica: &Replica,
    scale: &Scale,
    settings: &[(&'static str, String)],
    model: &M,
    device: &B::Device,
) -> Result<()> {
    if !replica.is_parallel() {
        return Ok(());
    }
    replica.register::<B::InnerBackend>(scale, device)?;
    replica.agree_settings::<B::InnerBackend>(settings, device)?;
    replica.agree::<B::InnerBackend>(scale::param_digest(model), device, |r| {
        format!("replica {r} starts from other weights than replica 0")
    })
}

/// A replica after the first of its process: it trains its shards in step with the others and
/// writes nothing (the first replica writes the run directory and evaluates).
struct Follower<B: TrainBackend, M: TrainableClassifier<B>, I, T> {
    opts: TrainOptions,
    replica: Replica,
    settings: Vec<(&'static str, String)>,
    device: B::Device,
    model: M,
    optim: <Optim<B, M> as Optimizer<M, B>>::Record,
    masks: std::collections::BTreeMap<String, Vec<f32>>,
    bcr: Option<crate::bcr::BcrState>,
    first: usize,
    train: Arc<InMemDataset<I>>,
    batcher: Arc<dyn Fn(usize) -> T + Send + Sync>,
}

impl<B: TrainBackend, M: TrainableClassifier<B>, I, T> Follower<B, M, I, T>
where
    I: Clone + Send + Sync + 'static,
    T: Batcher<B, I, Batch<B>>,
{
    fn run(self) -> Result<()> {
        let Self {
            opts,
            replica,
            settings,
            device,
            mut model,
            optim,
            mut masks,
            bcr,
            first,
            train,
            batcher,
        } = self;
        join::<B, M>(&replica, &opts.scale, &settings, &model, &device)?;
        let mut optim = AdamConfig::new().init::<B, M>().load_record(optim);
        let mut pruning = Pruning {
            masks: &mut masks,
            bcr,
        };
        for epoch in first..=opts.epochs {
            let batcher = batcher(epoch);
            let shard = Shard {
                model,
                optim: &mut optim,
                train: &train,
                batcher: &batcher,
            };
            match train_epoch::<B, M, I, T>(
                &opts,
                &replica,
                epoch,
                &device,
                shard,
                &mut pruning,
                None,
            ) {
                Ok((next, _, _)) => model = next,
                Err(Stop::Failed(e)) => return Err(e),
                // the first replica reports the stop
                Err(_) => break,
            }
            end_bcr_epoch(&mut model, &mut pruning, epoch)?;
            replica.end_epoch()?;
        }
        replica.finish::<B::InnerBackend>();
        Ok(())
    }
}

/// What pruning does to each training step: the fixed masks (HiNM fine-tuning, BCR's one-shot
/// or hard-pruned ones; empty: none) and BCR's state.
struct Pruning<'a> {
    masks: &'a mut std::collections::BTreeMap<String, Vec<f32>>,
    bcr: Option<crate::bcr::BcrState>,
}

/// The per-layer choices of a run and its energy table.
struct Layers<'a> {
    choices: &'a [LayerChoice],
    energy: Option<&'a EnergyTable>,
    /// HiNM fine-tuning's masks and plans.
    tuning: Option<&'a crate::hinm::Tuning>,
}

fn energy_name(path: Option<&Path>) -> String {
    path.map_or(String::new(), |p| p.display().to_string())
}

/// `metrics.csv` and `curves.png` of the epochs completed so far.
fn write_reports(opts: &TrainOptions, manifest: &Manifest) -> Result<()> {
    report::write_csv(&opts.out.join("metrics.csv"), &manifest.history)?;
    report::plot_curves(
        &opts.out.join("curves.png"),
        &format!(
            "{} on {}, multiplier {} ({})",
            opts.model, opts.backend, opts.multiplier, opts.data
        ),
        &manifest.history,
    )
}

/// The order of the training items in `epoch`: a permutation seeded by the run's seed and the
/// epoch alone, so a resumed run sees the batches an uninterrupted one would.
fn epoch_order(n: usize, seed: u64, epoch: usize) -> Vec<usize> {
    use rand::SeedableRng;
    use rand::seq::SliceRandom;
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(
        seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
    );
    order.shuffle(&mut rng);
    order
}

/// Running sums of an epoch's training loss and accuracy.
#[derive(Default)]
struct Sums {
    loss: f64,
    correct: usize,
    seen: usize,
}

impl Running for Sums {
    fn loss(&self) -> f64 {
        Sums::loss(self)
    }
    fn accuracy(&self) -> f64 {
        Sums::accuracy(self)
    }
}

impl Sums {
    /// Adds a batch's output; returns its loss.
    fn add<B: Backend>(&mut self, out: &ClassificationOutput<B>) -> f64 {
        let (loss, correct, n) = Self::stats(out);
        self.add_stats(loss, correct, n);
        loss
    }

    /// A batch's mean loss, correct predictions and size.
    fn stats<B: Backend>(out: &ClassificationOutput<B>) -> (f64, usize, usize) {
        let n = out.targets.dims()[0];
        let loss = out.loss.clone().into_scalar().elem::<f64>();
        let pred = out.output.clone().argmax(1).squeeze_dim::<1>(1);
        let correct = pred
            .equal(out.targets.clone())
            .int()
            .sum()
            .into_scalar()
            .elem::<i64>() as usize;
        (loss, correct, n)
    }

    /// Adds a batch of `n` items with mean loss `loss` and `correct` right answers.
    fn add_stats(&mut self, loss: f64, correct: usize, n: usize) {
        self.correct += correct;
        self.loss += loss * n as f64;
        self.seen += n;
    }

    fn loss(&self) -> f64 {
        self.loss / self.seen.max(1) as f64
    }

    fn accuracy(&self) -> f64 {
        100.0 * self.correct as f64 / self.seen.max(1) as f64
    }
}

fn evaluate_items<B, M, I, V>(
    model: &M,
    items: &impl Dataset<I>,
    batcher: &V,
    batch_size: usize,
    device: &B::Device,
) -> EvalReport
where
    B: Backend,
    M: Classifier<B>,
    I: Clone + Send + Sync,
    V: Batcher<B, I, Batch<B>>,
{
    let mut sums = Sums::default();
    for start in (0..items.len()).step_by(batch_size) {
        let end = items.len().min(start.saturating_add(batch_size));
        let chunk = (start..end).map(|i| items.get(i).expect("an index below len"));
        let batch = batcher.batch(chunk.collect(), device);
        sums.add(&model.forward_classification(batch));
    }
    EvalReport {
        accuracy: sums.accuracy(),
        loss: sums.loss(),
        images: sums.seen,
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
    /// Evaluate only the first N test images (`None`: all).
    pub test_limit: Option<usize>,
    /// Per-layer multipliers by module path (`--policy`; its SparseAct settings have no
    /// effect on evaluation).
    pub policy: Option<LayerPolicy>,
    /// Energy figures for the effects report (`--energy`).
    pub energy: Option<PathBuf>,
}

/// Evaluates a saved model on the test split.
pub fn eval(opts: EvalOptions) -> Result<EvalReport> {
    if opts.batch_size == 0 {
        return Err(EmberError::Invalid(
            "--batch-size must be at least 1".into(),
        ));
    }
    opts.backend.check_available()?;
    let packed = Packed::find(&opts.checkpoint)?;
    let (file, manifest, checksum) = match &packed {
        Some((f, _)) => (f.clone(), None, None),
        None => run::resolve_checkpoint(&opts.checkpoint)?,
    };
    let from_file = match &packed {
        Some((f, m)) => {
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
        .and_then(|(_, m)| m.about().get("dataset"))
        .and_then(|d| d.parse::<DatasetKind>().ok());
    let dataset = opts
        .dataset
        .or(manifest.as_ref().map(|m| m.dataset))
        .or(packed_dataset)
        .unwrap_or(DatasetKind::Mnist);
    let source = DataSource::new(dataset, opts.data_dir)?;
    model
        .accepts(source.spec())
        .map_err(|why| EmberError::Invalid(format!("--dataset {dataset}: {why}")))?;
    if opts.test_limit == Some(0) {
        return Err(EmberError::Invalid(
            "--test-limit must be at least 1".into(),
        ));
    }
    let test = Splits::load(&source, false, None, opts.test_limit)?;
    opts.backend.dispatch(
        opts.multiplier.clone(),
        Policy::default(),
        EvalJob {
            act: manifest.as_ref().map_or(Activation::Relu, |m| m.act),
            file,
            checksum,
            model,
            spec: source.spec(),
            test,
            batch_size: opts.batch_size,
            multiplier: opts.multiplier,
            policy: opts.policy,
            energy: opts.energy,
            packed: packed.map(|(_, m)| m),
        },
    )
}

/// A packed model file: HiNM's `model.hinm` or BCR's `model.bcr`.
enum Packed {
    Hinm(burn_hinm::file::PackedModel),
    Bcr(burn_bcr::file::PackedModel),
}

impl Packed {
    /// The packed model `path` is or holds (a run directory with `model.bcr` or `model.hinm`,
    /// or such a file), read and checked; `None` when it is neither.
    fn find(path: &Path) -> Result<Option<(PathBuf, Self)>> {
        if let Some(f) = crate::bcr::packed_file(path) {
            let m = crate::bcr::read_packed(&f)?;
            return Ok(Some((f, Self::Bcr(m))));
        }
        crate::hinm::packed_file(path)
            .map(|f| crate::hinm::read_packed(&f).map(|m| (f, Self::Hinm(m))))
            .transpose()
    }
    fn model(&self) -> &str {
        match self {
            Self::Hinm(m) => &m.model,
            Self::Bcr(m) => &m.model,
        }
    }
    fn about(&self) -> &std::collections::BTreeMap<String, String> {
        match self {
            Self::Hinm(m) => &m.about,
            Self::Bcr(m) => &m.about,
        }
    }
    fn load<B: cubecl_kernels::decorator::KernelBackend, M: Module<B>>(
        &self,
        model: M,
    ) -> std::result::Result<M, String> {
        match self {
            Self::Hinm(m) => burn_hinm::module::load_packed(model, m),
            Self::Bcr(m) => burn_bcr::module::load_packed(model, m).map_err(|e| e.to_string()),
        }
    }
}

struct EvalJob {
    /// The activation the run was trained with (its manifest's; ReLU without one).
    act: Activation,
    /// The packed model when the checkpoint is one (`ember prune`, `ember train --hinm|--bcr`).
    packed: Option<Packed>,
    file: PathBuf,
    checksum: Option<u32>,
    model: ModelKind,
    spec: DataSpec,
    test: Splits,
    batch_size: usize,
    multiplier: Multiplier,
    policy: Option<LayerPolicy>,
    energy: Option<PathBuf>,
}

impl BackendJob for EvalJob {
    type Output = EvalReport;
    fn run<B: TrainBackend>(self, device: B::Device) -> Result<EvalReport> {
        let (kind, act, spec) = (self.model, self.act, self.spec);
        kind.build_with::<B, _>(act, spec, &device.clone(), EvalVisit { job: self, device })?
    }
}

/// Loads the checkpoint into the inference form of the model [`ModelKind::build`] made, and
/// evaluates it.
struct EvalVisit<B: TrainBackend> {
    job: EvalJob,
    device: B::Device,
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
            None => {
                let model =
                    record::load_checked(&job.file, job.checksum, model, job.model, &self.device)?;
                tag_layers::<B, M>(model, &choices).valid()
            }
        };
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
        };
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
