//! `ember train`.

use crate::choice;
use burn_approx_mul::Multiplier;
use burn_sparse_act::{Policy, PolicyError, Pruning};
use ember_models::act::Activation;
use ember_models::classifier::ModelKind;
use ember_models::data::{DataSource, DatasetKind};
use ember_train::EmberError;
use ember_train::backend::BackendKind;
use ember_train::run::{self, OnExisting};
use ember_train::train::{self, OnNan, OptimizerKind, OptimizerSettings, Schedule, TrainOptions};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The library's defaults ([`TrainOptions::new`]), which the flags' defaults are.
fn defaults() -> TrainOptions {
    let data = DataSource::Mnist(ember_models::data::mnist::MnistSource::Embedded);
    TrainOptions::new(ModelKind::Lenet5, data, "")
}

/// Arguments of `ember train`.
#[derive(clap::Args)]
pub struct TrainArgs {
    /// Model to train.
    #[arg(long, value_parser = choice::<ModelKind>(), default_value_t = ModelKind::Lenet5)]
    model: ModelKind,
    /// Activation: relu, or prelu (PReLU with one slope per channel at every site; the LeNets
    /// and the ResNets), one fused autodiff node each (docs/broadcast.md).
    #[arg(long, default_value = "relu")]
    act: Activation,
    /// Backend to train on.
    #[arg(long, value_parser = choice::<BackendKind>(), default_value_t = BackendKind::Ndarray)]
    backend: BackendKind,
    #[arg(long, default_value = "native", help = super::multiplier_help(
        "Multiplier of every matmul/linear/conv product, forward and backward (native: the backend's own ops)"
    ))]
    multiplier: Multiplier,
    #[command(flatten)]
    conv: super::ConvArgs,
    #[command(flatten)]
    sparse_act: SparseActArgs,
    #[command(flatten)]
    layers: super::LayerArgs,
    /// Total number of epochs.
    #[arg(long, default_value_t = defaults().epochs)]
    epochs: usize,
    /// Batch size (per replica with --devices or --ddp mpi).
    #[arg(long, default_value_t = defaults().batch_size)]
    batch_size: usize,
    /// Learning rate (the schedule's peak).
    #[arg(long, default_value_t = defaults().lr)]
    lr: f64,
    #[command(flatten)]
    optimizer: OptimizerArgs,
    /// Seconds this invocation may run: before an epoch that would end past it (by the longest
    /// epoch so far) training stops, the last completed epoch kept, and the exit status is 75;
    /// --resume continues (single-replica runs).
    #[arg(long, value_name = "SECONDS")]
    time_limit: Option<f64>,
    /// Seed for parameter initialisation and shuffling.
    #[arg(long, default_value_t = defaults().seed)]
    seed: u64,
    /// Run directory (default: runs/<model>-<date>-<time>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Dataset: mnist (idx files: MNIST or Fashion-MNIST), cifar10, fsdd (spoken digits, MFCC
    /// sequences), japanese-vowels (speaker identification; these two take --model gru) or
    /// imagenet-folder (an ImageFolder's train/ and val/, 224×224 crops).
    #[arg(long, value_parser = choice::<DatasetKind>(), default_value_t = DatasetKind::Mnist)]
    dataset: DatasetKind,
    /// Directory of the dataset: idx files (gz or raw) for mnist, default the MNIST subset
    /// embedded in the binary; for cifar10 (required) train/ and test/ image folders
    /// (cifar10-jpg.tar.gz extracted) or the official binary batches; for fsdd the archive
    /// fsdd-recordings.tar.gz or its directory; for japanese-vowels the directory of its .ts
    /// files; for imagenet-folder (required) the parent of train/ and val/, one directory of
    /// JPEG or PNG images per class in each.
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
    /// Plain progress lines even in a terminal (no progress bar).
    #[arg(long)]
    plain: bool,
    /// A NaN or infinite training loss: stop (end the run with an error naming the epoch and
    /// batch, the last completed epoch's checkpoint kept) or continue.
    #[arg(long, value_parser = choice::<OnNan>(), default_value_t = OnNan::Stop)]
    on_nan: OnNan,
    /// The most frames a sequence of the data may have (FSDD, Japanese Vowels); a longer one is
    /// an error naming it.
    #[arg(long, default_value_t = defaults().max_frames)]
    max_frames: usize,
    /// Keep the checkpoints of the last N epochs (checkpoint/*-<epoch>.*; at least 1: --resume
    /// continues from the last), or all of them.
    #[arg(long, value_name = "N|all", default_value = "3", value_parser = keep_checkpoints)]
    keep_checkpoints: Keep,
    /// HiNM sparse fine-tuning at level TOTAL:vV (see `ember prune --help`): start from the
    /// --from run's weights under the masks searched on them, keep the masks through every
    /// optimizer step, and write the packed model.hinm beside model.mpk.
    #[arg(long, value_name = "TOTAL:vV", requires = "from")]
    hinm: Option<burn_hinm::Level>,
    /// What training starts from: the trained run a --hinm fine-tuning or a --bcr run starts
    /// from (same --model), or PyTorch weights to fine-tune (a `.pth`/`.pt` state dict or a
    /// `.safetensors` file under torchvision's or timm's names; a head of other classes than
    /// the dataset's starts fresh).
    #[arg(long, value_name = "RUN|FILE")]
    from: Option<std::path::PathBuf>,
    /// Permutation search of --hinm: gyro, ovw or none.
    #[arg(long, default_value = "gyro", requires = "hinm")]
    perm: burn_hinm::gyro::Method,
    #[command(flatten)]
    bcr: BcrArgs,
    #[command(flatten)]
    scale: ScaleArgs,
}

