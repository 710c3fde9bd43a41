//! `hinm-cifar10`: HiNM's permutation choices on a ResNet-18: the dense run (shared with
//! `approxtrain-cifar10`'s FP32 run), one-shot pruning, and masked fine-tunes of every choice
//! from several seeds, in stages that resume.

use super::approxtrain_cifar::{DEFAULTS, SGD, dense_run, train_args};
use super::setup::Setup;
use super::stage::{Budget, Stopped, stage};
use super::{Cifar, HinmSetup, commit, ember_out, eval_on};
use anyhow::{Context, Result};
use std::collections::BTreeMap;
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

/// The fine-tunes: every permutation at 75 %, and Gyro at 87.5 %.
const TUNES: [(&str, &str); 4] = [
    ("75", "none"),
    ("75", "ovw"),
    ("75", "gyro"),
    ("87.5", "gyro"),
];

/// The paper's ResNet-18 ImageNet accuracy at 75 % (Gyro-Permutation, Table 2).
fn paper(level: &str, perm: &str) -> Option<f64> {
    match (level, perm) {
        ("75", "none") => Some(63.79),
        ("75", "ovw") => Some(65.21),
        ("75", "gyro") => Some(68.91),
        _ => None,
    }
}

/// Mean and sample deviation (`None` for fewer than two values).
fn mean_sd(v: &[f64]) -> (f64, Option<f64>) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n.max(1.0);
    let sd = (v.len() > 1)
        .then(|| (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt());
    (mean, sd)
}

/// One fine-tune's results: the run's own masked test and the packed model's.
struct Tuned {
    masked: f64,
    packed: f64,
}

/// The fine-tunes' settings: the dense run's batch, a tenth of its rate, a cosine without
/// warm-up, and on a CPU a quarter of its training images.
#[allow(clippy::too_many_arguments)]
fn tune_args(
    dense: &Setup,
    data: &str,
    epochs: usize,
    from: &str,
    policy: &str,
    [level, perm]: [&str; 2],
    seed: u64,
    tile: usize,
) -> Vec<String> {
    let mut a = dense.base_args(data);
    a.extend(SGD.map(str::to_string));
    for (flag, value) in [
        ("--lr", (dense.lr / 10.0).to_string()),
        ("--seed", seed.to_string()),
        ("--epochs", epochs.to_string()),
        ("--hinm", format!("{level}:v{tile}")),
        ("--perm", perm.to_string()),
        ("--from", from.to_string()),
        ("--policy", policy.to_string()),
    ] {
        a.extend([flag.to_string(), value]);
    }
    if let Some(n) = dense.train_limit {
        a.extend(["--train-limit".into(), (n / 4).max(64).to_string()]);
    }
    if let Some(n) = dense.test_limit {
        a.extend(["--test-limit".into(), n.to_string()]);
    }
    a
}

