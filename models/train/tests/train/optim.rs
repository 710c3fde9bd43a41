//! The optimizer and its schedule (`--optimizer`, `--schedule`, …) through whole runs, and
//! `--time-limit`: a run stopped at the limit and resumed ends bit for bit where an
//! uninterrupted one does.

use ember_models::classifier::ModelKind;
use ember_models::data::{DataSource, mnist::MnistSource};
use ember_train::EmberError;
use ember_train::run::{Manifest, OnExisting};
use ember_train::train::{OptimizerKind, OptimizerSettings, Schedule, TrainOptions, train};
use std::path::Path;

const SGD: OptimizerSettings = OptimizerSettings {
    kind: OptimizerKind::Sgd,
    momentum: 0.9,
    weight_decay: 5e-4,
    schedule: Schedule::Cosine,
    warmup_epochs: 1,
};

fn opts(out: &Path, optimizer: OptimizerSettings, epochs: usize) -> TrainOptions {
    TrainOptions {
        epochs,
        batch_size: 8,
        lr: 0.05,
        optimizer,
        train_limit: Some(32),
        test_limit: Some(16),
        plain: true,
        ..TrainOptions::new(
            ModelKind::Lenet300,
            DataSource::Mnist(MnistSource::Embedded),
            out,
        )
    }
}

/// Every epoch's training and test loss, and the final test loss, as bits: equal only when
/// the runs stepped alike (the model files differ anyway: they name parameters by the ids a
/// process drew).
fn losses(run: &Path) -> Vec<u64> {
    let m = Manifest::read_if_present(run).unwrap().unwrap();
    let mut bits: Vec<u64> = m
        .history
        .iter()
        .flat_map(|r| [r.train_loss.to_bits(), r.valid_loss.to_bits()])
        .collect();
    bits.push(m.test_loss.unwrap().to_bits());
    bits
}

#[test]
fn a_run_stopped_at_its_time_limit_resumes_to_the_uninterrupted_runs_bits() {
    let _rng = crate::seeded();
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole");
    train(opts(&whole, SGD, 3)).unwrap();
    let m = Manifest::read_if_present(&whole).unwrap().unwrap();
    assert_eq!(m.optimizer, SGD, "the manifest records the optimizer");

    // The first epoch of a new run always runs; the next would pass the limit.
    let cut = dir.path().join("cut");
    let err = train(TrainOptions {
        time_limit: Some(1e-6),
        ..opts(&cut, SGD, 3)
    })
    .unwrap_err();
    assert!(
        matches!(
            err,
            EmberError::TimeLimit {
                next: 2,
                epochs: 3,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.exit_code(), 75);
    assert!(err.to_string().contains("--resume"), "{err}");
    let m = Manifest::read_if_present(&cut).unwrap().unwrap();
    assert_eq!(m.completed_epochs, 1);
    // resumed with a limit it cannot meet: stops before any epoch, the run unchanged
    let again = train(TrainOptions {
        time_limit: Some(1e-6),
        on_existing: OnExisting::Resume,
        ..opts(&cut, SGD, 3)
    })
    .unwrap_err();
    assert!(
        matches!(again, EmberError::TimeLimit { next: 2, .. }),
        "{again}"
    );
    train(TrainOptions {
        on_existing: OnExisting::Resume,
        ..opts(&cut, SGD, 3)
    })
    .unwrap();
    assert!(
        losses(&cut) == losses(&whole),
        "the schedule and SGD's velocities carry over a resume"
    );

    // SGD is not Adam: the same run under Adam ends elsewhere
    let adam = dir.path().join("adam");
    let settings = OptimizerSettings {
        kind: OptimizerKind::Adam,
        ..SGD
    };
    train(TrainOptions {
        lr: 1e-3,
        ..opts(&adam, settings, 3)
    })
    .unwrap();
    assert!(losses(&adam) != losses(&whole));
}

#[test]
fn a_resume_keeps_the_optimizer_and_the_length_a_cosine_is_laid_over() {
    let _rng = crate::seeded();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    train(opts(&out, SGD, 2)).unwrap();
    let resume = |optimizer, epochs| {
        train(TrainOptions {
            on_existing: OnExisting::Resume,
            ..opts(&out, optimizer, epochs)
        })
        .unwrap_err()
        .to_string()
    };
    let other = OptimizerSettings {
        momentum: 0.8,
        ..SGD
    };
    let err = resume(other, 3);
    assert!(
        err.contains("the optimizer") && err.contains("momentum 0.9") && err.contains("0.8"),
        "{err}"
    );
    let err = resume(SGD, 3);
    assert!(
        err.contains("--epochs 2") && err.contains("cosine"),
        "{err}"
    );
    // a constant rate may grow its run
    let constant = dir.path().join("constant");
    let flat = OptimizerSettings {
        schedule: Schedule::Constant,
        warmup_epochs: 0,
        ..SGD
    };
    train(opts(&constant, flat, 1)).unwrap();
    train(TrainOptions {
        on_existing: OnExisting::Resume,
        ..opts(&constant, flat, 2)
    })
    .unwrap();
}

#[test]
fn a_bad_time_limit_or_optimizer_is_refused_before_the_run_directory_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    for (bad, flag) in [
        (
            TrainOptions {
                time_limit: Some(0.0),
                ..opts(&out, SGD, 2)
            },
            "--time-limit",
        ),
        (
            TrainOptions {
                time_limit: Some(f64::NAN),
                ..opts(&out, SGD, 2)
            },
            "--time-limit",
        ),
        (
            TrainOptions {
                time_limit: Some(60.0),
                scale: ember_train::scale::Scale {
                    devices: 2,
                    ..Default::default()
                },
                ..opts(&out, SGD, 2)
            },
            "--time-limit",
        ),
        (opts(&out, SGD, 1), "--warmup-epochs"),
        (
            opts(
                &out,
                OptimizerSettings {
                    momentum: 1.5,
                    ..SGD
                },
                2,
            ),
            "--momentum",
        ),
    ] {
        let err = train(bad).unwrap_err();
        assert!(
            matches!(err, EmberError::Invalid(_)) && err.to_string().contains(flag),
            "{err}"
        );
        assert!(!out.exists(), "nothing is made for {flag}");
    }
}
