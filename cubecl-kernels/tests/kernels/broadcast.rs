//! The broadcast kernels (PReLU and the per-channel affine map, forward and backward) against
//! their host implementations on the runtime `EMBER_TEST_RUNTIME` selects (wgpu by default,
//! lavapipe where there is no GPU), bit for bit: both pack
//! sizes (inner sizes 1, 3, 7, 8, 16, 49 and 12544), NCHW and channels-last, one channel and
//! several, one outer row and several, several segments per channel, inputs that are views,
//! special values and an empty tensor. Outputs are allocated by the launches, so the tests
//! poison the device's memory pool before each launch (freed NaN buffers of the outputs' sizes,
//! which the next allocations reuse): a value a kernel fails to write reads NaN.

use crate::{Cube, floats};
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_std::{DType, Shape};
use cubecl_kernels::broadcast::{
    Layout, launch_affine, launch_affine_backward, launch_prelu, launch_prelu_backward, reference,
};
use cubecl_kernels::testing::{TestBackend, TestRuntime, assert_matches_host, uniform};

/// `(shape, channel axis)` of every case.
const CASES: &[(&[usize], usize)] = &[
    (&[6, 1], 1),           // channels-last, one channel
    (&[4, 5], 1),           // channels-last: inner 1
    (&[2, 3, 3, 8], 3),     // NHWC
    (&[2, 4, 3], 1),        // inner 3
    (&[3, 2, 7], 1),        // inner 7
    (&[4, 1, 7], 1),        // one channel
    (&[2, 3, 8], 1),        // inner 8: packs
    (&[2, 5, 4, 4], 1),     // inner 16: packs, several channels to a cube
    (&[3, 16], 0),          // outer 1, packs
    (&[1, 3, 7, 7], 1),     // outer 1, inner 49
    (&[2, 3, 7, 7], 1),     // NCHW, inner 49
    (&[2, 100, 3], 1),      // two cubes of 64 channels side by side, the second one partial
    (&[300, 40, 3], 1),     // two units a channel, 32 channels a cube, several segments
    (&[200, 2, 49], 1),     // several segments, one value a pack
    (&[3000, 3], 1),        // several segments, channels-last
    (&[3, 2, 112, 112], 1), // inner 12544: packs, several segments
];

/// Values in [-1, 1) with exact zeros of both signs among them.
fn signed(n: usize, seed: u64) -> Vec<f32> {
    let mut v = uniform(n, seed);
    for (k, x) in v.iter_mut().enumerate() {
        if k % 7 == 3 {
            *x = 0.0;
        } else if k % 11 == 5 {
            *x = -0.0;
        }
    }
    v
}

/// `values` of `shape` (any rank) on `R`'s default device.
pub(crate) fn upload<R: TestRuntime>(values: &[f32], shape: &[usize]) -> Cube<R> {
    <TestBackend<R> as FloatTensorOps<TestBackend<R>>>::float_from_data(
        TensorData::new(values.to_vec(), shape.to_vec()),
        &Default::default(),
    )
}

/// A contiguous tensor's values.
pub(crate) fn read<R: TestRuntime>(t: Cube<R>) -> Vec<f32> {
    let n = t.meta.num_elements();
    floats::<R, 1>(
        <TestBackend<R> as FloatTensorOps<TestBackend<R>>>::float_reshape(t, Shape::new([n])),
    )
}

/// Frees NaN-filled device buffers of `sizes` values, which the outputs the next launch
/// allocates reuse (checked by [`the_poisoned_pool_hands_nan_to_the_next_output`]).
pub(crate) fn poison<R: TestRuntime>(sizes: &[usize]) {
    let held: Vec<Cube<R>> = sizes
        .iter()
        .map(|&n| upload(&vec![f32::NAN; n.max(1)], &[n.max(1)]))
        .collect();
    drop(held);
}

/// Every case: its name, layout, and its inputs on the host and on the device.
struct Case {
    name: String,
    shape: Vec<usize>,
    l: Layout,
    x: Vec<f32>,
    alpha: Vec<f32>,
    beta: Vec<f32>,
    dy: Vec<f32>,
}

