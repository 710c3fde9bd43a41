//! The host GEMMs of a convolution with its im2col columns read in place (an implicit GEMM).
//!
//! [`conv_forward`] and [`conv_weight_grad`] give the bits of the lowered products
//! (`gemm(W, cols)` and `gemm_nt(dy, cols)` of [`im2col`](crate::approx::im2col::im2col)'s
//! columns), without the columns: each column value is read where it lies in the input,
//! zero-padded once, at the offset of its output position plus the offset of its channel and
//! kernel tap. The columns of a batch are `C·kvol` times the input (37 MB for ResNet-18-w16's
//! first stage at batch 64), and writing them, zeroing them first and faulting in their pages
//! cost about a tenth of that model's AFM16 step. The weight gradient's long `k` is cut into
//! the same chunks as [`gemm`](super::gemm)'s ([`split_k`]), read in place too.
//!
//! Only the table expansion reads gathered operands: a product it does not take (a multiply
//! without a table, too few rows, an operand outside the band) returns `None`, and the caller
//! lowers it through the columns as before.

use super::expand::{Index, Operand, Plan};
use super::reference::avx2_available;
use crate::approx::im2col::Window;
use crate::approx::{ApproxMultiply, split_k};
use rayon::prelude::*;
use std::borrow::Cow;

/// A convolution's input as its columns read it: zero-padded (borrowed where there is no
/// padding), with the offset of every output position (`B·L`, in the columns' order) and of
/// every channel and kernel tap (`C·kvol`).
struct Gathered<'a> {
    x: Cow<'a, [f32]>,
    positions: (Vec<usize>, usize),
    taps: (Vec<usize>, usize),
}

/// Offsets and their largest (0 for none).
fn with_max(offsets: Vec<usize>) -> (Vec<usize>, usize) {
    let max = offsets.iter().copied().max().unwrap_or(0);
    (offsets, max)
}

impl<'a> Gathered<'a> {
    /// `x: [batch, C, d, h, w]` under window `w`, or `None` for a window this does not read
    /// (groups, or a kernel that does not fit the padded input).
    fn new(x: &'a [f32], batch: usize, w: &Window) -> Option<Self> {
        let out = w.out();
        let fits = (0..3).all(|i| {
            out[i] > 0
                && (out[i] - 1) * w.stride[i] + (w.kernel[i] - 1) * w.dilation[i]
                    < w.input[i] + 2 * w.padding[i]
        });
        let plane: usize = w.input.iter().product();
        if w.groups != 1
            || !fits
            || plane == 0
            || w.kernel.contains(&0)
            || x.len() != batch * w.channels * plane
        {
            return None;
        }
        let padded: [usize; 3] = std::array::from_fn(|i| w.input[i] + 2 * w.padding[i]);
        let size: usize = padded.iter().product();
        let x = if w.padding == [0; 3] {
            Cow::Borrowed(x)
        } else {
            let [_, h, iw] = w.input;
            let [_, ph, pw] = padded;
            let [p0, p1, p2] = w.padding;
            let mut xp = vec![0f32; batch * w.channels * size];
            xp.par_chunks_mut(size)
                .zip(x.par_chunks(plane))
                .for_each(|(to, from)| {
                    for (r, row) in from.chunks_exact(iw).enumerate() {
                        let (z, y) = (r / h, r % h);
                        let at = ((z + p0) * ph + y + p1) * pw + p2;
                        to[at..at + iw].copy_from_slice(row);
                    }
                });
            Cow::Owned(xp)
        };
        let [_, ph, pw] = padded;
        let [od, oh, ow] = out;
        let [s0, s1, s2] = w.stride;
        let mut positions = Vec::with_capacity(batch * od * oh * ow);
        for b in 0..batch {
            for o0 in 0..od {
                for o1 in 0..oh {
                    let at = b * w.channels * size + (o0 * s0 * ph + o1 * s1) * pw;
                    positions.extend((0..ow).map(|o2| at + o2 * s2));
                }
            }
        }
        let [kd, kh, kw] = w.kernel;
        let [d0, d1, d2] = w.dilation;
        let mut taps = Vec::with_capacity(w.channels * kd * kh * kw);
        for c in 0..w.channels {
            for a0 in 0..kd {
                for a1 in 0..kh {
                    let at = c * size + (a0 * d0 * ph + a1 * d1) * pw;
                    taps.extend((0..kw).map(|a2| at + a2 * d2));
                }
            }
        }
        Some(Self {
            x,
            positions: with_max(positions),
            taps: with_max(taps),
        })
    }

