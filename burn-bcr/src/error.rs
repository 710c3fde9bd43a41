//! What can go wrong when pruning a weight to BCR or reading BCRC.

/// A BCR refusal, in words.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BcrError {
    /// A malformed or out-of-range `RATEx:RxC` level.
    #[error("level: {0}")]
    Level(String),
    /// A block size that is zero or does not fit the weight.
    #[error("block: {0}")]
    Block(String),
    /// Sizes that do not match.
    #[error("shape: {0}")]
    Shape(String),
    /// A NaN or infinite weight.
    #[error("non-finite value: {0}")]
    NonFinite(String),
    /// BCRC arrays that do not hold together (a corrupt or truncated file).
    #[error("corrupt BCRC: {0}")]
    Corrupt(String),
    /// A packed model file (`model.bcr`) that cannot be read: not one, damaged, truncated, of
    /// another version, or with sizes that do not hold together.
    #[error("packed BCR model file: {0}")]
    File(String),
}
