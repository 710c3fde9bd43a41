//! LeNet-300-100 and LeNet-5 (LeCun et al., 1998) with stock `burn::nn` layers only, so that
//! every Ember decorator applies to them unchanged.

use crate::data::mnist::{CLASSES, MnistBatch, SIDE};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{Linear, LinearConfig, PaddingConfig2d, Relu};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::train::{ClassificationOutput, InferenceStep, TrainOutput, TrainStep};

/// An image classifier the trainer can drive.
pub trait Classifier<B: Backend>: Module<B> {
    /// A freshly initialised model.
    fn init(device: &B::Device) -> Self;
    /// Logits `[batch, classes]` for images `[batch, 1, 28, 28]`.
    fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2>;

    /// Logits, mean cross-entropy loss and targets, as burn-train's metrics expect them.
    fn forward_classification(&self, batch: MnistBatch<B>) -> ClassificationOutput<B> {
        let output = self.forward(batch.images);
        let loss = CrossEntropyLossConfig::new()
            .init(&output.device())
            .forward(output.clone(), batch.targets.clone());
        ClassificationOutput::new(loss, output, batch.targets)
    }
}

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
    act: Relu,
}

impl<B: Backend> Classifier<B> for LeNet5<B> {
    fn init(device: &B::Device) -> Self {
        Self {
            conv1: Conv2dConfig::new([1, 6], [5, 5])
                .with_padding(PaddingConfig2d::Explicit(2, 2, 2, 2))
                .init(device),
            conv2: Conv2dConfig::new([6, 16], [5, 5]).init(device),
            pool: MaxPool2dConfig::new([2, 2]).init(),
            fc1: LinearConfig::new(16 * 5 * 5, 120).init(device),
            fc2: LinearConfig::new(120, 84).init(device),
            fc3: LinearConfig::new(84, CLASSES).init(device),
            act: Relu::new(),
        }
    }

    fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        let x = self
            .pool
            .forward(self.act.forward(self.conv1.forward(images)));
        let x = self.pool.forward(self.act.forward(self.conv2.forward(x)));
        let x: Tensor<B, 2> = x.flatten(1, 3);
        let x = self.act.forward(self.fc1.forward(x));
        let x = self.act.forward(self.fc2.forward(x));
        self.fc3.forward(x)
    }
}

/// LeNet-300-100: a multilayer perceptron 784 → 300 → 100 → 10 with ReLU.
#[derive(Module, Debug)]
pub struct LeNet300<B: Backend> {
    fc1: Linear<B>,
    fc2: Linear<B>,
    fc3: Linear<B>,
    act: Relu,
}

impl<B: Backend> Classifier<B> for LeNet300<B> {
    fn init(device: &B::Device) -> Self {
        Self {
            fc1: LinearConfig::new(SIDE * SIDE, 300).init(device),
            fc2: LinearConfig::new(300, 100).init(device),
            fc3: LinearConfig::new(100, CLASSES).init(device),
            act: Relu::new(),
        }
    }

    fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        let x: Tensor<B, 2> = images.flatten(1, 3);
        let x = self.act.forward(self.fc1.forward(x));
        let x = self.act.forward(self.fc2.forward(x));
        self.fc3.forward(x)
    }
}

macro_rules! train_steps {
    ($($model:ident),*) => {$(
        impl<B: AutodiffBackend> TrainStep for $model<B> {
            type Input = MnistBatch<B>;
            type Output = ClassificationOutput<B>;
            fn step(&self, batch: MnistBatch<B>) -> TrainOutput<ClassificationOutput<B>> {
                let item = self.forward_classification(batch);
                TrainOutput::new(self, item.loss.backward(), item)
            }
        }

        impl<B: Backend> InferenceStep for $model<B> {
            type Input = MnistBatch<B>;
            type Output = ClassificationOutput<B>;
            fn step(&self, batch: MnistBatch<B>) -> ClassificationOutput<B> {
                self.forward_classification(batch)
            }
        }
    )*};
}
train_steps!(LeNet5, LeNet300);

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
