//! Pretrained weights in and dense weights out: PyTorch state dicts (`.pth`/`.pt`, read by
//! burn-store's `PytorchReader`) and safetensors files (burn-store's `SafetensorsStore`) loaded
//! into the zoo's models under torchvision's and timm's key names, and the zoo's models written
//! back as safetensors under those names.
//!
//! - [`StateDict::open`] reads a file, whatever its format, and refuses what is not a state
//!   dict of numbers (a whole pickled model, a TorchScript archive, a truncated file, NaN).
//! - [`StateDict::architecture`] reads the model's shape from the tensors' shapes: a
//!   torchvision ResNet (depth from its blocks, stem from `conv1`, width, classes) or a timm
//!   DeiT (width, depth, patch and image size from `pos_embed`, classes; heads of 64).
//! - [`load`] puts the state dict's tensors into a model built from that shape: every
//!   parameter of the model must have its key, every key must be taken (or be one that is
//!   left out on purpose, [`Names::ignored`]), every shape must match.
//! - [`export`] writes a model's parameters as one safetensors file under the PyTorch names
//!   (or Ember's own module paths, [`Naming::Ember`]).
//!
//! The models keep their module paths, so the names a per-layer policy uses stay the same
//! whether a model was imported or trained from scratch.
//!
//! ```
//! use burn::backend::NdArray;
//! use ember_models::pretrained::{self, Architecture, Names, StateDict};
//! use ember_models::resnet::{Depth, ResNetConfig};
//!
//! // a ResNet-18 at width 4 written under torchvision's names, then read back
//! let config = ResNetConfig::new(Depth::R18, false, 3).with_width(4);
//! let model = config.init::<NdArray>(&Default::default());
//! let bytes = pretrained::export(&model, &Names::torchvision(&config))?;
//! let dir = tempfile::tempdir()?;
//! let file = dir.path().join("r18.safetensors");
//! std::fs::write(&file, bytes)?;
//! let dict = StateDict::open(&file)?;
//! assert!(dict.get("layer4.1.bn2.running_var").is_some());
//! let Architecture::ResNet(found) = dict.architecture()? else { unreachable!() };
//! assert_eq!(found, config);
//! let again = pretrained::load(found.init::<NdArray>(&Default::default()), &dict, &Names::torchvision(&found))?;
//! # let _ = again;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod names;
mod shape;
mod zoo;

pub use names::{Names, Source};
pub use shape::{Architecture, DEIT_HEAD_DIM};
pub use zoo::Head;

use crate::error::{Error, Result};
use burn::module::Module;
use burn::prelude::*;
use burn::tensor::TensorData;
use burn_store::{ModuleSnapshot, ModuleStore, SafetensorsStore, TensorSnapshot};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// The key names an export writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    /// torchvision's ResNet names (`torchvision.models.resnet18().load_state_dict` takes them).
    Torchvision,
    /// timm's DeiT names (`timm.create_model("deit_tiny_patch16_224")` takes them).
    Timm,
    /// Ember's own module paths and Burn's layouts (linear weights `[in, out]`): any model.
    Ember,
}

crate::choices!(Naming {
    Torchvision => "torchvision",
    Timm => "timm",
    Ember => "ember",
});

/// A state dict's float tensors by key, read from a `.pth`/`.pt` or `.safetensors` file.
#[derive(Clone, Debug)]
pub struct StateDict {
    path: PathBuf,
    tensors: BTreeMap<String, TensorData>,
}

