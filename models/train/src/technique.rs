//! A technique's part in a training run: its registration (the names of what it adds to a
//! run) and the [`Technique`] trait the fit loop calls.
//!
//! Every technique Ember trains with is one entry of [`REGISTRY`]; what ember-train lists of
//! them (the files a run directory may hold, the effects report's packed routes) derives from
//! it, and the tests of `tests/train/technique.rs` check each entry against the technique's
//! own crate. During a run, each technique in use is one `Box<dyn Technique>`: the fit loop
//! calls its hooks in order (gradients, after the optimizer step, end of epoch), writes its
//! checkpoint state beside the model's, and writes its packed model at the end. ApproxMul and
//! SparseAct live on the backend's device and have no hooks; their part here is their setting
//! (what the manifest records and a resume or a replica must match).
//!
//! `docs/extending.md` walks through adding a technique.

use crate::error::{EmberError, Result};
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A technique's registration: its name and the names of what it adds to a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Registration {
    /// Its name: the manifest's key, and the stem of its files.
    pub name: &'static str,
    /// The `ember train` flags its setting comes from, in the order of [`Technique::settings`].
    pub flags: &'static [&'static str],
    /// Whether it writes a packed model at the end of a run: `model.<name>` ([`packed_file`]).
    pub packs: bool,
    /// Whether it checkpoints a state after every epoch: `checkpoint/<name>-<epoch>.bin`
    /// ([`crate::run::state_file`]).
    pub state: bool,
    /// The effects report's routes of its products (the packed-weight decorator's
    /// `KERNEL_ROUTE` and `HOST_ROUTE`); none for a technique without its own products.
    pub routes: &'static [&'static str],
}

/// ApproxMul: the multiplier of every contraction, on the device.
pub const APPROX_MUL: Registration = Registration {
    name: "approx-mul",
    flags: &["--multiplier", "--conv", "--matmul"],
    packs: false,
    state: false,
    routes: &[],
};

/// SparseAct: the pruning of the activations linear layers keep for backward, on the device.
pub const SPARSE_ACT: Registration = Registration {
    name: "sparse-act",
    flags: &["--sparse-act"],
    packs: false,
    state: false,
    routes: &[],
};

/// HiNM: fine-tuning under hierarchical N:M masks, packed into `model.hinm`.
pub const HINM: Registration = Registration {
    name: "hinm",
    flags: &["--hinm"],
    packs: true,
    state: false,
    routes: &["hinm kernel", "hinm host"],
};

/// BCR: block column-row pruning (ADMM or one-shot), packed into `model.bcr`.
pub const BCR: Registration = Registration {
    name: "bcr",
    flags: &["--bcr"],
    packs: true,
    state: true,
    routes: &["bcrc kernel", "bcrc host"],
};

/// Every technique ember-train knows, in the order their hooks run.
pub const REGISTRY: [Registration; 4] = [APPROX_MUL, SPARSE_ACT, HINM, BCR];

/// The file name of a technique's packed model in a run directory: `model.<name>`.
pub fn packed_file(r: &Registration) -> String {
    format!("model.{}", r.name)
}

/// The packed model file of technique `r` that `path` is or holds: `path/model.<name>` for a
/// run directory that has one, `path` itself when its extension is `<name>`.
pub fn packed_file_at(r: &Registration, path: &Path) -> Option<PathBuf> {
    if !r.packs {
        return None;
    }
    if path.is_dir() {
        let file = path.join(packed_file(r));
        return file.is_file().then_some(file);
    }
    (path.extension().is_some_and(|e| e == r.name)).then(|| path.to_path_buf())
}

/// A registered technique's packed model, read and checked: what `ember eval` loads into the
/// model's inference form.
pub enum Packed {
    /// HiNM's `model.hinm`.
    Hinm(burn_hinm::file::PackedModel),
    /// BCR's `model.bcr`.
    Bcr(burn_bcr::file::PackedModel),
}

/// The key of a packed model's [`Packed::about`] that records the model's shape.
pub const ABOUT_SHAPE: &str = "shape";

impl Packed {
    /// The packed model `path` is or holds (a run directory with `model.<name>` of a
    /// registered technique, or such a file), read, with the file's CRC-32; `None` when it is
    /// none. Every failure names the file.
    pub fn find(path: &Path) -> Result<Option<(PathBuf, Self, u32)>> {
        let Some((r, file)) = REGISTRY
            .iter()
            .find_map(|r| Some((r, packed_file_at(r, path)?)))
        else {
            return Ok(None);
        };
        let bad = |reason: String| EmberError::BadCheckpoint {
            path: file.clone(),
            reason,
        };
        let bytes = std::fs::read(&file).map_err(|e| bad(format!("cannot read it: {e}")))?;
        let read = match r.name {
            n if n == HINM.name => burn_hinm::file::PackedModel::from_bytes(&bytes)
                .map(Self::Hinm)
                .map_err(|e| e.to_string()),
            n if n == BCR.name => burn_bcr::file::PackedModel::from_bytes(&bytes)
                .map(Self::Bcr)
                .map_err(|e| e.to_string()),
            other => Err(format!("ember-train reads no packed {other} model")),
        };
        let checksum = crate::record::checksum(&bytes);
        Ok(Some((file.clone(), read.map_err(bad)?, checksum)))
    }

