//! VGG-16 in its CIFAR-10 configuration (Simonyan & Zisserman's configuration D with batch
//! normalisation after every convolution and one linear classifier over the 512 channels left
//! at 1 × 1, as in the CIFAR literature GRIM's Table 1 compares with), with stock `burn::nn`
//! layers. BCR's tuner and kernel benchmarks use its convolution shapes; training it on 2 cores
//! is optional.

use crate::broadcast::batch_norm;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, Linear, LinearConfig, PaddingConfig2d, Relu};
use burn::prelude::*;

/// Configuration D: output channels of the 13 convolutions, `0` where a 2 × 2 max-pool stands.
pub const CONFIG_D: [usize; 18] = [
    64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0,
];

/// One 3 × 3 convolution (padding 1), batch norm and ReLU.
#[derive(Module, Debug)]
struct ConvBn<B: Backend> {
    conv: Conv2d<B>,
    norm: BatchNorm<B>,
}

/// VGG-16 for 32 × 32 images.
#[derive(Module, Debug)]
pub struct Vgg16<B: Backend> {
    convs: Vec<ConvBn<B>>,
    pool: MaxPool2d,
    act: Relu,
    classifier: Linear<B>,
}

impl<B: Backend> Vgg16<B> {
    /// A freshly initialised VGG-16 over `channels`-channel 32 × 32 images.
    pub fn init(channels: usize, classes: usize, device: &B::Device) -> Self {
        let mut c_in = channels;
        let mut convs = Vec::new();
        for &c_out in CONFIG_D.iter().filter(|&&c| c > 0) {
            convs.push(ConvBn {
                conv: Conv2dConfig::new([c_in, c_out], [3, 3])
                    .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                    .init(device),
                norm: BatchNormConfig::new(c_out).init(device),
            });
            c_in = c_out;
        }
        Self {
            convs,
            pool: MaxPool2dConfig::new([2, 2]).with_strides([2, 2]).init(),
            act: Relu::new(),
            classifier: LinearConfig::new(512, classes).init(device),
        }
    }

    /// Logits `[batch, classes]` for images `[batch, channels, 32, 32]`.
    pub fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        let mut x = images;
        let mut convs = self.convs.iter();
        for &c in &CONFIG_D {
            x = if c == 0 {
                self.pool.forward(x)
            } else {
                let layer = convs.next().expect("one layer per channel count");
                self.act
                    .forward(batch_norm(&layer.norm, layer.conv.forward(x)))
            };
        }
        self.classifier.forward(x.flatten(1, 3))
    }

    /// The GEMM views (`out × K`) of its convolutions and classifier, in order: the shapes the
    /// BCR tuner and benches use.
    pub fn gemm_shapes() -> Vec<(usize, usize)> {
        let mut c_in = 3;
        let mut shapes = Vec::new();
        for &c in CONFIG_D.iter().filter(|&&c| c > 0) {
            shapes.push((c, c_in * 9));
            c_in = c;
        }
        shapes.push((10, 512));
        shapes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::trainable_params;
    use burn::backend::NdArray;

    #[test]
    fn parameters_are_the_published_count() {
        // 14,728,266 at 10 classes: 14,714,688 in the convolutions, 8,448 in batch norm (γ, β),
        // 5,130 in the classifier (kuangliu/pytorch-cifar's VGG16 has the same count)
        let m = Vgg16::<NdArray>::init(3, 10, &Default::default());
        assert_eq!(trainable_params::<NdArray, _>(&m), 14_728_266);
        let views: usize = Vgg16::<NdArray>::gemm_shapes()
            .iter()
            .map(|(o, k)| o * k)
            .sum();
        assert_eq!(views, 14_714_688 - 4_224 + 5_120, "weights without biases");
    }

    #[test]
    fn thirty_two_pixel_images_give_logits() {
        let device = Default::default();
        let m = Vgg16::<NdArray>::init(3, 10, &device);
        let y = m.forward(Tensor::zeros([2, 3, 32, 32], &device));
        assert_eq!(y.dims(), [2, 10]);
    }
}
