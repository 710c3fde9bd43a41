//! The native matmul on cubek kernels chosen by name (`cubecl_kernels::matmul`) against an f64
//! host product, on the runtime `EMBER_TEST_RUNTIME` selects: every kernel of
//! `MatmulKernel::ALL` either runs (within the runtime's dense tolerance: TF32 on CUDA) or
//! refuses with its reason and hands back Burn's product (bit for bit); a kernel needing
//! instructions the runtime lacks says which, and one that gets a shape wrong (cubek's
//! `double-unit` on lavapipe) is refused for it, and a first product that overflows decides
//! nothing; plain, batched, broadcast and transposed operands; ndarray runs its own
//! matmul whatever the name, with its bits on operands read in place (`matmul::host`); the
//! tally counts both.

use burn::backend::NdArray;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use cubecl_kernels::decorator::KernelBackend;
use cubecl_kernels::matmul::{self, MatmulKernel, Ran};
use cubecl_kernels::testing::{TestBackend, lcg_data};

/// `[batch, m, k] · [batch', k, n]` in f64 (a batch of one broadcasts), as f32.
fn reference(a: &[f32], b: &[f32], [ba, bb, m, k, n]: [usize; 5]) -> Vec<f32> {
    let batch = ba.max(bb);
    let mut out = vec![0f32; batch * m * n];
    for t in 0..batch {
        let (ta, tb) = (if ba == 1 { 0 } else { t }, if bb == 1 { 0 } else { t });
        for i in 0..m {
            for j in 0..n {
                let sum: f64 = (0..k)
                    .map(|p| a[(ta * m + i) * k + p] as f64 * b[(tb * k + p) * n + j] as f64)
                    .sum();
                out[(t * m + i) * n + j] = sum as f32;
            }
        }
    }
    out
}

/// `a · b` on `kernel` (`rhs_t`: `b` stored as `[batch, n, k]` and read through a transposed
/// view), its values and the refusal.
fn product<B: KernelBackend>(
    kernel: MatmulKernel,
    a: &[f32],
    b: &[f32],
    [ba, bb, m, k, n]: [usize; 5],
    rhs_t: bool,
) -> (Vec<f32>, Option<String>) {
    let device = Default::default();
    let lhs = Tensor::<B, 3>::from_data(TensorData::new(a.to_vec(), [ba, m, k]), &device);
    let rhs = match rhs_t {
        false => Tensor::<B, 3>::from_data(TensorData::new(b.to_vec(), [bb, k, n]), &device),
        // the same values through a transposed view of a `[bb, n, k]` tensor
        true => {
            let mut t = vec![0f32; b.len()];
            for (i, v) in b.iter().enumerate() {
                let (batch, p, j) = (i / (k * n), i / n % k, i % n);
                t[(batch * n + j) * k + p] = *v;
            }
            Tensor::<B, 3>::from_data(TensorData::new(t, [bb, n, k]), &device).swap_dims(1, 2)
        }
    };
    let (out, ran) = matmul::matmul::<B>(
        kernel,
        lhs.into_primitive().tensor(),
        rhs.into_primitive().tensor(),
    );
    let refused = match ran {
        Ran::Refused(why) => Some(why),
        Ran::Chosen => {
            assert_ne!(kernel, MatmulKernel::Burn);
            None
        }
        Ran::Own => {
            let own = kernel == MatmulKernel::Burn || B::cube_runtime().is_none();
            assert!(
                own,
                "{kernel}: the backend's own matmul where a kernel was chosen"
            );
            None
        }
    };
    let out = Tensor::<B, 3>::from_primitive(TensorPrimitive::Float(out));
    (out.into_data().to_vec::<f32>().unwrap(), refused)
}

/// `[ba, bb, m, k, n]`: odd sizes (also with the right operand a transposed view), a batch, a
/// broadcast left operand.
const SHAPES: [[usize; 5]; 3] = [[1, 1, 37, 53, 29], [3, 3, 17, 40, 9], [1, 4, 8, 16, 24]];

fn assert_close(got: &[f32], want: &[f32], rel: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(1f32, |m, v| m.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * scale,
            "{what}: value {i} is {g}, want {w}"
        );
    }
}

