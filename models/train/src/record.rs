//! Model and optimizer records as bytes: written whole ([`crate::atomic`]), read back with
//! every failure (an unreadable, truncated or corrupt file, a checksum that does not match,
//! a record that does not fit) an error naming the file, never a panic.
//!
//! The bytes are burn's named MessagePack at full precision, the format of burn's
//! `DefaultRecorder` (`.mpk` files of older runs read the same way).

use crate::error::{EmberError, Result};
use burn::prelude::*;
use burn::record::{FullPrecisionSettings, NamedMpkBytesRecorder, Record, Recorder};
use ember_models::classifier::ModelKind;
use std::path::Path;

fn recorder() -> NamedMpkBytesRecorder<FullPrecisionSettings> {
    NamedMpkBytesRecorder::new()
}

/// The bytes of `record`.
pub fn bytes<B: Backend, R: Record<B>>(record: R) -> Result<Vec<u8>> {
    Recorder::<B>::record(&recorder(), record, ())
        .map_err(|e| EmberError::Invalid(format!("cannot serialise a record: {e}")))
}

/// The CRC-32 of a file's bytes, as run manifests record it.
pub fn checksum(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// `Err` with the reason when `actual` (a file's CRC-32) is not the `expected` one its run
/// recorded when it wrote the file (`None`: nothing recorded, nothing to check).
pub fn check_checksum(actual: u32, expected: Option<u32>) -> std::result::Result<(), String> {
    match expected {
        Some(expected) if actual != expected => Err(format!(
            "it is corrupt or not the file its run wrote: its CRC-32 is {actual:08x}, its run \
             recorded {expected:08x}"
        )),
        _ => Ok(()),
    }
}

/// Reads a record from `file`; when `expected` is given, the file's checksum must equal it.
/// The error is the reason, in words (the caller names the file).
pub fn load<B: Backend, R: Record<B>>(
    file: &Path,
    expected: Option<u32>,
    device: &B::Device,
) -> std::result::Result<R, String> {
    let bytes = std::fs::read(file).map_err(|e| format!("cannot read it: {e}"))?;
    check_checksum(checksum(&bytes), expected)?;
    guard(|| Recorder::<B>::load::<R>(&recorder(), bytes, device))?
        .map_err(|e| format!("it is not a readable record ({e})"))
}

/// Runs `f`, turning a panic (burn asserts on tensor data that does not fit its shape) into its
/// message; the default panic report is silenced meanwhile.
pub fn guard<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    catch(f).map_err(|c| {
        c.message
            .unwrap_or_else(|| "it does not fit the model".into())
    })
}

/// A panic caught by [`catch`].
#[derive(Debug)]
pub struct Caught {
    /// Its message, when it has one.
    pub message: Option<String>,
    /// Where it was raised, `file:line` (a crate's source path from `crate-version/`).
    pub location: Option<String>,
}

/// Runs `f`, turning a panic into what it said and where; the default panic report is silenced
/// meanwhile (one process-wide hook: a panic on another thread in that time is not printed
/// either).
pub fn catch<T>(f: impl FnOnce() -> T) -> std::result::Result<T, Caught> {
    static WHERE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        if let Some(l) = info.location() {
            let file = l.file();
            // a dependency's path from its `name-version/` folder in cargo's registry
            let file = file
                .split_once("/registry/src/")
                .and_then(|(_, rest)| rest.split_once('/'))
                .map_or(file, |(_, rest)| rest);
            let mut at = WHERE.lock().unwrap_or_else(|e| e.into_inner());
            *at = Some(format!("{file}:{}", l.line()));
        }
    }));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    result.map_err(|payload| Caught {
        message: payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string())),
        location: WHERE.lock().unwrap_or_else(|e| e.into_inner()).take(),
    })
}

/// Loads `file` into `model`, checking the recorded checksum and every parameter's shape.
pub(crate) fn load_checked<B: Backend, M: Module<B>>(
    file: &Path,
    checksum: Option<u32>,
    model: M,
    kind: ModelKind,
    device: &B::Device,
) -> Result<M> {
    let bad = |reason: String| EmberError::BadCheckpoint {
        path: file.to_path_buf(),
        reason,
    };
    let expected = ember_models::params::float_shapes(&model);
    let record = load::<B, M::Record>(file, checksum, device)
        .map_err(|e| bad(format!("cannot load it as {kind}: {e}")))?;
    let loaded = guard(|| model.load_record(record))
        .map_err(|why| bad(format!("cannot load it as {kind}: {why}")))?;
    match ember_models::params::shape_mismatch(
        &expected,
        &ember_models::params::float_shapes(&loaded),
    ) {
        Some(why) => Err(bad(format!("cannot load it as {kind}: {why}"))),
        None => Ok(loaded),
    }
}

/// Refuses a model with a parameter that is not a number (a run that diverged): `file` is the
/// checkpoint it came from, `consequence` what cannot be done.
pub(crate) fn refuse_non_finite<B: Backend, M: Module<B>>(
    model: &M,
    file: &Path,
    consequence: &str,
) -> Result<()> {
    let params = cubecl_kernels::decorator::module::params(model);
    match params
        .iter()
        .find(|(_, (_, values))| values.iter().any(|v| !v.is_finite()))
    {
        Some((path, _)) => Err(EmberError::BadCheckpoint {
            path: file.to_path_buf(),
            reason: format!(
                "its parameter {path} holds NaN or infinite values (a run that diverged): \
                 {consequence}"
            ),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_caught_panic_says_what_and_where() {
        let caught = super::catch(|| -> u8 { panic!("boom {}", 7) }).unwrap_err();
        assert_eq!(caught.message.as_deref(), Some("boom 7"));
        let at = caught.location.unwrap();
        assert!(at.contains("record.rs:"), "{at}");
        assert_eq!(super::catch(|| 3).unwrap(), 3);
    }
}