    /// The columns `[K, B·L]` as the rhs of a product: `B·L` columns of `K` steps.
    fn columns(&self) -> Operand<'_> {
        Operand {
            x: &self.x,
            base: 0,
            rows: self.positions.0.len(),
            batch: 0,
            row: Index::Table(&self.positions.0, self.positions.1),
            step: Index::Table(&self.taps.0, self.taps.1),
        }
    }

    /// The columns transposed, `[B·L, K]`, as the rhs of a product: `K` columns of `B·L`
    /// steps.
    fn columns_t(&self) -> Operand<'_> {
        Operand {
            x: &self.x,
            base: 0,
            rows: self.taps.0.len(),
            batch: 0,
            row: Index::Table(&self.taps.0, self.taps.1),
            step: Index::Table(&self.positions.0, self.positions.1),
        }
    }
}

/// `lhs · rhs` (`dims = [1, m, k, n]`) by the expansion with `split_k`'s chunks, each read in
/// place, their partial sums added in chunk order from `+0` (as [`gemm`](super::gemm)), or
/// `None` where the expansion does not take it. `simd`: whether the AVX-512 or AVX2 build may
/// run.
/// The output's columns in segments of `segment` where the plan writes them so
/// ([`Plan::run_in`]), else row-major `[m, n]`: the segment written, with the product.
fn product(
    lhs: Operand<'_>,
    rhs: Operand<'_>,
    dims: [usize; 4],
    (mul, simd): (&ApproxMultiply, bool),
    segment: usize,
) -> Option<(Vec<f32>, usize)> {
    let ApproxMultiply::Lut(table) = mul else {
        return None;
    };
    let plan = Plan::new(lhs, rhs, dims, table, simd)?;
    let [batch, m, k, n] = dims;
    let segment = if plan.segments(segment) { segment } else { n };
    let chunk = split_k(dims);
    if chunk >= k {
        return Some((plan.run_in(lhs, rhs, k, [segment, 1]), segment));
    }
    // the parts share one layout, added value by value
    let chunks = k.div_ceil(chunk);
    let parts: Vec<Vec<f32>> = (0..chunks)
        .into_par_iter()
        .map(|s| {
            let (k0, k1) = (s * chunk, ((s + 1) * chunk).min(k));
            let (lhs, rhs) = (lhs.steps_from(k0), rhs.steps_from(k0));
            plan.run_in(lhs, rhs, k1 - k0, [segment, chunks])
        })
        .collect();
    let sum = (0..batch * m * n)
        .map(|i| parts.iter().fold(0.0f32, |acc, p| acc + p[i]))
        .collect();
    Some((sum, segment))
}

/// A convolution's forward product `W (C_out × K) · cols (K × B·L)` with the columns of
/// `x: [batch, C, d, h, w]` under `w` read in place, as the convolution's output
/// `[batch, C_out, out...]`: the bits of [`gemm`](super::gemm) of `weight: [C_out, K]` and the
/// columns (its `[C_out, B·L]` permuted), written in that layout by the expansion itself where
/// `L` is a multiple of 16. `None` where the expansion does not take the product or the window
/// has groups.
///
/// # Panics
/// If `weight` is not a whole number of rows of `K = C·kvol`.
pub fn conv_forward(
    x: &[f32],
    weight: &[f32],
    batch: usize,
    w: &Window,
    mul: &ApproxMultiply,
) -> Option<Vec<f32>> {
    Input::new(x, batch, w, mul).forward(weight)
}

/// A convolution's weight gradient `dy (C_out × B·L) · colsᵀ`, `[C_out, K]`, with
/// `output_grad: [batch, C_out, out...]` and the columns of `x` under `w` both read in place:
/// the bits of [`gemm_nt`](super::gemm_nt) of the folded output gradient and the columns.
/// `None` where the expansion does not take the product or the window has groups.
///
/// # Panics
/// If `output_grad` is not `batch` samples of whole channels of `L` positions.
pub fn conv_weight_grad(
    x: &[f32],
    output_grad: &[f32],
    batch: usize,
    w: &Window,
    mul: &ApproxMultiply,
) -> Option<Vec<f32>> {
    Input::new(x, batch, w, mul).weight_grad(output_grad)
}

