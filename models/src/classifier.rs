//! What the trainer needs of a model: the models Ember knows ([`ModelKind`]), the one place that
//! builds them ([`ModelKind::build`]), and the [`Classifier`] trait every model implements.

use crate::act::Activation;
use crate::data::{Batch, DataSpec, Inputs};
use crate::deit::{Deit, DeitConfig};
use crate::error::{Error, Result};
use crate::gru::GruClassifier;
use crate::lenet::{LeNet5, LeNet300};
use crate::resmlp::{ResMlp, ResMlpConfig};
use crate::resnet::{Depth, ResNet, ResNetConfig};
use crate::shape::{MAX_DEIT_DEPTH, MAX_DEIT_DIM, MAX_RESNET_WIDTH, Shape};
use crate::vgg::Vgg16;
use burn::module::AutodiffModule;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::train::{ClassificationOutput, InferenceStep, TrainStep};

/// The models Ember trains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    /// ResNet-18 with the ImageNet stem (7×7 stride-2 convolution, max-pool), width 64:
    /// torchvision's `resnet18`.
    #[serde(rename = "resnet18")]
    Resnet18,
    /// ResNet-34 with the ImageNet stem, width 64: torchvision's `resnet34`.
    #[serde(rename = "resnet34")]
    Resnet34,
    /// ResNet-50 with the ImageNet stem, width 64: torchvision's `resnet50`.
    #[serde(rename = "resnet50")]
    Resnet50,
    /// ResNet-18 with the CIFAR stem (3×3 stem convolution, no max-pool), width 64.
    #[serde(rename = "resnet18-cifar")]
    Resnet18Cifar,
    /// ResNet-34 with the CIFAR stem, width 64.
    #[serde(rename = "resnet34-cifar")]
    Resnet34Cifar,
    /// ResNet-50 with the CIFAR stem, width 64.
    #[serde(rename = "resnet50-cifar")]
    Resnet50Cifar,
    /// ResNet-18 with the CIFAR stem at a quarter of the width (16, 32, 64, 128 channels):
    /// the configuration that trains on 2 CPU cores in minutes.
    #[serde(rename = "resnet18-cifar-w16")]
    Resnet18CifarW16,
    /// DeiT-Ti (192 wide, 12 blocks, 3 heads) on 4×4 patches of the input images.
    #[serde(rename = "deit-ti")]
    DeitTi,
    /// DeiT-S (384 wide, 12 blocks, 6 heads) on 4×4 patches.
    #[serde(rename = "deit-s")]
    DeitS,
    /// DeiT-B (768 wide, 12 blocks, 12 heads) on 4×4 patches.
    #[serde(rename = "deit-b")]
    DeitB,
    /// VGG-16 in its CIFAR configuration (13 convolutions with batch norm, one linear head).
    #[serde(rename = "vgg16")]
    Vgg16,
    /// A GRU sequence classifier: 2 stacked `burn::nn::Gru` layers of 256 units, read at each
    /// sequence's last valid step, and a linear head (FSDD, Japanese Vowels).
    #[serde(rename = "gru")]
    Gru,
}

crate::choices!(ModelKind {
    Lenet5 => "lenet5",
    Lenet300 => "lenet300",
    ResmlpSmall => "resmlp-small",
    ResmlpS12 => "resmlp-s12",
    ResmlpS24 => "resmlp-s24",
    Resnet18 => "resnet18",
    Resnet34 => "resnet34",
    Resnet50 => "resnet50",
    Resnet18Cifar => "resnet18-cifar",
    Resnet34Cifar => "resnet34-cifar",
    Resnet50Cifar => "resnet50-cifar",
    Resnet18CifarW16 => "resnet18-cifar-w16",
    DeitTi => "deit-ti",
    DeitS => "deit-s",
    DeitB => "deit-b",
    Vgg16 => "vgg16",
    Gru => "gru",
});

/// Hidden units of each GRU layer of [`ModelKind::Gru`].
pub const GRU_HIDDEN: usize = 256;
/// Stacked GRU layers of [`ModelKind::Gru`].
pub const GRU_LAYERS: usize = 2;

