//! The host implementation: per-sample im2col into a reused buffer, `gemm` per group.

use crate::approx::im2col::Window;
use crate::approx::im2col::runs::{col2im_add, col2im_channel, im2col_channel};
use gemm::Parallelism;
use rayon::prelude::*;
use std::cell::RefCell;

/// The shapes of one convolution: `batch` samples through `window` into `out_channels`
/// channels. Inputs are contiguous `[B, C, d, h, w]`, weights `[C_out, C/G, kd, kh, kw]`,
/// outputs `[B, C_out, od, oh, ow]`, all f32 in row-major order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DenseConv {
    /// Samples.
    pub batch: usize,
    /// The window (input channels and size, kernel, stride, padding, dilation, groups).
    pub window: Window,
    /// Output channels (all groups).
    pub out_channels: usize,
}

impl DenseConv {
    fn groups(&self) -> usize {
        self.window.groups
    }

    /// Rows of a group's columns: `C/G · kvol`.
    fn k(&self) -> usize {
        self.window.channels / self.groups() * self.window.kvol()
    }

    /// Output positions per sample.
    fn l(&self) -> usize {
        self.window.positions()
    }

    /// Output channels per group.
    fn og(&self) -> usize {
        self.out_channels / self.groups()
    }

    /// Input values per sample.
    pub fn input_len(&self) -> usize {
        self.window.channels * self.window.input.iter().product::<usize>()
    }

    /// Output values per sample.
    pub fn output_len(&self) -> usize {
        self.out_channels * self.l()
    }

    /// Weight values.
    pub fn weight_len(&self) -> usize {
        self.out_channels * self.k()
    }

    /// Whether a sample's input is its own columns: a 1×1 kernel, unit stride, no padding.
    fn reads_input_as_columns(&self) -> bool {
        let w = &self.window;
        w.kernel == [1; 3] && w.stride == [1; 3] && w.padding == [0; 3]
    }

    /// Column values per sample (all groups).
    fn columns_len(&self) -> usize {
        self.groups() * self.k() * self.l()
    }

    fn check(&self, what: &str, len: usize, per: usize) {
        assert_eq!(len, self.batch * per, "dense conv: {what} length");
    }

    /// How each GEMM runs: alone when the samples keep every thread busy, else spread.
    fn parallelism(&self, tasks: usize) -> Parallelism {
        if tasks >= rayon::current_num_threads() {
            Parallelism::None
        } else {
            Parallelism::Rayon(0)
        }
    }
}

thread_local! {
    /// One sample's columns, kept per thread between calls and grown where short.
    static COLUMNS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// `f` of this thread's column buffer of `len` values (contents unspecified).
fn with_columns<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    crate::scratch::with_scratch(&COLUMNS, len, usize::MAX, f)
}

/// One sample's columns `[C·kvol, L]` of `x: [C, d, h, w]`, zero in the padding.
fn im2col(x: &[f32], w: &Window, cols: &mut [f32]) {
    let (l, kvol, plane) = (w.positions(), w.kvol(), w.input.iter().product::<usize>());
    for (c, rows) in cols.chunks_mut(kvol * l).take(w.channels).enumerate() {
        im2col_channel(&x[c * plane..][..plane], w, rows, l, 0);
    }
}

/// The columns `[G, C/G · kvol, B·L]` of `batch` samples `x: [B, C, d, h, w]`: the values of
/// [`crate::approx::im2col::im2col`] (its host reference), run by runs of contiguous copies,
/// one channel per task.
pub fn im2col_batch(x: &[f32], batch: usize, w: &Window) -> Vec<f32> {
    let (l, kvol, plane) = (w.positions(), w.kvol(), w.input.iter().product::<usize>());
    assert_eq!(x.len(), batch * w.channels * plane, "im2col input length");
    let ld = batch * l;
    let mut cols = vec![0f32; w.channels * kvol * ld];
    if cols.is_empty() {
        return cols;
    }
    cols.par_chunks_mut(kvol * ld)
        .enumerate()
        .for_each(|(c, rows)| {
            for b in 0..batch {
                let plane_of = &x[(b * w.channels + c) * plane..][..plane];
                im2col_channel(plane_of, w, rows, ld, b * l);
            }
        });
    cols
}

/// Columns `[G, C/G · kvol, B·L]` added back into `[B, C, d, h, w]`: the values of
/// [`crate::approx::im2col::col2im`] (its host reference, the same order of additions), one
/// input channel plane per task.
pub fn col2im_batch(cols: &[f32], batch: usize, w: &Window) -> Vec<f32> {
    let (l, kvol, plane) = (w.positions(), w.kvol(), w.input.iter().product::<usize>());
    let ld = batch * l;
    assert_eq!(cols.len(), w.channels * kvol * ld, "col2im columns length");
    let mut x = vec![0f32; batch * w.channels * plane];
    if x.is_empty() {
        return x;
    }
    x.par_chunks_mut(plane).enumerate().for_each(|(bc, dst)| {
        let (b, c) = (bc / w.channels, bc % w.channels);
        col2im_channel(&cols[c * kvol * ld..][..kvol * ld], ld, b * l, w, dst);
    });
    x
}