/// HiNM on CIFAR-10: on a GPU the full ResNet-18 at V = 64, on a CPU the 16-wide one at V = 16
/// (its layers have 16 to 128 channels, and V must divide them).
pub(super) fn hinm_cifar10(
    datasets: &Path,
    epochs: Option<usize>,
    train_limit: Option<usize>,
    test_limit: Option<usize>,
    setup: &HinmSetup,
    budget: &Budget,
) -> Result<std::result::Result<String, Stopped>> {
    let HinmSetup {
        backend,
        model,
        tile,
        tune_epochs,
        seeds,
    } = setup;
    let dense_setup = Setup::new(
        &DEFAULTS,
        backend,
        model.clone(),
        epochs,
        train_limit,
        test_limit,
    );
    let gpu = backend != "ndarray";
    let tile = tile.unwrap_or(if gpu { 64 } else { 16 });
    let tune_epochs = tune_epochs.unwrap_or(if gpu { 5 } else { 1 });
    let seeds: Vec<u64> = (0..(*seeds).max(1) as u64).map(|i| 42 + i).collect();
    let Cifar {
        data,
        data_arg,
        bin,
        root,
        work,
        results,
    } = Cifar::new(datasets, "hinm-cifar10", backend)?;
    let data_s = data_arg.as_str();
    let path = |p: &Path| p.to_str().map(str::to_string).context("non-UTF-8 path");
    let test = |run: &Path| eval_on(&bin, run, "native", &data, backend, dense_setup.test_limit);

    let dense_args = train_args(&dense_setup, data_s, "native");
    let dense = dense_run(&root, &dense_args);
    let dense_accuracy = match stage(&bin, &dense, &dense_args, budget)? {
        Ok(acc) => acc,
        Err(stop) => return Ok(Err(stop)),
    };
    let dense_s = path(&dense)?;
    // The 1×1 shortcut convolutions of the narrow model's first stages have K = 16 or 32
    // inputs: at 93.75 % no group of 4 survives there, so they stay dense at every level and
    // width (as the stem and the classifier do).
    std::fs::create_dir_all(&work)?;
    let policy = work.join("hinm-policy.toml");
    std::fs::write(
        &policy,
        "[[layer]]\npath = \"blocks.*.shortcut.conv\"\nhinm = \"off\"\n",
    )?;
    let policy_s = path(&policy)?;
    let _ = std::fs::remove_dir_all(work.join("pruned"));
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
    if let Err(stop) = budget.report("the one-shot pruning") {
        return Ok(Err(stop));
    }
    let mut saliency = Vec::new();
    for level in ["75", "87.5", "93.75"] {
        let out = prune(level, "gyro")?;
        saliency.push((level, retained(&out.join("hinm.json"))?));
    }
    let mut one_shot = BTreeMap::new();
    for (level, perm) in TUNES {
        let pruned = match perm {
            "gyro" => work.join(format!("pruned/{level}-gyro")),
            _ => prune(level, perm)?,
        };
        one_shot.insert((level, perm), test(&pruned)?);
    }
    let mut tuned: BTreeMap<(&str, &str), Vec<(u64, Tuned)>> = BTreeMap::new();
    for (level, perm) in TUNES {
        for &seed in &seeds {
            let out = work.join(format!("tuned/{level}-{perm}-seed{seed}"));
            let args = tune_args(
                &dense_setup,
                data_s,
                tune_epochs,
                &dense_s,
                &policy_s,
                [level, perm],
                seed,
                tile,
            );
            let masked = match stage(&bin, &out, &args, budget)? {
                Ok(acc) => acc,
                Err(stop) => return Ok(Err(stop)),
            };
            let packed = test(&out)?;
            tuned
                .entry((level, perm))
                .or_default()
                .push((seed, Tuned { masked, packed }));
        }
    }
    let name = super::result_name("hinm-cifar10", backend);
    let facts = Facts {
        dense: &dense_setup,
        dense_accuracy,
        dense_epoch: super::stage::mean_epoch(&dense)?,
        tile,
        tune_epochs,
        seeds: &seeds,
        saliency: &saliency,
        one_shot: &one_shot,
        tuned: &tuned,
    };
    std::fs::write(
        results.join(format!("{name}.json")),
        serde_json::to_string_pretty(&facts.json())? + "\n",
    )?;
    Ok(Ok(facts.markdown(&name)?))
}

/// Everything the document reports.
struct Facts<'a> {
    dense: &'a Setup,
    dense_accuracy: f64,
    dense_epoch: f64,
    tile: usize,
    tune_epochs: usize,
    seeds: &'a [u64],
    saliency: &'a [(&'a str, [f64; 3])],
    one_shot: &'a BTreeMap<(&'a str, &'a str), f64>,
    tuned: &'a BTreeMap<(&'a str, &'a str), Vec<(u64, Tuned)>>,
}

