//! `ember prune`.

use burn_hinm::Level;
use burn_hinm::gyro::Method;
use ember_train::EmberError;
use ember_train::hinm::{self, PruneOptions};
use std::path::PathBuf;

/// Arguments of `ember prune`.
#[derive(clap::Args)]
pub struct PruneArgs {
    /// HiNM level TOTAL:vV: total sparsity 75, 87.5 or 93.75 percent (2:4 on the columns a
    /// column-vector pruning of 50, 75 or 87.5 % keeps), V the tile height (64 in the paper).
    /// The first and the last contraction layer stay dense unless --policy sets them.
    #[arg(
        long,
        value_name = "TOTAL:vV",
        required_unless_present = "bcr",
        conflicts_with = "bcr"
    )]
    hinm: Option<Level>,
    /// BCR level RATEx:RxC (e.g. 10x:4x16): the trained weights projected onto the BCR set
    /// (one-shot), then --epochs of masked retraining; --out becomes a run directory with the
    /// packed model.bcr. Every contraction layer but the last is pruned unless --policy sets
    /// bcr = "RATEx:RxC" or "off" per layer.
    #[arg(long, value_name = "RATEx:RxC")]
    bcr: Option<burn_bcr::Level>,
    /// BCR: epochs of masked retraining after the one-shot projection.
    #[arg(long, default_value_t = 1)]
    epochs: usize,
    /// BCR: Adam learning rate of the retraining.
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    /// BCR: backend of the retraining.
    #[arg(long, value_parser = crate::choice::<ember_train::backend::BackendKind>(), default_value_t = ember_train::backend::BackendKind::Ndarray)]
    backend: ember_train::backend::BackendKind,
    #[command(flatten)]
    conv: super::ConvArgs,
    /// BCR: the dataset's directory (default: where the trained run read it).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Permutation search the packed model is written with: gyro (output and tile-wise input
    /// permutations), ovw (output only) or none. The table reports all three.
    #[arg(long, default_value = "gyro")]
    perm: Method,
    /// Seed of the permutation search (same seed, same permutations).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The trained run to prune (its directory, model.mpk or a checkpoint file), or, for
    /// --hinm, PyTorch weights (`.pth`/`.pt`/`.safetensors` under torchvision's or timm's
    /// names, at the zoo model's own shape; pass --model).
    #[arg(long)]
    checkpoint: PathBuf,
    /// HiNM: the model --checkpoint holds (required for PyTorch weights; a run's manifest
    /// names its own).
    #[arg(long, value_parser = crate::choice::<ember_models::classifier::ModelKind>())]
    model: Option<ember_models::classifier::ModelKind>,
    /// Output directory for model.hinm, hinm.md and hinm.json (must not exist, or be empty;
    /// the three appear together), or the BCR run directory.
    #[arg(long)]
    out: PathBuf,
    /// Per-layer levels: a TOML policy whose [[layer]] entries set hinm = "TOTAL:vV" or "off"
    /// (see `ember policy show`).
    #[arg(long, value_name = "FILE")]
    policy: Option<String>,
    /// BCR: continue the run in --out from its last completed epoch (after an interruption).
    #[arg(long, conflicts_with = "overwrite")]
    resume: bool,
    /// BCR: replace the run in --out (never a directory that is not an Ember run).
    #[arg(long)]
    overwrite: bool,
}

/// Runs `ember prune`.
pub fn run(mut args: PruneArgs) -> Result<(), EmberError> {
    let policy = args
        .policy
        .take()
        .map(|arg| ember_train::policy::LayerPolicy::from_arg(&arg))
        .transpose()?;
    if args.hinm.is_some() && (args.resume || args.overwrite) {
        return Err(EmberError::Invalid(
            "--resume and --overwrite continue or replace a --bcr run; a --hinm prune writes \
             its three files at once into a new or empty --out"
                .into(),
        ));
    }
    let Some(level) = args.hinm else {
        let level = args.bcr.expect("clap requires --hinm or --bcr");
        if ember_train::weights::is_weights_file(&args.checkpoint) {
            return Err(EmberError::Invalid(
                "--bcr retrains from an Ember run, not from PyTorch weights: fine-tune the \
                 weights first (ember train --from FILE), then prune that run"
                    .into(),
            ));
        }
        return prune_bcr(args, level, policy);
    };
    // the outputs appear together at the end (hinm::prune): an interruption before that
    // leaves nothing, so the first signal ends the process; one during the rename that
    // publishes them lets it finish
    if let Err(e) = ctrlc::set_handler(|| {
        if ember_train::atomic::publishing() {
            eprintln!("\ninterrupted while publishing the outputs: finishing");
            return;
        }
        eprintln!("\ninterrupted: nothing was written");
        std::process::exit(130);
    }) {
        eprintln!("warning: cannot handle SIGINT/SIGTERM ({e}): an interrupt kills the prune");
    }
    let report = hinm::prune(PruneOptions {
        checkpoint: args.checkpoint,
        level,
        perm: args.perm,
        seed: args.seed,
        out: args.out,
        policy,
        model: args.model,
    })?;
    println!("{}", report.markdown());
    println!(
        "wrote {} (evaluate it with `ember eval --checkpoint {}`)",
        report.out.join(hinm::PACKED_FILE).display(),
        report.out.display()
    );
    Ok(())
}

/// `ember prune --bcr`: one-shot projection of the trained run and masked retraining, into a
/// new run directory.
fn prune_bcr(
    args: PruneArgs,
    level: burn_bcr::Level,
    policy: Option<ember_train::policy::LayerPolicy>,
) -> Result<(), EmberError> {
    use ember_train::train::{self, TrainOptions};
    let (_, manifest, _) = ember_train::run::resolve_checkpoint(&args.checkpoint)?;
    let manifest = manifest.ok_or_else(|| EmberError::BadCheckpoint {
        path: args.checkpoint.clone(),
        reason: "no ember-run.json beside it: give a run directory".into(),
    })?;
    let data_dir = args.data_dir.or_else(|| {
        let p = PathBuf::from(&manifest.data);
        p.exists().then_some(p)
    });
    let data = ember_models::data::DataSource::new(manifest.dataset, data_dir)?;
    let on_existing = match (args.resume, args.overwrite) {
        (true, _) => ember_train::run::OnExisting::Resume,
        (_, true) => ember_train::run::OnExisting::Overwrite,
        _ => ember_train::run::OnExisting::Refuse,
    };
    let report = train::train(TrainOptions {
        act: manifest.act,
        on_existing,
        interrupt: super::train::interrupt_flag(),
        backend: args.backend,
        multiplier: args.conv.apply(burn_approx_mul::Multiplier::native()),
        policy,
        epochs: args.epochs,
        batch_size: manifest.batch_size,
        lr: args.lr,
        seed: args.seed,
        train_limit: manifest.train_limit,
        test_limit: manifest.test_limit,
        bcr: Some(ember_train::bcr::BcrTrain {
            level,
            admm_every: None,
            per_epoch: 1,
            smooth: false,
            retrain: 0,
            from: Some(args.checkpoint),
        }),
        ..TrainOptions::new(manifest.model, data, args.out)
    })?;
    // one process, no MPI job: the run was evaluated
    let accuracy = report.test.map_or(f64::NAN, |t| t.accuracy);
    println!(
        "test accuracy {:.2}% after BCR {level} and {} epochs of masked retraining; wrote {} \
         (evaluate it with `ember eval --checkpoint {}`)",
        accuracy,
        args.epochs,
        report.out.join(ember_train::bcr::PACKED_FILE).display(),
        report.out.display()
    );
    Ok(())
}
