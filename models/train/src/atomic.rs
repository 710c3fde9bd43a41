//! Files written whole or not at all: every file Ember writes goes to a temporary file in the
//! same directory and is renamed over its name only once complete and synced, so a crash, a
//! kill or a full disk leaves the previous file (or none), never a truncated one.

use crate::error::{EmberError, Result};
use std::io::Write as _;
use std::path::Path;

/// Prefix of the temporary files (removed on failure; `run::clear` removes strays a kill left).
pub const TEMP_PREFIX: &str = ".ember-tmp-";

fn temp_in(path: &Path) -> Result<tempfile::NamedTempFile> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(TEMP_PREFIX);
    // The mode `File::create` gives (0o666 less the umask), not a temporary file's 0o600.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    builder
        .tempfile_in(dir)
        .map_err(|e| EmberError::write(path, e))
}

fn fill(path: &Path, bytes: &[u8]) -> Result<tempfile::NamedTempFile> {
    let mut file = temp_in(path)?;
    file.write_all(bytes)
        .and_then(|()| file.as_file().sync_all())
        .map_err(|e| EmberError::write(path, e))?;
    Ok(file)
}

/// Writes `bytes` to `path`, replacing what was there only once they are all on disk.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    fill(path, bytes)?
        .persist(path)
        .map(drop)
        .map_err(|e| EmberError::write(path, e.error))
}

/// Writes `bytes` to `path`, which must not exist (checked again at the rename, so a file
/// that appeared meanwhile is not replaced either).
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    if path.exists() {
        return Err(EmberError::Exists(path.to_path_buf()));
    }
    fill(path, bytes)?
        .persist_noclobber(path)
        .map(drop)
        .map_err(|e| match e.error.kind() {
            std::io::ErrorKind::AlreadyExists => EmberError::Exists(path.to_path_buf()),
            _ => EmberError::write(path, e.error),
        })
}
