//! The host implementations of the broadcast kernels: their bit-exact oracle, and the path of
//! backends without CubeCL kernels (ndarray). Multi-threaded with rayon; the inner loops run over
//! contiguous values (a row of `inner` values of one channel, or a row of `channels` values when
//! `inner = 1`) so that the compiler vectorises them.
//!
//! # Element-wise values
//!
//! Every output value is one expression of its inputs (see the [module docs](super)): the
//! product `x · α` rounded to f32 first, then the add of `β` (never fused). Each value is
//! computed alone, so any order of the loops gives the kernels' values.
//!
//! # The summation order of `dα` and `dβ`
//!
//! A channel's sum is fixed by the layout alone (its `Plan`): with `V` values in a pack
//! ([`PACK`](super::PACK) when the layout is vectorised, else 1) and `U` units per channel:
//!
//! 1. The channel's `outer · inner` values, in row-major order (`k = o · inner + i`), make
//!    `P = outer · inner / V` packs; the packs are cut into segments of `S = 32 · U` packs (the
//!    last one shorter). `U` is the power of two at or above `⌈P / 32⌉`, at most 64, and at most
//!    `64 / m` when `inner < 32`, with `m` the power of two at or above `min(channels, 32)`
//!    (the kernel serves that many channels side by side there).
//! 2. In a segment, unit `u` (of `U`) keeps `V` lane sums, each starting at `+0`: for the
//!    segment's packs `u`, `u + U`, `u + 2U`, … in that order, lane `j` adds the term of the
//!    pack's value `j` (`dy · x` or `dy`, a product rounded then added; PReLU's `dα` skips the
//!    values with `x ≥ 0` or NaN, leaving the sum as it was).
//! 3. Unit `u`'s sum is its lanes added in order: `((l₀ + l₁) + l₂) + l₃` (just `l₀` when
//!    `V = 1`).
//! 4. The segment's sum is a tree over the `U` unit sums: for `h = U/2, U/4, …, 1`, sum `u < h`
//!    becomes `sum[u] + sum[u + h]`; the result is `sum[0]`.
//! 5. The channel's sum is its segments' sums added in order, starting from segment 0's (no
//!    `+0` first); a channel without values sums to `+0`.
//!
//! The kernel does exactly this (`kernel.rs`: steps 2-4 in one cube, 5 in a second kernel),
//! so it and these functions agree bit for bit. Here a segment's lane sums are kept as one array
//! of `U · V` sums: the value `k` of the channel adds into sum `(k − k₀) mod (U · V)`, `k₀` the
//! segment's first value, which is lane `k mod V` of unit `(pack − first pack) mod U`; walking
//! the values in order gives every lane its terms in the kernel's order, over contiguous runs.
//! Where the kernel makes one pass, the host makes two: `dx` (element-wise), then all of the
//! pass's sums together (affine's `dα` and `dβ` in one walk over `x` and `dy`).

use super::{Layout, Plan};
use rayon::prelude::*;

/// Values an element-wise task covers (about).
const TASK: usize = 1 << 15;

/// PReLU forward: `y = x · α[c]` where `x < 0`, else `x`.
///
/// # Panics
/// If `x` does not hold `l.len()` values or `alpha` `l.channels` (internal invariants:
/// user input is checked by [`Layout::of`]).
pub fn prelu(x: &[f32], alpha: &[f32], l: Layout) -> Vec<f32> {
    check(l, "prelu", x, alpha);
    map(
        l,
        x,
        x,
        alpha,
        alpha,
        |x, _, a, _| if x < 0.0 { x * a } else { x },
    )
}

/// PReLU backward given `dy`: `(dx, dα)` with `dx = dy · α[c]` where `x < 0`, else `dy`, and
/// `dα[c] = Σ dy · x` over the values with `x < 0`, in the [order above](self).
///
/// # Panics
/// As [`prelu`], or if `dy` does not hold `l.len()` values.
pub fn prelu_backward(x: &[f32], alpha: &[f32], dy: &[f32], l: Layout) -> (Vec<f32>, Vec<f32>) {
    check(l, "prelu_backward", x, alpha);
    check(l, "prelu_backward", dy, alpha);
    let dx = map(
        l,
        x,
        dy,
        alpha,
        alpha,
        |x, g, a, _| if x < 0.0 { g * a } else { g },
    );
    // the sum as it was where x ≥ 0 or NaN (a select, so that the loop vectorises)
    let [da] = channel_sums(l, x, dy, alpha, |[s], x, g, _| {
        *s = if x < 0.0 { *s + g * x } else { *s }
    });
    (dx, da)
}

