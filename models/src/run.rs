//! A run directory: `ember-run.json` (what was trained, how, and what came out), burn-train's
//! checkpoints and metric logs, `metrics.csv`, `curves.png` and the final `model.mpk`.
//!
//! Nothing the user had is overwritten: a directory that holds a run is refused unless
//! `--resume` or `--overwrite` is given, and a non-empty directory that is not an Ember run is
//! always refused.

use crate::backend::BackendKind;
use crate::data::DatasetKind;
use crate::error::{EmberError, Result};
use crate::train::ModelKind;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// File name of the run manifest.
pub const MANIFEST: &str = "ember-run.json";
/// File name of the final model (the recorder adds `.mpk`).
pub const MODEL_FILE: &str = "model";

/// What a run directory records about its run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// The model trained.
    pub model: ModelKind,
    /// The backend it ran on.
    pub backend: BackendKind,
    /// The multiplier of every contraction (`native` for the backend's own FP32 ops).
    #[serde(default = "native")]
    pub multiplier: String,
    /// The SparseAct policy (`off`, or `S:B` and overrides).
    #[serde(default = "off")]
    pub sparse_act: String,
    /// Total epochs asked for.
    pub epochs: usize,
    /// Batch size.
    pub batch_size: usize,
    /// Learning rate (Adam).
    pub lr: f64,
    /// Seed of parameter initialisation and shuffling.
    pub seed: u64,
    /// The dataset trained on.
    #[serde(default = "mnist")]
    pub dataset: DatasetKind,
    /// Where the data came from.
    pub data: String,
    /// Epochs completed so far.
    pub completed_epochs: usize,
    /// Wall seconds of each completed epoch (training + validation).
    pub epoch_seconds: Vec<f64>,
    /// Test accuracy of the final model, percent.
    pub test_accuracy: Option<f64>,
    /// Mean test cross-entropy of the final model.
    pub test_loss: Option<f64>,
}

fn native() -> String {
    "native".into()
}

fn mnist() -> DatasetKind {
    DatasetKind::Mnist
}

fn off() -> String {
    "off".into()
}

impl Manifest {
    /// Reads `dir/ember-run.json`.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|e| EmberError::io(&path, e))?;
        serde_json::from_str(&text).map_err(|e| EmberError::malformed(&path, e.to_string()))
    }

    /// Writes `dir/ember-run.json` (through a temporary file, so a crash leaves the old one).
    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(MANIFEST);
        let tmp = dir.join(format!("{MANIFEST}.tmp"));
        let text = serde_json::to_string_pretty(self).expect("manifest serialises");
        std::fs::write(&tmp, text).map_err(|e| EmberError::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| EmberError::io(&path, e))
    }
}

/// The epochs of `dir/checkpoint/model-<e>.mpk`, ascending.
pub fn checkpoint_epochs(dir: &Path) -> Vec<usize> {
    let mut epochs: Vec<usize> = std::fs::read_dir(dir.join("checkpoint"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_prefix("model-")?
                .strip_suffix(".mpk")?
                .parse()
                .ok()
        })
        .collect();
    epochs.sort_unstable();
    epochs
}

/// What to do with the output directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnExisting {
    /// Refuse a directory that holds anything.
    Refuse,
    /// Continue the run found there.
    Resume,
    /// Delete the run found there and start again.
    Overwrite,
}

