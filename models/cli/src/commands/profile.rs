//! `ember profile`.

use crate::choice;
use burn_approx_mul::{MatmulKernel, Multiplier};
use burn_sparse_act::{Policy, Pruning};
use ember_models::classifier::ModelKind;
use ember_models::data::DatasetKind;
use ember_train::EmberError;
use ember_train::backend::BackendKind;
use ember_train::profile::{self, ProfileOptions, ProfileReport, Stage, StageResult};
use std::path::PathBuf;

/// Arguments of `ember profile`.
#[derive(clap::Args)]
pub struct ProfileArgs {
    /// Model.
    #[arg(long, value_parser = choice::<ModelKind>(), default_value_t = ModelKind::Lenet5)]
    model: ModelKind,
    /// The dataset whose item shape the random inputs take (its files are not read).
    #[arg(long, value_parser = choice::<DatasetKind>(), default_value_t = DatasetKind::Mnist)]
    dataset: DatasetKind,
    /// Frames per sequence (fsdd, japanese-vowels).
    #[arg(long, default_value_t = 48)]
    frames: usize,
    /// Batch size.
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    /// Backend: wgpu or cuda.
    #[arg(long, value_parser = choice::<BackendKind>(), default_value_t = BackendKind::Wgpu)]
    backend: BackendKind,
    /// Multiplier of every contraction.
    #[arg(long, default_value = "native")]
    multiplier: Multiplier,
    #[command(flatten)]
    conv: super::ConvArgs,
    /// SparseAct S:B on every linear layer's saved input (default: off).
    #[arg(long)]
    sparse_act: Option<Pruning>,
    /// Unmeasured steps first (kernel compilation, memory pools).
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Measured steps (each measurement).
    #[arg(long, default_value_t = 3)]
    steps: usize,
    /// Kernels listed by name (the rest are summed in one row).
    #[arg(long, default_value_t = 25)]
    top: usize,
    /// Only the wall time (and the use of the --matmul kernel): no kernel-by-kernel profile,
    /// one child process instead of two.
    #[arg(long)]
    wall_only: bool,
    /// Also write the report to this Markdown file (never overwritten).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Internal: run one measurement (`wall`, or `kernels:LOG`) in this process and print its
    /// result as JSON. The command runs each in a child process of its own this way.
    #[arg(long, hide = true)]
    stage: Option<String>,
}

impl ProfileArgs {
    fn options(&self) -> ProfileOptions {
        ProfileOptions {
            model: self.model,
            spec: self.dataset.spec(),
            frames: self.frames,
            batch: self.batch_size,
            backend: self.backend,
            multiplier: self.conv.apply(self.multiplier.clone()),
            policy: self.sparse_act.map(Policy::uniform).unwrap_or_default(),
            warmup: self.warmup,
            steps: self.steps,
        }
    }

    fn title(&self) -> String {
        let opts = self.options();
        let mut t = format!(
            "{}, batch {}, {} backend, multiplier {} (--conv {}",
            self.model,
            self.batch_size,
            self.backend,
            opts.multiplier,
            opts.multiplier.conv()
        );
        match opts.multiplier.matmul() {
            MatmulKernel::Burn => t.push(')'),
            kernel => t.push_str(&format!(", --matmul {kernel})")),
        }
        if let Some(p) = self.sparse_act {
            t.push_str(&format!(", SparseAct {p}"));
        }
        t
    }
}

/// Runs `ember profile`: the wall time and the kernels, each measured in a child process of its
/// own (CubeCL's profiler is on or off for a whole process), then the report.
pub fn run(args: ProfileArgs) -> Result<(), EmberError> {
    let opts = args.options();
    if let Some(stage) = &args.stage {
        let stage = match stage.split_once(':') {
            None if stage == "wall" => Stage::Wall,
            Some(("kernels", log)) => Stage::Kernels(PathBuf::from(log)),
            _ => return Err(EmberError::Invalid(format!("unknown stage {stage}"))),
        };
        let result = profile::measure(&opts, stage)?;
        let json = serde_json::to_string(&result)
            .map_err(|e| EmberError::Invalid(format!("cannot encode the result: {e}")))?;
        println!("{json}");
        return Ok(());
    }
    if let Some(path) = &args.out {
        ember_train::memory::check_new(path)?;
    }
    // checked here too, so that a bad option or a missing backend is one error, not one a child
    opts.validate()?;
    opts.backend.check_available()?;
    let log = tempfile::Builder::new()
        .prefix("ember-profile-")
        .suffix(".log")
        .tempfile()
        .map_err(|e| EmberError::Invalid(format!("cannot make a temporary file: {e}")))?;
    eprintln!(
        "timing {} steps after {} warm-up steps (in a process of its own) ...",
        args.steps, args.warmup
    );
    let StageResult::Wall { ms, matmul } = in_child("wall")? else {
        return Err(EmberError::Invalid("the wall stage printed kernels".into()));
    };
    let kernels = match args.wall_only {
        true => Vec::new(),
        false => {
            eprintln!("profiling the same steps kernel by kernel (in a process of its own) ...");
            let log = format!("kernels:{}", log.path().display());
            let StageResult::Kernels(kernels) = in_child(&log)? else {
                return Err(EmberError::Invalid(
                    "the kernel stage printed a time".into(),
                ));
            };
            kernels
        }
    };
    let report = ProfileReport {
        title: args.title(),
        wall_ms: ms,
        steps: args.steps,
        warmup: args.warmup,
        kernels,
        matmul,
    };
    let table = report.markdown(args.top);
    print!("{table}");
    if let Some(path) = args.out {
        ember_train::memory::write_new(&path, &table)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Runs this same command line with `--stage stage` and reads the result it prints.
fn in_child(stage: &str) -> Result<StageResult, EmberError> {
    let name = stage.split(':').next().unwrap_or(stage);
    super::in_child("--stage", stage, &[], &format!("the {name} measurement"))
}
