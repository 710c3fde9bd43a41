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

use crate::error::HinmError;
use cubecl_kernels::decorator::file::{self, Format, PackedFormat, Payload, put_f32s, put_u32s};
use cubecl_kernels::hinm::Packed;
use std::fmt::Display;

/// The first bytes of a packed model file.
pub const MAGIC: &[u8; 8] = b"EMBERHNM";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;

/// The `model.hinm` format: its framing, and its packed weights in HiNM's layout ([`Packed`])
/// with their sizes `[out, k, v, nnz]` in the header, refused with the reason in words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HinmFormat;

/// What a packed model file says about itself: the model's name, provenance (level,
/// permutation, seed, source checkpoint) and every parameter, in payload order.
pub type Header = file::Header<[usize; 4]>;

/// One parameter of a packed model file: its path (`layer1.0.conv1.weight`), its shape in
/// Burn's layout, and `None` for dense f32 values or `Some([out, k, v, nnz])` for a
/// HiNM-packed weight.
pub type Entry = file::Entry<[usize; 4]>;

/// A parameter's values as the file holds them: `Dense` values in Burn's layout, or a
/// `Packed` weight.
pub type Stored = file::Stored<HinmFormat>;

/// A packed model: its name, provenance (`level`, `perm`, `seed`, `source`, ...) and every
/// parameter by path (shape and values).
pub type PackedModel = file::PackedModel<HinmFormat>;

impl PackedFormat for HinmFormat {
    type Weight = Packed;
    type Sizes = [usize; 4];
    type Error = HinmError;
    const FORMAT: Format = Format {
        magic: MAGIC,
        version: VERSION,
        what: "packed HiNM model",
    };

    fn put(p: &Packed, payload: &mut Vec<u8>) -> [usize; 4] {
        put_f32s(payload, &p.values);
        put_u32s(payload, &p.meta);
        put_u32s(payload, &p.cols);
        put_u32s(payload, &p.out_perm);
        [p.out, p.k, p.v, p.nnz]
    }

    fn read(
        payload: &mut Payload<'_>,
        path: &str,
        _dims: &[usize],
        count: usize,
        [out, k, v, nnz]: [usize; 4],
    ) -> Result<Packed, HinmError> {
        if v == 0
            || !nnz.is_multiple_of(4)
            || !out.is_multiple_of(v)
            || out.checked_mul(k) != Some(count)
        {
            return Err(HinmError::File(unfit(path)));
        }
        let words = cubecl_kernels::hinm::meta_words(nnz / 4);
        let sizes = [
            out.checked_mul(nnz / 2),
            out.checked_mul(words),
            (out / v).checked_mul(nnz),
        ];
        let [Some(values), Some(meta), Some(cols)] = sizes else {
            return Err(HinmError::File(unfit(path)));
        };
        let p = Packed {
            out,
            k,
            v,
            nnz,
            values: payload.f32s(values, path).map_err(HinmError::File)?,
            meta: payload.u32s(meta, path).map_err(HinmError::File)?,
            cols: payload.u32s(cols, path).map_err(HinmError::File)?,
            out_perm: payload.u32s(out, path).map_err(HinmError::File)?,
        };
        p.validate()
            .map_err(|err| HinmError::Corrupt(format!("{path}: {err}")))?;
        Ok(p)
    }

    fn refused(reason: String) -> HinmError {
        HinmError::File(reason)
    }

    fn unreadable(_: &dyn Display) -> String {
        "its header is not readable".into()
    }

    fn overflows(path: &str, _dims: &[usize]) -> String {
        unfit(path)
    }

    fn fits(p: &Packed, dims: &[usize]) -> Result<(), String> {
        crate::pack::check_fits(p, dims).map_err(|e| e.to_string())
    }
}

/// The refusal of the parameter at `path` whose packed sizes (or shape) do not hold together.
fn unfit(path: &str) -> String {
    format!("{path}: packed sizes do not hold together")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

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
        cubecl_kernels::testing::assert_damage_refused(&bytes, "EMBERHNM", PackedModel::from_bytes);
        // a structurally broken packed weight with a valid checksum
        let mut m = model();
        if let Some((_, Stored::Packed(p))) = m.params.get_mut("fc.weight") {
            p.out_perm[0] = p.out_perm[1];
        }
        let e = PackedModel::from_bytes(&m.to_bytes()).unwrap_err();
        assert!(
            matches!(&e, HinmError::Corrupt(m) if m.contains("permutation")),
            "{e}"
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
            let bytes = HinmFormat::FORMAT.write(&serde_json::to_vec(&h).unwrap(), payload);
            PackedModel::from_bytes(&bytes).unwrap_err().to_string()
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
