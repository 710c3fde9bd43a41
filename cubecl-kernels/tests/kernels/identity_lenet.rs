//! `Autodiff<Decorated<B, Identity>>` trains LeNet-5 exactly like `Autodiff<B>`: the same
//! logits, loss, input gradient and parameter gradients, bit for bit, on ndarray and on the
//! runtime `EMBER_TEST_RUNTIME` selects (wgpu by default).

use burn::backend::{Autodiff, NdArray};
use burn::module::Module;
use burn::prelude::*;
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::backend::AutodiffBackend;
use cubecl_kernels::decorator::{Decorated, DecoratedDevice, Identity};
use cubecl_kernels::testing::TestBackend;
use ember_models::classifier::Classifier;
use ember_models::data::mnist::{self, MnistBatcher, MnistSource};
use ember_models::lenet::LeNet5;

/// Logits, loss, image gradient and every parameter gradient, for fixed parameters and data.
fn forward_backward<B: AutodiffBackend>(params: &[u8], device: &B::Device) -> Vec<Vec<f32>> {
    use burn::data::dataloader::batcher::Batcher;
    use burn::data::dataset::Dataset;
    let record = BinBytesRecorder::<FullPrecisionSettings>::default()
        .load(params.to_vec(), device)
        .unwrap();
    let model = LeNet5::<B>::init(device).load_record(record);
    let items: Vec<_> = mnist::load(&MnistSource::Embedded, false)
        .unwrap()
        .dataset()
        .iter()
        .take(32)
        .collect();
    let mut batch: mnist::MnistBatch<B> = MnistBatcher.batch(items, device);
    let images = batch.inputs.images().require_grad();
    batch.inputs = ember_models::data::Inputs::Images(images.clone());
    let out = model.forward_classification(batch);
    let grads = out.loss.backward();
    let mut all = vec![
        out.output.into_data().to_vec().unwrap(),
        out.loss.into_data().to_vec().unwrap(),
        images.grad(&grads).unwrap().into_data().to_vec().unwrap(),
    ];
    all.extend(cubecl_kernels::testing::param_grads::<B, _>(&model, &grads));
    all
}

fn params() -> Vec<u8> {
    let device = Default::default();
    NdArray::<f32>::seed(&device, 7);
    let model = LeNet5::<NdArray>::init(&device);
    BinBytesRecorder::<FullPrecisionSettings>::default()
        .record(model.into_record(), ())
        .unwrap()
}

fn assert_same(a: Vec<Vec<f32>>, b: Vec<Vec<f32>>) {
    // logits, loss, image gradient, 10 parameter gradients (5 layers × weight and bias).
    assert_eq!(a.len(), 13);
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            x.iter().any(|v| *v != 0.0),
            "tensor {i} is all zeros: the test would prove nothing"
        );
        let xb: Vec<u32> = x.iter().map(|v| v.to_bits()).collect();
        let yb: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
        assert_eq!(xb, yb, "tensor {i} differs");
    }
}

/// burn-ndarray's multi-threaded reductions are not bit-reproducible from run to run (rayon
/// splits work by what threads are idle), so the ndarray comparison runs on one thread: then the
/// plain backend agrees with itself, and any difference is the decorator's.
fn one_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(f)
}

#[test]
fn lenet5_identity_is_bit_exact_on_ndarray() {
    let p = params();
    let plain = one_thread(|| forward_backward::<Autodiff<NdArray>>(&p, &Default::default()));
    let decorated = one_thread(|| {
        forward_backward::<Autodiff<Decorated<NdArray, Identity>>>(&p, &Default::default())
    });
    assert_same(plain, decorated);
}

cubecl_kernels::runtime_test! {
    fn lenet5_identity_is_bit_exact_on_cubecl<R>() {
        let p = params();
        let plain = forward_backward::<Autodiff<TestBackend<R>>>(&p, &Default::default());
        let device = DecoratedDevice::new(Default::default(), ());
        let decorated =
            forward_backward::<Autodiff<Decorated<TestBackend<R>, Identity>>>(&p, &device);
        assert_same(plain, decorated);
    }
}
