//! A run's optimizer with its state ([`Optim`]), built from its
//! [`OptimizerSettings`](crate::optimizer::OptimizerSettings).

use crate::backend::TrainBackend;
use crate::error::Result;
use crate::fused_optim::{FusedAdam, FusedSgd};
use crate::optimizer::{OptimizerKind, OptimizerSettings};
use crate::record;
use burn::module::AutodiffModule;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::{GradientsParams, Optimizer};
use std::path::Path;

/// A run's optimizer, with its state (Adam's moments, SGD's velocities): Burn's Adam and SGD,
/// one fused kernel per parameter ([`crate::fused_optim`]).
pub(crate) enum Optim<B: TrainBackend, M: AutodiffModule<B>> {
    Adam(OptimizerAdaptor<FusedAdam, M, B>),
    Sgd(OptimizerAdaptor<FusedSgd, M, B>),
}

/// An [`Optim`]'s state, which another replica's optimizer starts from.
pub(crate) enum OptimRecord<B: TrainBackend, M: AutodiffModule<B>> {
    Adam(<OptimizerAdaptor<FusedAdam, M, B> as Optimizer<M, B>>::Record),
    Sgd(<OptimizerAdaptor<FusedSgd, M, B> as Optimizer<M, B>>::Record),
}

/// The L2 penalty of `s`, `None` for none.
fn decay(s: &OptimizerSettings) -> Option<f32> {
    (s.weight_decay > 0.0).then_some(s.weight_decay as f32)
}

/// Adam at Burn's defaults (β = 0.9, 0.999; ε = 1e-5).
fn adam(s: &OptimizerSettings) -> FusedAdam {
    FusedAdam::new(0.9, 0.999, 1e-5, decay(s))
}

/// SGD with heavy-ball momentum, no dampening (PyTorch's form).
fn sgd(s: &OptimizerSettings) -> FusedSgd {
    FusedSgd::new((s.momentum > 0.0).then_some((s.momentum, 0.0)), decay(s))
}

impl<B: TrainBackend, M: AutodiffModule<B>> Optim<B, M> {
    /// A fresh optimizer.
    pub(crate) fn new(s: &OptimizerSettings) -> Self {
        match s.kind {
            OptimizerKind::Adam => Self::Adam(adam(s).init()),
            OptimizerKind::Sgd => Self::Sgd(sgd(s).init()),
        }
    }

    /// An optimizer of settings `s` holding `record`'s state (`record` names its kind).
    pub(crate) fn from_record(s: &OptimizerSettings, record: OptimRecord<B, M>) -> Self {
        match record {
            OptimRecord::Adam(r) => Self::Adam(adam(s).init().load_record(r)),
            OptimRecord::Sgd(r) => Self::Sgd(sgd(s).init().load_record(r)),
        }
    }

    /// One step at rate `lr`.
    pub(crate) fn step(&mut self, lr: f64, model: M, grads: GradientsParams) -> M {
        match self {
            Self::Adam(o) => o.step(lr, model, grads),
            Self::Sgd(o) => o.step(lr, model, grads),
        }
    }

    /// The state, for another replica.
    pub(crate) fn to_record(&self) -> OptimRecord<B, M> {
        match self {
            Self::Adam(o) => OptimRecord::Adam(o.to_record()),
            Self::Sgd(o) => OptimRecord::Sgd(o.to_record()),
        }
    }

    /// The state as a checkpoint file's bytes.
    pub(crate) fn bytes(&self) -> Result<Vec<u8>> {
        match self {
            Self::Adam(o) => record::bytes::<B, _>(o.to_record()),
            Self::Sgd(o) => record::bytes::<B, _>(o.to_record()),
        }
    }

    /// This optimizer with the state of checkpoint `file` (of its own kind; `expected`: the
    /// CRC-32 its run recorded). The error is the reason, in words.
    pub(crate) fn load(
        self,
        file: &Path,
        expected: Option<u32>,
        device: &B::Device,
    ) -> std::result::Result<Self, String> {
        Ok(match self {
            Self::Adam(o) => {
                Self::Adam(o.load_record(record::load::<B, _>(file, expected, device)?))
            }
            Self::Sgd(o) => Self::Sgd(o.load_record(record::load::<B, _>(file, expected, device)?)),
        })
    }
}