/// Data parallelism: several devices of one process, or the processes of an MPI job
/// (docs/scaling.md).
#[derive(clap::Args)]
pub struct ScaleArgs {
    /// Train data-parallel on the first N devices of --backend (one replica each, gradients
    /// averaged every step; --batch-size is per replica). More than there are is refused with
    /// the list of the backend's devices.
    #[arg(long, default_value_t = 1)]
    devices: usize,
    /// Train data-parallel across the processes of an MPI job, one device each:
    /// `mpirun -np N ember train --ddp mpi ...` (or `srun --mpi=pmix`). Rank 0 writes --out;
    /// a build with the `mpi` feature is needed.
    #[arg(long, value_name = "ENGINE", num_args = 0..=1, default_missing_value = "")]
    ddp: Option<String>,
    /// The removed cross-process options of Burn's collective (refused with what to run).
    #[arg(long, hide = true)]
    rank: Option<String>,
    #[arg(long, hide = true)]
    world: Option<String>,
    #[arg(long, hide = true)]
    coordinator: Option<String>,
    #[arg(long, hide = true)]
    ddp_port: Option<String>,
    #[arg(long, hide = true)]
    ddp_host: Option<String>,
    /// Check after every step that all replicas hold bit-identical parameters (one read of
    /// the parameters per step).
    #[arg(long)]
    verify_replicas: bool,
    /// Seconds a replica waits for the others before the run ends as lost (a process died or
    /// hangs; under MPI the whole job is aborted).
    #[arg(long, default_value_t = 300)]
    collective_timeout: u64,
}

/// What a run of the removed `--ddp --rank R --world W --coordinator HOST:PORT` form is told.
const DDP_MOVED: &str = "--ddp --rank/--world/--coordinator (processes joined through \
    burn-collective) was removed: burn-collective 0.21.0 deadlocks on the second cross-process \
    all-reduce. Start the processes as one MPI job instead: `mpirun -np WORLD ember train --ddp \
    mpi ...` with the same options (one --out, written by rank 0; docs/scaling.md)";

impl ScaleArgs {
    /// The scale of a run, or the error for options that do not hold together.
    pub fn scale(self) -> Result<ember_train::scale::Scale, EmberError> {
        let old = [
            self.rank.is_some(),
            self.world.is_some(),
            self.coordinator.is_some(),
            self.ddp_port.is_some(),
            self.ddp_host.is_some(),
        ];
        if old.contains(&true) {
            return Err(EmberError::Invalid(DDP_MOVED.into()));
        }
        let mpi = match self.ddp.as_deref() {
            None => false,
            Some("mpi") => true,
            Some("") => return Err(EmberError::Invalid(DDP_MOVED.into())),
            Some(other) => {
                return Err(EmberError::Invalid(format!(
                    "--ddp {other}: the only engine is mpi (`mpirun -np N ember train --ddp mpi \
                     ...`)"
                )));
            }
        };
        Ok(ember_train::scale::Scale {
            devices: self.devices,
            mpi,
            job: None,
            verify: self.verify_replicas,
            timeout: std::time::Duration::from_secs(self.collective_timeout),
        })
    }
}

