//! `ember_train::technique`: every registration agrees with its technique's own crate, and
//! with what a run's manifest records.

use burn_approx_mul::Multiplier;
use cubecl_kernels::decorator::packed::PackedWeight;
use ember_models::classifier::ModelKind;
use ember_models::data::{DataSource, mnist::MnistSource};
use ember_models::lenet::LeNet5;
use ember_train::backend::NdarrayStack;
use ember_train::bcr::{BcrRun, BcrTrain};
use ember_train::hinm::{HinmRun, HinmTune, Tuning};
use ember_train::run::Manifest;
use ember_train::technique::{self, OFF, REGISTRY, Technique};
use ember_train::train::TrainOptions;

type Model = LeNet5<NdarrayStack>;
type Boxed = Box<dyn Technique<NdarrayStack, Model>>;

fn hinm() -> HinmRun {
    HinmRun {
        tune: HinmTune {
            level: "75:v4".parse().unwrap(),
            perm: burn_hinm::gyro::Method::Gyro,
            from: "runs/dense".into(),
        },
        tuning: Tuning {
            kind: ModelKind::Lenet5,
            file: "runs/dense/model.mpk".into(),
            checksum: None,
            shape: None,
            masks: Default::default(),
            plans: Vec::new(),
        },
    }
}

fn bcr() -> BcrTrain {
    BcrTrain {
        level: "4x:4x4".parse().unwrap(),
        admm_every: Some(1),
        per_epoch: 2,
        smooth: false,
        retrain: 1,
        from: None,
    }
}

#[test]
fn the_registry_names_each_technique_once_and_its_files_as_its_crate_does() {
    let mut names: Vec<&str> = REGISTRY.iter().map(|r| r.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), REGISTRY.len());
    assert_eq!(
        technique::packed_file(&technique::HINM),
        ember_train::hinm::PACKED_FILE
    );
    assert_eq!(
        technique::packed_file(&technique::BCR),
        ember_train::bcr::PACKED_FILE
    );
    type Hinm = cubecl_kernels::hinm::Packed;
    type Bcrc = cubecl_kernels::bcrc::Bcrc;
    assert_eq!(
        technique::HINM.routes,
        [Hinm::KERNEL_ROUTE, Hinm::HOST_ROUTE]
    );
    assert_eq!(
        technique::BCR.routes,
        [Bcrc::KERNEL_ROUTE, Bcrc::HOST_ROUTE]
    );
    assert!(technique::is_packed_route("bcrc host"));
    assert!(!technique::is_packed_route("native"));
}

#[test]
fn every_registered_setting_is_what_the_manifest_records() {
    let data = DataSource::Mnist(MnistSource::Embedded);
    let on = TrainOptions {
        multiplier: Multiplier::parse("afm16").unwrap(),
        sparse_act: burn_sparse_act::Policy::uniform("0.5:4".parse().unwrap()),
        hinm: Some(hinm().tune),
        bcr: Some(bcr()),
        ..TrainOptions::new(ModelKind::Lenet5, data.clone(), "x")
    };
    let all: Vec<Boxed> = vec![
        Box::new(on.multiplier.clone()),
        Box::new(on.sparse_act.clone()),
        Box::new(hinm()),
        Box::new(BcrRun::new(bcr(), ModelKind::Lenet5, 3, Vec::new(), None)),
    ];
    // one technique per registration, in the registry's order
    let order: Vec<_> = all.iter().map(|t| *t.registration()).collect();
    assert_eq!(order, REGISTRY);
    let manifest = Manifest::new(&on, None);
    let settings = technique::settings(&all);
    let flags: Vec<&str> = REGISTRY
        .iter()
        .flat_map(|r| r.flags.iter().copied())
        .collect();
    assert_eq!(settings.iter().map(|(f, _)| *f).collect::<Vec<_>>(), flags);
    for (flag, value) in &settings {
        assert_ne!(value, OFF, "{flag}");
        assert_eq!(&manifest.recorded_setting(flag), value, "{flag}");
    }
    // a run without the pruning techniques records them off
    let plain = TrainOptions::new(ModelKind::Lenet5, data, "x");
    let manifest = Manifest::new(&plain, None);
    let some: Vec<Boxed> = vec![
        Box::new(plain.multiplier.clone()),
        Box::new(plain.sparse_act.clone()),
    ];
    for (flag, value) in technique::settings(&some) {
        assert_eq!(manifest.recorded_setting(flag), value, "{flag}");
        if ["--hinm", "--bcr"].contains(&flag) {
            assert_eq!(value, OFF, "{flag}");
        }
    }
    assert!(manifest.settings.is_empty(), "the typed fields hold them");
}

#[test]
fn a_technique_without_a_typed_field_is_recorded_by_flag_and_off_when_absent() {
    let data = DataSource::Mnist(MnistSource::Embedded);
    let mut manifest = Manifest::new(&TrainOptions::new(ModelKind::Lenet5, data, "x"), None);
    assert_eq!(manifest.recorded_setting("--quant"), OFF);
    manifest.record_settings(&[("--quant", "int4".into()), ("--other", OFF.into())]);
    assert_eq!(manifest.recorded_setting("--quant"), "int4");
    assert_eq!(manifest.settings.len(), 1, "an off setting is not written");
    let json = serde_json::to_string(&manifest).unwrap();
    let back: Manifest = serde_json::from_str(&json).unwrap();
    assert_eq!(back.recorded_setting("--quant"), "int4");
    // a manifest without the field reads (every such technique off)
    let mut old: serde_json::Value = serde_json::from_str(&json).unwrap();
    old.as_object_mut().unwrap().remove("settings");
    let mut old: Manifest = serde_json::from_value(old).unwrap();
    assert_eq!(old.recorded_setting("--quant"), OFF);
    // runs before `--matmul` ran Burn's matmul; a kernel chosen is recorded by flag
    assert_eq!(old.recorded_setting("--matmul"), "burn");
    old.record_settings(&[("--matmul", "double-cyclic-cmma".into())]);
    assert_eq!(old.recorded_setting("--matmul"), "double-cyclic-cmma");
}