cubecl_kernels::runtime_test! {
    fn every_kernel_runs_or_refuses_with_burns_product<R>() {
        let client = <R as cubecl::Runtime>::client(&Default::default());
        let no_cmma = client.properties().features.matmul.cmma.is_empty();
        let tolerance = R::dense_tolerance(1e-5);
        let gpu = cubecl_kernels::runtime::is_gpu(&client);
        let before = matmul::tally();
        let mut asked = 0;
        // a GPU compiles every kernel for every shape: the first shape there (each product of
        // a model is checked against Burn's at run time anyway, and `device-session.sh matmul`
        // runs whole models on each kernel)
        let shapes = if gpu { &SHAPES[..1] } else { &SHAPES[..] };
        for (s, &dims) in shapes.iter().enumerate() {
            let [ba, bb, m, k, n] = dims;
            let a = lcg_data(&[ba, m, k], 2 * s as u64 + 1).to_vec::<f32>().unwrap();
            let b = lcg_data(&[bb, k, n], 2 * s as u64 + 2).to_vec::<f32>().unwrap();
            let want = reference(&a, &b, dims);
            let (burn, none) = product::<TestBackend<R>>(MatmulKernel::Burn, &a, &b, dims, false);
            assert_eq!(none, None, "Burn's own op is no refusal");
            let views: &[bool] = if s == 0 { &[false, true] } else { &[false] };
            for kernel in MatmulKernel::ALL {
                for &rhs_t in views {
                    let what = format!("{} {kernel} {dims:?} transposed rhs {rhs_t}", R::NAME);
                    let (got, refused) = product::<TestBackend<R>>(kernel, &a, &b, dims, rhs_t);
                    asked += usize::from(kernel != MatmulKernel::Burn);
                    assert_close(&got, &want, tolerance, &what);
                    match refused {
                        Some(why) => {
                            assert!(why.starts_with(&format!("{kernel} refused: ")), "{what}: {why}");
                            if !rhs_t {
                                assert_eq!(got, burn, "{what}: a refusal is Burn's product");
                            }
                        }
                        None => assert!(
                            !(no_cmma && kernel.name().ends_with("cmma")),
                            "{what}: ran without CMMA instructions"
                        ),
                    }
                }
            }
        }
        if !gpu {
            // cubek's double-unit sums a batched product with k = 40 wrongly on a CPU: its
            // first product of the shape is checked against Burn's and refused
            let dims = SHAPES[1];
            let [ba, bb, m, k, n] = dims;
            let a = lcg_data(&[ba, m, k], 3).to_vec::<f32>().unwrap();
            let b = lcg_data(&[bb, k, n], 4).to_vec::<f32>().unwrap();
            let (got, why) = product::<TestBackend<R>>(MatmulKernel::DoubleUnit, &a, &b, dims, false);
            let why = why.expect("double-unit's wrong sums refused");
            assert!(why.starts_with("double-unit refused: its products of this shape differ from Burn's by "), "{why}");
            let (burn, _) = product::<TestBackend<R>>(MatmulKernel::Burn, &a, &b, dims, false);
            assert_eq!(got, burn);
        }
        if no_cmma {
            let dims = SHAPES[0];
            let a = lcg_data(&[1, dims[2], dims[3]], 1).to_vec::<f32>().unwrap();
            let b = lcg_data(&[1, dims[3], dims[4]], 2).to_vec::<f32>().unwrap();
            let (_, why) = product::<TestBackend<R>>(MatmulKernel::DoubleCyclicCmma, &a, &b, dims, false);
            assert_eq!(
                why.as_deref(),
                Some("double-cyclic-cmma refused: the runtime has no cooperative-matrix (CMMA) instructions"),
            );
        }
        // other tests of this binary may add to the tally at the same time: at least these
        let after = matmul::tally();
        assert!(after.products >= before.products + asked as u64, "{after:?}");
        if no_cmma {
            assert!(after.fallbacks > before.fallbacks && after.first_reason.is_some(), "{after:?}");
        }
    }
}

#[test]
fn a_backend_without_cubecl_kernels_runs_its_own_matmul_whatever_the_name() {
    let dims = SHAPES[1];
    let [ba, bb, m, k, n] = dims;
    let a = lcg_data(&[ba, m, k], 1).to_vec::<f32>().unwrap();
    let b = lcg_data(&[bb, k, n], 2).to_vec::<f32>().unwrap();
    let (burn, _) = product::<NdArray>(MatmulKernel::Burn, &a, &b, dims, false);
    for kernel in MatmulKernel::ALL {
        let (got, refused) = product::<NdArray>(kernel, &a, &b, dims, false);
        assert_eq!(refused, None, "{kernel}");
        assert_eq!(got, burn, "{kernel}: ndarray's own matmul");
    }
}

