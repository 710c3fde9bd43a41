//! LUT files: ApproxTrain's raw `NAME_M.bin` and Ember's `.lut` format with a header.
//!
//! # ApproxTrain raw format (`NAME_M.bin`, `m ≤ 7`)
//! `2^(2m)` bytes, no header. Byte `(a_m << m) | b_m` holds the carry in bit 7 and the top `m`
//! mantissa bits of the product in its low bits; the bits between are zero. `m` is the text
//! between the last `_` and the last `.` of the file name, and `NAME` the text before the `_`.
//!
//! # Ember format (`.lut`, `m ≤ 11`)
//! All integers little-endian.
//!
//! | offset | size | content |
//! |---|---|---|
//! | 0 | 8 | magic `EMBERLUT` |
//! | 8 | 1 | version, `2` |
//! | 9 | 1 | `m` (1..=11) |
//! | 10 | 2 | length `n` of the name in bytes |
//! | 12 | n | name, UTF-8 |
//! | 12 + n | 2 · 2^(2m) | entries as `u16`: carry in bit `m`, mantissa in bits `0..m` |
//! | 12 + n + 2 · 2^(2m) | 4 | CRC-32 (IEEE, as zlib and PNG) of every byte before it |
//!
//! Nothing may follow the checksum. A file whose checksum does not match is refused as corrupt.
//! Version 1 is the same without the checksum; it is still read (and written by nothing).
//!
//! # Writing
//! [`write_new`] writes into a temporary file in the target's directory, syncs it and renames it
//! into place only when it is complete, never over an existing file: a failed write (full disk,
//! file-size limit) leaves neither a truncated table nor a temporary file.

use crate::error::ApproxError;
use crate::lut::{Lut, check_bits};
use std::path::{Path, PathBuf};

/// Magic bytes of Ember's LUT format.
pub const MAGIC: &[u8; 8] = b"EMBERLUT";
/// Largest `m` ApproxTrain's one-byte format can hold.
pub const RAW_MAX_BITS: u32 = 7;
/// The `.lut` version [`encode`] writes (with a CRC-32 after the entries).
pub const VERSION: u8 = 2;
/// Bytes before the name in a `.lut` file: magic, version, `m`, name length.
const HEADER: usize = 12;
/// Bytes of the checksum at the end of a version-2 `.lut` file.
const CHECKSUM: usize = 4;

/// File formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LutFormat {
    /// ApproxTrain's `NAME_M.bin`.
    Raw,
    /// Ember's `.lut` with a header.
    Ember,
}

impl LutFormat {
    /// The format a path names: `.lut` is Ember's, anything else ApproxTrain's raw format.
    pub fn of(path: &Path) -> Self {
        match path.extension().and_then(|e| e.to_str()) {
            Some("lut") => Self::Ember,
            _ => Self::Raw,
        }
    }
}

