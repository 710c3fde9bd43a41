//! The fused softmax (`burn::tensor::activation::softmax` on `SparseAct<Autodiff<B>>`, reaching
//! the backend's `softmax`) against Burn's composite on `Autodiff<B>`: the output and the
//! gradient within 1e-5 relative, along the last axis (the node) and along another (Burn's
//! composite on both sides), on ndarray and on the CubeCL runtime `EMBER_TEST_RUNTIME` selects.

use burn::backend::{Autodiff, NdArray};
use burn::tensor::Tensor;
use burn::tensor::activation::softmax;
use burn::tensor::backend::AutodiffBackend;
use burn_sparse_act::{SparseAct, SparseDevice};
use cubecl_kernels::decorator::KernelBackend;
use cubecl_kernels::testing::{TestBackend, assert_all_close, lcg_data, leaf};

/// Softmax of `[2, 3, rows, d]` scores along `dim`: the output and the gradient of `x` for
/// `Σ y ⊙ w`.
fn run<B: AutodiffBackend>([rows, d]: [usize; 2], dim: usize, device: &B::Device) -> Vec<Vec<f32>> {
    let x = leaf::<B, 4>([2, 3, rows, d], 8, device);
    let y = softmax(x.clone() * 6.0, dim);
    let w = Tensor::<B, 4>::from_data(lcg_data(&y.dims(), 9), device);
    let grads = (y.clone() * w).sum().backward();
    vec![
        y.into_data().to_vec().unwrap(),
        x.grad(&grads).unwrap().into_data().to_vec().unwrap(),
    ]
}

fn fused_equals_stock<B: KernelBackend>(name: &str) {
    for dims in [[65, 65], [3, 5], [2, 1000], [4, 1]] {
        for dim in [3, 2] {
            let stock = run::<Autodiff<B>>(dims, dim, &Default::default());
            let device = SparseDevice::<B>::new(Default::default(), Default::default());
            let ours = run::<SparseAct<Autodiff<B>>>(dims, dim, &device);
            assert_all_close(
                &stock,
                &ours,
                1e-5,
                &format!("{name}, softmax of {dims:?} along {dim}"),
            );
        }
    }
}

#[test]
fn on_ndarray_the_fused_softmax_equals_burns() {
    fused_equals_stock::<NdArray>("ndarray");
}

cubecl_kernels::runtime_test! {
    fn on_cubecl_the_fused_softmax_equals_burns<R>() {
        fused_equals_stock::<TestBackend<R>>(R::NAME);
    }
}