/// `[ba, bb, m, k, n]` of the host product's bit-for-bit test: past matrixmultiply's blocks
/// (`k` over 256, `m` over 64, `n` over 1024 for f32), a batch, broadcasts either way, a row, a
/// column, an inner dimension of one.
const HOST_SHAPES: [[usize; 5]; 7] = [
    [1, 1, 70, 300, 1030],
    [3, 3, 17, 40, 9],
    [1, 4, 8, 16, 24],
    [5, 1, 9, 33, 7],
    [1, 1, 1, 64, 200],
    [2, 2, 65, 31, 1],
    [1, 1, 12, 1, 12],
];

#[test]
fn the_host_product_has_burn_ndarrays_bits_on_strided_and_broadcast_operands() {
    use burn::tensor::ops::FloatTensorOps;
    type T = Tensor<NdArray, 3>;
    let device = Default::default();
    // a `[batch, rows, cols]` tensor of `values`, as it is or as the transposed view of a
    // `[batch, cols, rows]` tensor holding them
    let tensor = |values: &[f32], [batch, rows, cols]: [usize; 3], view: bool| -> T {
        match view {
            false => T::from_data(
                TensorData::new(values.to_vec(), [batch, rows, cols]),
                &device,
            ),
            true => {
                let mut t = vec![0f32; values.len()];
                for (i, v) in values.iter().enumerate() {
                    let (b, r, c) = (i / (rows * cols), i / cols % rows, i % cols);
                    t[(b * cols + c) * rows + r] = *v;
                }
                T::from_data(TensorData::new(t, [batch, cols, rows]), &device).swap_dims(1, 2)
            }
        }
    };
    let bits = |t: T| -> Vec<u32> {
        let v = t.into_data().to_vec::<f32>().unwrap();
        v.iter().map(|x| x.to_bits()).collect()
    };
    for (s, dims) in HOST_SHAPES.into_iter().enumerate() {
        let [ba, bb, m, k, n] = dims;
        let mut a = lcg_data(&[ba, m, k], 11 + s as u64)
            .to_vec::<f32>()
            .unwrap();
        let b = lcg_data(&[bb, k, n], 12 + s as u64)
            .to_vec::<f32>()
            .unwrap();
        // a NaN and an infinity travel through the sums as burn-ndarray's do
        if s == 1 {
            a[5] = f32::NAN;
            a[k + 2] = f32::NEG_INFINITY;
        }
        for (lhs_t, rhs_t) in [(false, false), (true, false), (false, true), (true, true)] {
            let what = format!("{dims:?} transposed lhs {lhs_t} rhs {rhs_t}");
            let (lhs, rhs) = (tensor(&a, [ba, m, k], lhs_t), tensor(&b, [bb, k, n], rhs_t));
            let own = NdArray::<f32>::float_matmul(
                lhs.clone().into_primitive().tensor(),
                rhs.clone().into_primitive().tensor(),
            );
            let (host, ran) = matmul::matmul::<NdArray>(
                MatmulKernel::Burn,
                lhs.into_primitive().tensor(),
                rhs.into_primitive().tensor(),
            );
            assert_eq!(ran, Ran::Own, "{what}");
            let (own, host) = (
                T::from_primitive(TensorPrimitive::Float(own)),
                T::from_primitive(TensorPrimitive::Float(host)),
            );
            assert_eq!(host.dims(), own.dims(), "{what}: shape");
            assert_eq!(bits(host), bits(own), "{what}: bits");
        }
    }
}

cubecl_kernels::runtime_test! {
    fn a_first_product_that_overflows_gives_no_verdict<R>() {
        // a shape no other test multiplies, so this is its first product in the process
        let dims = [1, 1, 5, 7, 3];
        let mut a = lcg_data(&[1, 5, 7], 5).to_vec::<f32>().unwrap();
        let b: Vec<f32> = lcg_data(&[1, 7, 3], 6).to_vec::<f32>().unwrap().iter().map(|v| v.abs() + 0.1).collect();
        // the first row's products overflow to +∞
        a[3] = f32::INFINITY;
        let kernel = MatmulKernel::SimpleUnit;
        let (got, why) = product::<TestBackend<R>>(kernel, &a, &b, dims, false);
        assert_eq!(
            why.as_deref(),
            Some("simple-unit refused: its first product of this shape was not finite (checked again on the next)"),
        );
        let (burn, _) = product::<TestBackend<R>>(MatmulKernel::Burn, &a, &b, dims, false);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&burn), "Burn's product, the infinite row included");
        // finite values next: checked, and the kernel runs
        a[3] = 0.5;
        let (got, why) = product::<TestBackend<R>>(kernel, &a, &b, dims, false);
        assert_eq!(why, None);
        assert_close(&got, &reference(&a, &b, dims), R::dense_tolerance(1e-5), "after the check");
    }
}
