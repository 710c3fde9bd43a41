//! 2-d max pooling on host memory (`[batch, channels, height, width]`, row-major f32): the
//! forward pass with the index of each window's maximum, and the backward pass that adds each
//! output gradient at its index. The GEMM routes' max pooling on backends without CubeCL kernels.
//!
//! burn-ndarray 0.21 first copies its input into a padded array, then reads every window value
//! through ndarray's bounds-checked 4-d indexing, and its backward adds the gradients the same
//! way: on LeNet-5's training step (b64, 2 threads) the two took about a third of the step. Here a
//! plane is read as a slice, each output row's and column's window rows and columns inside the
//! input are found once (padding is never stored), and the inner loop reads one input row;
//! 2 × 2 windows at stride 2 that lie inside the input read their four values directly.
//!
//! The results equal burn-ndarray's bit for bit, because the rule is the same: a window's
//! maximum starts at `-∞` and takes a value only where it is strictly greater (so the first of
//! equal maxima wins, in row-major window order; NaN and `-∞` are never taken, nor is padding,
//! which burn-ndarray fills with `-∞`); a window with no value taken gives `-∞` and index 0. An
//! index is `ih · width + iw` in the unpadded input plane. The backward pass adds the gradients
//! of a plane in row-major output order, as burn-ndarray does, so overlapping windows sum in the
//! same order. The output size is burn-backend's (`calculate_pool_output_size`, `ceil_mode`
//! included). Planes run on rayon's threads where a call reads more than [`PARALLEL_VALUES`].

use rayon::prelude::*;

/// Input values a call reads at least before its planes are spread over rayon's threads. Not
/// tuned: smaller calls stay on the calling thread, as Ember's other memory-bound host loops do
/// (spread over rayon they made LeNet-5's step slower, `crate::elementwise`); LeNet-5's pools at
/// batch 64 read 301,056 and 102,400 values.
pub const PARALLEL_VALUES: usize = 1 << 20;

/// A 2-d pooling window: kernel, stride, padding and dilation (height, width), and whether the
/// output size rounds up (`ceil_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool2d {
    /// Window rows and columns.
    pub kernel: [usize; 2],
    /// Step between windows.
    pub stride: [usize; 2],
    /// Rows and columns of padding on each side.
    pub padding: [usize; 2],
    /// Step between a window's rows and columns.
    pub dilation: [usize; 2],
    /// Whether the output size is rounded up.
    pub ceil_mode: bool,
}

impl Pool2d {
    /// The output's height and width for an input plane of `[height, width]`, as
    /// burn-backend's `calculate_pool_output_size` gives them; `None` where a kernel, stride
    /// or dilation is zero or the window is larger than the padded input (burn-backend's
    /// formula would underflow).
    pub fn output_size(&self, [height, width]: [usize; 2]) -> Option<[usize; 2]> {
        let size = |axis: usize, n: usize| {
            let (k, s, p, d) = (
                self.kernel[axis],
                self.stride[axis],
                self.padding[axis],
                self.dilation[axis],
            );
            if k == 0 || s == 0 || d == 0 {
                return None;
            }
            let numerator = (n + 2 * p).checked_sub(d * (k - 1) + 1)?;
            Some(match self.ceil_mode {
                true => numerator.div_ceil(s) + 1,
                false => numerator / s + 1,
            })
        };
        Some([size(0, height)?, size(1, width)?])
    }

    /// For each output position along `axis`, the first input position of its window (may be
    /// before 0) and the range of window steps that fall inside the input of length `n`.
    fn windows(&self, axis: usize, n: usize, out: usize) -> Vec<(isize, usize, usize)> {
        let (k, s, p, d) = (
            self.kernel[axis],
            self.stride[axis],
            self.padding[axis] as isize,
            self.dilation[axis],
        );
        (0..out)
            .map(|o| {
                let start = (o * s) as isize - p;
                let inside = |j: usize| {
                    let i = start + (j * d) as isize;
                    i >= 0 && (i as usize) < n
                };
                let first = (0..k).find(|&j| inside(j)).unwrap_or(k);
                let end = (first..k).find(|&j| !inside(j)).unwrap_or(k);
                (start, first, end)
            })
            .collect()
    }
}

/// A max pooling's result.
#[derive(Clone, Debug, PartialEq)]
pub struct Pooled {
    /// The output values, row-major.
    pub values: Vec<f32>,
    /// The index of each output's maximum in its input plane (`ih · width + iw`), where asked.
    pub indices: Option<Vec<i64>>,
    /// The output shape, `[batch, channels, out_h, out_w]`.
    pub shape: [usize; 4],
}

