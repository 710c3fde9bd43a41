//! `ember_train::run`.

use ember_models::classifier::ModelKind;
use ember_models::data::DatasetKind;
use ember_models::data::{DataSource, mnist::MnistSource};
use ember_train::EmberError;
use ember_train::run::*;
use ember_train::train::TrainOptions;

fn manifest(model: ModelKind, completed: usize) -> Manifest {
    let data = DataSource::Mnist(MnistSource::Embedded);
    let opts = TrainOptions {
        epochs: 2,
        batch_size: 8,
        lr: 1e-3,
        seed: 1,
        ..TrainOptions::new(model, data, "x")
    };
    Manifest {
        conv: None,
        data: "x".into(),
        completed_epochs: completed,
        ..Manifest::new(&opts, None)
    }
}

#[test]
fn typed_settings_round_trip_and_version_1_manifests_still_read() {
    let mut m = manifest(ModelKind::ResmlpSmall, 2);
    m.sparse_act = "0.5:16 384x10=0:1 stochastic=0.1 +scales".parse().unwrap();
    let json = serde_json::to_string(&m).unwrap();
    assert_eq!(serde_json::from_str::<Manifest>(&json).unwrap(), m);
    // Written by an earlier Ember: no version, the policy as text, no multiplier/dataset.
    let v1 = r#"{"model":"resmlp-small","backend":"wgpu","sparse_act":"0.8:64 +scales",
        "epochs":3,"batch_size":32,"lr":0.002,"seed":42,"data":"x","completed_epochs":3,
        "epoch_seconds":[1.0,2.0,3.0],"test_accuracy":40.5,"test_loss":1.5}"#;
    let old: Manifest = serde_json::from_str(v1).unwrap();
    assert_eq!(old.version, 1);
    assert_eq!(old.sparse_act.to_string(), "0.8:64 +scales");
    assert!(old.sparse_act.scales);
    assert_eq!(
        (old.multiplier.as_str(), old.dataset),
        ("native", DatasetKind::Mnist)
    );
    let off: Manifest = serde_json::from_str(&v1.replace("0.8:64 +scales", "off")).unwrap();
    assert!(off.sparse_act.is_off());
    let bad = v1.replace("0.8:64 +scales", "0.8:64 +scale");
    assert!(serde_json::from_str::<Manifest>(&bad).is_err());
}

#[test]
fn dates() {
    assert_eq!(civil_from_days(0), (1970, 1, 1));
    assert_eq!(civil_from_days(20_779), (2026, 11, 22));
}

