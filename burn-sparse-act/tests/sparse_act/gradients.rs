//! Gradients under SparseAct: at s = 0 it is the plain autodiff backend (every parameter's
//! gradient, bit for bit); at s > 0 the weight gradient is the one computed from the masked
//! input and the input gradient is unchanged; over ApproxMul the masked product is still
//! approximate; on ndarray and on the CubeCL runtime `EMBER_TEST_RUNTIME` selects (wgpu by
//! default).

use burn::backend::{Autodiff, NdArray};
use burn::module::{Module, Param};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Tensor, TensorData, activation::gelu, module::linear};
use burn_approx_mul::{ApproxDevice, ApproxMul, Multiplier};
use burn_sparse_act::{Policy, Pruning, SparseAct, SparseDevice};
use cubecl_kernels::bsr::host;
use cubecl_kernels::testing::{TestBackend, assert_all_close};

/// Deterministic data in [-1, 1).
fn data(shape: &[usize], seed: u64) -> Vec<f32> {
    cubecl_kernels::testing::uniform(shape.iter().product(), seed)
}

fn tensor<B: Backend, const D: usize>(
    v: Vec<f32>,
    shape: [usize; D],
    dev: &B::Device,
) -> Tensor<B, D> {
    Tensor::from_data(TensorData::new(v, shape), dev)
}

/// A ResMLP-like block of stock `burn::nn` layers: a cross-patch linear (on the transposed
/// tensor), then fc1 → GELU → fc2, residuals, a classifier on the mean.
#[derive(Module, Debug)]
struct Net<B: Backend> {
    patch: Linear<B>,
    fc1: Linear<B>,
    fc2: Linear<B>,
    head: Linear<B>,
    scale: Param<Tensor<B, 1>>,
}

const PATCHES: usize = 6;
const DIM: usize = 8;

impl<B: Backend> Net<B> {
    /// Fixed parameters (not the backend's RNG, which tests running in parallel share).
    fn new(device: &B::Device) -> Self {
        let layer = |i: usize, o: usize, seed: u64| {
            let mut l = LinearConfig::new(i, o).init(device);
            l.weight = Param::from_tensor(tensor(data(&[i, o], seed), [i, o], device));
            l.bias = Some(Param::from_tensor(tensor(
                data(&[o], seed + 1),
                [o],
                device,
            )));
            l
        };
        Self {
            patch: layer(PATCHES, PATCHES, 1),
            fc1: layer(DIM, 2 * DIM, 3),
            fc2: layer(2 * DIM, DIM, 5),
            head: layer(DIM, 3, 7),
            scale: Param::from_tensor(tensor(data(&[DIM], 9), [DIM], device)),
        }
    }

    fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 2> {
        let x = x.clone() + self.patch.forward(x.swap_dims(1, 2)).swap_dims(1, 2);
        let mlp = self.fc2.forward(gelu(self.fc1.forward(x.clone())));
        let x = x + mlp * self.scale.val().unsqueeze::<3>();
        self.head.forward(x.mean_dim(1).squeeze_dim(1))
    }
}

/// Loss gradients of every parameter and of the input, for a fixed model and batch.
fn net_grads<B: AutodiffBackend>(device: &B::Device) -> Vec<Vec<f32>> {
    let net = Net::<B>::new(device);
    let x = tensor::<B, 3>(data(&[4, PATCHES, DIM], 3), [4, PATCHES, DIM], device).require_grad();
    let loss = net.forward(x.clone()).powi_scalar(2).sum();
    let grads = loss.backward();
    let mut out = cubecl_kernels::testing::param_grads::<B, _>(&net, &grads);
    out.push(x.grad(&grads).unwrap().into_data().to_vec().unwrap());
    out
}

fn on_one_thread<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    // burn-ndarray's multi-threaded reductions are not bit-reproducible run to run.
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(f)
}

fn uniform(s: f64, b: usize) -> Policy {
    Policy::uniform(Pruning::new(s, b).unwrap())
}