fn bad(path: &Path, reason: impl Into<String>) -> ApproxError {
    ApproxError::BadFile {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// `(NAME, m)` from an ApproxTrain file name `NAME_M.bin`.
pub fn parse_raw_name(path: &Path) -> Result<(String, u32), ApproxError> {
    let file = path
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or_default();
    let (Some(us), Some(dot)) = (file.rfind('_'), file.rfind('.')) else {
        return Err(bad(
            path,
            "an ApproxTrain LUT file is named NAME_M.bin (e.g. MBM_7.bin)",
        ));
    };
    let m = file
        .get(us + 1..dot)
        .filter(|_| us < dot)
        .and_then(|s| s.parse::<u32>().ok())
        .ok_or_else(|| {
            bad(
                path,
                format!("cannot read m from `{file}`: expected NAME_M.bin (e.g. MBM_7.bin)"),
            )
        })?;
    Ok((file[..us].to_string(), m))
}

/// Reads a table in either format (chosen by [`LutFormat::of`]).
pub fn read(path: &Path) -> Result<Lut, ApproxError> {
    // A raw file's name carries m: check it before touching the file.
    let raw_name = match LutFormat::of(path) {
        LutFormat::Raw => Some(parse_raw_name(path)?),
        LutFormat::Ember => None,
    };
    let bytes = std::fs::read(path).map_err(|source| ApproxError::Io {
        path: path.into(),
        source,
    })?;
    match raw_name {
        Some((name, m)) => decode_raw(path, &bytes, name, m),
        None => decode_ember(path, &bytes),
    }
}

fn decode_raw(path: &Path, bytes: &[u8], name: String, m: u32) -> Result<Lut, ApproxError> {
    if !(1..=RAW_MAX_BITS).contains(&m) {
        return Err(bad(
            path,
            format!(
                "m = {m} in the file name: ApproxTrain's one-byte format holds m = 1..={RAW_MAX_BITS} (use the .lut format for wider tables)"
            ),
        ));
    }
    let expected = 1usize << (2 * m);
    if bytes.len() != expected {
        return Err(bad(
            path,
            format!(
                "{} bytes, but a table for m = {m} has {expected} (2^(2m)) one-byte entries",
                bytes.len()
            ),
        ));
    }
    let entries = bytes
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            let (carry, mant) = (u16::from(b >> 7), u16::from(b & 0x7f));
            if mant >> m != 0 {
                Err(bad(
                    path,
                    format!("byte {i} is {b:#04x}: bits {m}..7 must be zero for m = {m}"),
                ))
            } else {
                Ok((carry << m) | mant)
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Lut::from_entries(&name, m, entries).map_err(|e| bad(path, e.to_string()))
}

fn decode_ember(path: &Path, bytes: &[u8]) -> Result<Lut, ApproxError> {
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return Err(bad(
            path,
            "not an Ember LUT file (missing the EMBERLUT header)",
        ));
    }
    let content = match bytes[8] {
        1 => bytes,
        2 => verified(path, bytes)?,
        v => {
            return Err(bad(
                path,
                format!("format version {v} is not supported (expected 1 or {VERSION})"),
            ));
        }
    };
    let m = u32::from(content[9]);
    check_bits(m).map_err(|e| bad(path, e.to_string()))?;
    let n = usize::from(u16::from_le_bytes([content[10], content[11]]));
    let name = content
        .get(HEADER..HEADER + n)
        .and_then(|s| std::str::from_utf8(s).ok())
        .ok_or_else(|| bad(path, "truncated or non-UTF-8 table name"))?;
    let body = &content[HEADER + n..];
    let expected = 2usize << (2 * m);
    if body.len() != expected {
        return Err(bad(
            path,
            format!(
                "{} bytes of entries, but a table for m = {m} has {expected}",
                body.len()
            ),
        ));
    }
    let entries = body
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    Lut::from_entries(name, m, entries).map_err(|e| bad(path, e.to_string()))
}

/// The bytes a version-2 file's trailing CRC-32 covers, if it matches them.
fn verified<'a>(path: &Path, bytes: &'a [u8]) -> Result<&'a [u8], ApproxError> {
    let corrupt = |what: String| {
        bad(
            path,
            format!("corrupt table: {what}; the file is damaged or truncated, regenerate it"),
        )
    };
    if bytes.len() < HEADER + CHECKSUM {
        return Err(corrupt(format!(
            "{} bytes, no room for the checksum",
            bytes.len()
        )));
    }
    let (content, stored) = bytes.split_at(bytes.len() - CHECKSUM);
    let stored = u32::from_le_bytes([stored[0], stored[1], stored[2], stored[3]]);
    let actual = crc32fast::hash(content);
    if actual != stored {
        return Err(corrupt(format!(
            "its contents have CRC-32 {actual:#010x}, the file records {stored:#010x}"
        )));
    }
    Ok(content)
}

