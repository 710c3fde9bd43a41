//! Burn's element-wise arithmetic on host memory: the binary ops with broadcasting (`add`,
//! `sub`, `mul`, `div`), ReLU's, sigmoid's and GELU's backward, the copy of a strided view into
//! row-major order, and the activations ([`activation`]: sigmoid, tanh, GELU).
//!
//! burn-ndarray 0.21 (built without its `simd` feature, `docs/architecture.md`) runs these
//! through ndarray's dynamic-rank `Zip` and iterators: a broadcast operand or a permuted view
//! (batch norm's `swap_dims(0, 1).reshape(..)`) is walked value by value. Here every operand
//! is a [`HostView`] (values, shape and strides); the walk first merges the axes that all
//! operands step through alike, so that the innermost loop runs over a contiguous row, or holds
//! one operand fixed (a per-channel value broadcast over a plane). The binary loops run on the
//! calling thread: they are bound by memory, and spreading them over rayon's threads made
//! LeNet-5's training step on 2 cores 1.6× slower (7.6 ms against 4.7 ms, `cargo xtask bench
//! --filter model`) and ResNet-18-w16's no faster. GELU's backward is bound by its `powf` and
//! `tanh` calls instead: where its operands have one shape it is shared out over rayon's
//! threads as the activations are ([`SPLIT_VALUES`]).
//!
//! Each result value is the IEEE f32 operation burn-ndarray computes for it (`a + b`,
//! `a - b`, `a · b`, `a / b`; ReLU's backward is `grad` where `output > 0`, else `0`, NaN
//! outputs passing the gradient), or the chain of them burn-backend's default composite runs
//! (sigmoid's backward's four passes, GELU's backward's fourteen), so the results equal
//! burn-ndarray's bit for bit: nothing is summed, so no order of additions can differ, and the
//! functions are the same calls burn-ndarray makes ([`activation`]), or, for tanh, vectors whose
//! rounded values are that call's bit for bit ([`wide`]).

pub mod activation;
pub mod wide;

pub use activation::{
    GELU_BACKWARD, GELU_FORWARD, SIGMOID, SPLIT_RUN, SPLIT_VALUES, erf_value, gelu,
    gelu_backward_value, gelu_value, sigmoid, sigmoid_backward_value, sigmoid_value, tanh,
    tanh_value,
};

/// A read-only host view of f32 values: the value at index `i` is
/// `values[Σ i[d] · strides[d]]` (non-negative strides; any value for an axis of length 1).
#[derive(Clone, Debug, PartialEq)]
pub struct HostView<'a> {
    /// The memory the view reads (every index of the shape falls inside it).
    pub values: &'a [f32],
    /// The view's shape.
    pub shape: Vec<usize>,
    /// The step in `values` along each axis.
    pub strides: Vec<usize>,
}

impl<'a> HostView<'a> {
    /// A row-major view of `values` with `shape`.
    ///
    /// # Panics
    /// If `values` does not hold exactly `shape`'s elements.
    pub fn row_major(values: &'a [f32], shape: &[usize]) -> Self {
        assert_eq!(
            values.len(),
            shape.iter().product::<usize>(),
            "host view: values for the shape"
        );
        let mut strides = vec![1; shape.len()];
        for d in (0..shape.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * shape[d + 1];
        }
        Self {
            values,
            shape: shape.to_vec(),
            strides,
        }
    }

    /// Whether the view reads its values in row-major order from the start of `values` (a
    /// reshape of it needs no copy).
    pub fn is_row_major(&self) -> bool {
        let mut step = 1;
        for (&n, &s) in self.shape.iter().zip(&self.strides).rev() {
            if n > 1 && s != step {
                return false;
            }
            step *= n;
        }
        true
    }