impl Case {
    fn new(shape: &[usize], axis: usize, seed: u64) -> Case {
        let channels = shape[axis];
        let l = Layout::of(shape, axis, channels).unwrap();
        Case {
            name: format!("{shape:?} axis {axis}"),
            shape: shape.to_vec(),
            l,
            x: signed(l.len(), seed),
            alpha: uniform(channels, seed + 1),
            beta: uniform(channels, seed + 2),
            dy: signed(l.len(), seed + 3),
        }
    }

    fn all() -> impl Iterator<Item = Case> {
        CASES
            .iter()
            .enumerate()
            .map(|(i, &(shape, axis))| Case::new(shape, axis, 10 * i as u64))
    }

    fn x<R: TestRuntime>(&self) -> Cube<R> {
        upload(&self.x, &self.shape)
    }
    fn dy<R: TestRuntime>(&self) -> Cube<R> {
        upload(&self.dy, &self.shape)
    }
    fn alpha<R: TestRuntime>(&self) -> Cube<R> {
        upload(&self.alpha, &[self.l.channels])
    }
    fn beta<R: TestRuntime>(&self) -> Cube<R> {
        upload(&self.beta, &[self.l.channels])
    }
}

cubecl_kernels::runtime_test! {
    fn the_poisoned_pool_hands_nan_to_the_next_output<R>() {
        // other tests of this binary allocate on the same device meanwhile: one clean try suffices
        let clean = (0..5).any(|_| {
            let like = upload::<R>(&[1.0], &[1]);
            poison::<R>(&[12_345]);
            let out = empty_device_contiguous_dtype(
                like.client.clone(),
                like.device.clone(),
                Shape::new([12_345]),
                DType::F32,
            );
            read(out).iter().all(|v| v.is_nan())
        });
        assert!(
            clean,
            "a fresh output did not reuse the NaN buffer just freed"
        );
    }
}

#[test]
fn the_cases_cover_both_packs_and_the_inner_sizes_of_the_issue() {
    let layouts: Vec<Layout> = Case::all().map(|c| c.l).collect();
    for inner in [1, 3, 7, 8, 16, 49, 12544] {
        assert!(layouts.iter().any(|l| l.inner == inner), "inner {inner}");
    }
    assert!(layouts.iter().any(|l| l.vectorised()));
    assert!(layouts.iter().any(|l| !l.vectorised()));
    assert!(layouts.iter().any(|l| l.channels == 1));
    assert!(layouts.iter().any(|l| l.outer == 1));
}

cubecl_kernels::runtime_test! {
    fn prelu_equals_the_host_bit_for_bit<R>() {
        for c in Case::all() {
            let (x, alpha) = (c.x::<R>(), c.alpha::<R>());
            poison::<R>(&[c.l.len()]);
            let y = launch_prelu(&x, &alpha, c.l);
            assert_eq!(y.meta.shape().to_vec(), c.shape, "{}", c.name);
            let want = reference::prelu(&c.x, &c.alpha, c.l);
            assert_matches_host::<R>(&read(y), &want, &format!("prelu {}", c.name));
        }
    }
}

cubecl_kernels::runtime_test! {
    fn prelu_backward_equals_the_host_bit_for_bit<R>() {
        for c in Case::all() {
            let (x, alpha, dy) = (c.x::<R>(), c.alpha::<R>(), c.dy::<R>());
            poison::<R>(&[c.l.len(), c.l.channels, c.l.channels]);
            let (dx, da) = launch_prelu_backward(&x, &alpha, &dy, c.l);
            assert_eq!(da.meta.shape().to_vec(), vec![c.l.channels]);
            let (want_dx, want_da) = reference::prelu_backward(&c.x, &c.alpha, &c.dy, c.l);
            assert_matches_host::<R>(&read(dx), &want_dx, &format!("prelu dx {}", c.name));
            assert_matches_host::<R>(&read(da), &want_da, &format!("prelu dα {}", c.name));
        }
    }
}