/// Affine forward: `y = x · α[c] + β[c]` (the product rounded, then the add), or `x · α[c]`
/// without `β`.
///
/// # Panics
/// If `x` does not hold `l.len()` values, or `alpha` (and `beta`) `l.channels`.
pub fn affine(x: &[f32], alpha: &[f32], beta: Option<&[f32]>, l: Layout) -> Vec<f32> {
    check(l, "affine", x, alpha);
    match beta {
        Some(beta) => {
            check(l, "affine", x, beta);
            map(l, x, x, alpha, beta, |x, _, a, b| {
                let p = x * a;
                p + b
            })
        }
        None => map(l, x, x, alpha, alpha, |x, _, a, _| x * a),
    }
}

/// Affine backward given `dy`: `(dx, dα, dβ)` with `dx = dy · α[c]`, `dα[c] = Σ dy · x` (only
/// when `x` is given) and `dβ[c] = Σ dy`, in the [order above](self).
///
/// # Panics
/// If `dy` (and `x`) do not hold `l.len()` values or `alpha` `l.channels`.
pub fn affine_backward(
    x: Option<&[f32]>,
    alpha: &[f32],
    dy: &[f32],
    l: Layout,
) -> (Vec<f32>, Option<Vec<f32>>, Vec<f32>) {
    check(l, "affine_backward", dy, alpha);
    let dx = map(l, dy, dy, alpha, alpha, |g, _, a, _| g * a);
    match x {
        Some(x) => {
            check(l, "affine_backward", x, alpha);
            let [da, db] = channel_sums(l, x, dy, alpha, |[a, b], x, g, _| {
                *a += g * x;
                *b += g;
            });
            (dx, Some(da), db)
        }
        None => {
            let [db] = channel_sums(l, dy, dy, alpha, |[b], _, g, _| *b += g);
            (dx, None, db)
        }
    }
}

fn check(l: Layout, what: &str, values: &[f32], per_channel: &[f32]) {
    assert_eq!(
        values.len(),
        l.len(),
        "{what}: {l:?} and {} values",
        values.len()
    );
    assert_eq!(
        per_channel.len(),
        l.channels,
        "{what}: {l:?} and {} per-channel values",
        per_channel.len()
    );
}

/// `y[k] = f(u[k], v[k], alpha[c], beta[c])` for every value `k` of channel `c`.
fn map<F>(l: Layout, u: &[f32], v: &[f32], alpha: &[f32], beta: &[f32], f: F) -> Vec<f32>
where
    F: Fn(f32, f32, f32, f32) -> f32 + Sync,
{
    let per: Vec<(f32, f32)> = alpha.iter().copied().zip(beta.iter().copied()).collect();
    map_channels(l, u, v, &per, |u, v, (a, b)| f(u, v, a, b))
}

/// `y[k] = f(u[k], v[k], per[c])` for every value `k` of channel `c`: the element-wise pass
/// of the per-channel ops, on rayon's threads.
pub(crate) fn map_channels<T, F>(l: Layout, u: &[f32], v: &[f32], per: &[T], f: F) -> Vec<f32>
where
    T: Copy + Sync,
    F: Fn(f32, f32, T) -> f32 + Sync,
{
    let mut y = vec![0f32; l.len()];
    if y.is_empty() {
        return y;
    }
    // rows of `width` values; α (β) per row when inner > 1, per value along a row when inner = 1
    let width = if l.inner == 1 { l.channels } else { l.inner };
    let rows = (TASK / width).max(1);
    y.par_chunks_mut(rows * width)
        .enumerate()
        .for_each(|(t, ys)| {
            for (r, yr) in ys.chunks_mut(width).enumerate() {
                let row = t * rows + r;
                let at = row * width;
                let (ur, vr) = (&u[at..at + width], &v[at..at + width]);
                if l.inner == 1 {
                    for (((y, &u), &v), &p) in yr.iter_mut().zip(ur).zip(vr).zip(per) {
                        *y = f(u, v, p);
                    }
                } else {
                    let p = per[row % l.channels];
                    for ((y, &u), &v) in yr.iter_mut().zip(ur).zip(vr) {
                        *y = f(u, v, p);
                    }
                }
            }
        });
    y
}