    fn check(&self) {
        assert_eq!(self.shape.len(), self.strides.len(), "host view: rank");
        if self.shape.contains(&0) {
            return;
        }
        let last: usize = self
            .shape
            .iter()
            .zip(&self.strides)
            .map(|(&n, &s)| (n - 1) * s)
            .sum();
        assert!(
            last < self.values.len(),
            "host view: strides past the values"
        );
    }
}

/// A binary element-wise op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binary {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a · b`.
    Mul,
    /// `a / b`.
    Div,
    /// ReLU's backward with `a` the ReLU's output and `b` its output gradient: `b` where
    /// `a > 0` (or `a` is NaN), `0` where `a ≤ 0` (burn-backend's `mask_fill(grad, output ≤ 0,
    /// 0)`).
    ReluBackward,
    /// Sigmoid's backward with `a` the sigmoid's output and `b` its output gradient:
    /// `a · (a · −1 + 1) · b` (burn-backend's `sigmoid_backward`, operation for operation).
    SigmoidBackward,
    /// GELU's backward with `a` the GELU's input and `b` its output gradient (burn-backend's
    /// `gelu_backward`, operation for operation: [`gelu_backward_value`]); over rayon's threads
    /// where `a` and `b` have one shape.
    GeluBackward,
}

/// `op` of `a` and `b` broadcast against each other (an axis of length 1 repeats), as
/// row-major values and their shape; `None` when the ranks differ or an axis of one is neither
/// 1 nor the other's length.
///
/// # Panics
/// If a view's strides reach past its values.
pub fn binary(op: Binary, a: &HostView<'_>, b: &HostView<'_>) -> Option<(Vec<f32>, Vec<usize>)> {
    a.check();
    b.check();
    if op == Binary::GeluBackward && a.shape == b.shape {
        let values = activation::zip_split(a, b, activation::gelu_backward_run)?;
        return Some((values, a.shape.clone()));
    }
    let shape = broadcast_shape(&a.shape, &b.shape)?;
    let strides = [broadcast(a, &shape), broadcast(b, &shape)];
    let walk = Walk::new(&shape, strides);
    let values = match op {
        Binary::Add => walk.run(a.values, b.values, |x, y| x + y),
        Binary::Sub => walk.run(a.values, b.values, |x, y| x - y),
        Binary::Mul => walk.run(a.values, b.values, |x, y| x * y),
        Binary::Div => walk.run(a.values, b.values, |x, y| x / y),
        Binary::ReluBackward => walk.run(a.values, b.values, relu_backward_value),
        Binary::SigmoidBackward => walk.run(a.values, b.values, sigmoid_backward_value),
        Binary::GeluBackward => walk.run(a.values, b.values, gelu_backward_value),
    };
    Some((values, shape))
}

/// The shape two shapes broadcast to (an axis of length 1 takes the other's length); `None`
/// when the ranks differ or an axis is neither 1 nor the other's length.
pub(crate) fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    if a.len() != b.len() {
        return None;
    }
    a.iter()
        .zip(b)
        .map(|(&m, &n)| match (m, n) {
            _ if m == n => Some(m),
            (1, n) => Some(n),
            (m, 1) => Some(m),
            _ => None,
        })
        .collect()
}

/// ReLU's backward at one value: `0` where the forward's output `y ≤ 0`, else the gradient
/// `g` (a NaN output passes it). The activation kernels' reference is this function.
pub fn relu_backward_value(y: f32, g: f32) -> f32 {
    match y <= 0.0 {
        true => 0.0,
        false => g,
    }
}

/// The view's values in row-major order.
///
/// # Panics
/// If the view's strides reach past its values.
pub fn to_row_major(a: &HostView<'_>) -> Vec<f32> {
    a.check();
    if a.is_row_major() {
        return a.values[..a.shape.iter().product::<usize>()].to_vec();
    }
    // the second operand is the first again: a row's copy is its `(1, 1)` or general loop
    let walk = Walk::new(&a.shape, [a.strides.clone(), a.strides.clone()]);
    walk.run(a.values, a.values, |x, _| x)
}

