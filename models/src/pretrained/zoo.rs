//! The zoo's models built from pretrained weights: which [`ModelKind`] a state dict may load
//! into, and the model built at the state dict's shape with its tensors loaded.

use super::{Architecture, Names, StateDict};
use crate::act::Activation;
use crate::classifier::{ModelKind, ModelVisitor};
use crate::data::DataSpec;
use crate::error::{Error, Result};
use crate::resnet::Depth;
use crate::shape::Shape;
use burn::tensor::backend::AutodiffBackend;

/// What to do with a classifier head whose classes differ from the dataset's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Head {
    /// Refuse (evaluation, pruning: the head must classify the dataset's classes).
    Keep,
    /// Start a new head of the dataset's classes (fine-tuning, `ember train --from`).
    Replace,
}

impl ModelKind {
    /// The names under which this kind's PyTorch weights are stored, at `arch`'s shape:
    /// torchvision's for the ResNets, timm's for the DeiTs.
    pub fn torch_names(self, arch: &Architecture) -> Names {
        match arch {
            Architecture::ResNet(c) => Names::torchvision(c),
            Architecture::Deit(_) => Names::Timm,
        }
    }

    /// The PyTorch names of this kind at its own shape: torchvision's for the ResNets, timm's
    /// for the DeiTs; `None` for the models PyTorch's zoos do not have.
    pub fn torch_naming(self) -> Option<Names> {
        use ModelKind::*;
        match self.resnet_layout() {
            Some((depth, _)) => Some(Names::Torchvision {
                blocks: depth.blocks(),
            }),
            None => matches!(self, DeitTi | DeitS | DeitB).then_some(Names::Timm),
        }
    }

    /// The architecture of `dict` when it is this kind of model (widths, classes and sizes may
    /// differ from this kind's; the block layout, stem and head width must not); an error
    /// naming what it holds otherwise.
    pub fn check_weights(self, dict: &StateDict) -> Result<Architecture> {
        use ModelKind::*;
        let arch = dict.architecture()?;
        let wrong =
            |what: String| dict.error(format!("it holds a {arch}; --model {self} is {what}"));
        match (&arch, self) {
            (Architecture::ResNet(c), _) => {
                let Some(layout) = self.resnet_layout() else {
                    return Err(wrong("not a ResNet".into()));
                };
                if (c.depth, c.cifar_stem) != layout {
                    let other = ModelKind::ALL
                        .iter()
                        .find(|k| k.resnet_layout() == Some((c.depth, c.cifar_stem)));
                    return Err(wrong(format!(
                        "another ResNet{}",
                        other.map_or(String::new(), |k| format!(" (use --model {k})"))
                    )));
                }
            }
            (Architecture::Deit(c), DeitTi | DeitS | DeitB) => {
                let dim = |k: ModelKind| match k.own_shape() {
                    Some(Shape::Deit { dim, .. }) => dim,
                    _ => 0,
                };
                if let Some(k) = [DeitTi, DeitS, DeitB]
                    .into_iter()
                    .find(|&k| dim(k) == c.dim)
                    && k != self
                {
                    return Err(wrong(format!(
                        "a DeiT {} wide (use --model {k})",
                        dim(self)
                    )));
                }
            }
            (Architecture::Deit(_), _) => return Err(wrong("not a DeiT".into())),
        }
        Ok(arch)
    }

    /// The shape of weights `arch` when it is not this kind's own
    /// ([`ModelKind::own_shape`]): what a run or a packed model started from them records, to
    /// be rebuilt at it ([`ModelKind::build_shaped`]).
    pub fn shape_of(self, arch: &Architecture) -> Option<Shape> {
        let shape = match arch {
            Architecture::ResNet(c) => Shape::Resnet { width: c.width },
            Architecture::Deit(c) => Shape::Deit {
                dim: c.dim,
                depth: c.depth,
                heads: c.heads,
                patch: c.patch_size,
            },
        };
        (Some(shape) != self.own_shape()).then_some(shape)
    }

    /// The depth and stem (`true`: CIFAR's) of a ResNet kind; `None` for the other models.
    fn resnet_layout(self) -> Option<(Depth, bool)> {
        use ModelKind::*;
        Some(match self {
            Resnet18 => (Depth::R18, false),
            Resnet34 => (Depth::R34, false),
            Resnet50 => (Depth::R50, false),
            Resnet18Cifar | Resnet18CifarW16 => (Depth::R18, true),
            Resnet34Cifar => (Depth::R34, true),
            Resnet50Cifar => (Depth::R50, true),
            _ => return None,
        })
    }

    /// Builds this kind of model at the shape `dict` holds, loads its tensors
    /// ([`super::load_except`]) and hands the model to `visitor`, as [`ModelKind::build_with`]
    /// does for a fresh one. The dataset must fit the weights: the same channels, the image
    /// side of a DeiT's position embeddings, the head's classes (or [`Head::Replace`]).
    pub fn build_pretrained<B: AutodiffBackend, V: ModelVisitor<B>>(
        self,
        dict: &StateDict,
        head: Head,
        act: Activation,
        spec: DataSpec,
        device: &B::Device,
        visitor: V,
    ) -> Result<V::Output> {
        let arch = self.check_weights(dict)?;
        if act != Activation::Relu {
            return Err(Error::Invalid(format!(
                "--act {act}: pretrained weights have no PReLU slopes; they take --act relu"
            )));
        }
        self.accepts(spec).map_err(Error::Invalid)?;
        let DataSpec::Images(input) = spec else {
            unreachable!("accepts refuses sequences for an image model")
        };
        let (channels, classes) = match &arch {
            Architecture::ResNet(c) => (c.channels, c.classes),
            Architecture::Deit(c) => (c.channels, c.classes),
        };
        if channels != input.channels {
            return Err(dict.error(format!(
                "its {arch} takes {channels}-channel images; the dataset's have {}",
                input.channels
            )));
        }
        if let Architecture::Deit(c) = &arch
            && c.image_size != input.side
        {
            return Err(dict.error(format!(
                "its position embeddings are for {0}×{0} images; the dataset's are {1}×{1}",
                c.image_size, input.side
            )));
        }
        // the sizes a run or packed model of them would record, and be rebuilt at
        if let Some(shape) = self.shape_of(&arch) {
            self.check_shape(shape, spec)
                .map_err(|why| dict.error(format!("its {arch}: {why}")))?;
        }
        let replace = classes != input.classes;
        if replace && head == Head::Keep {
            return Err(dict.error(format!(
                "its head classifies {classes} classes; the dataset has {} (ember train --from \
                 fine-tunes with a new head)",
                input.classes
            )));
        }
        let names = self.torch_names(&arch);
        let skip = |key: &str| replace && names.is_head(key);
        Ok(match arch {
            Architecture::ResNet(mut c) => {
                c.classes = input.classes;
                let model = super::load_except(c.init::<B>(device), dict, &names, skip)?;
                visitor.visit(model)
            }
            Architecture::Deit(mut c) => {
                c.classes = input.classes;
                let model = super::load_except(c.init::<B>(device), dict, &names, skip)?;
                visitor.visit(model)
            }
        })
    }
}
