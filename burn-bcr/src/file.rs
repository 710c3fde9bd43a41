//! A BCR-pruned model on disk, packed: `model.bcr`.
//!
//! Layout (little-endian): the magic `EMBERBCR`, a `u32` format version ([`VERSION`]), a `u32`
//! header length, the header (JSON, [`Header`]: the model's name, an `about` map of
//! provenance, and one entry per parameter: its path, its shape and, for a packed weight, its
//! BCRC sizes `out`, `k`, `groups`, `nnz`), the payload (each parameter's arrays in header
//! order, 4 bytes per value), and a CRC-32 of everything before it. A pruned weight is stored
//! in BCRC ([`Bcrc`]): `reorder` (`out` × u32), `row_offset` (`out + 1` × u32), `occurrence`
//! (`groups + 1` × u32), `column_stride` (`groups + 1` × u32), `compact_column`
//! (`column_stride[groups]` × u32) and `weights` (`nnz` × f32); every other parameter (biases,
//! unpruned layers) as dense f32 in Burn's layout. The framing is the one Ember's packed model
//! files share ([`cubecl_kernels::decorator::file`], also `model.hinm`'s).
//!
//! Reading checks the magic, the version, the checksum, the sizes (a packed weight's `out × k`
//! view must be its shape's, its arrays as long as the header says, nothing left over) and
//! every packed weight's structure ([`Bcrc::validate`]): a file that fails any of these is
//! refused with the reason ([`BcrError::File`], or [`BcrError::Corrupt`] for a BCRC weight
//! that does not hold together), never half-read, and no input makes reading panic.

use crate::error::BcrError;
use cubecl_kernels::bcrc::Bcrc;
use cubecl_kernels::decorator::file::{Format, Payload, checked_count, put_f32s, put_u32s};
use cubecl_kernels::decorator::layout::Layout;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The first bytes of a packed BCR model file.
pub const MAGIC: &[u8; 8] = b"EMBERBCR";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;

/// The file format's framing.
const FORMAT: Format = Format {
    magic: MAGIC,
    version: VERSION,
    what: "packed BCR model",
};

/// What a packed model file says about itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// The model's name (Ember's `--model`).
    pub model: String,
    /// Free-form provenance: level, source checkpoint, ...
    pub about: BTreeMap<String, String>,
    /// Every parameter, in payload order.
    pub params: Vec<Entry>,
}

/// One parameter of a packed model file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Burn's parameter path (`update_gate.input_transform.weight`).
    pub path: String,
    /// Its shape in Burn's layout.
    pub dims: Vec<usize>,
    /// `None`: dense f32 values; `Some`: a BCRC weight of these sizes.
    pub packed: Option<Sizes>,
}

/// The sizes of a BCRC weight in a packed model file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sizes {
    /// Rows of the GEMM view.
    pub out: usize,
    /// Columns of the GEMM view.
    pub k: usize,
    /// Column patterns.
    pub groups: usize,
    /// Kept weights.
    pub nnz: usize,
}

/// A parameter's values as the file holds them.
#[derive(Clone, Debug, PartialEq)]
pub enum Stored {
    /// Dense values in Burn's layout.
    Dense(Vec<f32>),
    /// A weight in BCRC (its GEMM view's).
    Packed(Bcrc),
}

/// A packed model: its name, provenance and every parameter by path.
#[derive(Clone, Debug, PartialEq)]
pub struct PackedModel {
    /// The model's name.
    pub model: String,
    /// Provenance (`level`, `source`, ...).
    pub about: BTreeMap<String, String>,
    /// Every parameter by Burn's parameter path: shape and values.
    pub params: BTreeMap<String, (Vec<usize>, Stored)>,
}

impl PackedModel {
    /// The file's bytes. A packed weight is written as it is: one that does not hold together
    /// ([`Bcrc::validate`]) makes a file that reading refuses.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut entries = Vec::new();
        let mut payload: Vec<u8> = Vec::new();
        for (path, (dims, stored)) in &self.params {
            let packed = match stored {
                Stored::Dense(values) => {
                    put_f32s(&mut payload, values);
                    None
                }
                Stored::Packed(w) => {
                    put_u32s(&mut payload, &w.reorder);
                    put_u32s(&mut payload, &w.row_offset);
                    put_u32s(&mut payload, &w.occurrence);
                    put_u32s(&mut payload, &w.column_stride);
                    put_u32s(&mut payload, &w.compact_column);
                    put_f32s(&mut payload, &w.weights);
                    Some(Sizes {
                        out: w.out,
                        k: w.k,
                        groups: w.groups(),
                        nnz: w.weights.len(),
                    })
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
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, BcrError> {
        let (header, mut payload) = FORMAT.read(bytes).map_err(BcrError::File)?;
        let header: Header = serde_json::from_slice(header)
            .map_err(|e| BcrError::File(format!("its header is not readable ({e})")))?;
        let mut params = BTreeMap::new();
        for e in header.params {
            if params.contains_key(&e.path) {
                return Err(BcrError::File(format!("it has {} twice", e.path)));
            }
            let count = checked_count(&e.dims).ok_or_else(|| {
                BcrError::File(format!("{}: shape {:?} overflows", e.path, e.dims))
            })?;
            let stored = match e.packed {
                None => Stored::Dense(payload.f32s(count, &e.path).map_err(BcrError::File)?),
                Some(sizes) => Stored::Packed(read_bcrc(&mut payload, &e, sizes)?),
            };
            params.insert(e.path, (e.dims, stored));
        }
        payload.finish().map_err(BcrError::File)?;
        Ok(Self {
            model: header.model,
            about: header.about,
            params,
        })
    }
}

/// The BCRC weight of entry `e` from the payload: sizes checked against its shape, arrays
/// read, structure validated.
fn read_bcrc(payload: &mut Payload<'_>, e: &Entry, sizes: Sizes) -> Result<Bcrc, BcrError> {
    let Sizes {
        out,
        k,
        groups,
        nnz,
    } = sizes;
    let view = Layout::of(&e.dims).map(|l| l.view());
    if view != Some((out, k)) {
        return Err(BcrError::File(format!(
            "{}: a {out} × {k} BCRC weight for a parameter of shape {:?}",
            e.path, e.dims
        )));
    }
    let file = BcrError::File;
    let lines = |n: usize| {
        n.checked_add(1)
            .ok_or_else(|| file(format!("{}: BCRC sizes overflow", e.path)))
    };
    let what = |array: &str| format!("{}'s {array}", e.path);
    let reorder = payload.u32s(out, &what("reorder")).map_err(file)?;
    let row_offset = payload
        .u32s(lines(out)?, &what("row_offset"))
        .map_err(file)?;
    let occurrence = payload
        .u32s(lines(groups)?, &what("occurrence"))
        .map_err(file)?;
    let column_stride = payload
        .u32s(lines(groups)?, &what("column_stride"))
        .map_err(file)?;
    // as many compact columns as the last column stride says (its array's end)
    let columns = column_stride.last().map_or(0, |&c| c as usize);
    let compact_column = payload
        .u32s(columns, &what("compact_column"))
        .map_err(file)?;
    let weights = payload.f32s(nnz, &what("weights")).map_err(file)?;
    let w = Bcrc {
        out,
        k,
        reorder,
        row_offset,
        occurrence,
        column_stride,
        compact_column,
        weights,
    };
    w.validate()
        .map_err(|err| BcrError::Corrupt(format!("{}: {}", e.path, err.0)))?;
    Ok(w)
}
