//! The host im2col and col2im of one channel by runs: each kernel offset's output rows as
//! contiguous copies (or strided ones) of the input rows they read, the padding filled with
//! zeros. The host convolution (`conv::forward` and its gradients) and the implicit GEMM's
//! input gradient (`approx::gemm`) run on them.

use super::Window;

/// Output positions `o` in `lo..hi` of axis `i` whose kernel offset `a` reads inside the input
/// (`o·stride + a·dilation - padding` in `0..input`), and the input coordinate of `lo`.
fn valid(w: &Window, i: usize, a: usize, n: usize) -> (usize, usize, usize) {
    let (s, reach, pad, input) = (w.stride[i], a * w.dilation[i], w.padding[i], w.input[i]);
    let lo = pad.saturating_sub(reach).div_ceil(s).min(n);
    let hi = (input + pad)
        .saturating_sub(reach)
        .div_ceil(s)
        .min(n)
        .max(lo);
    (lo, hi, (lo * s + reach).saturating_sub(pad))
}

/// Visits the runs of one channel's `kvol` column rows: `f(offset, run, source, span)` for
/// each kernel offset (in d-h-w order) and each output row `(o0, o1)` of length `ow` starting at
/// output position `run`, with `source` the start of the input row it reads within the
/// channel's plane (`None` where the window is in the padding) and `span` the valid `lo..hi`
/// of the run with the input coordinate of `lo`.
fn for_each_run(w: &Window, mut f: impl FnMut(usize, usize, Option<usize>, (usize, usize, usize))) {
    let [_, ih, iw] = w.input;
    let [od, oh, ow] = w.out();
    let [kd, kh, kw] = w.kernel;
    for a0 in 0..kd {
        for a1 in 0..kh {
            for a2 in 0..kw {
                let offset = (a0 * kh + a1) * kw + a2;
                let span = valid(w, 2, a2, ow);
                for o0 in 0..od {
                    let p0 = w.source(0, o0, a0);
                    for o1 in 0..oh {
                        let run = (o0 * oh + o1) * ow;
                        let source = p0
                            .zip(w.source(1, o1, a1))
                            .map(|(p0, p1)| (p0 * ih + p1) * iw);
                        f(offset, run, source, span);
                    }
                }
            }
        }
    }
}

/// Whether a kernel offset's consecutive output rows read consecutive input rows of the same
/// length: stride 1 along `h` and `w`, and output rows as long as the input's
/// (`2·padding = dilation·(kernel − 1)` along `w`, "same" padding). Then the valid rows of a
/// kernel offset and output depth are one block, contiguous in the columns and in the input
/// alike ([`for_each_block`]).
fn rows_contiguous(w: &Window) -> bool {
    w.stride[1] == 1 && w.stride[2] == 1 && w.out()[2] == w.input[2]
}

/// A block of one kernel offset's output rows at one output depth (a [`rows_contiguous`]
/// window): the `oh` output rows of `ow` values from column `dst` of the channel's column rows
/// (relative to the sample's first column); `read = (v0, n, src)`: rows `v0..v0 + n` read
/// consecutive input rows, from `src` on (the input of the first row's value `lo`; `None`
/// where no row reads the input), each row's values `lo..hi`.
struct Block {
    dst: usize,
    read: Option<(usize, usize, usize)>,
    lo: usize,
    hi: usize,
}

impl Block {
    /// Zeroes the values outside `lo..hi` of each row of `ow` values in `rows` (the entries of
    /// a block's valid rows that read the padding).
    fn zero_ends(&self, rows: &mut [f32], ow: usize) {
        for row in rows.chunks_exact_mut(ow) {
            zero_run(&mut row[..self.lo]);
            zero_run(&mut row[self.hi..]);
        }
    }
}

/// Visits a [`rows_contiguous`] window's blocks in kernel-offset order, then output depth:
/// `f(offset, block)`.
fn for_each_block(w: &Window, mut f: impl FnMut(usize, Block)) {
    let [_, ih, iw] = w.input;
    let [od, oh, ow] = w.out();
    let [kd, kh, kw] = w.kernel;
    for a0 in 0..kd {
        for a1 in 0..kh {
            let (v0, v1, p1) = valid(w, 1, a1, oh);
            for a2 in 0..kw {
                let offset = (a0 * kh + a1) * kw + a2;
                let (lo, hi, start) = valid(w, 2, a2, ow);
                for o0 in 0..od {
                    let read = w
                        .source(0, o0, a0)
                        .filter(|_| v1 > v0 && hi > lo)
                        .map(|p0| (v0, v1 - v0, (p0 * ih + p1) * iw + start));
                    let dst = o0 * oh * ow;
                    f(offset, Block { dst, read, lo, hi });
                }
            }
        }
    }
}

