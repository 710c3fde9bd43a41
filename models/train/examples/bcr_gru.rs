//! BCR on the GRU: the 2 × 256 GRU speaker classifier trained on UCI's Japanese Vowels with
//! GRIM's ADMM penalty toward 10× block column-row sparsity (blocks of 4 output rows × 16
//! inputs), hard-pruned and retrained masked; the run's packed `model.bcr` (BCRC format) is then
//! evaluated through the reordered sparse product.
//!
//! `cargo run --release --example bcr_gru -p ember-train [-- DIR]`, DIR holding
//! `JapaneseVowels_TRAIN.ts` and `JapaneseVowels_TEST.ts` (default: `../shared/datasets/japanese-vowels`
//! beside the repository).

mod common;

use burn_approx_mul::Multiplier;
use ember_models::classifier::ModelKind;
use ember_models::data::{DataSource, DatasetKind};
use ember_train::backend::BackendKind;
use ember_train::bcr::BcrTrain;
use ember_train::train::{self, EvalOptions, TrainOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data = std::env::args()
        .nth(1)
        .map(Into::into)
        .unwrap_or_else(|| common::root().join("../shared/datasets/japanese-vowels"));
    let dir = tempfile::tempdir()?;
    let run = dir.path().join("gru-bcr");
    let report = train::train(TrainOptions {
        epochs: 6,
        batch_size: 16,
        lr: 3e-3,
        plain: true,
        bcr: Some(BcrTrain {
            level: "10x:4x16".parse()?,
            admm_every: Some(1),
            per_epoch: 4,
            smooth: false,
            retrain: 2,
            from: None,
        }),
        ..TrainOptions::new(
            ModelKind::Gru,
            DataSource::new(DatasetKind::JapaneseVowels, Some(data.clone()))?,
            &run,
        )
    })?;
    if let Some(test) = report.test {
        println!("masked dense model: test accuracy {:.2}%", test.accuracy);
    }
    // the run directory's model.bcr: every pruned layer runs the BCRC product
    let packed = train::eval(EvalOptions {
        checkpoint: run.join("model.bcr"),
        model: None,
        backend: BackendKind::Ndarray,
        multiplier: Multiplier::native(),
        dataset: None,
        data_dir: Some(data),
        batch_size: 64,
        test_limit: None,
        policy: None,
        energy: None,
        max_frames: ember_models::data::sequence::DEFAULT_MAX_FRAMES,
    })?;
    println!("packed BCRC model: test accuracy {:.2}%", packed.accuracy);
    Ok(())
}
