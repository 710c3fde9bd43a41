//! A run directory: `ember-run.json` (what was trained, how, every completed epoch's metrics and
//! what came out), a checkpoint per epoch (`checkpoint/model-<e>.mpk`, `checkpoint/optim-<e>.mpk`),
//! `metrics.csv`, `curves.png` and the final `model.mpk`.
//!
//! Nothing the user had is overwritten: a directory that holds a run is refused unless
//! `--resume` or `--overwrite` is given, a non-empty directory that is not an Ember run is
//! always refused, and `--overwrite` removes only the files Ember writes ([`clear`]). Every file
//! is written whole or not at all ([`crate::atomic`]).

use crate::backend::BackendKind;
use crate::error::{EmberError, Result};
use crate::report::EpochMetrics;
use crate::technique::{self, REGISTRY};
use burn_sparse_act::Policy;
use ember_models::act::Activation;
use ember_models::classifier::ModelKind;
use ember_models::data::{DataSpec, DatasetKind, ImageSpec};
use ember_models::shape::Shape;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// File name of the run manifest.
pub const MANIFEST: &str = "ember-run.json";
/// File name of the final model (the recorder adds `.mpk`).
pub const MODEL_FILE: &str = "model";

/// The manifest layout this build writes. Version 1 (no `version` field) recorded the SparseAct
/// policy in its text form; version 2 kept epoch metrics in burn-train's logs (`train/`,
/// `valid/`) rather than in `history`. Both still read (their history from those logs), and are
/// rewritten as the current version when the run is resumed.
pub const MANIFEST_VERSION: u32 = 3;

/// What a run directory records about its run: typed settings, serialised with serde.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// Layout version ([`MANIFEST_VERSION`] when written by this build; 1 when absent).
    #[serde(default = "version_1")]
    pub version: u32,
    /// The model trained.
    pub model: ModelKind,
    /// Its shape when it is not the kind's own ([`ModelKind::own_shape`]): a run started from
    /// PyTorch weights of another width, or from such a run. The model is rebuilt at it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Shape>,
    /// Its activation (ReLU when absent: runs before `--act`).
    #[serde(default)]
    pub act: Activation,
    /// The backend it ran on.
    pub backend: BackendKind,
    /// The multiplier of every contraction, by its canonical name (`native` for the backend's
    /// own FP32 ops; `NAME_M` for a table read from a file).
    #[serde(default = "native")]
    pub multiplier: String,
    /// The route of its native convolutions (`--conv`: `gemm`, `im2col` or `burn`); `None` in
    /// manifests written before the option existed (their runs used Burn's kernels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conv: Option<String>,
    /// The SparseAct policy (off when absent; version 1's text form still reads).
    #[serde(default, deserialize_with = "policy_or_text")]
    pub sparse_act: Policy,
    /// Total epochs asked for.
    pub epochs: usize,
    /// Batch size.
    pub batch_size: usize,
    /// Learning rate (the schedule's peak).
    pub lr: f64,
    /// The optimizer and the rate's schedule (Adam at a constant rate when absent: runs before
    /// `--optimizer`).
    #[serde(default)]
    pub optimizer: crate::optimizer::OptimizerSettings,
    /// Seed of parameter initialisation and shuffling.
    pub seed: u64,
    /// The dataset trained on.
    #[serde(default = "mnist")]
    pub dataset: DatasetKind,
    /// Where the data came from.
    pub data: String,
    /// The dataset's classes when its kind does not fix them (an ImageFolder's class
    /// directories); `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classes: Option<usize>,
    /// Only the first N training images (version 3; `None` in older manifests).
    #[serde(default)]
    pub train_limit: Option<usize>,
    /// Only the first N test images (version 3; `None` in older manifests).
    #[serde(default)]
    pub test_limit: Option<usize>,
    /// The per-layer policy (`--policy`) as it resolved, one `path: settings` line per layer;
    /// `None` without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Vec<String>>,
    /// HiNM fine-tuning (`--hinm LEVEL --from RUN`): level, permutation and source run;
    /// `None` without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hinm: Option<String>,
    /// BCR pruning (`--bcr LEVEL`, ADMM or one-shot, the source run); `None` without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bcr: Option<String>,
    /// The settings of registered techniques the fields above do not hold, by flag
    /// ([`crate::technique::REGISTRY`]); a technique absent here was off.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub settings: std::collections::BTreeMap<String, String>,
    /// Data-parallel replicas that trained it (`--devices` × `--world`; 1 when absent): each
    /// took `batch_size` items per step.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub replicas: usize,
    /// Epochs completed so far: `checkpoint/*-<completed_epochs>.mpk` hold the state to resume
    /// from. Written after every epoch.
    pub completed_epochs: usize,
    /// Wall seconds of each completed epoch (training + validation).
    pub epoch_seconds: Vec<f64>,
    /// Metrics of every completed epoch (version 3; older runs: read from burn-train's logs).
    #[serde(default)]
    pub history: Vec<EpochMetrics>,
    /// Test accuracy of `model.mpk`, percent: the run's result once it finished. A later
    /// attempt (a resume to more epochs) leaves it until it finishes itself.
    pub test_accuracy: Option<f64>,
    /// Mean test cross-entropy of `model.mpk`.
    pub test_loss: Option<f64>,
    /// The epoch `model.mpk` and the test figures are from (older manifests: the completed
    /// epochs, when the test figures are there).
    #[serde(default)]
    pub tested_epoch: Option<usize>,
    /// CRC-32 of every model and checkpoint file the run wrote, by path relative to the run
    /// directory: a file that no longer matches is refused as corrupt (version 3).
    #[serde(default)]
    pub files: std::collections::BTreeMap<String, u32>,
}

