//! How every Ember file is written: whole or not at all. The bytes go to a temporary file in
//! the target's directory (named [`TEMP_PREFIX`]`…`), are synced to disk, and only then is the
//! temporary file renamed to the target. A crash, a kill or a full disk leaves the previous
//! file (or none), never a truncated one; a failed write leaves no temporary file behind.

use std::io::Write as _;
use std::path::Path;

/// Prefix of the temporary files a write goes through. Only a kill between the write and the
/// rename leaves one (a run directory's cleanup removes it).
pub const TEMP_PREFIX: &str = ".ember-tmp-";

/// What [`write_atomic`] does with a file already at the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Existing {
    /// Replace it (once the new bytes are all on disk).
    Replace,
    /// Keep it: the write fails with [`std::io::ErrorKind::AlreadyExists`], checked before
    /// writing and again at the rename, so a file that appeared meanwhile is kept too.
    Keep,
}

/// Writes `bytes` to `path` whole or not at all (the module's description).
///
/// # Errors
/// Any I/O error of the write, the sync or the rename; `AlreadyExists` for an existing `path`
/// under [`Existing::Keep`].
pub fn write_atomic(path: &Path, bytes: &[u8], existing: Existing) -> std::io::Result<()> {
    let exists = || {
        std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("{} exists", path.display()),
        )
    };
    if existing == Existing::Keep && path.exists() {
        return Err(exists());
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(TEMP_PREFIX);
    // The mode `File::create` gives (0o666 less the umask), not a temporary file's 0o600.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let mut file = builder.tempfile_in(dir)?;
    file.write_all(bytes)?;
    file.as_file().sync_all()?;
    let persisted = match existing {
        Existing::Replace => file.persist(path),
        Existing::Keep => file.persist_noclobber(path),
    };
    persisted.map(drop).map_err(|e| e.error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_file_is_written_replaced_or_kept_and_no_temporary_file_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.bin");
        write_atomic(&path, b"one", Existing::Keep).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"one");
        let e = write_atomic(&path, b"two", Existing::Keep).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&path).unwrap(), b"one", "kept");
        write_atomic(&path, b"three", Existing::Replace).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"three");
        assert_eq!(names(dir.path()), ["a.bin"]);
    }

    #[test]
    fn a_failed_write_leaves_the_previous_file_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        // a directory where the file should go: the rename fails after the bytes were written
        let path = dir.path().join("taken");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("mine"), b"x").unwrap();
        assert!(write_atomic(&path, b"new", Existing::Replace).is_err());
        assert_eq!(names(dir.path()), ["taken"]);
        assert_eq!(std::fs::read(path.join("mine")).unwrap(), b"x");
        // no directory at all
        let nowhere = dir.path().join("missing/a.bin");
        assert!(write_atomic(&nowhere, b"new", Existing::Replace).is_err());
    }
}
