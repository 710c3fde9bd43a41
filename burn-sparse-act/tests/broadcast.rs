//! The fused broadcast nodes against stock Burn: PReLU (stock `burn::nn::PRelu`, reaching the
//! backend's `prelu`) and the per-channel affine ([`burn_sparse_act::fused_affine`]) give the
//! outputs and gradients of Burn's composites within 1e-6 relative (sums in another order),
//! on ndarray (the host path) and on the CubeCL runtime `EMBER_TEST_RUNTIME` selects (the
//! kernels; wgpu by default), both vectorisation branches, and over ApproxMul.

use burn::backend::{Autodiff, NdArray};
use burn::nn::PReluConfig;
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
