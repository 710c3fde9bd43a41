//! `approxtrain-cifar10`: ApproxTrain's Table III on CIFAR-10 (a ResNet-18 under FP32, AFM32,
//! bfloat16 and AFM16, the same seed and schedule) and the cross-format table, in stages that
//! resume: each format's run continues from its last epoch, and a finished one is reused.

use super::setup::{Defaults, Setup};
use super::stage::{Budget, Stopped, mean_epoch, stage};
use super::{Cifar, commit, eval_on, shown};
use anyhow::Result;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The four formats of ApproxTrain's Table III, with the paper's ResNet-18 CIFAR-10 accuracy.
const FORMATS: [(&str, &str, f64); 4] = [
    ("FP32", "native", 93.22),
    ("AFM32", "afm32", 93.23),
    ("bfloat16", "bf16", 93.48),
    ("AFM16", "afm16", 93.40),
];

/// The JSON key of a format: the dense baseline is `dense`, the others their `--multiplier`.
fn key(label: &str, mul: &str) -> String {
    if label == "FP32" {
        "dense".into()
    } else {
        mul.into()
    }
}

/// The defaults: on a GPU, ResNet-18 (CIFAR stem) on all of CIFAR-10 at batch 128 for 30
/// epochs; on ndarray, the 16-wide ResNet-18 on 5,000 training and 1,000 test images at batch 64
/// for 3 epochs. SGD either way, its rate on a cosine after one warm-up epoch.
pub(crate) const DEFAULTS: Defaults = Defaults {
    model: ["resnet18-cifar", "resnet18-cifar-w16"],
    epochs: [30, 3],
    batch: [128, 64],
    lr: [0.1, 0.05],
    warmup: [1, 1],
    cpu_limits: [5_000, 1_000],
};

/// The optimizer of the ResNets' runs (dense, approximate and fine-tuned): SGD with momentum
/// and weight decay, its rate on a cosine.
pub(crate) const SGD: [&str; 8] = [
    "--optimizer",
    "sgd",
    "--momentum",
    "0.9",
    "--weight-decay",
    "5e-4",
    "--schedule",
    "cosine",
];

/// The `ember train` arguments of the run of multiplier `mul` (every format's run is the same
/// but for it).
pub(crate) fn train_args(s: &Setup, data: &str, mul: &str) -> Vec<String> {
    let mut a = s.base_args(data);
    a.extend(SGD.map(str::to_string));
    for (flag, value) in [
        ("--multiplier", mul.to_string()),
        ("--epochs", s.epochs.to_string()),
        ("--lr", s.lr.to_string()),
        ("--warmup-epochs", s.warmup.to_string()),
        ("--seed", "42".to_string()),
    ] {
        a.extend([flag.to_string(), value]);
    }
    a.extend(s.limit_args());
    a
}

/// The directory of a dense (FP32) CIFAR-10 run of `args`, shared by the experiments that
/// start from it (`approxtrain-cifar10`'s FP32 row, `hinm-cifar10`'s dense model): named by a
/// hash of its arguments, so a run of other settings never replaces it.
pub(crate) fn dense_run(root: &Path, args: &[String]) -> PathBuf {
    // FNV-1a: stable across builds and platforms
    let hash = args
        .join(" ")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    root.join(format!("target/reproduce/cifar10-dense/{hash:016x}"))
}

/// What the document says each side computes in.
fn precision(backend: &str) -> &'static str {
    match backend {
        "cuda" => {
            "FP32 (`native`) runs Burn's CUDA matmul and convolution, which use TF32 tensor cores; \
             every approximate multiplier computes its own products and accumulates in f32"
        }
        _ => {
            "f32 throughout (the backend's matmul and convolution; the multipliers' products accumulate in f32)"
        }
    }
}

