//! PyTorch weights in and out: the files `ember eval`, `ember train --from` and `ember prune`
//! read as pretrained models (`.pth`/`.pt` state dicts, `.safetensors`), and `ember export`,
//! which writes a saved model as one dense safetensors file under torchvision's or timm's key
//! names ([`ember_models::pretrained`]).

use crate::backend::{BackendJob, BackendKind, TrainBackend};
use crate::error::{EmberError, Result};
use crate::record;
use crate::run;
use crate::technique::Packed;
use burn_approx_mul::Multiplier;
use burn_sparse_act::Policy;
use ember_models::act::Activation;
use ember_models::classifier::{ModelKind, ModelVisitor, TrainableClassifier};
use ember_models::data::{DataSpec, DatasetKind, ImageSpec};
use ember_models::pretrained::{self, Architecture, Head, Names, Naming, StateDict};
use ember_models::shape::Shape;
use std::path::{Path, PathBuf};

/// File extensions read as PyTorch weights rather than Ember checkpoints.
pub const EXTENSIONS: [&str; 3] = ["pth", "pt", "safetensors"];

/// Whether `path` names a weights file: by its extension ([`EXTENSIONS`]), or, for a `.bin`
/// (Hugging Face's `pytorch_model.bin`, and a name Ember's own records may have too), by its
/// first bytes: a zip archive (`torch.save`), a pickle protocol 2–5 header (legacy
/// `torch.save`) or a safetensors header.
pub fn is_weights_file(path: &Path) -> bool {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some(e) if EXTENSIONS.contains(&e) => true,
        Some("bin") => matches!(ember_models::pretrained::sniff(path), Ok(Some(_))),
        _ => false,
    }
}

/// The state dict `path` holds when it is a weights file; `None` for an Ember checkpoint.
pub fn open(path: &Path) -> Result<Option<StateDict>> {
    if !is_weights_file(path) {
        return Ok(None);
    }
    if !path.is_file() {
        return Err(EmberError::BadCheckpoint {
            path: path.to_path_buf(),
            reason: "no such weights file".into(),
        });
    }
    Ok(Some(StateDict::open(path)?))
}

/// The model a weights file is to be read as: `--model`, which it must have.
pub fn model_for(path: &Path, model: Option<ModelKind>) -> Result<ModelKind> {
    model.ok_or_else(|| EmberError::BadCheckpoint {
        path: path.to_path_buf(),
        reason: "a weights file does not say which model it holds: pass --model (resnet18, \
                 resnet34, resnet50, deit-ti, deit-s, deit-b, …)"
            .into(),
    })
}

/// The names `ember export` writes for `kind` by default: torchvision's for the ResNets,
/// timm's for the DeiTs, Ember's own for the rest.
pub fn default_naming(kind: ModelKind) -> Naming {
    match kind.torch_naming() {
        Some(Names::Torchvision { .. }) => Naming::Torchvision,
        Some(Names::Timm) => Naming::Timm,
        _ => Naming::Ember,
    }
}

/// Everything `ember export` needs.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// A run directory, an Ember `.mpk` checkpoint, or a weights file.
    pub checkpoint: PathBuf,
    /// The model (read from the run's manifest when not given; required for a weights file
    /// or a `.mpk` outside a run).
    pub model: Option<ModelKind>,
    /// The key names to write (`None`: [`default_naming`]).
    pub names: Option<Naming>,
    /// The safetensors file to write.
    pub out: PathBuf,
    /// Replace `out` if it exists.
    pub overwrite: bool,
}

/// What `ember export` wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportReport {
    /// The model.
    pub model: ModelKind,
    /// The names written.
    pub names: Naming,
    /// Tensors written.
    pub tensors: usize,
    /// Bytes written.
    pub bytes: usize,
}