/// Encodes a table in `format`.
pub fn encode(lut: &Lut, format: LutFormat) -> Result<Vec<u8>, ApproxError> {
    let m = lut.bits();
    match format {
        LutFormat::Raw => {
            if m > RAW_MAX_BITS {
                return Err(ApproxError::UnsupportedBits {
                    name: "ApproxTrain raw format".into(),
                    m,
                    supported: "m = 1..=7",
                });
            }
            Ok(lut
                .entries()
                .iter()
                .map(|&e| (((e >> m) << 7) | (e & ((1 << m) - 1))) as u8)
                .collect())
        }
        LutFormat::Ember => {
            let name = lut.name().as_bytes();
            let name = &name[..name.len().min(u16::MAX as usize)];
            let mut out =
                Vec::with_capacity(HEADER + name.len() + 2 * lut.entries().len() + CHECKSUM);
            out.extend_from_slice(MAGIC);
            out.push(VERSION);
            out.push(m as u8);
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(name);
            for e in lut.entries() {
                out.extend_from_slice(&e.to_le_bytes());
            }
            out.extend_from_slice(&crc32fast::hash(&out).to_le_bytes());
            Ok(out)
        }
    }
}

/// Writes a table to a new file (format by extension); never overwrites an existing file.
pub fn write_new(lut: &Lut, path: &Path) -> Result<(), ApproxError> {
    let bytes = encode(lut, LutFormat::of(path))?;
    if LutFormat::of(path) == LutFormat::Raw {
        let (_, m) = parse_raw_name(path)?;
        if m != lut.bits() {
            return Err(bad(
                path,
                format!(
                    "the file name says m = {m} but the table has m = {}: name it {}_{}.bin",
                    lut.bits(),
                    lut.name(),
                    lut.bits()
                ),
            ));
        }
    }
    write_bytes_new(path, &bytes)
}

/// Writes `bytes` to a new file at `path`, whole or not at all ([`cubecl_kernels::fs`]): on any
/// error nothing is left behind and an existing `path` is untouched ([`ApproxError::Exists`]).
fn write_bytes_new(path: &Path, bytes: &[u8]) -> Result<(), ApproxError> {
    use cubecl_kernels::fs::{Existing, write_atomic};
    write_atomic(path, bytes, Existing::Keep).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => ApproxError::Exists(path.into()),
        _ => ApproxError::Write {
            path: path.into(),
            source: e,
        },
    })
}

