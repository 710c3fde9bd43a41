//! The idx file format of MNIST and Fashion-MNIST (LeCun et al.), gzipped or raw.
//!
//! An idx file is a big-endian header — magic `0x0000_08NN` where `08` is the unsigned-byte
//! type and `NN` the number of dimensions, then one `u32` size per dimension — followed by the
//! data. Images are `0x0803` (count × rows × cols), labels `0x0801` (count).

use crate::error::{Error, Result};
use flate2::read::GzDecoder;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A decoded idx array of unsigned bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct IdxArray {
    /// Size of each dimension.
    pub dims: Vec<usize>,
    /// The values, row-major.
    pub data: Vec<u8>,
}

/// Finds `name` or `name.gz` in `dir`.
pub fn locate(dir: &Path, name: &str) -> Result<PathBuf> {
    let raw = dir.join(name);
    let gz = dir.join(format!("{name}.gz"));
    if gz.is_file() {
        Ok(gz)
    } else if raw.is_file() {
        Ok(raw)
    } else {
        Err(Error::MissingFile {
            path: raw,
            dir: dir.to_path_buf(),
        })
    }
}

/// Reads a whole file, decompressing it when it starts with the gzip magic.
pub fn read_maybe_gz(path: &Path) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        GzDecoder::new(&bytes[..])
            .read_to_end(&mut out)
            .map_err(|e| Error::io(path, e))?;
        Ok(out)
    } else {
        Ok(bytes)
    }
}

/// Parses an unsigned-byte idx array with `expected_dims` dimensions.
pub fn parse(bytes: &[u8], expected_dims: usize, path: &Path) -> Result<IdxArray> {
    if bytes.len() < 4 {
        return Err(Error::malformed(path, "shorter than an idx header"));
    }
    let magic = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let expected_magic = 0x0800 | expected_dims as u32;
    if magic != expected_magic {
        return Err(Error::malformed(
            path,
            format!(
                "magic number {magic:#010x}, expected {expected_magic:#010x} (an idx file of unsigned bytes with {expected_dims} dimension(s))"
            ),
        ));
    }
    let header = 4 + 4 * expected_dims;
    if bytes.len() < header {
        return Err(Error::malformed(path, "truncated header"));
    }
    let dims: Vec<usize> = (0..expected_dims)
        .map(|i| {
            let o = 4 + 4 * i;
            u32::from_be_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]) as usize
        })
        .collect();
    let len = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let Some(len) = len else {
        return Err(Error::malformed(path, "dimensions overflow"));
    };
    let body = &bytes[header..];
    if body.len() != len {
        return Err(Error::malformed(
            path,
            format!(
                "{} data bytes for dimensions {dims:?}, expected {len} ({})",
                body.len(),
                if body.len() < len {
                    "truncated"
                } else {
                    "trailing bytes"
                }
            ),
        ));
    }
    Ok(IdxArray {
        dims,
        data: body.to_vec(),
    })
}

/// Reads `name` (or `name.gz`) from `dir` as an idx array with `dims` dimensions.
pub fn read(dir: &Path, name: &str, dims: usize) -> Result<IdxArray> {
    let path = locate(dir, name)?;
    let bytes = read_maybe_gz(&path)?;
    parse(&bytes, dims, &path)
}

/// Writes an idx array (raw, not gzipped). Used by tests and tools.
pub fn encode(array: &IdxArray) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + 4 * array.dims.len() + array.data.len());
    out.extend_from_slice(&(0x0800u32 | array.dims.len() as u32).to_be_bytes());
    for &d in &array.dims {
        out.extend_from_slice(&(d as u32).to_be_bytes());
    }
    out.extend_from_slice(&array.data);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> IdxArray {
        IdxArray {
            dims: vec![2, 3],
            data: vec![1, 2, 3, 4, 5, 6],
        }
    }

    #[test]
    fn round_trips() {
        let a = sample();
        assert_eq!(parse(&encode(&a), 2, Path::new("x")).unwrap(), a);
    }

    #[test]
    fn rejects_wrong_magic() {
        let err = parse(&encode(&sample()), 3, Path::new("x")).unwrap_err();
        assert!(err.to_string().contains("magic number"), "{err}");
    }

    #[test]
    fn rejects_truncated_and_trailing_data() {
        let bytes = encode(&sample());
        let err = parse(&bytes[..bytes.len() - 1], 2, Path::new("x")).unwrap_err();
        assert!(err.to_string().contains("truncated"), "{err}");
        let mut longer = bytes.clone();
        longer.push(0);
        let err = parse(&longer, 2, Path::new("x")).unwrap_err();
        assert!(err.to_string().contains("trailing"), "{err}");
        let err = parse(&bytes[..6], 2, Path::new("x")).unwrap_err();
        assert!(err.to_string().contains("header"), "{err}");
    }
}
