//! The host implementation: im2col of a sample (or a group of samples with few output
//! positions) into a reused buffer, `gemm` per group.

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

    /// Samples one product takes: enough for [`GROUP_COLUMNS`] output positions, at most the
    /// batch; one where a sample's input is its own columns.
    fn group(&self) -> usize {
        if self.reads_input_as_columns() {
            return 1;
        }
        GROUP_COLUMNS
            .div_ceil(self.l().max(1))
            .clamp(1, self.batch.max(1))
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

/// Output positions a product has at least where the batch allows: samples with fewer are
/// multiplied together, their columns side by side. A GEMM as narrow as one sample of
/// ResNet-18-w16's last stage (16 positions) ran at less than half the `gemm` crate's speed
/// (`cargo bench -p cubecl-kernels --bench conv`).
const GROUP_COLUMNS: usize = 128;

thread_local! {
    /// A group of samples' columns, kept per thread between calls and grown where short.
    static COLUMNS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// A group's output (or output gradient) with its samples side by side, `[C_out, S·L]`.
    static PACKED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// `f` of this thread's column buffer of `len` values (contents unspecified).
fn with_columns<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    crate::scratch::with_scratch(&COLUMNS, len, usize::MAX, f)
}

/// `f` of this thread's buffer for a group's packed output of `len` values (contents
/// unspecified).
fn with_packed<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    crate::scratch::with_scratch(&PACKED, len, usize::MAX, f)
}

/// The columns `[C·kvol, S·L]` of the `S` samples `x: [S, C, d, h, w]`, sample `j` from
/// column `j·L`, zero in the padding.
fn im2col(x: &[f32], w: &Window, cols: &mut [f32]) {
    let (l, kvol, plane) = (w.positions(), w.kvol(), w.input.iter().product::<usize>());
    let samples = x.len() / (w.channels * plane).max(1);
    let ld = samples * l;
    for (j, x) in x.chunks_exact(w.channels * plane).enumerate() {
        for (c, rows) in cols.chunks_mut(kvol * ld).take(w.channels).enumerate() {
            im2col_channel(&x[c * plane..][..plane], w, rows, ld, j * l);
        }
    }
}

/// The `S` samples `src: [S, R, L]` side by side: `packed: [R, S·L]`.
fn pack(src: &[f32], packed: &mut [f32], [rows, l]: [usize; 2]) {
    let samples = src.len() / (rows * l).max(1);
    for (j, sample) in src.chunks_exact(rows * l).enumerate() {
        for (r, run) in sample.chunks_exact(l).enumerate() {
            packed[(r * samples + j) * l..][..l].copy_from_slice(run);
        }
    }
}