/// The ApproxTrain file name of a table: `NAME_M.bin`.
pub fn raw_file_name(lut: &Lut) -> PathBuf {
    PathBuf::from(format!("{}_{}.bin", lut.name(), lut.bits()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{self, apply};

    fn tmp(name: &str) -> (tempdir::Dir, PathBuf) {
        let dir = tempdir::Dir::new();
        let path = dir.0.join(name);
        (dir, path)
    }

    mod tempdir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Self {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let p = std::env::temp_dir().join(format!(
                    "ember-lut-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&p).unwrap();
                Self(p)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn both_formats_round_trip() {
        for m in [1, 3, 5, 7] {
            let lut = Lut::generate("MBM", m, |a, b| apply(model::mbm, m, a, b)).unwrap();
            let (_d, raw) = tmp(&format!("MBM_{m}.bin"));
            write_new(&lut, &raw).unwrap();
            assert_eq!(std::fs::metadata(&raw).unwrap().len(), 1 << (2 * m));
            assert_eq!(read(&raw).unwrap(), lut);
        }
        for m in [1, 7, 11] {
            let lut = Lut::generate("mitchell", m, |a, b| apply(model::mitchell, m, a, b)).unwrap();
            let (_d, path) = tmp("t.lut");
            write_new(&lut, &path).unwrap();
            assert_eq!(read(&path).unwrap(), lut);
        }
    }

    #[test]
    fn raw_layout_is_approxtrains() {
        let lut = Lut::generate("MIT", 1, |a, b| apply(model::mitchell, 1, a, b)).unwrap();
        // 1.0·1.0: 0; 1.0·1.5: mant 1; 1.5·1.0: mant 1; 1.5·1.5: carry, mant 0
        assert_eq!(
            encode(&lut, LutFormat::Raw).unwrap(),
            vec![0x00, 0x01, 0x01, 0x80]
        );
    }

    #[test]
    fn m_comes_from_between_the_last_underscore_and_the_last_dot() {
        assert_eq!(
            parse_raw_name(Path::new("a/my_mult_5.bin")).unwrap(),
            ("my_mult".into(), 5)
        );
        assert_eq!(
            parse_raw_name(Path::new("v1.0/my.mult_3.bin")).unwrap(),
            ("my.mult".into(), 3)
        );
        for bad in ["MBM.bin", "MBM_x.bin", "MBM_7", "M.B_3", "X_7.v2.bin"] {
            assert!(parse_raw_name(Path::new(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_files_are_clear_errors() {
        let (_d, dir) = tmp("");
        let write = |name: &str, bytes: &[u8]| {
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        };
        let msg = |p: &Path| read(p).unwrap_err().to_string();
        assert!(msg(&write("A_3.bin", &[0; 63])).contains("63 bytes"));
        assert!(msg(&write("A_8.bin", &[0; 1 << 16])).contains("1..=7"));
        assert!(msg(&write("A_0.bin", &[])).contains("1..=7"));
        assert!(msg(&write("A_1.bin", &[0, 0, 0, 0x40])).contains("bits 1..7"));
        assert!(msg(&write("x.lut", b"NOTALUT.....")).contains("EMBERLUT"));
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&[1, 12, 0, 0]);
        assert!(msg(&write("y.lut", &v)).contains("out of range"));
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&[1, 1, 0, 0, 0, 0]);
        assert!(msg(&write("z.lut", &v)).contains("2 bytes of entries"));
        assert!(msg(&dir.join("missing_3.bin")).contains("missing_3.bin"));
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&[3, 1, 0, 0]);
        assert!(msg(&write("v3.lut", &v)).contains("version 3"));
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&[1, 1, 10, 0, b'a']);
        assert!(msg(&write("short.lut", &v)).contains("truncated or non-UTF-8"));
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&[1, 1, 2, 0, 0xff, 0xfe, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(msg(&write("latin.lut", &v)).contains("truncated or non-UTF-8"));
    }

    /// `bytes` written to `path` (replacing it), then read back.
    fn reread(path: &Path, bytes: &[u8]) -> Result<Lut, ApproxError> {
        std::fs::write(path, bytes).unwrap();
        read(path)
    }

    #[test]
    fn lut_checksum_catches_every_flipped_bit_and_every_truncation() {
        let lut = Lut::generate("MBM", 2, |a, b| apply(model::mbm, 2, a, b)).unwrap();
        let good = encode(&lut, LutFormat::Ember).unwrap();
        let (_d, path) = tmp("t.lut");
        assert_eq!(reread(&path, &good).unwrap(), lut);
        for i in 0..good.len() {
            for bit in 0..8 {
                let mut bytes = good.clone();
                bytes[i] ^= 1 << bit;
                let e = reread(&path, &bytes).unwrap_err().to_string();
                // Bytes 0..9 are the magic and the version, checked before the checksum.
                if i >= 9 {
                    assert!(e.contains("corrupt table"), "byte {i} bit {bit}: {e}");
                    assert!(e.contains("t.lut"), "{e}");
                }
            }
        }
        for len in 0..good.len() {
            let e = reread(&path, &good[..len]).unwrap_err().to_string();
            let expected = if len < HEADER {
                "EMBERLUT"
            } else {
                "corrupt table"
            };
            assert!(e.contains(expected), "{len} bytes: {e}");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(reread(&path, &longer).is_err());
    }

    #[test]
    fn version_1_tables_without_checksum_still_read() {
        let lut = Lut::generate("MIT", 3, |a, b| apply(model::mitchell, 3, a, b)).unwrap();
        let mut v1 = encode(&lut, LutFormat::Ember).unwrap();
        v1.truncate(v1.len() - CHECKSUM);
        v1[8] = 1;
        let (_d, path) = tmp("old.lut");
        assert_eq!(reread(&path, &v1).unwrap(), lut);
    }

    #[cfg(unix)]
    #[test]
    fn tables_get_the_mode_of_any_new_file() {
        use std::os::unix::fs::PermissionsExt;
        let lut = Lut::generate("A", 2, |a, b| a * b).unwrap();
        let (d, path) = tmp("A_2.bin");
        write_new(&lut, &path).unwrap();
        let plain = d.0.join("plain");
        std::fs::write(&plain, b"").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), mode(&plain));
    }

    #[test]
    fn a_failed_write_says_so_and_leaves_nothing() {
        let lut = Lut::generate("A", 2, |a, b| a * b).unwrap();
        let (_d, dir) = tmp("");
        let path = dir.join("missing").join("A_2.bin");
        let e = write_new(&lut, &path).unwrap_err().to_string();
        assert!(
            e.starts_with("cannot write ") && e.contains("A_2.bin"),
            "{e}"
        );
        assert!(!path.exists());
    }

    #[test]
    fn never_overwrites() {
        let lut = Lut::generate("A", 2, |a, b| a * b).unwrap();
        let (d, path) = tmp("A_2.bin");
        std::fs::write(&path, b"keep").unwrap();
        assert!(matches!(
            write_new(&lut, &path),
            Err(ApproxError::Exists(_))
        ));
        assert_eq!(std::fs::read(&path).unwrap(), b"keep");
        let left: Vec<_> = std::fs::read_dir(&d.0).unwrap().collect();
        assert_eq!(left.len(), 1, "the temporary file was removed");
        let (_d2, wrong) = tmp("A_3.bin");
        assert!(
            write_new(&lut, &wrong)
                .unwrap_err()
                .to_string()
                .contains("m = 3")
        );
        assert!(!wrong.exists());
        let wide = Lut::generate("W", 8, |a, b| a * b).unwrap();
        let (_d3, raw) = tmp("W_8.bin");
        assert!(write_new(&wide, &raw).is_err());
    }

    /// SHA-256 of ApproxTrain's shipped tables (repository AaronJing/ApproxTrain, commit
    /// cc83cfc, `lut/`), which the names ApproxTrain uses must generate byte for byte.
    #[test]
    fn approxtrain_tables_byte_for_byte() {
        use sha2::{Digest, Sha256};
        let shipped = [
            (
                "mbm1",
                "8d65a89d33fc69d31f85fd8ed396d6dd5672cd59f80bd2ced560d4bbaeb43222",
            ),
            (
                "afm10",
                "8d65a89d33fc69d31f85fd8ed396d6dd5672cd59f80bd2ced560d4bbaeb43222",
            ),
            (
                "mbm3",
                "cd4273f1732ef9e1465ec931a600a90e201fe3b019f57dcbc71cfba3a64db63f",
            ),
            (
                "afm12",
                "cd4273f1732ef9e1465ec931a600a90e201fe3b019f57dcbc71cfba3a64db63f",
            ),
            (
                "mbm5",
                "8f47b6176ee548baffecb54b851764d62d3e02cced8e88c470f88f160bcd8cc1",
            ),
            (
                "afm14",
                "8f47b6176ee548baffecb54b851764d62d3e02cced8e88c470f88f160bcd8cc1",
            ),
            (
                "mbm7",
                "dc2c5c50eb820657f593fde6927a18fbb591582e5e050d8cb727895f9a350d7a",
            ),
            (
                "afm16",
                "dc2c5c50eb820657f593fde6927a18fbb591582e5e050d8cb727895f9a350d7a",
            ),
            (
                "mitchell7",
                "ac623c7e6e5bb79b33d6a5b71dcac0fd324788c73c71370e406c0600bbfab667",
            ),
            (
                "bf16",
                "96a1b918f9dea7db98eceb484d1b606e3cf60982274d7443b9ed65baf4dfcbee",
            ),
        ];
        for (name, sha) in shipped {
            let mul = crate::Multiplier::parse(name).unwrap();
            let bytes = encode(mul.lut().unwrap(), LutFormat::Raw).unwrap();
            let digest: String = Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(digest, sha, "{name}");
        }
    }
}