fn one() -> usize {
    1
}

fn is_one(n: &usize) -> bool {
    *n == 1
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
    /// The items the run's model classifies: its dataset's, with [`Manifest::classes`].
    pub fn spec(&self) -> DataSpec {
        match (self.dataset.spec(), self.classes) {
            (DataSpec::Images(input), Some(classes)) => {
                DataSpec::Images(ImageSpec { classes, ..input })
            }
            (spec, _) => spec,
        }
    }

    /// Reads `dir/ember-run.json` (an older layout's history from burn-train's logs).
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|e| EmberError::io(&path, e))?;
        let mut manifest: Self =
            serde_json::from_str(&text).map_err(|e| EmberError::malformed(&path, e.to_string()))?;
        if manifest.version < 3 {
            manifest.history = crate::report::read_metrics(
                dir,
                manifest.completed_epochs,
                &manifest.epoch_seconds,
            );
            if manifest.test_accuracy.is_some() {
                manifest.tested_epoch = Some(manifest.completed_epochs);
            }
        }
        Ok(manifest)
    }

    /// Records the checksum of `bytes`, just written to `file` in the run directory `dir`.
    pub fn record_file(&mut self, dir: &Path, file: &Path, bytes: &[u8]) {
        if let Some(name) = relative(dir, file) {
            self.files.insert(name, crate::record::checksum(bytes));
        }
    }

    /// Drops the checksum of `file` (in the run directory `dir`): a file the run removes.
    pub fn forget(&mut self, dir: &Path, file: &Path) {
        if let Some(name) = relative(dir, file) {
            self.files.remove(&name);
        }
    }

    /// The checksum recorded for `file` in the run directory `dir`, if any.
    pub fn checksum(&self, dir: &Path, file: &Path) -> Option<u32> {
        self.files.get(&relative(dir, file)?).copied()
    }

    /// Whether the run has trained all its epochs and `model.mpk` is from the last one.
    pub fn is_finished(&self) -> bool {
        self.completed_epochs == self.epochs && self.tested_epoch == Some(self.epochs)
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

    /// Writes `dir/ember-run.json` atomically (a crash leaves the old one).
    pub fn write(&self, dir: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).expect("manifest serialises");
        crate::atomic::write(&dir.join(MANIFEST), text.as_bytes())
    }
}