    /// The model it holds, by name.
    pub fn model(&self) -> &str {
        match self {
            Self::Hinm(m) => &m.model,
            Self::Bcr(m) => &m.model,
        }
    }

    /// Its provenance (level, seed, source, dataset, …).
    pub fn about(&self) -> &BTreeMap<String, String> {
        match self {
            Self::Hinm(m) => &m.about,
            Self::Bcr(m) => &m.about,
        }
    }

    /// The model's shape its [`Packed::about`] records (`shape`: a model pruned from weights
    /// of another width than its kind's own); `None` for the kind's own.
    pub fn shape(&self) -> std::result::Result<Option<ember_models::shape::Shape>, String> {
        self.about()
            .get(ABOUT_SHAPE)
            .map(|text| ember_models::shape::Shape::from_json(text))
            .transpose()
    }

    /// `model` with its parameters from this file, the packed weights as packed tensors of
    /// the technique's decorator.
    pub fn load<B: cubecl_kernels::decorator::KernelBackend, M: Module<B>>(
        &self,
        model: M,
    ) -> std::result::Result<M, String> {
        match self {
            Self::Hinm(m) => burn_hinm::module::load_packed(model, m).map_err(|e| e.to_string()),
            Self::Bcr(m) => burn_bcr::module::load_packed(model, m).map_err(|e| e.to_string()),
        }
    }
}

/// Whether `route` (an effects-report route) is a registered technique's packed product.
pub fn is_packed_route(route: &str) -> bool {
    REGISTRY
        .iter()
        .flat_map(|r| r.routes)
        .any(|p| route.starts_with(p))
}

/// 0/1 masks in Burn's layout, by a weight's full module path.
pub type Masks = BTreeMap<String, Vec<f32>>;

/// Parameters by full module path: shape and values, on the host.
pub type Params = BTreeMap<String, (Vec<usize>, Vec<f32>)>;

/// What a resumed run gives a technique back: its state file of the last completed epoch,
/// checked against the manifest's checksum.
pub struct Resumed {
    /// The file (for errors).
    pub file: PathBuf,
    /// Its bytes, as [`Technique::state`] wrote them.
    pub bytes: Vec<u8>,
}

/// A technique's part in a training run, over the training backend `B` and the model `M`.
///
/// Every hook has a default that does nothing, so a technique implements what it uses. The
/// hooks of every replica of a parallel run see the same parameters and so keep equal states.
pub trait Technique<B: AutodiffBackend, M: Module<B>>: Send {
    /// Its registration.
    fn registration(&self) -> &'static Registration;

    /// Its setting, one value per flag of [`Registration::flags`] (`off` when it is not in
    /// use): what the manifest records, a resume must ask for again, and every replica of a
    /// parallel run must share.
    fn settings(&self) -> Vec<String>;

    /// The model file (and its recorded checksum) a new run starts from instead of the fresh
    /// initialisation: the trained run a fine-tuning prunes.
    fn source(&self) -> Option<(PathBuf, Option<u32>)> {
        None
    }

    /// Starts on the model to train (restored, tagged): from its weights for a new run
    /// (`resumed` is `None`), from its checkpointed state for a resumed one. Returns the model
    /// as training starts it (masked weights masked).
    fn start(&mut self, model: M, resumed: Option<Resumed>) -> Result<M> {
        let _ = resumed;
        Ok(model)
    }

    /// Changes a step's gradients (averaged over the replicas) before the optimizer step.
    fn grads(&self, model: &M, grads: &mut GradientsParams) {
        let _ = (model, grads);
    }

    /// After the optimizer step `step` of `steps` of `epoch` (1-based): returns the model.
    fn after_step(&mut self, model: M, epoch: usize, step: usize, steps: usize) -> Result<M> {
        let _ = (epoch, step, steps);
        Ok(model)
    }

    /// Whether [`Self::end_epoch`] has work after this epoch (it then reports lines: the
    /// progress bar is closed first).
    fn ends_epoch(&self) -> bool {
        false
    }

    /// After an epoch's last step: returns the model and the lines to report.
    fn end_epoch(&mut self, model: M, epoch: usize) -> Result<(M, Vec<String>)> {
        let _ = epoch;
        Ok((model, Vec::new()))
    }

