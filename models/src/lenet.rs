//! LeNet-300-100 and LeNet-5 (LeCun et al., 1998) with stock `burn::nn` layers only, so that
//! every Ember decorator applies to them unchanged.

use crate::act::{Activation, Sites};
use crate::data::mnist::{CLASSES, SIDE};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{Linear, LinearConfig, PaddingConfig2d};
use burn::prelude::*;

/// LeNet-5: conv(6, 5×5, pad 2) → ReLU → max-pool 2 → conv(16, 5×5) → ReLU → max-pool 2 →
/// 120 → 84 → 10, with ReLU and max-pooling as in ApproxTrain's and most modern variants.
#[derive(Module, Debug)]
pub struct LeNet5<B: Backend> {
    conv1: Conv2d<B>,
    conv2: Conv2d<B>,
    pool: MaxPool2d,
    fc1: Linear<B>,
    fc2: Linear<B>,
    fc3: Linear<B>,
    act: Sites<B>,
}

impl<B: Backend> LeNet5<B> {
    /// A freshly initialised LeNet-5.
    pub fn init(device: &B::Device) -> Self {
        Self::init_with(Activation::Relu, device)
    }

    /// A freshly initialised LeNet-5 with activation `act` (PReLU: 6, 16, 120 and 84 slopes).
    pub fn init_with(act: Activation, device: &B::Device) -> Self {
        Self {
            conv1: Conv2dConfig::new([1, 6], [5, 5])
                .with_padding(PaddingConfig2d::Explicit(2, 2, 2, 2))
                .init(device),
            conv2: Conv2dConfig::new([6, 16], [5, 5]).init(device),
            pool: MaxPool2dConfig::new([2, 2]).init(),
            fc1: LinearConfig::new(16 * 5 * 5, 120).init(device),
            fc2: LinearConfig::new(120, 84).init(device),
            fc3: LinearConfig::new(84, CLASSES).init(device),
            act: Sites::new(act, &[6, 16, 120, 84], device),
        }
    }
}

impl<B: Backend> LeNet5<B> {
    /// Logits `[batch, 10]` for images `[batch, 1, 28, 28]`.
    pub fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        let x = self
            .pool
            .forward(self.act.forward(0, self.conv1.forward(images)));
        let x = self
            .pool
            .forward(self.act.forward(1, self.conv2.forward(x)));
        let x: Tensor<B, 2> = x.flatten(1, 3);
        let x = self.act.forward(2, self.fc1.forward(x));
        let x = self.act.forward(3, self.fc2.forward(x));
        self.fc3.forward(x)
    }
}

/// LeNet-300-100: a multilayer perceptron 784 → 300 → 100 → 10 with ReLU.
#[derive(Module, Debug)]
pub struct LeNet300<B: Backend> {
    fc1: Linear<B>,
    fc2: Linear<B>,
    fc3: Linear<B>,
    act: Sites<B>,
}

impl<B: Backend> LeNet300<B> {
    /// A freshly initialised LeNet-300-100.
    pub fn init(device: &B::Device) -> Self {
        Self::init_with(Activation::Relu, device)
    }

    /// A freshly initialised LeNet-300-100 with activation `act` (PReLU: 300 and 100 slopes).
    pub fn init_with(act: Activation, device: &B::Device) -> Self {
        Self {
            fc1: LinearConfig::new(SIDE * SIDE, 300).init(device),
            fc2: LinearConfig::new(300, 100).init(device),
            fc3: LinearConfig::new(100, CLASSES).init(device),
            act: Sites::new(act, &[300, 100], device),
        }
    }
}

impl<B: Backend> LeNet300<B> {
    /// Logits `[batch, 10]` for images `[batch, 1, 28, 28]`.
    pub fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        let x: Tensor<B, 2> = images.flatten(1, 3);
        let x = self.act.forward(0, self.fc1.forward(x));
        let x = self.act.forward(1, self.fc2.forward(x));
        self.fc3.forward(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;

    #[test]
    fn parameter_counts_match_the_architectures() {
        let device = Default::default();
        // LeNet-5: 156 + 2416 + 48120 + 10164 + 850.
        assert_eq!(LeNet5::<NdArray>::init(&device).num_params(), 61_706);
        // LeNet-300-100: 235500 + 30100 + 1010.
        assert_eq!(LeNet300::<NdArray>::init(&device).num_params(), 266_610);
    }

    #[test]
    fn logits_have_one_column_per_class() {
        let device = Default::default();
        let x = Tensor::<NdArray, 4>::zeros([3, 1, 28, 28], &device);
        assert_eq!(
            LeNet5::<NdArray>::init(&device).forward(x.clone()).dims(),
            [3, 10]
        );
        assert_eq!(
            LeNet300::<NdArray>::init(&device).forward(x).dims(),
            [3, 10]
        );
    }
}