/// Patch side of the DeiTs trained by the CLI (on CIFAR-sized images).
pub const DEIT_PATCH: usize = 4;

/// Patch side of the ResMLPs trained by the CLI (the CIFAR configuration of the paper).
pub const RESMLP_PATCH: usize = 4;

impl ModelKind {
    /// Whether the model can classify this dataset's items; the reason when not.
    pub fn accepts(&self, spec: DataSpec) -> std::result::Result<(), String> {
        let input = match (self, spec) {
            (Self::Gru, DataSpec::Sequences { .. }) => return Ok(()),
            (Self::Gru, DataSpec::Images(_)) => {
                return Err(format!(
                    "{self} classifies sequences of feature frames (--dataset fsdd, \
                     japanese-vowels), not {spec}"
                ));
            }
            (_, DataSpec::Sequences { .. }) => {
                return Err(format!(
                    "{self} classifies images, not {spec}; use --model gru for this dataset"
                ));
            }
            (_, DataSpec::Images(input)) => input,
        };
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
            Self::DeitTi | Self::DeitS | Self::DeitB if !input.side.is_multiple_of(DEIT_PATCH) => {
                Err(format!(
                    "{self} cuts images into {DEIT_PATCH}×{DEIT_PATCH} patches; the side {} is \
                     not a multiple of {DEIT_PATCH}",
                    input.side
                ))
            }
            _ => Ok(()),
        }
    }

    /// Builds a freshly initialised model of this kind for the items `spec` describes on `device`
    /// and hands it to `visitor`: the one place that maps a [`ModelKind`] to a model type, for
    /// training and evaluation alike. Inputs the model cannot take are an error.
    pub fn build<B: AutodiffBackend, V: ModelVisitor<B>>(
        self,
        spec: DataSpec,
        device: &B::Device,
        visitor: V,
    ) -> Result<V::Output> {
        self.build_with(Activation::Relu, spec, device, visitor)
    }

    /// Whether this kind of model can use activation `act` (PReLU: the LeNets and the
    /// ResNets), with a sentence saying why not.
    pub fn takes_activation(self, act: Activation) -> std::result::Result<(), String> {
        use ModelKind::*;
        match (act, self) {
            (Activation::Relu, _)
            | (
                Activation::Prelu,
                Lenet5 | Lenet300 | Resnet18 | Resnet34 | Resnet50 | Resnet18Cifar | Resnet34Cifar
                | Resnet50Cifar | Resnet18CifarW16,
            ) => Ok(()),
            (Activation::Prelu, _) => Err(format!(
                "--act prelu applies to the LeNets and the ResNets, not to {self}"
            )),
        }
    }

    /// [`ModelKind::build`] with activation `act` ([`ModelKind::takes_activation`]).
    pub fn build_with<B: AutodiffBackend, V: ModelVisitor<B>>(
        self,
        act: Activation,
        spec: DataSpec,
        device: &B::Device,
        visitor: V,
    ) -> Result<V::Output> {
        self.build_shaped(None, act, spec, device, visitor)
    }

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

    /// [`ModelKind::build_with`] at `shape` instead of the kind's own
    /// ([`ModelKind::own_shape`]; `None`: the own), checked by [`ModelKind::check_shape`].
    pub fn build_shaped<B: AutodiffBackend, V: ModelVisitor<B>>(
        self,
        shape: Option<Shape>,
        act: Activation,
        spec: DataSpec,
        device: &B::Device,
        visitor: V,
    ) -> Result<V::Output> {
        self.accepts(spec).map_err(Error::Invalid)?;
        self.takes_activation(act).map_err(Error::Invalid)?;
        if let Some(shape) = shape {
            self.check_shape(shape, spec).map_err(Error::Invalid)?;
        }
        let shape = shape.or(self.own_shape());
        let input = match spec {
            DataSpec::Images(input) => input,
            DataSpec::Sequences { features, classes } => {
                let gru = GruClassifier::init(features, GRU_HIDDEN, GRU_LAYERS, classes, device);
                return Ok(visitor.visit(gru));
            }
        };
        let resmlp = |config: fn(usize, usize, usize) -> ResMlpConfig| -> ResMlp<B> {
            config(input.side, RESMLP_PATCH, input.classes)
                .with_channels(input.channels)
                .init(device)
        };
        let resnet = |depth: Depth, cifar_stem: bool| -> ResNet<B> {
            let Some(Shape::Resnet { width }) = shape else {
                unreachable!("a ResNet kind has a ResNet shape")
            };
            let mut config = ResNetConfig::new(depth, cifar_stem, input.classes).with_width(width);
            config.channels = input.channels;
            config.act = act;
            config.init(device)
        };
        let deit = || -> Deit<B> {
            let Some(Shape::Deit {
                dim,
                depth,
                heads,
                patch,
            }) = shape
            else {
                unreachable!("a DeiT kind has a DeiT shape")
            };
            DeitConfig {
                dim,
                depth,
                heads,
                image_size: input.side,
                patch_size: patch,
                channels: input.channels,
                classes: input.classes,
            }
            .init(device)
        };
        Ok(match self {
            Self::Resnet18 => visitor.visit(resnet(Depth::R18, false)),
            Self::Resnet34 => visitor.visit(resnet(Depth::R34, false)),
            Self::Resnet50 => visitor.visit(resnet(Depth::R50, false)),
            Self::Resnet18Cifar | Self::Resnet18CifarW16 => visitor.visit(resnet(Depth::R18, true)),
            Self::Resnet34Cifar => visitor.visit(resnet(Depth::R34, true)),
            Self::Resnet50Cifar => visitor.visit(resnet(Depth::R50, true)),
            Self::DeitTi | Self::DeitS | Self::DeitB => visitor.visit(deit()),
            Self::Lenet5 => visitor.visit(LeNet5::init_with(act, device)),
            Self::Lenet300 => visitor.visit(LeNet300::init_with(act, device)),
            Self::ResmlpSmall => visitor.visit(resmlp(ResMlpConfig::small)),
            Self::ResmlpS12 => visitor.visit(resmlp(ResMlpConfig::s12)),
            Self::ResmlpS24 => visitor.visit(resmlp(ResMlpConfig::s24)),
            Self::Vgg16 => visitor.visit(Vgg16::init(input.channels, input.classes, device)),
            Self::Gru => unreachable!("accepts refuses a GRU on images"),
        })
    }
}

