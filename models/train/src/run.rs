//! A run directory: `ember-run.json` (what was trained, how, and what came out), burn-train's
//! checkpoints and metric logs, `metrics.csv`, `curves.png` and the final `model.mpk`.
//!
//! Nothing the user had is overwritten: a directory that holds a run is refused unless
//! `--resume` or `--overwrite` is given, and a non-empty directory that is not an Ember run is
//! always refused.

use crate::backend::BackendKind;
use crate::error::{EmberError, Result};
use burn_sparse_act::Policy;
use ember_models::classifier::ModelKind;
use ember_models::data::DatasetKind;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// File name of the run manifest.
pub const MANIFEST: &str = "ember-run.json";
/// File name of the final model (the recorder adds `.mpk`).
pub const MODEL_FILE: &str = "model";

/// The manifest layout this build writes. Version 1 (no `version` field) recorded the SparseAct
/// policy in its text form; it still reads, and is rewritten as the current version when the run
/// is resumed.
pub const MANIFEST_VERSION: u32 = 2;

/// What a run directory records about its run: typed settings, serialised with serde.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// Layout version ([`MANIFEST_VERSION`] when written by this build; 1 when absent).
    #[serde(default = "version_1")]
    pub version: u32,
    /// The model trained.
    pub model: ModelKind,
    /// The backend it ran on.
    pub backend: BackendKind,
    /// The multiplier of every contraction, by its canonical name (`native` for the backend's
    /// own FP32 ops; `NAME_M` for a table read from a file).
    #[serde(default = "native")]
    pub multiplier: String,
    /// The SparseAct policy (off when absent; version 1's text form still reads).
    #[serde(default, deserialize_with = "policy_or_text")]
    pub sparse_act: Policy,
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

fn version_1() -> u32 {
    1
}

/// A policy as version 2 writes it (its fields), or as version 1 did (its text form, which
/// [`Policy`]'s `FromStr` parses in every form `Display` prints).
fn policy_or_text<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Policy, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stored {
        Text(String),
        Fields(Policy),
    }
    match Stored::deserialize(d)? {
        Stored::Text(text) => text.parse().map_err(serde::de::Error::custom),
        Stored::Fields(policy) => Ok(policy),
    }
}

impl Manifest {
    /// Reads `dir/ember-run.json`.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|e| EmberError::io(&path, e))?;
        serde_json::from_str(&text).map_err(|e| EmberError::malformed(&path, e.to_string()))
    }

    /// Reads `dir/ember-run.json` if there is one: `None` when the directory has none, an error
    /// naming the file when it has one that cannot be read (a corrupt manifest is never taken
    /// for an absent one).
    pub fn read_if_present(dir: &Path) -> Result<Option<Self>> {
        if dir.join(MANIFEST).exists() {
            Self::read(dir).map(Some)
        } else {
            Ok(None)
        }
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
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
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
