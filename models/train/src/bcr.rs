//! BCR in training (`ember train --bcr LEVEL [--admm]`, `ember prune --bcr`): which layers are
//! pruned, the ADMM state of each (GRIM Section 5.2), hard pruning, the masks of masked
//! retraining, the state a killed run resumes from, and the packed `model.bcr` at the end.
//!
//! A run with `--admm` trains its first `epochs − retrain` epochs with the ADMM penalty
//! `ρ/2·‖W − Z + U‖²_F` on every pruned weight (its gradient `ρ·(W − Z + U)` is added to the
//! loss's before each optimizer step), updating `Z = Π(W + U)`, `U += W − Z` every
//! `--admm-every` epochs; `ρ` rises from 1e-4 to 1e-1 staged (×10 per stage, `Z` re-projected
//! and `U` reset; the stages split the ADMM updates evenly) or smooth (`--admm-schedule
//! smooth`). Then the weights are hard-pruned to `Π(W)` and the last `retrain` epochs train
//! under the fixed masks (pruned weights and their gradients zero). Without `--admm` the masks
//! are `Π(W)` of the starting weights (one-shot) and every epoch is masked retraining.

use crate::error::{EmberError, Result};
use crate::policy::{LayerPolicy, uniform};
use burn::module::{ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use burn_bcr::Level;
use burn_bcr::admm::{Admm, Schedule};
use burn_bcr::project::{View, project};
use cubecl_kernels::decorator::layout::Layout;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// File name of a packed BCR model in a run directory.
pub const PACKED_FILE: &str = "model.bcr";

/// `ember train --bcr`: the level, ADMM or one-shot, and where the weights start.
#[derive(Clone, Debug, PartialEq)]
pub struct BcrTrain {
    /// The level of every pruned layer (a policy may set others, or `off`).
    pub level: Level,
    /// ADMM with `Z`, `U` updated every this many epochs; `None`: one-shot pruning.
    pub admm_every: Option<usize>,
    /// ADMM updates per epoch (with `admm_every` 1): the extra ones fall at evenly spaced
    /// steps inside the epoch, the last at its end. A short run needs them: ADMM converges with
    /// the number of `Z`, `U` updates, and the staged `ρ` needs four stages of them.
    pub per_epoch: usize,
    /// `ρ`'s schedule under ADMM: staged (default) or smooth.
    pub smooth: bool,
    /// Masked-retraining epochs at the end (with ADMM; without it every epoch is one).
    pub retrain: usize,
    /// A trained run whose weights training starts from (`None`: a fresh initialisation).
    pub from: Option<PathBuf>,
}

impl BcrTrain {
    /// How a run manifest records it (a resume must ask for the same).
    pub fn describe(&self) -> String {
        let mut s = self.level.to_string();
        match self.admm_every {
            Some(k) => {
                let schedule = if self.smooth { "smooth" } else { "staged" };
                s += &format!(" admm every {k} ({schedule}), retrain {}", self.retrain);
                if self.per_epoch > 1 {
                    s += &format!(", {} updates an epoch", self.per_epoch);
                }
            }
            None => s += " one-shot",
        }
        if let Some(from) = &self.from {
            s += &format!(" from {}", from.display());
        }
        s
    }

    /// Checks the options against the run's epochs.
    pub fn validate(&self, epochs: usize) -> Result<()> {
        if self.admm_every == Some(0) {
            return Err(EmberError::Invalid(
                "--admm-every must be at least 1 (epochs between ADMM updates)".into(),
            ));
        }
        if self.per_epoch == 0 {
            return Err(EmberError::Invalid(
                "--admm-per-epoch must be at least 1 (ADMM updates per epoch)".into(),
            ));
        }
        if self.per_epoch > 1 && self.admm_every.is_some_and(|k| k > 1) {
            return Err(EmberError::Invalid(format!(
                "--admm-per-epoch {} with --admm-every {}: several updates an epoch need one \
                 every epoch",
                self.per_epoch,
                self.admm_every.unwrap_or(1)
            )));
        }
        if self.admm_every.is_some() && (self.retrain == 0 || self.retrain >= epochs) {
            return Err(EmberError::Invalid(format!(
                "--admm with --epochs {epochs} and --retrain-epochs {}: ADMM needs at least one \
                 epoch, and masked retraining at least one after it",
                self.retrain
            )));
        }
        Ok(())
    }

    /// Epochs of ADMM training (0 without ADMM).
    pub fn admm_epochs(&self, epochs: usize) -> usize {
        if self.admm_every.is_some() {
            epochs - self.retrain
        } else {
            0
        }
    }

    fn schedule(&self, epochs: usize) -> Option<Schedule> {
        let every = self.admm_every?;
        let updates = (self.admm_epochs(epochs) / every).max(1) * self.per_epoch;
        Some(if self.smooth {
            // three decades, 1e-4 → 1e-1
            Schedule::Smooth {
                updates_per_decade: (updates / 3).max(1),
            }
        } else {
            // four stages: 1e-4, 1e-3, 1e-2, 1e-1
            Schedule::Staged {
                updates_per_stage: (updates / 4).max(1),
            }
        })
    }
}

/// A pruned layer: its weight's full path, shape (Burn's layout) and level.
#[derive(Clone, Debug, PartialEq)]
pub struct Pruned {
    /// `layer.weight`.
    pub weight: String,
    /// The weight's shape.
    pub dims: Vec<usize>,
    /// Its level.
    pub level: Level,
}

/// The pruned layers of a model: every contraction layer (`layers`, model order) at `level`
/// except the last (the classifier), unless `policy` sets them (`bcr = "…"` / `"off"`). A layer
/// the policy names must fit its block; a layer chosen by default that the block does not fit
/// stays dense (the returned notes say which). No layer pruned is an error.
pub fn plan(
    shapes: &BTreeMap<String, Vec<usize>>,
    layers: &[String],
    policy: Option<&LayerPolicy>,
    level: Level,
) -> Result<(Vec<Pruned>, Vec<String>)> {
    let choices = match policy {
        Some(p) => p.resolve(layers)?,
        None => uniform(layers),
    };
    let last = layers.len().saturating_sub(1);
    let mut pruned = Vec::new();
    let mut notes = Vec::new();
    for (i, c) in choices.iter().enumerate() {
        let (l, named) = match c.bcr {
            Some(l) => (l, true),
            None if i == last => (None, false),
            None => (Some(level), false),
        };
        let Some(l) = l else { continue };
        let weight = format!("{}.weight", c.path);
        let dims = shapes
            .get(&weight)
            .ok_or_else(|| EmberError::Invalid(format!("--bcr: layer {} has no weight", c.path)))?;
        let (out, k) = view_dims(dims);
        if let Err(e) = l.block.fits(out, k) {
            if named {
                return Err(EmberError::Invalid(format!(
                    "--bcr {l}: layer {} ({out} outputs × {k} inputs): {e}; keep it dense with \
                     a policy (bcr = \"off\") or choose a smaller block",
                    c.path
                )));
            }
            notes.push(format!(
                "{} ({out} × {k}) stays dense: block {} does not fit it",
                c.path, l.block
            ));
            continue;
        }
        pruned.push(Pruned {
            weight,
            dims: dims.clone(),
            level: l,
        });
    }
    if pruned.is_empty() {
        return Err(EmberError::Invalid(format!(
            "--bcr {level}: no layer of this model can be pruned with it (its block fits none \
             but the classifier, which stays dense unless a policy names it)"
        )));
    }
    Ok((pruned, notes))
}

/// `(out, K)` of a weight's GEMM view (`(0, 0)` for a shape that has none).
fn view_dims(dims: &[usize]) -> (usize, usize) {
    Layout::of(dims).map_or((0, 0), |l| l.view())
}

/// The GEMM view of a weight in Burn's layout ([`burn_bcr::pack::view_of`]).
pub fn view_of(dims: &[usize], values: &[f32]) -> Result<View> {
    burn_bcr::pack::view_of(values, dims).map_err(|e| EmberError::Invalid(format!("--bcr: {e}")))
}

/// A view's values back in Burn's layout for `dims`.
fn from_view(dims: &[usize], view: &View) -> Vec<f32> {
    Layout::of(dims).map_or_else(|| view.data.clone(), |l| l.from_view(&view.data))
}

/// A mask's 0/1 values in Burn's layout for `dims`.
fn mask_values(dims: &[usize], mask: &burn_bcr::project::BcrMask) -> Vec<f32> {
    let view = View {
        rows: mask.rows,
        cols: mask.cols,
        data: mask
            .dense()
            .iter()
            .map(|&k| f32::from(u8::from(k)))
            .collect(),
    };
    from_view(dims, &view)
}

/// One pruned layer's state: ADMM (`Z`, `U`, `ρ`) while it runs, then the fixed mask.
#[derive(Clone, Debug)]
struct Layer {
    pruned: Pruned,
    admm: Option<Admm>,
    /// `Z − U` in Burn's layout (the penalty's gradient is `ρ·(W − (Z − U))`).
    target: Vec<f32>,
    /// The 0/1 mask in Burn's layout once fixed.
    mask: Option<Vec<f32>>,
}

impl Layer {
    fn refresh_target(&mut self) {
        if let Some(a) = &self.admm {
            let zu = View {
                rows: a.z.rows,
                cols: a.z.cols,
                data: a.z.data.iter().zip(&a.u).map(|(z, u)| z - u).collect(),
            };
            self.target = from_view(&self.pruned.dims, &zu);
        } else {
            self.target.clear();
        }
    }
}

/// The BCR state of a run: every pruned layer's ADMM state or mask.
#[derive(Clone, Debug)]
pub struct BcrState {
    layers: Vec<Layer>,
    /// ADMM updates every this many epochs.
    every: usize,
    /// ADMM updates per epoch.
    per_epoch: usize,
    /// The last ADMM epoch (0: none).
    admm_epochs: usize,
}

/// Parameters by full path: shape and values.
pub type Params = BTreeMap<String, (Vec<usize>, Vec<f32>)>;

fn weight_of<'a>(params: &'a Params, p: &Pruned) -> Result<&'a Vec<f32>> {
    params
        .get(&p.weight)
        .map(|(_, v)| v)
        .ok_or_else(|| EmberError::Invalid(format!("--bcr: the model has no {}", p.weight)))
}