/// `view`'s strides for `shape`: 0 along an axis it repeats.
fn broadcast(view: &HostView<'_>, shape: &[usize]) -> Vec<usize> {
    view.shape
        .iter()
        .zip(&view.strides)
        .zip(shape)
        .map(|((&n, &s), &out)| if n == 1 && out != 1 { 0 } else { s })
        .collect()
}

/// A row-major result's axes after merging, and each operand's steps along them: the last
/// axis is the row the inner loop runs along.
struct Walk {
    dims: Vec<usize>,
    strides: [Vec<usize>; 2],
}

impl Walk {
    /// Drops the axes of length 1 and merges each axis into the next inner one where every
    /// operand steps through the pair as through one axis.
    fn new(shape: &[usize], strides: [Vec<usize>; 2]) -> Self {
        let mut dims: Vec<usize> = Vec::new();
        let mut merged: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
        for d in (0..shape.len()).rev() {
            let n = shape[d];
            if n == 1 {
                continue;
            }
            let joins = dims.last().is_some_and(|&inner| {
                (0..2).all(|k| strides[k][d] == merged[k].last().copied().unwrap_or(0) * inner)
            });
            if joins {
                *dims.last_mut().expect("an inner axis") *= n;
            } else {
                dims.push(n);
                for k in 0..2 {
                    merged[k].push(strides[k][d]);
                }
            }
        }
        dims.reverse();
        merged.iter_mut().for_each(|s| s.reverse());
        if dims.is_empty() || shape.contains(&0) {
            let n = shape.iter().product();
            return Self {
                dims: vec![n],
                strides: [vec![1], vec![1]],
            };
        }
        Self {
            dims,
            strides: merged,
        }
    }

    /// `f(a, b)` at every index, row-major.
    fn run(&self, a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32) -> Vec<f32> {
        let total: usize = self.dims.iter().product();
        let n = *self.dims.last().expect("an axis");
        let mut out = vec![0f32; total];
        if total == 0 {
            return out;
        }
        let last = self.dims.len() - 1;
        let (sa, sb) = (self.strides[0][last], self.strides[1][last]);
        let mut at = Odometer::new(&self.dims, &self.strides);
        for row in out.chunks_mut(n) {
            let [oa, ob] = at.offsets;
            match (sa, sb) {
                (1, 1) => {
                    let (x, y) = (&a[oa..oa + n], &b[ob..ob + n]);
                    for ((o, &x), &y) in row.iter_mut().zip(x).zip(y) {
                        *o = f(x, y);
                    }
                }
                (1, 0) => {
                    let y = b[ob];
                    for (o, &x) in row.iter_mut().zip(&a[oa..oa + n]) {
                        *o = f(x, y);
                    }
                }
                (0, 1) => {
                    let x = a[oa];
                    for (o, &y) in row.iter_mut().zip(&b[ob..ob + n]) {
                        *o = f(x, y);
                    }
                }
                _ => {
                    for (j, o) in row.iter_mut().enumerate() {
                        *o = f(a[oa + j * sa], b[ob + j * sb]);
                    }
                }
            }
            at.next_row();
        }
        out
    }
}

/// The index of a row (every axis but the last) and each operand's offset at its start.
struct Odometer<'w> {
    dims: &'w [usize],
    strides: &'w [Vec<usize>; 2],
    index: Vec<usize>,
    offsets: [usize; 2],
}

impl<'w> Odometer<'w> {
    /// At the first row.
    fn new(dims: &'w [usize], strides: &'w [Vec<usize>; 2]) -> Self {
        Self {
            dims,
            strides,
            index: vec![0; dims.len() - 1],
            offsets: [0, 0],
        }
    }