/// `K` sums over each channel, `step(sums, x, dy, a)` adding each value's terms to `sums`
/// (`a`: the channel's value of `per`), in the [order above](self); one pass over `x` and
/// `dy` for all `K`.
pub(crate) fn channel_sums<const K: usize, F>(
    l: Layout,
    x: &[f32],
    dy: &[f32],
    per: &[f32],
    step: F,
) -> [Vec<f32>; K]
where
    F: Fn(&mut [f32; K], f32, f32, f32) + Sync,
{
    let p = Plan::of(l);
    let channels = l.channels;
    if p.packs == 0 || channels == 0 {
        return std::array::from_fn(|_| vec![0.0; channels]);
    }
    // tasks: one segment of a run of channels (enough of them to keep every thread busy)
    let per_segment = (4 * rayon::current_num_threads())
        .div_ceil(p.segments)
        .min(channels);
    let run = channels.div_ceil(per_segment);
    let runs = channels.div_ceil(run);
    let sums: Vec<Vec<[f32; K]>> = (0..p.segments * runs)
        .into_par_iter()
        .map(|t| {
            let (s, first) = (t / runs, (t % runs) * run);
            let cs = first..(first + run).min(channels);
            segment_sums(l, p, s, cs, [x, dy], per, &step)
        })
        .collect();
    std::array::from_fn(|q| {
        (0..channels)
            .map(|c| {
                let (r, at) = (c / run, c % run);
                let mut sum = sums[r][at][q];
                for s in 1..p.segments {
                    sum += sums[s * runs + r][at][q];
                }
                sum
            })
            .collect()
    })
}