/// BCR pruning (GRIM): block column-row sparsity, ADMM, the packed model.bcr.
#[derive(clap::Args)]
pub struct BcrArgs {
    /// BCR level RATEx:RxC: pruning rate (total ÷ kept weights, > 1) and the block of the GEMM
    /// view (R output rows × C inputs), e.g. 10x:4x16. Every contraction layer but the last is
    /// pruned (a --policy may set bcr = "RATEx:RxC" or "off" per layer). Without --admm the
    /// masks are the projection of the starting weights (one-shot) and every epoch trains
    /// masked; the packed model.bcr is written at the end.
    #[arg(long, value_name = "RATEx:RxC", conflicts_with = "hinm")]
    pub bcr: Option<burn_bcr::Level>,
    /// Train with ADMM first (the penalty ρ/2·‖W − Z + U‖², ρ from 1e-4 to 1e-1), then
    /// hard-prune and retrain masked for --retrain-epochs.
    #[arg(long, requires = "bcr")]
    pub admm: bool,
    /// Epochs between ADMM updates of Z and U.
    #[arg(long, default_value_t = 1, requires = "admm")]
    pub admm_every: usize,
    /// ADMM updates of Z and U per epoch (with --admm-every 1): the extra ones at evenly spaced
    /// steps inside it. A run of few ADMM epochs needs several for ρ's stages to run their course.
    #[arg(long, default_value_t = 1, requires = "admm")]
    pub admm_per_epoch: usize,
    /// ρ's schedule: staged (×10 per stage, Z re-projected and U reset) or smooth.
    #[arg(long, default_value = "staged", value_parser = ["staged", "smooth"], requires = "admm")]
    pub admm_schedule: String,
    /// Masked-retraining epochs after ADMM (default: half of --epochs).
    #[arg(long, requires = "admm")]
    pub retrain_epochs: Option<usize>,
}

impl BcrArgs {
    /// The BCR options of a run of `epochs` starting from `from`.
    pub fn options(
        self,
        epochs: usize,
        from: Option<PathBuf>,
    ) -> Option<ember_train::bcr::BcrTrain> {
        let level = self.bcr?;
        Some(ember_train::bcr::BcrTrain {
            level,
            admm_every: self.admm.then_some(self.admm_every),
            per_epoch: self.admm_per_epoch,
            smooth: self.admm_schedule == "smooth",
            retrain: self.retrain_epochs.unwrap_or(epochs / 2),
            from,
        })
    }
}

/// SparseAct: which inputs of linear layers are kept pruned for backward.
#[derive(clap::Args)]
struct SparseActArgs {
    /// Prune every linear layer's saved input per sample to the top (1 − S) of its blocks of
    /// width B by L2 norm, e.g. 0.8:64 (S in [0, 1), B ≥ 1). Default: off (dense).
    #[arg(long)]
    sparse_act: Option<Pruning>,
    /// A per-layer override IN×OUT=S:B, the layer named by its weight shape (repeatable).
    #[arg(long, requires = "sparse_act")]
    sparse_act_layer: Vec<String>,
    /// The stochastic variant: blocks whose norm is within this relative band of the top-k
    /// threshold may swap (0 < BAND < 1).
    #[arg(long, requires = "sparse_act")]
    sparse_act_stochastic: Option<f64>,
    /// The fused variant: also keep the activations of per-channel scales (ResMLP's Affine and
    /// layer-scale) pruned for the scales' gradients.
    #[arg(long, requires = "sparse_act")]
    sparse_act_scales: bool,
}

impl SparseActArgs {
    fn policy(self) -> Result<Policy, EmberError> {
        let invalid = |e: PolicyError| EmberError::Invalid(e.to_string());
        let Some(default) = self.sparse_act else {
            return Ok(Policy::default());
        };
        let mut policy = Policy::uniform(default);
        policy.scales = self.sparse_act_scales;
        for spec in &self.sparse_act_layer {
            policy.add_override(spec).map_err(invalid)?;
        }
        if let Some(band) = self.sparse_act_stochastic {
            policy = policy.with_stochastic(band).map_err(invalid)?;
        }
        Ok(policy)
    }
}

/// SIGINT/SIGTERM (Ctrl-C, `kill`): the first ends training before the next batch, leaving
/// the run resumable from its last completed epoch; a second exits at once.
pub(crate) fn interrupt_flag() -> Option<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    let seen = flag.clone();
    let installed = ctrlc::set_handler(move || {
        if seen.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!(
            "\ninterrupt: stopping before the next batch (again to exit at once; at most {} s)",
            GRACE.as_secs()
        );
        // a batch that does not end in time (a very long sequence, a hung device): the run
        // ends anyway, from its last completed epoch, which the manifest names
        std::thread::spawn(|| {
            std::thread::sleep(GRACE);
            eprintln!(
                "interrupt: the batch did not end within {} s; exiting (the last completed \
                 epoch stays: --resume continues from it)",
                GRACE.as_secs()
            );
            std::process::exit(130);
        });
    });
    match installed {
        Ok(()) => Some(flag),
        Err(e) => {
            eprintln!("warning: cannot handle SIGINT/SIGTERM ({e}): an interrupt kills the run");
            None
        }
    }
}

