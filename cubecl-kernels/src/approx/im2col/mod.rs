//! im2col and col2im: the data movement that lowers a convolution onto the GEMM.
//!
//! Everything is 3-d (`[B, C, d, h, w]`; 1- and 2-d convolutions have leading 1s). With `G`
//! groups, `Cg = C / G` channels per group, `kvol = kd·kh·kw` and `L = od·oh·ow` output
//! positions, the columns are `[G, Cg·kvol, B·L]` (row `c·kvol + kernel offset`, offsets in
//! d-h-w order; column `b·L + output position`), zero where a window reaches into the padding.
//! col2im is its adjoint: each input element sums, in kernel-offset order from `+0`, the column
//! entries that read it. One unit per written element, one launch each. im2col can also store
//! the columns of each run of `B / S` samples together (`[S, G, Cg·kvol, (B/S)·L]`,
//! [`launch_im2col_chunked`]), which a split-K weight gradient multiplies chunk by chunk.

//!
//! - `kernel.rs`: the `#[cube]` kernels; `launch.rs`: their launches ([`launch_im2col`],
//!   [`launch_im2col_chunked`], [`launch_col2im`]); `reference.rs`: the host references
//!   ([`im2col`], [`col2im`]), the test oracle and the path on backends without CubeCL;
//!   `runs.rs`: one channel's im2col and col2im by runs of contiguous copies (the host
//!   convolution's and the implicit GEMM's).

mod kernel;
mod launch;
mod reference;
pub(crate) mod runs;

pub use launch::{launch_col2im, launch_im2col, launch_im2col_chunked};
pub use reference::{col2im, im2col};

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
    /// `channels` under a `kernel` over `input`: stride and dilation 1, no padding, one group.
    #[cfg(test)]
    pub(crate) fn dense(channels: usize, input: [usize; 3], kernel: [usize; 3]) -> Self {
        Self {
            channels,
            input,
            kernel,
            stride: [1; 3],
            padding: [0; 3],
            dilation: [1; 3],
            groups: 1,
        }
    }

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
    pub(crate) fn source(&self, i: usize, o: usize, k: usize) -> Option<usize> {
        (o * self.stride[i] + k * self.dilation[i])
            .checked_sub(self.padding[i])
            .filter(|&p| p < self.input[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_of_a_small_padded_convolution() {
        // 1-d: x = [1, 2, 3], kernel 2, padding 1 → windows [0 1] [1 2] [2 3] [3 0]
        let w = Window {
            padding: [0, 0, 1],
            ..Window::dense(1, [1, 1, 3], [1, 1, 2])
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
            ..Window::dense(1, [3, 5, 4], [2, 3, 2])
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
