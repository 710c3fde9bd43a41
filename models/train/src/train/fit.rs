//! The fit loop: the epochs after the manifest's completed ones, each a pass over the
//! replica's shard with the pruning hooks, then an evaluation, a checkpoint and the manifest.

use super::data::{Fallible, epoch_order};
use super::eval::evaluate_items;
use super::manifest::report_effects;
use super::optim::Optim;
use super::{Batchers, EvalReport, OnNan, TrainOptions};
use crate::backend::TrainBackend;
use crate::effects::{EnergyTable, report as effects_report};
use crate::error::{EmberError, Result};
use crate::policy::LayerChoice;
use crate::progress::{Progress, Running};
use crate::record;
use crate::report;
use crate::run::{self, Manifest};
use crate::scale::{self, Replica};
use crate::technique::{self, Technique};
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::{Dataset, InMemDataset};
use burn::prelude::*;
use burn::train::ClassificationOutput;
use cubecl_kernels::decorator::effects;
use cubecl_kernels::workers;
use ember_models::classifier::TrainableClassifier;
use ember_models::data::Batch;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What [`fit`] trains, and on what.
pub(crate) struct Fit<'a, B: TrainBackend, M: TrainableClassifier<B>, I, T, V> {
    pub(crate) model: M,
    pub(crate) optim: Optim<B, M>,
    pub(crate) train: &'a InMemDataset<I>,
    pub(crate) test: &'a InMemDataset<I>,
    pub(crate) batchers: &'a Batchers<T, V>,
    /// When this invocation started (what `--time-limit` counts from).
    pub(crate) started: std::time::Instant,
}