/// [`im2col_channel`] of a [`rows_contiguous`] window: each block's valid rows one contiguous
/// copy from the first value read to the last (the rows' ends, which the copy fills with the
/// neighbouring input rows' values, zeroed after), the other rows zeroed. The runs of
/// ResNet-18-w16's 3 × 3 convolutions are 4 to 32 values, and the per-run work of
/// [`for_each_run`] was most of their im2col (profiled).
fn im2col_blocks(plane: &[f32], w: &Window, rows: &mut [f32], ld: usize, at: usize) {
    let [_, oh, ow] = w.out();
    for_each_block(w, |offset, b| {
        let dst = &mut rows[offset * ld + at + b.dst..][..oh * ow];
        let Some((v0, n, src)) = b.read else {
            return zero_run(dst);
        };
        let (valid, after) = dst.split_at_mut((v0 + n) * ow);
        let (before, valid) = valid.split_at_mut(v0 * ow);
        zero_run(before);
        zero_run(after);
        let len = (n - 1) * ow + b.hi - b.lo;
        valid[b.lo..b.lo + len].copy_from_slice(&plane[src..src + len]);
        b.zero_ends(valid, ow);
    });
}

/// [`col2im_channel`] of a [`rows_contiguous`] window: each block's valid rows added in order,
/// `lo..hi` of each (the same additions in the same order as by runs).
fn col2im_blocks(rows: &[f32], ld: usize, at: usize, w: &Window, plane: &mut [f32]) {
    let (iw, ow) = (w.input[2], w.out()[2]);
    for_each_block(w, |offset, b| {
        let Some((v0, n, src)) = b.read else {
            return;
        };
        let span = b.hi - b.lo;
        let from = &rows[offset * ld + at + b.dst + v0 * ow..][..n * ow];
        let to = &mut plane[src..][..(n - 1) * iw + span];
        for (from, to) in from.chunks_exact(ow).zip(to.chunks_mut(iw)) {
            for (d, v) in to[..span].iter_mut().zip(&from[b.lo..b.hi]) {
                *d += *v;
            }
        }
    });
}

/// One channel's column rows: `plane` (the channel's `[d, h, w]` input) read into `kvol` rows
/// of `rows` (row `r` at `r·ld + at`, `L` values each), zero in the padding.
pub(crate) fn im2col_channel(plane: &[f32], w: &Window, rows: &mut [f32], ld: usize, at: usize) {
    if rows_contiguous(w) {
        return im2col_blocks(plane, w, rows, ld, at);
    }
    let (ow, s) = (w.out()[2], w.stride[2]);
    for_each_run(w, |offset, run, source, (lo, hi, start)| {
        let dst = &mut rows[offset * ld + at + run..][..ow];
        match source {
            Some(src) if hi > lo => {
                zero_run(&mut dst[..lo]);
                zero_run(&mut dst[hi..]);
                let src = &plane[src + start..];
                if s == 1 {
                    copy_run(&mut dst[lo..hi], &src[..hi - lo]);
                } else {
                    for (d, v) in dst[lo..hi].iter_mut().zip(src.iter().step_by(s)) {
                        *d = *v;
                    }
                }
            }
            _ => zero_run(dst),
        }
    });
}

/// `dst` set to `src` (of its length) by fixed-size copies, two overlapping ones where the
/// length is not a power of two: the runs are a convolution's output rows, a few dozen values,
/// and a library `memcpy` call for each cost LeNet-5's im2col more than the copying (profiled).
/// Runs of 64 values or more take `copy_from_slice`.
#[inline(always)]
fn copy_run(dst: &mut [f32], src: &[f32]) {
    let n = dst.len();
    let src = &src[..n];
    macro_rules! ends {
        ($k:expr) => {{
            dst[..$k].copy_from_slice(&src[..$k]);
            dst[n - $k..].copy_from_slice(&src[n - $k..]);
        }};
    }
    match n {
        0 => {}
        1 => dst[0] = src[0],
        2..4 => ends!(2),
        4..8 => ends!(4),
        8..16 => ends!(8),
        16..32 => ends!(16),
        32..64 => ends!(32),
        _ => dst.copy_from_slice(src),
    }
}

