//! LeNet-5 with PReLU(channels) at every activation (stock `burn::nn::PRelu`), trained twice on
//! the embedded MNIST subset: under plain `Autodiff<ApproxMul<NdArray>>`, where Burn's `prelu` is
//! a composite of three element-wise ops (three autodiff nodes), and under
//! `SparseAct<Autodiff<ApproxMul<NdArray>>>`, the top of every Ember stack, which records each
//! PReLU as one node: one broadcast pass forward, one fused pass backward (`dx` and the
//! per-channel `dα` sums together). Both run native products with Ember's GEMM convolutions
//! (`ConvRoute::Gemm`, what `ember` runs by default), so the convolutions cost the same on both
//! sides. The same seed gives the same model; the losses agree to rounding.
//!
//! `cargo run --release --example prelu_broadcast -p ember-train`

mod common;

use burn::backend::{Autodiff, NdArray};
use burn::data::dataloader::batcher::Batcher;
use burn::module::AutodiffModule;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn_approx_mul::{ApproxDevice, ApproxMul, ConvRoute, Multiplier};
use burn_sparse_act::{Policy, SparseAct, SparseDevice};
use common::{accuracy, batches};
use ember_models::act::Activation;
use ember_models::data::mnist::{self, MnistBatcher, MnistSource};
use ember_models::lenet::LeNet5;
use std::time::Instant;

/// Trains a PReLU LeNet-5 on `device` for one epoch of 3,000 images: the last loss, the test
/// accuracy and the seconds per epoch.
fn train<B: AutodiffBackend>(
    device: &B::Device,
) -> Result<(f32, f64, f64), Box<dyn std::error::Error>> {
    let train = mnist::load(&MnistSource::Embedded, true)?
        .truncate(3000)
        .dataset();
    let test = mnist::load(&MnistSource::Embedded, false)?.dataset();
    B::seed(device, 7);
    let mut model = LeNet5::<B>::init_with(Activation::Prelu, device);
    let mut optim = AdamConfig::new().init();
    let loss_fn = CrossEntropyLossConfig::new().init(device);
    let (start, mut last) = (Instant::now(), 0.0);
    for items in batches(&train, 32) {
        let batch = MnistBatcher.batch(items, device);
        let loss = loss_fn.forward(model.forward(batch.inputs.images()), batch.targets);
        last = loss.clone().into_scalar().elem::<f32>();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(2e-3, model, grads);
    }
    let seconds = start.elapsed().as_secs_f64();
    let inner_device = device.clone();
    let acc = accuracy(&model.valid(), &test, &MnistBatcher, &inner_device);
    Ok((last, acc, seconds))
}

/// Native products with Ember's GEMM convolutions under both trainings.
type Native = ApproxMul<NdArray>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let native = ApproxDevice::<NdArray>::new(
        Default::default(),
        Multiplier::native().with_conv(ConvRoute::Gemm),
    );
    let (loss, acc, secs) = train::<Autodiff<Native>>(&native)?;
    println!("Burn's composite PReLU:      last loss {loss:.4}, test {acc:.2}%, {secs:.1} s");
    let fused = SparseDevice::<Native>::new(native, Policy::default());
    let (loss, acc, secs) = train::<SparseAct<Autodiff<Native>>>(&fused)?;
    println!("Ember's fused PReLU kernels: last loss {loss:.4}, test {acc:.2}%, {secs:.1} s");
    Ok(())
}
