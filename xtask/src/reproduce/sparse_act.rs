//! `sparse-act-cifar10`: SparseAct's sparsity grid on a ResMLP (ResMLP-S12 on a GPU, the small
//! ResMLP on a CPU): accuracy and the measured activation memory of every cell, in stages that
//! resume.

use super::setup::{Defaults, Setup};
use super::stage::{Budget, Stopped, mean_epoch, stage};
use super::{Cifar, commit, ember_out, shown};
use anyhow::{Result, bail};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The grid of the paper's Figs. 7-8 (s × b) after the dense run, then the fused variant
/// (per-channel scales pruned too) at b = 64.
const GRID: [(&str, bool); 10] = [
    ("off", false),
    ("0.5:16", false),
    ("0.5:64", false),
    ("0.8:16", false),
    ("0.8:64", false),
    ("0.9:16", false),
    ("0.9:64", false),
    ("0.5:64", true),
    ("0.8:64", true),
    ("0.9:64", true),
];

/// A cell's name: its run directory and JSON key (`dense`, `0.5-b16`, `0.5-b64+scales`).
fn cell(policy: &str, fused: bool) -> String {
    match policy {
        "off" => "dense".into(),
        p => format!(
            "{}{}",
            p.replace(':', "-b"),
            if fused { "+scales" } else { "" }
        ),
    }
}

/// The paper's figures (Table IV, ResMLP-S12 on CIFAR-10 at batch 64).
fn paper(cell: &str) -> Option<f64> {
    match cell {
        "dense" => Some(91.0),
        "0.5-b64" => Some(90.0),
        _ => None,
    }
}

/// The defaults: ResMLP-S12 on all of CIFAR-10 for 30 epochs on a GPU, the small ResMLP on
/// 5,000 training and 1,000 test images for 3 epochs on a CPU; batch 64, Adam with weight decay,
/// its rate on a cosine after a warm-up, either way.
pub(crate) const DEFAULTS: Defaults = Defaults {
    model: ["resmlp-s12", "resmlp-small"],
    epochs: [30, 3],
    batch: [64, 64],
    lr: [1e-3, 1e-3],
    warmup: [2, 1],
    cpu_limits: [5_000, 1_000],
};

/// The `ember train` arguments of the cell `policy` (`off`: dense), `fused` for the variant
/// that prunes the scales' inputs too.
fn train_args(s: &Setup, data: &str, policy: &str, fused: bool) -> Vec<String> {
    let mut a = s.base_args(data);
    for (flag, value) in [
        ("--epochs", s.epochs.to_string()),
        ("--optimizer", "adam".to_string()),
        ("--lr", format!("{:e}", s.lr)),
        ("--weight-decay", "5e-5".to_string()),
        ("--schedule", "cosine".to_string()),
        ("--warmup-epochs", s.warmup.to_string()),
        ("--seed", "42".to_string()),
    ] {
        a.extend([flag.to_string(), value]);
    }
    if policy != "off" {
        a.extend(["--sparse-act".into(), policy.into()]);
    }
    if fused {
        a.push("--sparse-act-scales".into());
    }
    a.extend(s.limit_args());
    a
}

/// The activation memory (MiB) of every policy row of an `ember memory` table, by its
/// `S:B[+scales]` (`dense` for the baseline).
fn activations(table: &str) -> Result<BTreeMap<String, f64>> {
    let mut header = None;
    let mut out = BTreeMap::new();
    for line in table.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.first() == Some(&"policy S:B") {
            header = cells.iter().position(|c| *c == "activations");
            continue;
        }
        let (Some(col), Some(name)) = (header, cells.first()) else {
            continue;
        };
        if let Ok(v) = cells.get(col).unwrap_or(&"").parse::<f64>() {
            out.insert(name.to_string(), v);
        }
    }
    if out.is_empty() {
        bail!("no activation column in `ember memory`'s table:\n{table}");
    }
    Ok(out)
}