/// The one error of this module: `path`, then why.
pub(crate) fn bad(path: &Path, reason: impl Into<String>) -> Error {
    Error::Weights {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Keys a training script nests a state dict under (`{"model": state_dict, "optimizer": ..}`,
/// `{"state_dict": ..}`, a `DataParallel`'s `module.`), taken off when every tensor has one.
const NESTING: [&str; 3] = ["model.", "state_dict.", "module."];

impl StateDict {
    /// Reads every tensor of a PyTorch (`torch.save` of a state dict, zip or legacy) or
    /// safetensors file. Refuses a file that is not a state dict of numbers, naming what it is
    /// when Ember can tell: a TorchScript archive, a whole pickled model, a truncated file, a
    /// tensor holding NaN or infinity.
    pub fn open(path: &Path) -> Result<Self> {
        let format = sniff(path).map_err(|e| Error::io(path, e))?;
        let snapshots = if format == Some(Format::Safetensors) {
            let mut store = SafetensorsStore::from_file(path);
            let all = store
                .get_all_snapshots()
                .map_err(|e| bad(path, format!("not a readable safetensors file ({e})")))?;
            all.iter()
                .map(|(k, s)| (k.clone(), s.clone()))
                .collect::<Vec<_>>()
        } else {
            // a TorchScript archive is a zip too: looked for only when the reader finds no
            // state dict, so that a state dict is read once
            let torchscript = || {
                format == Some(Format::PytorchZip)
                    && zip_has(path, "constants.pkl").unwrap_or(false)
            };
            let script = || {
                bad(
                    path,
                    "it is a TorchScript archive (torch.jit.save), not a state dict: save \
                     model.state_dict() with torch.save instead",
                )
            };
            match burn_store::pytorch::PytorchReader::new(path) {
                Ok(reader) if reader.is_empty() && torchscript() => return Err(script()),
                Ok(reader) => reader.into_tensors().into_iter().collect(),
                Err(_) if torchscript() => return Err(script()),
                Err(e) => return Err(bad(path, unreadable(path, format, &e.to_string()))),
            }
        };
        let mut tensors = BTreeMap::new();
        for (key, snapshot) in snapshots {
            let data = snapshot
                .to_data()
                .map_err(|e| bad(path, format!("cannot read tensor {key}: {e:?}")))?;
            if data.dtype.is_float() {
                let values = data.clone().convert::<f32>();
                let values = values
                    .as_slice::<f32>()
                    .map_err(|e| bad(path, format!("cannot read tensor {key} as f32: {e:?}")))?;
                if values.iter().any(|v| !v.is_finite()) {
                    return Err(bad(
                        path,
                        format!("tensor {key} holds NaN or infinite values"),
                    ));
                }
            }
            tensors.insert(key, data);
        }
        if tensors.is_empty() {
            return Err(bad(path, "it holds no tensors: it is not a state dict"));
        }
        for prefix in NESTING {
            if tensors.keys().all(|k| k.starts_with(prefix)) {
                tensors = tensors
                    .into_iter()
                    .map(|(k, v)| (k[prefix.len()..].to_string(), v))
                    .collect();
            }
        }
        Ok(Self {
            path: path.to_path_buf(),
            tensors,
        })
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The tensor under `key`.
    pub fn get(&self, key: &str) -> Option<&TensorData> {
        self.tensors.get(key)
    }

    /// Every key, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    /// The shape of the tensor under `key`.
    pub(crate) fn dims(&self, key: &str) -> Option<&[usize]> {
        self.tensors.get(key).map(|t| t.shape.as_slice())
    }

    fn error(&self, reason: impl Into<String>) -> Error {
        bad(&self.path, reason)
    }
}

/// A weights file's format, as its first bytes say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `torch.save`: a zip archive (`PK\x03\x04`).
    PytorchZip,
    /// Legacy `torch.save`: a pickle of protocol 2 to 5.
    PytorchPickle,
    /// A safetensors file: its header's length (little-endian u64, at least 2 and below
    /// 100 MB) and the header's `{`.
    Safetensors,
}

/// The format of the file at `path` by its first bytes; `None` when it is neither (an Ember
/// record, a text file, an empty file).
pub fn sniff(path: &Path) -> std::io::Result<Option<Format>> {
    use std::io::Read;
    let mut head = Vec::with_capacity(9);
    std::fs::File::open(path)?.take(9).read_to_end(&mut head)?;
    let header = |h: &[u8]| u64::from_le_bytes(h[..8].try_into().expect("8 bytes"));
    Ok(
        if head.len() == 9 && head[8] == b'{' && (2..100_000_000).contains(&header(&head)) {
            Some(Format::Safetensors)
        } else if head.starts_with(b"PK\x03\x04") {
            Some(Format::PytorchZip)
        } else if head.len() >= 2 && head[0] == 0x80 && (2..=5).contains(&head[1]) {
            Some(Format::PytorchPickle)
        } else {
            None
        },
    )
}

/// Whether a zip archive has an entry whose name ends in `/<name>` (its central directory's
/// names, read without extracting).
fn zip_has(path: &Path, name: &str) -> Result<bool> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let needle = format!("/{name}");
    Ok(bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
}

/// A sentence for a file burn-store's PyTorch reader refused (`format`: as [`sniff`] found
/// it): empty, not a PyTorch file by its first bytes, a whole pickled model, a truncated file
/// or damaged zip archive, or what the reader's error says.
fn unreadable(path: &Path, format: Option<Format>, error: &str) -> String {
    let empty = std::fs::metadata(path).is_ok_and(|m| m.len() == 0);
    let lower = error.to_lowercase();
    let truncated = ["eof", "unexpected end", "invalid zip"];
    let whole = ["full model", "python type", "class", "global"];
    match format {
        _ if empty => "it is empty".into(),
        None => "not a PyTorch file: its first bytes are neither a zip archive's (torch.save) \
                 nor a pickle's (legacy torch.save)"
            .into(),
        _ if whole.iter().any(|w| lower.contains(w)) => format!(
            "it is not a state dict: a whole pickled model (torch.save(model)) cannot be read \
             without Python; save model.state_dict() instead ({error})"
        ),
        Some(Format::PytorchZip) => format!(
            "it is a zip archive (torch.save) that cannot be read: truncated or damaged ({error})"
        ),
        _ if truncated.iter().any(|w| lower.contains(w)) => {
            format!("it is truncated or not a PyTorch file ({error})")
        }
        _ => format!("not a readable PyTorch state dict ({error})"),
    }
}

/// The f32 values and shape of a tensor in Burn's layout for `source` (rows cut out of a fused
/// projection, a linear weight transposed).
fn to_burn(data: &TensorData, source: &Source) -> (Vec<f32>, Vec<usize>) {
    let mut shape = data.shape.to_vec();
    let mut values: Vec<f32> = data
        .clone()
        .convert::<f32>()
        .to_vec()
        .expect("f32 after convert");
    if let Some((i, n)) = source.rows {
        let rows = shape[0] / n;
        let width: usize = shape[1..].iter().product();
        values = values[i * rows * width..(i + 1) * rows * width].to_vec();
        shape[0] = rows;
    }
    if source.transpose {
        values = transpose(&values, shape[0], shape[1]);
        shape.swap(0, 1);
    }
    (values, shape)
}

fn transpose(values: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; values.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = values[r * cols + c];
        }
    }
    out
}

/// Loads `dict` into `model` under `names`: every parameter of the model takes the tensor of
/// its key, in Burn's layout. A parameter without a key, a key no parameter takes (and that
/// [`Names::ignored`] does not leave out) and a shape that differs are each an error naming
/// the key.
pub fn load<B: Backend, M: Module<B>>(model: M, dict: &StateDict, names: &Names) -> Result<M> {
    load_except(model, dict, names, |_| false)
}

/// [`load`] leaving out the keys `skip` names on both sides: the model's parameters under
/// them keep their values (a new classifier head), the state dict's are not used.
pub fn load_except<B: Backend, M: Module<B>>(
    mut model: M,
    dict: &StateDict,
    names: &Names,
    skip: impl Fn(&str) -> bool,
) -> Result<M> {
    let mut used = BTreeSet::new();
    let mut kept = BTreeSet::new();
    let mut snapshots = Vec::new();
    for wanted in model.collect(None, None, false) {
        let path = wanted.full_path();
        let source = names.source(&path).ok_or_else(|| {
            dict.error(format!(
                "the model's parameter {path} has no key in this naming (a PReLU slope? \
                 pretrained weights take --act relu)"
            ))
        })?;
        if skip(&source.key) {
            kept.insert(path);
            continue;
        }
        let data = dict.get(&source.key).ok_or_else(|| {
            dict.error(format!(
                "key {} is missing (the model's {path} needs it)",
                source.key
            ))
        })?;
        let divisible = source
            .rows
            .is_none_or(|(_, n)| data.shape.first().is_some_and(|r| r % n == 0));
        let fits = data.shape.len() == wanted.shape.len() && divisible;
        let (values, shape) = if fits {
            to_burn(data, &source)
        } else {
            (vec![], data.shape.to_vec())
        };
        if !fits || shape != wanted.shape.to_vec() {
            return Err(dict.error(format!(
                "key {} is {:?}; the model's {path} needs {:?}{}",
                source.key,
                data.shape.as_slice(),
                wanted.shape.as_slice(),
                match (source.rows, source.transpose) {
                    (Some((_, n)), _) => format!(" (one of {n} blocks of its rows, transposed)"),
                    (None, true) => " (transposed)".into(),
                    (None, false) => String::new(),
                }
            )));
        }
        used.insert(source.key);
        snapshots.push(TensorSnapshot::from_data(
            TensorData::new(values, shape),
            wanted.path_stack.clone().unwrap_or_default(),
            wanted.container_stack.clone().unwrap_or_default(),
            wanted.tensor_id.unwrap_or_default(),
        ));
    }
    let extra: Vec<&str> = dict
        .keys()
        .filter(|k| !used.contains(*k) && !names.ignored(k) && !skip(k))
        .collect();
    if !extra.is_empty() {
        return Err(dict.error(format!(
            "{} key{} that the model has no parameter for: {}",
            extra.len(),
            if extra.len() == 1 { "" } else { "s" },
            list(&extra)
        )));
    }
    let result = model.apply(snapshots, None, None, false);
    if let Some(e) = result.errors.first() {
        return Err(dict.error(format!("cannot load it: {e}")));
    }
    if let Some((path, _)) = result.missing.iter().find(|(p, _)| !kept.contains(p)) {
        return Err(dict.error(format!("the model's {path} was not loaded")));
    }
    Ok(model)
}

/// At most five items of a list, then how many more.
fn list(items: &[&str]) -> String {
    let shown = items.iter().take(5).copied().collect::<Vec<_>>().join(", ");
    match items.len() {
        n if n > 5 => format!("{shown} and {} more", n - 5),
        _ => shown,
    }
}

/// A tensor's shape and f32 values.
type Dense = (Vec<usize>, Vec<f32>);

/// Writes `model`'s parameters as a safetensors file (returned as bytes) under `names`: dense
/// f32 tensors in PyTorch's layouts (linear weights `[out, in]`, timm's query, key and value
/// fused into one `qkv` projection), a `num_batches_tracked` of 0 beside each torchvision batch
/// norm, header metadata `{"format": "pt"}`. Pruned weights are written as they are, zeros
/// where pruned. A parameter the naming has no key for (a PReLU slope) is an error.
pub fn export<B: Backend, M: Module<B>>(model: &M, names: &Names) -> Result<Vec<u8>> {
    let mut out: BTreeMap<String, (Vec<usize>, Vec<u8>, safetensors::Dtype)> = BTreeMap::new();
    let mut parts: BTreeMap<String, Vec<Option<Dense>>> = BTreeMap::new();
    let le = |values: &[f32]| {
        values
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>()
    };
    for snapshot in model.collect(None, None, false) {
        let path = snapshot.full_path();
        let source = names.source(&path).ok_or_else(|| {
            Error::Invalid(format!(
                "the model's parameter {path} has no key in this naming (a PReLU slope?): \
                 export it with --names ember"
            ))
        })?;
        let data = snapshot
            .to_data()
            .map_err(|e| Error::Invalid(format!("cannot read the model's {path}: {e:?}")))?;
        let mut shape = data.shape.to_vec();
        let mut values: Vec<f32> = data.convert::<f32>().to_vec().expect("f32 after convert");
        if source.transpose {
            values = transpose(&values, shape[0], shape[1]);
            shape.swap(0, 1);
        }
        if let Some(counter) = names.counter(&source) {
            out.insert(
                counter,
                (vec![], 0i64.to_le_bytes().to_vec(), safetensors::Dtype::I64),
            );
        }
        match source.rows {
            None => {
                out.insert(source.key, (shape, le(&values), safetensors::Dtype::F32));
            }
            Some((i, n)) => {
                let slots = parts
                    .entry(source.key.clone())
                    .or_insert_with(|| vec![None; n]);
                slots[i] = Some((shape, values));
                if slots.iter().all(Option::is_some) {
                    let blocks: Vec<_> = slots.drain(..).flatten().collect();
                    let mut shape = blocks[0].0.clone();
                    shape[0] *= n;
                    let values: Vec<f32> = blocks.into_iter().flat_map(|(_, v)| v).collect();
                    out.insert(source.key, (shape, le(&values), safetensors::Dtype::F32));
                }
            }
        }
    }
    let views = out
        .iter()
        .map(|(k, (shape, bytes, dtype))| {
            safetensors::tensor::TensorView::new(*dtype, shape.clone(), bytes)
                .map(|v| (k.clone(), v))
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::Invalid(format!("cannot write safetensors: {e}")))?;
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    safetensors::serialize(views, Some(metadata))
        .map_err(|e| Error::Invalid(format!("cannot write safetensors: {e}")))
}
