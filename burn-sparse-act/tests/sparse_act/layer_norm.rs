//! The fused layer norm (stock `burn::nn::LayerNorm` on `SparseAct<Autodiff<B>>`, reaching the
//! backend's `layer_norm`) against Burn's composite on `Autodiff<B>`: the outputs and the
//! gradients of `x`, `γ` and `β` within 1e-5 relative (sums in another order; for rows of one
//! value, x's gradient within 1e-5 of its terms' scale), with and
//! without `β`, rows of one cube's worth of units and of many values a unit; on ndarray (the
//! host path) and on the CubeCL runtime `EMBER_TEST_RUNTIME` selects.

use burn::backend::{Autodiff, NdArray};
use burn::module::Param;
use burn::nn::LayerNormConfig;
use burn::tensor::Tensor;
use burn::tensor::backend::AutodiffBackend;
use burn_sparse_act::{SparseAct, SparseDevice};
use cubecl_kernels::decorator::KernelBackend;
use cubecl_kernels::testing::{TestBackend, assert_all_close, lcg_data, leaf};

/// A layer norm over the last axis of `[2, rows, d]` (values around 3, so that centring
/// matters), `β` or not: the output and the gradients of `x`, `γ` (and `β`) for `Σ y ⊙ w`.
fn run<B: AutodiffBackend>([rows, d]: [usize; 2], bias: bool, device: &B::Device) -> Vec<Vec<f32>> {
    let mut norm = LayerNormConfig::new(d).with_bias(bias).init::<B>(device);
    norm.gamma = Param::from_tensor(leaf::<B, 1>([d], 2, device));
    if bias {
        norm.beta = Some(Param::from_tensor(leaf::<B, 1>([d], 3, device)));
    }
    let x = leaf::<B, 3>([2, rows, d], 4, device);
    let y = norm.forward(x.clone() * 2.0 + 3.0);
    let w = Tensor::<B, 3>::from_data(lcg_data(&y.dims(), 5), device);
    let grads = (y.clone() * w).sum().backward();
    let grad = |t: Tensor<B, 1>| t.grad(&grads).unwrap().into_data().to_vec().unwrap();
    let mut out = vec![
        y.into_data().to_vec().unwrap(),
        x.grad(&grads).unwrap().into_data().to_vec().unwrap(),
        grad(norm.gamma.val()),
    ];
    out.extend(norm.beta.map(|b| grad(b.val())));
    out
}

/// `d` of 5 (fewer values than units), 192 (DeiT-Ti's: 64 units), 1000 (256 units, four values
/// a unit), over rows of one and several cubes.
const CASES: [[usize; 2]; 4] = [[3, 5], [7, 192], [2, 1000], [1, 1]];

fn fused_equals_stock<B: KernelBackend>(name: &str) {
    for dims in CASES {
        for bias in [true, false] {
            let stock = run::<Autodiff<B>>(dims, bias, &Default::default());
            let device = SparseDevice::<B>::new(Default::default(), Default::default());
            let ours = run::<SparseAct<Autodiff<B>>>(dims, bias, &device);
            assert_eq!(ours.len(), 3 + usize::from(bias));
            let what = format!("{name}, layer norm of {dims:?}, β {bias}");
            let (mut stock, mut ours) = (stock, ours);
            if dims[1] == 1 {
                // rows of one value: x's gradient is zero, the sum of terms of up to
                // |γ·w| / √ε that cancel (γ and w within ±1: `lcg_data`); what is left is
                // their rounding (4.1e-6 from the fused kernel on CUDA, which fuses
                // multiply-adds), so it is compared against the terms' scale, not its own
                let terms = (1.0 / LayerNormConfig::new(1).epsilon.sqrt()) as f32;
                let (s, o) = (stock.remove(1), ours.remove(1));
                for (j, (x, y)) in s.iter().zip(&o).enumerate() {
                    assert!(
                        x.abs().max(y.abs()) <= 1e-5 * terms,
                        "{what}: x's gradient [{j}]: {x} vs {y}"
                    );
                }
            }
            assert_all_close(&stock, &ours, 1e-5, &what);
        }
    }
}

#[test]
fn on_ndarray_the_fused_layer_norm_equals_burns() {
    fused_equals_stock::<NdArray>("ndarray");
}

cubecl_kernels::runtime_test! {
    fn on_cubecl_the_fused_layer_norm_equals_burns<R>() {
        fused_equals_stock::<TestBackend<R>>(R::NAME);
    }
}
