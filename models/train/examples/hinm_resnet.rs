//! HiNM on a ResNet: ResNet-18 at a quarter width (CIFAR stem) trained briefly on the three
//! CIFAR-10 images committed with the repository, pruned to 75 % hierarchical N:M (V = 8) with
//! Gyro-Permutation's output and input permutations, written as the packed `model.hinm`, read
//! back and evaluated through the HiNM sparse product, beside the dense model.
//!
//! `cargo run --release --example hinm_resnet -p ember-train`

mod common;

use burn_approx_mul::Multiplier;
use ember_models::classifier::ModelKind;
use ember_models::data::{DataSource, DatasetKind};
use ember_train::backend::BackendKind;
use ember_train::train::{self, EvalOptions, TrainOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let data = common::cifar_samples(&dir.path().join("cifar"))?;
    let source = || DataSource::new(DatasetKind::Cifar10, Some(data.clone()));
    let run = dir.path().join("dense");
    train::train(TrainOptions {
        epochs: 2,
        batch_size: 3,
        plain: true,
        ..TrainOptions::new(ModelKind::Resnet18CifarW16, source()?, &run)
    })?;

    // the search of every layer but the first and the last, then the packed file
    let pruned = dir.path().join("hinm");
    let report = common::prune_hinm(&run, &pruned)?;
    println!("{}", report.markdown());
    println!(
        "model.mpk {} bytes → model.hinm {} bytes",
        report.dense_bytes, report.packed_bytes
    );

    // the packed file read back: its layers run the HiNM product
    let eval = |checkpoint| {
        train::eval(EvalOptions {
            checkpoint,
            model: Some(ModelKind::Resnet18CifarW16),
            backend: BackendKind::Ndarray,
            multiplier: Multiplier::native(),
            dataset: Some(DatasetKind::Cifar10),
            data_dir: Some(data.clone()),
            batch_size: 3,
            test_limit: None,
            policy: None,
            energy: None,
            max_frames: ember_models::data::sequence::DEFAULT_MAX_FRAMES,
        })
    };
    let (dense, sparse) = (eval(run)?, eval(pruned)?);
    println!(
        "dense: loss {:.4}; HiNM 75 %: loss {:.4}",
        dense.loss, sparse.loss
    );
    Ok(())
}