/// What to do with a model built by [`ModelKind::build`], whatever its type.
pub trait ModelVisitor<B: AutodiffBackend> {
    /// What the visit returns.
    type Output;
    /// Uses the freshly built `model` (for evaluation: `model.valid()`, then load a record).
    fn visit<M: TrainableClassifier<B>>(self, model: M) -> Self::Output;
}

/// The visitor that gives the trainable parameter count of the model built
/// ([`crate::params::trainable_params`]).
pub struct TrainableParams;

impl<B: AutodiffBackend> ModelVisitor<B> for TrainableParams {
    type Output = usize;
    fn visit<M: TrainableClassifier<B>>(self, model: M) -> usize {
        crate::params::trainable_params(&model)
    }
}

/// A classifier the trainer can drive.
pub trait Classifier<B: Backend>: Module<B> {
    /// Logits `[batch, classes]` for a batch's inputs (images, or padded sequences).
    fn logits(&self, inputs: Inputs<B>) -> Tensor<B, 2>;

    /// Logits, mean cross-entropy loss and targets, as burn-train's metrics expect them.
    fn forward_classification(&self, batch: Batch<B>) -> ClassificationOutput<B> {
        let output = self.logits(batch.inputs);
        let loss = CrossEntropyLossConfig::new()
            .init(&output.device())
            .forward(output.clone(), batch.targets.clone());
        ClassificationOutput::new(loss, output, batch.targets)
    }
}

