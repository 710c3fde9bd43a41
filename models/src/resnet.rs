//! ResNet-18/34/50 (He et al., 2016) with stock `burn::nn` layers, so every Ember decorator
//! reaches their convolutions and the classifier.
//!
//! Two stems: **ImageNet** (7×7 convolution with stride 2, then 3×3 max-pool with stride 2) and
//! **CIFAR** (one 3×3 convolution with stride 1, no pool, as in the CIFAR ResNets of
//! Gyro-Permutation and most pruning papers). Four stages of basic blocks (18, 34) or
//! bottlenecks (50, expansion 4), the first convolution of a stage's first block with stride 2
//! (stages 2-4), a 1×1 projection with batch norm where the shape changes; global average pool
//! and a linear classifier. `width` scales every stage's channels (64 in the paper) for runs
//! that must fit two CPU cores.

use crate::act::{Activation, Sites};
use crate::broadcast::batch_norm;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig, MaxPool2d, MaxPool2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, Linear, LinearConfig, PaddingConfig2d};
use burn::prelude::*;

/// The depth of a ResNet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// Basic blocks `[2, 2, 2, 2]`.
    R18,
    /// Basic blocks `[3, 4, 6, 3]`.
    R34,
    /// Bottlenecks `[3, 4, 6, 3]`.
    R50,
}

impl Depth {
    pub(crate) fn blocks(self) -> [usize; 4] {
        match self {
            Depth::R18 => [2, 2, 2, 2],
            Depth::R34 | Depth::R50 => [3, 4, 6, 3],
        }
    }

    fn expansion(self) -> usize {
        match self {
            Depth::R50 => 4,
            _ => 1,
        }
    }
}

/// Shape of a ResNet.
#[derive(Clone, Debug, PartialEq)]
pub struct ResNetConfig {
    /// 18, 34 or 50.
    pub depth: Depth,
    /// The CIFAR stem (3×3, no pool) instead of ImageNet's (7×7 stride 2, max-pool).
    pub cifar_stem: bool,
    /// Channels of the first stage (64 in the paper); stages double it.
    pub width: usize,
    /// Input channels.
    pub channels: usize,
    /// Output classes.
    pub classes: usize,
    /// The activation (ReLU in the paper).
    pub act: Activation,
}

impl ResNetConfig {
    /// The paper's network for `classes` classes.
    pub fn new(depth: Depth, cifar_stem: bool, classes: usize) -> Self {
        Self {
            depth,
            cifar_stem,
            width: 64,
            channels: 3,
            classes,
            act: Activation::Relu,
        }
    }

    /// The same with first-stage width `width`.
    pub fn with_width(self, width: usize) -> Self {
        Self { width, ..self }
    }

    /// A freshly initialised model.
    pub fn init<B: Backend>(&self, device: &B::Device) -> ResNet<B> {
        let w = self.width;
        let stem = if self.cifar_stem {
            conv(self.channels, w, 3, 1, 1, device)
        } else {
            conv(self.channels, w, 7, 2, 3, device)
        };
        let exp = self.depth.expansion();
        let mut in_ch = w;
        let mut blocks = Vec::new();
        for (stage, &n) in self.depth.blocks().iter().enumerate() {
            let mid = w << stage;
            for i in 0..n {
                let stride = if stage > 0 && i == 0 { 2 } else { 1 };
                blocks.push(Block::new(self.depth, in_ch, mid, stride, self.act, device));
                in_ch = mid * exp;
            }
        }
        ResNet {
            stem,
            stem_norm: BatchNormConfig::new(w).init(device),
            pool: (!self.cifar_stem).then(|| {
                MaxPool2dConfig::new([3, 3])
                    .with_strides([2, 2])
                    .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                    .init()
            }),
            blocks,
            avg: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            fc: LinearConfig::new(in_ch, self.classes).init(device),
            act: Sites::new(self.act, &[w], device),
        }
    }
}

fn conv<B: Backend>(
    c_in: usize,
    c_out: usize,
    k: usize,
    stride: usize,
    pad: usize,
    device: &B::Device,
) -> Conv2d<B> {
    Conv2dConfig::new([c_in, c_out], [k, k])
        .with_stride([stride, stride])
        .with_padding(PaddingConfig2d::Explicit(pad, pad, pad, pad))
        .with_bias(false)
        .init(device)
}

