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

/// One channel's column rows: `plane` (the channel's `[d, h, w]` input) read into `kvol` rows
/// of `rows` (row `r` at `r·ld + at`, `L` values each), zero in the padding.
pub(crate) fn im2col_channel(plane: &[f32], w: &Window, rows: &mut [f32], ld: usize, at: usize) {
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
/// from column `at` (`[ld, at] = [L, 0]` for a sample's own columns).
pub(crate) fn col2im_add(cols: &[f32], [ld, at]: [usize; 2], w: &Window, dx: &mut [f32]) {
    let (kvol, plane) = (w.kvol(), w.input.iter().product::<usize>());
    for (c, dst) in dx.chunks_mut(plane).take(w.channels).enumerate() {
        col2im_channel(&cols[c * kvol * ld..][..kvol * ld], ld, at, w, dst);
    }
}

#[cfg(test)]
mod tests {
    use super::{copy_run, zero_run};

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