/// Writes the model a checkpoint holds as one dense safetensors file (zeros where pruned).
/// `out` is written whole or not at all, and an existing `out` is refused unless `overwrite`.
pub fn export(opts: ExportOptions) -> Result<ExportReport> {
    if opts.out.exists() && !opts.overwrite {
        return Err(EmberError::Exists(opts.out.clone()));
    }
    let weights = open(&opts.checkpoint)?;
    let (file, manifest, checksum) = match &weights {
        Some(_) => (opts.checkpoint.clone(), None, None),
        None => match run::resolve_checkpoint(&opts.checkpoint) {
            Ok(found) => found,
            Err(e) => {
                if Packed::find(&opts.checkpoint)?.is_some() {
                    return Err(EmberError::BadCheckpoint {
                        path: opts.checkpoint.clone(),
                        reason: "it holds only a packed model (HiNM's or BCR's format, which \
                                 stays Ember's): export the run that trained it, whose \
                                 model.mpk holds the dense weights, zeros where pruned"
                            .into(),
                    });
                }
                return Err(e);
            }
        },
    };
    let model = match (opts.model, manifest.as_ref().map(|m| m.model)) {
        (Some(asked), Some(trained)) if asked != trained => {
            return Err(EmberError::BadCheckpoint {
                path: opts.checkpoint,
                reason: format!("it holds a {trained} model, not {asked}"),
            });
        }
        (Some(m), _) | (None, Some(m)) => m,
        (None, None) => model_for(&opts.checkpoint, None)?,
    };
    let names = opts.names.unwrap_or_else(|| default_naming(model));
    let wanted = match names {
        Naming::Ember => Names::Ember,
        asked => match model.torch_naming() {
            Some(n) if default_naming(model) == asked => n,
            _ => {
                return Err(EmberError::Invalid(format!(
                    "--names {asked}: {model} has no {asked} names (torchvision: the ResNets; \
                     timm: the DeiTs; ember: any model)"
                )));
            }
        },
    };
    let spec = match (&manifest, &weights) {
        (Some(m), _) => m.spec(),
        (None, Some(dict)) => arch_spec(&model.check_weights(dict)?),
        (None, None) => {
            return Err(EmberError::Invalid(format!(
                "a {model} checkpoint outside a run: export the run directory, whose manifest \
                 names its dataset"
            )));
        }
    };
    let act = manifest.as_ref().map_or(Activation::Relu, |m| m.act);
    let bytes = BackendKind::Ndarray.dispatch(
        Multiplier::native(),
        Policy::default(),
        ExportJob {
            model,
            shape: manifest.as_ref().and_then(|m| m.shape),
            act,
            spec,
            file,
            checksum,
            weights,
            names: wanted,
        },
    )?;
    let tensors = safetensors::SafeTensors::deserialize(&bytes)
        .map(|t| t.len())
        .unwrap_or(0);
    if opts.overwrite {
        crate::atomic::write(&opts.out, &bytes)?;
    } else {
        crate::atomic::write_new(&opts.out, &bytes)?;
    }
    Ok(ExportReport {
        model,
        names,
        tensors,
        bytes: bytes.len(),
    })
}

/// The data a model of `arch` takes: its own channels, classes and image side (224 for a
/// ResNet, whose parameters do not depend on it).
pub(crate) fn arch_spec(arch: &Architecture) -> DataSpec {
    DataSpec::Images(match arch {
        Architecture::ResNet(c) => ImageSpec {
            channels: c.channels,
            side: 224,
            classes: c.classes,
        },
        Architecture::Deit(c) => ImageSpec {
            channels: c.channels,
            side: c.image_size,
            classes: c.classes,
        },
    })
}

/// The dataset weights of `arch` classify, when their shape says so: ImageNet's images
/// (`imagenet-folder`) for a ResNet with the ImageNet stem or a DeiT of 224-pixel images,
/// CIFAR-10 for 10 classes of CIFAR's images; `None` otherwise.
pub(crate) fn arch_dataset(arch: &Architecture) -> Option<DatasetKind> {
    let (channels, classes, imagenet, cifar) = match arch {
        Architecture::ResNet(c) => (c.channels, c.classes, !c.cifar_stem, c.cifar_stem),
        Architecture::Deit(c) => (
            c.channels,
            c.classes,
            c.image_size == 224,
            c.image_size == 32,
        ),
    };
    match (channels, classes) {
        (3, _) if imagenet => Some(DatasetKind::ImagenetFolder),
        (3, 10) if cifar => Some(DatasetKind::Cifar10),
        _ => None,
    }
}

struct ExportJob {
    model: ModelKind,
    shape: Option<Shape>,
    act: Activation,
    spec: DataSpec,
    file: PathBuf,
    checksum: Option<u32>,
    weights: Option<StateDict>,
    names: Names,
}

impl BackendJob for ExportJob {
    type Output = Vec<u8>;
    fn run<B: TrainBackend>(mut self, device: B::Device) -> Result<Vec<u8>> {
        let (kind, act, spec) = (self.model, self.act, self.spec);
        match self.weights.take() {
            Some(dict) => {
                let visit = ExportVisit::<B> {
                    job: self,
                    device: device.clone(),
                    loaded: true,
                };
                kind.build_pretrained::<B, _>(&dict, Head::Keep, act, spec, &device, visit)?
            }
            None => {
                let shape = self.shape;
                let visit = ExportVisit::<B> {
                    job: self,
                    device: device.clone(),
                    loaded: false,
                };
                kind.build_shaped::<B, _>(shape, act, spec, &device, visit)?
            }
        }
    }
}

struct ExportVisit<B: TrainBackend> {
    job: ExportJob,
    device: B::Device,
    loaded: bool,
}

impl<B: TrainBackend> ModelVisitor<B> for ExportVisit<B> {
    type Output = Result<Vec<u8>>;
    fn visit<M: TrainableClassifier<B>>(self, model: M) -> Result<Vec<u8>> {
        let job = self.job;
        let model = match self.loaded {
            true => model,
            false => record::load_checked(&job.file, job.checksum, model, job.model, &self.device)?,
        };
        let model = model.valid();
        record::refuse_non_finite(&model, &job.file, "there is nothing to export")?;
        Ok(pretrained::export(&model, &job.names)?)
    }
}
