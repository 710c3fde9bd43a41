//! The fused optimizers ([`ember_train::fused_optim`]) against Burn's own `Adam` and `Sgd`:
//! the same parameters bit for bit over several steps on ndarray (the host step) and on wgpu
//! (the kernels), with and without weight decay and momentum; parameters that are not f32
//! (f64 on ndarray) through Burn's composed step; and checkpoints written by Burn's optimizers
//! continued by the fused ones.

use burn::backend::{Autodiff, NdArray, Wgpu};
use burn::module::AutodiffModule;
use burn::nn::{Linear, LinearConfig};
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamConfig, GradientsParams, Optimizer, SgdConfig};
use burn::record::{FullPrecisionSettings, NamedMpkBytesRecorder, Recorder};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{DType, Tensor, TensorData};
use cubecl_kernels::decorator::KernelBackend;
use ember_train::fused_optim::{FusedAdam, FusedSgd};

/// A 5 → 3 linear layer from the seeded RNG, its values cast to `dtype`. Casting also draws
/// them once (Burn draws a parameter when it is first read, separately in each clone of a
/// module that has not read it).
fn layer<B: AutodiffBackend>(device: &B::Device, dtype: DType) -> Linear<B> {
    B::seed(device, 7);
    let mut layer = LinearConfig::new(5, 3).init::<B>(device);
    fn cast<B: AutodiffBackend, const D: usize>(t: Tensor<B, D>, dtype: DType) -> Tensor<B, D> {
        Tensor::from_inner(t.inner().cast(dtype)).require_grad()
    }
    layer.weight = layer.weight.map(|w| cast(w, dtype));
    layer.bias = layer.bias.map(|b| b.map(|b| cast(b, dtype)));
    layer
}

/// `model` after `steps` steps of `optim` on a squared loss whose gradient changes every step
/// (steps numbered from `from`).
fn steps<B: AutodiffBackend, O: Optimizer<Linear<B>, B>>(
    optim: &mut O,
    mut model: Linear<B>,
    from: usize,
    steps: usize,
) -> Linear<B> {
    let device = model.weight.val().device();
    for k in from..from + steps {
        let x: Vec<f32> = (0..20)
            .map(|i| ((i * 7 + k * 3) % 11) as f32 / 5.0 - 1.0)
            .collect();
        let x = Tensor::<B, 2>::from_data(TensorData::new(x, [4, 5]), &device)
            .cast(model.weight.val().dtype());
        let y = model.forward(x);
        let loss = (y.clone() * y).sum();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(0.05, model, grads);
    }
    model
}

/// The layer's weight and bias values, as f64 bits (of f32 or f64 values).
fn bits<B: AutodiffBackend>(model: &Linear<B>) -> Vec<u64> {
    let mut v = model
        .weight
        .val()
        .into_data()
        .convert::<f64>()
        .to_vec::<f64>()
        .unwrap();
    v.extend(
        model
            .bias
            .as_ref()
            .unwrap()
            .val()
            .into_data()
            .convert::<f64>()
            .to_vec::<f64>()
            .unwrap(),
    );
    v.into_iter().map(f64::to_bits).collect()
}

fn burn_adam(decay: Option<f32>) -> AdamConfig {
    AdamConfig::new().with_weight_decay(decay.map(WeightDecayConfig::new))
}

fn burn_sgd(momentum: Option<f64>, decay: Option<f32>) -> SgdConfig {
    SgdConfig::new()
        .with_weight_decay(decay.map(WeightDecayConfig::new))
        .with_momentum(momentum.map(|m| MomentumConfig::new().with_momentum(m).with_dampening(0.0)))
}

