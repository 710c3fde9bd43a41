//! Errors of multiplier parsing, LUT generation and LUT files.

use std::path::PathBuf;

/// Names accepted by [`Multiplier::parse`](crate::Multiplier::parse), for help texts and errors
/// (case-insensitive). A test rebuilds it from the tables `parse` reads, so it lists exactly them.
pub const BUILT_IN_HELP: &str = "native, fp32, accM, mbmM, mitchellM, realmM (M = 1..=11; mbm/mitchell also 23), \
afm10/12/14/16/32, mit10/12/14/16/32, bf16, bfloat16, realm16";

/// What can go wrong when choosing a multiplier or reading a table.
#[derive(Debug, thiserror::Error)]
pub enum ApproxError {
    /// A multiplier name that is neither built in nor a file.
    #[error("unknown multiplier `{0}` (built in: {list}; or a path to a LUT file)", list = BUILT_IN_HELP)]
    UnknownMultiplier(String),
    /// A convolution route name that does not exist.
    #[error("unknown convolution route `{0}` (choose gemm, im2col, burn)")]
    UnknownConvRoute(String),
    /// A mantissa width the multiplier does not support.
    #[error("multiplier `{name}` does not support m = {m} (supported: {supported})")]
    UnsupportedBits {
        /// Multiplier family.
        name: String,
        /// Requested width.
        m: u32,
        /// Supported widths, in words.
        supported: &'static str,
    },
    /// A LUT width outside `1..=max`.
    #[error("mantissa width m = {m} is out of range: lookup tables support m = 1..={max}")]
    Bits {
        /// Requested width.
        m: u32,
        /// Largest width.
        max: u32,
    },
    /// A table with the wrong number of entries.
    #[error("a lookup table for m = {m} has {expected} entries, found {found}")]
    LutSize {
        /// Width.
        m: u32,
        /// Entries expected.
        expected: usize,
        /// Entries found.
        found: usize,
    },
    /// A table entry with bits above the carry.
    #[error(
        "lookup-table entry {index} is {value:#x}: bits above the carry (bit {m}) must be zero"
    )]
    LutEntry {
        /// Entry index.
        index: usize,
        /// Its value.
        value: u32,
        /// Width.
        m: u32,
    },
    /// A user multiplier whose product of two significands is not in `[1, 4)`.
    #[error(
        "multiplier `{name}` returned {c} for {a} × {b}: the product of two numbers in [1, 2) must lie in [1, 4)"
    )]
    NotAMantissaProduct {
        /// Multiplier name.
        name: String,
        /// Operand.
        a: f32,
        /// Operand.
        b: f32,
        /// What it returned.
        c: f32,
    },
    /// A file that cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file that cannot be written (nothing was left at the path).
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A LUT file whose contents are not a table.
    #[error("{path}: {reason}")]
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Refusing to overwrite an existing file.
    #[error("{0} already exists: choose another output path or remove it first")]
    Exists(PathBuf),
}