/// The max pooling of `x` (`shape` = `[batch, channels, height, width]`, row-major): the output
/// values, the index of each one's maximum in its input plane (where `indices`), and the output
/// shape. `None` where `x` does not hold `shape`'s values or the window does not fit
/// ([`Pool2d::output_size`]).
pub fn max_pool2d(x: &[f32], shape: [usize; 4], pool: &Pool2d, indices: bool) -> Option<Pooled> {
    let [batch, channels, height, width] = shape;
    if x.len() != shape.iter().product::<usize>() {
        return None;
    }
    let [out_h, out_w] = pool.output_size([height, width])?;
    let planes = batch * channels;
    let (plane_in, plane_out) = (height * width, out_h * out_w);
    let out_shape = [batch, channels, out_h, out_w];
    let mut out = vec![f32::NEG_INFINITY; planes * plane_out];
    let mut index = vec![0i64; if indices { planes * plane_out } else { 0 }];
    let pooled = |values, index| Pooled {
        values,
        indices: indices.then_some(index),
        shape: out_shape,
    };
    if planes * plane_out == 0 {
        return Some(pooled(out, index));
    }
    let rows = pool.windows(0, height, out_h);
    let cols = pool.windows(1, width, out_w);
    let [dh, dw] = pool.dilation;
    // 2 × 2 windows at stride 2, each inside the input (LeNet's, VGG's): four reads in order
    let pairs = pool.kernel == [2, 2]
        && pool.stride == [2, 2]
        && pool.padding == [0, 0]
        && pool.dilation == [1, 1]
        && 2 * out_h <= height
        && 2 * out_w <= width;
    let plane = |p: usize, out: &mut [f32], mut index: Option<&mut [i64]>| {
        let x = &x[p * plane_in..(p + 1) * plane_in];
        if pairs {
            for oh in 0..out_h {
                let (top, bottom) = (2 * oh * width, (2 * oh + 1) * width);
                let (r0, r1) = (&x[top..top + width], &x[bottom..bottom + width]);
                for ow in 0..out_w {
                    let i = 2 * ow;
                    let (mut max, mut at) = (f32::NEG_INFINITY, 0usize);
                    for (v, a) in [
                        (r0[i], top + i),
                        (r0[i + 1], top + i + 1),
                        (r1[i], bottom + i),
                        (r1[i + 1], bottom + i + 1),
                    ] {
                        if v > max {
                            (max, at) = (v, a);
                        }
                    }
                    out[oh * out_w + ow] = max;
                    if let Some(index) = index.as_deref_mut() {
                        index[oh * out_w + ow] = at as i64;
                    }
                }
            }
            return;
        }
        for (oh, &(start_h, first_h, end_h)) in rows.iter().enumerate() {
            for (ow, &(start_w, first_w, end_w)) in cols.iter().enumerate() {
                let (mut max, mut at) = (f32::NEG_INFINITY, 0usize);
                for j in first_h..end_h {
                    let ih = (start_h + (j * dh) as isize) as usize;
                    let row = &x[ih * width..(ih + 1) * width];
                    for l in first_w..end_w {
                        let iw = (start_w + (l * dw) as isize) as usize;
                        let v = row[iw];
                        if v > max {
                            (max, at) = (v, ih * width + iw);
                        }
                    }
                }
                out[oh * out_w + ow] = max;
                if let Some(index) = index.as_deref_mut() {
                    index[oh * out_w + ow] = at as i64;
                }
            }
        }
    };
    let parallel = x.len() >= PARALLEL_VALUES;
    match (indices, parallel) {
        (true, false) => out
            .chunks_mut(plane_out)
            .zip(index.chunks_mut(plane_out))
            .enumerate()
            .for_each(|(p, (o, i))| plane(p, o, Some(i))),
        (true, true) => out
            .par_chunks_mut(plane_out)
            .zip(index.par_chunks_mut(plane_out))
            .enumerate()
            .for_each(|(p, (o, i))| plane(p, o, Some(i))),
        (false, false) => out
            .chunks_mut(plane_out)
            .enumerate()
            .for_each(|(p, o)| plane(p, o, None)),
        (false, true) => out
            .par_chunks_mut(plane_out)
            .enumerate()
            .for_each(|(p, o)| plane(p, o, None)),
    }
    Some(pooled(out, index))
}

