//! DeiT (Touvron et al., 2021, "Training data-efficient image transformers & distillation
//! through attention"), the ViT without the distillation token, with stock `burn::nn` layers:
//! Burn's `MultiHeadAttention` (query, key, value and output linears), `LayerNorm` with
//! ε = 1e-6, a `p × p` patch convolution, a class token, learned position embeddings, and a
//! linear head on the class token. Every contraction is a `Conv2d`, a `Linear` or a `matmul`,
//! so every Ember decorator reaches it.

use burn::module::Param;
use burn::nn::attention::{MhaInput, MultiHeadAttention, MultiHeadAttentionConfig};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Gelu, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::Distribution;

/// Shape of a DeiT.
#[derive(Clone, Debug, PartialEq)]
pub struct DeitConfig {
    /// Embedding width.
    pub dim: usize,
    /// Transformer blocks.
    pub depth: usize,
    /// Attention heads.
    pub heads: usize,
    /// Input image side in pixels.
    pub image_size: usize,
    /// Patch side in pixels.
    pub patch_size: usize,
    /// Input channels.
    pub channels: usize,
    /// Output classes.
    pub classes: usize,
}

impl DeitConfig {
    fn paper(dim: usize, heads: usize, classes: usize) -> Self {
        Self {
            dim,
            depth: 12,
            heads,
            image_size: 224,
            patch_size: 16,
            channels: 3,
            classes,
        }
    }

    /// DeiT-Ti: 192 wide, 3 heads.
    pub fn tiny(classes: usize) -> Self {
        Self::paper(192, 3, classes)
    }

    /// DeiT-S: 384 wide, 6 heads.
    pub fn small(classes: usize) -> Self {
        Self::paper(384, 6, classes)
    }

    /// DeiT-B: 768 wide, 12 heads.
    pub fn base(classes: usize) -> Self {
        Self::paper(768, 12, classes)
    }

    /// Patches per image.
    pub fn patches(&self) -> usize {
        (self.image_size / self.patch_size).pow(2)
    }

    /// A freshly initialised model (position embeddings and class token N(0, 0.02²)).
    pub fn init<B: Backend>(&self, device: &B::Device) -> Deit<B> {
        let d = self.dim;
        let normal = Distribution::Normal(0.0, 0.02);
        Deit {
            embed: Conv2dConfig::new([self.channels, d], [self.patch_size; 2])
                .with_stride([self.patch_size; 2])
                .init(device),
            cls: Param::from_tensor(Tensor::random([1, 1, d], normal, device)),
            pos: Param::from_tensor(Tensor::random([1, self.patches() + 1, d], normal, device)),
            blocks: (0..self.depth)
                .map(|_| Encoder {
                    norm1: norm(d, device),
                    attn: MultiHeadAttentionConfig::new(d, self.heads)
                        .with_dropout(0.0)
                        .init(device),
                    norm2: norm(d, device),
                    fc1: LinearConfig::new(d, 4 * d).init(device),
                    fc2: LinearConfig::new(4 * d, d).init(device),
                    gelu: Gelu::new(),
                })
                .collect(),
            norm: norm(d, device),
            head: LinearConfig::new(d, self.classes).init(device),
        }
    }
}

fn norm<B: Backend>(d: usize, device: &B::Device) -> LayerNorm<B> {
    LayerNormConfig::new(d).with_epsilon(1e-6).init(device)
}

/// A pre-norm transformer block: `x + attn(norm₁(x))`, then `x + mlp(norm₂(x))`.
#[derive(Module, Debug)]
pub struct Encoder<B: Backend> {
    norm1: LayerNorm<B>,
    attn: MultiHeadAttention<B>,
    norm2: LayerNorm<B>,
    fc1: Linear<B>,
    fc2: Linear<B>,
    gelu: Gelu,
}

impl<B: Backend> Encoder<B> {
    fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let a = self
            .attn
            .forward(MhaInput::self_attn(self.norm1.forward(x.clone())))
            .context;
        let x = x + a;
        let m = self.fc2.forward(
            self.gelu
                .forward(self.fc1.forward(self.norm2.forward(x.clone()))),
        );
        x + m
    }
}

/// A DeiT ([`DeitConfig`]).
#[derive(Module, Debug)]
pub struct Deit<B: Backend> {
    embed: Conv2d<B>,
    cls: Param<Tensor<B, 3>>,
    pos: Param<Tensor<B, 3>>,
    blocks: Vec<Encoder<B>>,
    norm: LayerNorm<B>,
    head: Linear<B>,
}

impl<B: Backend> Deit<B> {
    /// Logits `[batch, classes]` of images `[batch, channels, h, w]`.
    pub fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        let batch = images.dims()[0];
        let x = self
            .embed
            .forward(images)
            .flatten::<3>(2, 3)
            .swap_dims(1, 2);
        let d = x.dims()[2];
        let cls = self.cls.val().expand([batch, 1, d]);
        let mut x = Tensor::cat(vec![cls, x], 1) + self.pos.val();
        for block in &self.blocks {
            x = block.forward(x);
        }
        let x = self.norm.forward(x);
        let first = x.slice([0..batch, 0..1, 0..d]).reshape([batch, d]);
        self.head.forward(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::trainable_params;
    type B = burn::backend::NdArray;

    #[test]
    fn parameter_counts_are_the_published_ones() {
        let device = Default::default();
        for (config, count) in [
            (DeitConfig::tiny(1000), 5_717_416),
            (DeitConfig::small(1000), 22_050_664),
            (DeitConfig::base(1000), 86_567_656),
        ] {
            let m = config.init::<B>(&device);
            assert_eq!(trainable_params(&m), count, "{config:?}");
        }
    }

    #[test]
    fn a_small_deit_classifies_images() {
        let device = Default::default();
        let config = DeitConfig {
            dim: 16,
            depth: 2,
            heads: 2,
            image_size: 8,
            patch_size: 4,
            channels: 1,
            classes: 3,
        };
        let y = config
            .init::<B>(&device)
            .forward(Tensor::zeros([2, 1, 8, 8], &device));
        assert_eq!(y.dims(), [2, 3]);
    }
}