/// A convolution's input gradient `col2im(Wᵀ · dy)`, `[batch, C, d, h, w]`, from
/// `output_grad: [batch, C_out, out...]` and `weight: [C_out, K]`, a few samples at a time:
/// their columns `[K, G·L]` (the product read in place from both, the bits of
/// [`gemm`](super::gemm) of `Wᵀ` and the folded output gradient, the samples' share of them)
/// are added back into their input gradients while they are in cache, in col2im's order. The
/// batch's columns (37 MB for ResNet-18-w16's first stage at batch 64) are never written.
/// `None` where the expansion does not take the product or the window has groups.
///
/// # Panics
/// If `output_grad` is not `batch` samples of whole channels of `L` positions, or `weight` not
/// whole rows of `K = C·kvol`.
pub fn conv_input_grad(
    output_grad: &[f32],
    weight: &[f32],
    batch: usize,
    w: &Window,
    mul: &ApproxMultiply,
) -> Option<Vec<f32>> {
    Input::new(output_grad, batch, w, mul).input_grad(weight)
}

/// A convolution's input (or its output gradient, for the input gradient), window and
/// multiply, and whether the AVX-512 build of the expansion may run (the tests run both
/// builds).
struct Input<'a> {
    x: &'a [f32],
    batch: usize,
    w: &'a Window,
    mul: &'a ApproxMultiply,
    simd: bool,
}

impl<'a> Input<'a> {
    fn new(x: &'a [f32], batch: usize, w: &'a Window, mul: &'a ApproxMultiply) -> Self {
        let simd = avx2_available();
        Self {
            x,
            batch,
            w,
            mul,
            simd,
        }
    }

    /// [`conv_forward`].
    fn forward(&self, weight: &[f32]) -> Option<Vec<f32>> {
        let cols = Gathered::new(self.x, self.batch, self.w)?;
        let k = cols.taps.0.len();
        assert!(
            k > 0 && weight.len().is_multiple_of(k),
            "implicit conv: weight length"
        );
        let m = weight.len() / k;
        let lhs = Operand {
            x: weight,
            base: 0,
            rows: m,
            batch: 0,
            row: Index::Stride(k),
            step: Index::Stride(1),
        };
        let rhs = cols.columns();
        let l = self.w.positions();
        // written as `[B, C_out, L]` where the expansion can ([`Plan::segments`]), else
        // `[C_out, B·L]` permuted here
        let (y, segment) = product(lhs, rhs, [1, m, k, rhs.rows], (self.mul, self.simd), l)?;
        if segment == l {
            return Some(y);
        }
        let mut out = Vec::with_capacity(y.len());
        for b in 0..self.batch {
            for row in y.chunks_exact(rhs.rows) {
                out.extend_from_slice(&row[b * l..(b + 1) * l]);
            }
        }
        Some(out)
    }