/// A matrix operand: values and the strides of its rows and columns.
#[derive(Clone, Copy)]
struct Mat<'a> {
    values: &'a [f32],
    row_stride: usize,
    col_stride: usize,
}

impl<'a> Mat<'a> {
    /// Row-major with `cols` columns.
    fn rows(values: &'a [f32], cols: usize) -> Self {
        Self {
            values,
            row_stride: cols,
            col_stride: 1,
        }
    }

    /// The transpose of a row-major matrix with `cols` columns.
    fn transposed(values: &'a [f32], cols: usize) -> Self {
        Self {
            values,
            row_stride: 1,
            col_stride: cols,
        }
    }

    /// Checks that an `r × c` matrix fits in the values.
    fn check(&self, r: usize, c: usize) {
        if r > 0 && c > 0 {
            let last = (r - 1) * self.row_stride + (c - 1) * self.col_stride;
            assert!(
                last < self.values.len(),
                "dense conv: operand out of bounds"
            );
        }
    }
}

/// `dst (m × n: element (i, j) at `i · rs + j · cs`) = [dst +] a (m × k) · b (k × n)`.
#[allow(clippy::too_many_arguments)]
fn gemm_into(
    [m, n, k]: [usize; 3],
    dst: &mut [f32],
    [rs, cs]: [usize; 2],
    accumulate: bool,
    a: Mat<'_>,
    b: Mat<'_>,
    parallelism: Parallelism,
) {
    if m == 0 || n == 0 {
        return;
    }
    a.check(m, k);
    b.check(k, n);
    assert!(
        (m - 1) * rs + (n - 1) * cs < dst.len(),
        "dense conv: output out of bounds"
    );
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                for j in 0..n {
                    dst[i * rs + j * cs] = 0.0;
                }
            }
        }
        return;
    }
    // SAFETY: every index the product reads or writes was checked above against the slices'
    // lengths; `dst` is borrowed mutably, so it aliases neither operand.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            cs as isize,
            rs as isize,
            accumulate,
            a.values.as_ptr(),
            a.col_stride as isize,
            a.row_stride as isize,
            b.values.as_ptr(),
            b.col_stride as isize,
            b.row_stride as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        )
    }
}

/// Convolution: `x: [B, C, d, h, w]`, `weight: [C_out, C/G, k...]`, optional `bias: [C_out]`
/// → `y: [B, C_out, od, oh, ow]`.
///
/// # Panics
/// If a length disagrees with `conv`.
pub fn forward(x: &[f32], weight: &[f32], bias: Option<&[f32]>, conv: &DenseConv) -> Vec<f32> {
    let (k, l, og, w) = (conv.k(), conv.l(), conv.og(), &conv.window);
    conv.check("input", x.len(), conv.input_len());
    assert_eq!(weight.len(), conv.weight_len(), "dense conv: weight length");
    if let Some(b) = bias {
        assert_eq!(b.len(), conv.out_channels, "dense conv: bias length");
    }
    let mut y = vec![0f32; conv.batch * conv.output_len()];
    if y.is_empty() {
        return y;
    }
    let par = conv.parallelism(conv.batch);
    let sample = |yb: &mut [f32], cols: &[f32]| {
        for g in 0..conv.groups() {
            gemm_into(
                [og, l, k],
                &mut yb[g * og * l..],
                [l, 1],
                false,
                Mat::rows(&weight[g * og * k..], k),
                Mat::rows(&cols[g * k * l..], l),
                par,
            );
        }
        if let Some(bias) = bias {
            for (row, b) in yb.chunks_mut(l).zip(bias) {
                row.iter_mut().for_each(|v| *v += b);
            }
        }
    };
    y.par_chunks_mut(conv.output_len())
        .zip(x.par_chunks(conv.input_len().max(1)))
        .for_each(|(yb, xb)| {
            if conv.reads_input_as_columns() {
                sample(yb, xb)
            } else {
                with_columns(conv.columns_len(), |cols| {
                    im2col(xb, w, cols);
                    sample(yb, cols)
                })
            }
        });
    y
}

