//! The zoo's batch norms ([`ember_models::broadcast::batch_norm`]) on Ember's stacks, which
//! register the fused batch norm, against `burn::nn::BatchNorm` on the plain backend: the
//! same outputs, gradients and running statistics within 1e-5 relative in training, the same
//! outputs in inference (the module's `valid()` on the stack's inference backend), on ndarray
//! and wgpu.

use burn::backend::{Autodiff, NdArray, Wgpu};
use burn::module::{AutodiffModule, Param, RunningState};
use burn::nn::{BatchNorm, BatchNormConfig};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{DType, Tensor, TensorData};
use burn_approx_mul::Multiplier;
use cubecl_kernels::decorator::KernelBackend;
use cubecl_kernels::testing::{assert_all_close, lcg_data};
use ember_models::broadcast::{batch_norm, is_batch_norm_fused};
use ember_train::backend::{Decorated, Stack, stack_device};

fn tensor<B: Backend, const D: usize>(
    shape: [usize; D],
    seed: u64,
    device: &B::Device,
) -> Tensor<B, D> {
    Tensor::from_data(lcg_data(&shape, seed), device)
}

/// A batch norm of 6 channels with `γ`, `β` and running statistics from data.
fn module<B: Backend>(device: &B::Device) -> BatchNorm<B> {
    let mut norm = BatchNormConfig::new(6).init::<B>(device);
    norm.gamma = Param::from_tensor(tensor([6], 1, device));
    norm.beta = Param::from_tensor(tensor([6], 2, device));
    norm
}

/// Two training steps through [`batch_norm`] (the loss `Σ y ⊙ w`), then an inference forward
/// of the module's `valid()`: outputs, gradients of `x`, `γ` and `β`, running statistics.
fn run<B: AutodiffBackend>(device: &B::Device) -> Vec<Vec<f32>> {
    let values = |t: Tensor<B, 1>| t.into_data().to_vec::<f32>().unwrap();
    let norm = module::<B>(device);
    let mut out = Vec::new();
    for step in 0..2 {
        let x = tensor::<B, 4>([4, 6, 5, 5], 3 + step, device).require_grad();
        let y = batch_norm(&norm, x.clone() * 3.0 - 2.0);
        let w = Tensor::<B, 4>::from_data(lcg_data(&y.dims(), 10 + step), device);
        let grads = (y.clone() * w).sum().backward();
        let grad = |t: Tensor<B, 1>| t.grad(&grads).unwrap().into_data().to_vec().unwrap();
        out.push(y.into_data().to_vec().unwrap());
        out.push(x.grad(&grads).unwrap().into_data().to_vec().unwrap());
        out.push(grad(norm.gamma.val()));
        out.push(grad(norm.beta.val()));
    }
    out.push(values(norm.running_mean.value()));
    out.push(values(norm.running_var.value()));
    let valid = norm.valid();
    let x = Tensor::<B::InnerBackend, 4>::from_data(lcg_data(&[3, 6, 2, 4], 20), device);
    out.push(batch_norm(&valid, x).into_data().to_vec().unwrap());
    out
}

fn stack_equals_burn<B: KernelBackend>(name: &str) {
    let device = stack_device::<B>(Multiplier::native(), Default::default());
    assert_eq!(
        is_batch_norm_fused::<Stack<B>>(),
        (true, false),
        "{name}: training hook"
    );
    assert_eq!(
        is_batch_norm_fused::<Decorated<B>>(),
        (false, true),
        "{name}: inference hook"
    );
    assert_eq!(
        is_batch_norm_fused::<Autodiff<B>>(),
        (false, false),
        "{name}: plain backend"
    );
    let ours = run::<Stack<B>>(&device);
    let burn = run::<Autodiff<B>>(&Default::default());
    assert_all_close(&burn, &ours, 1e-5, &format!("{name}: fused batch norm"));
}

#[test]
fn on_ndarray_the_stacks_batch_norm_equals_burns() {
    stack_equals_burn::<NdArray>("ndarray");
}

#[test]
fn on_wgpu_the_stacks_batch_norm_equals_burns() {
    stack_equals_burn::<Wgpu>("wgpu");
}

#[test]
fn a_batch_norm_of_another_width_keeps_burns_error() {
    // γ of 6 values on 4 channels: no hook is called, Burn's composite refuses it as it does
    // on any backend (its shape panic, not a kernel's)
    let device = stack_device::<NdArray>(Multiplier::native(), Default::default());
    let norm = module::<Stack<NdArray>>(&device);
    let x = Tensor::<Stack<NdArray>, 4>::from_data(
        TensorData::new(vec![1.0f32; 32], [2, 4, 2, 2]),
        &device,
    );
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| batch_norm(&norm, x)));
    assert!(err.is_err(), "a γ of 6 values for 4 channels is refused");
}

#[test]
fn tensors_that_are_not_f32_run_burns_batch_norm() {
    // the fused kernels take f32: an f64 module and input on the stack run Burn's composite,
    // with Burn's values, where the fused node would refuse them
    fn run<B: AutodiffBackend>(device: &B::Device) -> Vec<f64> {
        let f64 = DType::F64;
        let mut norm = module::<B>(device);
        // cast on the inner backend: a cast of the tracked parameter is not a leaf
        let leaf = |t: Tensor<B, 1>| Param::from_tensor(Tensor::from_inner(t.inner().cast(f64)));
        norm.gamma = leaf(norm.gamma.val());
        norm.beta = leaf(norm.beta.val());
        norm.running_mean = RunningState::new(norm.running_mean.value().cast(f64));
        norm.running_var = RunningState::new(norm.running_var.value().cast(f64));
        let x = tensor::<B, 4>([2, 6, 3, 3], 4, device).cast(f64);
        let y = batch_norm(&norm, x);
        assert_eq!(y.dtype(), f64);
        y.into_data().convert::<f64>().to_vec().unwrap()
    }
    let device = stack_device::<NdArray>(Multiplier::native(), Default::default());
    let ours = run::<Stack<NdArray>>(&device);
    let burn = run::<Autodiff<NdArray>>(&Default::default());
    for (a, b) in ours.iter().zip(&burn) {
        assert!((a - b).abs() <= 1e-9 * (1.0 + b.abs()), "{a} vs {b}");
    }
}
