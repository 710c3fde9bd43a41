//! The im2col and col2im kernels: one unit per written element, the geometry comptime.

use super::Window;
use crate::grid::cube_at;
use cubecl::prelude::*;

/// `cols[row, col]` over `[G·Cg·kvol, B·L]`: one row of cubes per column row (`y` of the
/// virtual grid, `grid_*`: [`crate::grid::Grid`]), the geometry comptime (every division is by
/// a constant). The columns are stored in chunks of `chunk` positions, chunk-major:
/// `[B·L / chunk, G·Cg·kvol, chunk]` (one chunk of `B·L` is the plain layout).
#[cube(launch)]
pub(super) fn im2col_kernel(
    x: &Tensor<f32>,
    cols: &mut Array<f32>,
    chunk: u32,
    grid_x: u32,
    grid_y: u32,
    grid_total: u32,
    #[comptime] w: Window,
) {
    let at = cube_at(grid_x, grid_y, grid_total);
    let col = at.x * CUBE_DIM_X as usize + UNIT_POS_X as usize;
    let row = at.y;
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
        let chunk = chunk as usize;
        let (part, at) = (col / chunk, col % chunk);
        cols[(part * comptime!(w.channels * w.kvol()) + row) * chunk + at] = v;
    }
}

/// `x[bc, p]` over `[B·C, d·h·w]`: the column entries that read it, in kernel-offset order;
/// one row of cubes per `bc` (`y` of the virtual grid).
// `is_multiple_of` has no `#[cube]` expansion.
#[allow(clippy::manual_is_multiple_of)]
#[cube(launch)]
pub(super) fn col2im_kernel(
    cols: &Array<f32>,
    x: &mut Array<f32>,
    batch: u32,
    grid_x: u32,
    grid_y: u32,
    grid_total: u32,
    #[comptime] w: Window,
) {
    let at = cube_at(grid_x, grid_y, grid_total);
    let p = at.x * CUBE_DIM_X as usize + UNIT_POS_X as usize;
    let bc = at.y;
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