pub(super) fn sparse_act_cifar10(
    datasets: &Path,
    setup: &Setup,
    budget: &Budget,
) -> Result<std::result::Result<String, Stopped>> {
    let Cifar {
        data,
        data_arg,
        bin,
        work,
        results,
        ..
    } = Cifar::new(datasets, "sparse-act-cifar10", &setup.backend)?;
    let data_s = data_arg.as_str();
    let mut runs: Vec<(String, PathBuf, f64)> = Vec::new();
    for (policy, fused) in GRID {
        let name = cell(policy, fused);
        let out = work.join(&name);
        match stage(
            &bin,
            &out,
            &train_args(setup, data_s, policy, fused),
            budget,
        )? {
            Ok(acc) => runs.push((name, out, acc)),
            Err(stop) => return Ok(Err(stop)),
        }
    }
    // The training memory of every cell at the runs' batch, each in a process of its own.
    let mut memory_args = vec![
        "memory".to_string(),
        "--model".into(),
        setup.model.clone(),
        "--image-size".into(),
        "32".into(),
        "--batch".into(),
        "64".into(),
        "--backend".into(),
        setup.backend.clone(),
        "--fused".into(),
    ];
    for (policy, fused) in GRID {
        if policy != "off" && !fused {
            memory_args.extend(["--sparse-act".into(), policy.into()]);
        }
    }
    let memory_table = ember_out(&bin, &super::refs(&memory_args))?;
    let memory = activations(&memory_table)?;
    let mib = |name: &str| -> Option<f64> {
        let key = match name {
            "dense" => "dense".to_string(),
            n => n.replacen("-b", ":", 1),
        };
        memory.get(&key).copied()
    };
    let figures = work.join("figures");
    let _ = std::fs::remove_dir_all(&figures);
    let output = Command::new(&bin)
        .arg("compare")
        .args(runs.iter().map(|r| &r.1))
        .arg("--out")
        .arg(&figures)
        .args(["--title", &format!("{}, CIFAR-10", setup.model)])
        .output()?;
    if !output.status.success() {
        bail!(
            "ember compare failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let name = super::result_name("sparse-act-cifar10", &setup.backend);
    for f in ["loss.png", "accuracy-heatmap.png"] {
        std::fs::copy(figures.join(f), results.join(format!("{name}-{f}")))?;
    }
    let dense = runs[0].2;
    let mut accuracy = serde_json::Map::new();
    let mut memory_json = serde_json::Map::new();
    for (n, _, acc) in &runs {
        accuracy.insert(n.clone(), (*acc).into());
        if let Some(m) = mib(n) {
            memory_json.insert(n.clone(), m.into());
        }
    }
    let paper_json: serde_json::Map<String, serde_json::Value> = runs
        .iter()
        .filter_map(|(n, _, _)| paper(n).map(|p| (n.clone(), p.into())))
        .collect();
    let json = serde_json::json!({
        "experiment": "sparse-act-cifar10",
        "commit": commit(),
        "backend": setup.backend,
        "model": setup.model,
        "precision": if setup.backend == "cuda" { "TF32 (Burn's CUDA matmul)" } else { "f32" },
        "test_accuracy": accuracy,
        "activation_mib": memory_json,
        "paper": paper_json,
        "settings": {
            "epochs": setup.epochs, "batch_size": setup.batch, "optimizer": "adam", "lr": setup.lr,
            "weight_decay": 5e-5, "schedule": "cosine", "warmup_epochs": setup.warmup,
            "seed": 42, "patches": "4x4 (64 patches of a 32x32 image)",
            "train_limit": setup.train_limit, "test_limit": setup.test_limit,
        },
    });
    std::fs::write(
        results.join(format!("{name}.json")),
        serde_json::to_string_pretty(&json)? + "\n",
    )?;
    let s = setup;
    let flags = s.flags();
    let [images, tests] = s.images();
    let what = match s.model.as_str() {
        "resmlp-s12" => "ResMLP-S12 (d = 384, 12 blocks)",
        "resmlp-small" => "The small ResMLP (ResMLP-S12's structure at d = 128 with 4 blocks)",
        _ => "The ResMLP",
    };
    let mut md = String::new();
    writeln!(
        md,
        "# SparseAct on CIFAR-10: {} on {}\n",
        s.model, s.backend
    )?;
    writeln!(
        md,
        "Written by `cargo xtask reproduce sparse-act-cifar10{flags}` at commit {}: `ember train \
         --model {} --backend {} --dataset cifar10 --epochs {} --batch-size 64 --optimizer adam \
         --lr 1e-3 --weight-decay 5e-5 --schedule cosine --warmup-epochs {} --seed 42 \
         [--sparse-act S:B [--sparse-act-scales]]`, trained on {} training images of `{}` with \
         random crop + flip and tested on {} test images. {what} cuts each 32 × 32 image into \
         4 × 4 patches (N = 64). Every linear layer's saved input is pruned per sample to the top \
         (1 − s) of its blocks of b values; \"+scales\" is the fused variant, which also keeps the \
         per-channel scales' (Affine, layer-scale) inputs pruned. Every run starts from the same \
         seed. Activation memory is `ember memory` at batch 64 on the same backend, each policy \
         in a process of its own. Precision: {}.\n",
        commit(),
        s.model,
        s.backend,
        s.epochs,
        s.warmup,
        images,
        shown(&data),
        tests,
        if s.backend == "cuda" {
            "TF32 (Burn's CUDA matmul)"
        } else {
            "f32"
        },
    )?;
    if s.backend == "ndarray" {
        writeln!(
            md,
            "This is the small configuration a 2-core CPU runs in minutes: it checks the \
             pipeline and compares the cells at a tiny budget. The paper's scale is the same \
             command with `--backend cuda` (ResMLP-S12, all of CIFAR-10; `docs/gpu-bundle.md`).\n"
        )?;
    }
    writeln!(
        md,
        "| run | test accuracy | Δ vs dense (pp) | activations (MiB) | Δ activations | paper | mean epoch (s) |\n\
         |---|---:|---:|---:|---:|---:|---:|"
    )?;
    let dense_mib = mib("dense");
    for (n, out, acc) in &runs {
        let m = mib(n);
        let delta = match (m, dense_mib) {
            (Some(m), Some(d)) if n != "dense" => format!("{:+.1} %", 100.0 * (m - d) / d),
            _ => "—".into(),
        };
        writeln!(
            md,
            "| `{n}` | {acc:.2} % | {:+.2} | {} | {delta} | {} | {:.1} |",
            acc - dense,
            m.map_or("—".into(), |m| format!("{m:.1}")),
            paper(n).map_or("–".into(), |p| format!("{p:.0} %")),
            mean_epoch(out)?,
        )?;
    }
    let worst_50 = runs
        .iter()
        .filter(|(n, _, _)| n.starts_with("0.5-"))
        .map(|(_, _, a)| dense - a)
        .fold(f64::NEG_INFINITY, f64::max);
    writeln!(
        md,
        "\nThe 50 % cells lie at most {worst_50:.2} pp below dense (the paper: within 1.5 pp over \
         most of its grid). Every accuracy and memory figure is also in `{name}.json`.\n"
    )?;
    writeln!(
        md,
        "## Figures (`ember compare`)\n\nThe heat map places the uniform s × b policies; the \
         fused runs are in the table above."
    )?;
    writeln!(
        md,
        "\n![training and test loss per epoch]({name}-loss.png)\n\n\
         ![test accuracy relative to dense, pp]({name}-accuracy-heatmap.png)"
    )?;
    Ok(Ok(md))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_table_gives_each_policys_activations() {
        let table = "| policy S:B | inputs | model | optimizer | activations | δ MiB |\n\
                     |---|---:|---:|---:|---:|---:|\n\
                     | dense | 0.8 | 2.2 | 4.3 | 114.1 | — |\n\
                     | 0.5:16 | 0.8 | 2.2 | — | 91.6 | -22.5 |\n\
                     | 0.8:64+scales | 0.8 | 2.2 | — | 49.0 | -65.1 |\n";
        let m = activations(table).unwrap();
        assert_eq!(m["dense"], 114.1);
        assert_eq!(m["0.5:16"], 91.6);
        assert_eq!(m["0.8:64+scales"], 49.0);
        assert!(activations("no table").is_err());
    }

    #[test]
    fn the_gpu_trains_resmlp_s12_on_everything_and_cells_are_named_by_their_policy() {
        let gpu = Setup::new(&DEFAULTS, "cuda", None, None, None, None);
        assert_eq!(
            (gpu.model.as_str(), gpu.epochs, gpu.train_limit),
            ("resmlp-s12", 30, None)
        );
        let cpu = Setup::new(&DEFAULTS, "ndarray", None, Some(1), None, None);
        assert_eq!((cpu.model.as_str(), cpu.warmup), ("resmlp-small", 0));
        assert_eq!(cell("off", false), "dense");
        assert_eq!(cell("0.9:64", true), "0.9-b64+scales");
        let args = train_args(&gpu, "/d", "0.5:64", true).join(" ");
        assert!(
            args.contains("--sparse-act 0.5:64 --sparse-act-scales"),
            "{args}"
        );
    }
}