/// Runs `ember train`.
pub fn run(args: TrainArgs) -> Result<(), EmberError> {
    let on_existing = match (args.resume, args.overwrite) {
        (true, _) => OnExisting::Resume,
        (_, true) => OnExisting::Overwrite,
        _ => OnExisting::Refuse,
    };
    let (policy, energy) = args.layers.parse()?;
    let weights = args
        .from
        .as_deref()
        .is_some_and(ember_train::weights::is_weights_file);
    if args.from.is_some() && !weights && args.hinm.is_none() && args.bcr.bcr.is_none() {
        return Err(EmberError::Invalid(
            "--from RUN starts a --hinm or --bcr run from a trained one: give one of them (or \
             --from FILE.pth|.safetensors to fine-tune PyTorch weights)"
                .into(),
        ));
    }
    let pretrained = weights.then(|| args.from.clone()).flatten();
    let bcr = if args.hinm.is_none() {
        args.bcr
            .options(args.epochs, args.from.clone().filter(|_| !weights))
    } else {
        None
    };
    let report = train::train(TrainOptions {
        model: args.model,
        act: args.act,
        backend: args.backend,
        multiplier: args.conv.apply(args.multiplier),
        sparse_act: args.sparse_act.policy()?,
        policy,
        energy,
        epochs: args.epochs,
        batch_size: args.batch_size,
        lr: args.lr,
        optimizer: args.optimizer.settings(),
        time_limit: args.time_limit,
        seed: args.seed,
        out: args.out.unwrap_or_else(|| run::default_out(args.model)),
        data: DataSource::new(args.dataset, args.data_dir)?,
        on_existing,
        train_limit: args.train_limit,
        test_limit: args.test_limit,
        plain: args.plain,
        on_nan: args.on_nan,
        keep_checkpoints: args.keep_checkpoints.0,
        max_frames: args.max_frames,
        hinm: args.hinm.map(|level| ember_train::hinm::HinmTune {
            level,
            perm: args.perm,
            from: args.from.clone().expect("clap requires --from with --hinm"),
        }),
        pretrained,
        shape: None,
        bcr,
        interrupt: interrupt_flag(),
        scale: args.scale.scale()?,
    })?;
    // an MPI rank other than 0 trained in step with rank 0, which reports
    if let Some(test) = report.test {
        println!(
            "test accuracy {:.2}% (loss {:.4}, {} images); run in {} (metrics.csv, curves.png, effects.md, model.mpk)",
            test.accuracy,
            test.loss,
            test.images,
            report.out.display()
        );
    }
    Ok(())
}

/// The optimizer and its schedule.
#[derive(clap::Args)]
pub struct OptimizerArgs {
    /// Optimizer: adam, or sgd (heavy-ball momentum, no dampening: PyTorch's SGD).
    #[arg(long, value_parser = choice::<OptimizerKind>(), default_value_t = OptimizerKind::Adam)]
    optimizer: OptimizerKind,
    /// SGD's momentum, in [0, 1).
    #[arg(long, default_value_t = OptimizerSettings::default().momentum)]
    momentum: f64,
    /// L2 weight decay: PENALTY × w added to every parameter's gradient (Adam's and SGD's
    /// coupled form, as PyTorch's `weight_decay`).
    #[arg(long, default_value_t = 0.0)]
    weight_decay: f64,
    /// Learning-rate schedule, per step: constant, or cosine (from --lr to 0 over the epochs
    /// after the warm-up).
    #[arg(long, value_parser = choice::<Schedule>(), default_value_t = Schedule::Constant)]
    schedule: Schedule,
    /// Epochs over which the rate rises linearly to --lr, step by step, before the schedule.
    #[arg(long, default_value_t = 0)]
    warmup_epochs: usize,
}

impl OptimizerArgs {
    fn settings(&self) -> OptimizerSettings {
        OptimizerSettings {
            kind: self.optimizer,
            momentum: self.momentum,
            weight_decay: self.weight_decay,
            schedule: self.schedule,
            warmup_epochs: self.warmup_epochs,
        }
    }
}

/// How long an interrupted run may take to end its batch before the process exits: longer than
/// a data-parallel replica waits for its peers once asked to stop (10 s), which ends such a run
/// with its own error first.
const GRACE: std::time::Duration = std::time::Duration::from_secs(20);

/// `--keep-checkpoints`: the last N epochs (`Some(N)`), or `all` (`None`).
#[derive(Clone, Copy, Debug)]
struct Keep(Option<usize>);

fn keep_checkpoints(text: &str) -> Result<Keep, String> {
    match text.trim() {
        "all" => Ok(Keep(None)),
        // 0 is refused with the other options (TrainOptions::validate)
        n => n
            .parse::<usize>()
            .map(|n| Keep(Some(n)))
            .map_err(|_| format!("{n:?} is not a number of epochs or \"all\"")),
    }
}