cubecl_kernels::runtime_test! {
    fn affine_with_and_without_beta_equals_the_host_bit_for_bit<R>() {
        for c in Case::all() {
            let (x, alpha, beta) = (c.x::<R>(), c.alpha::<R>(), c.beta::<R>());
            poison::<R>(&[c.l.len()]);
            let y = launch_affine(&x, &alpha, Some(&beta), c.l);
            let want = reference::affine(&c.x, &c.alpha, Some(&c.beta), c.l);
            assert_matches_host::<R>(&read(y), &want, &format!("affine {}", c.name));
            poison::<R>(&[c.l.len()]);
            let y = launch_affine(&x, &alpha, None, c.l);
            let want = reference::affine(&c.x, &c.alpha, None, c.l);
            assert_matches_host::<R>(&read(y), &want, &format!("scale {}", c.name));
        }
    }
}

cubecl_kernels::runtime_test! {
    fn affine_backward_with_and_without_x_equals_the_host_bit_for_bit<R>() {
        for c in Case::all() {
            let (x, alpha, dy) = (c.x::<R>(), c.alpha::<R>(), c.dy::<R>());
            let (want_dx, want_da, want_db) =
                reference::affine_backward(Some(&c.x), &c.alpha, &c.dy, c.l);
            poison::<R>(&[c.l.len(), c.l.channels, c.l.channels]);
            let (dx, da, db) = launch_affine_backward(Some(&x), &alpha, &dy, c.l);
            assert_matches_host::<R>(&read(dx), &want_dx, &format!("affine dx {}", c.name));
            assert_matches_host::<R>(
                &read(da.unwrap()),
                &want_da.unwrap(),
                &format!("dα {}", c.name),
            );
            assert_matches_host::<R>(&read(db), &want_db, &format!("affine dβ {}", c.name));
            poison::<R>(&[c.l.len(), c.l.channels]);
            let (dx, none, db) = launch_affine_backward(None, &alpha, &dy, c.l);
            assert!(none.is_none());
            assert_matches_host::<R>(&read(dx), &want_dx, &format!("scale dx {}", c.name));
            assert_matches_host::<R>(&read(db), &want_db, &format!("scale dβ {}", c.name));
        }
    }
}

cubecl_kernels::runtime_test! {
    fn special_values_follow_the_host<R>() {
        // NaN, ±∞, ±0 and subnormals in x and dy; one pack of each per channel (inner 8 and 7)
        let specials = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            0.0,
            -1e-40,
            1e-40,
            -3.5,
        ];
        for (shape, axis) in [(&[2usize, 2, 8][..], 1), (&[2, 2, 7][..], 1)] {
            let mut c = Case::new(shape, axis, 99);
            for (k, x) in c.x.iter_mut().enumerate() {
                *x = specials[k % specials.len()];
            }
            // where x ≥ 0 or NaN, dy is NaN or ∞ too: PReLU's dα must skip those values
            for (k, g) in c.dy.iter_mut().enumerate() {
                if c.x[k] >= 0.0 || c.x[k].is_nan() {
                    *g = specials[k % 3];
                }
            }
            let (x, alpha, beta) = (c.x::<R>(), c.alpha::<R>(), c.beta::<R>());
            let what = |op: &str| format!("{op} {}", c.name);
            let y = launch_prelu(&x, &alpha, c.l);
            assert_matches_host::<R>(
                &read(y),
                &reference::prelu(&c.x, &c.alpha, c.l),
                &what("prelu"),
            );
            // the backward with a large finite value for -∞, so that dα stays finite
            for x in c.x.iter_mut().filter(|x| **x == f32::NEG_INFINITY) {
                *x = -1e30;
            }
            let (x, dy) = (c.x::<R>(), c.dy::<R>());
            let (dx, da) = launch_prelu_backward(&x, &alpha, &dy, c.l);
            let (want_dx, want_da) = reference::prelu_backward(&c.x, &c.alpha, &c.dy, c.l);
            assert_matches_host::<R>(&read(dx), &want_dx, &what("prelu dx"));
            let da = read(da);
            assert!(da.iter().all(|d| d.is_finite()), "{da:?}");
            assert_matches_host::<R>(&da, &want_da, &what("prelu dα"));
            let y = launch_affine(&x, &alpha, Some(&beta), c.l);
            let want = reference::affine(&c.x, &c.alpha, Some(&c.beta), c.l);
            assert_matches_host::<R>(&read(y), &want, &what("affine"));
        }
    }
}

