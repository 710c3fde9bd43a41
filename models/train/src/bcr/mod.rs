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

mod state;
mod technique;
mod tune;

pub use crate::technique::Params;
pub use state::BcrState;
pub use technique::BcrRun;
pub use tune::{TuneOptions, TunedLayer, tune, tune_table, untuned};

use crate::error::{EmberError, Result};
use crate::policy::{LayerPolicy, uniform};
use burn_bcr::Level;
use burn_bcr::admm::Schedule;
use burn_bcr::project::View;
use cubecl_kernels::decorator::layout::Layout;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// File name of a packed BCR model in a run directory.
pub const PACKED_FILE: &str = "model.bcr";
const _: () = assert!(crate::technique::BCR.packs);

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
        // a rate above the layer's size keeps nothing: a model of zeros, not a pruned one
        if l.budget(out * k) == 0 {
            return Err(EmberError::Invalid(format!(
                "--bcr {l}: layer {} ({out} outputs × {k} inputs, {} weights) would keep no \
                 weight at {}×: choose a rate below {}, or keep the layer dense with a policy \
                 (bcr = \"off\")",
                c.path,
                out * k,
                l.rate,
                out * k
            )));
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
