//! A run's start: its manifest (new, or the previous one checked against the options), the
//! per-layer choices, and the model and optimizer restored from the last completed epoch.

use super::TrainOptions;
use super::optim::Optim;
use crate::backend::TrainBackend;
use crate::effects::{EffectsReport, EnergyTable};
use crate::error::{EmberError, Result};
use crate::policy::{LayerChoice, LayerPolicy, contraction_layers};
use crate::record;
use crate::run::{self, Manifest};
use crate::technique::{self, Registration, Resumed};
use burn::prelude::*;
use burn_approx_mul::Multiplier;
use ember_models::classifier::{ModelKind, TrainableClassifier};
use std::path::Path;

/// The manifest a run writes (kept with the run directory's other code in [`crate::run`]),
/// made here from the options it records.
impl Manifest {
    /// The manifest of a new run of `opts` (no epoch completed), with the per-layer policy as
    /// it resolved (`policy`: one line per layer, `None` without `--policy`).
    pub fn new(opts: &TrainOptions, policy: Option<Vec<String>>) -> Self {
        Self {
            version: run::MANIFEST_VERSION,
            model: opts.model,
            shape: opts.shape,
            act: opts.act,
            backend: opts.backend,
            multiplier: opts.multiplier.name().to_string(),
            conv: Some(opts.multiplier.conv().to_string()),
            sparse_act: opts.sparse_act.clone(),
            epochs: opts.epochs,
            batch_size: opts.batch_size,
            lr: opts.lr,
            optimizer: opts.optimizer,
            seed: opts.seed,
            dataset: opts.data.kind(),
            data: opts.data.to_string(),
            classes: Some(opts.data.spec().classes())
                .filter(|&n| n != opts.data.kind().spec().classes()),
            train_limit: opts.train_limit,
            test_limit: opts.test_limit,
            policy,
            hinm: opts.hinm.as_ref().map(|h| h.describe()),
            bcr: opts.bcr.as_ref().map(|b| b.describe()),
            settings: Default::default(),
            replicas: opts.scale.replicas(),
            completed_epochs: 0,
            epoch_seconds: Vec::new(),
            history: Vec::new(),
            test_accuracy: None,
            test_loss: None,
            tested_epoch: None,
            files: Default::default(),
        }
    }
}

/// The state technique `r` checkpointed after the last completed epoch (`None` for a new run
/// or a technique without one), checked against the manifest's checksum.
pub(crate) fn resumed(
    out: &Path,
    manifest: &Manifest,
    r: &Registration,
) -> Result<Option<Resumed>> {
    let epoch = manifest.completed_epochs;
    if epoch == 0 || !r.state {
        return Ok(None);
    }
    let file = run::state_file(out, r.name, epoch);
    let bad = |reason: String| EmberError::BadCheckpoint {
        path: file.clone(),
        reason,
    };
    let bytes = std::fs::read(&file).map_err(|e| bad(format!("cannot read it: {e}")))?;
    record::check_checksum(record::checksum(&bytes), manifest.checksum(out, &file)).map_err(bad)?;
    Ok(Some(Resumed { file, bytes }))
}

impl Manifest {
    /// What this manifest recorded of a technique's flag, as [`technique::settings`] gives
    /// it: from the typed fields of the first four techniques, from [`Manifest::settings`] for
    /// any other (`off` when absent: the run did not use it; `burn` for `--matmul`, which
    /// runs before it ran Burn's matmul and did not record).
    pub fn recorded_setting(&self, flag: &str) -> String {
        self.typed_setting(flag).unwrap_or_else(|| {
            let recorded = self.settings.get(flag).cloned();
            recorded.unwrap_or_else(|| match flag {
                "--matmul" => "burn".into(),
                _ => technique::OFF.to_string(),
            })
        })
    }

