//! Host references of im2col and col2im (multi-threaded).

use super::Window;
use rayon::prelude::*;

/// Host reference (multi-threaded; the path on backends without CubeCL): `x: [B, C, d, h, w]`
/// (contiguous) → columns `[G, Cg·kvol, B·L]`.
pub fn im2col(x: &[f32], batch: usize, w: &Window) -> Vec<f32> {
    let channels = w.channels;
    let [id, ih, iw] = w.input;
    assert_eq!(
        x.len(),
        batch * channels * id * ih * iw,
        "im2col input length"
    );
    let (kvol, l) = (w.kvol(), w.positions());
    let [od, oh, ow] = w.out();
    let [kd, kh, kw] = w.kernel;
    let mut cols = vec![0f32; channels * kvol * batch * l];
    cols.par_chunks_mut(batch * l)
        .enumerate()
        .for_each(|(row, dst)| {
            // rows are (g, c_local, offset) = (channel, offset) in order
            let (c, kk) = (row / kvol, row % kvol);
            let (a0, a1, a2) = (kk / (kh * kw), kk / kw % kh, kk % kw);
            debug_assert!(a0 < kd);
            for b in 0..batch {
                for o0 in 0..od {
                    for o1 in 0..oh {
                        for o2 in 0..ow {
                            let src = w
                                .source(0, o0, a0)
                                .zip(w.source(1, o1, a1))
                                .zip(w.source(2, o2, a2));
                            if let Some(((p0, p1), p2)) = src {
                                dst[b * l + (o0 * oh + o1) * ow + o2] =
                                    x[(((b * channels + c) * id + p0) * ih + p1) * iw + p2];
                            }
                        }
                    }
                }
            }
        });
    cols
}

/// Host reference (multi-threaded; the path on backends without CubeCL): columns
/// `[G, Cg·kvol, B·L]` → `[B, C, d, h, w]` (the adjoint of [`im2col`]).
pub fn col2im(cols: &[f32], batch: usize, w: &Window) -> Vec<f32> {
    let channels = w.channels;
    let [id, ih, iw] = w.input;
    let (kvol, l) = (w.kvol(), w.positions());
    assert_eq!(
        cols.len(),
        channels * kvol * batch * l,
        "col2im columns length"
    );
    let [od, oh, ow] = w.out();
    let [kd, kh, kw] = w.kernel;
    let mut x = vec![0f32; batch * channels * id * ih * iw];
    x.par_iter_mut().enumerate().for_each(|(at, v)| {
        let (p2, rest) = (at % iw, at / iw);
        let (p1, rest) = (rest % ih, rest / ih);
        let (p0, rest) = (rest % id, rest / id);
        let (c, b) = (rest % channels, rest / channels);
        // the output position that offset `a` along axis `i` maps onto input coordinate `p`
        let hit = |i: usize, p: usize, a: usize, n: usize| {
            (p + w.padding[i])
                .checked_sub(a * w.dilation[i])
                .filter(|t| t.is_multiple_of(w.stride[i]) && t / w.stride[i] < n)
                .map(|t| t / w.stride[i])
        };
        let mut acc = 0f32;
        for a0 in 0..kd {
            for a1 in 0..kh {
                for a2 in 0..kw {
                    if let (Some(o0), Some(o1), Some(o2)) =
                        (hit(0, p0, a0, od), hit(1, p1, a1, oh), hit(2, p2, a2, ow))
                    {
                        let row = c * kvol + (a0 * kh + a1) * kw + a2;
                        acc += cols[row * batch * l + b * l + (o0 * oh + o1) * ow + o2];
                    }
                }
            }
        }
        *v = acc;
    });
    x
}
