//! # ember-models
//!
//! Ember's model zoo and data loaders: what a library user needs to train or evaluate a model
//! under Ember's decorators, without the training loop, plots or the command line
//! (`ember-train` and `ember-cli` build on this crate).
//!
//! - [`lenet`]: LeNet-300-100 and LeNet-5 written with stock `burn::nn` layers only, so every
//!   Ember backend decorator applies to them unchanged.
//! - [`resmlp`]: ResMLP-S12/S24 (ImageNet and CIFAR configurations) and a small CPU variant.
//! - [`resnet`]: ResNet-18/34/50 with the ImageNet or the CIFAR stem and a width knob;
//!   [`deit`]: DeiT-Ti/S/B. Their trainable parameter counts are the published ones (tested).
//! - [`vgg`]: VGG-16 in its CIFAR-10 configuration (parameter count tested), for BCR's tuner and
//!   kernel shapes; a library model for now.
//! - [`graph`]: one autodiff graph for a module's parameters before a pass that reuses them
//!   at every time step (burn-autodiff's graph merges otherwise grow with the square of the
//!   sequence length).
//! - [`gru`]: a GRU sequence classifier (stacked stock `burn::nn::Gru`, logits from each
//!   sequence's last valid step) for the speech and speaker tasks of BCR; a library model for now.
//! - [`act`]: ReLU or PReLU(channels) for the LeNets and the ResNets (`--act prelu`).
//! - [`broadcast`]: the per-channel affine of ResMLP, one fused op on backends that register
//!   one (Ember's training stacks), Burn's broadcast ops elsewhere.
//! - [`classifier`]: the models Ember knows ([`classifier::ModelKind`]), the one place that
//!   builds them, and what burn-train needs of them.
//! - [`shape`]: the sizes a ResNet's or DeiT's kind does not fix by name ([`shape::Shape`]), for
//!   models built from weights of another width, and their bounds.
//! - [`pretrained`]: PyTorch state dicts and safetensors files in (torchvision's ResNets, timm's
//!   DeiTs, under their key names), dense safetensors out.
//! - [`params`]: a model's parameters by path and shape (its linear layers, the shape check of
//!   a loaded record).
//! - [`data`]: local-file loaders (idx for MNIST / Fashion-MNIST, gz or raw; CIFAR-10 as an
//!   ImageFolder or the binary batches; FSDD's WAVs as MFCC sequences; `.ts` series such as
//!   Japanese Vowels) and a real MNIST subset compiled into the crate, so
//!   training runs offline with no arguments.
//!
//! ```
//! use burn::backend::{Autodiff, NdArray};
//! use burn::prelude::*;
//! use ember_models::classifier::{Classifier, ModelKind, ModelVisitor, TrainableClassifier};
//! use ember_models::data::{DataSource, DatasetKind, Inputs};
//!
//! type B = Autodiff<NdArray>;
//! /// Classifies a batch of zeros with whatever model was built.
//! struct Logits;
//! impl ModelVisitor<B> for Logits {
//!     type Output = [usize; 2];
//!     fn visit<M: TrainableClassifier<B>>(self, model: M) -> [usize; 2] {
//!         let images = Tensor::zeros([2, 1, 28, 28], &Default::default());
//!         model.logits(Inputs::Images(images)).dims()
//!     }
//! }
//! let mnist = DataSource::new(DatasetKind::Mnist, None)?; // the embedded subset
//! let dims = ModelKind::Lenet5.build::<B, _>(mnist.spec(), &Default::default(), Logits)?;
//! assert_eq!(dims, [2, 10]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Feature flags
//!
//! None: the zoo is backend-agnostic. Backends are chosen by the user of the crate (`ember-train`
//! builds ndarray, wgpu and, with its `cuda` feature, CUDA).
#![warn(missing_docs)]

pub mod act;
pub mod broadcast;
pub mod choice;
pub mod classifier;
pub mod data;
pub mod deit;
pub mod error;
pub mod graph;
pub mod gru;
pub mod lenet;
pub mod params;
pub mod pretrained;
pub mod resmlp;
pub mod resnet;
pub mod shape;
pub mod vgg;

pub use error::{Error, Result};
