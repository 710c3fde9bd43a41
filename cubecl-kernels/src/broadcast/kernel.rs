//! The broadcast kernels, generic over the vector size `N` of a pack ([`PACK`](super::PACK) or
//! 1, chosen at launch) and over the operation (a comptime [`ForwardOp`] / [`BackwardOp`]).

use super::CUBE_UNITS;
use cubecl::prelude::*;
use cubecl::std::FastDivmod;

pub(crate) use ops::{BackwardOp, ForwardOp};

mod ops {
    // The `CubeType` derive generates undocumented expansion types.
    #![allow(missing_docs)]
    use cubecl::prelude::*;

    /// What [`forward_kernel`](super::forward_kernel()) computes.
    #[derive(CubeType, Clone, Copy, Hash, PartialEq, Eq, Debug)]
    pub enum ForwardOp {
        /// `x · α` where `x < 0`, else `x`.
        Prelu,
        /// `x · α + β`.
        Affine,
        /// `x · α`.
        Scale,
    }

    /// What [`backward_kernel`](super::backward_kernel()) computes.
    #[derive(CubeType, Clone, Copy, Hash, PartialEq, Eq, Debug)]
    pub enum BackwardOp {
        /// PReLU's `dx` and `dα` (into the first sums).
        Prelu,
        /// Affine's `dx`, `dα` (first sums) and `dβ` (second sums).
        Affine,
        /// Affine's `dx` and `dβ` (second sums) without `x`.
        Scale,
        /// No `dx`: `Σ dy` (second sums). Batch norm's means, `dy` being the input.
        Total,
        /// No `dx`: `Σ (dy − α[c])²` (first sums). Batch norm's variances, `dy` being the
        /// input and `α` its means.
        CentredSquares,
        /// No `dx`: `Σ dy · (x − α[c])` (first sums) and `Σ dy` (second sums). Batch norm's
        /// gradients of `γ` (before the division by the deviation) and `β`, `α` the means.
        CentredProducts,
        /// No `dx`: `Σ dy · x` (first sums) and `Σ dy` (second sums). Layer norm's `dγ` and
        /// `dβ`, `x` being `x̂` and the channels its columns.
        Products,
    }

    impl BackwardOp {
        /// Whether it sums into the first sums (`dα`; reads `x`).
        pub fn sums_alpha(self) -> bool {
            !matches!(self, BackwardOp::Scale | BackwardOp::Total)
        }

        /// Whether it sums into the second sums (`dβ`).
        pub fn sums_beta(self) -> bool {
            !matches!(self, BackwardOp::Prelu | BackwardOp::CentredSquares)
        }

        /// Whether it writes `dx`.
        pub fn writes_dx(self) -> bool {
            matches!(
                self,
                BackwardOp::Prelu | BackwardOp::Affine | BackwardOp::Scale
            )
        }
    }
}

/// One unit per pack: `y = op(x, α[c], β[c])`, `c = (pos · N / inner) mod channels` (one
/// channel for the whole pack: the launch takes `N > 1` only when `N` divides `inner`). The
/// divisions are multiplications by precomputed inverses ([`FastDivmod`]).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub(super) fn forward_kernel<N: Size>(
    x: &Array<Vector<f32, N>>,
    alpha: &Array<f32>,
    beta: &Array<f32>,
    y: &mut Array<Vector<f32, N>>,
    packs: u32,
    inner: FastDivmod<u32>,
    channels: FastDivmod<u32>,
    #[comptime] op: ForwardOp,
) {
    let pos = ABSOLUTE_POS;
    if pos < packs as usize {
        let row = inner.div(pos as u32 * N::value() as u32);
        let c = channels.modulo(row) as usize;
        let v = x[pos];
        let a = Vector::<f32, N>::new(alpha[c]);
        match op {
            ForwardOp::Prelu => {
                let negative = v.less_than(Vector::new(0.0f32));
                y[pos] = select_many(negative, v * a, v);
            }
            ForwardOp::Affine => {
                let p = v * a;
                y[pos] = p + Vector::new(beta[c]);
            }
            ForwardOp::Scale => {
                y[pos] = v * a;
            }
        }
    }
}

/// The lanes of a pack's sum added in order: `((l₀ + l₁) + l₂) + …`.
#[cube]
fn lanes_sum<N: Size>(v: Vector<f32, N>) -> f32 {
    let mut sum = v[0];
    #[unroll]
    for j in 1..N::value() {
        sum += v[j];
    }
    sum
}

/// The sum of `value` over the cube's units `u` of each column (a channel), in the order of
/// the halving tree of [`reference`](super::reference) (step 4), valid in unit `u = 0`.
/// One barrier, then that unit walks the tree alone (`units − 1` adds, `units ≤ 64`) instead
/// of a barrier per level.
#[cube]
fn tree_sum(value: f32, u: usize, column: usize, width: usize, #[comptime] units: usize) -> f32 {
    let mut shared = SharedMemory::<f32>::new(comptime!(CUBE_UNITS));
    shared[u * width + column] = value;
    sync_cube();
    let mut sum = 0.0f32;
    if u == 0 {
        let mut half = comptime!(units / 2).runtime();
        while half > 0 {
            for v in 0..half {
                shared[v * width + column] += shared[(v + half) * width + column];
            }
            half /= 2;
        }
        sum = shared[column];
    }
    sum
}