    /// Steps to the next row (wrapping past the last).
    fn next_row(&mut self) {
        for d in (0..self.index.len()).rev() {
            self.index[d] += 1;
            for k in 0..2 {
                self.offsets[k] += self.strides[k][d];
            }
            if self.index[d] < self.dims[d] {
                return;
            }
            for k in 0..2 {
                self.offsets[k] -= self.strides[k][d] * self.dims[d];
            }
            self.index[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Binary, HostView, binary, gelu_backward_value, to_row_major};

    /// The value of `v` at the row-major position `flat` of `shape` (`v` broadcast to it).
    fn at(v: &HostView<'_>, shape: &[usize], mut flat: usize) -> f32 {
        let mut offset = 0;
        for d in (0..shape.len()).rev() {
            let i = flat % shape[d];
            flat /= shape[d];
            if v.shape[d] != 1 {
                offset += i * v.strides[d];
            }
        }
        v.values[offset]
    }

    /// The reference: `op` at every index, read through the strides one index at a time.
    // Burn negates by multiplying by −1 (a NaN keeps its sign, which `-x` flips)
    #[allow(clippy::neg_multiply)]
    fn reference(op: Binary, a: &HostView<'_>, b: &HostView<'_>, shape: &[usize]) -> Vec<f32> {
        let total: usize = shape.iter().product();
        (0..total)
            .map(|i| {
                let (x, y) = (at(a, shape, i), at(b, shape, i));
                match op {
                    Binary::Add => x + y,
                    Binary::Sub => x - y,
                    Binary::Mul => x * y,
                    Binary::Div => x / y,
                    Binary::ReluBackward => {
                        if x <= 0.0 {
                            0.0
                        } else {
                            y
                        }
                    }
                    // burn-backend's `sigmoid_backward`: mul(mul(x, neg(x) + 1), y)
                    Binary::SigmoidBackward => (x * (x * -1.0 + 1.0)) * y,
                    // its own reference: `activation`'s tests check it against burn-ndarray's
                    Binary::GeluBackward => gelu_backward_value(x, y),
                }
            })
            .collect()
    }

    pub(super) fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n as u32)
            .map(|i| {
                let h = (i ^ seed).wrapping_mul(2_654_435_761).rotate_left(13);
                (h % 2001) as f32 / 100.0 - 10.0
            })
            .collect()
    }

