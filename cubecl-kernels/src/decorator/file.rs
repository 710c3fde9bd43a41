//! The framing every packed model file of Ember shares (feature `module`): `model.hinm`,
//! `model.bcr`.
//!
//! Layout (little-endian): an 8-byte magic, a `u32` format version, a `u32` header length, the
//! header (the format's JSON), the payload (each parameter's arrays, 4 bytes per value), and a
//! CRC-32 of everything before it. [`Format::read`] checks the magic, the checksum, the version
//! and the header's length, and hands the payload over as a [`Payload`] that reads arrays of a
//! stated length without ever reading past its end; every refusal is a sentence about the file
//! (`it is corrupt (its CRC-32 does not match its contents)`), never a panic.
//!
//! On that framing, [`PackedModel`] is a whole packed model of one format ([`PackedFormat`]):
//! a JSON [`Header`] (the model's name, an `about` map of provenance, one [`Entry`] per
//! parameter in payload order: its path, its shape and, for a packed weight, the format's
//! sizes) and a payload of every parameter's arrays, dense ones as f32 in Burn's layout, packed
//! ones as the format writes them. The loops over the parameters, the header and the checks
//! that do not depend on the format (a parameter listed twice, a shape whose size overflows,
//! bytes left over) are here; the format says how its packed weights' arrays are written, read
//! back and validated.
//!
//! ```
//! use cubecl_kernels::decorator::file::{Format, put_f32s};
//! let format = Format { magic: b"EXAMPLE1", version: 1, what: "example file" };
//! let mut payload = Vec::new();
//! put_f32s(&mut payload, &[1.5, -2.0]);
//! let bytes = format.write(b"{}", &payload);
//! let (header, mut rest) = format.read(&bytes).unwrap();
//! assert_eq!(header, b"{}");
//! assert_eq!(rest.f32s(2, "x").unwrap(), [1.5, -2.0]);
//! rest.finish().unwrap();
//! assert!(format.read(&bytes[1..]).unwrap_err().contains("EXAMPLE1"));
//! ```

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::{Debug, Display};

/// Bytes before the header: magic, version, header length.
const PREAMBLE: usize = 16;

/// A packed model file format: its magic, the version this build writes and reads, and what
/// it is called in errors.
#[derive(Clone, Copy, Debug)]
pub struct Format {
    /// The first bytes of every file.
    pub magic: &'static [u8; 8],
    /// The format version this build writes and reads.
    pub version: u32,
    /// What a file is, in words (`packed HiNM model`).
    pub what: &'static str,
}

impl Format {
    /// The file's bytes around `header` and `payload`.
    ///
    /// # Panics
    /// If the header is 4 GiB or more.
    pub fn write(&self, header: &[u8], payload: &[u8]) -> Vec<u8> {
        let len = u32::try_from(header.len()).expect("a header under 4 GiB");
        let mut bytes = Vec::with_capacity(PREAMBLE + header.len() + payload.len() + 4);
        bytes.extend_from_slice(self.magic);
        bytes.extend_from_slice(&self.version.to_le_bytes());
        bytes.extend_from_slice(&len.to_le_bytes());
        bytes.extend_from_slice(header);
        bytes.extend_from_slice(payload);
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// A file's header and payload; the error says what is wrong with the bytes.
    pub fn read<'a>(&self, bytes: &'a [u8]) -> Result<(&'a [u8], Payload<'a>), String> {
        if bytes.len() < PREAMBLE + 4 || &bytes[..8] != self.magic {
            return Err(format!(
                "it is not a {} (no {} header)",
                self.what,
                String::from_utf8_lossy(self.magic)
            ));
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        if crc32fast::hash(body) != le_u32(crc) {
            return Err("it is corrupt (its CRC-32 does not match its contents)".into());
        }
        let version = le_u32(&body[8..12]);
        if version != self.version {
            return Err(format!(
                "it is format version {version}; this build reads version {}",
                self.version
            ));
        }
        let len = le_u32(&body[12..16]) as usize;
        let header = body
            .get(PREAMBLE..PREAMBLE.saturating_add(len))
            .ok_or("its header is truncated")?;
        Ok((
            header,
            Payload {
                rest: &body[PREAMBLE + len..],
            },
        ))
    }
}

/// The `u32` of 4 little-endian bytes.
fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Appends `values` to a payload, little-endian.
pub fn put_u32s(payload: &mut Vec<u8>, values: &[u32]) {
    payload.extend(values.iter().flat_map(|v| v.to_le_bytes()));
}

/// Appends `values` to a payload, little-endian.
pub fn put_f32s(payload: &mut Vec<u8>, values: &[f32]) {
    payload.extend(values.iter().flat_map(|v| v.to_le_bytes()));
}

/// The payload of a file being read, consumed array by array in the order it was written.
#[derive(Debug)]
pub struct Payload<'a> {
    rest: &'a [u8],
}

