//! `cargo xtask reproduce <name>`: experiments that write `docs/results/<name>.md`.
//!
//! Each experiment builds the release `ember` binary once and runs it, so what is reported is
//! exactly what a user gets from the CLI.

use anyhow::{Context, Result, bail};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The experiments: name and what it does.
const EXPERIMENTS: &[(&str, &str)] = &[(
    "lenet-mnist",
    "LeNet-5 and LeNet-300-100 on full MNIST, on ndarray and on wgpu: epoch time and test accuracy",
)];

fn ember_binary() -> Result<PathBuf> {
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

fn train(bin: &Path, out: &Path, args: &[&str]) -> Result<RunResult> {
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

fn lenet_mnist(datasets: &Path, epochs: usize) -> Result<String> {
    let mnist = datasets.join("mnist");
    if !mnist.is_dir() {
        bail!("{} not found: pass --datasets", mnist.display());
    }
    let bin = ember_binary()?;
    let root = crate::root();
    let work = root.join("target/reproduce/lenet-mnist");
    let results = root.join("docs/results");
    std::fs::create_dir_all(&results)?;
    let epochs_s = epochs.to_string();
    let mut md = String::new();
    writeln!(md, "# LeNet on full MNIST\n")?;
    writeln!(
        md,
        "Written by `cargo xtask reproduce lenet-mnist --epochs {epochs}`: `ember train --data-dir \
         {} --epochs {epochs} --batch-size 32 --lr 2e-3 --seed 42` (Adam), 60,000 training and \
         10,000 test images, on {} CPU cores. Epoch time is wall time of one epoch of training \
         plus the evaluation on the test split; burn's `autotune` was off. `wgpu` runs on the \
         machine's Vulkan adapter: on Ember's CI machines that is Mesa's lavapipe, software \
         Vulkan on the same CPU cores.\n",
        mnist.display(),
        crate::cores()
    )?;
    writeln!(
        md,
        "| model | backend | epoch times (s) | mean epoch (s) | test accuracy |"
    )?;
    writeln!(md, "|---|---|---|---:|---:|")?;
    let mut images = String::new();
    for model in ["lenet5", "lenet300"] {
        for backend in ["ndarray", "wgpu"] {
            let out = work.join(format!("{model}-{backend}"));
            let args = [
                "--model",
                model,
                "--backend",
                backend,
                "--epochs",
                &epochs_s,
                "--batch-size",
                "32",
                "--lr",
                "2e-3",
                "--seed",
                "42",
                "--data-dir",
                mnist.to_str().context("non-UTF-8 path")?,
            ];
            let r = train(&bin, &out, &args)?;
            let mean = r.epoch_seconds.iter().sum::<f64>() / r.epoch_seconds.len().max(1) as f64;
            let times: Vec<String> = r.epoch_seconds.iter().map(|s| format!("{s:.1}")).collect();
            writeln!(
                md,
                "| {model} | {backend} | {} | {mean:.1} | {:.2} % |",
                times.join(", "),
                r.test_accuracy
            )?;
            let png = format!("lenet-mnist-{model}-{backend}.png");
            std::fs::copy(out.join("curves.png"), results.join(&png))?;
            writeln!(images, "\n![{model} on {backend}]({png})")?;
        }
    }
    md.push_str(&images);
    Ok(md)
}

/// Runs experiment `name`.
pub fn run(name: &str, datasets: Option<PathBuf>, epochs: Option<usize>) -> Result<()> {
    let datasets = datasets.unwrap_or_else(|| crate::root().join("../shared/datasets"));
    let md = match name {
        "list" => {
            for (n, what) in EXPERIMENTS {
                println!("{n:16} {what}");
            }
            return Ok(());
        }
        "lenet-mnist" => lenet_mnist(&datasets, epochs.unwrap_or(3))?,
        other => bail!(
            "unknown experiment `{other}`; known: {}",
            EXPERIMENTS
                .iter()
                .map(|e| e.0)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let out = crate::root().join(format!("docs/results/{name}.md"));
    std::fs::create_dir_all(out.parent().unwrap())?;
    std::fs::write(&out, md)?;
    println!("wrote {}", out.display());
    Ok(())
}