/// A classifier burn-train can train on `B` and evaluate on its inner backend.
pub trait TrainableClassifier<B: AutodiffBackend>:
    Classifier<B>
    + AutodiffModule<
        B,
        InnerModule: Classifier<B::InnerBackend>
                         + InferenceStep<
            Input = Batch<B::InnerBackend>,
            Output = ClassificationOutput<B::InnerBackend>,
        >,
    > + TrainStep<Input = Batch<B>, Output = ClassificationOutput<B>>
    + core::fmt::Display
    + 'static
{
}

impl<B: AutodiffBackend, M> TrainableClassifier<B> for M where
    M: Classifier<B>
        + AutodiffModule<
            B,
            InnerModule: Classifier<B::InnerBackend>
                             + InferenceStep<
                Input = Batch<B::InnerBackend>,
                Output = ClassificationOutput<B::InnerBackend>,
            >,
        > + TrainStep<Input = Batch<B>, Output = ClassificationOutput<B>>
        + core::fmt::Display
        + 'static
{
}

/// [`Classifier`] and burn-train's `TrainStep` / `InferenceStep` for models with an inherent
/// `forward(images) -> logits`.
macro_rules! classifiers {
    ($($model:ident),*) => {$(
        impl<B: Backend> Classifier<B> for $model<B> {
            fn logits(&self, inputs: Inputs<B>) -> Tensor<B, 2> {
                self.forward(inputs.images())
            }
        }
        steps!($model);
    )*};
}

/// burn-train's `TrainStep` / `InferenceStep` for a [`Classifier`].
macro_rules! steps {
    ($model:ident) => {
        impl<B: AutodiffBackend> TrainStep for $model<B> {
            type Input = Batch<B>;
            type Output = ClassificationOutput<B>;
            fn step(&self, batch: Batch<B>) -> burn::train::TrainOutput<ClassificationOutput<B>> {
                let item = self.forward_classification(batch);
                burn::train::TrainOutput::new(self, item.loss.backward(), item)
            }
        }

        impl<B: Backend> InferenceStep for $model<B> {
            type Input = Batch<B>;
            type Output = ClassificationOutput<B>;
            fn step(&self, batch: Batch<B>) -> ClassificationOutput<B> {
                self.forward_classification(batch)
            }
        }
    };
}

classifiers!(LeNet5, LeNet300, ResMlp, ResNet, Deit, Vgg16);