/// A convolution followed by batch norm.
#[derive(Module, Debug)]
pub struct ConvNorm<B: Backend> {
    conv: Conv2d<B>,
    norm: BatchNorm<B>,
}

impl<B: Backend> ConvNorm<B> {
    fn new(c_in: usize, c_out: usize, k: usize, stride: usize, device: &B::Device) -> Self {
        Self {
            conv: conv(c_in, c_out, k, stride, k / 2, device),
            norm: BatchNormConfig::new(c_out).init(device),
        }
    }

    fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        batch_norm(&self.norm, self.conv.forward(x))
    }
}

/// A basic block (two 3×3) or a bottleneck (1×1, 3×3, 1×1), with its projection shortcut.
#[derive(Module, Debug)]
pub struct Block<B: Backend> {
    layers: Vec<ConvNorm<B>>,
    shortcut: Option<ConvNorm<B>>,
    /// After each layer but the last, then after the sum.
    act: Sites<B>,
}

impl<B: Backend> Block<B> {
    fn new(
        depth: Depth,
        c_in: usize,
        mid: usize,
        stride: usize,
        act: Activation,
        device: &B::Device,
    ) -> Self {
        let out = mid * depth.expansion();
        let layers = match depth {
            Depth::R50 => vec![
                ConvNorm::new(c_in, mid, 1, 1, device),
                ConvNorm::new(mid, mid, 3, stride, device),
                ConvNorm::new(mid, out, 1, 1, device),
            ],
            _ => vec![
                ConvNorm::new(c_in, mid, 3, stride, device),
                ConvNorm::new(mid, out, 3, 1, device),
            ],
        };
        let shortcut =
            (stride != 1 || c_in != out).then(|| ConvNorm::new(c_in, out, 1, stride, device));
        let mut sites = vec![mid; layers.len() - 1];
        sites.push(out);
        Self {
            layers,
            shortcut,
            act: Sites::new(act, &sites, device),
        }
    }

    fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let skip = match &self.shortcut {
            Some(s) => s.forward(x.clone()),
            None => x.clone(),
        };
        let last = self.layers.len() - 1;
        let mut y = x;
        for (i, layer) in self.layers.iter().enumerate() {
            y = layer.forward(y);
            if i < last {
                y = self.act.forward(i, y);
            }
        }
        self.act.forward(last, y + skip)
    }
}

/// A ResNet ([`ResNetConfig`]).
#[derive(Module, Debug)]
pub struct ResNet<B: Backend> {
    stem: Conv2d<B>,
    stem_norm: BatchNorm<B>,
    pool: Option<MaxPool2d>,
    blocks: Vec<Block<B>>,
    avg: AdaptiveAvgPool2d,
    fc: Linear<B>,
    act: Sites<B>,
}

impl<B: Backend> ResNet<B> {
    /// Logits `[batch, classes]` of images `[batch, channels, h, w]`.
    pub fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        let mut x = self
            .act
            .forward(0, batch_norm(&self.stem_norm, self.stem.forward(images)));
        if let Some(pool) = &self.pool {
            x = pool.forward(x);
        }
        for block in &self.blocks {
            x = block.forward(x);
        }
        self.fc.forward(self.avg.forward(x).flatten(1, 3))
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
        for (depth, imagenet, cifar) in [
            (Depth::R18, 11_689_512, 11_173_962),
            (Depth::R34, 21_797_672, 21_282_122),
            (Depth::R50, 25_557_032, 23_520_842),
        ] {
            let m = ResNetConfig::new(depth, false, 1000).init::<B>(&device);
            assert_eq!(trainable_params(&m), imagenet, "{depth:?} ImageNet");
            let m = ResNetConfig::new(depth, true, 10).init::<B>(&device);
            assert_eq!(trainable_params(&m), cifar, "{depth:?} CIFAR");
        }
    }

    #[test]
    fn both_stems_classify_images() {
        let device = Default::default();
        let m = ResNetConfig::new(Depth::R18, true, 10)
            .with_width(8)
            .init::<B>(&device);
        let y = m.forward(Tensor::zeros([2, 3, 32, 32], &device));
        assert_eq!(y.dims(), [2, 10]);
        let m = ResNetConfig::new(Depth::R50, false, 5)
            .with_width(4)
            .init::<B>(&device);
        let y = m.forward(Tensor::zeros([1, 3, 64, 64], &device));
        assert_eq!(y.dims(), [1, 5]);
    }
}