/// Prepares `out` for a run of `model`. Returns the manifest to continue from, if resuming.
pub fn prepare(out: &Path, model: ModelKind, mode: OnExisting) -> Result<Option<Manifest>> {
    if !out.exists() {
        if mode == OnExisting::Resume {
            return Err(EmberError::CannotResume {
                path: out.to_path_buf(),
                reason: "the directory does not exist".into(),
            });
        }
        std::fs::create_dir_all(out).map_err(|e| EmberError::io(out, e))?;
        return Ok(None);
    }
    if !out.is_dir() {
        return Err(EmberError::NotARun(out.to_path_buf()));
    }
    let empty = std::fs::read_dir(out)
        .map_err(|e| EmberError::io(out, e))?
        .next()
        .is_none();
    let is_run = out.join(MANIFEST).is_file();
    match (mode, empty, is_run) {
        (OnExisting::Resume, _, false) => Err(EmberError::CannotResume {
            path: out.to_path_buf(),
            reason: format!("no {MANIFEST} there"),
        }),
        (OnExisting::Resume, _, true) => {
            let manifest = Manifest::read(out)?;
            if manifest.model != model {
                return Err(EmberError::CannotResume {
                    path: out.to_path_buf(),
                    reason: format!("it trains {}, not {model}", manifest.model),
                });
            }
            if checkpoint_epochs(out).last() != Some(&manifest.completed_epochs)
                || manifest.completed_epochs == 0
            {
                return Err(EmberError::CannotResume {
                    path: out.to_path_buf(),
                    reason: format!(
                        "no checkpoint of its last completed epoch ({})",
                        manifest.completed_epochs
                    ),
                });
            }
            Ok(Some(manifest))
        }
        (_, true, _) => Ok(None),
        (OnExisting::Refuse, false, true) => Err(EmberError::RunExists(out.to_path_buf())),
        (_, false, false) => Err(EmberError::NotARun(out.to_path_buf())),
        (OnExisting::Overwrite, false, true) => {
            std::fs::remove_dir_all(out).map_err(|e| EmberError::io(out, e))?;
            std::fs::create_dir_all(out).map_err(|e| EmberError::io(out, e))?;
            Ok(None)
        }
    }
}

/// The default output directory: `runs/<model>-<UTC date and time>`.
pub fn default_out(model: ModelKind) -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    PathBuf::from("runs").join(format!(
        "{model}-{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    ))
}

/// Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(model: ModelKind, completed: usize) -> Manifest {
        Manifest {
            model,
            backend: BackendKind::Ndarray,
            multiplier: "native".into(),
            sparse_act: "off".into(),
            epochs: 2,
            batch_size: 8,
            lr: 1e-3,
            seed: 1,
            dataset: DatasetKind::Mnist,
            data: "x".into(),
            completed_epochs: completed,
            epoch_seconds: vec![],
            test_accuracy: None,
            test_loss: None,
        }
    }

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_779), (2026, 11, 22));
    }

    #[test]
    fn refuses_existing_runs_and_foreign_directories() {
        let tmp = std::env::temp_dir().join(format!("ember-run-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        // New and empty directories are fine.
        assert!(
            prepare(&tmp, ModelKind::Lenet5, OnExisting::Refuse)
                .unwrap()
                .is_none()
        );
        // A run is refused without --resume/--overwrite, and kept intact.
        manifest(ModelKind::Lenet5, 1).write(&tmp).unwrap();
        let err = prepare(&tmp, ModelKind::Lenet5, OnExisting::Refuse).unwrap_err();
        assert!(matches!(err, EmberError::RunExists(_)), "{err}");
        assert!(tmp.join(MANIFEST).exists());
        // Resume needs the checkpoint of the last completed epoch, and the same model.
        let err = prepare(&tmp, ModelKind::Lenet5, OnExisting::Resume).unwrap_err();
        assert!(err.to_string().contains("no checkpoint"), "{err}");
        std::fs::create_dir_all(tmp.join("checkpoint")).unwrap();
        std::fs::write(tmp.join("checkpoint/model-1.mpk"), b"").unwrap();
        assert!(
            prepare(&tmp, ModelKind::Lenet5, OnExisting::Resume)
                .unwrap()
                .is_some()
        );
        let err = prepare(&tmp, ModelKind::Lenet300, OnExisting::Resume).unwrap_err();
        assert!(err.to_string().contains("not lenet300"), "{err}");
        // Overwrite replaces a run ...
        assert!(
            prepare(&tmp, ModelKind::Lenet5, OnExisting::Overwrite)
                .unwrap()
                .is_none()
        );
        assert!(!tmp.join(MANIFEST).exists());
        // ... but never a directory that is not one.
        std::fs::write(tmp.join("thesis.tex"), b"precious").unwrap();
        for mode in [OnExisting::Refuse, OnExisting::Overwrite] {
            let err = prepare(&tmp, ModelKind::Lenet5, mode).unwrap_err();
            assert!(matches!(err, EmberError::NotARun(_)), "{err}");
        }
        let err = prepare(&tmp, ModelKind::Lenet5, OnExisting::Resume).unwrap_err();
        assert!(err.to_string().contains("no ember-run.json"), "{err}");
        assert_eq!(std::fs::read(tmp.join("thesis.tex")).unwrap(), b"precious");
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
