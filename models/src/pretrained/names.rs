//! Where each parameter of an Ember model lives in a PyTorch state dict: torchvision's names
//! for the ResNets, timm's for the DeiTs.

use crate::resnet::ResNetConfig;

/// Where one Ember parameter (a tensor at a module path) lives in a PyTorch state dict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// The state-dict key.
    pub key: String,
    /// `Some((i, n))`: the `i`-th of `n` equal blocks of the tensor's rows (timm's fused
    /// query/key/value projection holds Burn's three attention linears).
    pub rows: Option<(usize, usize)>,
    /// A linear layer's weight: PyTorch stores `[out, in]`, Burn `[in, out]`.
    pub transpose: bool,
}

impl Source {
    fn plain(key: String) -> Self {
        Self {
            key,
            rows: None,
            transpose: false,
        }
    }

    fn linear(key: String, leaf: &str) -> Self {
        Self {
            transpose: leaf == "weight",
            ..Self::plain(key)
        }
    }
}

/// How a family of models names its parameters in PyTorch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Names {
    /// torchvision's ResNets (`conv1`, `bn1`, `layer1.0.conv1`, `downsample.0/1`, `fc`), with
    /// the blocks per stage of the depth.
    Torchvision {
        /// Blocks in each of the four stages.
        blocks: [usize; 4],
    },
    /// timm's DeiTs (`patch_embed.proj`, `cls_token`, `pos_embed`, `blocks.N.attn.qkv`,
    /// `blocks.N.mlp.fc1`, `norm`, `head`).
    Timm,
    /// Ember's own module paths, tensors in Burn's layouts: any model.
    Ember,
}

impl Names {
    /// torchvision's names for a ResNet of this configuration.
    pub fn torchvision(config: &ResNetConfig) -> Self {
        Self::Torchvision {
            blocks: config.depth.blocks(),
        }
    }

    /// The state-dict source of the Ember parameter at `path`; `None` for a parameter the
    /// PyTorch model does not have (PReLU slopes).
    pub fn source(&self, path: &str) -> Option<Source> {
        let parts: Vec<&str> = path.split('.').collect();
        match self {
            Self::Torchvision { blocks } => torchvision(blocks, &parts),
            Self::Timm => timm(&parts),
            Self::Ember => Some(Source::plain(path.to_string())),
        }
    }

    /// State-dict keys that no Ember parameter takes and that are left out on purpose:
    /// batch norm's `num_batches_tracked` (Burn's batch norm has no counter; momentum is fixed).
    pub fn ignored(&self, key: &str) -> bool {
        matches!(self, Self::Torchvision { .. }) && key.ends_with(".num_batches_tracked")
    }

    /// Whether `key` belongs to the classifier head (torchvision's `fc`, timm's `head`).
    pub fn is_head(&self, key: &str) -> bool {
        match self {
            Self::Torchvision { .. } => key.starts_with("fc."),
            Self::Timm => key.starts_with("head."),
            Self::Ember => false,
        }
    }

    /// The `num_batches_tracked` counters a torchvision state dict has (one per batch norm),
    /// which `load_state_dict(strict=True)` expects: the key of each batch-norm source.
    pub fn counter(&self, source: &Source) -> Option<String> {
        match self {
            Self::Torchvision { .. } => source
                .key
                .strip_suffix(".running_mean")
                .map(|norm| format!("{norm}.num_batches_tracked")),
            Self::Timm | Self::Ember => None,
        }
    }
}

/// Batch norm's and layer norm's parameters by Burn's names.
fn norm_leaf(leaf: &str) -> Option<&'static str> {
    Some(match leaf {
        "gamma" => "weight",
        "beta" => "bias",
        "running_mean" => "running_mean",
        "running_var" => "running_var",
        _ => return None,
    })
}

fn torchvision(blocks: &[usize; 4], parts: &[&str]) -> Option<Source> {
    let norm =
        |prefix: String, leaf: &str| Some(Source::plain(format!("{prefix}.{}", norm_leaf(leaf)?)));
    match parts {
        ["stem", "weight"] => Some(Source::plain("conv1.weight".into())),
        ["stem_norm", leaf] => norm("bn1".into(), leaf),
        ["fc", leaf] => Some(Source::linear(format!("fc.{leaf}"), leaf)),
        ["blocks", b, rest @ ..] => {
            let b: usize = b.parse().ok()?;
            let (mut stage, mut index) = (0, b);
            while stage < 4 && index >= blocks[stage] {
                index -= blocks[stage];
                stage += 1;
            }
            let block = format!("layer{}.{index}", stage + 1);
            match rest {
                ["layers", j, "conv", "weight"] => {
                    let j: usize = j.parse().ok()?;
                    Some(Source::plain(format!("{block}.conv{}.weight", j + 1)))
                }
                ["layers", j, "norm", leaf] => {
                    let j: usize = j.parse().ok()?;
                    norm(format!("{block}.bn{}", j + 1), leaf)
                }
                ["shortcut", "conv", "weight"] => {
                    Some(Source::plain(format!("{block}.downsample.0.weight")))
                }
                ["shortcut", "norm", leaf] => norm(format!("{block}.downsample.1"), leaf),
                _ => None,
            }
        }
        _ => None,
    }
}

