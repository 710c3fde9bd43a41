//! The stages of a long experiment: each `ember train` run resumes where it stopped, a finished
//! one with the same arguments is reused, and one invocation's time budget (`--time-limit`) is
//! shared by its runs, so an experiment larger than one sitting completes over several.

use anyhow::{Context, Result, bail};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Why the experiment returned without its document.
#[derive(Debug, PartialEq)]
pub(crate) enum Stopped {
    /// The time budget ran out; the runs keep their last epochs.
    Budget,
}

/// The time budget of one invocation (`--time-limit`): what is left, and how much a stage may
/// take.
pub(crate) struct Budget {
    started: Instant,
    limit: Option<f64>,
}

impl Budget {
    pub(crate) fn new(limit: Option<f64>) -> Self {
        Self {
            started: Instant::now(),
            limit,
        }
    }

    /// Seconds left, `None` without a limit.
    fn left(&self) -> Option<f64> {
        self.limit.map(|l| l - self.started.elapsed().as_secs_f64())
    }

    /// Prints what is left; `Err(Stopped::Budget)` when nothing is.
    pub(crate) fn report(&self, stage: &str) -> std::result::Result<Option<f64>, Stopped> {
        match self.left() {
            None => Ok(None),
            Some(left) if left <= 1.0 => {
                println!("==> budget spent before {stage}");
                Err(Stopped::Budget)
            }
            Some(left) => {
                println!(
                    "==> {stage}: {left:.0} s of the {:.0} s budget left",
                    self.limit.unwrap_or_default()
                );
                Ok(Some(left))
            }
        }
    }
}

/// One run of an experiment: trained to its last epoch (a finished one with the same arguments
/// reused, an unfinished one resumed), or stopped at the budget. Returns its test accuracy.
pub(crate) fn stage(
    bin: &Path,
    out: &Path,
    args: &[String],
    budget: &Budget,
) -> Result<std::result::Result<f64, Stopped>> {
    let signature = signature_file(out);
    let same = std::fs::read_to_string(&signature).is_ok_and(|s| s == args.join(" "));
    let manifest = out.join("ember-run.json");
    if same && let Some(acc) = finished(&manifest)? {
        println!("==> {} is complete: {acc:.2} %", out.display());
        return Ok(Ok(acc));
    }
    let left = match budget.report(&format!("training {}", out.display())) {
        Ok(left) => left,
        Err(stop) => return Ok(Err(stop)),
    };
    let mut cmd = Command::new(bin);
    cmd.arg("train")
        .args(args)
        .args(["--plain", "--out"])
        .arg(out);
    if same && manifest.is_file() {
        cmd.arg("--resume");
    } else {
        if out.exists() {
            println!(
                "==> {} was trained with other settings: starting it over",
                out.display()
            );
        }
        cmd.arg("--overwrite");
        std::fs::create_dir_all(out.parent().context("a run inside the work folder")?)?;
        std::fs::write(&signature, args.join(" "))?;
    }
    if let Some(left) = left {
        cmd.args(["--time-limit", &format!("{left:.0}")]);
    }
    println!("==> ember train {} --out {}", args.join(" "), out.display());
    let status = cmd.status().context("run ember train")?;
    match status.code() {
        Some(0) => finished(&manifest)?
            .map(Ok)
            .with_context(|| format!("{} finished without a test accuracy", manifest.display())),
        Some(75) => Ok(Err(Stopped::Budget)),
        _ => bail!("ember train {} failed ({status})", args.join(" ")),
    }
}

/// Where the arguments of run `out` are kept: `NAME.args` beside it (the whole name: a run named
/// `0.5-b16` is not `0.args`).
fn signature_file(out: &Path) -> std::path::PathBuf {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(".args");
    out.with_file_name(name)
}

/// The test accuracy of a run that completed all its epochs, `None` for one that did not (or
/// none at all).
fn finished(manifest: &Path) -> Result<Option<f64>> {
    if !manifest.is_file() {
        return Ok(None);
    }
    let m: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(manifest)?)
        .with_context(|| format!("{} is not JSON", manifest.display()))?;
    let done = m["completed_epochs"].as_u64().is_some() && m["tested_epoch"] == m["epochs"];
    Ok(done.then(|| m["test_accuracy"].as_f64()).flatten())
}

/// The mean of a run's epoch times (training and test), in seconds.
pub(crate) fn mean_epoch(run: &Path) -> Result<f64> {
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("ember-run.json"))?)?;
    let secs: Vec<f64> = m["epoch_seconds"]
        .as_array()
        .context("epoch_seconds")?
        .iter()
        .filter_map(|v| v.as_f64())
        .collect();
    Ok(secs.iter().sum::<f64>() / secs.len().max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_counts_as_finished_only_with_every_epoch_tested() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("ember-run.json");
        assert_eq!(finished(&m).unwrap(), None);
        std::fs::write(
            &m,
            r#"{"epochs":3,"completed_epochs":2,"tested_epoch":null,"test_accuracy":null}"#,
        )
        .unwrap();
        assert_eq!(finished(&m).unwrap(), None);
        std::fs::write(
            &m,
            r#"{"epochs":3,"completed_epochs":3,"tested_epoch":3,"test_accuracy":51.5}"#,
        )
        .unwrap();
        assert_eq!(finished(&m).unwrap(), Some(51.5));
        std::fs::write(&m, "{").unwrap();
        assert!(finished(&m).unwrap_err().to_string().contains("not JSON"));
    }

    #[test]
    fn every_run_keeps_its_arguments_in_a_file_of_its_own() {
        let work = Path::new("/w");
        let files: Vec<_> = [
            "0.5-b16",
            "0.5-b64",
            "0.5-b64+scales",
            "87.5-gyro-seed42",
            "native",
        ]
        .map(|n| signature_file(&work.join(n)))
        .to_vec();
        assert_eq!(files[0], Path::new("/w/0.5-b16.args"));
        for (i, a) in files.iter().enumerate() {
            assert!(!files[i + 1..].contains(a), "{a:?} is shared");
        }
    }

    #[test]
    fn a_spent_budget_stops_before_the_next_stage() {
        let budget = Budget::new(Some(0.5));
        assert_eq!(budget.report("training x"), Err(Stopped::Budget));
        assert_eq!(Budget::new(None).report("training x"), Ok(None));
        let left = Budget::new(Some(100.0))
            .report("training x")
            .unwrap()
            .unwrap();
        assert!(left > 99.0 && left <= 100.0, "{left}");
    }
}
