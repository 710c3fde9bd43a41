//! `cargo xtask reproduce <name>`: experiments that write `docs/results/<name>.md`.
//!
//! Each experiment builds the release `ember` binary once and runs it, so what is reported is
//! exactly what a user gets from the CLI.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

mod approxtrain_cifar;
mod grim;
mod hinm;
mod mnist;
mod setup;
mod sparse_act;
mod stage;

use approxtrain_cifar::approxtrain_cifar10;
use grim::grim_gru;
#[cfg(test)]
use grim::{GRIM_UPDATES, grim_epochs, grim_split};
use hinm::hinm_cifar10;
use mnist::{approxtrain_mnist, lenet_mnist};
use setup::Setup;
use sparse_act::sparse_act_cifar10;
use stage::{Budget, Stopped};

/// The experiments: name and what it does.
const EXPERIMENTS: &[(&str, &str)] = &[
    (
        "lenet-mnist",
        "LeNet-5 and LeNet-300-100 on full MNIST, on ndarray and on wgpu: epoch time and test accuracy",
    ),
    (
        "approxtrain-mnist",
        "ApproxTrain Tables III/IV: LeNet-300-100 and LeNet-5 on full MNIST with FP32, AFM32, bfloat16, \
         AFM16 and Mitchell-16 multipliers, and every model tested under every multiplier",
    ),
    (
        "approxtrain-cifar10",
        "ApproxTrain Table III on CIFAR-10: ResNet-18 under FP32, AFM32, bfloat16 and AFM16 (SGD, \
         cosine, crop + flip; the same seed), and every model tested under every format; its \
         stages resume and --time-limit stops it cleanly (status 75)",
    ),
    (
        "hinm-cifar10",
        "HiNM: ResNet-18 (GPU: full width, V = 64; CPU: 16 wide, V = 16) on CIFAR-10 pruned with no \
         permutation, OVW and Gyro: retained saliency per level, accuracy one-shot and after masked \
         fine-tunes at 75 % (and Gyro at 87.5 %) from three seeds",
    ),
    (
        "grim-gru",
        "GRIM: the 2 x 256 GRU on Japanese Vowels and FSDD, dense vs BCR 10x / 20x / 100x (4x16 \
         blocks, ADMM then masked retraining from the dense run): accuracy of each packed model",
    ),
    (
        "sparse-act-cifar10",
        "SparseAct Figs. 7-8 and Table IV: ResMLP-S12 (GPU) or the small ResMLP (CPU) on CIFAR-10, \
         dense vs s in {50, 80, 90} % x b in {16, 64} and the fused variant at b = 64: accuracy, \
         activation memory, loss curves, accuracy heat map relative to dense",
    ),
];

/// A prebuilt `ember` (`--ember`), used instead of building one.
static PREBUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

fn ember_binary() -> Result<PathBuf> {
    if let Some(bin) = PREBUILT.get() {
        return Ok(bin.clone());
    }
    crate::cargo(&["build", "--release", "--bin", "ember"])?;
    let target = crate::target_dir();
    let bin = target.join("release/ember");
    if !bin.exists() {
        bail!("{} was not built", bin.display());
    }
    Ok(bin)
}

/// The manifest fields an experiment reads back.
struct RunResult {
    test_accuracy: f64,
    epoch_seconds: Vec<f64>,
}

impl RunResult {
    fn mean_epoch(&self) -> f64 {
        self.epoch_seconds.iter().sum::<f64>() / self.epoch_seconds.len().max(1) as f64
    }
}

fn eval(bin: &Path, run: &Path, multiplier: &str, data: &Path) -> Result<f64> {
    eval_on(bin, run, multiplier, data, "ndarray", None)
}

