//! The sizes of a zoo model that its [`ModelKind`] does not fix by name ([`Shape`]): each
//! kind's own, the bounds every shape is checked against before anything is built, and the
//! form runs and packed models record it in.

use crate::classifier::{DEIT_PATCH, ModelKind};
use crate::data::DataSpec;
use crate::deit::DeitConfig;

/// The widest ResNet [`ModelKind::check_shape`] builds (64 is the paper's; 1024 makes its
/// last stage's 3×3 convolutions 8192 × 8192 × 9, 2.4 GB each).
pub const MAX_RESNET_WIDTH: usize = 1024;
/// The widest DeiT [`ModelKind::check_shape`] builds (768 is DeiT-B's; 8192 makes each MLP
/// weight 8192 × 32768, 1 GiB).
pub const MAX_DEIT_DIM: usize = 8192;
/// The deepest DeiT [`ModelKind::check_shape`] builds (12 blocks in the paper).
pub const MAX_DEIT_DEPTH: usize = 256;

/// The sizes of a ResNet or DeiT that its [`ModelKind`] does not fix by name when it is built
/// from PyTorch weights: a ResNet's first-stage width, a DeiT's width, depth, heads and patch
/// side. A kind has its own ([`ModelKind::own_shape`]); a run or a packed model started from
/// weights of another shape records theirs (`ember-run.json`'s `shape`, a packed model's
/// `about.shape`) and is rebuilt at it ([`ModelKind::build_shaped`]).
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

impl ModelKind {
    /// The sizes this kind is built at by name: a ResNet's width, a DeiT's width, depth, heads
    /// and patch; `None` for the models without a [`Shape`].
    pub fn own_shape(self) -> Option<Shape> {
        use ModelKind::*;
        let deit = |c: DeitConfig| Shape::Deit {
            dim: c.dim,
            depth: c.depth,
            heads: c.heads,
            patch: DEIT_PATCH,
        };
        Some(match self {
            Resnet18CifarW16 => Shape::Resnet { width: 16 },
            Resnet18 | Resnet34 | Resnet50 | Resnet18Cifar | Resnet34Cifar | Resnet50Cifar => {
                Shape::Resnet { width: 64 }
            }
            DeitTi => deit(DeitConfig::tiny(1)),
            DeitS => deit(DeitConfig::small(1)),
            DeitB => deit(DeitConfig::base(1)),
            _ => return None,
        })
    }

    /// Whether this kind can be built at `shape` for items of `spec`: a shape of its own
    /// family, sizes of at least 1 and at most [`MAX_RESNET_WIDTH`] / [`MAX_DEIT_DIM`] /
    /// [`MAX_DEIT_DEPTH`] (a shape read from a file allocates nothing unchecked), heads that
    /// divide the width, patches that tile the images.
    pub fn check_shape(self, shape: Shape, spec: DataSpec) -> std::result::Result<(), String> {
        let family = |s: Option<Shape>| s.map(|s| std::mem::discriminant(&s));
        if family(self.own_shape()) != family(Some(shape)) {
            return Err(format!("{self} cannot have the shape \"{shape}\""));
        }
        let side = match spec {
            DataSpec::Images(input) => input.side,
            DataSpec::Sequences { .. } => 0,
        };
        let why = match shape {
            Shape::Resnet { width } if !(1..=MAX_RESNET_WIDTH).contains(&width) => {
                format!("a ResNet's width is 1 to {MAX_RESNET_WIDTH}")
            }
            Shape::Resnet { .. } => return Ok(()),
            Shape::Deit { dim, .. } if !(1..=MAX_DEIT_DIM).contains(&dim) => {
                format!("a DeiT's width is 1 to {MAX_DEIT_DIM}")
            }
            Shape::Deit { depth, .. } if !(1..=MAX_DEIT_DEPTH).contains(&depth) => {
                format!("a DeiT has 1 to {MAX_DEIT_DEPTH} blocks")
            }
            Shape::Deit { dim, heads, .. } if heads == 0 || !dim.is_multiple_of(heads) => {
                "its heads must divide its width".into()
            }
            Shape::Deit { patch, .. }
                if patch == 0 || side < patch || !side.is_multiple_of(patch) =>
            {
                format!("its patches must tile the {side}-pixel images")
            }
            Shape::Deit { .. } => return Ok(()),
        };
        Err(format!(
            "{self} of shape \"{shape}\" cannot be built for {spec}: {why}"
        ))
    }
}
