//! LeNet-5 trained on the embedded MNIST subset with ApproxTrain's AFM16 multiplier in every
//! product (forward pass and both gradients), then evaluated with the multiplier it was trained
//! with and with exact FP32 products: ApproxTrain's cross-format test, on an unmodified
//! `burn::nn` model under `Autodiff<ApproxMul<NdArray>>`.
//!
//! `cargo run --release --example approx_lenet -p ember-train`

mod common;

use burn::backend::{Autodiff, NdArray};
use burn::data::dataloader::batcher::Batcher;
use burn::module::AutodiffModule;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::prelude::*;
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn_approx_mul::{ApproxDevice, ApproxMul, Multiplier};
use common::{accuracy, batches};
use ember_models::data::mnist::{self, MnistBatcher, MnistSource};
use ember_models::lenet::LeNet5;

/// The approximate backend; training differentiates through it.
type Approx = ApproxMul<NdArray>;
type B = Autodiff<Approx>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let afm16 = ApproxDevice::<NdArray>::new(Default::default(), Multiplier::parse("afm16")?);
    let train = mnist::load(&MnistSource::Embedded, true)?
        .truncate(4000)
        .dataset();
    let test = mnist::load(&MnistSource::Embedded, false)?
        .truncate(1000)
        .dataset();

    B::seed(&afm16, 1);
    let mut model = LeNet5::<B>::init(&afm16);
    let mut optim = AdamConfig::new().init();
    let loss = CrossEntropyLossConfig::new().init(&afm16);
    for epoch in 1..=3 {
        for items in batches(&train, 32) {
            let batch = MnistBatcher.batch(items, &afm16);
            let logits = model.forward(batch.inputs.images());
            let grads = loss.forward(logits, batch.targets).backward();
            let grads = GradientsParams::from_grads(grads, &model);
            model = optim.step(2e-3, model, grads);
        }
        let acc = accuracy(&model.valid(), &test, &MnistBatcher, &afm16);
        println!("epoch {epoch}: test accuracy with AFM16 products {acc:.2}%");
    }

    // Cross-format: the same weights on a device whose products are exact FP32. A device
    // gives its multiplier to the tensors made on it, so the weights are recorded and loaded
    // there (as `ember eval --multiplier fp32` does) rather than moved.
    let fp32 = ApproxDevice::<NdArray>::new(Default::default(), Multiplier::parse("fp32")?);
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let bytes = recorder.record(model.valid().into_record(), ())?;
    let exact = LeNet5::<Approx>::init(&fp32).load_record(recorder.load(bytes, &fp32)?);
    let trained = accuracy(&model.valid(), &test, &MnistBatcher, &afm16);
    let crossed = accuracy(&exact, &test, &MnistBatcher, &fp32);
    println!("trained with AFM16: tested with AFM16 {trained:.2}%, with FP32 {crossed:.2}%");
    Ok(())
}
