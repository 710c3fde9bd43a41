//! Errors of the model zoo and the data loaders: one line each, meant for a user at a terminal.

use std::path::PathBuf;

/// Everything the data loaders and model constructors can report to a user.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A dataset file is missing.
    #[error("dataset file not found: {path} (expected the standard idx files, gzipped or raw, in {dir})", path = .path.display(), dir = .dir.display())]
    MissingFile {
        /// The file looked for (without `.gz`).
        path: PathBuf,
        /// The directory searched.
        dir: PathBuf,
    },
    /// A dataset file could not be read or decompressed.
    #[error("cannot read {path}: {source}", path = .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A dataset file is not what it claims to be.
    #[error("malformed file {path}: {reason}", path = .path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A weights file (a PyTorch state dict, a safetensors file) that cannot be used.
    #[error("{path}: {reason}", path = .path.display())]
    Weights {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An invalid option value (a dataset or model that cannot be used as asked).
    #[error("invalid option: {0}")]
    Invalid(String),
}

/// Result with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
    pub(crate) fn malformed(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Self::Malformed {
            path: path.into(),
            reason: reason.into(),
        }
    }
}