/// The epochs after the manifest's completed ones: after each, the checkpoint, the manifest,
/// `metrics.csv` and `curves.png` are written (atomically), so a killed run resumes from it.
/// At the end, `model.mpk` and the test figures. Returns the final test evaluation.
pub(crate) fn fit<B, M, I, T, V>(
    opts: &TrainOptions,
    manifest: &mut Manifest,
    device: &B::Device,
    replica: &Replica,
    fit: Fit<'_, B, M, I, T, V>,
    layers: &Layers<'_>,
    techniques: &mut [Box<dyn Technique<B, M>>],
) -> Result<EvalReport>
where
    B: TrainBackend,
    M: TrainableClassifier<B>,
    I: Clone + Send + Sync + 'static,
    T: Batcher<B, I, Batch<B>> + Fallible,
    V: Batcher<B::InnerBackend, I, Batch<B::InnerBackend>> + Fallible,
{
    let Fit {
        mut model,
        mut optim,
        train,
        test,
        batchers,
        started,
    } = fit;
    let out = &opts.out;
    let first = manifest.completed_epochs + 1;
    let replicas = match opts.scale.replicas() {
        1 => String::new(),
        n => format!(" ({n} replicas, {} items a step)", n * opts.batch_size),
    };
    eprintln!(
        "training {} on {}{replicas} with multiplier {}, sparse-act {} ({} train / {} test {} from {}) for epochs {first}..={}, into {}",
        opts.model,
        B::name(device),
        opts.multiplier,
        opts.sparse_act,
        train.len(),
        test.len(),
        opts.data.spec().noun(),
        opts.data,
        opts.epochs,
        out.display()
    );
    let mut progress = Progress::new(opts.plain, opts.epochs);
    let kept = |m: &Manifest| match m.completed_epochs {
        0 => "no epoch was completed, so nothing was kept".to_string(),
        e => format!(
            "the checkpoint of epoch {e} is kept in {}: continue with --resume",
            out.display()
        ),
    };
    let mut last_test = None;
    let mut recorded = None;
    for epoch in first..=opts.epochs {
        if let Some(stop) = time_limit(opts, manifest, started, epoch, &kept) {
            progress.finish();
            replica.finish::<B::InnerBackend>();
            return Err(stop);
        }
        let clock = std::time::Instant::now();
        effects::start();
        let batcher = (batchers.train)(epoch);
        let training = std::time::Instant::now();
        let (next, sums, batches) = match train_epoch::<B, M, I, T>(
            opts,
            replica,
            epoch,
            device,
            Shard {
                model,
                optim: &mut optim,
                train,
                batcher: &batcher,
            },
            techniques,
            Some(&mut progress),
        ) {
            Ok(done) => done,
            Err(stop) => {
                progress.finish();
                replica.finish::<B::InnerBackend>();
                return Err(match stop {
                    Stop::Interrupted => EmberError::Interrupted {
                        epoch,
                        kept: kept(manifest),
                    },
                    Stop::NonFinite { batch, loss } => EmberError::NonFinite {
                        epoch,
                        batch,
                        loss,
                        kept: kept(manifest),
                    },
                    Stop::Failed(e) => e,
                });
            }
        };
        model = next;
        let exchange = replica.exchange_report(training.elapsed().as_secs_f64());
        recorded = Some((effects::finish(), batches as u64, epoch));
        if techniques.iter().any(|t| t.ends_epoch()) {
            progress.finish();
        }
        let (next, lines) = end_epoch(model, techniques, epoch)?;
        model = next;
        for line in lines {
            eprintln!("  {line}");
        }
        let valid = evaluate_items::<B::InnerBackend, _, I, V>(
            &model.valid(),
            test,
            &batchers.valid,
            opts.batch_size.max(256),
            device,
        )
        .inspect_err(|_| {
            progress.finish();
            replica.finish::<B::InnerBackend>();
        })?;
        // A parallel run stops at the next batch, where every replica learns of it at once.
        if !replica.is_parallel() && opts.interrupted() {
            progress.finish();
            return Err(EmberError::Interrupted {
                epoch,
                kept: kept(manifest),
            });
        }
        let seconds = clock.elapsed().as_secs_f64();
        let row = report::EpochMetrics {
            epoch,
            train_loss: sums.loss(),
            train_accuracy: sums.accuracy(),
            valid_loss: valid.loss,
            valid_accuracy: valid.accuracy,
            seconds: Some(seconds),
        };
        progress.end(&row);
        if let Some(line) = exchange {
            eprintln!("  {line}");
        }
        // The checkpoint first, the manifest that points at it last: a kill in between leaves
        // the previous epoch's state, which the manifest still names.
        let mut files = vec![
            (
                run::checkpoint_file(out, "model", epoch),
                record::bytes::<B, _>(model.clone().into_record())?,
            ),
            (run::checkpoint_file(out, "optim", epoch), optim.bytes()?),
        ];
        for t in techniques.iter() {
            if let Some(bytes) = t.state() {
                files.push((run::state_file(out, t.registration().name, epoch), bytes));
            }
        }
        write_checkpoint(&files)?;
        for (file, bytes) in &files {
            manifest.record_file(out, file, bytes);
        }
        manifest.completed_epochs = epoch;
        manifest.epoch_seconds.truncate(epoch - 1);
        manifest.epoch_seconds.push(seconds);
        manifest.history.retain(|r| r.epoch < epoch);
        manifest.history.push(row);
        let stale: Vec<usize> = opts.keep_checkpoints.map_or_else(Vec::new, |keep| {
            run::checkpoint_epochs(out)
                .into_iter()
                .filter(|&e| e + keep <= epoch)
                .collect()
        });
        for file in stale.iter().flat_map(|&e| run::checkpoint_files(out, e)) {
            manifest.forget(out, &file);
        }
        manifest.write(out)?;
        // after the manifest no longer names them: a kill in between leaves files that the
        // next epoch removes
        for &old in &stale {
            run::remove_checkpoint(out, old);
        }
        replica.fresh_run(None);
        write_reports(opts, manifest)?;
        last_test = Some(valid);
        replica.end_epoch()?;
    }
    progress.finish();
    replica.finish::<B::InnerBackend>();
    let test = last_test.expect("at least one epoch trained");
    let bytes = record::bytes::<B::InnerBackend, _>(model.valid().into_record())?;
    let file = out.join(format!("{}.mpk", run::MODEL_FILE));
    crate::atomic::write(&file, &bytes)?;
    manifest.record_file(out, &file, &bytes);
    manifest.test_accuracy = Some(test.accuracy);
    manifest.test_loss = Some(test.loss);
    manifest.tested_epoch = Some(opts.epochs);
    if techniques.iter().any(|t| t.registration().packs) {
        // the provenance every packed model file records, to which each technique adds its own
        let about: BTreeMap<String, String> = [
            ("seed", opts.seed.to_string()),
            ("source", file.display().to_string()),
            ("dataset", opts.data.kind().to_string()),
        ]
        .into_iter()
        .chain(opts.shape.map(|s| (technique::ABOUT_SHAPE, s.to_json())))
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let params = cubecl_kernels::decorator::module::params(&model.valid());
        for t in techniques.iter() {
            if let Some(bytes) = t.export(&params, about.clone())? {
                let file = out.join(technique::packed_file(t.registration()));
                crate::atomic::write(&file, &bytes)?;
                manifest.record_file(out, &file, &bytes);
                eprintln!("packed {} model: {}", t.registration().name, file.display());
            }
        }
    }
    manifest.write(out)?;
    if let Some((seen, steps, epoch)) = recorded {
        let step = format!("training step of epoch {epoch}");
        let name = energy_name(opts.energy.as_deref());
        let energy = layers.energy.map(|e| (name.as_str(), e));
        let default = opts.multiplier.name();
        let report = effects_report(&seen, steps, &step, layers.choices, default, energy);
        report_effects(&report, Some(out))?;
    }
    Ok(test)
}