impl Facts<'_> {
    fn json(&self) -> serde_json::Value {
        let key = |(level, perm): &(&str, &str)| format!("{level}-{perm}");
        let mut fine = serde_json::Map::new();
        for (k, runs) in self.tuned {
            let masked: Vec<f64> = runs.iter().map(|r| r.1.masked).collect();
            let (mean, sd) = mean_sd(&masked);
            let by_seed: serde_json::Map<String, serde_json::Value> = runs
                .iter()
                .map(|(s, t)| {
                    let v = serde_json::json!({"masked": t.masked, "packed": t.packed});
                    (s.to_string(), v)
                })
                .collect();
            fine.insert(
                key(k),
                serde_json::json!({"mean": mean, "sd": sd, "seeds": by_seed}),
            );
        }
        let one_shot: serde_json::Map<String, serde_json::Value> = self
            .one_shot
            .iter()
            .map(|(k, v)| (key(k), (*v).into()))
            .collect();
        let saliency: serde_json::Map<String, serde_json::Value> = self
            .saliency
            .iter()
            .map(|(level, [n, o, g])| {
                let v = serde_json::json!({"none": n, "ovw": o, "gyro": g});
                (level.to_string(), v)
            })
            .collect();
        let paper: serde_json::Map<String, serde_json::Value> = TUNES
            .iter()
            .filter_map(|(l, p)| paper(l, p).map(|v| (key(&(*l, *p)), v.into())))
            .collect();
        serde_json::json!({
            "experiment": "hinm-cifar10",
            "commit": commit(),
            "backend": self.dense.backend,
            "model": self.dense.model,
            "tile": self.tile,
            "dense": self.dense_accuracy,
            "one_shot": one_shot,
            "fine_tuned": fine,
            "saliency": saliency,
            "paper": paper,
            "settings": {
                "dense_epochs": self.dense.epochs,
                "tune_epochs": self.tune_epochs,
                "seeds": self.seeds,
                "batch_size": self.dense.batch,
                "lr": self.dense.lr,
                "tune_lr": self.dense.lr / 10.0,
                "train_limit": self.dense.train_limit,
                "test_limit": self.dense.test_limit,
            },
        })
    }

    fn markdown(&self, name: &str) -> Result<String> {
        let d = self.dense;
        let mut md = String::new();
        writeln!(md, "# HiNM on CIFAR-10: {} on {}\n", d.model, d.backend)?;
        let shape = match d.model.as_str() {
            "resnet18-cifar-w16" => {
                " (ResNet-18 with the CIFAR stem at widths 16/32/64/128, 701,466 parameters)"
            }
            "resnet18-cifar" => " (ResNet-18 with the CIFAR stem, 11,173,962 parameters)",
            _ => "",
        };
        let tune_images = d.train_limit.map_or("all 50,000".to_string(), |n| {
            format!("the first {}", (n / 4).max(64))
        });
        let [images, tests] = d.images();
        let mut flags = d.flags();
        write!(
            flags,
            " --tile {} --tune-epochs {} --seeds {}",
            self.tile,
            self.tune_epochs,
            self.seeds.len()
        )?;
        writeln!(
            md,
            "Written by `cargo xtask reproduce hinm-cifar10{flags}` at commit {} (backend {}, \
             Burn's autotune off). `{}`{shape} trained dense for {} epochs (the FP32 run of \
             `approxtrain-cifar10`, shared: SGD momentum 0.9, weight decay 5e-4, rate {} on a \
             cosine after {} warm-up epoch(s), batch {}, seed 42, random crop + flip) on {} training \
             images, {:.1} s an epoch. Then `ember prune --hinm LEVEL:v{}` (the stem, the classifier \
             and the 1×1 shortcut convolutions stay dense) and, for every choice, `ember train \
             --hinm LEVEL:v{} --perm P --from dense --epochs {}` (SGD, rate {} on a cosine) on {} \
             training images from seeds {:?}: the seed sets the fine-tune's data order and \
             augmentation, so the spread of the seeds is the noise the choices' gaps are measured \
             against. Every accuracy is on {} test images.\n",
            commit(),
            d.backend,
            d.model,
            d.epochs,
            d.lr,
            d.warmup,
            d.batch,
            images,
            self.dense_epoch,
            self.tile,
            self.tile,
            self.tune_epochs,
            d.lr / 10.0,
            tune_images,
            self.seeds,
            tests,
        )?;
        if d.backend == "ndarray" {
            writeln!(
                md,
                "This is the small configuration a 2-core CPU runs in minutes: it checks the \
                 pipeline at a tiny budget. The paper's scale is the same command with \
                 `--backend cuda` (ResNet-18 at full width, V = 64; `docs/gpu-bundle.md`).\n"
            )?;
        }
        writeln!(
            md,
            "Dense test accuracy: **{:.2} %**.\n",
            self.dense_accuracy
        )?;
        writeln!(
            md,
            "## Accuracy after the masked fine-tune (V = {})\n\n\
             | level | permutation | one-shot | fine-tuned, mean ± sd over {} seed(s) | packed model, mean | paper (ResNet-18, ImageNet) |\n\
             |---|---|---:|---:|---:|---:|",
            self.tile,
            self.seeds.len()
        )?;
        let mut means = BTreeMap::new();
        let mut worst_sd: f64 = 0.0;
        for k @ (level, perm) in &TUNES {
            let runs = &self.tuned[k];
            let masked: Vec<f64> = runs.iter().map(|r| r.1.masked).collect();
            let packed: Vec<f64> = runs.iter().map(|r| r.1.packed).collect();
            let (mean, sd) = mean_sd(&masked);
            means.insert(*k, mean);
            worst_sd = worst_sd.max(sd.unwrap_or(0.0));
            writeln!(
                md,
                "| {level} % | {perm} | {:.2} % | {mean:.2} %{} | {:.2} % | {} |",
                self.one_shot[k],
                sd.map_or(String::new(), |s| format!(" ± {s:.2}")),
                mean_sd(&packed).0,
                paper(level, perm).map_or("–".to_string(), |p| format!("{p:.2} %")),
            )?;
        }
        let at = |p| means[&("75", p)];
        writeln!(
            md,
            "\nAt 75 %: Gyro − OVW = {:+.2} pp, OVW − none = {:+.2} pp (paper: +3.70 and +1.42 pp); \
             the largest seed-to-seed deviation of a choice is {worst_sd:.2} pp. \"Packed model\" \
             is `ember eval` of the fine-tune's `model.hinm` through the HiNM product; it equals \
             the run's own masked-dense test when the packed path is right.\n",
            at("gyro") - at("ovw"),
            at("ovw") - at("none"),
        )?;
        writeln!(
            md,
            "## Saliency kept (Σ|w| after pruning ÷ Σ|w|, over the pruned layers)\n\n\
             | total sparsity | none | OVW | Gyro |\n|---|---:|---:|---:|"
        )?;
        for (level, [n, o, g]) in self.saliency {
            writeln!(md, "| {level} % | {n:.4} | {o:.4} | {g:.4} |")?;
        }
        writeln!(
            md,
            "\nThe paper's figures are ImageNet accuracies after its own fine-tuning schedule; \
             these are CIFAR-10. What carries over is the order of the choices and their gaps \
             against the noise. Every accuracy is also in `{name}.json`."
        )?;
        Ok(md)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spread_of_one_seed_is_unknown_and_of_several_the_sample_deviation() {
        assert_eq!(mean_sd(&[50.0]), (50.0, None));
        let (mean, sd) = mean_sd(&[1.0, 2.0, 3.0]);
        assert_eq!(mean, 2.0);
        assert!((sd.unwrap() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_fine_tune_takes_a_tenth_of_the_dense_rate_and_a_quarter_of_a_cpus_images() {
        let dense = Setup::new(&DEFAULTS, "ndarray", None, None, Some(4000), None);
        let args = tune_args(
            &dense,
            "/d",
            1,
            "/dense",
            "/p.toml",
            ["87.5", "gyro"],
            43,
            16,
        );
        let text = args.join(" ");
        for part in [
            "--hinm 87.5:v16",
            "--perm gyro",
            "--seed 43",
            "--lr 0.005",
            "--train-limit 1000",
            "--from /dense",
        ] {
            assert!(text.contains(part), "{part} in {text}");
        }
        assert!(!text.contains("--warmup-epochs"), "{text}");
    }
}
