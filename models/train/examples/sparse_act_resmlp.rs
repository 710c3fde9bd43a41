//! SparseAct on the small ResMLP: a few training steps on the three CIFAR-10 images committed
//! with the repository under `SparseAct<Autodiff<NdArray>>` with every linear layer's saved
//! input pruned to 20 % of its 64-wide blocks (0.8:64), then the training memory of a batch of
//! 32, dense beside 0.8:64, measured from the allocator (`ember memory`'s table).
//!
//! `cargo run --release --example sparse_act_resmlp -p ember-train`

mod common;

use burn::backend::{Autodiff, NdArray};
use burn::data::dataloader::batcher::Batcher;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::prelude::*;
use burn_approx_mul::Multiplier;
use burn_sparse_act::{Policy, Pruning, SparseAct, SparseDevice};
use ember_models::data::cifar::{self, CifarBatcher, CifarItem};
use ember_models::resmlp::ResMlpConfig;
use ember_train::backend::BackendKind;
use ember_train::memory::{self, CountingAllocator, MemoryModel, MemoryOptions};

/// Counts live heap bytes: the memory table's source on ndarray.
#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator;

type B = SparseAct<Autodiff<NdArray>>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pruning = Pruning::parse("0.8:64")?;
    let device = SparseDevice::<NdArray>::new(Default::default(), Policy::uniform(pruning));
    let samples = common::root().join("models/testdata/cifar10");
    let items = [
        ("cifar10_00_3.png", 3),
        ("cifar10_01_8.png", 8),
        ("cifar10_02_8.png", 8),
    ]
    .into_iter()
    .map(|(file, label)| {
        Ok(CifarItem {
            pixels: cifar::decode_image(&samples.join(file))?,
            label,
        })
    })
    .collect::<Result<Vec<_>, ember_models::Error>>()?;

    B::seed(&device, 3);
    let mut model = ResMlpConfig::small(32, 4, 10).init::<B>(&device);
    let mut optim = AdamConfig::new().init();
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    for step in 1..=5 {
        let batch = CifarBatcher::plain().batch(items.clone(), &device);
        let loss = loss_fn.forward(model.forward(batch.inputs.images()), batch.targets);
        println!(
            "step {step}: loss {:.4}",
            loss.clone().into_scalar().elem::<f32>()
        );
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(1e-3, model, grads);
    }

    let report = memory::measure(MemoryOptions {
        model: MemoryModel::ResmlpSmall,
        image_size: 32,
        patch_size: None,
        classes: None,
        batch: 32,
        policies: vec![("0.8:64".into(), Policy::uniform(pruning))],
        backend: BackendKind::Ndarray,
        multiplier: Multiplier::native(),
    })?;
    println!("{}", report.markdown());
    Ok(())
}