/// The stop before `epoch` when it would end past `--time-limit`: this invocation's seconds
/// so far plus the longest epoch the run recorded. The first epoch of a new run always runs
/// (nothing predicts it).
fn time_limit(
    opts: &TrainOptions,
    manifest: &Manifest,
    started: std::time::Instant,
    epoch: usize,
    kept: &dyn Fn(&Manifest) -> String,
) -> Option<EmberError> {
    let limit = opts.time_limit?;
    let longest = manifest.epoch_seconds.iter().copied().reduce(f64::max)?;
    let used = started.elapsed().as_secs_f64();
    (used + longest > limit).then(|| EmberError::TimeLimit {
        next: epoch,
        epochs: opts.epochs,
        limit,
        used,
        epoch_seconds: longest,
        kept: kept(manifest),
    })
}

/// One replica's model and optimizer, with its share of the training data.
pub(crate) struct Shard<'a, B: TrainBackend, M: TrainableClassifier<B>, I, T> {
    pub(crate) model: M,
    pub(crate) optim: &'a mut Optim<B, M>,
    pub(crate) train: &'a InMemDataset<I>,
    pub(crate) batcher: &'a T,
}

/// Why an epoch ended before its last batch.
pub(crate) enum Stop {
    /// SIGINT/SIGTERM (on any replica of a parallel run).
    Interrupted,
    /// A non-finite loss under `--on-nan stop` (the loss of the whole step, all replicas).
    NonFinite { batch: usize, loss: f64 },
    /// Something else failed (a collective operation, a replica check).
    Failed(EmberError),
}