/// Runs the experiment; `Err(Stopped)` inside when the budget ran out first.
pub(crate) fn approxtrain_cifar10(
    datasets: &Path,
    setup: &Setup,
    budget: &Budget,
) -> Result<std::result::Result<String, Stopped>> {
    let Cifar {
        data,
        data_arg,
        bin,
        root,
        work,
        results,
    } = Cifar::new(datasets, "approxtrain-cifar10", &setup.backend)?;
    let data_s = data_arg.as_str();
    let mut runs: Vec<(PathBuf, f64)> = Vec::new();
    for (_, mul, _) in FORMATS {
        let args = train_args(setup, data_s, mul);
        let out = match mul {
            "native" => dense_run(&root, &args),
            _ => work.join(mul),
        };
        match stage(&bin, &out, &args, budget)? {
            Ok(acc) => runs.push((out, acc)),
            Err(stop) => return Ok(Err(stop)),
        }
    }
    // Every model tested under every format (ApproxTrain's Table IV).
    let mut cross: Vec<Vec<f64>> = Vec::new();
    for ((out, acc), (_, mul, _)) in runs.iter().zip(FORMATS) {
        let mut row = Vec::new();
        for (_, test_mul, _) in FORMATS {
            row.push(if test_mul == mul {
                *acc
            } else {
                if let Err(stop) =
                    budget.report(&format!("testing {} under {test_mul}", out.display()))
                {
                    return Ok(Err(stop));
                }
                eval_on(&bin, out, test_mul, &data, &setup.backend, setup.test_limit)?
            });
        }
        cross.push(row);
    }
    let json = document_json(setup, &runs, &cross);
    let name = super::result_name("approxtrain-cifar10", &setup.backend);
    std::fs::write(
        results.join(format!("{name}.json")),
        serde_json::to_string_pretty(&json)? + "\n",
    )?;
    for ((out, _), (_, mul, _)) in runs.iter().zip(FORMATS) {
        std::fs::copy(
            out.join("curves.png"),
            results.join(format!("{name}-{mul}.png")),
        )?;
    }
    Ok(Ok(document(setup, &data, &name, &runs, &cross)?))
}

/// The JSON beside the document: every accuracy it reports, keyed by the table's rows (the
/// dense baseline `dense`) and, for the cross-format table, trained-with then tested-with.
fn document_json(setup: &Setup, runs: &[(PathBuf, f64)], cross: &[Vec<f64>]) -> serde_json::Value {
    let mut accuracy = serde_json::Map::new();
    let mut table = serde_json::Map::new();
    for (((_, acc), row), (label, mul, _)) in runs.iter().zip(cross).zip(FORMATS) {
        accuracy.insert(key(label, mul), (*acc).into());
        let tested: serde_json::Map<String, serde_json::Value> = FORMATS
            .iter()
            .zip(row)
            .map(|((l, m, _), v)| (key(l, m), (*v).into()))
            .collect();
        table.insert(key(label, mul), tested.into());
    }
    let paper: serde_json::Map<String, serde_json::Value> = FORMATS
        .iter()
        .map(|(l, m, p)| (key(l, m), (*p).into()))
        .collect();
    serde_json::json!({
        "experiment": "approxtrain-cifar10",
        "commit": commit(),
        "backend": setup.backend,
        "model": setup.model,
        "precision": precision(&setup.backend),
        "settings": {
            "epochs": setup.epochs,
            "batch_size": setup.batch,
            "optimizer": "sgd",
            "momentum": 0.9,
            "weight_decay": 5e-4,
            "lr": setup.lr,
            "schedule": "cosine",
            "warmup_epochs": setup.warmup,
            "seed": 42,
            "augmentation": "random 32x32 crop of the 4-pixel zero-padded image, random horizontal flip",
            "train_limit": setup.train_limit,
            "test_limit": setup.test_limit,
        },
        "test_accuracy": accuracy,
        "cross_format": table,
        "paper": paper,
    })
}

