//! What the examples share: batches of a dataset, accuracy, and where their data is.

#![allow(dead_code)]

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::Dataset;
use burn::prelude::*;
use ember_models::classifier::Classifier;
use ember_models::data::Batch;
use std::path::{Path, PathBuf};

/// The items of `data` in batches of `size`, in order.
pub fn batches<I>(data: &impl Dataset<I>, size: usize) -> impl Iterator<Item = Vec<I>> + '_ {
    (0..data.len()).step_by(size).map(move |s| {
        (s..data.len().min(s + size))
            .filter_map(|i| data.get(i))
            .collect()
    })
}

/// Test accuracy in percent of `model` on `test`.
pub fn accuracy<B: Backend, I, M: Classifier<B>>(
    model: &M,
    test: &impl Dataset<I>,
    batcher: &impl Batcher<B, I, Batch<B>>,
    device: &B::Device,
) -> f64 {
    let mut correct = 0;
    for items in batches(test, 500) {
        let batch = batcher.batch(items, device);
        let predicted = model.logits(batch.inputs).argmax(1).flatten::<1>(0, 1);
        correct += predicted
            .equal(batch.targets)
            .int()
            .sum()
            .into_scalar()
            .elem::<i64>() as usize;
    }
    100.0 * correct as f64 / test.len() as f64
}

/// The workspace's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A CIFAR-10 ImageFolder (`train/`, `test/`, ten class directories) under `dir`, made of the
/// three real CIFAR-10 test images committed in `models/testdata/cifar10` (labels 3, 8, 8).
pub fn cifar_samples(dir: &Path) -> std::io::Result<PathBuf> {
    let samples = root().join("models/testdata/cifar10");
    let classes = ember_models::data::cifar::CLASS_NAMES;
    for split in ["train", "test"] {
        for class in classes {
            std::fs::create_dir_all(dir.join(split).join(class))?;
        }
        for (file, label) in [
            ("cifar10_00_3.png", 3),
            ("cifar10_01_8.png", 8),
            ("cifar10_02_8.png", 8),
        ] {
            std::fs::copy(
                samples.join(file),
                dir.join(split).join(classes[label]).join(file),
            )?;
        }
    }
    Ok(dir.to_path_buf())
}

/// Prunes the run in `run` to 75 % HiNM (V = 8, Gyro-Permutation, seed 1; the first and the last
/// layer dense) into `out`.
pub fn prune_hinm(run: &Path, out: &Path) -> ember_train::Result<ember_train::hinm::PruneReport> {
    ember_train::hinm::prune(ember_train::hinm::PruneOptions {
        checkpoint: run.to_path_buf(),
        level: "75:v8".parse().expect("a level"),
        perm: burn_hinm::gyro::Method::Gyro,
        seed: 1,
        out: out.to_path_buf(),
        policy: None,
        model: None,
    })
}
