//! `sparse-act-cifar10`: SparseAct's sparsity grid on the small ResMLP.

use super::{cifar10_folder, ember_binary, train_with};
use anyhow::{Context, Result, bail};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// The SparseAct grid of the paper's Figs. 7-8 on CIFAR-10: dense, then s × b.
const SPARSE_ACT_GRID: [&str; 5] = ["off", "0.5:16", "0.5:64", "0.8:16", "0.8:64"];

pub(super) fn sparse_act_cifar10(
    datasets: &Path,
    epochs: usize,
    train_limit: Option<usize>,
    test_limit: Option<usize>,
) -> Result<String> {
    let data = cifar10_folder(datasets)?;
    let bin = ember_binary()?;
    let root = crate::root();
    let work = root.join("target/reproduce/sparse-act-cifar10");
    let results = root.join("docs/results");
    std::fs::create_dir_all(&results)?;
    let epochs_s = epochs.to_string();
    let limit_s = train_limit.map(|n| n.to_string());
    let test_limit_s = test_limit.map(|n| n.to_string());
    let data_s = data.to_str().context("non-UTF-8 path")?;
    let mut runs = Vec::new();
    for policy in SPARSE_ACT_GRID {
        let out = work.join(if policy == "off" {
            "dense".to_string()
        } else {
            policy.replace(':', "-b")
        });
        let mut args = vec![
            "--model",
            "resmlp-small",
            "--dataset",
            "cifar10",
            "--data-dir",
            data_s,
            "--epochs",
            &epochs_s,
            "--batch-size",
            "64",
            "--lr",
            "1e-3",
            "--seed",
            "42",
        ];
        if policy != "off" {
            args.extend(["--sparse-act", policy]);
        }
        if let Some(n) = &limit_s {
            args.extend(["--train-limit", n]);
        }
        if let Some(n) = &test_limit_s {
            args.extend(["--test-limit", n]);
        }
        train_with(&bin, &out, &args)?;
        runs.push(out);
    }
    let figures = work.join("figures");
    let _ = std::fs::remove_dir_all(&figures);
    let output = Command::new(&bin)
        .arg("compare")
        .args(&runs)
        .arg("--out")
        .arg(&figures)
        .args(["--title", "ResMLP-small, CIFAR-10"])
        .output()?;
    if !output.status.success() {
        bail!(
            "ember compare failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let table = String::from_utf8_lossy(&output.stdout).into_owned();
    for f in ["loss.png", "accuracy-heatmap.png"] {
        std::fs::copy(
            figures.join(f),
            results.join(format!("sparse-act-cifar10-{f}")),
        )?;
    }
    let images = train_limit.map_or("all 50,000".to_string(), |n| format!("the first {n}"));
    let tests = test_limit.map_or("all 10,000".to_string(), |n| format!("the first {n}"));
    let mut md = String::new();
    writeln!(
        md,
        "# SparseAct on CIFAR-10: accuracy of the small ResMLP\n"
    )?;
    writeln!(
        md,
        "Written by `cargo xtask reproduce sparse-act-cifar10 --epochs {epochs}{}{}`: `ember train \
         --model resmlp-small --dataset cifar10 --epochs {epochs} --batch-size 64 --lr 1e-3 --seed 42 \
         [--sparse-act S:B]` (Adam, ndarray backend, {} CPU cores, Burn's autotune off), trained on \
         {images} training images of `cifar10-jpg.tar.gz` with random crop + flip, tested on {tests} \
         test images (the ImageFolder loader interleaves classes, so the first N are balanced). The small ResMLP is ResMLP-S12's structure at d = 128 with 4 blocks \
         and 4×4 patches (N = 64 patches); every linear layer's saved input is pruned (the \
         cross-patch layers' rows have 64 values, so b = 64 is one block per row there and keeps \
         it whole). Every run starts from the same seed. The paper trains ResMLP-S12 on CIFAR-10 \
         for far longer; this is a fixed small budget on a CPU, so compare the runs with each \
         other, not with published accuracies. Mean epoch time is wall time of training plus the \
         test evaluation.\n",
        train_limit.map_or(String::new(), |n| format!(" --train-limit {n}")),
        test_limit.map_or(String::new(), |n| format!(" --test-limit {n}")),
        crate::cores()
    )?;
    md.push_str(&table);
    md.push_str(
        "\n![training and test loss per epoch](sparse-act-cifar10-loss.png)\n\n\
         ![test accuracy relative to dense, pp](sparse-act-cifar10-accuracy-heatmap.png)\n",
    );
    Ok(md)
}