/// `ember eval` of `run` under `multiplier` on `backend` (the first `test_limit` test images).
fn eval_on(
    bin: &Path,
    run: &Path,
    multiplier: &str,
    data: &Path,
    backend: &str,
    test_limit: Option<usize>,
) -> Result<f64> {
    println!(
        "==> ember eval --checkpoint {} --multiplier {multiplier}",
        run.display()
    );
    let mut cmd = Command::new(bin);
    cmd.args(["eval", "--checkpoint"])
        .arg(run)
        .args([
            "--multiplier",
            multiplier,
            "--backend",
            backend,
            "--data-dir",
        ])
        .arg(data);
    if let Some(n) = test_limit {
        cmd.args(["--test-limit", &n.to_string()]);
    }
    let out = cmd.output()?;
    if !out.status.success() {
        bail!(
            "ember eval {} --multiplier {multiplier} failed: {}",
            run.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    accuracy_of(&String::from_utf8_lossy(&out.stdout))
}

/// `ember train` with the settings the MNIST experiments share (batch 32, Adam 2e-3, seed 42).
fn train(
    bin: &Path,
    out: &Path,
    [model, backend, multiplier]: [&str; 3],
    epochs: usize,
    data: &Path,
) -> Result<RunResult> {
    let epochs = epochs.to_string();
    let data = data.to_str().context("non-UTF-8 path")?;
    train_with(
        bin,
        out,
        &[
            "--model",
            model,
            "--backend",
            backend,
            "--multiplier",
            multiplier,
            "--epochs",
            &epochs,
            "--batch-size",
            "32",
            "--lr",
            "2e-3",
            "--seed",
            "42",
            "--data-dir",
            data,
        ],
    )
}

/// `ember train ARGS --plain --overwrite --out OUT`, and what its manifest says.
fn train_with(bin: &Path, out: &Path, args: &[&str]) -> Result<RunResult> {
    println!("==> ember train {} --out {}", args.join(" "), out.display());
    let status = Command::new(bin)
        .arg("train")
        .args(args)
        .args(["--plain", "--overwrite", "--out"])
        .arg(out)
        .status()?;
    if !status.success() {
        bail!("ember train {} failed ({status})", args.join(" "));
    }
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("ember-run.json"))?)?;
    Ok(RunResult {
        test_accuracy: manifest["test_accuracy"]
            .as_f64()
            .context("test_accuracy")?,
        epoch_seconds: manifest["epoch_seconds"]
            .as_array()
            .context("epoch_seconds")?
            .iter()
            .filter_map(|v| v.as_f64())
            .collect(),
    })
}