impl<B: Backend> Classifier<B> for GruClassifier<B> {
    fn logits(&self, inputs: Inputs<B>) -> Tensor<B, 2> {
        let (frames, lengths) = inputs.sequences();
        self.forward(frames, &lengths)
    }
}
steps!(GruClassifier);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::ImageSpec;
    use burn::backend::{Autodiff, NdArray};

    const MNIST: DataSpec = DataSpec::Images(ImageSpec {
        channels: 1,
        side: 28,
        classes: 10,
    });
    const CIFAR: DataSpec = DataSpec::Images(CIFAR_IMAGES);
    const CIFAR_IMAGES: ImageSpec = ImageSpec {
        channels: 3,
        side: 32,
        classes: 10,
    };
    const SPEECH: DataSpec = DataSpec::Sequences {
        features: 39,
        classes: 10,
    };

    #[test]
    fn models_refuse_inputs_they_cannot_take() {
        assert!(ModelKind::Lenet5.accepts(MNIST).is_ok());
        let err = ModelKind::Lenet5.accepts(CIFAR).unwrap_err();
        assert!(err.contains("28×28 grayscale"), "{err}");
        for kind in [ModelKind::ResmlpSmall, ModelKind::ResmlpS12] {
            assert!(kind.accepts(MNIST).is_ok() && kind.accepts(CIFAR).is_ok());
        }
        let odd = DataSpec::Images(ImageSpec {
            side: 30,
            ..CIFAR_IMAGES
        });
        let err = ModelKind::ResmlpSmall.accepts(odd).unwrap_err();
        assert!(err.contains("not a multiple of 4"), "{err}");
        assert!(ModelKind::Gru.accepts(SPEECH).is_ok());
        let err = ModelKind::Gru.accepts(CIFAR).unwrap_err();
        assert!(err.contains("classifies sequences"), "{err}");
        let err = ModelKind::Lenet5.accepts(SPEECH).unwrap_err();
        assert!(err.contains("use --model gru"), "{err}");
    }

    #[test]
    fn build_makes_the_model_named_and_refuses_a_wrong_input() {
        type B = Autodiff<NdArray>;
        let device = Default::default();
        let built = |kind: ModelKind, input| kind.build::<B, _>(input, &device, TrainableParams);
        assert_eq!(built(ModelKind::Lenet5, MNIST).unwrap(), 61_706);
        assert_eq!(built(ModelKind::Lenet300, MNIST).unwrap(), 266_610);
        let s12 = ResMlpConfig::s12(32, RESMLP_PATCH, 10).init::<B>(&device);
        assert_eq!(
            built(ModelKind::ResmlpS12, CIFAR).unwrap(),
            s12.num_params()
        );
        let grey = ResMlpConfig::small(28, RESMLP_PATCH, 10)
            .with_channels(1)
            .init::<B>(&device);
        assert_eq!(
            built(ModelKind::ResmlpSmall, MNIST).unwrap(),
            grey.num_params()
        );
        // the published counts at 10 classes (CIFAR stem), and the narrow ResNet-18
        assert_eq!(built(ModelKind::Resnet18Cifar, CIFAR).unwrap(), 11_173_962);
        // the ImageNet stem: a 7×7 stem convolution instead of 3×3
        assert_eq!(
            built(ModelKind::Resnet18, CIFAR).unwrap(),
            11_173_962 + 64 * 3 * (49 - 9)
        );
        assert_eq!(built(ModelKind::Resnet18CifarW16, CIFAR).unwrap(), 701_466);
        assert_eq!(built(ModelKind::Vgg16, CIFAR).unwrap(), 14_728_266);
        // 2 × 256 GRU over 39 features: 3 gates of input and hidden products with biases
        let layer = |d: usize| 3 * (d * 256 + 256 + 256 * 256 + 256);
        assert_eq!(
            built(ModelKind::Gru, SPEECH).unwrap(),
            layer(39) + layer(256) + 256 * 10 + 10
        );
        assert!(built(ModelKind::DeitTi, CIFAR).is_ok());
        let odd = DataSpec::Images(ImageSpec {
            side: 30,
            ..CIFAR_IMAGES
        });
        let err = built(ModelKind::DeitTi, odd).unwrap_err();
        assert!(err.to_string().contains("4×4 patches"), "{err}");
        let err = built(ModelKind::Lenet5, CIFAR).unwrap_err();
        assert!(err.to_string().contains("28×28 grayscale"), "{err}");
    }

    #[test]
    fn prelu_adds_one_slope_per_channel_of_each_site_and_is_refused_elsewhere() {
        type B = Autodiff<NdArray>;
        let device = Default::default();
        let prelu = |kind: ModelKind, input| {
            kind.build_with::<B, _>(Activation::Prelu, input, &device, TrainableParams)
        };
        assert_eq!(
            prelu(ModelKind::Lenet5, MNIST).unwrap(),
            61_706 + 6 + 16 + 120 + 84
        );
        assert_eq!(
            prelu(ModelKind::Lenet300, MNIST).unwrap(),
            266_610 + 300 + 100
        );
        // stem 16; per basic block: mid after the first conv, out after the sum
        let blocks: usize = [16, 32, 64, 128].iter().map(|c| 2 * 2 * c).sum();
        assert_eq!(
            prelu(ModelKind::Resnet18CifarW16, CIFAR).unwrap(),
            701_466 + 16 + blocks
        );
        let err = prelu(ModelKind::ResmlpSmall, MNIST).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid option: --act prelu applies to the LeNets and the ResNets, not to resmlp-small"
        );
    }

    #[test]
    fn every_name_parses_back() {
        for &kind in ModelKind::ALL {
            assert_eq!(kind.to_string().parse::<ModelKind>(), Ok(kind));
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{kind}\""));
        }
        assert!("lenet6".parse::<ModelKind>().is_err());
    }
}
