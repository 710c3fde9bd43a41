//! A pruned model on disk, packed: `model.hinm`.
//!
//! Layout (little-endian): the magic `EMBERHNM`, a `u32` format version, a `u32` header
//! length, the header (JSON: what was pruned and how, and one entry per parameter), the
//! payload (each parameter's arrays, 4 bytes per value, in header order), and a CRC-32 of
//! everything before it. A pruned weight is stored in HiNM's packed layout (values, metadata,
//! tile columns, output permutation: [`Packed`]); every other parameter (biases, norms,
//! unpruned layers) as dense f32. Reading checks the magic, the version, the checksum, the
//! sizes and every packed weight's structure ([`Packed::validate`]): a file that fails any of
//! these is refused with the reason, never half-read. The framing (magic, version, header,
//! CRC-32) is the one Ember's packed model files share ([`cubecl_kernels::decorator::file`]).

use cubecl_kernels::decorator::file::{Format, checked_count, put_f32s, put_u32s};
use cubecl_kernels::hinm::Packed;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The first bytes of a packed model file.
pub const MAGIC: &[u8; 8] = b"EMBERHNM";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;

/// The file format's framing.
const FORMAT: Format = Format {
    magic: MAGIC,
    version: VERSION,
    what: "packed HiNM model",
};

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
        for (path, (dims, stored)) in &self.params {
            let packed = match stored {
                Stored::Dense(values) => {
                    put_f32s(&mut payload, values);
                    None
                }
                Stored::Packed(p) => {
                    put_f32s(&mut payload, &p.values);
                    put_u32s(&mut payload, &p.meta);
                    put_u32s(&mut payload, &p.cols);
                    put_u32s(&mut payload, &p.out_perm);
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
        FORMAT.write(&header, &payload)
    }

    /// Reads a file's bytes; the error says what is wrong with them.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        let (header, mut payload) = FORMAT.read(bytes)?;
        let header: Header =
            serde_json::from_slice(header).map_err(|_| "its header is not readable")?;
        let mut params = BTreeMap::new();
        for e in header.params {
            if params.contains_key(&e.path) {
                return Err(format!("it has {} twice", e.path));
            }
            let unfit = || format!("{}: packed sizes do not hold together", e.path);
            let count = checked_count(&e.dims).ok_or_else(unfit)?;
            let stored = match e.packed {
                None => Stored::Dense(payload.f32s(count, &e.path)?),
                Some([out, k, v, nnz]) => {
                    if v == 0
                        || !nnz.is_multiple_of(4)
                        || !out.is_multiple_of(v)
                        || out.checked_mul(k) != Some(count)
                    {
                        return Err(unfit());
                    }
                    let words = cubecl_kernels::hinm::meta_words(nnz / 4);
                    let sizes = [
                        out.checked_mul(nnz / 2),
                        out.checked_mul(words),
                        (out / v).checked_mul(nnz),
                    ];
                    let [Some(values), Some(meta), Some(cols)] = sizes else {
                        return Err(unfit());
                    };
                    let p = Packed {
                        out,
                        k,
                        v,
                        nnz,
                        values: payload.f32s(values, &e.path)?,
                        meta: payload.u32s(meta, &e.path)?,
                        cols: payload.u32s(cols, &e.path)?,
                        out_perm: payload.u32s(out, &e.path)?,
                    };
                    p.validate().map_err(|err| format!("{}: {err}", e.path))?;
                    Stored::Packed(p)
                }
            };
            params.insert(e.path, (e.dims, stored));
        }
        payload.finish()?;
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

    #[test]
    fn headers_with_sizes_that_overflow_or_repeat_are_refused_without_panicking() {
        let bytes = model().to_bytes();
        let len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
        let header: Header = serde_json::from_slice(&bytes[16..16 + len]).unwrap();
        let payload = &bytes[16 + len..bytes.len() - 4];
        let refusal = |edit: &dyn Fn(&mut Header)| {
            let mut h = header.clone();
            edit(&mut h);
            let bytes = FORMAT.write(&serde_json::to_vec(&h).unwrap(), payload);
            PackedModel::from_bytes(&bytes).unwrap_err()
        };
        // fc.bias, then fc.weight (packed [out, k, v, nnz] = [16, 24, 8, 12])
        let e = refusal(&|h| h.params[0].dims = vec![usize::MAX, 2]);
        assert!(e.contains("fc.bias: packed sizes"), "{e}");
        let e = refusal(&|h| h.params[1].packed = Some([16, 24, 8, usize::MAX - 3]));
        assert!(e.contains("fc.weight"), "{e}");
        let e = refusal(&|h| h.params.insert(1, h.params[0].clone()));
        assert!(e.contains("it has fc.bias twice"), "{e}");
        // a weight whose view claims 2^40 columns: read (and refused by a model it does not
        // fit) without anything of that size allocated
        let mut p = cubecl_kernels::testing::random_packed(8, 16, 8, 12, 1);
        p.k = 1 << 40;
        let m = PackedModel {
            model: "huge".into(),
            about: BTreeMap::new(),
            params: [(
                "fc.weight".to_string(),
                (vec![1 << 40, 8], Stored::Packed(p)),
            )]
            .into(),
        };
        assert_eq!(PackedModel::from_bytes(&m.to_bytes()).unwrap(), m);
    }
}