/// `shared/datasets/cifar10-jpg.tar.gz` extracted into `target/data/cifar10` (once; through a
/// temporary directory, so an interrupted extraction is never mistaken for the dataset).
fn cifar10_folder(datasets: &Path) -> Result<PathBuf> {
    let dir = crate::root().join("target/data/cifar10");
    if dir.join("train").is_dir() && dir.join("test").is_dir() {
        return Ok(dir);
    }
    let archive = datasets.join("cifar10-jpg.tar.gz");
    if !archive.is_file() {
        bail!("{} not found: pass --datasets", archive.display());
    }
    let tmp = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    println!(
        "==> extracting {} into {}",
        archive.display(),
        dir.display()
    );
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(&tmp)
        .status()
        .context("run tar")?;
    if !status.success() {
        bail!("tar -xzf {} failed ({status})", archive.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&tmp, &dir)?;
    Ok(dir)
}

/// What a CIFAR-10 experiment works with.
struct Cifar {
    /// The extracted dataset ([`cifar10_folder`]).
    data: PathBuf,
    /// It as an argument.
    data_arg: String,
    /// The `ember` it runs.
    bin: PathBuf,
    /// The workspace.
    root: PathBuf,
    /// Its own folder of runs: `target/reproduce/NAME-BACKEND`.
    work: PathBuf,
    /// Where its documents go (`docs/results`, made).
    results: PathBuf,
}

impl Cifar {
    fn new(datasets: &Path, name: &str, backend: &str) -> Result<Self> {
        let data = cifar10_folder(datasets)?;
        let data_arg = data.to_str().context("non-UTF-8 path")?.to_string();
        let root = crate::root();
        let results = root.join("docs/results");
        std::fs::create_dir_all(&results)?;
        Ok(Self {
            bin: ember_binary()?,
            work: root.join(format!("target/reproduce/{name}-{backend}")),
            data,
            data_arg,
            root,
            results,
        })
    }
}

/// `v` as the `&str` arguments a command takes.
fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Runs `ember ARGS` and returns its stdout (an error with its stderr when it fails).
fn ember_out(bin: &Path, args: &[&str]) -> Result<String> {
    println!("==> ember {}", args.join(" "));
    let out = Command::new(bin).args(args).output()?;
    if !out.status.success() {
        bail!(
            "ember {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The accuracy `ember eval` printed.
fn accuracy_of(stdout: &str) -> Result<f64> {
    stdout
        .split("test accuracy ")
        .nth(1)
        .and_then(|r| r.split('%').next())
        .and_then(|v| v.trim().parse().ok())
        .with_context(|| format!("no accuracy in `{stdout}`"))
}

/// What `cargo xtask reproduce` was asked for besides the experiment's name.
pub struct Options {
    pub datasets: Option<PathBuf>,
    pub epochs: Option<usize>,
    pub train_limit: Option<usize>,
    pub test_limit: Option<usize>,
    pub hinm: HinmSetup,
    pub ember: Option<PathBuf>,
    pub fsdd_epochs: usize,
    /// Seconds this invocation may take (approxtrain-cifar10): each stage gets what is left,
    /// and the experiment stops cleanly (status 75) when it runs out.
    pub time_limit: Option<f64>,
}

/// The document of an experiment that finished; one stopped at its `--time-limit` ends the
/// process with status 75 (its runs kept for the same command to continue).
fn stopped(outcome: std::result::Result<String, Stopped>) -> String {
    match outcome {
        Ok(md) => md,
        Err(Stopped::Budget) => {
            println!(
                "stopped at --time-limit: every run is kept under target/reproduce/; run the \
                 same command again to continue"
            );
            std::process::exit(75);
        }
    }
}

/// The results file of experiment `name` on `backend`: `name` on ndarray, `name-backend` on any
/// other.
fn result_name(name: &str, backend: &str) -> String {
    match backend {
        "ndarray" => name.to_string(),
        other => format!("{name}-{other}"),
    }
}

/// The settings of `hinm-cifar10` that other machines change.
pub struct HinmSetup {
    pub backend: String,
    /// The model (default: the experiment's own).
    pub model: Option<String>,
    /// HiNM's tile height V (default 64 on a GPU, 16 on ndarray).
    pub tile: Option<usize>,
    /// Epochs of each masked fine-tune (default 5 on a GPU, 1 on ndarray).
    pub tune_epochs: Option<usize>,
    /// Seeds of each fine-tune (42, 43, …).
    pub seeds: usize,
}

/// Runs experiment `name`.
pub fn run(name: &str, options: Options) -> Result<()> {
    let Options {
        datasets,
        epochs,
        train_limit,
        test_limit,
        hinm,
        ember,
        fsdd_epochs,
        time_limit,
    } = options;
    if let Some(limit) = time_limit
        && !(limit.is_finite() && limit > 0.0)
    {
        bail!("--time-limit must be a positive number of seconds, got {limit}");
    }
    if epochs == Some(0) || hinm.tune_epochs == Some(0) {
        bail!("--epochs and --tune-epochs must be at least 1");
    }
    if hinm.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    if let Some(bin) = ember {
        if !bin.is_file() {
            bail!("--ember {}: no such file", bin.display());
        }
        let _ = PREBUILT.set(bin);
    }
    let datasets = datasets.unwrap_or_else(|| crate::root().join("../shared/datasets"));
    let file = match name {
        "hinm-cifar10" | "approxtrain-cifar10" | "sparse-act-cifar10" => {
            result_name(name, &hinm.backend)
        }
        _ => name.to_string(),
    };
    let md = match name {
        "list" => {
            for (n, what) in EXPERIMENTS {
                println!("{n:16} {what}");
            }
            return Ok(());
        }
        "lenet-mnist" => lenet_mnist(&datasets, epochs.unwrap_or(3))?,
        "approxtrain-mnist" => approxtrain_mnist(&datasets, epochs.unwrap_or(3))?,
        "sparse-act-cifar10" => {
            let setup = Setup::new(
                &sparse_act::DEFAULTS,
                &hinm.backend,
                hinm.model.clone(),
                epochs,
                train_limit,
                test_limit,
            );
            stopped(sparse_act_cifar10(
                &datasets,
                &setup,
                &Budget::new(time_limit),
            )?)
        }
        "approxtrain-cifar10" => {
            let setup = Setup::new(
                &approxtrain_cifar::DEFAULTS,
                &hinm.backend,
                hinm.model.clone(),
                epochs,
                train_limit,
                test_limit,
            );
            stopped(approxtrain_cifar10(
                &datasets,
                &setup,
                &Budget::new(time_limit),
            )?)
        }
        "grim-gru" => grim_gru(&datasets, epochs.unwrap_or(20), fsdd_epochs, train_limit)?,
        "hinm-cifar10" => stopped(hinm_cifar10(
            &datasets,
            epochs,
            train_limit,
            test_limit,
            &hinm,
            &Budget::new(time_limit),
        )?),
        other => bail!(
            "unknown experiment `{other}`; known: {}",
            EXPERIMENTS
                .iter()
                .map(|e| e.0)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let out = crate::root().join(format!("docs/results/{file}.md"));
    std::fs::create_dir_all(out.parent().unwrap())?;
    std::fs::write(&out, md)?;
    println!("wrote {}", out.display());
    Ok(())
}

/// `path` as the results docs show it: relative to the workspace root when inside or beside it
/// (`../shared/datasets/mnist`), never a machine's absolute path.
fn shown(path: &std::path::Path) -> String {
    let root = crate::root();
    match path.strip_prefix(&root) {
        Ok(rel) => rel.display().to_string(),
        Err(_) => path.file_name().map_or_else(
            || path.display().to_string(),
            |n| format!("<DIR>/{}", n.to_string_lossy()),
        ),
    }
}

/// The short hash of the checked-out commit (with `+changes` when the tree outside
/// `docs/results/` differs from it), or
/// `EMBER_COMMIT` where the workspace is a copy without its git metadata (a GPU machine running
/// a prebuilt `--ember`).
fn commit() -> String {
    if let Ok(c) = std::env::var("EMBER_COMMIT") {
        return c;
    }
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(crate::root())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let hash = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    // the experiments' own outputs (docs/results/) do not make the code a changed one
    let dirty = git(&[
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
        ".",
        ":!docs/results",
    ])
    .is_some_and(|s| !s.is_empty());
    if dirty {
        format!("{hash}+changes")
    } else {
        hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bcr_runs_split_their_epochs_into_admm_then_retraining() {
        assert_eq!(grim_split(10), (4, 6));
        assert_eq!(grim_split(20), (8, 12));
        assert_eq!(grim_split(6), (2, 4));
        assert_eq!(grim_split(2), (1, 1));
        assert_eq!(GRIM_UPDATES.div_ceil(grim_split(10).0), 8);
        assert_eq!(grim_split(grim_epochs(10)), (5, 7));
        assert_eq!(grim_split(grim_epochs(20)), (10, 14));
        assert_eq!(grim_epochs(2), 2);
        let err = grim_gru(Path::new("/nowhere"), 1, 6, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("at least 2 epochs"), "{err}");
    }

    #[test]
    fn a_missing_prebuilt_ember_is_a_clear_error_before_any_work() {
        let options = Options {
            datasets: None,
            epochs: None,
            train_limit: None,
            test_limit: None,
            hinm: HinmSetup {
                backend: "cuda".into(),
                model: Some("resnet18-cifar".into()),
                tile: Some(64),
                tune_epochs: Some(1),
                seeds: 3,
            },
            ember: Some(PathBuf::from("/nonexistent/ember")),
            fsdd_epochs: 6,
            time_limit: None,
        };
        let err = run("hinm-cifar10", options).unwrap_err().to_string();
        assert!(
            err.contains("--ember /nonexistent/ember: no such file"),
            "{err}"
        );
        assert!(PREBUILT.get().is_none(), "nothing set from a bad path");
    }

    #[test]
    fn numbers_that_would_train_nothing_are_refused_before_any_work() {
        let options = |epochs, seeds, time_limit| Options {
            datasets: Some(PathBuf::from("/nonexistent")),
            epochs,
            train_limit: None,
            test_limit: None,
            hinm: HinmSetup {
                backend: "ndarray".into(),
                model: None,
                tile: None,
                tune_epochs: None,
                seeds,
            },
            ember: None,
            fsdd_epochs: 6,
            time_limit,
        };
        for (name, o, needle) in [
            ("approxtrain-cifar10", options(Some(0), 3, None), "--epochs"),
            ("sparse-act-cifar10", options(Some(0), 3, None), "--epochs"),
            ("hinm-cifar10", options(None, 0, None), "--seeds"),
            ("hinm-cifar10", options(None, 3, Some(-5.0)), "--time-limit"),
            (
                "hinm-cifar10",
                options(None, 3, Some(f64::NAN)),
                "--time-limit",
            ),
            (
                "hinm-cifar10",
                Options {
                    hinm: HinmSetup {
                        tune_epochs: Some(0),
                        ..options(None, 3, None).hinm
                    },
                    ..options(None, 3, None)
                },
                "--tune-epochs",
            ),
        ] {
            let err = run(name, o).unwrap_err().to_string();
            assert!(err.contains(needle), "{name}: {err}");
        }
    }
}