/// `file` relative to `dir`, `/`-separated (`None` when it is not inside).
fn relative(dir: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(dir).ok()?;
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    Some(parts.join("/"))
}

/// `dir/checkpoint/<kind>-<epoch>.mpk`: the model (`model`) or optimizer (`optim`) state after
/// `epoch`.
pub fn checkpoint_file(dir: &Path, kind: &str, epoch: usize) -> PathBuf {
    dir.join("checkpoint").join(format!("{kind}-{epoch}.mpk"))
}

/// Every file of `epoch`'s checkpoint in `dir`: the model, the optimizer and each registered
/// technique's state, whether or not it exists.
pub fn checkpoint_files(dir: &Path, epoch: usize) -> Vec<PathBuf> {
    let mut files = vec![
        checkpoint_file(dir, "model", epoch),
        checkpoint_file(dir, "optim", epoch),
    ];
    files.extend(
        REGISTRY
            .iter()
            .filter(|r| r.state)
            .map(|r| state_file(dir, r.name, epoch)),
    );
    files
}

/// Removes `epoch`'s checkpoint from `dir` (the model's file last, since
/// [`checkpoint_epochs`] finds epochs by it).
pub fn remove_checkpoint(dir: &Path, epoch: usize) {
    let mut files = checkpoint_files(dir, epoch);
    files.rotate_left(1);
    for file in files {
        let _ = std::fs::remove_file(file);
    }
}

/// `dir/checkpoint/<name>-<epoch>.bin`: the state technique `name` checkpoints after `epoch`
/// (BCR's: ADMM's `Z`, `U`, `ρ`, or the fixed masks).
pub fn state_file(dir: &Path, name: &str, epoch: usize) -> PathBuf {
    dir.join("checkpoint").join(format!("{name}-{epoch}.bin"))
}