    /// [`conv_input_grad`], `self.x` the output gradient.
    fn input_grad(&self, weight: &[f32]) -> Option<Vec<f32>> {
        let (w, batch) = (self.w, self.batch);
        let (l, k) = (w.positions(), w.channels * w.kvol());
        let plane: usize = w.input.iter().product();
        let per_sample = batch * l;
        if w.groups != 1 || per_sample == 0 || k == 0 || plane == 0 {
            return None;
        }
        assert!(
            self.x.len().is_multiple_of(per_sample) && weight.len().is_multiple_of(k),
            "implicit conv: output gradient or weight length"
        );
        let m = self.x.len() / per_sample;
        assert_eq!(weight.len(), m * k, "implicit conv: weight length");
        // Wᵀ: K rows of C_out steps; a sample's output gradient: L columns of C_out steps
        let lhs = Operand {
            x: weight,
            base: 0,
            rows: k,
            batch: 0,
            row: Index::Stride(1),
            step: Index::Stride(k),
        };
        let ApproxMultiply::Lut(table) = self.mul else {
            return None;
        };
        // the lowered product is not split along this `k` (the output channels) at the
        // batch's size, so each column value is its `C_out` products summed in order from `+0`,
        // as here
        if split_k([1, k, m, per_sample]) < m {
            return None;
        }
        // samples a product: about 2048 positions, so that each expansion (of Wᵀ against the
        // positions, or of the positions against the taps where those are more) is shared by
        // at least that many rows; a single sample of ResNet-18-w16's third stage (576 taps,
        // 64 positions) would expand its positions' tables once every 576 rows
        let group = 2048usize.div_ceil(l).clamp(1, batch);
        // a group's position `g·L + p` at `g·C_out·L + p` from its first sample's
        let offsets: Vec<usize> = (0..group)
            .flat_map(|g| (0..l).map(move |p| g * m * l + p))
            .collect();
        let columns = |b0: usize, samples: usize| {
            // ascending: the last is the largest
            let rows = &offsets[..samples * l];
            Operand {
                x: self.x,
                base: b0 * m * l,
                rows: rows.len(),
                batch: 0,
                row: Index::Table(rows, rows[rows.len() - 1]),
                step: Index::Stride(l),
            }
        };
        // the band checked once over the whole output gradient (every operand's `x`), for a
        // whole group and for the last, shorter one
        let plan = |samples: usize| {
            Plan::new(
                lhs,
                columns(0, samples),
                [1, k, m, samples * l],
                table,
                self.simd,
            )
        };
        let (whole, tail) = (plan(group)?, batch % group);
        let last = match tail {
            0 => None,
            _ => Some(plan(tail)?),
        };
        let sample_len = w.channels * plane;
        let mut dx = vec![0f32; batch * sample_len];
        dx.par_chunks_mut(group * sample_len)
            .enumerate()
            .for_each(|(i, dx)| {
                let samples = dx.len() / sample_len;
                let plan = if samples == group {
                    &whole
                } else {
                    last.as_ref().expect("tail plan")
                };
                let mut cols = plan.run(lhs, columns(i * group, samples), m);
                for (g, dx) in dx.chunks_mut(sample_len).enumerate() {
                    let at = [samples * l, g * l];
                    crate::approx::im2col::runs::col2im_add(&mut cols, at, w, dx);
                }
            });
        Some(dx)
    }

