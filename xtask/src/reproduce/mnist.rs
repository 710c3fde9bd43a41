//! `lenet-mnist` and `approxtrain-mnist`: the LeNets on full MNIST, ApproxTrain's tables.

use super::{commit, ember_binary, eval, shown, train};
use anyhow::{Result, bail};
use std::fmt::Write as _;
use std::path::Path;

pub(super) fn lenet_mnist(datasets: &Path, epochs: usize) -> Result<String> {
    let mnist = datasets.join("mnist");
    if !mnist.is_dir() {
        bail!("{} not found: pass --datasets", mnist.display());
    }
    let bin = ember_binary()?;
    let root = crate::root();
    let work = root.join("target/reproduce/lenet-mnist");
    let results = root.join("docs/results");
    std::fs::create_dir_all(&results)?;
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
        shown(&mnist),
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
            let r = train(&bin, &out, [model, backend, "native"], epochs, &mnist)?;
            let mean = r.mean_epoch();
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

/// ApproxTrain's multipliers: (label, `--multiplier`, the paper's Table III name).
const APPROXTRAIN: [(&str, &str); 5] = [
    ("FP32", "native"),
    ("AFM32", "afm32"),
    ("bfloat16", "bf16"),
    ("AFM16", "afm16"),
    ("MIT16", "mit16"),
];

pub(super) fn approxtrain_mnist(datasets: &Path, epochs: usize) -> Result<String> {
    let mnist = datasets.join("mnist");
    if !mnist.is_dir() {
        bail!("{} not found: pass --datasets", mnist.display());
    }
    let bin = ember_binary()?;
    let root = crate::root();
    let work = root.join("target/reproduce/approxtrain-mnist");
    let results = root.join("docs/results");
    std::fs::create_dir_all(&results)?;
    // ApproxTrain Table III (test accuracy %, MNIST).
    let paper = |model: &str, label: &str| -> &'static str {
        match (model, label) {
            ("lenet300", "FP32") => "96.9",
            ("lenet300", "AFM32") => "97.1",
            ("lenet300", "bfloat16") => "96.7",
            ("lenet300", "AFM16") => "96.8",
            ("lenet5", "FP32" | "AFM32" | "bfloat16" | "AFM16") => "98.3",
            _ => "–",
        }
    };
    let paper_cell = |model: &str, label: &str| match paper(model, label) {
        "–" => "–".to_string(),
        v => format!("{v} %"),
    };
    let mut md = String::new();
    writeln!(md, "# ApproxTrain on MNIST: LeNet-300-100 and LeNet-5\n")?;
    writeln!(md, "Produced by the `ember` of commit {}.\n", commit())?;
    writeln!(
        md,
        "Written by `cargo xtask reproduce approxtrain-mnist --epochs {epochs}`: `ember train --data-dir {} \
         --epochs {epochs} --batch-size 32 --lr 2e-3 --seed 42 --multiplier M` (Adam, ndarray backend, \
         so every approximate product runs on the multi-threaded host path), 60,000 training and 10,000 \
         test images, {} CPU cores. The same seed for every multiplier of a network. Every \
         multiply of every linear and convolution layer, forward and both gradients, goes through \
         the multiplier; accumulation is FP32. FP32 is the backend's own arithmetic (`native`); \
         AFM32/AFM16 are the minimally biased multiplier at 23/7 mantissa bits (`mbm23`, `mbm7`), \
         bfloat16 is ApproxTrain's `ACC_7` (truncation to 7 bits, `bf16`), MIT16 Mitchell's \
         multiplier at 7 bits. ApproxTrain trains until the accuracy stabilises (≤ 20 epochs for \
         the LeNets); these runs are {epochs} epochs. Epoch times are wall times of these runs \
         (training + test evaluation); kernel speed is measured by `cargo xtask bench` \
         (`docs/benchmarks.md`).\n",
        shown(&mnist),
        crate::cores()
    )?;
    let mut images = String::new();
    let mut cross = String::new();
    for (model, title) in [("lenet300", "LeNet-300-100"), ("lenet5", "LeNet-5")] {
        writeln!(md, "## {title}: Table III\n")?;
        writeln!(
            md,
            "| multiplier | `--multiplier` | test accuracy | paper (Table III) | mean epoch (s) |"
        )?;
        writeln!(md, "|---|---|---:|---:|---:|")?;
        writeln!(cross, "## {title}: cross-format testing (Table IV style)\n")?;
        let header: Vec<&str> = APPROXTRAIN.iter().map(|(l, _)| *l).collect();
        writeln!(
            cross,
            "| trained with \\ tested with | {} |",
            header.join(" | ")
        )?;
        writeln!(cross, "|---|{}", "---:|".repeat(header.len()))?;
        for (label, mul) in APPROXTRAIN {
            let out = work.join(format!("{model}-{mul}"));
            let r = train(&bin, &out, [model, "ndarray", mul], epochs, &mnist)?;
            let mean = r.mean_epoch();
            writeln!(
                md,
                "| {label} | `{mul}` | {:.2} % | {} | {mean:.1} |",
                r.test_accuracy,
                paper_cell(model, label)
            )?;
            let png = format!("approxtrain-mnist-{model}-{mul}.png");
            std::fs::copy(out.join("curves.png"), results.join(&png))?;
            writeln!(images, "\n![{title}, {label}]({png})")?;
            let mut row = Vec::new();
            for (test_label, test_mul) in APPROXTRAIN {
                let acc = if test_mul == mul {
                    r.test_accuracy
                } else {
                    eval(&bin, &out, test_mul, &mnist)?
                };
                let cell = format!("{acc:.2}");
                row.push(if test_label == label {
                    format!("**{cell}**")
                } else {
                    cell
                });
            }
            writeln!(cross, "| {label} | {} |", row.join(" | "))?;
        }
        writeln!(md)?;
        writeln!(cross)?;
    }
    md.push_str(&cross);
    md.push_str("## Training curves\n");
    md.push_str(&images);
    Ok(md)
}