/// `dst` set to zeros as [`copy_run`] copies (the padding of a run).
#[inline(always)]
fn zero_run(dst: &mut [f32]) {
    const ZEROS: [f32; 64] = [0.0; 64];
    let n = dst.len();
    match n {
        0 => {}
        1..64 => copy_run(dst, &ZEROS[..n]),
        _ => dst.fill(0.0),
    }
}

/// Adds one channel's `kvol` column rows (row `r` at `r·ld + at`) back into its input `plane`
/// (the adjoint of [`im2col_channel`]; each input element receives its reads in kernel-offset
/// order).
pub(crate) fn col2im_channel(rows: &[f32], ld: usize, at: usize, w: &Window, plane: &mut [f32]) {
    if rows_contiguous(w) {
        return col2im_blocks(rows, ld, at, w, plane);
    }
    let s = w.stride[2];
    for_each_run(w, |offset, run, source, (lo, hi, start)| {
        if let Some(src) = source.filter(|_| hi > lo) {
            let from = &rows[offset * ld + at + run + lo..][..hi - lo];
            let to = &mut plane[src + start..];
            if s == 1 {
                for (d, v) in to[..hi - lo].iter_mut().zip(from) {
                    *d += *v;
                }
            } else {
                for (d, v) in to.iter_mut().step_by(s).zip(from) {
                    *d += *v;
                }
            }
        }
    });
}