#[test]
fn at_zero_sparsity_every_gradient_equals_plain_autodiff() {
    let plain = on_one_thread(|| net_grads::<Autodiff<NdArray>>(&Default::default()));
    for b in [1, 4, 3] {
        for scales in [false, true] {
            let policy = Policy {
                scales,
                ..uniform(0.0, b)
            };
            let device = SparseDevice::<NdArray>::new(Default::default(), policy);
            let sparse = on_one_thread(|| net_grads::<SparseAct<Autodiff<NdArray>>>(&device));
            if scales {
                // the scale is the fused affine node: its `dγ` sums in the kernel's order
                assert_all_close(&plain, &sparse, 1e-6, "at zero sparsity");
            } else {
                assert_eq!(plain, sparse, "b = {b}, scales: {scales}");
            }
        }
    }
    // and with the policy off
    let off = on_one_thread(|| net_grads::<SparseAct<Autodiff<NdArray>>>(&Default::default()));
    assert_eq!(plain, off);
}

#[test]
fn at_positive_sparsity_the_gradients_change() {
    let plain = on_one_thread(|| net_grads::<Autodiff<NdArray>>(&Default::default()));
    let device = SparseDevice::<NdArray>::new(Default::default(), uniform(0.7, 2));
    let sparse = on_one_thread(|| net_grads::<SparseAct<Autodiff<NdArray>>>(&device));
    let changed = plain.iter().zip(&sparse).filter(|(a, b)| a != b).count();
    assert!(changed > 0, "s = 0.7 must change some gradient");
}

/// One linear layer under SparseAct vs the plain backend `P` fed the host-masked input.
fn check_linear<S: AutodiffBackend, P: AutodiffBackend>(
    sparse_dev: &S::Device,
    plain_dev: &P::Device,
    dims: [usize; 3],
    out: usize,
    pruning: Pruning,
    tol: f32,
) {
    let [samples, rows, d] = dims;
    let xv = data(&dims, 11);
    let wv = data(&[d, out], 12);
    let bv = data(&[out], 13);
    let rv = data(&[samples, rows, out], 14);
    let masked = host::prune(&xv, dims, pruning.block, pruning.sparsity).to_dense();

    let x = tensor::<S, 3>(xv.clone(), dims, sparse_dev).require_grad();
    let w = tensor::<S, 2>(wv.clone(), [d, out], sparse_dev).require_grad();
    let b = tensor::<S, 1>(bv.clone(), [out], sparse_dev).require_grad();
    let y = linear(x.clone(), w.clone(), Some(b.clone()));
    let r = tensor::<S, 3>(rv.clone(), [samples, rows, out], sparse_dev);
    let g = (y.clone() * r).sum().backward();
    let got = [
        y.into_data().to_vec::<f32>().unwrap(),
        x.grad(&g).unwrap().into_data().to_vec().unwrap(),
        w.grad(&g).unwrap().into_data().to_vec().unwrap(),
        b.grad(&g).unwrap().into_data().to_vec().unwrap(),
    ];

    // The plain backend: forward and dX from the dense input, dW from the masked one.
    let dense = |xv: Vec<f32>| {
        let x = tensor::<P, 3>(xv, dims, plain_dev).require_grad();
        let w = tensor::<P, 2>(wv.clone(), [d, out], plain_dev).require_grad();
        let b = tensor::<P, 1>(bv.clone(), [out], plain_dev).require_grad();
        let y = linear(x.clone(), w.clone(), Some(b.clone()));
        let r = tensor::<P, 3>(rv.clone(), [samples, rows, out], plain_dev);
        let g = (y.clone() * r).sum().backward();
        [
            y.into_data().to_vec::<f32>().unwrap(),
            x.grad(&g).unwrap().into_data().to_vec().unwrap(),
            w.grad(&g).unwrap().into_data().to_vec().unwrap(),
            b.grad(&g).unwrap().into_data().to_vec().unwrap(),
        ]
    };
    let full = dense(xv);
    let from_masked = dense(masked);
    let want = [
        full[0].clone(),
        full[1].clone(),
        from_masked[2].clone(),
        full[3].clone(),
    ];
    for (what, (g, w)) in ["output", "dX", "dW", "db"]
        .iter()
        .zip(got.iter().zip(&want))
    {
        assert_eq!(g.len(), w.len(), "{what}");
        for (i, (a, e)) in g.iter().zip(w).enumerate() {
            assert!(
                (a - e).abs() <= tol * (1.0 + e.abs()),
                "{what}[{i}]: {a} vs {e} ({dims:?}, {pruning:?})"
            );
        }
    }
    assert_ne!(full[2], from_masked[2], "pruning must change dW here");
}