fn document(
    setup: &Setup,
    data: &Path,
    name: &str,
    runs: &[(PathBuf, f64)],
    cross: &[Vec<f64>],
) -> Result<String> {
    let s = setup;
    let [images, tests] = s.images();
    let flags = s.flags();
    let mut md = String::new();
    writeln!(
        md,
        "# ApproxTrain on CIFAR-10: {} under four multipliers\n",
        s.model
    )?;
    writeln!(md, "Produced by the `ember` of commit {}.\n", commit())?;
    writeln!(
        md,
        "Written by `cargo xtask reproduce approxtrain-cifar10{flags}`. Each format's run is \
         `ember train --model {} --backend {} --dataset cifar10 --multiplier M --epochs {} \
         --batch-size {} --optimizer sgd --momentum 0.9 --weight-decay 5e-4 --lr {} --schedule \
         cosine --warmup-epochs {} --seed 42`: SGD with momentum, the rate rising linearly over \
         the first {} epoch{} and then falling along a cosine to 0, step by step; the same seed, \
         data order and schedule for every format. Trained on {images} training images of \
         `{}` (`cifar10-jpg.tar.gz`, JPEG re-encoded) with random crop (4-pixel zero padding) \
         and horizontal flip, tested on {tests} test images.\n",
        s.model,
        s.backend,
        s.epochs,
        s.batch,
        s.lr,
        s.warmup,
        s.warmup,
        if s.warmup == 1 { "" } else { "s" },
        shown(data),
    )?;
    if s.backend == "ndarray" {
        writeln!(
            md,
            "This is the small configuration a 2-core CPU runs in minutes: it checks the pipeline \
             and compares the formats with each other at a tiny budget, not the paper's figures. \
             The paper's scale is the same command with `--backend cuda` (ResNet-18, all of \
             CIFAR-10, batch 128; `docs/gpu-bundle.md`).\n"
        )?;
    }
    writeln!(
        md,
        "Every multiply of every convolution and linear layer, forward and both gradients, goes \
         through the multiplier. AFM32/AFM16 are the minimally biased multiplier at 23/7 mantissa \
         bits, bfloat16 is truncation to 7 bits (ApproxTrain's `ACC_7`). Precision: {}.\n",
        precision(&s.backend)
    )?;
    writeln!(md, "## Table III: test accuracy\n")?;
    writeln!(
        md,
        "| format | `--multiplier` | Ember | paper (ResNet-18, Table III) | mean epoch (s) |"
    )?;
    writeln!(md, "|---|---|---:|---:|---:|")?;
    for ((out, acc), (label, mul, paper)) in runs.iter().zip(FORMATS) {
        writeln!(
            md,
            "| {label} | `{mul}` | {acc:.2} % | {paper:.2} % | {:.1} |",
            mean_epoch(out)?
        )?;
    }
    let spread = runs.iter().map(|r| r.1).fold(f64::NEG_INFINITY, f64::max)
        - runs.iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
    writeln!(
        md,
        "\nThe four formats lie within {spread:.2} pp of each other (the paper's: 0.26 pp).\n"
    )?;
    writeln!(md, "## Cross-format testing (Table IV style)\n")?;
    let header: Vec<&str> = FORMATS.iter().map(|f| f.0).collect();
    writeln!(
        md,
        "| trained with \\ tested with | {} |",
        header.join(" | ")
    )?;
    writeln!(md, "|---|{}", "---:|".repeat(header.len()))?;
    for (row, (label, _, _)) in cross.iter().zip(FORMATS) {
        let cells: Vec<String> = row
            .iter()
            .zip(FORMATS)
            .map(|(v, (l, _, _))| {
                if l == label {
                    format!("**{v:.2}**")
                } else {
                    format!("{v:.2}")
                }
            })
            .collect();
        writeln!(md, "| {label} | {} |", cells.join(" | "))?;
    }
    writeln!(md, "\nThe accuracies are also in `{name}.json`.\n")?;
    writeln!(md, "## Training curves\n")?;
    for (label, mul, _) in FORMATS {
        writeln!(md, "![{label}]({name}-{mul}.png)\n")?;
    }
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gpu_runs_the_papers_scale_and_the_cpu_a_small_one() {
        let gpu = Setup::new(&DEFAULTS, "cuda", None, None, None, None);
        assert_eq!(
            (gpu.model.as_str(), gpu.epochs, gpu.batch, gpu.train_limit),
            ("resnet18-cifar", 30, 128, None)
        );
        let cpu = Setup::new(&DEFAULTS, "ndarray", None, Some(1), None, Some(100));
        assert_eq!(cpu.model, "resnet18-cifar-w16");
        assert_eq!((cpu.train_limit, cpu.test_limit), (Some(5_000), Some(100)));
        assert_eq!(cpu.warmup, 0, "one epoch leaves none to warm up in");
        let args = train_args(&gpu, "/data", "afm16").join(" ");
        assert!(
            args.contains("--multiplier afm16") && args.contains("--optimizer sgd"),
            "{args}"
        );
        assert!(!args.contains("--train-limit"), "{args}");
        let root = Path::new("/r");
        let dense = dense_run(root, &train_args(&gpu, "/data", "native"));
        assert_eq!(dense, dense_run(root, &train_args(&gpu, "/data", "native")));
        assert_ne!(dense, dense_run(root, &train_args(&cpu, "/data", "native")));
    }
}
