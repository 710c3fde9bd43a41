//! ResMLP (Touvron et al., 2021, "ResMLP: Feedforward networks for image classification with
//! data-efficient training") with stock `burn::nn` layers and two small parameter-only modules
//! (Affine, layer-scale), so that every Ember decorator reaches its linear layers.
//!
//! Patch embedding (a `p × p` convolution with stride `p`) → `depth` blocks of
//! `x + ls₁ ⊙ CrossPatch(Aff₁(x))`, `x + ls₂ ⊙ MLP(Aff₂(x))` → Affine → mean over patches →
//! linear head. `Aff(x) = α ⊙ x + β` per channel; the cross-patch layer is a `N × N` linear over
//! the patch axis; the MLP is `d → 4d → d` with GELU.

use burn::module::Param;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Gelu, Linear, LinearConfig};
use burn::prelude::*;

/// Shape of a ResMLP.
#[derive(Config, Debug, PartialEq)]
pub struct ResMlpConfig {
    /// Embedding width `d`.
    pub dim: usize,
    /// Number of residual blocks.
    pub depth: usize,
    /// Input image side in pixels.
    pub image_size: usize,
    /// Patch side in pixels.
    pub patch_size: usize,
    /// Input channels.
    #[config(default = 3)]
    pub channels: usize,
    /// Output classes.
    pub classes: usize,
    /// Initial layer-scale value (0.1 for depth ≤ 12, 1e-5 for 24, as in the paper).
    pub layer_scale: f64,
}

impl ResMlpConfig {
    /// ResMLP-S12: d = 384, 12 blocks.
    pub fn s12(image_size: usize, patch_size: usize, classes: usize) -> Self {
        Self::new(384, 12, image_size, patch_size, classes, 0.1)
    }

    /// ResMLP-S24: d = 384, 24 blocks.
    pub fn s24(image_size: usize, patch_size: usize, classes: usize) -> Self {
        Self::new(384, 24, image_size, patch_size, classes, 1e-5)
    }

    /// The small ResMLP of Ember's CPU runs: d = 128, 4 blocks (ResMLP-S12's structure).
    pub fn small(image_size: usize, patch_size: usize, classes: usize) -> Self {
        Self::new(128, 4, image_size, patch_size, classes, 0.1)
    }

    /// Patches per image (`N`).
    pub fn patches(&self) -> usize {
        (self.image_size / self.patch_size).pow(2)
    }

    /// A freshly initialised model.
    pub fn init<B: Backend>(&self, device: &B::Device) -> ResMlp<B> {
        let (d, n) = (self.dim, self.patches());
        ResMlp {
            embed: Conv2dConfig::new([self.channels, d], [self.patch_size; 2])
                .with_stride([self.patch_size; 2])
                .init(device),
            blocks: (0..self.depth)
                .map(|_| Block {
                    norm1: Affine::new(d, device),
                    cross_patch: LinearConfig::new(n, n).init(device),
                    scale1: layer_scale(d, self.layer_scale, device),
                    norm2: Affine::new(d, device),
                    fc1: LinearConfig::new(d, 4 * d).init(device),
                    fc2: LinearConfig::new(4 * d, d).init(device),
                    scale2: layer_scale(d, self.layer_scale, device),
                    act: Gelu::new(),
                })
                .collect(),
            norm: Affine::new(d, device),
            head: LinearConfig::new(d, self.classes).init(device),
        }
    }
}

fn layer_scale<B: Backend>(d: usize, value: f64, device: &B::Device) -> Param<Tensor<B, 1>> {
    Param::from_tensor(Tensor::full([d], value, device))
}

/// Per-channel affine `α ⊙ x + β` (ResMLP's replacement for LayerNorm).
#[derive(Module, Debug)]
pub struct Affine<B: Backend> {
    alpha: Param<Tensor<B, 1>>,
    beta: Param<Tensor<B, 1>>,
}