/// Fused and Burn's optimizers from the same layer of `dtype`, 4 steps each: the same bits.
fn equal_to_burn<B: AutodiffBackend<InnerBackend: KernelBackend>>(what: &str, dtype: DType) {
    let device = Default::default();
    let model = layer::<B>(&device, dtype);
    assert_eq!(
        model.weight.val().dtype(),
        dtype,
        "{what}: the parameters' type"
    );
    for decay in [None, Some(0.01)] {
        let mut burn = burn_adam(decay).init::<B, Linear<B>>();
        let mut fused = FusedAdam::new(0.9, 0.999, 1e-5, decay).init::<B, Linear<B>>();
        let want = bits(&steps(&mut burn, model.clone(), 0, 4));
        let got = bits(&steps(&mut fused, model.clone(), 0, 4));
        assert_eq!(got, want, "{what}: Adam, weight decay {decay:?}");
        for momentum in [None, Some(0.9)] {
            let mut burn = burn_sgd(momentum, decay).init::<B, Linear<B>>();
            let mut fused = FusedSgd::new(momentum.map(|m| (m, 0.0)), decay).init::<B, Linear<B>>();
            let want = bits(&steps(&mut burn, model.clone(), 0, 4));
            let got = bits(&steps(&mut fused, model.clone(), 0, 4));
            assert_eq!(
                got, want,
                "{what}: SGD, momentum {momentum:?}, weight decay {decay:?}"
            );
        }
    }
}

#[test]
fn the_fused_steps_equal_burns_bit_for_bit_on_ndarray() {
    equal_to_burn::<Autodiff<NdArray>>("ndarray", DType::F32);
}

#[test]
fn the_fused_steps_equal_burns_bit_for_bit_on_wgpu() {
    equal_to_burn::<Autodiff<Wgpu>>("wgpu", DType::F32);
}

#[test]
fn parameters_that_are_not_f32_take_burns_composed_step() {
    // f64 parameters on the f32 backend (a backend of another element type would share the
    // process's ndarray device, and its default float type, with the other tests)
    equal_to_burn::<Autodiff<NdArray>>("ndarray, f64 parameters", DType::F64);
}

/// `optim`'s state saved as a checkpoint's bytes, loaded into an optimizer of type `O`.
fn reload<B, M, A, O>(optim: &A, into: O) -> O
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
    A: Optimizer<M, B>,
    O: Optimizer<M, B>,
{
    let recorder = NamedMpkBytesRecorder::<FullPrecisionSettings>::new();
    let bytes = Recorder::<B>::record(&recorder, optim.to_record(), ()).unwrap();
    let record = Recorder::<B>::load(&recorder, bytes, &Default::default()).unwrap();
    into.load_record(record)
}

#[test]
fn checkpoints_of_burns_optimizers_continue_in_the_fused_ones() {
    type B = Autodiff<NdArray>;
    let device = Default::default();
    let model = layer::<B>(&device, DType::F32);

    let mut burn = burn_adam(Some(0.01)).init::<B, Linear<B>>();
    let half = steps(&mut burn, model.clone(), 0, 2);
    let fused: OptimizerAdaptor<FusedAdam, Linear<B>, B> =
        FusedAdam::new(0.9, 0.999, 1e-5, Some(0.01)).init();
    let mut fused = reload(&burn, fused);
    let want = bits(&steps(&mut burn, half.clone(), 2, 2));
    assert_eq!(
        bits(&steps(&mut fused, half, 2, 2)),
        want,
        "Adam's moments and step count"
    );

    let mut burn = burn_sgd(Some(0.9), Some(0.01)).init::<B, Linear<B>>();
    let half = steps(&mut burn, model.clone(), 0, 2);
    let fused: OptimizerAdaptor<FusedSgd, Linear<B>, B> =
        FusedSgd::new(Some((0.9, 0.0)), Some(0.01)).init();
    let mut fused = reload(&burn, fused);
    let want = bits(&steps(&mut burn, half.clone(), 2, 2));
    assert_eq!(
        bits(&steps(&mut fused, half.clone(), 2, 2)),
        want,
        "SGD's velocities"
    );

    // and back: the fused optimizer's checkpoint continues in Burn's
    let mut fused = FusedSgd::new(Some((0.9, 0.0)), Some(0.01)).init::<B, Linear<B>>();
    let half = steps(&mut fused, model, 0, 2);
    let mut burn = reload(
        &fused,
        burn_sgd(Some(0.9), Some(0.01)).init::<B, Linear<B>>(),
    );
    let want = bits(&steps(&mut fused, half.clone(), 2, 2));
    assert_eq!(
        bits(&steps(&mut burn, half, 2, 2)),
        want,
        "the fused SGD's state in Burn's"
    );
}
