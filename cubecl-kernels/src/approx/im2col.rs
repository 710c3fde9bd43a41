//! im2col and col2im: the data movement that lowers a convolution onto the GEMM.
//!
//! Everything is 3-d (`[B, C, d, h, w]`; 1- and 2-d convolutions have leading 1s). With `G`
//! groups, `Cg = C / G` channels per group, `kvol = kd·kh·kw` and `L = od·oh·ow` output
//! positions, the columns are `[G, Cg·kvol, B·L]` (row `c·kvol + kernel offset`, offsets in
//! d-h-w order; column `b·L + output position`), zero where a window reaches into the padding.
//! col2im is its adjoint: each input element sums, in kernel-offset order from `+0`, the column
//! entries that read it. One unit per written element, one launch each.

use burn_cubecl::CubeRuntime;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_std::{DType, Shape};
use cubecl::prelude::*;
use rayon::prelude::*;

/// The geometry of a convolution, 3-d. Kernels take it as a comptime value: one compiled
/// kernel per layer geometry, every index division by a constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Window {
    /// Input channels (all groups).
    pub channels: usize,
    /// Input spatial size (unpadded).
    pub input: [usize; 3],
    /// Kernel size.
    pub kernel: [usize; 3],
    /// Stride.
    pub stride: [usize; 3],
    /// Zero padding on both sides.
    pub padding: [usize; 3],
    /// Dilation.
    pub dilation: [usize; 3],
    /// Groups.
    pub groups: usize,
}

impl Window {
    /// Output spatial size.
    pub fn out(&self) -> [usize; 3] {
        std::array::from_fn(|i| {
            let span = self.dilation[i] * (self.kernel[i] - 1) + 1;
            (self.input[i] + 2 * self.padding[i]).saturating_sub(span) / self.stride[i] + 1
        })
    }

    /// Kernel offsets per channel (`kvol`).
    pub fn kvol(&self) -> usize {
        self.kernel.iter().product()
    }

    /// Output positions per sample (`L`).
    pub fn positions(&self) -> usize {
        self.out().iter().product()
    }

    /// Shape of the columns of `batch` samples: `[G, Cg·kvol, B·L]`.
    pub fn cols_shape(&self, batch: usize) -> [usize; 3] {
        [
            self.groups,
            self.channels / self.groups * self.kvol(),
            batch * self.positions(),
        ]
    }

    /// Shape of the input of `batch` samples: `[B, C, d, h, w]`.
    pub fn input_shape(&self, batch: usize) -> [usize; 5] {
        let [d, h, w] = self.input;
        [batch, self.channels, d, h, w]
    }

    /// The input coordinate that kernel offset `k` at output position `o` reads along axis `i`,
    /// `None` in the padding.
    fn source(&self, i: usize, o: usize, k: usize) -> Option<usize> {
        (o * self.stride[i] + k * self.dilation[i])
            .checked_sub(self.padding[i])
            .filter(|&p| p < self.input[i])
    }
}

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

/// `cols[row, col]` over `[G·Cg·kvol, B·L]`: one cube row per column row, the geometry
/// comptime (every division is by a constant).
#[cube(launch)]
fn im2col_kernel(x: &Tensor<f32>, cols: &mut Array<f32>, #[comptime] w: Window) {
    let col = ABSOLUTE_POS_X as usize;
    let row = CUBE_POS_Y as usize;
    let l = comptime!(w.positions());
    let bl = x.shape(0) * l;
    if col < bl {
        let [kh, kw] = comptime!([w.kernel[1], w.kernel[2]]);
        let [oh, ow] = comptime!({
            let o = w.out();
            [o[1], o[2]]
        });
        let kvol = comptime!(w.kvol());
        let (b, o) = (col / l, col % l);
        let (c, kk) = (row / kvol, row % kvol);
        // padded coordinates, then inside-the-input checks
        let q0 =
            (o / (oh * ow)) * comptime!(w.stride[0]) + (kk / (kh * kw)) * comptime!(w.dilation[0]);
        let q1 =
            ((o / ow) % oh) * comptime!(w.stride[1]) + ((kk / kw) % kh) * comptime!(w.dilation[1]);
        let q2 = (o % ow) * comptime!(w.stride[2]) + (kk % kw) * comptime!(w.dilation[2]);
        let [p0, p1, p2] = comptime!(w.padding);
        let [e0, e1, e2] = comptime!([
            w.padding[0] + w.input[0],
            w.padding[1] + w.input[1],
            w.padding[2] + w.input[2],
        ]);
        let mut v = 0.0f32;
        if q0 >= p0 && q0 < e0 && q1 >= p1 && q1 < e1 && q2 >= p2 && q2 < e2 {
            v = x[b * x.stride(0)
                + c * x.stride(1)
                + (q0 - p0) * x.stride(2)
                + (q1 - p1) * x.stride(3)
                + (q2 - p2) * x.stride(4)];
        }
        cols[row * bl + col] = v;
    }
}