    /// [`conv_weight_grad`].
    fn weight_grad(&self, output_grad: &[f32]) -> Option<Vec<f32>> {
        let cols = Gathered::new(self.x, self.batch, self.w)?;
        let l = self.w.positions();
        let per_sample = self.batch * l;
        assert!(
            per_sample > 0 && output_grad.len().is_multiple_of(per_sample),
            "implicit conv: output gradient length"
        );
        let m = output_grad.len() / per_sample;
        // step `b·L + p` of channel row `c` at `b·C_out·L + c·L + p`
        let steps = with_max(
            (0..self.batch)
                .flat_map(|b| (0..l).map(move |p| b * m * l + p))
                .collect(),
        );
        let lhs = Operand {
            x: output_grad,
            base: 0,
            rows: m,
            batch: 0,
            row: Index::Stride(l),
            step: Index::Table(&steps.0, steps.1),
        };
        let rhs = cols.columns_t();
        let dims = [1, m, per_sample, rhs.rows];
        product(lhs, rhs, dims, (self.mul, self.simd), rhs.rows).map(|(dw, _)| dw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approx::host::{binades, mitchell_table};
    use crate::approx::im2col::im2col;

    /// Windows with padding, stride, dilation, a 1 × 1 kernel and a 3-d one (the first with
    /// 144 positions, a multiple of 16: the forward output written as `[B, C_out, L]` by the
    /// expansion; the rest permuted after it); each product
    /// with at least 64 rows on its packed side (the portable build's least), the weight
    /// gradients' packed side the output channels (the first two) or the taps (the rest).
    fn windows() -> Vec<(Window, usize, usize)> {
        vec![
            // (window, batch, output channels)
            (
                Window {
                    padding: [0, 1, 1],
                    ..Window::dense(3, [1, 12, 12], [1, 3, 3])
                },
                4,
                70,
            ),
            (
                Window {
                    stride: [1, 2, 2],
                    padding: [0, 1, 1],
                    ..Window::dense(8, [1, 9, 10], [1, 3, 3])
                },
                3,
                66,
            ),
            (
                Window {
                    dilation: [1, 2, 1],
                    padding: [0, 2, 0],
                    ..Window::dense(12, [1, 7, 8], [1, 3, 2])
                },
                2,
                17,
            ),
            (Window::dense(80, [1, 6, 6], [1, 1, 1]), 5, 40),
            (
                Window {
                    padding: [1, 0, 1],
                    ..Window::dense(6, [3, 4, 5], [2, 2, 3])
                },
                2,
                16,
            ),
        ]
    }

    /// The output gradient `dy: [B, C_out, L]` as the product's `[C_out, B·L]`.
    fn folded(dy: &[f32], [batch, m, l]: [usize; 3]) -> Vec<f32> {
        (0..m * batch * l)
            .map(|j| {
                let (c, b, p) = (j / (batch * l), j / l % batch, j % l);
                dy[(b * m + c) * l + p]
            })
            .collect()
    }

    #[test]
    fn gathered_products_give_the_lowered_products_bits() {
        let mul = mitchell_table(7);
        for (i, (w, batch, m)) in windows().into_iter().enumerate() {
            let x = binades(
                batch * w.channels * w.input.iter().product::<usize>(),
                3 + i as u64,
                12,
            );
            let k = w.channels * w.kvol();
            let l = w.positions();
            let weight = binades(m * k, 5 + i as u64, 12);
            let dy = binades(batch * m * l, 7 + i as u64, 12);
            let cols = im2col(&x, batch, &w);
            let folded = folded(&dy, [batch, m, l]);
            let lowered = super::super::gemm(&weight, &cols, [1, m, k, batch * l], &mul);
            // `[C_out, B·L]` as the convolution's `[B, C_out, L]`
            let want_y: Vec<f32> = (0..batch * m * l)
                .map(|j| lowered[(j / l % m * batch + j / (m * l)) * l + j % l])
                .collect();
            let want_dw = super::super::gemm_nt(&folded, &cols, [1, m, batch * l, k], &mul);
            let wt: Vec<f32> = (0..k * m).map(|j| weight[j % m * k + j / m]).collect();
            let dcols = super::super::gemm(&wt, &folded, [1, k, m, batch * l], &mul);
            let want_dx = crate::approx::im2col::col2im(&dcols, batch, &w);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            for simd in [false, true] {
                let input = Input {
                    simd,
                    ..Input::new(&x, batch, &w, &mul)
                };
                let (y, dw) = (input.forward(&weight), input.weight_grad(&dy));
                let dx = Input {
                    simd,
                    ..Input::new(&dy, batch, &w, &mul)
                }
                .input_grad(&weight);
                assert_eq!(
                    bits(&dx.expect("input grad expands")),
                    bits(&want_dx),
                    "igrad {i} {simd}"
                );
                assert_eq!(
                    bits(&y.expect("forward expands")),
                    bits(&want_y),
                    "forward {i} {simd}"
                );
                assert_eq!(
                    bits(&dw.expect("weight grad expands")),
                    bits(&want_dw),
                    "wgrad {i} {simd}"
                );
            }
        }
    }

    /// LeNet-5's first weight gradient in small: 6 output channels against 25 taps of a padded
    /// single-channel input. Too few rows either way for the expansion, so with AVX-512 or AVX2
    /// it runs directly (with AVX2 the taps read in place from the input); the bits of the
    /// products added one by one. The portable build leaves it to the columns.
    #[test]
    fn a_few_channel_weight_gradient_runs_directly_with_the_per_product_bits() {
        let mul = mitchell_table(7);
        let w = Window {
            padding: [0, 2, 2],
            ..Window::dense(1, [1, 9, 7], [1, 5, 5])
        };
        let (batch, m) = (3, 6);
        let l = w.positions();
        let x = binades(batch * 9 * 7, 21, 12);
        let dy = binades(batch * m * l, 22, 12);
        let folded = folded(&dy, [batch, m, l]);
        // the sums product by product, in order from +0 (`cols`: `[25, B·L]`)
        let cols = im2col(&x, batch, &w);
        let want: Vec<f32> = (0..m * 25)
            .map(|j| {
                let (c, t) = (j / 25, j % 25);
                (0..batch * l).fold(0.0, |sum, p| {
                    let (a, b) = (folded[c * batch * l + p], cols[t * batch * l + p]);
                    sum + crate::approx::host::multiply(a, b, &mul)
                })
            })
            .collect();
        let portable = Input {
            simd: false,
            ..Input::new(&x, batch, &w, &mul)
        };
        assert!(portable.weight_grad(&dy).is_none());
        if !avx2_available() {
            return;
        }
        let dw = Input::new(&x, batch, &w, &mul)
            .weight_grad(&dy)
            .expect("a direct way runs");
        for (i, (a, b)) in dw.iter().zip(&want).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "[{i}]: {a} vs {b}");
        }
    }