impl<'a> Payload<'a> {
    /// The arrays `bytes` holds without a framing around them (the files of earlier formats).
    pub fn unframed(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    /// The next `n` values as `u32`s; `what` names them in the error when the payload holds
    /// fewer (whatever `n` is: nothing is allocated before the bytes are known to be there).
    pub fn u32s(&mut self, n: usize, what: &str) -> Result<Vec<u32>, String> {
        let bytes = n
            .checked_mul(4)
            .filter(|&b| b <= self.rest.len())
            .ok_or_else(|| format!("it is truncated in {what}"))?;
        let (now, later) = self.rest.split_at(bytes);
        self.rest = later;
        Ok(now.chunks_exact(4).map(le_u32).collect())
    }

    /// The next `n` values as `f32`s (as [`Payload::u32s`]).
    pub fn f32s(&mut self, n: usize, what: &str) -> Result<Vec<f32>, String> {
        Ok(self
            .u32s(n, what)?
            .into_iter()
            .map(f32::from_bits)
            .collect())
    }

    /// Checks that nothing follows the last array.
    pub fn finish(self) -> Result<(), String> {
        match self.rest.len() {
            0 => Ok(()),
            n => Err(format!("{n} bytes follow the last parameter")),
        }
    }
}

/// `Π dims`, or `None` when it overflows (sizes read from a file).
pub fn checked_count(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// A packed model file format (`model.hinm`, `model.bcr`): its framing, and how its packed
/// weights are written to a payload, read back and checked. Implemented by a marker type of
/// the format's crate, which names the weight and the error its files are refused with.
pub trait PackedFormat {
    /// A packed weight.
    type Weight: Clone + Debug + PartialEq;
    /// A packed weight's sizes in the header: what its arrays are read back with.
    type Sizes: Serialize + DeserializeOwned;
    /// Why a file is refused (the error of the format crate's public API).
    type Error;
    /// The framing: magic, version and name.
    const FORMAT: Format;

    /// Appends `weight`'s arrays to `payload`; its sizes for the header.
    fn put(weight: &Self::Weight, payload: &mut Vec<u8>) -> Self::Sizes;

    /// The packed weight of the parameter at `path` of shape `dims` (`count` values in all)
    /// from `payload`: `sizes` checked against the shape, the arrays read, the structure
    /// validated; the error names `path`.
    fn read(
        payload: &mut Payload<'_>,
        path: &str,
        dims: &[usize],
        count: usize,
        sizes: Self::Sizes,
    ) -> Result<Self::Weight, Self::Error>;

    /// The error for a file refused for `reason` (its framing, its header, a dense parameter).
    fn refused(reason: String) -> Self::Error;

    /// The reason for a header that is not the format's JSON (`detail`: the parser's words).
    fn unreadable(detail: &dyn Display) -> String {
        format!("its header is not readable ({detail})")
    }

    /// The reason for the parameter at `path` whose shape `dims` has more values than a
    /// `usize` counts.
    fn overflows(path: &str, dims: &[usize]) -> String {
        format!("{path}: shape {dims:?} overflows")
    }

    /// Whether `weight` is a packed form of a parameter of shape `dims` (Burn's layout); the
    /// error says why not.
    fn fits(weight: &Self::Weight, dims: &[usize]) -> Result<(), String>;
}

/// What a packed model file says about itself: its JSON header.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header<S> {
    /// The model's name (Ember's `--model`).
    pub model: String,
    /// Free-form provenance: level, source checkpoint, ...
    pub about: BTreeMap<String, String>,
    /// Every parameter, in payload order.
    pub params: Vec<Entry<S>>,
}

/// One parameter of a packed model file's header.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry<S> {
    /// Burn's parameter path (`layer1.0.conv1.weight`).
    pub path: String,
    /// Its shape in Burn's layout.
    pub dims: Vec<usize>,
    /// `None`: dense f32 values; `Some`: a packed weight of these sizes.
    pub packed: Option<S>,
}

