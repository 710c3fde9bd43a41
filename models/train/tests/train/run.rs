//! `ember_train::run`.

use burn_sparse_act::Policy;
use ember_models::classifier::ModelKind;
use ember_models::data::DatasetKind;
use ember_train::EmberError;
use ember_train::backend::BackendKind;
use ember_train::run::*;

fn manifest(model: ModelKind, completed: usize) -> Manifest {
    Manifest {
        version: MANIFEST_VERSION,
        model,
        backend: BackendKind::Ndarray,
        multiplier: "native".into(),
        sparse_act: Policy::default(),
        epochs: 2,
        batch_size: 8,
        lr: 1e-3,
        seed: 1,
        dataset: DatasetKind::Mnist,
        data: "x".into(),
        completed_epochs: completed,
        epoch_seconds: vec![],
        test_accuracy: None,
        test_loss: None,
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