#[test]
fn every_packed_model_a_technique_writes_is_read_back_by_its_format() {
    for r in REGISTRY.iter().filter(|r| r.packs) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(technique::packed_file(r));
        std::fs::write(&file, b"not a packed model").unwrap();
        // found in the run directory, and as the file itself; read by its format's parser
        for at in [dir.path(), file.as_path()] {
            let Err(err) = technique::Packed::find(at) else {
                panic!("{}: a damaged file was read", r.name);
            };
            let text = err.to_string();
            assert!(text.contains(&file.display().to_string()), "{text}");
            assert!(
                !text.contains("reads no packed"),
                "{}: no reader: {text}",
                r.name
            );
        }
    }
    let empty = tempfile::tempdir().unwrap();
    assert!(technique::Packed::find(empty.path()).unwrap().is_none());
}

/// The rows of `docs/extending.md`'s table of registered techniques, cell by cell.
fn guide_rows() -> Vec<Vec<String>> {
    let guide = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/extending.md");
    let text = std::fs::read_to_string(&guide).unwrap();
    let table = text
        .split("## The registered techniques")
        .nth(1)
        .expect("the guide has its table of registered techniques");
    table
        .lines()
        .skip_while(|l| !l.starts_with("| name"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().replace('`', ""))
                .collect()
        })
        .collect()
}

#[test]
fn the_extension_guide_lists_the_registry_as_it_is() {
    let rows = guide_rows();
    assert_eq!(rows.len(), REGISTRY.len(), "{rows:?}");
    let none = || "–".to_string();
    for (r, row) in REGISTRY.iter().zip(&rows) {
        let expected = [
            r.name.to_string(),
            r.flags.join(", "),
            if r.packs {
                technique::packed_file(r)
            } else {
                none()
            },
            if r.state {
                format!("checkpoint/{}-<epoch>.bin", r.name)
            } else {
                none()
            },
            if r.routes.is_empty() {
                none()
            } else {
                r.routes.join(", ")
            },
        ];
        assert_eq!(row, &expected, "{}", r.name);
    }
    // every registration point the guide names is a file of the workspace
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let guide = std::fs::read_to_string(root.join("docs/extending.md")).unwrap();
    let points: Vec<&str> = guide
        .lines()
        .filter_map(|l| l.strip_prefix("| ")?.split_once(" | `"))
        .filter(|(n, _)| n.parse::<usize>().is_ok())
        .filter_map(|(_, rest)| rest.split('`').next())
        .collect();
    assert_eq!(points.len(), 8, "{points:?}");
    for p in points {
        assert!(root.join(p).is_file(), "{p}");
    }
}

#[test]
fn a_checkpointed_state_is_named_after_its_technique() {
    let file = ember_train::run::state_file(std::path::Path::new("r"), technique::BCR.name, 3);
    assert_eq!(file, std::path::Path::new("r/checkpoint/bcr-3.bin"));
}

#[test]
fn a_packed_model_that_is_not_the_one_its_run_wrote_is_refused() {
    use ember_train::backend::BackendKind;
    use ember_train::train::{EvalOptions, eval};
    let dir = tempfile::tempdir().unwrap();
    let data = DataSource::Mnist(MnistSource::Embedded);
    let mut manifest = Manifest::new(
        &TrainOptions::new(ModelKind::Lenet5, data, dir.path()),
        None,
    );
    manifest.write(dir.path()).unwrap();
    let packed = |model: &str| burn_hinm::file::PackedModel {
        model: model.into(),
        about: Default::default(),
        params: Default::default(),
    };
    let file = dir.path().join(technique::packed_file(&technique::HINM));
    let refusal = || {
        eval(EvalOptions {
            checkpoint: dir.path().to_path_buf(),
            model: None,
            backend: BackendKind::Ndarray,
            multiplier: Multiplier::native(),
            dataset: None,
            data_dir: None,
            batch_size: 8,
            test_limit: None,
            policy: None,
            energy: None,
            max_frames: ember_models::data::sequence::DEFAULT_MAX_FRAMES,
        })
        .unwrap_err()
        .to_string()
    };
    // another run's model copied in
    std::fs::write(&file, packed("lenet300").to_bytes()).unwrap();
    let e = refusal();
    assert!(
        e.contains("model.hinm") && e.contains("holds a lenet300 model"),
        "{e}"
    );
    // the run's model, but not the bytes the run recorded
    std::fs::write(&file, packed("lenet5").to_bytes()).unwrap();
    manifest.record_file(dir.path(), &file, b"the bytes the run wrote");
    manifest.write(dir.path()).unwrap();
    let e = refusal();
    assert!(
        e.contains("model.hinm") && e.contains("its run recorded"),
        "{e}"
    );
}
