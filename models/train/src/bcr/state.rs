//! The BCR state of a run: ADMM (`Z`, `U`, `ρ`) per pruned layer, then the fixed masks, and
//! the bytes a killed run resumes from.

use super::{BcrTrain, Pruned, from_view, mask_values, view_dims, view_of};
use crate::error::{EmberError, Result};
use crate::technique::Params;
use burn::module::{ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use burn_bcr::admm::Admm;
use burn_bcr::project::{View, project};
use cubecl_kernels::decorator::file::{Format, Payload, put_f32s};
use std::collections::BTreeMap;

/// One pruned layer's state: ADMM (`Z`, `U`, `ρ`) while it runs, then the fixed mask.
#[derive(Clone, Debug)]
pub(super) struct Layer {
    pruned: Pruned,
    admm: Option<Admm>,
    /// `Z − U` in Burn's layout (the penalty's gradient is `ρ·(W − (Z − U))`).
    target: Vec<f32>,
    /// The 0/1 mask in Burn's layout once fixed.
    mask: Option<Vec<f32>>,
}

impl Layer {
    pub(crate) fn refresh_target(&mut self) {
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

pub(super) fn weight_of<'a>(params: &'a Params, p: &Pruned) -> Result<&'a Vec<f32>> {
    params
        .get(&p.weight)
        .map(|(_, v)| v)
        .ok_or_else(|| EmberError::Invalid(format!("--bcr: the model has no {}", p.weight)))
}

pub(super) fn bcr_error(err: burn_bcr::BcrError, path: &str) -> EmberError {
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

    /// The framing of the state's file ([`cubecl_kernels::decorator::file`]: magic, version, a
    /// JSON header, the arrays, a CRC-32).
    pub const FORMAT: Format = Format {
        magic: b"EMBERBST",
        version: 1,
        what: "BCR training state",
    };

    /// The state's bytes (a checkpoint file beside the model's), in [`Self::FORMAT`]: a JSON
    /// header (the layers, in plan order), then every layer's `Z` and `U` (under ADMM) or mask
    /// as little-endian f32.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut header = Vec::new();
        let mut payload: Vec<u8> = Vec::new();
        for l in &self.layers {
            let entry = match (&l.admm, &l.mask) {
                (Some(a), _) => {
                    put_f32s(&mut payload, &a.z.data);
                    put_f32s(&mut payload, &a.u);
                    serde_json::json!({"weight": l.pruned.weight, "admm": {
                        "rho": a.rho, "updates": a.updates()}})
                }
                (None, Some(m)) => {
                    put_f32s(&mut payload, m);
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
        Self::FORMAT.write(header.as_bytes(), &payload)
    }

    /// The state written by [`BcrState::to_bytes`] for `plan` under `opts` (or by an earlier
    /// Ember without the framing: a `u32` header length, the header, the arrays); the error
    /// says what does not fit.
    pub fn from_bytes(
        bytes: &[u8],
        opts: &BcrTrain,
        epochs: usize,
        plan: &[Pruned],
    ) -> std::result::Result<Self, String> {
        let (header, mut arrays) = match bytes.starts_with(Self::FORMAT.magic) {
            true => Self::FORMAT.read(bytes)?,
            false => {
                let len = bytes
                    .get(..4)
                    .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
                    .ok_or("it is shorter than its header")?;
                let header = bytes
                    .get(4..4 + len)
                    .ok_or("it is shorter than its header")?;
                (header, Payload::unframed(&bytes[4 + len..]))
            }
        };
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
                let z =
                    View::new(rows, cols, arrays.f32s(n, &p.weight)?).map_err(|e| e.to_string())?;
                let u = arrays.f32s(n, &p.weight)?;
                let rho = a["rho"].as_f64().ok_or("a layer has no ρ")?;
                let updates = a["updates"].as_u64().ok_or("a layer has no update count")?;
                layer.admm = Some(
                    Admm::restore(p.level, s, rho, z, u, updates as usize)
                        .map_err(|e| e.to_string())?,
                );
                layer.refresh_target();
            } else {
                let mask = arrays.f32s(n, &p.weight)?;
                if mask.iter().any(|&m| m != 0.0 && m != 1.0) {
                    return Err(format!("the mask of {} is not 0/1", p.weight));
                }
                layer.mask = Some(mask);
            }
            layers.push(layer);
        }
        arrays.finish()?;
        Ok(Self {
            layers,
            every: opts.admm_every.unwrap_or(1),
            per_epoch: opts.per_epoch,
            admm_epochs: opts.admm_epochs(epochs),
        })
    }
}

/// The 0/1 mask (Burn's layout) of `Π(view)` at the layer's level.
pub(super) fn mask_of(p: &Pruned, view: &View) -> Result<Vec<f32>> {
    let mask = project(view, p.level).map_err(|e| bcr_error(e, &p.weight))?;
    Ok(mask_values(&p.dims, &mask))
}
