//! Ember's developer tasks, run as `cargo xtask <task>`.
//!
//! - `test`: what CI runs: generated code up to date, no import cycle between modules,
//!   `cargo fmt --check`,
//!   `cargo clippy --all-targets --all-features -D warnings`, `cargo doc` with rustdoc's
//!   warnings as errors, every test including doc tests. The `mpi` feature (and its `mpirun`
//!   tests) is built where an MPI is installed (`mpicc`); `EMBER_REQUIRE_MPI=1` (CI) makes a
//!   missing MPI an error.
//! - `bench`: runs the criterion benches and writes `docs/benchmarks.md`; the model-step rows
//!   also `docs/model-steps.csv`, beside PyTorch's (`model_steps`).
//! - `reproduce <name>`: a paper or README experiment, writing `docs/results/`.
//! - `gen-decorator [--check]`: regenerates the decorator forwarding from burn-backend's traits.
//! - `gpu-bundle`: the CUDA build of the kernel tests, benches and `ember`, with `run.sh`, for a
//!   GPU machine without Rust; `gpu-run` is its runner (docs/gpu-bundle.md); `gpu-rows DIR`
//!   merges a run's model-step rows into `docs/model-steps.csv` and `docs/benchmarks.md`.

// Doc comments on clap arguments are the `--help` text, written for a terminal (`<epoch>`,
// `[[layer]]`), not rustdoc markup.
#![allow(rustdoc::invalid_html_tags, rustdoc::broken_intra_doc_links)]

mod bench;
mod cycles;
mod gen_decorator;
mod gpu_bundle;
mod gpu_run;
mod model_steps;
mod reproduce;
mod runner;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

#[derive(Parser)]
#[command(name = "xtask", about = "Ember developer tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// fmt check, clippy -D warnings, cargo doc without warnings, every test (incl. doc
    /// tests): what CI runs.
    Test {
        /// Skip fmt, clippy and doc (tests only).
        #[arg(long)]
        quick: bool,
    },
    /// Run the criterion benches and write docs/benchmarks.md.
    Bench {
        /// Only benches whose name contains this text.
        #[arg(long)]
        filter: Option<String>,
    },
    /// Run a named experiment and write docs/results/<name>.md.
    Reproduce {
        /// Experiment name (`cargo xtask reproduce list` shows them).
        name: String,
        /// Dataset root (defaults to ../shared/datasets).
        #[arg(long)]
        datasets: Option<PathBuf>,
        /// Epochs per run.
        #[arg(long)]
        epochs: Option<usize>,
        /// Train on the first N training images only (sparse-act-cifar10).
        #[arg(long)]
        train_limit: Option<usize>,
        /// Test on the first N test images only (sparse-act-cifar10).
        #[arg(long)]
        test_limit: Option<usize>,
        /// Backend of every training and evaluation (hinm-cifar10, approxtrain-cifar10); a
        /// backend other than ndarray writes docs/results/<name>-<backend>.md.
        #[arg(long, default_value = "ndarray")]
        backend: String,
        /// Model (hinm-cifar10: default resnet18-cifar-w16; approxtrain-cifar10: resnet18-cifar
        /// on a GPU, resnet18-cifar-w16 on ndarray).
        #[arg(long)]
        model: Option<String>,
        /// Seconds this invocation may take (approxtrain-cifar10, hinm-cifar10): it stops
        /// cleanly before a stage would pass it, exit status 75, and the same command continues.
        #[arg(long, value_name = "SECONDS")]
        time_limit: Option<f64>,
        /// HiNM tile height V (hinm-cifar10; default 64 on a GPU, 16 on ndarray): it must
        /// divide every pruned layer's outputs.
        #[arg(long)]
        tile: Option<usize>,
        /// Epochs of each masked fine-tune (hinm-cifar10; default 5 on a GPU, 1 on ndarray).
        #[arg(long)]
        tune_epochs: Option<usize>,
        /// Seeds of each masked fine-tune (hinm-cifar10): 42, 43, …; their spread is the noise
        /// the permutation choices are compared against.
        #[arg(long, default_value_t = 3)]
        seeds: usize,
        /// Epochs of each FSDD run (grim-gru; --epochs sets Japanese Vowels').
        #[arg(long, default_value_t = 6)]
        fsdd_epochs: usize,
        /// A prebuilt `ember` binary (e.g. a `--features cuda` build on a GPU machine without
        /// Rust); default: `cargo build --release --bin ember`.
        #[arg(long)]
        ember: Option<PathBuf>,
    },
    /// Build the GPU bundle: release `--features cuda` kernel tests, benches and `ember`,
    /// stripped and packed with run.sh into one folder of at most 64 MiB.
    GpuBundle {
        /// Bundle folder (default target/gpu-bundle); an existing one is replaced only if it is
        /// a bundle.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Only `ember` and the runner (for `device-session.sh reproduce`): no test or bench
        /// binaries, so the bundle leaves room for CIFAR-10 and run state in one carry.
        #[arg(long)]
        ember_only: bool,
    },
    /// The bundle's runner (run.sh calls it): kernel tests, bench rows, one-epoch trainings and
    /// the PyTorch column on EMBER_TEST_RUNTIME's runtime; prints one table.
    GpuRun {
        /// Folder of the unpacked binaries.
        #[arg(long)]
        bin: PathBuf,
        /// Folder for logs, criterion's files and the trainings' runs.
        #[arg(long)]
        work: PathBuf,
        /// The PyTorch column's script.
        #[arg(long)]
        torch: Option<PathBuf>,
        /// Where the table is written (default <work>/report.md).
        #[arg(long)]
        report: Option<PathBuf>,
        /// Criterion's filter (a regex) of the bench rows (default: the runtime's name, i.e.
        /// every device row).
        #[arg(long)]
        bench_filter: Option<String>,
        /// Criterion's warm-up seconds per bench row.
        #[arg(long, default_value_t = 0.5)]
        warm_up: f64,
        /// Criterion's measurement seconds per bench row.
        #[arg(long, default_value_t = 1.0)]
        measure: f64,
        /// Leave a part out (repeatable).
        #[arg(long, value_enum)]
        skip: Vec<gpu_run::Part>,
        /// Seconds each binary may run before it is stopped and reported as timed out.
        #[arg(long, default_value_t = 900)]
        timeout: u64,
        /// Train on the first N training images only.
        #[arg(long)]
        train_limit: Option<usize>,
        /// Test on the first N test images only.
        #[arg(long)]
        test_limit: Option<usize>,
    },
    /// Merge a GPU bundle run's model-step rows into docs/model-steps.csv and
    /// docs/benchmarks.md: DIR is the runner's work folder (or a copy of its criterion/,
    /// torch.json and BUNDLE.txt).
    GpuRows {
        /// The run's work folder.
        dir: PathBuf,
    },
    /// Regenerate cubecl-kernels/src/decorator/generated/ from burn-backend's op traits.
    GenDecorator {
        /// Fail if the checked-in file differs from what would be generated.
        #[arg(long)]
        check: bool,
    },
}