/// Gradient with respect to the input: `output_grad: [B, C_out, o...]`, `weight` → `dx: [B, C,
/// d, h, w]`.
///
/// # Panics
/// If a length disagrees with `conv`.
pub fn input_grad(output_grad: &[f32], weight: &[f32], conv: &DenseConv) -> Vec<f32> {
    let (k, l, og, w) = (conv.k(), conv.l(), conv.og(), &conv.window);
    conv.check("output gradient", output_grad.len(), conv.output_len());
    assert_eq!(weight.len(), conv.weight_len(), "dense conv: weight length");
    let mut dx = vec![0f32; conv.batch * conv.input_len()];
    if dx.is_empty() {
        return dx;
    }
    let par = conv.parallelism(conv.batch);
    // dcols[g] (K × L) = W[g]ᵀ (K × og) · dy[b][g] (og × L)
    let columns = |dyb: &[f32], dcols: &mut [f32]| {
        for g in 0..conv.groups() {
            gemm_into(
                [k, l, og],
                &mut dcols[g * k * l..],
                [l, 1],
                false,
                Mat::transposed(&weight[g * og * k..], k),
                Mat::rows(&dyb[g * og * l..], l),
                par,
            );
        }
    };
    dx.par_chunks_mut(conv.input_len())
        .zip(output_grad.par_chunks(conv.output_len().max(1)))
        .for_each(|(dxb, dyb)| {
            if conv.reads_input_as_columns() {
                columns(dyb, dxb)
            } else {
                with_columns(conv.columns_len(), |dcols| {
                    columns(dyb, dcols);
                    col2im_add(dcols, [l, 0], w, dxb);
                })
            }
        });
    dx
}

/// Gradient with respect to the weight: `x: [B, C, d, h, w]`, `output_grad: [B, C_out, o...]`
/// → `dW: [C_out, C/G, k...]`.
///
/// # Panics
/// If a length disagrees with `conv`.
pub fn weight_grad(x: &[f32], output_grad: &[f32], conv: &DenseConv) -> Vec<f32> {
    let (k, l, og, w) = (conv.k(), conv.l(), conv.og(), &conv.window);
    conv.check("input", x.len(), conv.input_len());
    conv.check("output gradient", output_grad.len(), conv.output_len());
    let batch = conv.batch;
    if batch == 0 || conv.weight_len() == 0 {
        return vec![0.0; conv.weight_len()];
    }
    let runs = rayon::current_num_threads().clamp(1, batch);
    let per_run = batch.div_ceil(runs);
    let par = conv.parallelism(runs);
    let (in_len, out_len) = (conv.input_len(), conv.output_len());
    // dW[g] (og × K) += dy[b][g] (og × L) · cols[g]ᵀ (L × K). With `og` and K multiples of 16
    // (a 512-bit register of f32) the sums are kept column-major (`og` the unit step): the
    // GEMM then reads the columns as they lie (K rows, L values each) and packs only `dy`,
    // where a row-major sum first repacks every column value (the `gemm` crate's packing was
    // a quarter of ResNet-18-w16's step). Other shapes stay row-major: LeNet-5's second layer
    // (16 × 150) summed column-major made its step 30 % slower.
    let dst = match og % 16 == 0 && k % 16 == 0 {
        true => [1, og],
        false => [k, 1],
    };
    let add = |dw: &mut [f32], b: usize, cols: &[f32], first: bool| {
        let dyb = &output_grad[b * out_len..][..out_len];
        for g in 0..conv.groups() {
            gemm_into(
                [og, k, l],
                &mut dw[g * og * k..],
                dst,
                !first,
                Mat::rows(&dyb[g * og * l..], l),
                Mat::transposed(&cols[g * k * l..], l),
                par,
            );
        }
    };
    let sums: Vec<Vec<f32>> = (0..runs)
        .into_par_iter()
        .map(|run| {
            let mut dw = vec![0f32; conv.weight_len()];
            let samples = run * per_run..((run + 1) * per_run).min(batch);
            let first = samples.start;
            for b in samples {
                let xb = &x[b * in_len..][..in_len];
                if conv.reads_input_as_columns() {
                    add(&mut dw, b, xb, b == first);
                } else {
                    with_columns(conv.columns_len(), |cols| {
                        im2col(xb, w, cols);
                        add(&mut dw, b, cols, b == first);
                    });
                }
            }
            dw
        })
        .collect();
    let mut sums = sums.into_iter();
    let mut sum = sums.next().expect("at least one run");
    for other in sums {
        sum.iter_mut().zip(&other).for_each(|(a, b)| *a += b);
    }
    if dst == [k, 1] {
        return sum;
    }
    // each group's column-major og × K sum into the row-major weight layout
    let mut dw = vec![0f32; conv.weight_len()];
    for (to, from) in dw.chunks_mut(og * k).zip(sum.chunks(og * k)) {
        for (o, row) in to.chunks_mut(k).enumerate() {
            for (kk, v) in row.iter_mut().enumerate() {
                *v = from[kk * og + o];
            }
        }
    }
    dw
}

#[cfg(test)]
mod tests;
