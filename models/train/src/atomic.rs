//! Files written whole or not at all, as every file Ember writes ([`cubecl_kernels::fs`]): to a
//! temporary file in the same directory, renamed over its name only once complete and synced,
//! so a crash, a kill or a full disk leaves the previous file (or none), never a truncated one.
//! This module gives its errors ember-train's form.

use crate::error::{EmberError, Result};
use cubecl_kernels::fs::{Existing, write_atomic};
use std::path::Path;

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