/// The backward pass (or, for batch norm's ops, the sums alone) of one segment of `width` channels a cube, `units` units per channel
/// (unit `UNIT_POS = u · width + column`: neighbouring units serve neighbouring channels, which
/// lie side by side in memory when the inner size is small). Each unit writes `dx` for its
/// packs and sums their terms lane by lane (step 2 of the order in
/// [`reference`](super::reference)); the cube adds its units' sums (steps 3-4) into
/// `sums_*[c · segments + s]`. A unit finds its first value with one division, then steps
/// `units` packs at a time by adds (`inner` is wrapped by one compare).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn backward_kernel<N: Size>(
    x: &Array<Vector<f32, N>>,
    dy: &Array<Vector<f32, N>>,
    alpha: &Array<f32>,
    dx: &mut Array<Vector<f32, N>>,
    sums_alpha: &mut Array<f32>,
    sums_beta: &mut Array<f32>,
    channels: u32,
    inner: u32,
    packs: u32,
    segment: u32,
    segments: u32,
    width: u32,
    cubes: u32,
    #[comptime] units: usize,
    #[comptime] op: BackwardOp,
) {
    let (channels, inner, width) = (channels as usize, inner as usize, width as usize);
    let (packs, segment, segments) = (packs as usize, segment as usize, segments as usize);
    if CUBE_POS >= cubes as usize {
        terminate!();
    }
    let (column, u) = (UNIT_POS as usize % width, UNIT_POS as usize / width);
    let c = (CUBE_POS / segments) * width + column;
    let s = CUBE_POS % segments;
    let zero = Vector::<f32, N>::new(0.0f32);
    let mut acc_alpha = zero;
    let mut acc_beta = zero;
    if c < channels {
        let a = Vector::<f32, N>::new(alpha[c]);
        let end = select(s * segment + segment < packs, s * segment + segment, packs);
        let mut p = s * segment + u;
        // value k = o · inner + i of the channel is x[(o · channels + c) · inner + i]
        let k = p * N::value();
        let mut i = k % inner;
        let mut at = (k / inner * channels + c) * inner + i;
        let step = N::value() * units;
        let (step_i, jump) = (step % inner, step / inner * channels * inner + step % inner);
        let wrap = (channels - 1) * inner;
        while p < end {
            let pack = at / N::value();
            let g = dy[pack];
            match op {
                BackwardOp::Prelu => {
                    let v = x[pack];
                    let negative = v.less_than(zero);
                    dx[pack] = select_many(negative, g * a, g);
                    acc_alpha = select_many(negative, acc_alpha + g * v, acc_alpha);
                }
                BackwardOp::Affine => {
                    let v = x[pack];
                    dx[pack] = g * a;
                    acc_alpha += g * v;
                    acc_beta += g;
                }
                BackwardOp::Scale => {
                    dx[pack] = g * a;
                    acc_beta += g;
                }
                BackwardOp::Total => {
                    acc_beta += g;
                }
                BackwardOp::CentredSquares => {
                    let d = g - a;
                    acc_alpha += d * d;
                }
                BackwardOp::CentredProducts => {
                    let d = x[pack] - a;
                    acc_alpha += g * d;
                    acc_beta += g;
                }
                BackwardOp::Products => {
                    acc_alpha += g * x[pack];
                    acc_beta += g;
                }
            }
            p += units;
            i += step_i;
            at += jump;
            if i >= inner {
                i -= inner;
                at += wrap;
            }
        }
    }
    if comptime!(op.sums_alpha()) {
        let sum = tree_sum(lanes_sum::<N>(acc_alpha), u, column, width, units);
        if u == 0 && c < channels {
            sums_alpha[c * segments + s] = sum;
        }
    }
    if comptime!(op.sums_beta()) {
        let sum = tree_sum(lanes_sum::<N>(acc_beta), u, column, width, units);
        if u == 0 && c < channels {
            sums_beta[c * segments + s] = sum;
        }
    }
}

/// One unit per channel: the channel's segment sums added in order (step 5).
#[cube(launch_unchecked)]
pub(crate) fn segments_kernel(
    sums: &Array<f32>,
    total: &mut Array<f32>,
    channels: u32,
    segments: u32,
) {
    let c = ABSOLUTE_POS;
    if c < channels as usize {
        total[c] = segments_sum(sums, c, segments as usize);
    }
}

/// Channel `c`'s segment sums (`sums[c · segments + s]`, `segments ≥ 1`) added in order.
#[cube]
pub(crate) fn segments_sum(sums: &Array<f32>, c: usize, segments: usize) -> f32 {
    let mut sum = sums[c * segments];
    for s in 1..segments {
        sum += sums[c * segments + s];
    }
    sum
}
