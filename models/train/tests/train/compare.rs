//! `ember_train::compare`.

use ember_models::classifier::ModelKind;
use ember_models::data::{DataSource, cifar::CifarSource};
use ember_train::compare::*;
use ember_train::run::Manifest;
use ember_train::train::TrainOptions;
use plotters::style::RGBColor;

/// A one-epoch ResMLP-small run's options under the SparseAct `policy`.
fn options(policy: &str) -> TrainOptions {
    let data = DataSource::Cifar10(CifarSource::Binary("test".into()));
    TrainOptions {
        sparse_act: policy.parse().unwrap(),
        epochs: 1,
        lr: 1e-3,
        seed: 1,
        ..TrainOptions::new(ModelKind::ResmlpSmall, data, "x")
    }
}

fn run(dir: &str, policy: &str, accuracy: f64) -> RunSummary {
    RunSummary {
        dir: dir.into(),
        manifest: Manifest {
            conv: None,
            data: "test".into(),
            epoch_seconds: vec![1.0],
            completed_epochs: 1,
            test_accuracy: Some(accuracy),
            test_loss: Some(1.0),
            tested_epoch: Some(1),
            ..Manifest::new(&options(policy), None)
        },
        epochs: Vec::new(),
    }
}

#[test]
fn every_run_is_listed_and_those_off_the_grid_say_why() {
    let comparison = Comparison {
        runs: vec![
            run("dense", "off", 50.0),
            run("a", "0.5:16", 49.0),
            run("b", "0.8:64", 45.5),
            run("scales", "0.5:16 +scales", 48.0),
            run("layer", "0.5:16 384x10=0:1", 47.0),
            run("stoch", "0.8:64 stochastic=0.1", 44.0),
            run("again", "0.5:16", 30.0),
        ],
    };
    let grid = comparison.grid().unwrap();
    assert_eq!(grid.sparsities, [0.5, 0.8]);
    assert_eq!(grid.blocks, [16, 64]);
    assert_eq!(grid.cells, [[Some(-1.0), None], [None, Some(-4.5)]]);
    let md = comparison.markdown();
    for dir in ["dense", "a", "b", "scales", "layer", "stoch", "again"] {
        assert!(md.contains(&format!("| `{dir}` |")), "{dir} missing: {md}");
    }
    for why in [
        "- `scales`: policy `0.5:16 +scales`: it prunes per-channel scales too",
        "- `layer`: policy `0.5:16 384x10=0:1`: it has per-layer overrides",
        "- `stoch`: policy `0.8:64 stochastic=0.1`: it is stochastic",
        "- `again`: S:B 0.5:16 is already on the grid from `a`",
    ] {
        assert!(md.contains(why), "{why} missing: {md}");
    }
    let no_dense = Comparison {
        runs: comparison.runs[1..3].to_vec(),
    };
    assert!(no_dense.grid().is_none());
    assert!(no_dense.markdown().contains("found 0"));
}

#[test]
fn colours_diverge_from_white() {
    assert_eq!(diverging(0.0, 1.0), RGBColor(255, 255, 255));
    assert_eq!(diverging(-5.0, 1.0), RGBColor(214, 39, 40));
    assert_eq!(diverging(2.0, 2.0), RGBColor(44, 160, 44));
}