/// Segment `s`'s sums (steps 2-4 of the [order](self)) of the channels `cs`.
fn segment_sums<const K: usize, F>(
    l: Layout,
    p: Plan,
    s: usize,
    cs: std::ops::Range<usize>,
    [x, dy]: [&[f32]; 2],
    per: &[f32],
    step: &F,
) -> Vec<[f32; K]>
where
    F: Fn(&mut [f32; K], f32, f32, f32),
{
    let (channels, inner) = (l.channels, l.inner);
    let lanes = p.units * p.vector;
    let k0 = s * p.segment * p.vector;
    let k1 = ((s + 1) * p.segment).min(p.packs) * p.vector;
    let n = cs.len();
    let mut acc = vec![[0f32; K]; n * lanes];
    // lane sum `lane` of channel `cs.start + c`
    let at: fn(usize, usize, usize, usize) -> usize;
    if inner == 1 {
        // channels-last: value k of every channel is row k of x, contiguous over the channels;
        // the sums are kept lane-major ([lane][channel]) so that the loop runs along the row
        at = |c, lane, n, _| lane * n + c;
        for k in k0..k1 {
            let lane = (k - k0) % lanes;
            let row = k * channels + cs.start;
            let sums = &mut acc[lane * n..(lane + 1) * n];
            let (xs, gs) = (&x[row..row + n], &dy[row..row + n]);
            let ps = &per[cs.clone()];
            for (((a, &x), &g), &p) in sums.iter_mut().zip(xs).zip(gs).zip(ps) {
                step(a, x, g, p);
            }
        }
    } else {
        // runs of one row (o) of one channel that do not wrap around the lane sums;
        // channel-major sums ([channel][lane]) so that the loop runs along the run
        at = |c, lane, _, lanes| c * lanes + lane;
        let mut k = k0;
        while k < k1 {
            let (o, i) = (k / inner, k % inner);
            let lane = (k - k0) % lanes;
            let len = (inner - i).min(k1 - k).min(lanes - lane);
            for (c, ch) in cs.clone().enumerate() {
                let from = (o * channels + ch) * inner + i;
                let sums = &mut acc[c * lanes + lane..c * lanes + lane + len];
                let (xs, gs) = (&x[from..from + len], &dy[from..from + len]);
                let p = per[ch];
                for ((a, &x), &g) in sums.iter_mut().zip(xs).zip(gs) {
                    step(a, x, g, p);
                }
            }
            k += len;
        }
    }
    let mut units = vec![[0f32; K]; p.units];
    (0..n)
        .map(|c| {
            for (u, sum) in units.iter_mut().enumerate() {
                *sum = acc[at(c, u * p.vector, n, lanes)];
                for j in 1..p.vector {
                    let lane = acc[at(c, u * p.vector + j, n, lanes)];
                    for (sum, lane) in sum.iter_mut().zip(lane) {
                        *sum += lane;
                    }
                }
            }
            let mut half = p.units / 2;
            while half > 0 {
                for u in 0..half {
                    let other = units[u + half];
                    for (sum, other) in units[u].iter_mut().zip(other) {
                        *sum += other;
                    }
                }
                half /= 2;
            }
            units[0]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::PACK;
    use super::*;
    use crate::testing::uniform;

    /// Values in [-1, 1) with exact zeros (every fifth), for layout `l`.
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut v = uniform(n, seed);
        for x in v.iter_mut().step_by(5) {
            *x = 0.0;
        }
        v
    }

    fn layouts() -> Vec<Layout> {
        [
            (2, 3, 7),
            (3, 4, 1),
            (1, 1, 12),
            (2, 5, 16),
            (4, 2, 49),
            (1, 2, 40000), // several segments of a vectorised channel
            (200, 2, 49),  // several segments, one value a pack
            (5000, 3, 1),  // several segments, channels-last
            (1, 40, 2),    // several channel runs of a small inner size
            (0, 3, 4),
        ]
        .into_iter()
        .map(|(outer, channels, inner)| Layout {
            outer,
            channels,
            inner,
        })
        .collect()
    }

    /// The channel of flat value `k`.
    fn channel(l: Layout, k: usize) -> usize {
        (k / l.inner) % l.channels
    }

    /// Σ over the channel in f64 of `term(x, dy)` (the naive definition).
    fn naive_sums(l: Layout, x: &[f32], dy: &[f32], term: impl Fn(f32, f32) -> f64) -> Vec<f64> {
        let mut s = vec![0f64; l.channels];
        for k in 0..l.len() {
            s[channel(l, k)] += term(x[k], dy[k]);
        }
        s
    }

    fn assert_sums(got: &[f32], want: &[f64], what: &str) {
        assert_eq!(got.len(), want.len());
        for (c, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
                "{what}[{c}]: {g} vs {w}"
            );
        }
    }

    #[test]
    fn prelu_equals_its_definition() {
        for l in layouts() {
            let (x, a) = (values(l.len(), 1), uniform(l.channels, 2));
            let y = prelu(&x, &a, l);
            for k in 0..l.len() {
                let want = if x[k] < 0.0 {
                    x[k] * a[channel(l, k)]
                } else {
                    x[k]
                };
                assert_eq!(y[k].to_bits(), want.to_bits(), "{l:?} at {k}");
            }
        }
        // ±0 and NaN pass unchanged, -∞ is scaled
        let l = Layout::of(&[4], 0, 4).unwrap();
        let x = [-0.0, f32::NAN, f32::NEG_INFINITY, 0.0];
        let y = prelu(&x, &[2.0; 4], l);
        assert_eq!(y[0].to_bits(), (-0.0f32).to_bits());
        assert!(y[1].is_nan());
        assert_eq!(y[2], f32::NEG_INFINITY);
        assert_eq!(y[3].to_bits(), 0);
    }

    #[test]
    fn prelu_backward_equals_its_definition() {
        for l in layouts() {
            let (x, a, dy) = (
                values(l.len(), 3),
                uniform(l.channels, 4),
                uniform(l.len(), 5),
            );
            let (dx, da) = prelu_backward(&x, &a, &dy, l);
            for k in 0..l.len() {
                let want = if x[k] < 0.0 {
                    dy[k] * a[channel(l, k)]
                } else {
                    dy[k]
                };
                assert_eq!(dx[k].to_bits(), want.to_bits(), "{l:?} at {k}");
            }
            let want = naive_sums(
                l,
                &x,
                &dy,
                |x, g| {
                    if x < 0.0 { (g * x) as f64 } else { 0.0 }
                },
            );
            assert_sums(&da, &want, "dα");
        }
    }

    #[test]
    fn values_with_x_at_or_above_zero_add_nothing_to_d_alpha() {
        // dy = NaN where x ≥ 0 (0 · NaN would poison the sum), +∞ where x = +0
        let l = Layout::of(&[3, 2, 4], 1, 2).unwrap();
        let x = values(l.len(), 6);
        let mut dy = uniform(l.len(), 7);
        for k in 0..l.len() {
            if x[k] >= 0.0 {
                dy[k] = if x[k] == 0.0 { f32::INFINITY } else { f32::NAN };
            }
        }
        let (_, da) = prelu_backward(&x, &[0.5, 2.0], &dy, l);
        assert!(da.iter().all(|d| d.is_finite()), "{da:?}");
    }

    #[test]
    fn affine_equals_its_definition() {
        for l in layouts() {
            let (x, a, b) = (
                values(l.len(), 8),
                uniform(l.channels, 9),
                uniform(l.channels, 10),
            );
            let y = affine(&x, &a, Some(&b), l);
            let scaled = affine(&x, &a, None, l);
            for k in 0..l.len() {
                let c = channel(l, k);
                let p = x[k] * a[c];
                assert_eq!(y[k].to_bits(), (p + b[c]).to_bits(), "{l:?} at {k}");
                assert_eq!(scaled[k].to_bits(), p.to_bits(), "{l:?} at {k}");
            }
        }
    }

    #[test]
    fn affine_rounds_the_product_before_the_add() {
        // x · α = (1 + ε)² = 1 + 2ε + ε² rounds to 1 + 2ε, which β cancels; a fused
        // multiply-add would leave ε² = 2⁻⁴⁶
        let x = 1.0 + f32::EPSILON;
        let b = -(1.0 + 2.0 * f32::EPSILON);
        let l = Layout::of(&[1], 0, 1).unwrap();
        let y = affine(&[x], &[x], Some(&[b]), l);
        assert_eq!(y[0], 0.0);
        assert_eq!(x.mul_add(x, b), 2f32.powi(-46));
    }

    #[test]
    fn affine_backward_equals_its_definition() {
        for l in layouts() {
            let (x, a, dy) = (
                values(l.len(), 11),
                uniform(l.channels, 12),
                values(l.len(), 13),
            );
            let (dx, da, db) = affine_backward(Some(&x), &a, &dy, l);
            for k in 0..l.len() {
                let want = dy[k] * a[channel(l, k)];
                assert_eq!(dx[k].to_bits(), want.to_bits(), "{l:?} at {k}");
            }
            assert_sums(
                &da.unwrap(),
                &naive_sums(l, &x, &dy, |x, g| (g * x) as f64),
                "dα",
            );
            assert_sums(&db, &naive_sums(l, &x, &dy, |_, g| g as f64), "dβ");
            let (dx2, none, db2) = affine_backward(None, &a, &dy, l);
            assert_eq!((dx2, none, db2), (dx, None, db));
        }
    }

    /// The documented order, written out value by value for one channel (no runs, no tasks).
    fn ordered_sum(l: Layout, c: usize, terms: impl Fn(usize) -> f32) -> f32 {
        let p = Plan::of(l);
        let mut total = 0.0f32;
        for s in 0..p.segments {
            let mut units = vec![0f32; p.units];
            for (u, unit) in units.iter_mut().enumerate() {
                let mut lanes = vec![0f32; p.vector];
                let mut pack = s * p.segment + u;
                while pack < ((s + 1) * p.segment).min(p.packs) {
                    for (j, lane) in lanes.iter_mut().enumerate() {
                        let k = pack * p.vector + j;
                        let (o, i) = (k / l.inner, k % l.inner);
                        *lane += terms((o * l.channels + c) * l.inner + i);
                    }
                    pack += p.units;
                }
                *unit = lanes[1..].iter().fold(lanes[0], |a, &b| a + b);
            }
            let mut half = p.units / 2;
            while half > 0 {
                for u in 0..half {
                    units[u] += units[u + half];
                }
                half /= 2;
            }
            total = if s == 0 { units[0] } else { total + units[0] };
        }
        total
    }

    #[test]
    fn the_sums_follow_the_documented_order_bit_for_bit() {
        for l in layouts() {
            let (x, dy) = (values(l.len(), 14), uniform(l.len(), 15));
            let (_, _, db) = affine_backward(None, &vec![1.0; l.channels], &dy, l);
            let (_, da) = prelu_backward(&x, &vec![1.0; l.channels], &dy, l);
            for c in 0..l.channels {
                assert_eq!(
                    db[c].to_bits(),
                    ordered_sum(l, c, |k| dy[k]).to_bits(),
                    "{l:?}"
                );
                // adding +0 where x ≥ 0 leaves a sum that starts at +0 as it is
                let neg = |k: usize| if x[k] < 0.0 { dy[k] * x[k] } else { 0.0 };
                assert_eq!(da[c].to_bits(), ordered_sum(l, c, neg).to_bits(), "{l:?}");
            }
        }
    }

    #[test]
    fn the_test_layouts_cover_both_packs_and_several_segments() {
        let plans: Vec<Plan> = layouts().into_iter().map(Plan::of).collect();
        assert!(plans.iter().any(|p| p.vector == PACK && p.segments > 1));
        assert!(plans.iter().any(|p| p.vector == 1 && p.segments > 1));
        assert!(
            plans
                .iter()
                .any(|p| p.channels_per_cube > 1 && p.segments > 1)
        );
    }
}