fn bcr_error(err: burn_bcr::BcrError, path: &str) -> EmberError {
    EmberError::Invalid(format!("--bcr: {path}: {e}", e = err))
}

impl BcrState {
    /// The state at the start of a run from the model's weights `params`: ADMM's `Z = Π(W)`,
    /// `U = 0`, or (one-shot) the masks of `Π(W)`.
    pub fn start(opts: &BcrTrain, epochs: usize, plan: &[Pruned], params: &Params) -> Result<Self> {
        let schedule = opts.schedule(epochs);
        let layers = plan
            .iter()
            .map(|p| {
                let view = view_of(&p.dims, weight_of(params, p)?)?;
                let mut layer = Layer {
                    pruned: p.clone(),
                    admm: None,
                    target: Vec::new(),
                    mask: None,
                };
                match schedule {
                    Some(s) => {
                        layer.admm = Some(
                            Admm::new(&view, p.level, s).map_err(|e| bcr_error(e, &p.weight))?,
                        );
                        layer.refresh_target();
                    }
                    None => layer.mask = Some(mask_of(p, &view)?),
                }
                Ok(layer)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            layers,
            every: opts.admm_every.unwrap_or(1),
            per_epoch: opts.per_epoch,
            admm_epochs: opts.admm_epochs(epochs),
        })
    }