const CASES: [([usize; 3], usize, f64, usize); 4] = [
    ([4, 6, 16], 5, 0.5, 4),
    ([3, 7, 12], 3, 0.8, 4),
    ([2, 5, 10], 4, 0.3, 4), // 4 does not divide 10: padded
    ([5, 1, 32], 2, 0.6, 8), // a rank-2 style input: one row per sample
];

#[test]
fn weight_gradient_comes_from_the_masked_input_on_ndarray() {
    for (dims, out, s, b) in CASES {
        let p = Pruning::new(s, b).unwrap();
        let dev = SparseDevice::<NdArray>::new(Default::default(), Policy::uniform(p));
        // the host BSpMM sums each output's products over all samples at once, Burn's dense
        // gradient per sample, then the samples: equal within rounding
        on_one_thread(|| {
            check_linear::<SparseAct<Autodiff<NdArray>>, Autodiff<NdArray>>(
                &dev,
                &Default::default(),
                dims,
                out,
                p,
                1e-6,
            )
        });
    }
}

#[test]
fn weight_gradient_comes_from_the_masked_input_over_approx_mul() {
    let mul = Multiplier::parse("afm16").unwrap();
    let approx = ApproxDevice::<NdArray>::new(Default::default(), mul);
    for (dims, out, s, b) in CASES {
        let p = Pruning::new(s, b).unwrap();
        let dev = SparseDevice::<ApproxMul<NdArray>>::new(approx.clone(), Policy::uniform(p));
        check_linear::<SparseAct<Autodiff<ApproxMul<NdArray>>>, Autodiff<ApproxMul<NdArray>>>(
            &dev, &approx, dims, out, p, 1e-6,
        );
    }
}

cubecl_kernels::runtime_test! {
    fn weight_gradient_comes_from_the_masked_input_on_cubecl<R>() {
        for (dims, out, s, b) in CASES {
            let p = Pruning::new(s, b).unwrap();
            let dev = SparseDevice::<TestBackend<R>>::new(Default::default(), Policy::uniform(p));
            check_linear::<SparseAct<Autodiff<TestBackend<R>>>, Autodiff<TestBackend<R>>>(
                &dev,
                &Default::default(),
                dims,
                out,
                p,
                R::dense_tolerance(1e-5),
            );
        }
    }
}

#[test]
fn nan_activations_reach_the_weight_gradient_as_they_would_densely() {
    // A NaN block ranks as +∞: it is kept, so dW is NaN where the dense dW would be.
    let dims = [2, 3, 8];
    let mut xv = data(&dims, 21);
    xv[5] = f32::NAN;
    let p = Pruning::new(0.8, 4).unwrap();
    let dev = SparseDevice::<NdArray>::new(Default::default(), Policy::uniform(p));
    type S = SparseAct<Autodiff<NdArray>>;
    let x = tensor::<S, 3>(xv, dims, &dev);
    let w = tensor::<S, 2>(data(&[8, 2], 22), [8, 2], &dev).require_grad();
    let g = linear(x, w.clone(), None).sum().backward();
    let dw: Vec<f32> = w.grad(&g).unwrap().into_data().to_vec().unwrap();
    // x[0, 0, 5] sits in block 1 of row 0: dW rows 4..8 see it
    assert!(dw[5 * 2].is_nan() && dw[5 * 2 + 1].is_nan(), "{dw:?}");
    assert!(dw[..4 * 2].iter().all(|v| v.is_finite()), "{dw:?}");
}