    /// Records `settings` ([`technique::settings`]) that the typed fields do not hold.
    pub fn record_settings(&mut self, settings: &[(&'static str, String)]) {
        for (flag, value) in settings {
            if self.typed_setting(flag).is_none() && value != technique::OFF {
                self.settings.insert(flag.to_string(), value.clone());
            }
        }
    }

    fn typed_setting(&self, flag: &str) -> Option<String> {
        let off = || technique::OFF.to_string();
        Some(match flag {
            "--multiplier" => self.multiplier.clone(),
            // Runs before `--conv` ran Burn's kernels and did not record it.
            "--conv" => self.conv.clone().unwrap_or_else(|| "burn".into()),
            "--sparse-act" => self.sparse_act.to_string(),
            "--hinm" => self.hinm.clone().unwrap_or_else(off),
            "--bcr" => self.bcr.clone().unwrap_or_else(off),
            _ => return None,
        })
    }
}

/// A model's shape as a refusal names it: `shape`, or the kind's own.
fn show_shape(kind: ModelKind, shape: Option<ember_models::shape::Shape>) -> String {
    shape
        .or(kind.own_shape())
        .map_or_else(|| "its own".to_string(), |s| format!("\"{s}\""))
}

/// The manifest of this attempt: a new one, or the previous one checked against the options
/// (every setting that shapes training must be the one the run was started with; only
/// `--epochs` may grow).
pub(crate) fn start_manifest(
    opts: &TrainOptions,
    choices: &[LayerChoice],
    settings: &[(&'static str, String)],
    previous: Option<Manifest>,
) -> Result<Manifest> {
    let dataset = opts.data.kind();
    let Some(prev) = previous else {
        let mut manifest = Manifest::new(opts, policy_lines(choices, opts.policy.is_some()));
        manifest.record_settings(settings);
        return Ok(manifest);
    };
    let refuse = |reason: String| EmberError::CannotResume {
        path: opts.out.clone(),
        reason,
    };
    let differs = |what: &str, was: String, now: String| {
        (was != now).then(|| {
            refuse(format!(
                "it was started with {what} {was}, not {now} (a resumed run keeps every \
                 setting; only --epochs may grow)"
            ))
        })
    };
    let limit = |l: Option<usize>| l.map_or("(all)".to_string(), |n| n.to_string());
    // The run's data, backend and hyper-parameters first, then the techniques' settings.
    let mut checks = vec![
        differs("--dataset", prev.dataset.to_string(), dataset.to_string()),
        differs(
            "--backend",
            prev.backend.to_string(),
            opts.backend.to_string(),
        ),
        differs("--lr", prev.lr.to_string(), opts.lr.to_string()),
        differs(
            "the optimizer",
            format!("\"{}\"", prev.optimizer),
            format!("\"{}\"", opts.optimizer),
        ),
        differs(
            "--batch-size",
            prev.batch_size.to_string(),
            opts.batch_size.to_string(),
        ),
        differs("--seed", prev.seed.to_string(), opts.seed.to_string()),
        differs("--act", prev.act.to_string(), opts.act.to_string()),
        differs(
            "the model's shape",
            show_shape(opts.model, prev.shape),
            show_shape(opts.model, opts.shape),
        ),
        differs("data", prev.data.clone(), opts.data.to_string()),
        differs(
            "replicas (--devices × --world)",
            prev.replicas.to_string(),
            opts.scale.replicas().to_string(),
        ),
    ];
    checks.extend(
        settings
            .iter()
            .map(|(flag, now)| differs(flag, prev.recorded_setting(flag), now.clone())),
    );
    // Version 3 records the limits; older manifests did not.
    if prev.version >= 3 {
        checks.push(differs(
            "--train-limit",
            limit(prev.train_limit),
            limit(opts.train_limit),
        ));
        checks.push(differs(
            "--test-limit",
            limit(prev.test_limit),
            limit(opts.test_limit),
        ));
    }
    let policy = policy_lines(choices, opts.policy.is_some());
    if prev.policy != policy {
        let show = |p: &Option<Vec<String>>| match p {
            None => "no --policy".to_string(),
            Some(lines) => format!("--policy [{}]", lines.join("; ")),
        };
        checks.push(Some(refuse(format!(
            "it was started with {}, not {} (a resumed run keeps every setting; only --epochs \
             may grow)",
            show(&prev.policy),
            show(&policy)
        ))));
    }
    if let Some(refusal) = checks.into_iter().flatten().next() {
        return Err(refusal);
    }
    let stretched = prev.optimizer.schedule != crate::optimizer::Schedule::Constant;
    if stretched && prev.epochs != opts.epochs {
        return Err(refuse(format!(
            "it was started with --epochs {} and a {} schedule laid over them, not {} (resume \
             it with --epochs {}, or start a new run)",
            prev.epochs, prev.optimizer.schedule, opts.epochs, prev.epochs
        )));
    }
    if prev.completed_epochs >= opts.epochs {
        let n = prev.completed_epochs;
        return Err(refuse(format!(
            "it has already completed {n} epoch{}; pass --epochs larger than that",
            if n == 1 { "" } else { "s" }
        )));
    }
    Ok(Manifest {
        version: run::MANIFEST_VERSION,
        epochs: opts.epochs,
        train_limit: opts.train_limit,
        test_limit: opts.test_limit,
        ..prev
    })
}

/// What a manifest records of a resolved policy: one line per layer, `None` without `--policy`.
pub(crate) fn policy_lines(choices: &[LayerChoice], given: bool) -> Option<Vec<String>> {
    given.then(|| choices.iter().map(|c| c.to_string()).collect())
}

/// The resolved per-layer choices of `model` under `policy` (every layer with the run's own
/// settings without one), and the energy table when `energy` names a file: both checked
/// before anything runs.
pub(crate) fn layer_setup<B: Backend, M: Module<B>>(
    model: &M,
    policy: Option<&LayerPolicy>,
    multiplier: &Multiplier,
    energy: Option<&Path>,
) -> Result<(Vec<LayerChoice>, Option<EnergyTable>)> {
    let shapes = ember_models::params::float_shapes(model);
    let layers = contraction_layers(&shapes);
    let choices = match policy {
        None => crate::policy::uniform(&layers),
        Some(p) => {
            let choices = p.resolve(&layers)?;
            crate::policy::check_sparse_act(&choices, &shapes, p)?;
            choices
        }
    };
    let energy = energy
        .map(|path| {
            let mut needed: Vec<String> = choices
                .iter()
                .filter_map(|c| c.multiplier.as_ref().map(|m| m.name().to_string()))
                .collect();
            needed.push(multiplier.name().to_string());
            needed.sort();
            EnergyTable::read(path, &needed)
        })
        .transpose()?;
    Ok((choices, energy))
}

/// Prints the effects table and, with `dir`, writes `effects.json` / `effects.md` there.
pub(crate) fn report_effects(report: &EffectsReport, dir: Option<&Path>) -> Result<()> {
    eprintln!("\nWhat each layer ran:\n{}", report.markdown());
    match dir {
        Some(dir) => report.write(dir),
        None => Ok(()),
    }
}

/// The model and optimizer to train: fresh, or loaded from the checkpoint of the last
/// completed epoch (checked before anything in the run changes).
pub(crate) fn restore<B: TrainBackend, M: TrainableClassifier<B>>(
    out: &Path,
    manifest: &Manifest,
    model: M,
    device: &B::Device,
) -> Result<(M, Optim<B, M>)> {
    let optim = Optim::new(&manifest.optimizer);
    let epoch = manifest.completed_epochs;
    if epoch == 0 {
        return Ok((model, optim));
    }
    let model = load_model(
        &run::checkpoint_file(out, "model", epoch),
        manifest,
        model,
        manifest.model,
        device,
    )?;
    let file = run::checkpoint_file(out, "optim", epoch);
    let optim = optim
        .load(&file, manifest.checksum(out, &file), device)
        .map_err(|reason| EmberError::BadCheckpoint {
            path: file.clone(),
            reason,
        })?;
    Ok((model, optim))
}

/// Loads `file` into `model`, refusing a record of another shape (naming the first parameter
/// that differs) or one whose checksum is not the one the manifest recorded.
pub(crate) fn load_model<B: Backend, M: Module<B>>(
    file: &Path,
    manifest: &Manifest,
    model: M,
    kind: ModelKind,
    device: &B::Device,
) -> Result<M> {
    let dir = run::manifest_dir(file);
    let checksum = dir.as_deref().and_then(|d| manifest.checksum(d, file));
    record::load_checked(file, checksum, model, kind, device)
}
