//! The activations on host memory, each one pass: sigmoid, tanh and GELU, and GELU's backward,
//! bit for bit the values burn-ndarray computes for Burn's composites.
//!
//! Burn 0.21's GELU is five element-wise passes and its backward fourteen
//! (`docs/approx-mul.md`, the activation kernels); DeiT-Ti and ResMLP-S12 apply GELU twelve
//! times a step to `[batch, tokens, 4·d]` activations. These passes are bound by their `exp`,
//! `ln`, `erf` and `powf` calls (tens of nanoseconds a value; `tanh` is computed by vectors
//! with the call's bits, [`super::wide`]), so from [`SPLIT_VALUES`] values on each is shared
//! out over rayon's threads in runs of [`SPLIT_RUN`] (a GRU's gates at batch 64 and 256 units
//! are 16,384 values a time step).
//!
//! # Semantics (burn-ndarray's, operation for operation)
//!
//! - **Sigmoid**: burn-backend's default composite, `exp(ln(exp(x · −1) + 1) · −1)`; its
//!   backward, given the forward's output `y`, `y · (y · −1 + 1) · g` ([`super::Binary`]).
//! - **tanh**: the `f64` tanh of the value widened, rounded to `f32` (burn-ndarray's).
//! - **GELU**: `x · (erf(x / √2) + 1) / 2` with burn-ndarray's error function (libm's `f64`
//!   `erf` of the value widened, rounded to `f32`). Its backward, given the forward's input
//!   `x`: Burn's derivative of the tanh approximation, `g · (t·½ + (i₂ · (1 − t²) + ½))` with
//!   `t = tanh(x³·k₁ + x·k₂)` (burn-ndarray's tanh), `i₂ = x³·k₃ + x·k₄` and `x³` the host's
//!   `powf(x, 3)`, as burn-ndarray's `powi_scalar` computes it.
//!
//! Every step is the IEEE f32 operation burn-ndarray's op runs (nothing is summed, Rust never
//! contracts a multiply and an add), and `exp`, `ln`, `erf` and `powf` are the same calls,
//! `tanh` the call's bits ([`super::wide`]), so the values equal burn-ndarray's bit for bit
//! whatever the split.

use super::wide::tanh_in_place;
use super::{HostView, to_row_major};
use rayon::prelude::*;
use std::borrow::Cow;

/// Burn's scalars of sigmoid's passes: the `−1` its negations multiply by, the `1` it adds.
pub const SIGMOID: [f32; 2] = [-1.0, 1.0];

/// Burn's sigmoid of one value (burn-backend's default `sigmoid`, operation for operation):
/// `exp(ln(exp(x · −1) + 1) · −1)`. Burn negates by multiplying by `−1`.
pub fn sigmoid_value(x: f32) -> f32 {
    let [minus_one, one] = SIGMOID;
    (((x * minus_one).exp() + one).ln() * minus_one).exp()
}

/// Burn's sigmoid backward at one value, given the forward's output `y` and the gradient `g`:
/// `y · (y · −1 + 1) · g`.
pub fn sigmoid_backward_value(y: f32, g: f32) -> f32 {
    let [minus_one, one] = SIGMOID;
    (y * (y * minus_one + one)) * g
}

/// burn-ndarray's tanh of one value: the `f64` tanh of the value widened, rounded to `f32`.
pub fn tanh_value(x: f32) -> f32 {
    (x as f64).tanh() as f32
}

/// Values from which a pass ([`sigmoid`], [`tanh`], [`gelu`], GELU's backward) is shared out
/// over rayon's threads.
pub const SPLIT_VALUES: usize = 8 * 1024;

/// The values each task of a shared-out pass maps.
pub const SPLIT_RUN: usize = 4 * 1024;

/// Burn's sigmoid of the view's values, in row-major order: each value the composite
/// burn-backend's default `sigmoid` computes with burn-ndarray's element-wise ops
/// ([`sigmoid_value`]), in one pass.
///
/// # Panics
/// If the view's strides reach past its values.
pub fn sigmoid(a: &HostView<'_>) -> Vec<f32> {
    unary(a, |run| run.iter_mut().for_each(|v| *v = sigmoid_value(*v)))
}

/// burn-ndarray's tanh of the view's values ([`tanh_value`]), in row-major order.
///
/// # Panics
/// If the view's strides reach past its values.
pub fn tanh(a: &HostView<'_>) -> Vec<f32> {
    unary(a, tanh_in_place)
}