    /// The fixed masks (Burn's layout) by weight path: empty while ADMM runs.
    pub fn masks(&self) -> BTreeMap<String, Vec<f32>> {
        self.layers
            .iter()
            .filter_map(|l| Some((l.pruned.weight.clone(), l.mask.clone()?)))
            .collect()
    }

    /// `Z − U` of a weight under ADMM, in Burn's layout: the point the penalty pulls it to.
    pub fn target(&self, weight: &str) -> Option<&[f32]> {
        self.layers
            .iter()
            .find(|l| l.pruned.weight == weight && l.admm.is_some())
            .map(|l| l.target.as_slice())
    }

    /// Whether ADMM is still running.
    pub fn in_admm(&self) -> bool {
        self.layers.iter().any(|l| l.admm.is_some())
    }

    /// The pruned layers.
    pub fn plan(&self) -> Vec<Pruned> {
        self.layers.iter().map(|l| l.pruned.clone()).collect()
    }

    /// Adds the ADMM penalty's gradient `ρ·(W − Z + U)` to the gradient of every pruned weight
    /// still under ADMM.
    pub fn add_penalty_grads<B: AutodiffBackend, M: burn::module::Module<B>>(
        &self,
        model: &M,
        grads: &mut GradientsParams,
    ) {
        struct Penalty<'a> {
            path: Vec<String>,
            targets: BTreeMap<&'a str, (f32, &'a [f32])>,
            grads: &'a mut GradientsParams,
        }
        impl<B: AutodiffBackend> ModuleVisitor<B> for Penalty<'_> {
            fn enter_module(&mut self, name: &str, _: &str) {
                self.path.push(name.to_string());
            }
            fn exit_module(&mut self, _: &str, _: &str) {
                self.path.pop();
            }
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
                let Some(&(rho, target)) = self.targets.get(self.path.join(".").as_str()) else {
                    return;
                };
                let w = param.val().inner();
                let t = Tensor::<B::InnerBackend, D>::from_data(
                    TensorData::new(target.to_vec(), w.shape()),
                    &w.device(),
                );
                let penalty = (w - t) * rho;
                let g = match self.grads.remove::<B::InnerBackend, D>(param.id) {
                    Some(g) => g + penalty,
                    None => penalty,
                };
                self.grads.register(param.id, g);
            }
        }
        let targets = self
            .layers
            .iter()
            .filter_map(|l| {
                let a = l.admm.as_ref()?;
                Some((
                    l.pruned.weight.as_str(),
                    (a.rho as f32, l.target.as_slice()),
                ))
            })
            .collect::<BTreeMap<_, _>>();
        if targets.is_empty() {
            return;
        }
        model.visit(&mut Penalty {
            path: Vec::new(),
            targets,
            grads,
        });
    }

    /// Whether an ADMM update falls after step `step` (1-based) of the `steps` of `epoch`, inside
    /// it (the update at an epoch's end is [`BcrState::end_epoch`]'s): with `n` updates an
    /// epoch, after the steps where `⌊step·n / steps⌋` rises, the last step excepted.
    pub fn update_due(&self, epoch: usize, step: usize, steps: usize) -> bool {
        let n = self.per_epoch;
        n > 1
            && self.in_admm()
            && epoch <= self.admm_epochs
            && step < steps
            && step * n / steps > (step - 1) * n / steps
    }

    /// An ADMM update inside an epoch (see [`BcrState::update_due`]) with the model's weights
    /// `params`: `Z = Π(W + U)`, `U += W − Z`, `ρ` on its schedule.
    pub fn step_update(&mut self, params: &Params) -> Result<()> {
        for layer in &mut self.layers {
            let Some(admm) = layer.admm.as_mut() else {
                continue;
            };
            let view = view_of(&layer.pruned.dims, weight_of(params, &layer.pruned)?)?;
            admm.update(&view)
                .map_err(|e| bcr_error(e, &layer.pruned.weight))?;
            layer.refresh_target();
        }
        Ok(())
    }

    /// After `epoch` with the model's weights `params`: an ADMM update when one is due, hard
    /// pruning after the last ADMM epoch. Returns a line per layer saying what happened
    /// (`‖W − Z‖`, `ρ`), and whether masks were fixed now (the caller applies them).
    pub fn end_epoch(&mut self, epoch: usize, params: &Params) -> Result<(Vec<String>, bool)> {
        let mut lines = Vec::new();
        if !self.in_admm() {
            return Ok((lines, false));
        }
        let update = epoch.is_multiple_of(self.every) && epoch < self.admm_epochs;
        let hard = epoch >= self.admm_epochs;
        for layer in &mut self.layers {
            let Some(admm) = layer.admm.as_mut() else {
                continue;
            };
            let view = view_of(&layer.pruned.dims, weight_of(params, &layer.pruned)?)?;
            let err = |e| bcr_error(e, &layer.pruned.weight);
            let distance = admm.distance(&view).map_err(err)?;
            let norm = view.energy().sqrt().max(f64::MIN_POSITIVE);
            if hard {
                let mask = admm.hard_mask(&view).map_err(err)?;
                let kept = mask.apply(&view);
                let lost = (view.energy() - kept.energy()).max(0.0).sqrt();
                lines.push(format!(
                    "{}: hard-pruned to {} ({} of {} weights kept), ‖W − Π(W)‖/‖W‖ = {:.4}",
                    layer.pruned.weight,
                    layer.pruned.level,
                    mask.nnz(),
                    view.data.len(),
                    lost / norm
                ));
                layer.mask = Some(mask_values(&layer.pruned.dims, &mask));
                layer.admm = None;
            } else if update {
                admm.update(&view).map_err(err)?;
                lines.push(format!(
                    "{}: ADMM update {}, ‖W − Z‖/‖W‖ = {:.4} before it, ρ now {:.0e}",
                    layer.pruned.weight,
                    admm.updates(),
                    distance / norm,
                    admm.rho
                ));
            }
            layer.refresh_target();
        }
        Ok((lines, hard))
    }

    /// `Σ‖W − Z‖² / Σ‖W‖²` over the layers under ADMM, square-rooted (`None` when none is).
    pub fn relative_distance(&self, params: &Params) -> Result<Option<f64>> {
        let (mut d, mut n) = (0.0, 0.0);
        for layer in &self.layers {
            let Some(admm) = &layer.admm else { continue };
            let view = view_of(&layer.pruned.dims, weight_of(params, &layer.pruned)?)?;
            d += admm
                .distance(&view)
                .map_err(|e| bcr_error(e, &layer.pruned.weight))?
                .powi(2);
            n += view.energy();
        }
        Ok((n > 0.0).then(|| (d / n).sqrt()))
    }

    /// The state's bytes (a checkpoint file beside the model's): a JSON header, then every
    /// layer's `Z` and `U` (under ADMM) or mask as little-endian f32.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut header = Vec::new();
        let mut payload: Vec<u8> = Vec::new();
        let mut put = |values: &[f32]| {
            for v in values {
                payload.extend_from_slice(&v.to_le_bytes());
            }
        };
        for l in &self.layers {
            let entry = match (&l.admm, &l.mask) {
                (Some(a), _) => {
                    put(&a.z.data);
                    put(&a.u);
                    serde_json::json!({"weight": l.pruned.weight, "admm": {
                        "rho": a.rho, "updates": a.updates()}})
                }
                (None, Some(m)) => {
                    put(m);
                    serde_json::json!({"weight": l.pruned.weight, "mask": true})
                }
                (None, None) => unreachable!("a layer is under ADMM or masked"),
            };
            header.push(entry);
        }
        let header = serde_json::json!({
            "every": self.every,
            "per_epoch": self.per_epoch,
            "admm_epochs": self.admm_epochs,
            "layers": header,
        })
        .to_string();
        let mut bytes = (header.len() as u32).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend(payload);
        bytes
    }

    /// The state written by [`BcrState::to_bytes`] for `plan` under `opts`; the error says what
    /// does not fit.
    pub fn from_bytes(
        bytes: &[u8],
        opts: &BcrTrain,
        epochs: usize,
        plan: &[Pruned],
    ) -> std::result::Result<Self, String> {
        let len = bytes
            .get(..4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
            .ok_or("it is shorter than its header")?;
        let header = bytes
            .get(4..4 + len)
            .ok_or("it is shorter than its header")?;
        let header: serde_json::Value =
            serde_json::from_slice(header).map_err(|e| format!("its header is not JSON: {e}"))?;
        let entries = header["layers"]
            .as_array()
            .ok_or("its header lists no layers")?;
        if entries.len() != plan.len() {
            return Err(format!(
                "it has {} pruned layers, this run {}",
                entries.len(),
                plan.len()
            ));
        }
        let mut at = 4 + len;
        let mut take = |n: usize| -> std::result::Result<Vec<f32>, String> {
            let end = at + 4 * n;
            let raw = bytes.get(at..end).ok_or("it is truncated")?;
            at = end;
            Ok(raw
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect())
        };
        let schedule = opts.schedule(epochs);
        let mut layers = Vec::new();
        for (e, p) in entries.iter().zip(plan) {
            if e["weight"].as_str() != Some(p.weight.as_str()) {
                return Err(format!(
                    "it holds {}, this run prunes {}",
                    e["weight"], p.weight
                ));
            }
            let n: usize = p.dims.iter().product();
            let mut layer = Layer {
                pruned: p.clone(),
                admm: None,
                target: Vec::new(),
                mask: None,
            };
            if let Some(a) = e.get("admm") {
                let s = schedule.ok_or("it is ADMM state, this run is one-shot")?;
                let (rows, cols) = view_dims(&p.dims);
                let z = View::new(rows, cols, take(n)?).map_err(|e| e.to_string())?;
                let u = take(n)?;
                let rho = a["rho"].as_f64().ok_or("a layer has no ρ")?;
                let updates = a["updates"].as_u64().ok_or("a layer has no update count")?;
                layer.admm = Some(
                    Admm::restore(p.level, s, rho, z, u, updates as usize)
                        .map_err(|e| e.to_string())?,
                );
                layer.refresh_target();
            } else {
                let mask = take(n)?;
                if mask.iter().any(|&m| m != 0.0 && m != 1.0) {
                    return Err(format!("the mask of {} is not 0/1", p.weight));
                }
                layer.mask = Some(mask);
            }
            layers.push(layer);
        }
        if at != bytes.len() {
            return Err(format!(
                "it has {} bytes after its arrays",
                bytes.len() - at
            ));
        }
        Ok(Self {
            layers,
            every: opts.admm_every.unwrap_or(1),
            per_epoch: opts.per_epoch,
            admm_epochs: opts.admm_epochs(epochs),
        })
    }
}