/// Adds one sample's columns back into `dx: [C, d, h, w]`: `[C·kvol, ld]` with the sample's `L`
/// from column `at` (`[ld, at] = [L, 0]` for a sample's own columns). The columns are scratch:
/// for a [`rows_contiguous`] window the entries of each row that read the padding are set to
/// zero and each block's rows added as one contiguous run, padding and all. Exact where every
/// value of `dx` is a sum from `+0` (as the callers' are): such a sum is never `-0`, and
/// adding `+0` leaves every other value, NaN and infinities included, as it is.
pub(crate) fn col2im_add(cols: &mut [f32], [ld, at]: [usize; 2], w: &Window, dx: &mut [f32]) {
    let (kvol, plane) = (w.kvol(), w.input.iter().product::<usize>());
    let (contiguous, ow) = (rows_contiguous(w), w.out()[2]);
    for (c, dst) in dx.chunks_mut(plane).take(w.channels).enumerate() {
        let rows = &mut cols[c * kvol * ld..][..kvol * ld];
        if !contiguous {
            col2im_channel(rows, ld, at, w, dst);
            continue;
        }
        for_each_block(w, |offset, b| {
            let Some((v0, n, src)) = b.read else {
                return;
            };
            let block = &mut rows[offset * ld + at + b.dst + v0 * ow..][..n * ow];
            b.zero_ends(block, ow);
            let len = (n - 1) * ow + b.hi - b.lo;
            for (d, v) in dst[src..src + len].iter_mut().zip(&block[b.lo..]) {
                *d += *v;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Window, col2im, im2col};
    use super::{col2im_add, copy_run, rows_contiguous, zero_run};

    /// Windows whose rows are contiguous ("same" padding along `w`, stride 1 in `h` and `w`).
    fn same_width_windows() -> Vec<Window> {
        let plain = |channels, input, kernel, padding| Window {
            padding,
            ..Window::dense(channels, input, kernel)
        };
        vec![
            // ResNet's 3 × 3, LeNet-5's 5 × 5, a 1 × 1
            plain(3, [1, 6, 5], [1, 3, 3], [0, 1, 1]),
            plain(2, [1, 7, 7], [1, 5, 5], [0, 2, 2]),
            plain(4, [1, 3, 4], [1, 1, 1], [0, 0, 0]),
            // no padding along h (rows lost at both ends), a kernel wider than the input
            plain(2, [1, 5, 3], [1, 2, 3], [0, 0, 1]),
            plain(1, [1, 2, 2], [1, 5, 5], [0, 2, 2]),
            plain(1, [1, 1, 1], [1, 3, 3], [0, 1, 1]),
            // dilated, and 3-d with a depth stride and depth padding
            Window {
                dilation: [1, 2, 2],
                ..plain(2, [1, 6, 7], [1, 3, 3], [0, 2, 2])
            },
            Window {
                stride: [2, 1, 1],
                ..plain(2, [4, 3, 4], [3, 2, 3], [1, 1, 1])
            },
            // groups (the columns of one group's channels alike)
            Window {
                groups: 2,
                ..plain(4, [1, 4, 4], [1, 3, 3], [0, 1, 1])
            },
        ]
    }

    #[test]
    fn contiguous_blocks_give_the_columns_and_the_sums_of_the_reference() {
        for w in same_width_windows() {
            assert!(rows_contiguous(&w), "{w:?}");
            let batch = 3;
            let x: Vec<f32> = (0..batch * w.channels * w.input.iter().product::<usize>())
                .map(|i| (i as f32 * 0.37).sin() + 2.0)
                .collect();
            let (plane, kvol, l) = (w.input.iter().product::<usize>(), w.kvol(), w.positions());
            let ld = batch * l;
            let mut cols = vec![f32::NAN; w.channels * kvol * ld];
            for (c, rows) in cols.chunks_mut(kvol * ld).enumerate() {
                for b in 0..batch {
                    let x = &x[(b * w.channels + c) * plane..][..plane];
                    super::im2col_channel(x, &w, rows, ld, b * l);
                }
            }
            assert_eq!(cols, im2col(&x, batch, &w), "im2col {w:?}");
            // columns in the padding hold NaN and infinities, which col2im must drop
            let y: Vec<f32> = (0..cols.len())
                .map(|i| match (cols[i] == 0.0, i % 3) {
                    (true, 0) => f32::NAN,
                    (true, 1) => f32::INFINITY,
                    _ => (i as f32 * 0.11).cos(),
                })
                .collect();
            let want = col2im(&y, batch, &w);
            let mut got = vec![0f32; want.len()];
            for (bc, dst) in got.chunks_mut(plane).enumerate() {
                let (b, c) = (bc / w.channels, bc % w.channels);
                super::col2im_channel(&y[c * kvol * ld..][..kvol * ld], ld, b * l, &w, dst);
            }
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "col2im {w:?}");
            // the scratch columns' contiguous adds, sample by sample
            let mut scratch = y.clone();
            let mut dx = vec![0f32; want.len()];
            for (b, dx) in dx.chunks_mut(w.channels * plane).enumerate() {
                col2im_add(&mut scratch, [ld, b * l], &w, dx);
            }
            assert_eq!(bits(&dx), bits(&want), "col2im_add {w:?}");
        }
    }

    #[test]
    fn strided_or_narrower_windows_are_not_contiguous() {
        let w = Window {
            padding: [0, 1, 1],
            ..Window::dense(1, [1, 6, 6], [1, 3, 3])
        };
        assert!(rows_contiguous(&w));
        for other in [
            Window {
                stride: [1, 2, 1],
                ..w
            },
            Window {
                stride: [1, 1, 2],
                ..w
            },
            Window {
                padding: [0, 1, 0],
                ..w
            },
        ] {
            assert!(!rows_contiguous(&other), "{other:?}");
        }
    }

    #[test]
    fn runs_of_every_length_are_copied_and_zeroed_whole_and_alone() {
        let src: Vec<f32> = (0..140).map(|i| i as f32 + 0.5).collect();
        for n in 0..=130 {
            let mut dst = vec![-1.0f32; n + 2];
            copy_run(&mut dst[1..n + 1], &src[3..]);
            assert_eq!(&dst[1..n + 1], &src[3..n + 3], "copy of {n}");
            assert_eq!(
                [dst[0], dst[n + 1]],
                [-1.0, -1.0],
                "copy of {n}: nothing beside it"
            );
            zero_run(&mut dst[1..n + 1]);
            assert!(dst[1..n + 1].iter().all(|&v| v == 0.0), "zeros of {n}");
            assert_eq!(
                [dst[0], dst[n + 1]],
                [-1.0, -1.0],
                "zeros of {n}: nothing beside it"
            );
        }
    }
}