/// One replica's epoch: its shard of the epoch's order ([`Replica::shard`]) in batches, each a
/// forward and backward pass, the gradients averaged over the replicas, the pruning hooks and an
/// optimizer step. The replicas of a parallel run exchange each step's loss, accuracy and stop
/// request, so they report the whole step and stop at the same batch; one replica runs exactly
/// the single-device loop. Returns the model, the epoch's sums and its number of steps.
pub(crate) fn train_epoch<B, M, I, T>(
    opts: &TrainOptions,
    replica: &Replica,
    epoch: usize,
    device: &B::Device,
    shard: Shard<'_, B, M, I, T>,
    techniques: &mut [Box<dyn Technique<B, M>>],
    mut progress: Option<&mut Progress>,
) -> std::result::Result<(M, Sums, usize), Stop>
where
    B: TrainBackend,
    M: TrainableClassifier<B>,
    I: Clone + Send + Sync + 'static,
    T: Batcher<B, I, Batch<B>> + Fallible,
{
    let Shard {
        mut model,
        optim,
        train,
        batcher,
    } = shard;
    // The backend's RNG (SparseAct's stochastic variant draws from it) restarts from the
    // seed and the epoch, like the data order: a resumed epoch draws what it would have.
    B::seed(device, opts.seed.wrapping_add(epoch as u64));
    let order = replica.shard(epoch_order(train.len(), opts.seed, epoch));
    let batches = order.len().div_ceil(opts.batch_size);
    if let Some(p) = progress.as_deref_mut() {
        p.start(epoch, batches);
    }
    let mut sums = Sums::default();
    for (b, chunk) in order.chunks(opts.batch_size).enumerate() {
        if !replica.is_parallel() && opts.interrupted() {
            return Err(Stop::Interrupted);
        }
        let items = chunk
            .iter()
            .map(|&i| train.get(i).expect("an index below len"));
        let batch = batcher.batch(items.collect(), device);
        // an item that did not load (an image that does not decode) ends the run, naming it
        let failed = batcher.failure();
        if !replica.is_parallel()
            && let Some(e) = failed
        {
            return Err(Stop::Failed(e));
        }
        // forward and backward on one of rayon's workers where the backend computes on the host
        let (back, step) = workers::run_for::<B::InnerBackend, _>(move || {
            let step = model.step(batch);
            (model, step)
        });
        model = back;
        let loss = if replica.is_parallel() {
            let (loss, correct, seen) = Sums::stats(&step.item);
            let stop = f32::from(u8::from(opts.interrupted()));
            let all = replica
                .sum::<B::InnerBackend>(
                    &[
                        (loss * seen as f64) as f32,
                        correct as f32,
                        seen as f32,
                        stop,
                        f32::from(u8::from(failed.is_some())),
                    ],
                    device,
                )
                .map_err(Stop::Failed)?;
            // every replica stops at the same batch: the one that failed with its error
            if let Some(e) = failed {
                return Err(Stop::Failed(e));
            }
            if all[4] > 0.0 {
                return Err(Stop::Failed(EmberError::Collective(format!(
                    "another replica could not load its items of batch {} (its error names them)",
                    b + 1
                ))));
            }
            if all[3] > 0.0 {
                return Err(Stop::Interrupted);
            }
            let seen = all[2] as usize;
            let loss = f64::from(all[0]) / seen.max(1) as f64;
            sums.add_stats(loss, all[1] as usize, seen);
            loss
        } else {
            sums.add(&step.item)
        };
        if !loss.is_finite() && opts.on_nan == OnNan::Stop {
            return Err(Stop::NonFinite { batch: b + 1, loss });
        }
        let mut grads = replica
            .mean_grads::<B, M>(&model, step.grads)
            .map_err(Stop::Failed)?;
        for t in techniques.iter() {
            t.grads(&model, &mut grads);
        }
        let lr = opts
            .optimizer
            .lr_at(opts.lr, epoch, b, batches, opts.epochs);
        model = workers::run_for::<B::InnerBackend, _>(|| optim.step(lr, model, grads));
        for t in techniques.iter_mut() {
            model = t
                .after_step(model, epoch, b + 1, batches)
                .map_err(Stop::Failed)?;
        }
        model = replica
            .mean_state::<B, M>(model, device)
            .map_err(Stop::Failed)?;
        if replica.verifies() {
            replica
                .verify_step::<B::InnerBackend>(scale::param_digest(&model), device, epoch, b + 1)
                .map_err(Stop::Failed)?;
        }
        if let Some(p) = progress.as_deref_mut() {
            p.batch(b + 1, &sums);
        }
    }
    Ok((model, sums, batches))
}

/// Every technique's end of an epoch ([`Technique::end_epoch`]): the model, and the lines to
/// report, each after its technique's name. Every replica runs it on equal parameters, so their
/// techniques' states stay equal.
pub(crate) fn end_epoch<B: TrainBackend, M: TrainableClassifier<B>>(
    mut model: M,
    techniques: &mut [Box<dyn Technique<B, M>>],
    epoch: usize,
) -> Result<(M, Vec<String>)> {
    let mut lines = Vec::new();
    for t in techniques.iter_mut() {
        let (next, said) = t.end_epoch(model, epoch)?;
        model = next;
        let name = t.registration().name;
        lines.extend(said.into_iter().map(|l| format!("{name}: {l}")));
    }
    Ok((model, lines))
}

