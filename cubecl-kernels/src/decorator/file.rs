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

impl Payload<'_> {
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
}
