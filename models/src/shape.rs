//! The sizes of a zoo model that its kind does not fix by name ([`Shape`]), the bounds every
//! shape is checked against before anything is built (`ModelKind::check_shape` in
//! [`crate::classifier`]), and the form runs and packed models record it in.

/// The widest ResNet `ModelKind::check_shape` builds (64 is the paper's; 1024 makes its last
/// stage's 3×3 convolutions 8192 × 8192 × 9, 2.4 GB each).
pub const MAX_RESNET_WIDTH: usize = 1024;
/// The widest DeiT `ModelKind::check_shape` builds (768 is DeiT-B's; 8192 makes each MLP weight
/// 8192 × 32768, 1 GiB).
pub const MAX_DEIT_DIM: usize = 8192;
/// The deepest DeiT `ModelKind::check_shape` builds (12 blocks in the paper).
pub const MAX_DEIT_DEPTH: usize = 256;

/// The sizes of a ResNet or DeiT that its kind ([`crate::classifier::ModelKind`]) does not fix
/// by name when it is built from PyTorch weights: a ResNet's first-stage width, a DeiT's width,
/// depth, heads and patch side. A kind has its own (`ModelKind::own_shape`); a run or a packed
/// model started from weights of another shape records theirs (`ember-run.json`'s `shape`, a
/// packed model's `about.shape`) and is rebuilt at it (`ModelKind::build_shaped`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "family", rename_all = "lowercase", deny_unknown_fields)]
pub enum Shape {
    /// A ResNet.
    Resnet {
        /// Channels of the first stage (stages double it).
        width: usize,
    },
    /// A DeiT.
    Deit {
        /// Embedding width.
        dim: usize,
        /// Transformer blocks.
        depth: usize,
        /// Attention heads.
        heads: usize,
        /// Patch side in pixels.
        patch: usize,
    },
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Resnet { width } => write!(f, "width {width}"),
            Self::Deit {
                dim,
                depth,
                heads,
                patch,
            } => write!(
                f,
                "dim {dim}, {depth} blocks, {heads} heads, {patch}×{patch} patches"
            ),
        }
    }
}

impl Shape {
    /// The shape as one line of JSON (how a packed model's `about` map holds it).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a shape serialises")
    }

    /// A shape from [`Shape::to_json`]'s line.
    pub fn from_json(text: &str) -> std::result::Result<Self, String> {
        serde_json::from_str(text).map_err(|e| format!("not a model shape ({e}): {text}"))
    }
}