    /// A weight gradient long enough to be split along `k`, and an input gradient of more
    /// samples than a group (1024 positions a sample: groups of two, the last of one).
    #[test]
    fn long_products_are_split_or_grouped_and_still_exact() {
        let mul = mitchell_table(7);
        // 72 taps: at least 2^m / 2 rows, so that every build (AVX-512 or portable) expands
        let w = Window {
            padding: [0, 1, 1],
            ..Window::dense(8, [1, 32, 32], [1, 3, 3])
        };
        let (batch, m) = (3, 16);
        let (k, l) = (w.channels * w.kvol(), w.positions());
        assert!(
            split_k([1, m, batch * l, k]) < batch * l,
            "the product is split"
        );
        let x = binades(batch * w.channels * 1024, 11, 12);
        let dy = binades(batch * m * l, 13, 12);
        let weight = binades(m * k, 17, 12);
        let cols = im2col(&x, batch, &w);
        let folded = folded(&dy, [batch, m, l]);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let want = super::super::gemm_nt(&folded, &cols, [1, m, batch * l, k], &mul);
        let got = conv_weight_grad(&x, &dy, batch, &w, &mul).expect("expands");
        assert_eq!(bits(&got), bits(&want), "weight gradient");
        let wt: Vec<f32> = (0..k * m).map(|j| weight[j % m * k + j / m]).collect();
        let dcols = super::super::gemm(&wt, &folded, [1, k, m, batch * l], &mul);
        let want = crate::approx::im2col::col2im(&dcols, batch, &w);
        let got = conv_input_grad(&dy, &weight, batch, &w, &mul).expect("expands");
        assert_eq!(bits(&got), bits(&want), "input gradient");
    }

    #[test]
    fn products_the_expansion_does_not_take_are_left_to_the_columns() {
        let w = Window {
            padding: [0, 1, 1],
            ..Window::dense(4, [1, 8, 8], [1, 3, 3])
        };
        let x = binades(2 * 4 * 64, 1, 12);
        let weight = binades(16 * 36, 2, 12);
        let table = mitchell_table(7);
        assert!(conv_forward(&x, &weight, 2, &w, &table).is_some());
        // no table
        assert!(conv_forward(&x, &weight, 2, &w, &ApproxMultiply::Plain).is_none());
        // groups
        let grouped = Window { groups: 2, ..w };
        assert!(conv_forward(&x, &weight[..16 * 18], 2, &grouped, &table).is_none());
        // an infinity outside the band
        let mut inf = x.clone();
        inf[5] = f32::INFINITY;
        assert!(conv_forward(&inf, &weight, 2, &w, &table).is_none());
        // an input of the wrong length
        assert!(conv_forward(&x[1..], &weight, 2, &w, &table).is_none());
        // a kernel wider than the padded input (`Window::out` saturates to one position)
        let wide = Window {
            padding: [0; 3],
            ..Window::dense(4, [1, 8, 8], [1, 9, 9])
        };
        assert_eq!(wide.out(), [1, 1, 1]);
        assert!(conv_forward(&x, &binades(16 * 4 * 81, 4, 12), 2, &wide, &table).is_none());
        // a zero-sized axis
        let empty = Window::dense(4, [1, 0, 8], [1, 1, 1]);
        assert!(conv_forward(&[], &binades(16 * 4, 5, 12), 2, &empty, &table).is_none());
        // the weight gradient: 72 taps against 16 output channels (at least 2^m / 2 rows, so
        // taken on every build; 36 taps are taken only where a direct way runs, AVX-512 or
        // AVX2)
        let dy = binades(2 * 16 * 64, 3, 12);
        let w8 = Window { channels: 8, ..w };
        let x8 = binades(2 * 8 * 64, 6, 12);
        assert!(conv_weight_grad(&x8, &dy, 2, &w8, &table).is_some());
        // the input gradient: taken, and left for groups and a multiply without a table
        assert!(conv_input_grad(&dy, &weight, 2, &w, &table).is_some());
        assert!(conv_input_grad(&dy, &weight, 2, &w, &ApproxMultiply::Plain).is_none());
        assert!(conv_input_grad(&dy, &weight[..16 * 18], 2, &grouped, &table).is_none());
        // too few rows and lanes either way: one tap against two output channels
        let one = Window::dense(1, [1, 8, 8], [1, 1, 1]);
        let dy = binades(2 * 2 * 64, 3, 12);
        assert!(conv_weight_grad(&x[..2 * 64], &dy, 2, &one, &table).is_none());
    }
}