/// The gradient of a max pooling's input `[batch, channels, height, width]` (`x_shape`): each
/// value of `grad` (`[batch, channels, out_h, out_w]`, row-major) added at its `indices` entry
/// in its input plane, in row-major output order. `None` where the lengths do not match the
/// shapes or an index falls outside its plane.
pub fn max_pool2d_backward(
    grad: &[f32],
    indices: &[i64],
    x_shape: [usize; 4],
    [out_h, out_w]: [usize; 2],
) -> Option<Vec<f32>> {
    let [batch, channels, height, width] = x_shape;
    let (planes, plane_in, plane_out) = (batch * channels, height * width, out_h * out_w);
    if grad.len() != planes * plane_out || indices.len() != grad.len() {
        return None;
    }
    if indices
        .iter()
        .any(|&i| i < 0 || i as u64 >= plane_in as u64)
    {
        return None;
    }
    let mut dx = vec![0.0f32; planes * plane_in];
    if plane_out == 0 || plane_in == 0 {
        return Some(dx);
    }
    let plane = |(p, dx): (usize, &mut [f32])| {
        let range = p * plane_out..(p + 1) * plane_out;
        for (&g, &i) in grad[range.clone()].iter().zip(&indices[range]) {
            dx[i as usize] += g;
        }
    };
    match dx.len() >= PARALLEL_VALUES {
        true => dx.par_chunks_mut(plane_in).enumerate().for_each(plane),
        false => dx.chunks_mut(plane_in).enumerate().for_each(plane),
    }
    Some(dx)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// burn-ndarray 0.21's rule written plainly: pad with `-∞`, scan every window position.
    fn reference(x: &[f32], shape: [usize; 4], pool: &Pool2d) -> (Vec<f32>, Vec<i64>) {
        let [b, c, h, w] = shape;
        let [oh, ow] = pool.output_size([h, w]).unwrap();
        let (mut out, mut index) = (Vec::new(), Vec::new());
        for p in 0..b * c {
            for i in 0..oh {
                for j in 0..ow {
                    let (mut max, mut at) = (f32::NEG_INFINITY, 0i64);
                    for kh in 0..pool.kernel[0] {
                        for kw in 0..pool.kernel[1] {
                            let ih = (i * pool.stride[0] + kh * pool.dilation[0]) as i64
                                - pool.padding[0] as i64;
                            let iw = (j * pool.stride[1] + kw * pool.dilation[1]) as i64
                                - pool.padding[1] as i64;
                            let inside = (0..h as i64).contains(&ih) && (0..w as i64).contains(&iw);
                            let v = match inside {
                                true => x[p * h * w + (ih * w as i64 + iw) as usize],
                                false => f32::NEG_INFINITY,
                            };
                            if v > max {
                                (max, at) = (v, ih * w as i64 + iw);
                            }
                        }
                    }
                    out.push(max);
                    index.push(at);
                }
            }
        }
        (out, index)
    }

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let v = ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 20) as f32;
                // a few ties, NaNs and infinities among ordinary values
                match i % 37 {
                    5 => f32::NAN,
                    11 => f32::NEG_INFINITY,
                    17 => f32::INFINITY,
                    _ => (v % 23.0) - 11.0,
                }
            })
            .collect()
    }

    fn pool(kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> Pool2d {
        Pool2d {
            kernel,
            stride,
            padding,
            dilation: [1, 1],
            ceil_mode: false,
        }
    }

    #[test]
    fn windows_padding_dilation_and_ceil_mode_match_the_plain_rule() {
        let cases = [
            ([2, 2, 8, 8], pool([2, 2], [2, 2], [0, 0])),
            ([1, 3, 7, 9], pool([3, 3], [2, 2], [1, 1])),
            ([2, 1, 5, 6], pool([3, 2], [1, 1], [1, 0])),
            (
                [1, 2, 9, 7],
                Pool2d {
                    dilation: [2, 3],
                    ..pool([2, 2], [1, 2], [1, 2])
                },
            ),
            (
                [1, 2, 7, 7],
                Pool2d {
                    ceil_mode: true,
                    ..pool([2, 2], [2, 2], [0, 0])
                },
            ),
            // every window of the first row inside the padding alone
            ([1, 1, 2, 2], pool([1, 1], [2, 2], [1, 1])),
        ];
        for (shape, pool) in cases {
            let x = values(shape.iter().product(), 3);
            let Pooled {
                values: out,
                indices: index,
                shape: out_shape,
            } = max_pool2d(&x, shape, &pool, true).unwrap();
            let (want, want_index) = reference(&x, shape, &pool);
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&out), bits(&want), "{shape:?} {pool:?}");
            assert_eq!(index.unwrap(), want_index, "{shape:?} {pool:?}");
            let [b, c, oh, ow] = out_shape;
            assert_eq!([b, c], [shape[0], shape[1]]);
            assert_eq!(out.len(), b * c * oh * ow);
            let plain = max_pool2d(&x, shape, &pool, false).unwrap();
            assert_eq!(bits(&plain.values), bits(&out));
            assert!(plain.indices.is_none());
        }
    }

    #[test]
    fn equal_maxima_take_the_first_and_a_window_of_nan_gives_minus_infinity_at_zero() {
        let x = [
            1.0,
            3.0,
            3.0,
            2.0,
            f32::NAN,
            f32::NAN,
            f32::NAN,
            f32::NEG_INFINITY,
        ];
        let p = max_pool2d(&x, [1, 2, 2, 2], &pool([2, 2], [2, 2], [0, 0]), true).unwrap();
        assert_eq!(p.values, [3.0, f32::NEG_INFINITY]);
        assert_eq!(p.indices.unwrap(), [1, 0]);
    }

    #[test]
    fn the_backward_adds_overlapping_gradients_in_output_order() {
        let shape = [2, 3, 6, 5];
        let pool = pool([3, 3], [1, 1], [1, 1]);
        let x = values(shape.iter().product(), 9);
        let p = max_pool2d(&x, shape, &pool, true).unwrap();
        let ([_, _, oh, ow], index) = (p.shape, p.indices.unwrap());
        let grad: Vec<f32> = (0..index.len()).map(|i| (i as f32 * 0.37).sin()).collect();
        let dx = max_pool2d_backward(&grad, &index, shape, [oh, ow]).unwrap();
        let (plane_in, plane_out) = (shape[2] * shape[3], oh * ow);
        let mut want = vec![0.0f32; dx.len()];
        for (o, (&g, &i)) in grad.iter().zip(&index).enumerate() {
            want[o / plane_out * plane_in + i as usize] += g;
        }
        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&dx), bits(&want));
    }

    #[test]
    fn large_calls_split_over_threads_alike() {
        // past PARALLEL_VALUES: the planes run on rayon's threads, values and indices unchanged
        let shape = [4, 8, 192, 192];
        let pool = pool([2, 2], [2, 2], [0, 0]);
        let x = values(shape.iter().product(), 5);
        assert!(x.len() >= PARALLEL_VALUES);
        let p = max_pool2d(&x, shape, &pool, true).unwrap();
        let ([_, _, oh, ow], out, index) = (p.shape, p.values, p.indices.unwrap());
        let (want, want_index) = reference(&x, shape, &pool);
        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&out), bits(&want));
        assert_eq!(index, want_index);
        let grad = vec![1.0f32; index.len()];
        let dx = max_pool2d_backward(&grad, &index, shape, [oh, ow]).unwrap();
        assert_eq!(dx.iter().sum::<f32>(), index.len() as f32);
    }

    #[test]
    fn shapes_that_do_not_fit_and_foreign_indices_are_declined() {
        let p = pool([2, 2], [2, 2], [0, 0]);
        // values for another shape
        assert!(max_pool2d(&[0.0; 5], [1, 1, 2, 2], &p, true).is_none());
        // a window larger than the padded input, a zero stride or kernel
        assert!(max_pool2d(&[0.0; 4], [1, 1, 2, 2], &pool([3, 3], [1, 1], [0, 0]), true).is_none());
        assert!(max_pool2d(&[0.0; 4], [1, 1, 2, 2], &pool([2, 2], [0, 1], [0, 0]), true).is_none());
        assert!(max_pool2d(&[0.0; 4], [1, 1, 2, 2], &pool([0, 2], [1, 1], [0, 0]), true).is_none());
        // an empty batch: empty results
        let empty = max_pool2d(&[], [0, 3, 4, 4], &p, true).unwrap();
        assert!(empty.values.is_empty() && empty.indices.unwrap().is_empty());
        assert_eq!(empty.shape, [0, 3, 2, 2]);
        // indices outside their plane, negative, or of another length
        assert!(max_pool2d_backward(&[1.0], &[4], [1, 1, 2, 2], [1, 1]).is_none());
        assert!(max_pool2d_backward(&[1.0], &[-1], [1, 1, 2, 2], [1, 1]).is_none());
        assert!(max_pool2d_backward(&[1.0], &[], [1, 1, 2, 2], [1, 1]).is_none());
        assert!(max_pool2d_backward(&[1.0, 2.0], &[0, 1], [1, 1, 2, 2], [1, 1]).is_none());
        assert_eq!(
            max_pool2d_backward(&[1.0], &[3], [1, 1, 2, 2], [1, 1]).unwrap(),
            [0.0, 0.0, 0.0, 1.0]
        );
    }
}