/// The workspace root (the parent of xtask/): from the `CARGO_MANIFEST_DIR` that `cargo run`
/// sets, so a binary built in another checkout sharing the target directory (whose source
/// fingerprints match) still works on this one; the compile-time path otherwise.
pub fn root() -> PathBuf {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .filter(|d| d.join("Cargo.toml").is_file())
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    dir.parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// Cargo's target directory (`CARGO_TARGET_DIR`, else `target/` in the workspace).
pub fn target_dir() -> PathBuf {
    std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root().join("target"))
}

/// Writes `text` to `path` through a temporary file renamed over it: an interrupted write
/// leaves the old file.
pub(crate) fn write_atomic(path: &std::path::Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming onto {}", path.display()))
}

/// Number of CPU cores, as reported in the written reports.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// This machine's CPU as the reports name it: its model name, family and model numbers and
/// its widest vector extension (`/proc/cpuinfo`), or the architecture where that is not read.
pub(crate) fn cpu() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    cpu_of(&info).unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// [`cpu`] of a `/proc/cpuinfo` text (its first processor's fields).
fn cpu_of(info: &str) -> Option<String> {
    let field = |name: &str| {
        info.lines()
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    };
    let name = field("model name")?;
    let flags = field("flags").unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    let vector = if has("avx512f") {
        ", AVX-512"
    } else if has("avx2") {
        ", AVX2"
    } else {
        ""
    };
    Some(match (field("cpu family"), field("model")) {
        (Some(family), Some(model)) => format!("{name}, family {family} model {model}{vector}"),
        _ => format!("{name}{vector}"),
    })
}