/// Whether `name` (a path relative to a run directory, `/`-separated) is a file Ember writes
/// there: the manifest, `model.mpk`, `metrics.csv`, `curves.png`, the registered techniques'
/// packed models and checkpointed states ([`technique::REGISTRY`]), checkpoints, burn-train's
/// logs of version-2 runs (`train/epoch-<e>/*.log`, `valid/…`), and temporary files of
/// interrupted writes.
pub fn is_ember_file(name: &str) -> bool {
    let parts: Vec<&str> = name.split('/').collect();
    let numbered = |s: &str, prefix: &str, suffix: &str| {
        s.strip_prefix(prefix)
            .and_then(|s| s.strip_suffix(suffix))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let temp = |s: &str| s.starts_with(crate::atomic::TEMP_PREFIX);
    match parts.as_slice() {
        [f] => {
            [
                MANIFEST,
                "model.mpk",
                "metrics.csv",
                "curves.png",
                "effects.json",
                "effects.md",
            ]
            .contains(f)
                || REGISTRY
                    .iter()
                    .any(|r| r.packs && *f == technique::packed_file(r))
                || temp(f)
        }
        ["checkpoint", f] => {
            ["model-", "optim-", "scheduler-"]
                .iter()
                .any(|p| numbered(f, p, ".mpk"))
                || REGISTRY
                    .iter()
                    .any(|r| r.state && numbered(f, &format!("{}-", r.name), ".bin"))
                || temp(f)
        }
        ["train" | "valid", epoch, log] => numbered(epoch, "epoch-", "") && log.ends_with(".log"),
        _ => false,
    }
}

/// Removes the files Ember wrote in a run directory ([`is_ember_file`]) and the directories
/// that leaves empty; anything else the user put there stays. Returns how many files were
/// kept.
pub fn clear(dir: &Path) -> Result<usize> {
    fn walk(root: &Path, rel: &str, kept: &mut usize) -> Result<bool> {
        let here = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(rel)
        };
        let mut empty = true;
        for entry in std::fs::read_dir(&here).map_err(|e| EmberError::io(&here, e))? {
            let entry = entry.map_err(|e| EmberError::io(&here, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let path = entry.path();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && walk(root, &child, kept)? {
                std::fs::remove_dir(&path).map_err(|e| EmberError::write(&path, e))?;
            } else if !is_dir && is_ember_file(&child) {
                std::fs::remove_file(&path).map_err(|e| EmberError::write(&path, e))?;
            } else {
                if !is_dir {
                    *kept += 1;
                }
                empty = false;
            }
        }
        Ok(empty)
    }
    let mut kept = 0;
    walk(dir, "", &mut kept)?;
    Ok(kept)
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
    prepare_as(out, model, mode, true)
}

/// What [`prepare`] would return for `out`, with the same errors, touching nothing: how an MPI
/// rank other than 0 learns what rank 0 continues from.
pub fn inspect(out: &Path, model: ModelKind, mode: OnExisting) -> Result<Option<Manifest>> {
    prepare_as(out, model, mode, false)
}

fn prepare_as(
    out: &Path,
    model: ModelKind,
    mode: OnExisting,
    writes: bool,
) -> Result<Option<Manifest>> {
    if !out.exists() {
        if mode == OnExisting::Resume {
            return Err(EmberError::CannotResume {
                path: out.to_path_buf(),
                reason: "the directory does not exist".into(),
            });
        }
        if writes {
            std::fs::create_dir_all(out).map_err(|e| EmberError::io(out, e))?;
        }
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
            let last = manifest.completed_epochs;
            if last == 0
                || !checkpoint_file(out, "model", last).is_file()
                || !checkpoint_file(out, "optim", last).is_file()
            {
                return Err(EmberError::CannotResume {
                    path: out.to_path_buf(),
                    reason: if last == 0 {
                        "it has not completed an epoch yet: start it again with --overwrite".into()
                    } else {
                        format!(
                            "its last completed epoch ({last}) has no checkpoint/model-{last}.mpk \
                             and checkpoint/optim-{last}.mpk"
                        )
                    },
                });
            }
            Ok(Some(manifest))
        }
        (_, true, _) => Ok(None),
        (OnExisting::Refuse, false, true) => Err(EmberError::RunExists(out.to_path_buf())),
        (_, false, false) => Err(EmberError::NotARun(out.to_path_buf())),
        (OnExisting::Overwrite, false, true) if !writes => Ok(None),
        (OnExisting::Overwrite, false, true) => {
            let kept = clear(out)?;
            if kept > 0 {
                eprintln!(
                    "--overwrite: removed the previous run's files from {}; kept {kept} other \
                     file(s) there",
                    out.display()
                );
            }
            Ok(None)
        }
    }
}

/// A run directory held by this process ([`lock`]), released when dropped.
#[derive(Debug)]
pub struct RunLock {
    _dir: std::fs::File,
}

/// Takes the run directory `out` for this process: an advisory lock (`flock`) on the directory
/// itself, released when the [`RunLock`] is dropped or the process ends, however it ends (so a
/// killed run leaves nothing to clean up). A directory another process holds is refused
/// ([`EmberError::InUse`]): two runs writing one directory would mix their files. The
/// directory is created first unless `mode` resumes (a resumed run's directory must exist:
/// [`prepare`] says so). `None` where there is nothing to lock (no directory, or a file) and
/// where the file system or the platform has no such locks.
pub fn lock(out: &Path, mode: OnExisting) -> Result<Option<RunLock>> {
    if !cfg!(unix) {
        return Ok(None);
    }
    if !out.exists() {
        if mode == OnExisting::Resume {
            return Ok(None);
        }
        std::fs::create_dir_all(out).map_err(|e| EmberError::io(out, e))?;
    }
    if !out.is_dir() {
        return Ok(None);
    }
    let dir = std::fs::File::open(out).map_err(|e| EmberError::io(out, e))?;
    match dir.try_lock() {
        Ok(()) => Ok(Some(RunLock { _dir: dir })),
        Err(std::fs::TryLockError::WouldBlock) => Err(EmberError::InUse(out.to_path_buf())),
        Err(std::fs::TryLockError::Error(e)) if locks_unsupported(&e) => {
            eprintln!(
                "warning: {} cannot be locked here ({e}): do not start a second run into it",
                out.display()
            );
            Ok(None)
        }
        Err(std::fs::TryLockError::Error(e)) => Err(EmberError::io(out, e)),
    }
}

/// Whether a failed lock says that the file system has no such locks: NFS without its lock
/// daemon (`ENOLCK`), mounts that do not implement them (`EOPNOTSUPP`/`ENOTSUP`, `ENOSYS`).
/// A run there goes on unlocked, with a warning; any other failure is an error.
fn locks_unsupported(e: &std::io::Error) -> bool {
    #[cfg(unix)]
    let codes = [libc::ENOLCK, libc::EOPNOTSUPP, libc::ENOTSUP, libc::ENOSYS];
    #[cfg(not(unix))]
    let codes: [i32; 0] = [];
    e.kind() == std::io::ErrorKind::Unsupported
        || e.raw_os_error().is_some_and(|code| codes.contains(&code))
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

/// The run directory of a model file: its parent (`model.mpk`) or grandparent
/// (`checkpoint/model-<e>.mpk`), whichever holds the manifest.
pub(crate) fn manifest_dir(file: &Path) -> Option<PathBuf> {
    let parent = file.parent()?;
    [Some(parent), parent.parent()]
        .into_iter()
        .flatten()
        .find(|d| d.join(MANIFEST).is_file())
        .map(Path::to_path_buf)
}

/// The model file that `path` designates, the manifest of its run (if any), and the checksum
/// that manifest recorded for the file (if any).
pub fn resolve_checkpoint(path: &Path) -> Result<(PathBuf, Option<Manifest>, Option<u32>)> {
    let bad = |reason: String| EmberError::BadCheckpoint {
        path: path.to_path_buf(),
        reason,
    };
    let with_checksum = |file: PathBuf, dir: &Path, manifest: Option<Manifest>| {
        let checksum = manifest.as_ref().and_then(|m| m.checksum(dir, &file));
        (file, manifest, checksum)
    };
    if path.is_dir() {
        let manifest = Manifest::read_if_present(path)?;
        let model = path.join(format!("{}.mpk", MODEL_FILE));
        if model.is_file() {
            return Ok(with_checksum(model, path, manifest));
        }
        let last = checkpoint_epochs(path).last().copied();
        return match last {
            Some(e) => Ok(with_checksum(
                path.join(format!("checkpoint/model-{e}.mpk")),
                path,
                manifest,
            )),
            None => Err(bad(
                "no model.mpk and no checkpoint/model-<epoch>.mpk in it".into(),
            )),
        };
    }
    if !path.is_file() {
        return Err(bad("no such file or directory".into()));
    }
    // model.mpk sits in the run directory, checkpoint/model-<e>.mpk one level deeper.
    Ok(match manifest_dir(path) {
        Some(dir) => with_checksum(path.to_path_buf(), &dir, Some(Manifest::read(&dir)?)),
        None => (path.to_path_buf(), None, None),
    })
}

#[cfg(all(test, unix))]
mod tests {
    use super::locks_unsupported;
    use std::io::{Error, ErrorKind};

    #[test]
    fn a_file_system_without_locks_is_told_from_a_lock_that_failed() {
        // NFS without its lock daemon, mounts without flock: the run goes on unlocked
        for code in [libc::ENOLCK, libc::EOPNOTSUPP, libc::ENOTSUP, libc::ENOSYS] {
            assert!(locks_unsupported(&Error::from_raw_os_error(code)), "{code}");
        }
        assert!(locks_unsupported(&Error::from(ErrorKind::Unsupported)));
        // anything else is an error the run reports
        for code in [libc::EACCES, libc::EIO, libc::EBADF, libc::EINTR] {
            assert!(
                !locks_unsupported(&Error::from_raw_os_error(code)),
                "{code}"
            );
        }
    }
}