/// `x[bc, p]` over `[B·C, d·h·w]`: the column entries that read it, in kernel-offset order.
// `is_multiple_of` has no `#[cube]` expansion.
#[allow(clippy::manual_is_multiple_of)]
#[cube(launch)]
fn col2im_kernel(cols: &Array<f32>, x: &mut Array<f32>, batch: u32, #[comptime] w: Window) {
    let p = ABSOLUTE_POS_X as usize;
    let bc = CUBE_POS_Y as usize;
    let plane = comptime!(w.input[0] * w.input[1] * w.input[2]);
    if p < plane {
        let channels = comptime!(w.channels);
        let [ih, iw] = comptime!([w.input[1], w.input[2]]);
        let [kd, kh, kw] = comptime!(w.kernel);
        let [s0, s1, s2] = comptime!(w.stride);
        let [d0, d1, d2] = comptime!(w.dilation);
        let [od, oh, ow] = comptime!(w.out());
        let kvol = comptime!(w.kvol());
        let l = comptime!(w.positions());
        let bl = batch as usize * l;
        let (b, c) = (bc / channels, bc % channels);
        let q0 = p / (ih * iw) + comptime!(w.padding[0]);
        let q1 = (p / iw) % ih + comptime!(w.padding[1]);
        let q2 = p % iw + comptime!(w.padding[2]);
        let mut acc = 0.0f32;
        #[unroll]
        for a0 in 0..kd {
            if q0 >= a0 * d0 && (q0 - a0 * d0) % s0 == 0 && (q0 - a0 * d0) / s0 < od {
                let o0 = (q0 - a0 * d0) / s0;
                #[unroll]
                for a1 in 0..kh {
                    if q1 >= a1 * d1 && (q1 - a1 * d1) % s1 == 0 && (q1 - a1 * d1) / s1 < oh {
                        let o1 = (q1 - a1 * d1) / s1;
                        #[unroll]
                        for a2 in 0..kw {
                            if q2 >= a2 * d2 && (q2 - a2 * d2) % s2 == 0 && (q2 - a2 * d2) / s2 < ow
                            {
                                let o2 = (q2 - a2 * d2) / s2;
                                let row = c * kvol + (a0 * kh + a1) * kw + a2;
                                acc += cols[row * bl + b * l + (o0 * oh + o1) * ow + o2];
                            }
                        }
                    }
                }
            }
        }
        x[bc * plane + p] = acc;
    }
}

fn cubes(len: usize, rows: usize) -> CubeCount {
    CubeCount::Static(len.div_ceil(256) as u32, rows as u32, 1)
}

/// Launches [`im2col_kernel`]: `x: [B, C, d, h, w]` (any strides) → `[G, Cg·kvol, B·L]`.
///
/// # Panics
/// If `x` is not f32 or its channels or spatial size are not the window's.
pub fn launch_im2col<R: CubeRuntime>(x: CubeTensor<R>, w: &Window) -> CubeTensor<R> {
    let dims = x.meta.shape().dims::<5>();
    assert_eq!(dims, w.input_shape(dims[0]), "im2col input");
    assert_eq!(x.dtype, DType::F32, "im2col works on f32 tensors");
    let client = x.client.clone();
    let [groups, rows, len] = w.cols_shape(dims[0]);
    let cols = empty_device_dtype(
        client.clone(),
        x.device.clone(),
        Shape::new([groups, rows, len]),
        DType::F32,
    );
    if len * rows * groups > 0 {
        im2col_kernel::launch::<R>(
            &client,
            cubes(len, groups * rows),
            CubeDim::new_1d(256),
            x.into_tensor_arg(),
            cols.clone().into_array_arg(),
            *w,
        );
    }
    cols
}

/// Launches [`col2im_kernel`]: contiguous `cols: [G, Cg·kvol, B·L]` → `[B, C, d, h, w]`.
pub fn launch_col2im<R: CubeRuntime>(
    cols: CubeTensor<R>,
    batch: usize,
    w: &Window,
) -> CubeTensor<R> {
    let client = cols.client.clone();
    let x = empty_device_dtype(
        client.clone(),
        cols.device.clone(),
        Shape::new(w.input_shape(batch)),
        DType::F32,
    );
    let plane: usize = w.input.iter().product();
    if batch * w.channels * plane > 0 {
        col2im_kernel::launch::<R>(
            &client,
            cubes(plane, batch * w.channels),
            CubeDim::new_1d(256),
            cols.into_array_arg(),
            x.clone().into_array_arg(),
            batch as u32,
            *w,
        );
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(input: [usize; 3], kernel: [usize; 3]) -> Window {
        Window {
            channels: 1,
            input,
            kernel,
            stride: [1; 3],
            padding: [0; 3],
            dilation: [1; 3],
            groups: 1,
        }
    }

    #[test]
    fn columns_of_a_small_padded_convolution() {
        // 1-d: x = [1, 2, 3], kernel 2, padding 1 → windows [0 1] [1 2] [2 3] [3 0]
        let w = Window {
            padding: [0, 0, 1],
            ..window([1, 1, 3], [1, 1, 2])
        };
        assert_eq!(w.out(), [1, 1, 4]);
        let cols = im2col(&[1.0, 2.0, 3.0], 1, &w);
        assert_eq!(cols, vec![0.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 0.0]);
        // col2im adds each input's two reads back
        assert_eq!(col2im(&cols, 1, &w), vec![2.0, 4.0, 6.0]);
    }

    #[test]
    fn col2im_is_the_adjoint_of_im2col() {
        // <im2col(x), y> == <x, col2im(y)> with small integers (exact sums)
        let w = Window {
            stride: [1, 2, 1],
            padding: [1, 0, 2],
            dilation: [1, 1, 2],
            groups: 2,
            channels: 4,
            ..window([3, 5, 4], [2, 3, 2])
        };
        let (batch, channels) = (2, 4);
        let x: Vec<f32> = (0..batch * channels * 60)
            .map(|i| (i % 7) as f32 - 3.0)
            .collect();
        let cols = im2col(&x, batch, &w);
        let y: Vec<f32> = (0..cols.len()).map(|i| (i % 5) as f32 - 2.0).collect();
        let lhs: f32 = cols.iter().zip(&y).map(|(a, b)| a * b).sum();
        let rhs: f32 = x
            .iter()
            .zip(col2im(&y, batch, &w))
            .map(|(a, b)| a * b)
            .sum();
        assert_eq!(lhs, rhs);
    }
}
