//! The fused broadcast nodes against stock Burn: PReLU (stock `burn::nn::PRelu`, reaching the
//! backend's `prelu`) and the per-channel affine ([`burn_sparse_act::fused_affine`]) give the
//! outputs and gradients of Burn's composites within 1e-6 relative (sums in another order),
//! batch norm ([`burn_sparse_act::fused_batch_norm`]) those of `burn::nn::BatchNorm` and its
//! running statistics within 1e-5; on ndarray (the host path) and on the CubeCL runtime
//! `EMBER_TEST_RUNTIME` selects (the kernels; wgpu by default), both vectorisation branches,
//! and over ApproxMul.

use burn::backend::{Autodiff, NdArray};
use burn::module::Param;
use burn::nn::{BatchNorm, BatchNormConfig, PReluConfig};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Tensor, TensorPrimitive};
use burn_approx_mul::{ApproxDevice, ApproxMul, Multiplier};
use burn_sparse_act::{SparseAct, SparseDevice};
use cubecl_kernels::decorator::KernelBackend;
use cubecl_kernels::testing::{TestBackend, assert_all_close, lcg_data, leaf};

/// The affine `x · α + β` on `x`'s last axis, one way or the other.
type AffineFn<B> = fn(Tensor<B, 3>, Tensor<B, 1>, Option<Tensor<B, 1>>) -> Tensor<B, 3>;

fn composite<B: Backend>(
    x: Tensor<B, 3>,
    a: Tensor<B, 1>,
    b: Option<Tensor<B, 1>>,
) -> Tensor<B, 3> {
    let y = x * a.unsqueeze::<3>();
    match b {
        Some(b) => y + b.unsqueeze::<3>(),
        None => y,
    }
}

fn fused<B: KernelBackend>(
    x: Tensor<SparseAct<Autodiff<B>>, 3>,
    a: Tensor<SparseAct<Autodiff<B>>, 1>,
    b: Option<Tensor<SparseAct<Autodiff<B>>, 1>>,
) -> Tensor<SparseAct<Autodiff<B>>, 3> {
    let y = burn_sparse_act::fused_affine::<
        B,
        burn::backend::autodiff::checkpoint::strategy::NoCheckpointing,
    >(
        x.into_primitive().tensor(),
        a.into_primitive().tensor(),
        b.map(|b| b.into_primitive().tensor()),
        2,
    );
    Tensor::from_primitive(TensorPrimitive::Float(y))
}

/// PReLU(channels) on `[2, channels, side, side]` (inner `side²`), PReLU(1), then the affine
/// and a scale over the channels moved last: the output and the gradient of every input for
/// the loss `Σ y ⊙ w`.
fn run<B: AutodiffBackend>(
    channels: usize,
    side: usize,
    affine: AffineFn<B>,
    device: &B::Device,
) -> Vec<Vec<f32>> {
    let x = leaf::<B, 4>([2, channels, side, side], 1, device);
    let mut prelu = PReluConfig::new()
        .with_num_parameters(channels)
        .init::<B>(device);
    prelu.alpha = burn::module::Param::from_tensor(leaf::<B, 1>([channels], 2, device));
    let single = PReluConfig::new().with_alpha(0.1).init::<B>(device);
    let y = single.forward(prelu.forward(x.clone()));
    let y = y.reshape([2, channels, side * side]).swap_dims(1, 2);
    let alpha = leaf::<B, 1>([channels], 3, device);
    let beta = leaf::<B, 1>([channels], 4, device);
    let gamma = leaf::<B, 1>([channels], 5, device);
    let z = affine(y, alpha.clone(), Some(beta.clone()));
    let z = affine(z, gamma.clone(), None);
    let w = Tensor::<B, 3>::from_data(lcg_data(&z.dims(), 99), device);
    let grads = (z.clone() * w).sum().backward();
    let grad = |t: Tensor<B, 1>| t.grad(&grads).unwrap().into_data().to_vec().unwrap();
    vec![
        z.into_data().to_vec().unwrap(),
        x.grad(&grads).unwrap().into_data().to_vec().unwrap(),
        grad(prelu.alpha.val()),
        grad(single.alpha.val()),
        grad(alpha),
        grad(beta),
        grad(gamma),
    ]
}

/// Inner sizes 49 (element-wise) and 16 (vectorised packs of 4), 1 (channels last).
const CASES: [(usize, usize); 3] = [(3, 7), (5, 4), (6, 1)];

/// Every case on `Autodiff<B>` (Burn's composites) and on `SparseAct<Autodiff<B>>` (the fused
/// nodes).
fn fused_equals_stock<B: KernelBackend>(name: &str) {
    for (channels, side) in CASES {
        let device = Default::default();
        let stock = run::<Autodiff<B>>(channels, side, composite, &device);
        let device = SparseDevice::<B>::new(Default::default(), Default::default());
        let ours = run::<SparseAct<Autodiff<B>>>(channels, side, fused::<B>, &device);
        // every value within 1e-6 of the largest magnitude of its tensor
        let what = format!("{name}, {channels} channels of {side}²");
        assert_all_close(&stock, &ours, 1e-6, &what);
    }
}

#[test]
fn on_ndarray_the_fused_nodes_equal_burns_composites() {
    fused_equals_stock::<NdArray>("ndarray");
}