/// The 0/1 mask (Burn's layout) of `Π(view)` at the layer's level.
fn mask_of(p: &Pruned, view: &View) -> Result<Vec<f32>> {
    let mask = project(view, p.level).map_err(|e| bcr_error(e, &p.weight))?;
    Ok(mask_values(&p.dims, &mask))
}

/// The packed model of parameters `params` (by full path) after a BCR run: every pruned weight
/// in BCRC under its mask, every other parameter dense.
pub fn packed_model(
    kind: ember_models::classifier::ModelKind,
    params: &Params,
    state: &BcrState,
    about: BTreeMap<String, String>,
) -> Result<burn_bcr::file::PackedModel> {
    use burn_bcr::file::Stored;
    let masks = state.masks();
    let mut out = BTreeMap::new();
    for (path, (dims, values)) in params {
        let stored = match masks.get(path) {
            None => Stored::Dense(values.clone()),
            Some(mask) => {
                let view = view_of(dims, values)?;
                let keep: Vec<bool> = view_of(dims, mask)?
                    .data
                    .iter()
                    .map(|&m| m != 0.0)
                    .collect();
                let bcrc =
                    cubecl_kernels::bcrc::Bcrc::from_dense(view.rows, view.cols, &view.data, &keep)
                        .map_err(|e| EmberError::Invalid(format!("--bcr: {path}: {e}")))?;
                Stored::Packed(bcrc)
            }
        };
        out.insert(path.clone(), (dims.clone(), stored));
    }
    Ok(burn_bcr::file::PackedModel {
        model: kind.to_string(),
        about,
        params: out,
    })
}