    /// A permuted view of row-major `values` of `shape`: axes in `order`.
    pub(super) fn permuted<'a>(
        values: &'a [f32],
        shape: &[usize],
        order: &[usize],
    ) -> HostView<'a> {
        let base = HostView::row_major(values, shape);
        HostView {
            values,
            shape: order.iter().map(|&d| base.shape[d]).collect(),
            strides: order.iter().map(|&d| base.strides[d]).collect(),
        }
    }

    const OPS: [Binary; 7] = [
        Binary::Add,
        Binary::Sub,
        Binary::Mul,
        Binary::Div,
        Binary::ReluBackward,
        Binary::SigmoidBackward,
        Binary::GeluBackward,
    ];

    pub(super) fn assert_bits(got: &[f32], want: &[f32]) {
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "value {i}: {g} against {w}");
        }
    }

    #[test]
    fn broadcasts_equal_the_reference_bit_for_bit() {
        // batch norm's per-channel operands, a row, a column, a scalar, both sides broadcast,
        // and a large result
        let cases: [(&[usize], &[usize]); 8] = [
            (&[4, 3, 5, 6], &[1, 3, 1, 1]),
            (&[1, 3, 1, 1], &[4, 3, 5, 6]),
            (&[7, 9], &[1, 9]),
            (&[7, 9], &[7, 1]),
            (&[2, 3, 4], &[1, 1, 1]),
            (&[5, 1], &[1, 6]),
            (&[64, 16, 16, 16], &[1, 16, 1, 1]),
            (&[3, 4], &[3, 4]),
        ];
        for (sa, sb) in cases {
            let (va, vb) = (
                values(sa.iter().product(), 1),
                values(sb.iter().product(), 2),
            );
            let (a, b) = (HostView::row_major(&va, sa), HostView::row_major(&vb, sb));
            for op in OPS {
                let (got, shape) = binary(op, &a, &b).expect("broadcastable");
                assert_bits(&got, &reference(op, &a, &b, &shape));
            }
        }
    }

    #[test]
    fn permuted_operands_are_read_through_their_strides() {
        // batch norm's swap_dims(0, 1) against a row-major operand of the swapped shape
        let shape = [6, 5, 4, 3];
        let (va, vb) = (values(360, 3), values(360, 4));
        let a = permuted(&va, &shape, &[1, 0, 2, 3]);
        let b = HostView::row_major(&vb, &[5, 6, 4, 3]);
        for op in OPS {
            let (got, out) = binary(op, &a, &b).expect("same shape");
            assert_eq!(out, [5, 6, 4, 3]);
            assert_bits(&got, &reference(op, &a, &b, &out));
        }
        // a full transpose, both sides
        let shape = [96, 80, 30];
        let (va, vb) = (values(96 * 80 * 30, 5), values(96 * 80 * 30, 6));
        let (a, b) = (
            permuted(&va, &shape, &[2, 1, 0]),
            permuted(&vb, &shape, &[2, 1, 0]),
        );
        let (got, out) = binary(Binary::Mul, &a, &b).expect("same shape");
        assert_bits(&got, &reference(Binary::Mul, &a, &b, &out));
    }

    #[test]
    fn a_strided_view_copies_into_row_major_order() {
        let shape = [64, 16, 8, 8];
        let v = values(shape.iter().product(), 7);
        for order in [[1, 0, 2, 3], [0, 1, 3, 2], [3, 2, 1, 0], [0, 1, 2, 3]] {
            let view = permuted(&v, &shape, &order);
            let want: Vec<f32> = (0..v.len()).map(|i| at(&view, &view.shape, i)).collect();
            assert_eq!(view.is_row_major(), order == [0, 1, 2, 3]);
            assert_bits(&to_row_major(&view), &want);
        }
    }

    #[test]
    fn relu_backward_passes_the_gradient_where_the_output_is_positive_or_nan() {
        let out = [
            1.0,
            0.0,
            -0.0,
            -2.0,
            f32::NAN,
            f32::INFINITY,
            f32::MIN_POSITIVE,
        ];
        let grad = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0];
        let (a, b) = (
            HostView::row_major(&out, &[7]),
            HostView::row_major(&grad, &[7]),
        );
        let (got, _) = binary(Binary::ReluBackward, &a, &b).unwrap();
        assert_bits(&got, &[10.0, 0.0, 0.0, 0.0, 50.0, 60.0, 70.0]);
    }

    #[test]
    fn shapes_that_do_not_broadcast_are_refused_and_empty_ones_are_empty() {
        let v = values(12, 8);
        let (a, b) = (
            HostView::row_major(&v, &[3, 4]),
            HostView::row_major(&v[..6], &[3, 2]),
        );
        assert_eq!(binary(Binary::Add, &a, &b), None);
        let c = HostView::row_major(&v, &[12]);
        assert_eq!(binary(Binary::Add, &a, &c), None);
        let empty = HostView::row_major(&[], &[0, 4]);
        let row = HostView::row_major(&v[..4], &[1, 4]);
        assert_eq!(
            binary(Binary::Mul, &empty, &row),
            Some((vec![], vec![0, 4]))
        );
        // rank 0: one value
        let (x, y) = (
            HostView::row_major(&v[..1], &[]),
            HostView::row_major(&v[1..2], &[]),
        );
        assert_eq!(
            binary(Binary::Sub, &x, &y),
            Some((vec![v[0] - v[1]], vec![]))
        );
    }

    #[test]
    #[should_panic(expected = "strides past the values")]
    fn strides_past_the_values_panic_before_any_read() {
        let v = values(8, 9);
        let bad = HostView {
            values: &v,
            shape: vec![4, 4],
            strides: vec![4, 1],
        };
        let _ = to_row_major(&bad);
    }
}
