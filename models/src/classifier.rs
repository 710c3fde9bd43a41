//! What the trainer needs of a model: the models the CLI knows ([`ModelKind`]), the shape of
//! their input ([`ImageSpec`]), and the [`Classifier`] trait every model implements.

use crate::data::ImageBatch;
use crate::resmlp::ResMlpConfig;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::prelude::*;
use burn::train::ClassificationOutput;

/// The models the CLI trains.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
pub enum ModelKind {
    /// LeNet-5 (two convolutions, three linear layers); 28×28 grayscale input.
    #[serde(rename = "lenet5")]
    Lenet5,
    /// LeNet-300-100 (three linear layers); 28×28 grayscale input.
    #[serde(rename = "lenet300")]
    Lenet300,
    /// The small ResMLP of CPU runs (d 128, 4 blocks, 4×4 patches).
    #[serde(rename = "resmlp-small")]
    ResmlpSmall,
    /// ResMLP-S12 in its CIFAR configuration (d 384, 12 blocks, 4×4 patches).
    #[serde(rename = "resmlp-s12")]
    ResmlpS12,
    /// ResMLP-S24 in its CIFAR configuration (d 384, 24 blocks, 4×4 patches).
    #[serde(rename = "resmlp-s24")]
    ResmlpS24,
}

impl std::fmt::Display for ModelKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Lenet5 => "lenet5",
            Self::Lenet300 => "lenet300",
            Self::ResmlpSmall => "resmlp-small",
            Self::ResmlpS12 => "resmlp-s12",
            Self::ResmlpS24 => "resmlp-s24",
        })
    }
}

/// Patch side of the ResMLPs trained by the CLI (the CIFAR configuration of the paper).
pub const RESMLP_PATCH: usize = 4;

impl ModelKind {
    /// Whether the model can classify images of this shape; the reason when not.
    pub fn accepts(&self, input: ImageSpec) -> std::result::Result<(), String> {
        match self {
            Self::Lenet5 | Self::Lenet300 if (input.channels, input.side) != (1, 28) => {
                Err(format!(
                    "{self} takes 28×28 grayscale images (MNIST, Fashion-MNIST), not {}×{}×{}; \
                     use a ResMLP (--model resmlp-small) for this dataset",
                    input.channels, input.side, input.side
                ))
            }
            Self::ResmlpSmall | Self::ResmlpS12 | Self::ResmlpS24
                if !input.side.is_multiple_of(RESMLP_PATCH) =>
            {
                Err(format!(
                    "{self} cuts images into {RESMLP_PATCH}×{RESMLP_PATCH} patches; the side {} \
                     is not a multiple of {RESMLP_PATCH}",
                    input.side
                ))
            }
            _ => Ok(()),
        }
    }

    /// The ResMLP configuration of this model for `input` (`None` for the LeNets).
    pub fn resmlp(&self, input: ImageSpec) -> Option<ResMlpConfig> {
        let (side, p, classes) = (input.side, RESMLP_PATCH, input.classes);
        let config = match self {
            Self::Lenet5 | Self::Lenet300 => return None,
            Self::ResmlpSmall => ResMlpConfig::small(side, p, classes),
            Self::ResmlpS12 => ResMlpConfig::s12(side, p, classes),
            Self::ResmlpS24 => ResMlpConfig::s24(side, p, classes),
        };
        Some(config.with_channels(input.channels))
    }
}

/// Shape of a dataset's images and number of classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageSpec {
    /// Colour channels.
    pub channels: usize,
    /// Image side in pixels (images are square).
    pub side: usize,
    /// Number of classes.
    pub classes: usize,
}

/// An image classifier the trainer can drive.
pub trait Classifier<B: Backend>: Module<B> {
    /// A freshly initialised `kind` for images of shape `input` (`kind.accepts(input)` holds).
    fn build(kind: ModelKind, input: ImageSpec, device: &B::Device) -> Self;
    /// Logits `[batch, classes]` for images `[batch, channels, side, side]`.
    fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2>;

    /// Logits, mean cross-entropy loss and targets, as burn-train's metrics expect them.
    fn forward_classification(&self, batch: ImageBatch<B>) -> ClassificationOutput<B> {
        let output = self.forward(batch.images);
        let loss = CrossEntropyLossConfig::new()
            .init(&output.device())
            .forward(output.clone(), batch.targets.clone());
        ClassificationOutput::new(loss, output, batch.targets)
    }
}

/// burn-train's `TrainStep` and `InferenceStep` for classifiers of [`ImageBatch`]es.
macro_rules! train_steps {
    ($($model:ident),*) => {$(
        impl<B: burn::tensor::backend::AutodiffBackend> burn::train::TrainStep for $model<B> {
            type Input = $crate::data::ImageBatch<B>;
            type Output = burn::train::ClassificationOutput<B>;
            fn step(
                &self,
                batch: $crate::data::ImageBatch<B>,
            ) -> burn::train::TrainOutput<burn::train::ClassificationOutput<B>> {
                let item = $crate::classifier::Classifier::forward_classification(self, batch);
                burn::train::TrainOutput::new(self, item.loss.backward(), item)
            }
        }

        impl<B: Backend> burn::train::InferenceStep for $model<B> {
            type Input = $crate::data::ImageBatch<B>;
            type Output = burn::train::ClassificationOutput<B>;
            fn step(&self, batch: $crate::data::ImageBatch<B>) -> burn::train::ClassificationOutput<B> {
                $crate::classifier::Classifier::forward_classification(self, batch)
            }
        }
    )*};
}
pub(crate) use train_steps;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_refuse_inputs_they_cannot_take() {
        let mnist = ImageSpec {
            channels: 1,
            side: 28,
            classes: 10,
        };
        let cifar = ImageSpec {
            channels: 3,
            side: 32,
            classes: 10,
        };
        assert!(ModelKind::Lenet5.accepts(mnist).is_ok());
        let err = ModelKind::Lenet5.accepts(cifar).unwrap_err();
        assert!(err.contains("28×28 grayscale"), "{err}");
        for kind in [ModelKind::ResmlpSmall, ModelKind::ResmlpS12] {
            assert!(kind.accepts(mnist).is_ok() && kind.accepts(cifar).is_ok());
        }
        let odd = ImageSpec { side: 30, ..cifar };
        let err = ModelKind::ResmlpSmall.accepts(odd).unwrap_err();
        assert!(err.contains("not a multiple of 4"), "{err}");
        let s12 = ModelKind::ResmlpS12.resmlp(cifar).unwrap();
        assert_eq!((s12.dim, s12.depth, s12.patches()), (384, 12, 64));
        assert_eq!(ModelKind::ResmlpSmall.resmlp(mnist).unwrap().channels, 1);
    }
}
