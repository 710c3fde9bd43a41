//! Every Ember technique on one model through one backend type: the small ResMLP trained on the
//! three CIFAR-10 images committed with the repository on Ember's training stack
//! (`ember_train::backend::NdarrayStack`, that is
//! `SparseAct<Autodiff<Bcr<Hinm<ApproxMul<NdArray>>>>>`), with
//!
//! - ApproxTrain's AFM16 multiplier in every product but those of the first and the last layer
//!   (a per-layer policy, `first-last-exact`),
//! - SparseAct keeping every linear layer's saved input at 20 % of its 64-wide blocks (0.8:64),
//! - the fused broadcast kernels of ResMLP's affines and layer-scales,
//!
//! then pruned to 75 % HiNM and evaluated through the HiNM sparse product. The effects reports
//! (training's, then evaluation's) say what each layer ran.
//!
//! `cargo run --release --example stack -p ember-train`

mod common;

use burn_approx_mul::Multiplier;
use burn_sparse_act::{Policy, Pruning};
use ember_models::classifier::ModelKind;
use ember_models::data::{DataSource, DatasetKind};
use ember_train::backend::BackendKind;
use ember_train::policy::LayerPolicy;
use ember_train::train::{self, EvalOptions, TrainOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let data = common::cifar_samples(&dir.path().join("cifar"))?;
    let run = dir.path().join("run");
    let report = train::train(TrainOptions {
        multiplier: Multiplier::parse("afm16")?,
        sparse_act: Policy::uniform(Pruning::parse("0.8:64")?),
        policy: Some(LayerPolicy::from_arg("first-last-exact")?),
        epochs: 2,
        batch_size: 3,
        plain: true,
        ..TrainOptions::new(
            ModelKind::ResmlpSmall,
            DataSource::new(DatasetKind::Cifar10, Some(data.clone()))?,
            &run,
        )
    })?;
    println!(
        "trained: {} epochs, run in {}",
        report.epochs.len(),
        report.out.display()
    );
    println!("{}", std::fs::read_to_string(run.join("effects.md"))?);

    let pruned = dir.path().join("hinm");
    common::prune_hinm(&run, &pruned)?;
    // evaluation prints its own effects report: HiNM's packed layers (an approximate multiplier
    // would densify them: the report would say so)
    let eval = train::eval(EvalOptions {
        checkpoint: pruned,
        model: None,
        backend: BackendKind::Ndarray,
        multiplier: Multiplier::native(),
        dataset: Some(DatasetKind::Cifar10),
        data_dir: Some(data),
        batch_size: 3,
        test_limit: None,
        policy: None,
        energy: None,
        max_frames: ember_models::data::sequence::DEFAULT_MAX_FRAMES,
    })?;
    println!("HiNM 75 %: test loss {:.4}", eval.loss);
    Ok(())
}
