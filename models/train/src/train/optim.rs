//! A run's optimizer with its state ([`Optim`]), built from its
//! [`OptimizerSettings`](crate::optimizer::OptimizerSettings).

use crate::backend::TrainBackend;
use crate::error::Result;
use crate::optimizer::{OptimizerKind, OptimizerSettings};
use crate::record;
use burn::module::AutodiffModule;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{Adam, AdamConfig, GradientsParams, Optimizer, Sgd, SgdConfig};
use std::path::Path;

/// A run's optimizer, with its state (Adam's moments, SGD's velocities).
pub(crate) enum Optim<B: TrainBackend, M: AutodiffModule<B>> {
    Adam(OptimizerAdaptor<Adam, M, B>),
    Sgd(OptimizerAdaptor<Sgd<B::InnerBackend>, M, B>),
}

/// An [`Optim`]'s state, which another replica's optimizer starts from.
pub(crate) enum OptimRecord<B: TrainBackend, M: AutodiffModule<B>> {
    Adam(<OptimizerAdaptor<Adam, M, B> as Optimizer<M, B>>::Record),
    Sgd(<OptimizerAdaptor<Sgd<B::InnerBackend>, M, B> as Optimizer<M, B>>::Record),
}

fn adam(s: &OptimizerSettings) -> AdamConfig {
    AdamConfig::new().with_weight_decay(
        (s.weight_decay > 0.0).then(|| WeightDecayConfig::new(s.weight_decay as f32)),
    )
}

fn sgd(s: &OptimizerSettings) -> SgdConfig {
    SgdConfig::new()
        .with_weight_decay(
            (s.weight_decay > 0.0).then(|| WeightDecayConfig::new(s.weight_decay as f32)),
        )
        .with_momentum((s.momentum > 0.0).then(|| {
            MomentumConfig::new()
                .with_momentum(s.momentum)
                .with_dampening(0.0)
        }))
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