#[test]
fn refuses_existing_runs_and_foreign_directories() {
    let tmp = std::env::temp_dir().join(format!("ember-run-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    // New and empty directories are fine.
    assert!(
        prepare(&tmp, ModelKind::Lenet5, OnExisting::Refuse)
            .unwrap()
            .is_none()
    );
    // A run is refused without --resume/--overwrite, and kept intact.
    manifest(ModelKind::Lenet5, 1).write(&tmp).unwrap();
    let err = prepare(&tmp, ModelKind::Lenet5, OnExisting::Refuse).unwrap_err();
    assert!(matches!(err, EmberError::RunExists(_)), "{err}");
    assert!(tmp.join(MANIFEST).exists());
    // Resume needs the checkpoint of the last completed epoch, and the same model.
    let err = prepare(&tmp, ModelKind::Lenet5, OnExisting::Resume).unwrap_err();
    assert!(err.to_string().contains("no checkpoint"), "{err}");
    std::fs::create_dir_all(tmp.join("checkpoint")).unwrap();
    std::fs::write(tmp.join("checkpoint/model-1.mpk"), b"").unwrap();
    let err = prepare(&tmp, ModelKind::Lenet5, OnExisting::Resume).unwrap_err();
    assert!(err.to_string().contains("checkpoint/optim-1.mpk"), "{err}");
    std::fs::write(tmp.join("checkpoint/optim-1.mpk"), b"").unwrap();
    assert!(
        prepare(&tmp, ModelKind::Lenet5, OnExisting::Resume)
            .unwrap()
            .is_some()
    );
    let err = prepare(&tmp, ModelKind::Lenet300, OnExisting::Resume).unwrap_err();
    assert!(err.to_string().contains("not lenet300"), "{err}");
    // Overwrite replaces a run ...
    assert!(
        prepare(&tmp, ModelKind::Lenet5, OnExisting::Overwrite)
            .unwrap()
            .is_none()
    );
    assert!(!tmp.join(MANIFEST).exists());
    assert!(!tmp.join("checkpoint").exists());
    // ... but never a directory that is not one.
    std::fs::write(tmp.join("thesis.tex"), b"precious").unwrap();
    for mode in [OnExisting::Refuse, OnExisting::Overwrite] {
        let err = prepare(&tmp, ModelKind::Lenet5, mode).unwrap_err();
        assert!(matches!(err, EmberError::NotARun(_)), "{err}");
    }
    let err = prepare(&tmp, ModelKind::Lenet5, OnExisting::Resume).unwrap_err();
    assert!(err.to_string().contains("no ember-run.json"), "{err}");
    assert_eq!(std::fs::read(tmp.join("thesis.tex")).unwrap(), b"precious");
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn overwrite_removes_only_what_ember_wrote() {
    let tmp = std::env::temp_dir().join(format!("ember-clear-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(tmp.join("checkpoint")).unwrap();
    std::fs::create_dir_all(tmp.join("train/epoch-1")).unwrap();
    std::fs::create_dir_all(tmp.join("notes")).unwrap();
    manifest(ModelKind::Lenet5, 1).write(&tmp).unwrap();
    let ours = [
        "model.mpk",
        "metrics.csv",
        "curves.png",
        "checkpoint/model-1.mpk",
        "checkpoint/optim-1.mpk",
        "checkpoint/scheduler-1.mpk",
        "train/epoch-1/Loss.log",
        ".ember-tmp-abc123",
    ];
    let theirs = [
        "notes/plan.md",
        "checkpoint/model-best.mpk",
        "train/summary.txt",
        "model.mpk.bak",
    ];
    for f in ours.iter().chain(&theirs) {
        std::fs::write(tmp.join(f), f.as_bytes()).unwrap();
    }
    assert!(
        prepare(&tmp, ModelKind::Lenet5, OnExisting::Overwrite)
            .unwrap()
            .is_none()
    );
    for f in ours {
        assert!(!tmp.join(f).exists(), "{f} was left");
    }
    assert!(!tmp.join(MANIFEST).exists());
    assert!(
        !tmp.join("train/epoch-1").exists(),
        "emptied directories go"
    );
    for f in theirs {
        assert_eq!(std::fs::read(tmp.join(f)).unwrap(), f.as_bytes(), "{f}");
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn ember_files_are_told_from_the_users() {
    for f in [
        "ember-run.json",
        "checkpoint/optim-12.mpk",
        "valid/epoch-3/Accuracy.log",
        "checkpoint/.ember-tmp-x",
        "model.hinm",
        "model.bcr",
        "checkpoint/bcr-3.bin",
        "effects.json",
        "effects.md",
    ] {
        assert!(is_ember_file(f), "{f}");
    }
    for f in [
        "checkpoint/model-.mpk",
        "checkpoint/model-1.mpk.old",
        "train/epoch-x/Loss.log",
        "data/model.mpk",
        "ember-run.json.bak",
        // registered techniques without a packed model or a checkpointed state
        "model.approx-mul",
        "checkpoint/hinm-3.bin",
        "checkpoint/bcr-x.bin",
    ] {
        assert!(!is_ember_file(f), "{f}");
    }
}

#[test]
fn version_3_keeps_history_with_non_finite_values() {
    let mut m = manifest(ModelKind::Lenet5, 1);
    m.history.push(ember_train::report::EpochMetrics {
        epoch: 1,
        train_loss: f64::NAN,
        train_accuracy: 9.5,
        valid_loss: f64::INFINITY,
        valid_accuracy: 10.0,
        seconds: Some(2.0),
    });
    let json = serde_json::to_string(&m).unwrap();
    assert!(json.contains("\"train_loss\":null"), "{json}");
    let back: Manifest = serde_json::from_str(&json).unwrap();
    assert!(back.history[0].train_loss.is_nan());
    assert!(back.history[0].valid_loss.is_nan());
    assert_eq!(back.history[0].train_accuracy, 9.5);
}

#[cfg(unix)]
#[test]
fn atomically_written_files_get_the_mode_of_any_new_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("ember-mode-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    manifest(ModelKind::Lenet5, 0).write(&dir).unwrap();
    std::fs::write(dir.join("plain"), b"x").unwrap();
    let mode = |f: &str| std::fs::metadata(dir.join(f)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(MANIFEST), mode("plain"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_run_directory_another_run_holds_is_refused_until_it_is_released() {
    let _rng = crate::seeded();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let held = lock(&out, OnExisting::Refuse).unwrap();
    assert!(held.is_some() && out.is_dir());
    // a second lock on the same directory, through another open file, is refused
    let err = lock(&out, OnExisting::Overwrite).unwrap_err();
    assert!(matches!(err, EmberError::InUse(_)), "{err}");
    let opts = TrainOptions {
        epochs: 1,
        batch_size: 16,
        train_limit: Some(32),
        test_limit: Some(32),
        plain: true,
        ..TrainOptions::new(
            ModelKind::Lenet300,
            DataSource::Mnist(MnistSource::Embedded),
            &out,
        )
    };
    let err = ember_train::train::train(opts.clone()).unwrap_err();
    assert!(
        err.to_string().contains("is in use by another ember run"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        0,
        "nothing written"
    );
    // released: the run goes ahead, and its directory is free again once it ends
    drop(held);
    ember_train::train::train(opts).unwrap();
    assert!(out.join(MANIFEST).is_file());
    assert!(lock(&out, OnExisting::Resume).unwrap().is_some());
    // a resumed run's directory that does not exist is not created
    let missing = dir.path().join("missing");
    assert!(lock(&missing, OnExisting::Resume).unwrap().is_none());
    assert!(!missing.exists());
}

#[test]
fn a_run_keeps_the_checkpoints_of_its_last_epochs_and_resumes_from_them() {
    use ember_train::train::train;
    let _rng = crate::seeded();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let opts = |epochs, keep, on_existing| TrainOptions {
        epochs,
        batch_size: 8,
        train_limit: Some(16),
        test_limit: Some(16),
        plain: true,
        keep_checkpoints: keep,
        on_existing,
        ..TrainOptions::new(
            ModelKind::Lenet300,
            DataSource::Mnist(MnistSource::Embedded),
            &out,
        )
    };
    train(opts(3, Some(2), OnExisting::Refuse)).unwrap();
    assert_eq!(checkpoint_epochs(&out), [2, 3]);
    assert!(!checkpoint_file(&out, "optim", 1).exists());
    let m = Manifest::read_if_present(&out).unwrap().unwrap();
    assert_eq!(m.checksum(&out, &checkpoint_file(&out, "model", 1)), None);
    assert!(
        m.checksum(&out, &checkpoint_file(&out, "optim", 3))
            .is_some()
    );
    // a resumed run goes on from the last one and keeps as many
    train(opts(4, Some(2), OnExisting::Resume)).unwrap();
    assert_eq!(checkpoint_epochs(&out), [3, 4]);
    // every one when asked
    train(opts(6, None, OnExisting::Resume)).unwrap();
    assert_eq!(checkpoint_epochs(&out), [3, 4, 5, 6]);
    // none is refused before anything changes
    let err = train(opts(7, Some(0), OnExisting::Resume)).unwrap_err();
    assert!(matches!(err, EmberError::Invalid(_)), "{err}");
    assert_eq!(checkpoint_epochs(&out), [3, 4, 5, 6]);
}
