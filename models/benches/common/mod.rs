//! What the model benches share.

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::Dataset;
use burn::prelude::*;
use ember_models::data::mnist::{self, MnistBatch, MnistBatcher, MnistSource};

/// The first 64 images of the embedded MNIST subset as one batch on `device`.
pub fn batch<B: Backend>(device: &B::Device) -> MnistBatch<B> {
    let items: Vec<_> = mnist::load(&MnistSource::Embedded, false)
        .unwrap()
        .dataset()
        .iter()
        .take(64)
        .collect();
    MnistBatcher.batch(items, device)
}