/// [`pack`] undone: `packed: [R, S·L]` into `dst: [S, R, L]`.
fn unpack(packed: &[f32], dst: &mut [f32], [rows, l]: [usize; 2]) {
    let samples = dst.len() / (rows * l).max(1);
    for (j, sample) in dst.chunks_exact_mut(rows * l).enumerate() {
        for (r, run) in sample.chunks_exact_mut(l).enumerate() {
            run.copy_from_slice(&packed[(r * samples + j) * l..][..l]);
        }
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
    let (k, og) = (conv.k(), conv.og());
    assert_eq!(weight.len(), conv.weight_len(), "dense conv: weight length");
    if let Some(b) = bias {
        assert_eq!(b.len(), conv.out_channels, "dense conv: bias length");
    }
    let par = conv.parallelism(conv.batch.div_ceil(conv.group()));
    forward_with(x, conv, |y, cols, ld| {
        for g in 0..conv.groups() {
            gemm_into(
                [og, ld, k],
                &mut y[g * og * ld..],
                [ld, 1],
                false,
                Mat::rows(&weight[g * og * k..], k),
                Mat::rows(&cols[g * k * ld..], ld),
                par,
            );
        }
        if let Some(bias) = bias {
            for (row, b) in y.chunks_mut(ld).zip(bias) {
                row.iter_mut().for_each(|v| *v += b);
            }
        }
    })
}

/// A convolution's forward pass through any product of its columns: `x: [B, C, d, h, w]` →
/// `y: [B, C_out, od, oh, ow]`, where `product(y, cols, ld)` writes `y: [C_out, ld]` of the
/// columns `cols: [G, C/G · kvol, ld]` of a group of `ld / L` samples (side by side, as in
/// [`forward`]). The groups run in parallel on rayon's threads, their columns and packed
/// outputs in per-thread buffers: no buffer of the whole batch's columns.
///
/// # Panics
/// If `x`'s length disagrees with `conv`.
pub fn forward_with(
    x: &[f32],
    conv: &DenseConv,
    product: impl Fn(&mut [f32], &[f32], usize) + Sync,
) -> Vec<f32> {
    let (l, w) = (conv.l(), &conv.window);
    conv.check("input", x.len(), conv.input_len());
    let mut y = vec![0f32; conv.batch * conv.output_len()];
    if y.is_empty() {
        return y;
    }
    let (group, out_len, in_len) = (conv.group(), conv.output_len(), conv.input_len());
    y.par_chunks_mut(group * out_len)
        .zip(x.par_chunks(group * in_len.max(1)))
        .for_each(|(yb, xb)| {
            let samples = yb.len() / out_len;
            let ld = samples * l;
            if conv.reads_input_as_columns() {
                return product(yb, xb, ld);
            }
            with_columns(samples * conv.columns_len(), |cols| {
                im2col(xb, w, cols);
                match samples {
                    // one sample's `[C_out, L]` is its output
                    1 => product(yb, cols, ld),
                    _ => with_packed(yb.len(), |y| {
                        product(y, cols, ld);
                        unpack(y, yb, [conv.out_channels, l]);
                    }),
                }
            })
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
    let (group, out_len, in_len) = (conv.group(), conv.output_len(), conv.input_len());
    let par = conv.parallelism(conv.batch.div_ceil(group));
    // dcols[g] (K × ld) = W[g]ᵀ (K × og) · dy[g] (og × ld), the group's samples side by side
    let columns = |dy: &[f32], dcols: &mut [f32], ld: usize| {
        for g in 0..conv.groups() {
            gemm_into(
                [k, ld, og],
                &mut dcols[g * k * ld..],
                [ld, 1],
                false,
                Mat::transposed(&weight[g * og * k..], k),
                Mat::rows(&dy[g * og * ld..], ld),
                par,
            );
        }
    };
    dx.par_chunks_mut(group * in_len)
        .zip(output_grad.par_chunks(group * out_len.max(1)))
        .for_each(|(dxb, dyb)| {
            let samples = dxb.len() / in_len;
            let ld = samples * l;
            if conv.reads_input_as_columns() {
                return columns(dyb, dxb, ld);
            }
            with_columns(samples * conv.columns_len(), |dcols| {
                match samples {
                    // one sample's `[C_out, L]` is its packed output gradient
                    1 => columns(dyb, dcols, ld),
                    _ => with_packed(dyb.len(), |dy| {
                        pack(dyb, dy, [conv.out_channels, l]);
                        columns(dy, dcols, ld);
                    }),
                }
                for (j, dx) in dxb.chunks_exact_mut(in_len).enumerate() {
                    col2im_add(dcols, [ld, j * l], w, dx);
                }
            })
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
    // runs of whole groups of samples, one per thread, summed in order at the end
    let group = conv.group();
    let groups = batch.div_ceil(group);
    let runs = rayon::current_num_threads().clamp(1, groups);
    let per_run = groups.div_ceil(runs);
    let par = conv.parallelism(runs);
    let (in_len, out_len) = (conv.input_len(), conv.output_len());
    // dW[g] (og × K) += dy[g] (og × ld) · cols[g]ᵀ (ld × K), a group's samples side by side.
    // With `og` and K multiples of 16 (a 512-bit register of f32) the sums are kept
    // column-major (`og` the unit step): the
    // GEMM then reads the columns as they lie (K rows, L values each) and packs only `dy`,
    // where a row-major sum first repacks every column value (the `gemm` crate's packing was
    // a quarter of ResNet-18-w16's step). Other shapes stay row-major: LeNet-5's second layer
    // (16 × 150) summed column-major made its step 30 % slower.
    let dst = match og % 16 == 0 && k % 16 == 0 {
        true => [1, og],
        false => [k, 1],
    };
    let add = |dw: &mut [f32], dy: &[f32], cols: &[f32], ld: usize, first: bool| {
        for g in 0..conv.groups() {
            gemm_into(
                [og, k, ld],
                &mut dw[g * og * k..],
                dst,
                !first,
                Mat::rows(&dy[g * og * ld..], ld),
                Mat::transposed(&cols[g * k * ld..], ld),
                par,
            );
        }
    };
    let sums: Vec<Vec<f32>> = (0..runs)
        .into_par_iter()
        .map(|run| {
            let mut dw = vec![0f32; conv.weight_len()];
            let first = run * per_run;
            for i in first..((run + 1) * per_run).min(groups) {
                let (b0, b1) = (i * group, ((i + 1) * group).min(batch));
                let (xb, dyb) = (
                    &x[b0 * in_len..b1 * in_len],
                    &output_grad[b0 * out_len..b1 * out_len],
                );
                let ld = (b1 - b0) * l;
                if conv.reads_input_as_columns() {
                    add(&mut dw, dyb, xb, ld, i == first);
                    continue;
                }
                with_columns((b1 - b0) * conv.columns_len(), |cols| {
                    im2col(xb, w, cols);
                    match b1 - b0 {
                        // one sample's `[C_out, L]` is its packed output gradient
                        1 => add(&mut dw, dyb, cols, ld, i == first),
                        _ => with_packed(dyb.len(), |dy| {
                            pack(dyb, dy, [conv.out_channels, l]);
                            add(&mut dw, dy, cols, ld, i == first);
                        }),
                    }
                });
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
