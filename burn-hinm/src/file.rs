//! A pruned model on disk, packed: `model.hinm`.
//!
//! Layout (little-endian): the magic `EMBERHNM`, a `u32` format version, a `u32` header
//! length, the header (JSON: what was pruned and how, and one entry per parameter), the
//! payload (each parameter's arrays, 4 bytes per value, in header order), and a CRC-32 of
//! everything before it. A pruned weight is stored in HiNM's packed layout (values, metadata,
//! tile columns, output permutation: [`Packed`]); every other parameter (biases, norms,
//! unpruned layers) as dense f32. Reading checks the magic, the version, the checksum, the
//! sizes and every packed weight's structure ([`Packed::validate`]): a file that fails any of
//! these is refused with the reason, never half-read.

use cubecl_kernels::hinm::Packed;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The first bytes of a packed model file.
pub const MAGIC: &[u8; 8] = b"EMBERHNM";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;

/// What a packed model file says about itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// The model's name (Ember's `--model`).
    pub model: String,
    /// Free-form provenance: level, permutation, seed, source checkpoint.
    pub about: BTreeMap<String, String>,
    /// Every parameter, in payload order.
    pub params: Vec<Entry>,
}

/// One parameter of a packed model file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Burn's parameter path (`layer1.0.conv1.weight`).
    pub path: String,
    /// Its shape in Burn's layout.
    pub dims: Vec<usize>,
    /// `None`: dense f32 values; `Some([out, k, v, nnz])`: HiNM-packed.
    pub packed: Option<[usize; 4]>,
}

/// A parameter's values as the file holds them.
#[derive(Clone, Debug, PartialEq)]
pub enum Stored {
    /// Dense values in Burn's layout.
    Dense(Vec<f32>),
    /// A packed weight.
    Packed(Packed),
}

/// A packed model: its header and every parameter by path.
#[derive(Clone, Debug, PartialEq)]
pub struct PackedModel {
    /// The model's name and provenance.
    pub model: String,
    /// Provenance (`level`, `perm`, `seed`, `source`, ...).
    pub about: BTreeMap<String, String>,
    /// Every parameter: shape and values.
    pub params: BTreeMap<String, (Vec<usize>, Stored)>,
}

impl PackedModel {
    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut entries = Vec::new();
        let mut payload: Vec<u8> = Vec::new();
        let mut put = |words: &[u8]| payload.extend_from_slice(words);
        for (path, (dims, stored)) in &self.params {
            let packed = match stored {
                Stored::Dense(values) => {
                    put(bytemuck::cast_slice(values));
                    None
                }
                Stored::Packed(p) => {
                    put(bytemuck::cast_slice(&p.values));
                    put(bytemuck::cast_slice(&p.meta));
                    put(bytemuck::cast_slice(&p.cols));
                    put(bytemuck::cast_slice(&p.out_perm));
                    Some([p.out, p.k, p.v, p.nnz])
                }
            };
            entries.push(Entry {
                path: path.clone(),
                dims: dims.clone(),
                packed,
            });
        }
        let header = serde_json::to_vec(&Header {
            model: self.model.clone(),
            about: self.about.clone(),
            params: entries,
        })
        .expect("a header serialises");
        let mut bytes = Vec::with_capacity(16 + header.len() + payload.len() + 4);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        bytes.extend_from_slice(&(header.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&header);
        bytes.extend_from_slice(&payload);
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// Reads a file's bytes; the error says what is wrong with them.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() < 20 || &bytes[..8] != MAGIC {
            return Err("it is not a packed HiNM model (no EMBERHNM header)".into());
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        let stored = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
        if crc32fast::hash(body) != stored {
            return Err("it is corrupt (its CRC-32 does not match its contents)".into());
        }
        let version = u32::from_le_bytes(body[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(format!(
                "it is format version {version}; this build reads version {VERSION}"
            ));
        }
        let len = u32::from_le_bytes(body[12..16].try_into().expect("4 bytes")) as usize;
        let header: Header = body
            .get(16..16 + len)
            .ok_or("its header is truncated")
            .and_then(|h| serde_json::from_slice(h).map_err(|_| "its header is not readable"))?;
        let mut rest = &body[16 + len..];
        let mut take = |n: usize, what: &str| -> Result<Vec<u32>, String> {
            if rest.len() < 4 * n {
                return Err(format!("it is truncated in {what}"));
            }
            let (now, later) = rest.split_at(4 * n);
            rest = later;
            Ok(now
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect())
        };
        let floats = |w: Vec<u32>| w.into_iter().map(f32::from_bits).collect::<Vec<f32>>();
        let mut params = BTreeMap::new();
        for e in header.params {
            let count: usize = e.dims.iter().product();
            let stored = match e.packed {
                None => Stored::Dense(floats(take(count, &e.path)?)),
                Some([out, k, v, nnz]) => {
                    if v == 0
                        || !nnz.is_multiple_of(4)
                        || !out.is_multiple_of(v)
                        || out * k != count
                    {
                        return Err(format!("{}: packed sizes do not hold together", e.path));
                    }
                    let words = cubecl_kernels::hinm::meta_words(nnz / 4);
                    let p = Packed {
                        out,
                        k,
                        v,
                        nnz,
                        values: floats(take(out * nnz / 2, &e.path)?),
                        meta: take(out * words, &e.path)?,
                        cols: take(out / v * nnz, &e.path)?,
                        out_perm: take(out, &e.path)?,
                    };
                    p.validate().map_err(|err| format!("{}: {err}", e.path))?;
                    Stored::Packed(p)
                }
            };
            params.insert(e.path, (e.dims, stored));
        }
        if !rest.is_empty() {
            return Err(format!("{} bytes follow the last parameter", rest.len()));
        }
        Ok(Self {
            model: header.model,
            about: header.about,
            params,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> PackedModel {
        let p = cubecl_kernels::testing::random_packed(16, 24, 8, 12, 3);
        let mut params = BTreeMap::new();
        params.insert("fc.weight".to_string(), (vec![24, 16], Stored::Packed(p)));
        params.insert(
            "fc.bias".to_string(),
            (vec![16], Stored::Dense(vec![0.5; 16])),
        );
        PackedModel {
            model: "lenet5".into(),
            about: [("level".to_string(), "75:v8".to_string())].into(),
            params,
        }
    }

    #[test]
    fn files_round_trip() {
        let m = model();
        assert_eq!(PackedModel::from_bytes(&m.to_bytes()).unwrap(), m);
    }

    #[test]
    fn damaged_files_are_refused_with_the_reason() {
        let bytes = model().to_bytes();
        let mut flipped = bytes.clone();
        flipped[40] ^= 1;
        assert!(
            PackedModel::from_bytes(&flipped)
                .unwrap_err()
                .contains("corrupt")
        );
        let cut = &bytes[..bytes.len() - 9];
        assert!(
            PackedModel::from_bytes(cut)
                .unwrap_err()
                .contains("corrupt")
        );
        assert!(
            PackedModel::from_bytes(b"not a model at all")
                .unwrap_err()
                .contains("EMBERHNM")
        );
        // a structurally broken packed weight with a valid checksum
        let mut m = model();
        if let Some((_, Stored::Packed(p))) = m.params.get_mut("fc.weight") {
            p.out_perm[0] = p.out_perm[1];
        }
        assert!(
            PackedModel::from_bytes(&m.to_bytes())
                .unwrap_err()
                .contains("permutation")
        );
    }
}