    /// The state to checkpoint after an epoch (only with [`Registration::state`]).
    fn state(&self) -> Option<Vec<u8>> {
        None
    }

    /// The packed model of the trained weights `params` (only with [`Registration::packs`]);
    /// `about` is the provenance every packed file records (seed, source, dataset), to which
    /// the technique adds its own.
    fn export(&self, params: &Params, about: BTreeMap<String, String>) -> Result<Option<Vec<u8>>> {
        let _ = (params, about);
        Ok(None)
    }

    /// A copy for another replica.
    fn boxed(&self) -> Box<dyn Technique<B, M>>;
}

/// Every masked weight of `model` multiplied by its mask (values only: parameter ids and
/// `require_grad` unchanged).
pub fn apply_masks<B: AutodiffBackend, M: Module<B>>(model: M, masks: &Masks) -> M {
    if masks.is_empty() {
        return model;
    }
    struct Mask<'a> {
        path: Vec<String>,
        masks: &'a Masks,
    }
    impl<B: AutodiffBackend> ModuleMapper<B> for Mask<'_> {
        fn enter_module(&mut self, name: &str, _: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _: &str, _: &str) {
            self.path.pop();
        }
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let (id, tensor, mapper) = param.consume();
            let tensor = match self.masks.get(&self.path.join(".")) {
                None => tensor,
                Some(mask) => {
                    let grad = tensor.is_require_grad();
                    let inner = tensor.inner();
                    let m = Tensor::from_data(
                        TensorData::new(mask.clone(), inner.shape()),
                        &inner.device(),
                    );
                    Tensor::from_inner(inner * m).set_require_grad(grad)
                }
            };
            Param::from_mapped_value(id, tensor, mapper)
        }
    }
    model.map(&mut Mask {
        path: Vec::new(),
        masks,
    })
}

/// The gradients of every masked weight multiplied by its mask (pruned weights get none).
pub fn mask_grads<B: AutodiffBackend, M: Module<B>>(
    model: &M,
    grads: &mut GradientsParams,
    masks: &Masks,
) {
    if masks.is_empty() {
        return;
    }
    struct Grads<'a> {
        path: Vec<String>,
        masks: &'a Masks,
        grads: &'a mut GradientsParams,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Grads<'_> {
        fn enter_module(&mut self, name: &str, _: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _: &str, _: &str) {
            self.path.pop();
        }
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let Some(mask) = self.masks.get(&self.path.join(".")) else {
                return;
            };
            if let Some(g) = self.grads.remove::<B::InnerBackend, D>(param.id) {
                let m = Tensor::from_data(TensorData::new(mask.clone(), g.shape()), &g.device());
                self.grads.register(param.id, g * m);
            }
        }
    }
    model.visit(&mut Grads {
        path: Vec::new(),
        masks,
        grads,
    });
}

/// ApproxMul's part: its setting (the multiplier lives on the device).
impl<B: AutodiffBackend, M: Module<B>> Technique<B, M> for burn_approx_mul::Multiplier {
    fn registration(&self) -> &'static Registration {
        &APPROX_MUL
    }
    fn settings(&self) -> Vec<String> {
        vec![
            self.name().to_string(),
            self.conv().to_string(),
            self.matmul().to_string(),
        ]
    }
    fn boxed(&self) -> Box<dyn Technique<B, M>> {
        Box::new(self.clone())
    }
}

/// SparseAct's part: its setting (the policy lives on the device).
impl<B: AutodiffBackend, M: Module<B>> Technique<B, M> for burn_sparse_act::Policy {
    fn registration(&self) -> &'static Registration {
        &SPARSE_ACT
    }
    fn settings(&self) -> Vec<String> {
        vec![self.to_string()]
    }
    fn boxed(&self) -> Box<dyn Technique<B, M>> {
        Box::new(self.clone())
    }
}

/// The settings of a run's techniques by flag, in [`REGISTRY`]'s order, `off` for every flag
/// of a registered technique the run does not use: what the manifest checks on a resume and
/// the replicas of a parallel run agree on.
pub fn settings<B: AutodiffBackend, M: Module<B>>(
    active: &[Box<dyn Technique<B, M>>],
) -> Vec<(&'static str, String)> {
    REGISTRY
        .iter()
        .flat_map(|r| {
            let values = active
                .iter()
                .find(|t| t.registration() == r)
                .map(|t| t.settings());
            r.flags.iter().enumerate().map(move |(i, &flag)| {
                let value = values.as_ref().and_then(|v| v.get(i).cloned());
                (flag, value.unwrap_or_else(|| OFF.to_string()))
            })
        })
        .collect()
}

/// The setting of a technique a run does not use.
pub const OFF: &str = "off";