#[test]
fn fused_scale_gradient_comes_from_the_masked_activation() {
    // y = x ⊙ γ: dγ = Σ r ⊙ masked(x), dx = r ⊙ γ (unchanged)
    let dims = [3, 5, 8];
    let p = Pruning::new(0.6, 4).unwrap();
    let xv = data(&dims, 31);
    let gv = data(&[8], 32);
    let rv = data(&dims, 33);
    let masked = host::prune(&xv, dims, 4, 0.6).to_dense();
    let policy = Policy {
        scales: true,
        ..Policy::uniform(p)
    };
    let dev = SparseDevice::<NdArray>::new(Default::default(), policy);
    type S = SparseAct<Autodiff<NdArray>>;
    let x = tensor::<S, 3>(xv.clone(), dims, &dev).require_grad();
    let g = tensor::<S, 1>(gv.clone(), [8], &dev).require_grad();
    let y = x.clone() * g.clone().unsqueeze::<3>();
    let r = tensor::<S, 3>(rv.clone(), dims, &dev);
    let grads = (y.clone() * r).sum().backward();
    let dg: Vec<f32> = g.grad(&grads).unwrap().into_data().to_vec().unwrap();
    let dx: Vec<f32> = x.grad(&grads).unwrap().into_data().to_vec().unwrap();
    let y: Vec<f32> = y.into_data().to_vec().unwrap();
    for i in 0..xv.len() {
        assert_eq!(y[i], xv[i] * gv[i % 8], "the forward stays dense");
        assert_eq!(dx[i], rv[i] * gv[i % 8]);
    }
    for (c, got) in dg.iter().enumerate() {
        let want: f32 = (0..xv.len() / 8)
            .map(|r| rv[r * 8 + c] * masked[r * 8 + c])
            .sum();
        assert!(
            (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
            "dγ[{c}]: {got} vs {want}"
        );
    }
    let dense: f32 = (0..xv.len() / 8).map(|r| rv[r * 8] * xv[r * 8]).sum();
    let pruned_somewhere = (0..8).any(|c| {
        let full: f32 = (0..xv.len() / 8)
            .map(|r| rv[r * 8 + c] * xv[r * 8 + c])
            .sum();
        (full - dg[c]).abs() > 1e-4
    });
    assert!(
        pruned_somewhere,
        "s = 0.6 must change dγ (dense dγ[0] = {dense})"
    );
}

cubecl_kernels::runtime_test! {
    fn on_cubecl_the_kernels_prune_and_honour_the_approximate_multiply<R>() {
        let mul = Multiplier::parse("afm16").unwrap();
        let approx = ApproxDevice::<TestBackend<R>>::new(Default::default(), mul);
        for (dims, out, s, b) in CASES {
            let p = Pruning::new(s, b).unwrap();
            let dev =
                SparseDevice::<ApproxMul<TestBackend<R>>>::new(approx.clone(), Policy::uniform(p));
            // dW within 1e-5 of the ApproxMul product of the masked input: the approximate
            // multiply's error is orders of magnitude larger, so a plain multiply would fail here
            check_linear::<
                SparseAct<Autodiff<ApproxMul<TestBackend<R>>>>,
                Autodiff<ApproxMul<TestBackend<R>>>,
            >(&dev, &approx, dims, out, p, 1e-5);
        }
    }
}

cubecl_kernels::runtime_test! {
    fn the_kernel_path_is_taken_exactly_where_the_backend_has_cubecl<R>() {
        use burn::tensor::TensorPrimitive;
        use burn_sparse_act::kernel::{Stored, prune_stored};
        let xv = data(&[2, 3, 8], 31);
        let on_cubecl = tensor::<TestBackend<R>, 3>(xv.clone(), [2, 3, 8], &Default::default());
        let TensorPrimitive::Float(x) = on_cubecl.into_primitive() else {
            unreachable!()
        };
        assert!(matches!(
            prune_stored::<TestBackend<R>>(x, 4, 0.5, None),
            Stored::Kernel { .. }
        ));
        let on_ndarray = tensor::<NdArray, 3>(xv, [2, 3, 8], &Default::default());
        let TensorPrimitive::Float(x) = on_ndarray.into_primitive() else {
            unreachable!()
        };
        assert!(matches!(
            prune_stored::<NdArray>(x, 4, 0.5, None),
            Stored::Host(_)
        ));
    }
}