/// `ember tune-bcr`: GRIM's Listing 1 per contraction layer of a model.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// The model whose layers are tuned.
    pub model: ember_models::classifier::ModelKind,
    /// The dataset its shapes are for.
    pub dataset: ember_models::data::DatasetKind,
    /// The pruning rate of the synthesized layers.
    pub rate: f64,
    /// Stop where the next block's speed-up falls below this ratio.
    pub threshold: f64,
    /// Rows of the activation matrix each timed product multiplies (`M`).
    pub rows: usize,
    /// Backend the products are timed on.
    pub backend: crate::backend::BackendKind,
    /// Candidate blocks, in the order Listing 1 tries them.
    pub sizes: Vec<burn_bcr::Block>,
    /// Timed calls per candidate (the best is kept).
    pub repeats: usize,
}

/// One tuned layer: its GEMM view and Listing 1's trials.
#[derive(Clone, Debug)]
pub struct TunedLayer {
    /// Layer path.
    pub path: String,
    /// `(out, K)` of its GEMM view.
    pub view: (usize, usize),
    /// The tuner's result (`Err`: why no block was chosen).
    pub tuned: std::result::Result<burn_bcr::tune::Tuned, String>,
}

/// The per-layer table of a tuning, Markdown.
pub fn tune_table(opts: &TuneOptions, layers: &[TunedLayer]) -> String {
    let mut s = format!(
        "{} at {}× on {} (M = {} rows, threshold {}, best of {} calls per candidate)\n\n\
         | layer | out × K | block | latency per candidate, µs (the last failed the threshold \
         unless all passed) |\n|---|---|---|---|\n",
        opts.model, opts.rate, opts.backend, opts.rows, opts.threshold, opts.repeats
    );
    for l in layers {
        let (block, trials) = match &l.tuned {
            Ok(t) => (
                t.block.to_string(),
                t.trials
                    .iter()
                    .map(|tr| format!("{}: {:.1}", tr.block, tr.seconds * 1e6))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            Err(e) => ("—".to_string(), e.clone()),
        };
        s += &format!(
            "| {} | {} × {} | {block} | {trials} |\n",
            l.path, l.view.0, l.view.1
        );
    }
    s
}

/// Runs Listing 1 on every contraction layer of the model, timing the BCRC product of each
/// synthesized layer on the chosen backend (through the `Bcr` decorator's `linear`: the kernel
/// on a CubeCL backend, the host product on ndarray).
pub fn tune(opts: TuneOptions) -> Result<Vec<TunedLayer>> {
    if !(opts.rate.is_finite() && opts.rate > 1.0) {
        return Err(EmberError::Invalid(format!(
            "--rate {}: a pruning rate is a number above 1 (10 for 10×)",
            opts.rate
        )));
    }
    if opts.rows == 0 || opts.repeats == 0 || opts.sizes.is_empty() {
        return Err(EmberError::Invalid(
            "--rows, --repeats and the block list must be at least 1".into(),
        ));
    }
    let spec = opts.dataset.spec();
    opts.model
        .accepts(spec)
        .map_err(|why| EmberError::Invalid(format!("--dataset {}: {why}", opts.dataset)))?;
    let shapes = crate::policy::module_params(opts.model, spec)?;
    let mut layers = Vec::new();
    for m in shapes {
        for (name, dims) in &m.params {
            if name == "weight" && dims.len() >= 2 {
                let path = m.path.clone();
                layers.push((path, view_dims(dims)));
            }
        }
    }
    opts.backend.dispatch(
        burn_approx_mul::Multiplier::native(),
        Default::default(),
        TuneJob {
            opts: opts.clone(),
            layers,
        },
    )
}

struct TuneJob {
    opts: TuneOptions,
    layers: Vec<(String, (usize, usize))>,
}

impl crate::backend::BackendJob for TuneJob {
    type Output = Vec<TunedLayer>;
    fn run<B: crate::backend::TrainBackend>(self, device: B::Device) -> Result<Vec<TunedLayer>> {
        use burn::tensor::{Tensor, TensorPrimitive};
        use cubecl_kernels::decorator::{KernelBackend, LayerSettings};
        type I<B> = <B as AutodiffBackend>::InnerBackend;
        let device: burn::tensor::Device<I<B>> = device;
        let o = &self.opts;
        let bar = indicatif::ProgressBar::new(self.layers.len() as u64).with_style(
            indicatif::ProgressStyle::with_template("tuning {bar:30} {pos}/{len} layers {msg}")
                .expect("a valid template"),
        );
        let mut out = Vec::new();
        for (path, (rows_out, k)) in self.layers {
            bar.set_message(path.clone());
            let x = Tensor::<I<B>, 2>::from_data(
                TensorData::new(
                    (0..o.rows * k)
                        .map(|i| ((i * 37 % 97) as f32 - 48.0) / 48.0)
                        .collect::<Vec<f32>>(),
                    [o.rows, k],
                ),
                &device,
            );
            let tuned = burn_bcr::tune::find_opt_blk(
                rows_out,
                k,
                o.rate,
                &o.sizes,
                o.threshold,
                |view, mask| {
                    let bcrc = burn_bcr::pack::pack(view, mask).expect("a projected layer packs");
                    let dense = Tensor::<I<B>, 2>::from_data(
                        TensorData::new(view.to_linear(), [k, rows_out]),
                        &device,
                    );
                    let settings = LayerSettings::new(&path)
                        .with(burn_bcr::backend::BcrLayer(std::sync::Arc::new(bcrc)));
                    let packed = Tensor::<I<B>, 2>::from_primitive(TensorPrimitive::Float(
                        <I<B> as KernelBackend>::float_for_layer(
                            dense.into_primitive().tensor(),
                            &settings,
                        ),
                    ));
                    let run = || {
                        let y = burn::tensor::module::linear(x.clone(), packed.clone(), None);
                        let _ = <I<B> as burn::tensor::backend::Backend>::sync(&device);
                        y
                    };
                    drop(run()); // warm-up: uploads, kernel compilation
                    (0..o.repeats)
                        .map(|_| {
                            let t = std::time::Instant::now();
                            std::hint::black_box(run());
                            t.elapsed().as_secs_f64()
                        })
                        .fold(f64::INFINITY, f64::min)
                },
            )
            .map_err(|e| e.to_string());
            out.push(TunedLayer {
                path,
                view: (rows_out, k),
                tuned,
            });
            bar.inc(1);
        }
        bar.finish_and_clear();
        Ok(out)
    }
}

/// Whether `path` is (or holds) a packed BCR model: where `ember eval` takes the packed route.
pub fn packed_file(path: &std::path::Path) -> Option<PathBuf> {
    if path.is_dir() {
        let file = path.join(PACKED_FILE);
        return file.is_file().then_some(file);
    }
    (path.extension().is_some_and(|e| e == "bcr")).then(|| path.to_path_buf())
}

/// Reads a packed BCR model file; every failure names the file.
pub fn read_packed(file: &std::path::Path) -> Result<burn_bcr::file::PackedModel> {
    let bad = |reason: String| EmberError::BadCheckpoint {
        path: file.to_path_buf(),
        reason,
    };
    let bytes = std::fs::read(file).map_err(|e| bad(format!("cannot read it: {e}")))?;
    burn_bcr::file::PackedModel::from_bytes(&bytes).map_err(|e| bad(e.to_string()))
}