cubecl_kernels::runtime_test! {
    fn on_cubecl_the_fused_kernels_equal_burns_composites<R>() {
        fused_equals_stock::<TestBackend<R>>(R::NAME);
    }
}

#[test]
fn over_approx_mul_the_fused_nodes_are_unchanged() {
    // ApproxMul approximates contractions only: an element-wise product stays exact
    let (channels, side) = CASES[1];
    let device = Default::default();
    let stock = run::<Autodiff<NdArray>>(channels, side, composite, &device);
    let approx = ApproxDevice::new(Default::default(), Multiplier::parse("afm16").unwrap());
    let device = SparseDevice::<ApproxMul<NdArray>>::new(approx, Default::default());
    let ours = run::<SparseAct<Autodiff<ApproxMul<NdArray>>>>(
        channels,
        side,
        fused::<ApproxMul<NdArray>>,
        &device,
    );
    assert_all_close(&stock, &ours, 1e-6, "over ApproxMul");
}

/// A batch norm's training forward, one way or the other.
type NormFn<B> = fn(&BatchNorm<B>, Tensor<B, 4>) -> Tensor<B, 4>;

fn stock_norm<B: Backend>(norm: &BatchNorm<B>, x: Tensor<B, 4>) -> Tensor<B, 4> {
    norm.forward(x)
}

fn fused_norm<B: KernelBackend>(
    norm: &BatchNorm<SparseAct<Autodiff<B>>>,
    x: Tensor<SparseAct<Autodiff<B>>, 4>,
) -> Tensor<SparseAct<Autodiff<B>>, 4> {
    let p = |t: Tensor<SparseAct<Autodiff<B>>, 1>| t.into_primitive().tensor();
    let per_channel = [
        p(norm.gamma.val()),
        p(norm.beta.val()),
        p(norm.running_mean.value_sync()),
        p(norm.running_var.value_sync()),
    ];
    let (y, mean, var) = burn_sparse_act::fused_batch_norm::<
        B,
        burn::backend::autodiff::checkpoint::strategy::NoCheckpointing,
    >(
        x.into_primitive().tensor(),
        per_channel,
        norm.epsilon,
        norm.momentum,
    );
    norm.running_mean
        .update(Tensor::from_primitive(TensorPrimitive::Float(mean)));
    norm.running_var
        .update(Tensor::from_primitive(TensorPrimitive::Float(var)));
    Tensor::from_primitive(TensorPrimitive::Float(y))
}

/// Two training steps of a batch norm over `[batch, channels, side, side]` (values around 3,
/// so that centring matters): the outputs, the gradients of `x`, `γ` and `β` for the loss
/// `Σ y ⊙ w`, and the running statistics after both.
fn run_norm<B: AutodiffBackend>(
    [batch, channels, side]: [usize; 3],
    forward: NormFn<B>,
    device: &B::Device,
) -> Vec<Vec<f32>> {
    let mut norm = BatchNormConfig::new(channels).init::<B>(device);
    norm.gamma = Param::from_tensor(leaf::<B, 1>([channels], 2, device));
    norm.beta = Param::from_tensor(leaf::<B, 1>([channels], 3, device));
    let mut out = Vec::new();
    for step in 0..2 {
        let x = leaf::<B, 4>([batch, channels, side, side], 10 + step, device);
        let y = forward(&norm, x.clone() * 2.0 + 3.0);
        let w = Tensor::<B, 4>::from_data(lcg_data(&y.dims(), 20 + step), device);
        let grads = (y.clone() * w).sum().backward();
        let grad = |t: Tensor<B, 1>| t.grad(&grads).unwrap().into_data().to_vec().unwrap();
        out.extend([
            y.into_data().to_vec().unwrap(),
            x.grad(&grads).unwrap().into_data().to_vec().unwrap(),
            grad(norm.gamma.val()),
            grad(norm.beta.val()),
        ]);
    }
    out.push(norm.running_mean.value().into_data().to_vec().unwrap());
    out.push(norm.running_var.value().into_data().to_vec().unwrap());
    out
}

/// Inner sizes 49 (element-wise), 16 (packs of 4), 1 (one value a channel per sample), and a
/// channel of several segments (8 · 64² values).
const NORM_CASES: [[usize; 3]; 4] = [[3, 5, 7], [4, 3, 4], [16, 6, 1], [8, 2, 64]];

fn fused_norm_equals_stock<B: KernelBackend>(name: &str) {
    for dims in NORM_CASES {
        let stock = run_norm::<Autodiff<B>>(dims, stock_norm, &Default::default());
        let device = SparseDevice::<B>::new(Default::default(), Default::default());
        let ours = run_norm::<SparseAct<Autodiff<B>>>(dims, fused_norm::<B>, &device);
        assert_all_close(
            &stock,
            &ours,
            1e-5,
            &format!("{name}, batch norm of {dims:?}"),
        );
    }
}

#[test]
fn on_ndarray_the_fused_batch_norm_equals_burns() {
    fused_norm_equals_stock::<NdArray>("ndarray");
}

cubecl_kernels::runtime_test! {
    fn on_cubecl_the_fused_batch_norm_equals_burns<R>() {
        fused_norm_equals_stock::<TestBackend<R>>(R::NAME);
    }
}