impl<B: Backend> Affine<B> {
    /// Identity at initialisation (`α = 1`, `β = 0`).
    pub fn new(d: usize, device: &B::Device) -> Self {
        Self {
            alpha: Param::from_tensor(Tensor::ones([d], device)),
            beta: Param::from_tensor(Tensor::zeros([d], device)),
        }
    }

    /// `x: [batch, patches, d]` ([`crate::broadcast::affine`]: one fused op where the backend
    /// has it).
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        channels(x, &self.alpha, Some(&self.beta))
    }
}

/// `x ⊙ α (+ β)` over the channels (last axis) of `x: [batch, patches, d]`.
///
/// # Panics
/// If `x` is not `d` wide: the model's own widths, fixed when it is built.
fn channels<B: Backend>(
    x: Tensor<B, 3>,
    alpha: &Param<Tensor<B, 1>>,
    beta: Option<&Param<Tensor<B, 1>>>,
) -> Tensor<B, 3> {
    crate::broadcast::affine(x, alpha.val(), beta.map(|b| b.val()), 2)
        .unwrap_or_else(|e| panic!("ResMLP: {e}"))
}

/// One residual block: cross-patch sublayer, then cross-channel MLP.
#[derive(Module, Debug)]
pub struct Block<B: Backend> {
    norm1: Affine<B>,
    cross_patch: Linear<B>,
    scale1: Param<Tensor<B, 1>>,
    norm2: Affine<B>,
    fc1: Linear<B>,
    fc2: Linear<B>,
    scale2: Param<Tensor<B, 1>>,
    act: Gelu,
}

impl<B: Backend> Block<B> {
    /// `x: [batch, patches, d]`.
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let mixed = self
            .cross_patch
            .forward(self.norm1.forward(x.clone()).swap_dims(1, 2))
            .swap_dims(1, 2);
        let x = x + channels(mixed, &self.scale1, None);
        let mlp = self.fc2.forward(
            self.act
                .forward(self.fc1.forward(self.norm2.forward(x.clone()))),
        );
        x + channels(mlp, &self.scale2, None)
    }
}

/// A ResMLP classifier.
#[derive(Module, Debug)]
pub struct ResMlp<B: Backend> {
    embed: Conv2d<B>,
    blocks: Vec<Block<B>>,
    norm: Affine<B>,
    head: Linear<B>,
}

impl<B: Backend> ResMlp<B> {
    /// Logits `[batch, classes]` for images `[batch, channels, side, side]`.
    pub fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        let x = self.embed.forward(images); // [batch, d, side/p, side/p]
        let [batch, d, h, w] = x.dims();
        let mut x = x.reshape([batch, d, h * w]).swap_dims(1, 2); // [batch, N, d]
        for block in &self.blocks {
            x = block.forward(x);
        }
        let pooled = self.norm.forward(x).mean_dim(1).reshape([batch, d]);
        self.head.forward(pooled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;

    #[test]
    fn parameter_counts_equal_the_published_ones() {
        let device = Default::default();
        // ResMLP-S12, ImageNet: 15.4M (Touvron et al., Table 1): 15,350,872 exactly
        let s12 = ResMlpConfig::s12(224, 16, 1000).init::<NdArray>(&device);
        assert_eq!(s12.num_params(), 15_350_872);
        // ResMLP-S24: 30.0M
        let s24 = ResMlpConfig::s24(224, 16, 1000).init::<NdArray>(&device);
        assert_eq!((s24.num_params() as f64 / 1e5).round() / 10.0, 30.0);
    }

    #[test]
    fn cifar_configuration_classifies_32_pixel_images() {
        let device = Default::default();
        let model = ResMlpConfig::new(32, 2, 32, 4, 10, 0.1).init::<NdArray>(&device);
        let images = Tensor::<NdArray, 4>::random(
            [2, 3, 32, 32],
            burn::tensor::Distribution::Default,
            &device,
        );
        assert_eq!(model.forward(images).dims(), [2, 10]);
    }
}