fn timm(parts: &[&str]) -> Option<Source> {
    match parts {
        ["embed", leaf] => Some(Source::plain(format!("patch_embed.proj.{leaf}"))),
        ["cls"] => Some(Source::plain("cls_token".into())),
        ["pos"] => Some(Source::plain("pos_embed".into())),
        ["norm", leaf] => Some(Source::plain(format!("norm.{}", norm_leaf(leaf)?))),
        ["head", leaf] => Some(Source::linear(format!("head.{leaf}"), leaf)),
        ["blocks", n, rest @ ..] => {
            let block = format!("blocks.{n}");
            match rest {
                [layer @ ("norm1" | "norm2"), leaf] => Some(Source::plain(format!(
                    "{block}.{layer}.{}",
                    norm_leaf(leaf)?
                ))),
                [fc @ ("fc1" | "fc2"), leaf] => {
                    Some(Source::linear(format!("{block}.mlp.{fc}.{leaf}"), leaf))
                }
                ["attn", "output", leaf] => {
                    Some(Source::linear(format!("{block}.attn.proj.{leaf}"), leaf))
                }
                ["attn", which @ ("query" | "key" | "value"), leaf] => {
                    let i = ["query", "key", "value"].iter().position(|w| w == which)?;
                    Some(Source {
                        rows: Some((i, 3)),
                        ..Source::linear(format!("{block}.attn.qkv.{leaf}"), leaf)
                    })
                }
                _ => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resnet_blocks_are_named_by_stage_and_index() {
        let names = Names::Torchvision {
            blocks: [3, 4, 6, 3],
        };
        let key = |path: &str| names.source(path).map(|s| s.key);
        assert_eq!(key("stem.weight").unwrap(), "conv1.weight");
        assert_eq!(key("stem_norm.gamma").unwrap(), "bn1.weight");
        assert_eq!(
            key("blocks.0.layers.2.conv.weight").unwrap(),
            "layer1.0.conv3.weight"
        );
        assert_eq!(
            key("blocks.3.layers.0.norm.beta").unwrap(),
            "layer2.0.bn1.bias"
        );
        assert_eq!(
            key("blocks.7.shortcut.conv.weight").unwrap(),
            "layer3.0.downsample.0.weight"
        );
        assert_eq!(
            key("blocks.15.shortcut.norm.running_var").unwrap(),
            "layer4.2.downsample.1.running_var"
        );
        assert!(names.source("fc.weight").unwrap().transpose);
        assert!(!names.source("fc.bias").unwrap().transpose);
        assert_eq!(key("act.0.alpha"), None);
        assert!(names.ignored("layer1.0.bn1.num_batches_tracked"));
        let bn = names.source("blocks.0.layers.0.norm.running_mean").unwrap();
        assert_eq!(
            names.counter(&bn).unwrap(),
            "layer1.0.bn1.num_batches_tracked"
        );
    }

    #[test]
    fn deit_attention_takes_thirds_of_the_fused_projection() {
        let names = Names::Timm;
        for (i, which) in ["query", "key", "value"].iter().enumerate() {
            let s = names
                .source(&format!("blocks.1.attn.{which}.weight"))
                .unwrap();
            assert_eq!(
                (s.key.as_str(), s.rows, s.transpose),
                ("blocks.1.attn.qkv.weight", Some((i, 3)), true)
            );
        }
        let s = names.source("blocks.0.attn.output.bias").unwrap();
        assert_eq!(s.key, "blocks.0.attn.proj.bias");
        assert_eq!(
            names.source("blocks.0.fc2.weight").unwrap().key,
            "blocks.0.mlp.fc2.weight"
        );
        assert_eq!(names.source("norm.beta").unwrap().key, "norm.bias");
        assert_eq!(names.source("cls").unwrap().key, "cls_token");
        assert!(!names.ignored("blocks.0.attn.qkv.bias"));
    }
}
