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
use cubecl_kernels::decorator::file::{self, Format, PackedFormat, Payload, put_f32s, put_u32s};
use cubecl_kernels::decorator::layout::Layout;
use serde::{Deserialize, Serialize};

/// The first bytes of a packed BCR model file.
pub const MAGIC: &[u8; 8] = b"EMBERBCR";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;

/// The `model.bcr` format: its framing, and its packed weights in BCRC ([`Bcrc`]) with their
/// [`Sizes`] in the header, refused with a [`BcrError`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BcrFormat;

/// What a packed model file says about itself: the model's name, provenance (level, source
/// checkpoint, ...) and every parameter, in payload order.
pub type Header = file::Header<Sizes>;

/// One parameter of a packed model file: its path (`update_gate.input_transform.weight`), its
/// shape in Burn's layout, and `None` for dense f32 values or `Some` for a BCRC weight of
/// these [`Sizes`].
pub type Entry = file::Entry<Sizes>;

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

/// A parameter's values as the file holds them: `Dense` values in Burn's layout, or a
/// `Packed` weight in BCRC (its GEMM view's).
pub type Stored = file::Stored<BcrFormat>;

/// A packed model: its name, provenance and every parameter by path (shape and values).
/// [`to_bytes`](file::PackedModel::to_bytes) writes a packed weight as it is: one that does not
/// hold together ([`Bcrc::validate`]) makes a file that
/// [`from_bytes`](file::PackedModel::from_bytes) refuses.
pub type PackedModel = file::PackedModel<BcrFormat>;

impl PackedFormat for BcrFormat {
    type Weight = Bcrc;
    type Sizes = Sizes;
    type Error = BcrError;
    const FORMAT: Format = Format {
        magic: MAGIC,
        version: VERSION,
        what: "packed BCR model",
    };

    fn put(w: &Bcrc, payload: &mut Vec<u8>) -> Sizes {
        put_u32s(payload, &w.reorder);
        put_u32s(payload, &w.row_offset);
        put_u32s(payload, &w.occurrence);
        put_u32s(payload, &w.column_stride);
        put_u32s(payload, &w.compact_column);
        put_f32s(payload, &w.weights);
        Sizes {
            out: w.out,
            k: w.k,
            groups: w.groups(),
            nnz: w.weights.len(),
        }
    }

    fn read(
        payload: &mut Payload<'_>,
        path: &str,
        dims: &[usize],
        _count: usize,
        sizes: Sizes,
    ) -> Result<Bcrc, BcrError> {
        let Sizes {
            out,
            k,
            groups,
            nnz,
        } = sizes;
        let view = Layout::of(dims).map(|l| l.view());
        if view != Some((out, k)) {
            return Err(BcrError::File(format!(
                "{path}: a {out} × {k} BCRC weight for a parameter of shape {dims:?}"
            )));
        }
        let file = BcrError::File;
        let lines = |n: usize| {
            n.checked_add(1)
                .ok_or_else(|| file(format!("{path}: BCRC sizes overflow")))
        };
        let what = |array: &str| format!("{path}'s {array}");
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
            .map_err(|err| BcrError::Corrupt(format!("{path}: {}", err.0)))?;
        Ok(w)
    }

    fn refused(reason: String) -> BcrError {
        BcrError::File(reason)
    }

    fn fits(w: &Bcrc, dims: &[usize]) -> Result<(), String> {
        crate::pack::check_fits(w, dims).map_err(|e| e.to_string())
    }
}