/// The per-layer choices of a run and its energy table.
pub(crate) struct Layers<'a> {
    pub(crate) choices: &'a [LayerChoice],
    pub(crate) energy: Option<&'a EnergyTable>,
}

pub(crate) fn energy_name(path: Option<&Path>) -> String {
    path.map_or(String::new(), |p| p.display().to_string())
}

/// `metrics.csv` and `curves.png` of the epochs completed so far.
pub(crate) fn write_reports(opts: &TrainOptions, manifest: &Manifest) -> Result<()> {
    report::write_csv(&opts.out.join("metrics.csv"), &manifest.history)?;
    report::plot_curves(
        &opts.out.join("curves.png"),
        &format!(
            "{} on {}, multiplier {} ({})",
            opts.model, opts.backend, opts.multiplier, opts.data
        ),
        &manifest.history,
    )
}

/// Running sums of an epoch's training loss and accuracy.
#[derive(Default)]
pub(crate) struct Sums {
    pub(crate) loss: f64,
    pub(crate) correct: usize,
    pub(crate) seen: usize,
}

impl Running for Sums {
    fn loss(&self) -> f64 {
        Sums::loss(self)
    }
    fn accuracy(&self) -> f64 {
        Sums::accuracy(self)
    }
}

impl Sums {
    /// Adds a batch's output; returns its loss.
    pub(crate) fn add<B: Backend>(&mut self, out: &ClassificationOutput<B>) -> f64 {
        let (loss, correct, n) = Self::stats(out);
        self.add_stats(loss, correct, n);
        loss
    }

    /// A batch's mean loss, correct predictions and size.
    pub(crate) fn stats<B: Backend>(out: &ClassificationOutput<B>) -> (f64, usize, usize) {
        let n = out.targets.dims()[0];
        let loss = out.loss.clone().into_scalar().elem::<f64>();
        let pred = out.output.clone().argmax(1).squeeze_dim::<1>(1);
        let correct = pred
            .equal(out.targets.clone())
            .int()
            .sum()
            .into_scalar()
            .elem::<i64>() as usize;
        (loss, correct, n)
    }

    /// Adds a batch of `n` items with mean loss `loss` and `correct` right answers.
    pub(crate) fn add_stats(&mut self, loss: f64, correct: usize, n: usize) {
        self.correct += correct;
        self.loss += loss * n as f64;
        self.seen += n;
    }

    pub(crate) fn loss(&self) -> f64 {
        self.loss / self.seen.max(1) as f64
    }

    pub(crate) fn accuracy(&self) -> f64 {
        100.0 * self.correct as f64 / self.seen.max(1) as f64
    }
}

/// Writes one epoch's checkpoint files, each atomically; when one cannot be written (a full
/// disk), the ones already written are removed again, so no file of an epoch the manifest does
/// not name is left behind.
pub(crate) fn write_checkpoint(files: &[(PathBuf, Vec<u8>)]) -> Result<()> {
    for (i, (file, bytes)) in files.iter().enumerate() {
        let written = std::fs::create_dir_all(file.parent().expect("in checkpoint/"))
            .map_err(|e| EmberError::write(file, e))
            .and_then(|()| crate::atomic::write(file, bytes));
        if let Err(e) = written {
            for (done, _) in &files[..i] {
                let _ = std::fs::remove_file(done);
            }
            return Err(e);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_that_cannot_be_written_whole_leaves_no_file_of_its_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let model = run::checkpoint_file(out, "model", 2);
        let optim = run::checkpoint_file(out, "optim", 2);
        // a directory where the optimizer's file goes: its write fails as a full disk's would
        std::fs::create_dir_all(optim.join("in-the-way")).unwrap();
        let files = [(model.clone(), vec![1u8; 8]), (optim.clone(), vec![2u8; 8])];
        let err = write_checkpoint(&files).unwrap_err();
        assert!(err.to_string().contains("optim-2"), "{err}");
        assert!(!model.exists(), "the epoch's model file is removed again");
        // written whole: both files
        std::fs::remove_dir_all(&optim).unwrap();
        write_checkpoint(&files).unwrap();
        assert_eq!(std::fs::read(&optim).unwrap(), [2u8; 8]);
        assert!(model.is_file());
    }
}