/// A parameter's values as a packed model file of format `F` holds them.
#[derive(Clone, Debug, PartialEq)]
pub enum Stored<F: PackedFormat> {
    /// Dense values in Burn's layout.
    Dense(Vec<f32>),
    /// A packed weight.
    Packed(F::Weight),
}

/// A packed model of format `F`: its name, provenance and every parameter by path.
#[derive(Clone, Debug, PartialEq)]
pub struct PackedModel<F: PackedFormat> {
    /// The model's name.
    pub model: String,
    /// Provenance (`level`, `source`, ...).
    pub about: BTreeMap<String, String>,
    /// Every parameter by Burn's parameter path: shape and values.
    pub params: BTreeMap<String, (Vec<usize>, Stored<F>)>,
}

impl<F: PackedFormat> PackedModel<F> {
    /// The file's bytes. A packed weight is written as it is: one that does not hold together
    /// makes a file that reading refuses.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut entries = Vec::new();
        let mut payload: Vec<u8> = Vec::new();
        for (path, (dims, stored)) in &self.params {
            let packed = match stored {
                Stored::Dense(values) => {
                    put_f32s(&mut payload, values);
                    None
                }
                Stored::Packed(weight) => Some(F::put(weight, &mut payload)),
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
        F::FORMAT.write(&header, &payload)
    }

    /// Reads a file's bytes; the error says what is wrong with them.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, F::Error> {
        let (header, mut payload) = F::FORMAT.read(bytes).map_err(F::refused)?;
        let header: Header<F::Sizes> =
            serde_json::from_slice(header).map_err(|e| F::refused(F::unreadable(&e)))?;
        let mut params = BTreeMap::new();
        for e in header.params {
            if params.contains_key(&e.path) {
                return Err(F::refused(format!("it has {} twice", e.path)));
            }
            let count =
                checked_count(&e.dims).ok_or_else(|| F::refused(F::overflows(&e.path, &e.dims)))?;
            let stored = match e.packed {
                None => Stored::Dense(payload.f32s(count, &e.path).map_err(F::refused)?),
                Some(sizes) => {
                    Stored::Packed(F::read(&mut payload, &e.path, &e.dims, count, sizes)?)
                }
            };
            params.insert(e.path, (e.dims, stored));
        }
        payload.finish().map_err(F::refused)?;
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

    const FORMAT: Format = Format {
        magic: b"EMBERTST",
        version: 3,
        what: "test file",
    };

    fn file() -> Vec<u8> {
        let mut payload = Vec::new();
        put_u32s(&mut payload, &[7, u32::MAX]);
        put_f32s(&mut payload, &[0.25]);
        FORMAT.write(br#"{"a":1}"#, &payload)
    }

    #[test]
    fn files_round_trip() {
        let bytes = file();
        let (header, mut p) = FORMAT.read(&bytes).unwrap();
        assert_eq!(header, br#"{"a":1}"#);
        assert_eq!(p.u32s(2, "ints").unwrap(), [7, u32::MAX]);
        assert_eq!(p.f32s(1, "floats").unwrap(), [0.25]);
        p.finish().unwrap();
    }

    #[test]
    fn damaged_files_are_refused_with_the_reason() {
        let bytes = file();
        let err = |b: &[u8]| FORMAT.read(b).unwrap_err();
        assert!(err(b"short").contains("not a test file (no EMBERTST header)"));
        let mut magic = bytes.clone();
        magic[0] = b'X';
        assert!(err(&magic).contains("EMBERTST"));
        for at in [9, 13, 20, bytes.len() - 1] {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x10;
            assert!(err(&flipped).contains("corrupt"), "byte {at}");
        }
        assert!(err(&bytes[..bytes.len() - 3]).contains("corrupt"));
        // a valid checksum over a wrong version or an overlong header length
        let rewrite = |at: usize, value: u32| {
            let mut b = bytes[..bytes.len() - 4].to_vec();
            b[at..at + 4].copy_from_slice(&value.to_le_bytes());
            let crc = crc32fast::hash(&b);
            b.extend_from_slice(&crc.to_le_bytes());
            b
        };
        assert!(err(&rewrite(8, 2)).contains("format version 2; this build reads version 3"));
        assert!(err(&rewrite(12, u32::MAX)).contains("header is truncated"));
        // a payload read past its end, or with bytes left over
        let (_, mut p) = FORMAT.read(&bytes).unwrap();
        assert!(
            p.u32s(usize::MAX, "w")
                .unwrap_err()
                .contains("truncated in w")
        );
        assert!(p.u32s(4, "w").unwrap_err().contains("truncated in w"));
        assert!(p.finish().unwrap_err().contains("12 bytes follow"));
        assert_eq!(checked_count(&[usize::MAX, 2]), None);
        assert_eq!(checked_count(&[3, 4]), Some(12));
        assert_eq!(checked_count(&[]), Some(1));
    }

    /// A format whose packed weight is a list of `u32`s, its size the list's length.
    #[derive(Clone, Debug, PartialEq)]
    struct Listed;

    impl PackedFormat for Listed {
        type Weight = Vec<u32>;
        type Sizes = usize;
        type Error = String;
        const FORMAT: Format = FORMAT;
        fn put(weight: &Vec<u32>, payload: &mut Vec<u8>) -> usize {
            put_u32s(payload, weight);
            weight.len()
        }
        fn read(
            payload: &mut Payload<'_>,
            path: &str,
            _dims: &[usize],
            count: usize,
            len: usize,
        ) -> Result<Vec<u32>, String> {
            if len > count {
                return Err(format!("{path}: {len} values for {count}"));
            }
            payload.u32s(len, path)
        }
        fn refused(reason: String) -> String {
            reason
        }
        fn fits(_: &Vec<u32>, _: &[usize]) -> Result<(), String> {
            Ok(())
        }
    }

    fn model() -> PackedModel<Listed> {
        PackedModel {
            model: "m".into(),
            about: [("level".to_string(), "2x".to_string())].into(),
            params: [
                (
                    "a.weight".to_string(),
                    (vec![2, 3], Stored::Packed(vec![4, 5])),
                ),
                (
                    "a.bias".to_string(),
                    (vec![2], Stored::Dense(vec![0.5, -1.0])),
                ),
            ]
            .into(),
        }
    }

    #[test]
    fn packed_models_round_trip_with_their_header_and_payload_in_path_order() {
        let m = model();
        let bytes = m.to_bytes();
        assert_eq!(PackedModel::from_bytes(&bytes).unwrap(), m);
        let (header, mut payload) = FORMAT.read(&bytes).unwrap();
        assert_eq!(
            header,
            br#"{"model":"m","about":{"level":"2x"},"params":[{"path":"a.bias","dims":[2],"packed":null},{"path":"a.weight","dims":[2,3],"packed":2}]}"#
        );
        assert_eq!(payload.f32s(2, "a.bias").unwrap(), [0.5, -1.0]);
        assert_eq!(payload.u32s(2, "a.weight").unwrap(), [4, 5]);
        payload.finish().unwrap();
    }

    #[test]
    fn packed_models_with_broken_headers_are_refused_with_the_reason() {
        let bytes = model().to_bytes();
        let (header, mut payload) = FORMAT.read(&bytes).unwrap();
        let header: Header<usize> = serde_json::from_slice(header).unwrap();
        let mut rest = Vec::new();
        put_f32s(&mut rest, &payload.f32s(4, "all").unwrap());
        let refusal = |edit: &dyn Fn(&mut Header<usize>)| {
            let mut h = header.clone();
            edit(&mut h);
            let bytes = FORMAT.write(&serde_json::to_vec(&h).unwrap(), &rest);
            PackedModel::<Listed>::from_bytes(&bytes).unwrap_err()
        };
        let e = refusal(&|h| h.params[0].dims = vec![usize::MAX, 2]);
        assert_eq!(e, format!("a.bias: shape {:?} overflows", [usize::MAX, 2]));
        let e = refusal(&|h| h.params.insert(1, h.params[0].clone()));
        assert_eq!(e, "it has a.bias twice");
        let e = refusal(&|h| h.params[1].packed = Some(7));
        assert_eq!(e, "a.weight: 7 values for 6");
        let e = refusal(&|h| h.params[1].packed = Some(1));
        assert_eq!(e, "4 bytes follow the last parameter");
        let e = refusal(&|h| h.params[0].dims = vec![3]);
        assert_eq!(e, "it is truncated in a.weight");
        let e = PackedModel::<Listed>::from_bytes(&FORMAT.write(b"[1]", &[])).unwrap_err();
        assert!(e.starts_with("its header is not readable ("), "{e}");
        let e = PackedModel::<Listed>::from_bytes(b"EMBERTST").unwrap_err();
        assert!(e.contains("no EMBERTST header"), "{e}");
    }
}