/// `run` over the view's values in row-major order, in place: over rayon's threads in runs of
/// [`SPLIT_RUN`] from [`SPLIT_VALUES`] values on where the pool has more than one, whole on
/// the calling thread otherwise.
fn unary(a: &HostView<'_>, run: impl Fn(&mut [f32]) + Sync + Send) -> Vec<f32> {
    let mut values = to_row_major(a);
    match splits(values.len()) {
        true => values.par_chunks_mut(SPLIT_RUN).for_each(run),
        false => run(&mut values),
    }
    values
}

/// Whether a pass of `n` values is shared out over rayon's threads.
fn splits(n: usize) -> bool {
    n >= SPLIT_VALUES && rayon::current_num_threads() > 1
}

/// Values of a GELU pass's stages: each stage runs over a block before the next (the `erf` and
/// `powf` calls one by one, `tanh` and the arithmetic between them as vectors), the block's
/// intermediates in L1.
const BLOCK: usize = 256;

/// Burn's scalars of GELU's forward pass: `x / √2` (`SQRT_2` rounded to f32), `+ 1`, `/ 2`.
pub const GELU_FORWARD: [f32; 3] = [core::f64::consts::SQRT_2 as f32, 1.0, 2.0];

/// Burn's scalars of GELU's backward pass (the derivative of the tanh approximation, Burn
/// 0.21's `gelu_backward`): the four constants as Burn rounds them (f64 to f32), then the power
/// `x³` is taken with.
pub const GELU_BACKWARD: [f32; 5] = [
    0.0356774f64 as f32,
    0.797885f64 as f32,
    0.0535161f64 as f32,
    0.398942f64 as f32,
    3.0,
];

/// burn-ndarray's error function of one value: libm's `f64` `erf` of the value widened,
/// rounded to `f32`.
pub fn erf_value(x: f32) -> f32 {
    libm::erf(x as f64) as f32
}

/// burn-ndarray's GELU of one value (burn-backend's default `gelu`, operation for
/// operation): `x · (erf(x / √2) + 1) / 2`, the error function [`erf_value`].
pub fn gelu_value(x: f32) -> f32 {
    let [sqrt_2, one, two] = GELU_FORWARD;
    (x * (erf_value(x / sqrt_2) + one)) / two
}

/// burn-ndarray's GELU backward at one value (burn-backend's default `gelu_backward`,
/// operation for operation), given the forward's input `x` and the gradient `g`: with
/// `i₁ = x³·k₁ + x·k₂`, `i₂ = x³·k₃ + x·k₄` and `t = tanh(i₁)` ([`tanh_value`]),
/// `(t·½ + (i₂ · (t² · −1 + 1) + ½)) · g`.
// Burn negates by multiplying by −1 (a NaN keeps its sign, which `-x` flips)
#[allow(clippy::neg_multiply)]
pub fn gelu_backward_value(x: f32, g: f32) -> f32 {
    let [k1, k2, k3, k4, power] = GELU_BACKWARD;
    let x3 = x.powf(power);
    let (inner_1, inner_2) = (x3 * k1 + x * k2, x3 * k3 + x * k4);
    let t = tanh_value(inner_1);
    let sech = (t * t) * -1.0 + 1.0;
    (t * 0.5 + (inner_2 * sech + 0.5)) * g
}

/// burn-ndarray's GELU of the view's values ([`gelu_value`]), in row-major order.
///
/// # Panics
/// If the view's strides reach past its values.
pub fn gelu(a: &HostView<'_>) -> Vec<f32> {
    unary(a, gelu_run)
}

/// [`gelu_value`] of every value of `run`, in place, by [`BLOCK`]s.
fn gelu_run(run: &mut [f32]) {
    let [sqrt_2, one, two] = GELU_FORWARD;
    let mut erf = [0f32; BLOCK];
    for block in run.chunks_mut(BLOCK) {
        for (e, &x) in erf.iter_mut().zip(block.iter()) {
            *e = erf_value(x / sqrt_2);
        }
        for (x, &e) in block.iter_mut().zip(&erf) {
            *x = (*x * (e + one)) / two;
        }
    }
}

/// [`gelu_backward_value`] of `x` and `g` into `out` (one length), by [`BLOCK`]s.
// Burn negates by multiplying by −1, as in `gelu_backward_value`
#[allow(clippy::neg_multiply)]
pub(super) fn gelu_backward_run(x: &[f32], g: &[f32], out: &mut [f32]) {
    let [k1, k2, k3, k4, power] = GELU_BACKWARD;
    let (mut x3, mut inner_2) = ([0f32; BLOCK], [0f32; BLOCK]);
    for ((out, x), g) in out
        .chunks_mut(BLOCK)
        .zip(x.chunks(BLOCK))
        .zip(g.chunks(BLOCK))
    {
        for (c, &x) in x3.iter_mut().zip(x) {
            *c = x.powf(power);
        }
        // `out` holds `i₁`, then `t`
        for (((o, i), &c), &x) in out.iter_mut().zip(inner_2.iter_mut()).zip(&x3).zip(x) {
            (*o, *i) = (c * k1 + x * k2, c * k3 + x * k4);
        }
        tanh_in_place(out);
        for ((o, &i), &g) in out.iter_mut().zip(&inner_2).zip(g) {
            let t = *o;
            let sech = (t * t) * -1.0 + 1.0;
            *o = (t * 0.5 + (i * sech + 0.5)) * g;
        }
    }
}

