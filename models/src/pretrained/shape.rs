//! A state dict's architecture, read from its keys and their shapes.

use super::{StateDict, bad};
use crate::deit::DeitConfig;
use crate::error::Result;
use crate::resnet::{Depth, ResNetConfig};

/// The zoo model a state dict holds, at the shape its tensors have.
#[derive(Clone, Debug, PartialEq)]
pub enum Architecture {
    /// A torchvision ResNet (`conv1.weight`, `layer1.0.conv1.weight`, `fc.weight`).
    ResNet(ResNetConfig),
    /// A timm DeiT without the distillation token (`patch_embed.proj.weight`, `pos_embed`).
    Deit(DeitConfig),
}

impl std::fmt::Display for Architecture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ResNet(c) => write!(
                f,
                "ResNet-{} ({} stem, width {}, {} classes)",
                match c.depth {
                    Depth::R18 => 18,
                    Depth::R34 => 34,
                    Depth::R50 => 50,
                },
                if c.cifar_stem { "CIFAR" } else { "ImageNet" },
                c.width,
                c.classes
            ),
            Self::Deit(c) => write!(
                f,
                "DeiT (dim {}, {} blocks, {} heads, {}×{} patches of {}×{} images, {} classes)",
                c.dim,
                c.depth,
                c.heads,
                c.patch_size,
                c.patch_size,
                c.image_size,
                c.image_size,
                c.classes
            ),
        }
    }
}

/// timm's DeiTs have attention heads of 64 channels (Ti 192/3, S 384/6, B 768/12).
pub const DEIT_HEAD_DIM: usize = 64;

impl StateDict {
    /// The architecture and shape of the model the state dict holds.
    pub fn architecture(&self) -> Result<Architecture> {
        if self.get("conv1.weight").is_some() && self.get("layer1.0.conv1.weight").is_some() {
            self.resnet().map(Architecture::ResNet)
        } else if self.get("patch_embed.proj.weight").is_some() {
            self.deit().map(Architecture::Deit)
        } else {
            let first: Vec<&str> = self.keys().take(4).collect();
            let ember = ["stem.weight", "embed.weight", "conv1.weight", "fc1.weight"]
                .iter()
                .any(|k| self.get(k).is_some());
            Err(self.error(format!(
                "unknown architecture: it has neither torchvision's ResNet keys \
                 (layer1.0.conv1.weight) nor timm's DeiT keys (patch_embed.proj.weight); its \
                 first keys are {}{}",
                first.join(", "),
                if ember {
                    " (Ember's own module paths, as `ember export --names ember` writes them, \
                     are not read back: evaluate the run it came from)"
                } else {
                    ""
                }
            )))
        }
    }

    /// The shape of the tensor under `key`, which must have `rank` dimensions.
    fn shape_of(&self, key: &str, rank: usize) -> Result<&[usize]> {
        match self.dims(key) {
            Some(d) if d.len() == rank => Ok(d),
            Some(d) => Err(self.error(format!("key {key} is {d:?}: expected {rank} dimensions"))),
            None => Err(self.error(format!("key {key} is missing"))),
        }
    }

    fn count(&self, key: impl Fn(usize) -> String) -> usize {
        (0..).take_while(|&i| self.get(&key(i)).is_some()).count()
    }

    fn resnet(&self) -> Result<ResNetConfig> {
        let stem = self.shape_of("conv1.weight", 4)?;
        let (width, channels, k) = (stem[0], stem[1], stem[2]);
        let cifar_stem = match k {
            7 => false,
            3 => true,
            _ => {
                return Err(self.error(format!(
                    "conv1.weight is {k}×{k}: a ResNet stem is 7×7 (ImageNet) or 3×3 (CIFAR)"
                )));
            }
        };
        let blocks: Vec<usize> = (1..=4)
            .map(|s| self.count(|i| format!("layer{s}.{i}.conv1.weight")))
            .collect();
        let bottleneck = self.get("layer1.0.conv3.weight").is_some();
        let depth = match (blocks.as_slice(), bottleneck) {
            ([2, 2, 2, 2], false) => Depth::R18,
            ([3, 4, 6, 3], false) => Depth::R34,
            ([3, 4, 6, 3], true) => Depth::R50,
            _ => {
                return Err(self.error(format!(
                    "a ResNet with {blocks:?} {} blocks per stage: the zoo has ResNet-18 \
                     ([2, 2, 2, 2] basic), ResNet-34 ([3, 4, 6, 3] basic) and ResNet-50 \
                     ([3, 4, 6, 3] bottleneck)",
                    if bottleneck { "bottleneck" } else { "basic" }
                )));
            }
        };
        let classes = self.shape_of("fc.weight", 2)?[0];
        let mut config = ResNetConfig::new(depth, cifar_stem, classes).with_width(width);
        config.channels = channels;
        Ok(config)
    }

    fn deit(&self) -> Result<DeitConfig> {
        if let Some(key) = ["dist_token", "head_dist.weight"]
            .into_iter()
            .find(|k| self.get(k).is_some())
        {
            return Err(self.error(format!(
                "it is a distilled DeiT ({key}): the zoo's DeiT has no distillation token; use \
                 the weights of deit_*_patch16_224, not deit_*_distilled_patch16_224"
            )));
        }
        let proj = self.shape_of("patch_embed.proj.weight", 4)?;
        let (dim, channels, patch) = (proj[0], proj[1], proj[2]);
        let tokens = self.shape_of("pos_embed", 3)?[1];
        let side = (tokens.saturating_sub(1) as f64).sqrt().round() as usize;
        if side * side + 1 != tokens {
            return Err(bad(
                &self.path,
                format!(
                    "pos_embed has {tokens} positions: expected a class token and a square grid \
                     of patches"
                ),
            ));
        }
        if dim % DEIT_HEAD_DIM != 0 {
            return Err(self.error(format!(
                "patch_embed.proj.weight is {dim} wide: timm's DeiTs have heads of \
                 {DEIT_HEAD_DIM} channels, so the width must be a multiple of {DEIT_HEAD_DIM}"
            )));
        }
        Ok(DeitConfig {
            dim,
            depth: self.count(|i| format!("blocks.{i}.attn.qkv.weight")),
            heads: dim / DEIT_HEAD_DIM,
            image_size: side * patch,
            patch_size: patch,
            channels,
            classes: self.shape_of("head.weight", 2)?[0],
        })
    }
}
