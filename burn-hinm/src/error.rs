//! What can go wrong when pruning a weight to HiNM.

/// A HiNM refusal, in words.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HinmError {
    /// The tile height `V` does not fit the weight.
    #[error("tile: {0}")]
    Tile(String),
    /// A sparsity level that keeps nothing or is out of range.
    #[error("level: {0}")]
    Level(String),
    /// Sizes that do not match.
    #[error("shape: {0}")]
    Shape(String),
    /// A NaN or infinite weight or score.
    #[error("non-finite value: {0}")]
    NonFinite(String),
    /// An unknown permutation method.
    #[error("unknown permutation {0:?}: use gyro, ovw or none")]
    Method(String),
    /// Packed arrays that do not hold together (a corrupt or truncated file).
    #[error("corrupt packed weight: {0}")]
    Corrupt(String),
    /// A packed model file (`model.hinm`) that cannot be read: not one, damaged, truncated, of
    /// another version, or with sizes that do not hold together.
    #[error("packed HiNM model file: {0}")]
    File(String),
}