/// `run` over two views of one shape in row-major order (their values in, the result's out),
/// shared out as [`unary`] shares its runs; `None` where the shapes differ.
///
/// # Panics
/// If a view's strides reach past its values.
pub(super) fn zip_split(
    a: &HostView<'_>,
    b: &HostView<'_>,
    run: impl Fn(&[f32], &[f32], &mut [f32]) + Sync + Send,
) -> Option<Vec<f32>> {
    if a.shape != b.shape {
        return None;
    }
    let (a, b) = (row_major(a), row_major(b));
    let mut out = vec![0f32; a.len()];
    match splits(out.len()) {
        true => {
            let pairs = a.par_chunks(SPLIT_RUN).zip(b.par_chunks(SPLIT_RUN));
            let each = |(o, (x, y)): (&mut [f32], (&[f32], &[f32]))| run(x, y, o);
            out.par_chunks_mut(SPLIT_RUN).zip(pairs).for_each(each);
        }
        false => run(&a, &b, &mut out),
    }
    Some(out)
}

/// The view's values in row-major order: its own where they already are, a copy otherwise.
fn row_major<'v>(a: &HostView<'v>) -> Cow<'v, [f32]> {
    a.check();
    match a.is_row_major() {
        true => Cow::Borrowed(&a.values[..a.shape.iter().product::<usize>()]),
        false => Cow::Owned(to_row_major(a)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_bits, permuted, values};
    use super::{
        SPLIT_RUN, SPLIT_VALUES, gelu, gelu_backward_value, gelu_value, sigmoid, sigmoid_value,
        tanh, tanh_value,
    };
    use crate::elementwise::{Binary, HostView, binary, to_row_major};

    #[test]
    #[allow(clippy::neg_multiply)] // Burn's negation, as in `reference`
    fn sigmoid_is_burns_composite_in_row_major_order() {
        // burn-backend's default: exp(neg(log(exp(neg(x)) + 1))), negation a product by −1
        let composite = |x: f32| (((x * -1.0).exp() + 1.0).ln() * -1.0).exp();
        let mut values = values(60, 5);
        values[..4].copy_from_slice(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0]);
        values[4] = 95.0;
        for (shape, order) in [(vec![60], vec![0]), (vec![3, 4, 5], vec![2, 0, 1])] {
            let view = permuted(&values, &shape, &order);
            let want: Vec<f32> = to_row_major(&view).into_iter().map(composite).collect();
            assert_bits(&sigmoid(&view), &want);
        }
        assert_eq!(
            sigmoid(&HostView::row_major(&values[1..3], &[2])),
            [1.0, 0.0]
        );
        assert!(sigmoid(&HostView::row_major(&[], &[0, 3])).is_empty());
    }

    #[test]
    fn tanh_is_burn_ndarrays_and_long_passes_are_shared_out_alike() {
        use burn::backend::NdArray;
        use burn::tensor::{Tensor, TensorData};
        // past the split, with a strided view, special values at both ends of a run
        let n = SPLIT_VALUES + SPLIT_RUN + 3;
        let values = with_specials(n, 9);
        let plain = TensorData::new(values.clone(), [n]);
        let plain = Tensor::<NdArray, 1>::from_data(plain, &Default::default());
        let want = plain.clone().tanh().into_data().to_vec::<f32>().unwrap();
        assert_bits(&tanh(&HostView::row_major(&values, &[n])), &want);
        let serial: Vec<f32> = values.iter().map(|&v| tanh_value(v)).collect();
        assert_bits(&serial, &want);
        let long_sigmoid: Vec<f32> = values.iter().map(|&v| sigmoid_value(v)).collect();
        assert_bits(&sigmoid(&HostView::row_major(&values, &[n])), &long_sigmoid);
        // a transposed view of a short pass
        let (rows, cols) = (5, 7);
        let view = permuted(&values[..rows * cols], &[rows, cols], &[1, 0]);
        let want: Vec<f32> = to_row_major(&view).into_iter().map(tanh_value).collect();
        assert_bits(&tanh(&view), &want);
        assert!(tanh(&HostView::row_major(&[], &[0, 3])).is_empty());
    }

    /// Special values of an activation's input, and where a long pass puts them: both ends of
    /// its runs.
    fn with_specials(n: usize, seed: u32) -> Vec<f32> {
        let mut values: Vec<f32> = values(n, seed);
        let specials = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            20.0,
            -1e-30,
            1e-7,
        ];
        // a shorter pass has them at a block's ends instead
        let at = [
            0,
            SPLIT_RUN - 1,
            SPLIT_RUN,
            2 * SPLIT_RUN - 1,
            2 * SPLIT_RUN,
        ];
        let at = at.map(|i| if i < n - 2 { i } else { i % 256 });
        for (i, v) in at.into_iter().chain([n - 2, n - 1]).zip(specials) {
            values[i] = v;
        }
        values
    }

    #[test]
    fn gelu_and_its_backward_are_burn_ndarrays_composites_bit_for_bit() {
        use burn::backend::NdArray;
        use burn::tensor::ops::ActivationOps;
        use burn::tensor::{Tensor, TensorData, TensorPrimitive, activation};
        // past the split, and a short pass (a few blocks of the stages)
        for n in [SPLIT_VALUES + SPLIT_RUN + 3, 3 * 256 + 7] {
            let x = with_specials(n, 11);
            let g: Vec<f32> = values(n, 12).iter().map(|v| v / 3.0).collect();
            let tensor = |v: &[f32]| {
                let data = TensorData::new(v.to_vec(), [n]);
                Tensor::<NdArray, 1>::from_data(data, &Default::default())
            };
            let want = activation::gelu(tensor(&x));
            let want = want.into_data().to_vec::<f32>().unwrap();
            assert_bits(&gelu(&HostView::row_major(&x, &[n])), &want);
            let serial_gelu: Vec<f32> = x.iter().map(|&v| gelu_value(v)).collect();
            assert_bits(&serial_gelu, &want);
            let (px, pg) = (tensor(&x).into_primitive().tensor(), tensor(&g));
            let grad = <NdArray as ActivationOps<NdArray>>::gelu_backward(
                px,
                pg.into_primitive().tensor(),
            );
            let grad = Tensor::<NdArray, 1>::from_primitive(TensorPrimitive::Float(grad));
            let want = grad.into_data().to_vec::<f32>().unwrap();
            let (vx, vg) = (HostView::row_major(&x, &[n]), HostView::row_major(&g, &[n]));
            let (got, shape) = binary(Binary::GeluBackward, &vx, &vg).expect("one shape");
            assert_eq!(shape, [n]);
            assert_bits(&got, &want);
            let serial = x.iter().zip(&g).map(|(&x, &g)| gelu_backward_value(x, g));
            assert_bits(&serial.collect::<Vec<_>>(), &want);
            // a pool of one thread runs a long pass whole on the calling thread
            let one = rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .build()
                .unwrap();
            let (got, _) = one.install(|| binary(Binary::GeluBackward, &vx, &vg).unwrap());
            assert_bits(&got, &want);
            assert_bits(&one.install(|| gelu(&vx)), &serial_gelu);
        }
    }

    #[test]
    fn gelus_backward_reads_views_through_their_strides_and_broadcasts() {
        // a transposed input against a row-major gradient, long enough to split
        let (rows, cols) = (96, 130);
        let (x, g) = (with_specials(rows * cols, 13), values(rows * cols, 14));
        let vx = permuted(&x, &[rows, cols], &[1, 0]);
        let vg = HostView::row_major(&g, &[cols, rows]);
        let want: Vec<f32> = to_row_major(&vx)
            .iter()
            .zip(&g)
            .map(|(&x, &g)| gelu_backward_value(x, g))
            .collect();
        let (got, _) = binary(Binary::GeluBackward, &vx, &vg).expect("one shape");
        assert_bits(&got, &want);
        assert_bits(
            &gelu(&vx),
            &to_row_major(&vx)
                .into_iter()
                .map(gelu_value)
                .collect::<Vec<_>>(),
        );
        // a gradient broadcast along the rows takes the walk, with the same values
        let row = HostView::row_major(&g[..rows], &[1, rows]);
        let (got, shape) = binary(Binary::GeluBackward, &vx, &row).expect("broadcasts");
        assert_eq!(shape, [cols, rows]);
        let want: Vec<f32> = to_row_major(&vx)
            .iter()
            .enumerate()
            .map(|(i, &x)| gelu_backward_value(x, g[i % rows]))
            .collect();
        assert_bits(&got, &want);
        let empty = HostView::row_major(&[], &[0, 3]);
        assert_eq!(
            binary(Binary::GeluBackward, &empty, &empty),
            Some((vec![], vec![0, 3]))
        );
    }
}