/// Runs `cargo <args>` in the workspace root, printing its wall time.
pub fn cargo(args: &[&str]) -> Result<()> {
    cargo_env(args, &[])
}

/// [`cargo`] with `vars` set in its environment.
pub(crate) fn cargo_env(args: &[&str], vars: &[(&str, &str)]) -> Result<()> {
    let start = Instant::now();
    println!("==> cargo {}", args.join(" "));
    let status = Command::new(env!("CARGO"))
        .args(args)
        .envs(vars.iter().copied())
        .current_dir(root())
        .status()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    println!(
        "==> cargo {} took {:.1} s",
        args.first().copied().unwrap_or(""),
        start.elapsed().as_secs_f64()
    );
    if !status.success() {
        bail!("cargo {} failed ({status})", args.join(" "));
    }
    Ok(())
}

/// Whether this machine can build and run the `mpi` feature (an MPI with `mpicc`); with
/// `EMBER_REQUIRE_MPI=1`, its absence is an error.
fn mpi_available() -> Result<bool> {
    let found = Command::new("mpicc")
        .arg("--showme:version")
        .output()
        .is_ok_and(|o| o.status.success())
        && Command::new("mpirun")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    let required = std::env::var("EMBER_REQUIRE_MPI").is_ok_and(|v| v == "1");
    match (found, required) {
        (true, _) => Ok(true),
        (false, true) => bail!(
            "EMBER_REQUIRE_MPI=1 but no MPI here (mpicc, mpirun): apt-get install -y openmpi-bin \
             libopenmpi-dev libclang-dev"
        ),
        (false, false) => {
            println!(
                "==> no MPI here (mpicc, mpirun): the `mpi` feature and its mpirun tests are \
                 skipped; apt-get install -y openmpi-bin libopenmpi-dev libclang-dev builds them"
            );
            Ok(false)
        }
    }
}