cubecl_kernels::runtime_test! {
    fn views_that_are_not_contiguous_are_read_as_their_values<R>() {
        // x and dy stored NHWC, seen as NCHW through a permutation: the launch copies them out
        let (n, ch, h, w) = (2, 3, 4, 4);
        let c = Case::new(&[n, ch, h, w], 1, 7);
        let nhwc = |v: &[f32]| -> Vec<f32> {
            let mut out = vec![0.0; v.len()];
            for (k, &value) in v.iter().enumerate() {
                let (b, cc, i) = (k / (ch * h * w), (k / (h * w)) % ch, k % (h * w));
                out[(b * h * w + i) * ch + cc] = value;
            }
            out
        };
        let view = |v: &[f32]| {
            let t = Tensor::<TestBackend<R>, 4>::from_data(
                TensorData::new(nhwc(v), [n, h, w, ch]),
                &Default::default(),
            )
            .permute([0, 3, 1, 2]);
            match t.into_primitive() {
                TensorPrimitive::Float(t) => t,
                TensorPrimitive::QFloat(_) => unreachable!("f32"),
            }
        };
        let (x, dy) = (view(&c.x), view(&c.dy));
        assert!(!x.is_contiguous(), "a permuted view, not a copy");
        let (alpha, beta) = (c.alpha::<R>(), c.beta::<R>());
        let y = launch_prelu(&x, &alpha, c.l);
        assert_matches_host::<R>(&read(y), &reference::prelu(&c.x, &c.alpha, c.l), "prelu");
        let (dx, da) = launch_prelu_backward(&x, &alpha, &dy, c.l);
        let (want_dx, want_da) = reference::prelu_backward(&c.x, &c.alpha, &c.dy, c.l);
        assert_matches_host::<R>(&read(dx), &want_dx, "prelu dx");
        assert_matches_host::<R>(&read(da), &want_da, "prelu dα");
        let y = launch_affine(&x, &alpha, Some(&beta), c.l);
        let want = reference::affine(&c.x, &c.alpha, Some(&c.beta), c.l);
        assert_matches_host::<R>(&read(y), &want, "affine");
        let (dx, da, db) = launch_affine_backward(Some(&x), &alpha, &dy, c.l);
        let (want_dx, want_da, want_db) =
            reference::affine_backward(Some(&c.x), &c.alpha, &c.dy, c.l);
        assert_matches_host::<R>(&read(dx), &want_dx, "affine dx");
        assert_matches_host::<R>(&read(da.unwrap()), &want_da.unwrap(), "affine dα");
        assert_matches_host::<R>(&read(db), &want_db, "affine dβ");
    }
}

cubecl_kernels::runtime_test! {
    fn an_empty_tensor_gives_an_empty_output_and_zero_sums<R>() {
        let c = Case::new(&[0, 3, 4], 1, 5);
        let (x, alpha, dy) = (c.x::<R>(), c.alpha::<R>(), c.dy::<R>());
        assert!(c.l.is_empty());
        let y = launch_prelu(&x, &alpha, c.l);
        assert_eq!(y.meta.shape().to_vec(), vec![0, 3, 4]);
        let (dx, da) = launch_prelu_backward(&x, &alpha, &dy, c.l);
        assert_eq!(read(dx), Vec::<f32>::new());
        assert_eq!(read(da), vec![0.0; 3]);
        let (_, da, db) = launch_affine_backward(Some(&x), &alpha, &dy, c.l);
        assert_eq!(read(da.unwrap()), vec![0.0; 3]);
        assert_eq!(read(db), vec![0.0; 3]);
        let (_, want_da) = reference::prelu_backward(&c.x, &c.alpha, &c.dy, c.l);
        assert_eq!(want_da, vec![0.0; 3]);
    }
}
