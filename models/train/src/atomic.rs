//! Files written whole or not at all, as every file Ember writes ([`cubecl_kernels::fs`]): to a
//! temporary file in the same directory, renamed over its name only once complete and synced,
//! so a crash, a kill or a full disk leaves the previous file (or none), never a truncated one.
//! This module gives its errors ember-train's form.

use crate::error::{EmberError, Result};
use cubecl_kernels::fs::{Existing, write_atomic};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

pub use cubecl_kernels::fs::TEMP_PREFIX;

/// Writes `bytes` to `path`, replacing what was there only once they are all on disk.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic(path, bytes, Existing::Replace).map_err(|e| EmberError::write(path, e))
}

/// Writes `bytes` to `path`, which must not exist (checked again at the rename, so a file
/// that appeared meanwhile is not replaced either).
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic(path, bytes, Existing::Keep).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => EmberError::Exists(path.to_path_buf()),
        _ => EmberError::write(path, e),
    })
}

/// Set once a [`Staging::publish`] of this process begins.
static PUBLISHING: AtomicBool = AtomicBool::new(false);

/// Whether a [`Staging::publish`] has begun in this process: a signal handler that would end the
/// process saying that nothing was written lets it finish instead (the outputs appear whole a
/// moment later).
pub fn publishing() -> bool {
    PUBLISHING.load(Ordering::SeqCst)
}

/// Several outputs that appear together: written into a staging directory beside `out`
/// (`<parent>/.<name>.ember-staging-<pid>`), which [`Staging::publish`] renames onto `out` once
/// all are written (`out` must not exist, or be an empty directory). Dropped unpublished, the
/// staging directory is removed; one left by a killed process (its pid gone) is removed when
/// the next staging of the same `out` starts.
pub struct Staging {
    dir: PathBuf,
    out: PathBuf,
    published: bool,
}

impl Staging {
    /// A fresh staging directory for `out` (its parent made where missing).
    pub fn new(out: &Path) -> Result<Self> {
        let name = out
            .file_name()
            .ok_or_else(|| EmberError::Invalid(format!("--out {}: no name", out.display())))?
            .to_string_lossy()
            .into_owned();
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(|e| EmberError::write(&parent, e))?;
        let prefix = format!(".{name}.ember-staging-");
        // a staging directory whose process is gone was left by a kill
        if Path::new("/proc/self").exists() {
            for entry in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
                let file = entry.file_name().to_string_lossy().into_owned();
                let Some(pid) = file.strip_prefix(&prefix) else {
                    continue;
                };
                if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        let dir = parent.join(format!("{prefix}{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).map_err(|e| EmberError::write(&dir, e))?;
        Ok(Self {
            dir,
            out: out.to_path_buf(),
            published: false,
        })
    }

    /// Where the outputs are written meanwhile.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Renames the staging directory onto `out`: every output appears at once.
    pub fn publish(mut self) -> Result<()> {
        PUBLISHING.store(true, Ordering::SeqCst);
        std::fs::rename(&self.dir, &self.out).map_err(|e| {
            PUBLISHING.store(false, Ordering::SeqCst);
            match e.kind() {
                std::io::ErrorKind::DirectoryNotEmpty | std::io::ErrorKind::AlreadyExists => {
                    not_empty(&self.out)
                }
                _ => EmberError::write(&self.out, e),
            }
        })?;
        self.published = true;
        Ok(())
    }
}

/// The refusal of an `--out` that holds something (outputs go only into a new or empty one).
pub fn not_empty(out: &Path) -> EmberError {
    EmberError::Invalid(format!(
        "--out {} exists and is not empty: choose another; nothing was written",
        out.display()
    ))
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.published {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Staging;

    #[test]
    fn staged_outputs_appear_together_and_leave_nothing_when_they_do_not() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("pruned");
        // left by a killed process: a pid no process has
        let stale = tmp.path().join(".pruned.ember-staging-4000000000");
        std::fs::create_dir(&stale).unwrap();
        std::fs::write(stale.join("model.hinm"), b"half").unwrap();
        let staging = Staging::new(&out).unwrap();
        assert!(!stale.exists(), "a killed process's staging is removed");
        std::fs::write(staging.path().join("a"), b"1").unwrap();
        std::fs::write(staging.path().join("b"), b"2").unwrap();
        assert!(!out.exists(), "nothing in --out before publishing");
        staging.publish().unwrap();
        assert_eq!(std::fs::read(out.join("b")).unwrap(), b"2");
        // onto an empty directory too; not onto one that holds something
        let empty = tmp.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let staging = Staging::new(&empty).unwrap();
        std::fs::write(staging.path().join("a"), b"1").unwrap();
        staging.publish().unwrap();
        assert!(empty.join("a").is_file());
        let staging = Staging::new(&out).unwrap();
        let dir = staging.path().to_path_buf();
        let err = staging.publish().unwrap_err().to_string();
        assert!(err.contains("exists and is not empty"), "{err}");
        assert!(!dir.exists(), "an unpublished staging is removed");
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 2);
    }
}