/// The workspace's own packages as `cargo metadata --no-deps` describes them.
pub fn metadata() -> Result<serde_json::Value> {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(root())
        .output()
        .context("cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// Every feature of the workspace's crates but `mpi`, as `crate/feature` (what `--all-features`
/// means on a machine without MPI).
fn features_but_mpi() -> Result<String> {
    let meta = metadata()?;
    let mut all = Vec::new();
    for package in meta["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or_default();
        for feature in package["features"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|f| f.0)
        {
            if feature != "default" && feature != "mpi" {
                all.push(format!("{name}/{feature}"));
            }
        }
    }
    Ok(all.join(","))
}

fn test(quick: bool) -> Result<()> {
    gen_decorator::run(&root(), true)?;
    cycles::check(&root())?;
    let mpi = mpi_available()?;
    let every = match mpi {
        true => vec!["--all-features".to_string()],
        false => vec!["--features".to_string(), features_but_mpi()?],
    };
    let every: Vec<&str> = every.iter().map(String::as_str).collect();
    if !quick {
        cargo(&["fmt", "--all", "--check"])?;
        // every feature: the `cuda` build is checked too (it needs no CUDA toolkit).
        let mut clippy = vec!["clippy", "--workspace", "--all-targets"];
        clippy.extend(&every);
        clippy.extend(["--", "-D", "warnings"]);
        cargo(&clippy)?;
        // The API docs of Ember's own crates: a broken link or a public doc that links to a
        // private item fails like a clippy warning.
        let mut doc = vec!["doc", "--workspace", "--no-deps"];
        doc.extend(&every);
        cargo_env(&doc, &[("RUSTDOCFLAGS", "-D warnings")])?;
    }
    // Libraries, binaries and integration tests; benches are only type-checked (by clippy
    // above): building each criterion bench as a test binary would monomorphise Burn's backends
    // once more per bench for no test. With MPI, `ember` is built with `--ddp mpi` and its
    // mpirun tests run. The doc tests and the examples are built with the same packages and
    // features selected, so that they link the libraries this build made: any other selection
    // resolves other features and compiles `ember-train` (the largest crate) again.
    let features: &[&str] = match mpi {
        true => &["--features", "ember-cli/mpi"],
        false => &[],
    };
    // Each test in a process of its own, a core each (`runner.rs`: one compute server a
    // process queues the kernel compilations of libtest's threads behind one another).
    let mut tests = vec!["test", "--workspace", "--lib", "--bins", "--tests"];
    tests.extend(features);
    runner::run(&tests, cores())?;
    let mut doc = vec!["test", "--workspace", "--doc"];
    doc.extend(features);
    cargo(&doc)?;
    run_examples(features)
}

/// The model-zoo examples of `ember-train` (`models/train/examples`), each run to its end: the
/// ones on data in the repository always, `bcr_gru` where `../shared/datasets/japanese-vowels`
/// is beside the repository. They are built with the whole workspace selected and `features`
/// (as the tests were) and run from the target directory, since `cargo run -p ember-train`
/// would resolve features for that package alone and build again.
fn run_examples(features: &[&str]) -> Result<()> {
    let jv = root().join("../shared/datasets/japanese-vowels");
    let examples: Vec<&str> = [
        "approx_lenet",
        "prelu_broadcast",
        "sparse_act_resmlp",
        "hinm_resnet",
        "stack",
        "bcr_gru",
    ]
    .into_iter()
    .filter(|&example| {
        let run = example != "bcr_gru" || jv.is_dir();
        if !run {
            eprintln!("==> skipping the example {example}: no {}", jv.display());
        }
        run
    })
    .collect();
    let mut build = vec!["build", "--workspace"];
    for example in &examples {
        build.extend(["--example", example]);
    }
    build.extend(features);
    cargo(&build)?;
    let dir = PathBuf::from(
        metadata()?["target_directory"]
            .as_str()
            .context("cargo metadata has no target_directory")?,
    )
    .join("debug/examples");
    for example in examples {
        let start = Instant::now();
        println!("==> example {example}");
        let status = Command::new(dir.join(example))
            .current_dir(root())
            .status()
            .with_context(|| format!("running the example {example} in {}", dir.display()))?;
        println!(
            "==> example {example} took {:.1} s",
            start.elapsed().as_secs_f64()
        );
        if !status.success() {
            bail!("the example {example} failed ({status})");
        }
    }
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.task {
        Task::Test { quick } => test(quick),
        Task::Bench { filter } => {
            bench::run(filter.as_deref())?;
            // the whole-model steps: a second, one-thread pass, and PyTorch beside them
            match model_steps::selected(filter.as_deref()) {
                true => model_steps::run(),
                false => Ok(()),
            }
        }
        Task::Reproduce {
            name,
            datasets,
            epochs,
            train_limit,
            test_limit,
            backend,
            model,
            tile,
            tune_epochs,
            seeds,
            fsdd_epochs,
            ember,
            time_limit,
        } => reproduce::run(
            &name,
            reproduce::Options {
                datasets,
                epochs,
                train_limit,
                test_limit,
                hinm: reproduce::HinmSetup {
                    backend,
                    model,
                    tile,
                    tune_epochs,
                    seeds,
                },
                ember,
                fsdd_epochs,
                time_limit,
            },
        ),
        Task::GenDecorator { check } => gen_decorator::run(&root(), check),
        Task::GpuBundle { out, ember_only } => gpu_bundle::run(out, ember_only),
        Task::GpuRows { dir } => {
            let bundle = std::fs::read_to_string(dir.join("BUNDLE.txt")).unwrap_or_default();
            let commit = bundle
                .lines()
                .find_map(|l| l.strip_prefix("commit "))
                .unwrap_or("an unnamed commit");
            model_steps::import_gpu(&dir, commit)
        }
        Task::GpuRun {
            bin,
            work,
            torch,
            report,
            bench_filter,
            warm_up,
            measure,
            skip,
            timeout,
            train_limit,
            test_limit,
        } => gpu_run::run(gpu_run::Options {
            bin,
            work,
            torch,
            report,
            bench_filter,
            bench_seconds: (warm_up, measure),
            skip,
            timeout,
            train_limit,
            test_limit,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::cpu_of;

    #[test]
    fn the_cpu_is_named_by_its_model_family_and_widest_vectors() {
        let info = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n\
                    model name\t: AMD EPYC 9R14\nflags\t\t: fpu sse avx2 avx512f\n\n\
                    processor\t: 1\nmodel name\t: other\n";
        assert_eq!(
            cpu_of(info).as_deref(),
            Some("AMD EPYC 9R14, family 25 model 17, AVX-512")
        );
        let avx2 = "model name\t: Intel Xeon\nflags\t: sse avx2\n";
        assert_eq!(cpu_of(avx2).as_deref(), Some("Intel Xeon, AVX2"));
        // no model name (another architecture's format): none
        assert_eq!(cpu_of("Processor\t: ARMv8\n"), None);
    }
}
