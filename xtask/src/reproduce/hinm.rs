//! `hinm-cifar10`: HiNM's permutation choices on a narrow ResNet-18.

use super::{
    HinmSetup, accuracy_of, cifar10_folder, commit, ember_binary, ember_out, refs, train_with,
};
use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Saliency kept by each permutation choice over every pruned layer of an `ember prune`
/// report (`hinm.json`), as a fraction of those layers' total.
fn retained(report: &Path) -> Result<[f64; 3]> {
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(report)?)?;
    let (mut kept, mut total) = ([0.0; 3], 0.0);
    for layer in json["layers"].as_array().context("layers")? {
        let Some(r) = layer["retained"].as_array() else {
            continue;
        };
        let t = layer["total"].as_f64().context("total")?;
        total += t;
        for (k, v) in kept.iter_mut().zip(r) {
            *k += v.as_f64().context("retained")? * t;
        }
    }
    Ok(kept.map(|k| k / total.max(f64::MIN_POSITIVE)))
}

/// HiNM on CIFAR-10 with the narrow ResNet-18 (`resnet18-cifar-w16`, V = 16: its layers have 16
/// to 128 channels, and V must divide them).
pub(super) fn hinm_cifar10(
    datasets: &Path,
    epochs: usize,
    train_limit: Option<usize>,
    test_limit: Option<usize>,
    setup: &HinmSetup,
) -> Result<String> {
    let HinmSetup {
        backend,
        model,
        tile,
        tune_epochs,
    } = setup;
    let model = model.as_deref().unwrap_or("resnet18-cifar-w16");
    let data = cifar10_folder(datasets)?;
    let bin = ember_binary()?;
    let work = crate::root().join(format!("target/reproduce/hinm-cifar10-{backend}"));
    let _ = std::fs::remove_dir_all(work.join("pruned"));
    let data_s = data.to_str().context("non-UTF-8 path")?;
    let path = |p: &Path| p.to_str().map(str::to_string).context("non-UTF-8 path");
    let train_args = |epochs: usize, extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = [
            "--model",
            model,
            "--backend",
            backend,
            "--dataset",
            "cifar10",
            "--data-dir",
            data_s,
            "--batch-size",
            "64",
            "--lr",
            "1e-3",
            "--seed",
            "42",
            "--epochs",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.push(epochs.to_string());
        for (flag, n) in [("--train-limit", train_limit), ("--test-limit", test_limit)] {
            if let Some(n) = n {
                a.extend([flag.to_string(), n.to_string()]);
            }
        }
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    // every accuracy below from `ember eval` on the same test images
    let limit = test_limit.map(|n| n.to_string());
    let test = |run: &Path| -> Result<f64> {
        let run = path(run)?;
        let mut args = vec![
            "eval",
            "--checkpoint",
            &run,
            "--data-dir",
            data_s,
            "--backend",
            backend,
        ];
        if let Some(n) = &limit {
            args.extend(["--test-limit", n]);
        }
        accuracy_of(&ember_out(&bin, &args)?)
    };
    let dense = work.join("dense");
    let dense_run = train_with(&bin, &dense, &refs(&train_args(epochs, &[])))?;
    let dense_s = path(&dense)?;
    let dense_accuracy = test(&dense.join("model.mpk"))?;
    // the 1×1 shortcut convolutions of the first stages have K = 16 or 32 inputs: at 93.75 %
    // no group of 4 survives there, so they stay dense at every level (as the stem and fc)
    std::fs::create_dir_all(&work)?;
    let policy = work.join("hinm-policy.toml");
    std::fs::write(
        &policy,
        "[[layer]]\npath = \"blocks.*.shortcut.conv\"\nhinm = \"off\"\n",
    )?;
    let policy_s = path(&policy)?;
    let prune = |level: &str, perm: &str| -> Result<PathBuf> {
        let out = work.join(format!("pruned/{level}-{perm}"));
        ember_out(
            &bin,
            &[
                "prune",
                "--hinm",
                &format!("{level}:v{tile}"),
                "--perm",
                perm,
                "--seed",
                "42",
                "--checkpoint",
                &dense_s,
                "--out",
                &path(&out)?,
                "--policy",
                &policy_s,
            ],
        )?;
        Ok(out)
    };
    let mut levels = Vec::new();
    for level in ["75", "87.5", "93.75"] {
        let out = prune(level, "gyro")?;
        levels.push((level, retained(&out.join("hinm.json"))?));
    }
    let mut rows = Vec::new();
    for perm in ["none", "ovw", "gyro"] {
        let pruned = match perm {
            "gyro" => work.join("pruned/75-gyro"),
            _ => prune("75", perm)?,
        };
        let one_shot = test(&pruned)?;
        let tuned = work.join(format!("tuned-75-{perm}"));
        let level = format!("75:v{tile}");
        let extra = [
            "--hinm", &level, "--perm", perm, "--from", &dense_s, "--policy", &policy_s,
        ];
        let mut args = train_args(*tune_epochs, &extra);
        // a short fine-tune: a quarter of the training images
        if let Some(n) = train_limit {
            let at = args
                .iter()
                .position(|a| a == "--train-limit")
                .expect("set above");
            args[at + 1] = (n / 4).max(64).to_string();
        }
        let run = train_with(&bin, &tuned, &refs(&args))?;
        rows.push((perm, one_shot, test(&tuned)?, run.test_accuracy));
    }
    let mut md = String::new();
    writeln!(md, "# HiNM on CIFAR-10: {model} on {backend}\n")?;
    let shape = match model {
        "resnet18-cifar-w16" => {
            " (ResNet-18 with the CIFAR stem at widths 16/32/64/128, 701,466 parameters)"
        }
        "resnet18-cifar" => " (ResNet-18 with the CIFAR stem, 11,173,962 parameters)",
        _ => "",
    };
    let flags = [
        train_limit.map(|n| format!(" --train-limit {n}")),
        test_limit.map(|n| format!(" --test-limit {n}")),
        (backend != "ndarray").then(|| format!(" --backend {backend}")),
        (model != "resnet18-cifar-w16").then(|| format!(" --model {model}")),
        (*tile != 16).then(|| format!(" --tile {tile}")),
        (*tune_epochs != 1).then(|| format!(" --tune-epochs {tune_epochs}")),
    ]
    .into_iter()
    .flatten()
    .collect::<String>();
    let tune_images = match train_limit {
        Some(n) => format!("the first {} training images", (n / 4).max(64)),
        None => "all 50,000 training images".to_string(),
    };
    writeln!(
        md,
        "Written by `cargo xtask reproduce hinm-cifar10 --epochs {epochs}{flags}` at commit {} \
         ({} CPU cores, backend {backend}, Burn's autotune off). `{model}`{shape} trained dense \
         for {epochs} epochs (Adam 1e-3, batch 64, seed 42, random crop + flip) on {} training \
         images, {:.1} s an epoch; then `ember prune --hinm LEVEL:v{tile}` (the stem, the \
         classifier and the 1×1 shortcut convolutions stay dense: at 93.75 % the narrow model's \
         16 or 32 shortcut inputs keep no group of 4) and `ember train --hinm 75:v{tile} --perm P \
         --from dense --epochs {tune_epochs}` on {tune_images} (a short masked fine-tune). Every \
         accuracy is `ember eval --backend {backend}` on {} test images, packed models through \
         the HiNM product. Dense test accuracy: {:.2} %.\n",
        commit(),
        crate::cores(),
        train_limit.map_or("all 50,000".to_string(), |n| format!("the first {n}")),
        dense_run.mean_epoch(),
        test_limit.map_or("all 10,000".to_string(), |n| format!("the first {n}")),
        dense_accuracy,
    )?;
    writeln!(
        md,
        "## Saliency kept (Σ|w| after 2:4 ÷ Σ|w|, over the pruned layers)\n\n\
         | total sparsity | none | OVW | Gyro |\n|---|---:|---:|---:|"
    )?;
    for (level, [n, o, g]) in &levels {
        writeln!(md, "| {level} % | {n:.4} | {o:.4} | {g:.4} |")?;
    }
    writeln!(
        md,
        "\n## Accuracy at 75 % (V = {tile})\n\n\
         | permutation | one-shot | after the short masked fine-tune | the same, masked dense | paper, ResNet-18 ImageNet 75 % |\n\
         |---|---:|---:|---:|---:|"
    )?;
    let paper = |p: &str| match p {
        "none" => "63.79 %",
        "ovw" => "65.21 %",
        _ => "68.91 %",
    };
    for (perm, one, tuned, masked) in &rows {
        writeln!(
            md,
            "| {perm} | {one:.2} % | {tuned:.2} % | {masked:.2} % | {} |",
            paper(perm)
        )?;
    }
    writeln!(
        md,
        "\n\"The same, masked dense\" is the fine-tune's own test at its end (the dense model with \
         its masks applied, through the backend's dense ops); it equals the packed model's column \
         when the packed path is right.\n\nThe paper's figures are ImageNet accuracies after its full fine-tuning schedule; these \
         are a CIFAR network after {epochs} epochs and a {tune_epochs}-epoch fine-tune: compare \
         the permutation choices with each other, not with the paper's numbers."
    )?;
    Ok(md)
}
