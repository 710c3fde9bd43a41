//! The replicas after the first of a process: they train their shards in step with the
//! others and write nothing.

use super::TrainOptions;
use super::fit::{Shard, Stop, end_epoch, train_epoch};
use super::optim::{Optim, OptimRecord};
use crate::backend::TrainBackend;
use crate::error::Result;
use crate::run::Manifest;
use crate::scale::{self, Replica, Scale};
use crate::technique::Technique;
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::InMemDataset;
use ember_models::classifier::TrainableClassifier;
use ember_models::data::Batch;
use std::sync::Arc;

/// What every replica of a parallel run must share: the settings that decide what it computes
/// (not where it writes or reads from: the techniques' settings by flag, the rest) and the
/// epoch it starts at, by name.
pub(crate) fn shared_settings(
    opts: &TrainOptions,
    manifest: &Manifest,
    techniques: &[(&'static str, String)],
    train: usize,
    test: usize,
) -> Vec<(&'static str, String)> {
    let mut settings = techniques.to_vec();
    settings.extend([
        ("--model", opts.model.to_string()),
        ("--act", opts.act.to_string()),
        ("--backend", opts.backend.to_string()),
        ("--policy", format!("{:?}", manifest.policy)),
        ("--epochs", opts.epochs.to_string()),
        ("--batch-size", opts.batch_size.to_string()),
        ("--lr", opts.lr.to_string()),
        ("the optimizer", opts.optimizer.to_string()),
        ("--seed", opts.seed.to_string()),
        ("--dataset", opts.data.kind().to_string()),
        ("training/test sizes", format!("{train}/{test}")),
        ("--on-nan", opts.on_nan.to_string()),
        ("replica count", opts.scale.replicas().to_string()),
        ("--verify-replicas", opts.scale.verify.to_string()),
        (
            "first epoch (--resume)",
            (manifest.completed_epochs + 1).to_string(),
        ),
    ]);
    settings
}

/// Joins a replica to the others (every replica of every process calls it, in the same order)
/// and checks that they all train the same run from the same weights.
pub(crate) fn join<B: TrainBackend, M: TrainableClassifier<B>>(
    replica: &Replica,
    scale: &Scale,
    settings: &[(&'static str, String)],
    model: &M,
    device: &B::Device,
) -> Result<()> {
    if !replica.is_parallel() {
        return Ok(());
    }
    replica.register::<B::InnerBackend>(scale, device)?;
    replica.agree_settings::<B::InnerBackend>(settings, device)?;
    replica.agree::<B::InnerBackend>(scale::param_digest(model), device, |r| {
        format!("replica {r} starts from other weights than replica 0")
    })
}

/// A replica after the first of its process: it trains its shards in step with the others and
/// writes nothing (the first replica writes the run directory and evaluates).
pub(crate) struct Follower<B: TrainBackend, M: TrainableClassifier<B>, I, T> {
    pub(crate) opts: TrainOptions,
    pub(crate) replica: Replica,
    pub(crate) settings: Vec<(&'static str, String)>,
    pub(crate) device: B::Device,
    pub(crate) model: M,
    pub(crate) optim: OptimRecord<B, M>,
    pub(crate) techniques: Vec<Box<dyn Technique<B, M>>>,
    pub(crate) first: usize,
    pub(crate) train: Arc<InMemDataset<I>>,
    pub(crate) batcher: Arc<dyn Fn(usize) -> T + Send + Sync>,
}

impl<B: TrainBackend, M: TrainableClassifier<B>, I, T> Follower<B, M, I, T>
where
    I: Clone + Send + Sync + 'static,
    T: Batcher<B, I, Batch<B>> + super::data::Fallible,
{
    pub(crate) fn run(self) -> Result<()> {
        let Self {
            opts,
            replica,
            settings,
            device,
            mut model,
            optim,
            mut techniques,
            first,
            train,
            batcher,
        } = self;
        join::<B, M>(&replica, &opts.scale, &settings, &model, &device)?;
        let mut optim = Optim::from_record(&opts.optimizer, optim);
        for epoch in first..=opts.epochs {
            let batcher = batcher(epoch);
            let shard = Shard {
                model,
                optim: &mut optim,
                train: &train,
                batcher: &batcher,
            };
            match train_epoch::<B, M, I, T>(
                &opts,
                &replica,
                epoch,
                &device,
                shard,
                &mut techniques,
                None,
            ) {
                Ok((next, _, _)) => model = next,
                Err(Stop::Failed(e)) => return Err(e),
                // the first replica reports the stop
                Err(_) => break,
            }
            model = end_epoch(model, &mut techniques, epoch)?.0;
            replica.end_epoch()?;
        }
        replica.finish::<B::InnerBackend>();
        Ok(())
    }
}
