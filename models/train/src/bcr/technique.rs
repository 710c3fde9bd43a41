//! BCR's part in a training run ([`BcrRun`]): the ADMM penalty's gradient and updates, hard
//! pruning, the masks of masked retraining, the state checkpointed after every epoch, and the
//! packed `model.bcr` at the end.

use super::{BcrState, BcrTrain, Pruned, packed_model};
use crate::error::{EmberError, Result};
use crate::technique::{self, Masks, Params, Registration, Resumed, Technique};
use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use cubecl_kernels::decorator::module::params;
use ember_models::classifier::ModelKind;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `ember train --bcr` in a run: the pruned layers' plan, and their state once started.
#[derive(Clone, Debug)]
pub struct BcrRun {
    /// What was asked for.
    pub train: BcrTrain,
    /// The model trained.
    pub kind: ModelKind,
    /// The run's number of epochs (ADMM's schedule spans them).
    pub epochs: usize,
    /// The pruned layers and their levels.
    pub plan: Vec<Pruned>,
    /// The model file (and its recorded checksum) of `--from`.
    pub source: Option<(PathBuf, Option<u32>)>,
    state: Option<BcrState>,
    masks: Masks,
}

impl BcrRun {
    /// BCR pruning of `kind` over `epochs` epochs on `plan`, starting from `source` (or the
    /// fresh initialisation).
    pub fn new(
        train: BcrTrain,
        kind: ModelKind,
        epochs: usize,
        plan: Vec<Pruned>,
        source: Option<(PathBuf, Option<u32>)>,
    ) -> Self {
        Self {
            train,
            kind,
            epochs,
            plan,
            source,
            state: None,
            masks: Masks::new(),
        }
    }
}

impl<B: AutodiffBackend, M: Module<B>> Technique<B, M> for BcrRun {
    fn registration(&self) -> &'static Registration {
        &technique::BCR
    }
    fn settings(&self) -> Vec<String> {
        vec![self.train.describe()]
    }
    fn source(&self) -> Option<(PathBuf, Option<u32>)> {
        self.source.clone()
    }
    /// ADMM's `Z = Π(W)` (or the one-shot masks) from the model's weights for a new run, the
    /// checkpointed state for a resumed one.
    fn start(&mut self, model: M, resumed: Option<Resumed>) -> Result<M> {
        let state = match resumed {
            None => BcrState::start(&self.train, self.epochs, &self.plan, &params(&model))?,
            Some(Resumed { file, bytes }) => {
                BcrState::from_bytes(&bytes, &self.train, self.epochs, &self.plan)
                    .map_err(|reason| EmberError::BadCheckpoint { path: file, reason })?
            }
        };
        self.masks = state.masks();
        self.state = Some(state);
        Ok(technique::apply_masks(model, &self.masks))
    }
    fn grads(&self, model: &M, grads: &mut GradientsParams) {
        if let Some(state) = &self.state {
            state.add_penalty_grads(model, grads);
        }
        technique::mask_grads(model, grads, &self.masks);
    }
    fn after_step(&mut self, model: M, epoch: usize, step: usize, steps: usize) -> Result<M> {
        let model = technique::apply_masks(model, &self.masks);
        if let Some(state) = self
            .state
            .as_mut()
            .filter(|s| s.update_due(epoch, step, steps))
        {
            state.step_update(&params(&model))?;
        }
        Ok(model)
    }
    fn ends_epoch(&self) -> bool {
        self.state.as_ref().is_some_and(BcrState::in_admm)
    }
    /// During ADMM: `Z` and `U` updated, or hard pruning with its masks applied.
    fn end_epoch(&mut self, model: M, epoch: usize) -> Result<(M, Vec<String>)> {
        let Some(state) = self.state.as_mut().filter(|s| s.in_admm()) else {
            return Ok((model, Vec::new()));
        };
        let (lines, hard) = state.end_epoch(epoch, &params(&model))?;
        if !hard {
            return Ok((model, lines));
        }
        self.masks = state.masks();
        Ok((technique::apply_masks(model, &self.masks), lines))
    }
    fn state(&self) -> Option<Vec<u8>> {
        self.state.as_ref().map(BcrState::to_bytes)
    }
    fn export(
        &self,
        params: &Params,
        mut about: BTreeMap<String, String>,
    ) -> Result<Option<Vec<u8>>> {
        let Some(state) = &self.state else {
            return Ok(None);
        };
        about.insert("level".into(), self.train.describe());
        Ok(Some(
            packed_model(self.kind, params, state, about)?.to_bytes(),
        ))
    }
    fn boxed(&self) -> Box<dyn Technique<B, M>> {
        Box::new(self.clone())
    }
}
