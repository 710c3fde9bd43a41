//! The vectorised row scans: 16 lanes, each keeping its smallest (and second smallest) value
//! and where it was, merged at the end of the row.

use super::{Cost, LANES, less, more};

/// The smallest and the second smallest of `row − v` (equal where the smallest is there twice),
/// and the first column of the smallest.
#[inline(always)]
pub(super) fn two_smallest<T: Cost>(row: &[T], v: &[T]) -> (T, T, usize) {
    let (mut m1, mut m2, mut at) = ([T::INFINITY; LANES], [T::INFINITY; LANES], [0u32; LANES]);
    let (rows, row_tail) = row.as_chunks::<LANES>();
    let (prices, price_tail) = v.as_chunks::<LANES>();
    for (k, (c, v)) in rows.iter().zip(prices).enumerate() {
        for l in 0..LANES {
            let h = c[l] - v[l];
            at[l] = if h < m1[l] { k as u32 } else { at[l] };
            m2[l] = less(m2[l], more(m1[l], h));
            m1[l] = less(m1[l], h);
        }
    }
    let (mut u1, first) = lane_min(m1, at);
    // the second smallest: every lane's second smallest and the other lanes' smallest
    let mut rest = m2;
    for l in 0..LANES {
        let other = if key(at, l) == first {
            T::INFINITY
        } else {
            m1[l]
        };
        rest[l] = less(rest[l], other);
    }
    let mut u2 = lane_min(rest, at).0;
    let mut j1 = first as usize;
    let start = rows.len() * LANES;
    for (k, (&c, &v)) in row_tail.iter().zip(price_tail).enumerate() {
        let h = c - v;
        u2 = less(u2, more(u1, h));
        if h < u1 {
            (u1, j1) = (h, start + k);
        }
    }
    (u1, u2, j1)
}

/// The column of lane `l`'s smallest, found in chunk `at[l]`.
#[inline(always)]
pub(super) fn key(at: [u32; LANES], l: usize) -> u32 {
    at[l] * LANES as u32 + l as u32
}

/// The smallest of the lanes' `m` and its first column (the lanes' smallest were found in the
/// chunks `at`); `u32::MAX` as the column where every lane is `+∞` (no chunk, or every column
/// settled).
#[inline(always)]
pub(super) fn lane_min<T: Cost>(m: [T; LANES], at: [u32; LANES]) -> (T, u32) {
    let mut low = m;
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            low[l] = less(low[l], low[l + width]);
        }
    }
    let low = low[0];
    let mut keys = [u32::MAX; LANES];
    for (l, k) in keys.iter_mut().enumerate() {
        if m[l] == low && low < T::INFINITY {
            *k = key(at, l);
        }
    }
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            keys[l] = keys[l].min(keys[l + width]);
        }
    }
    (low, keys[0])
}

/// The first column other than `j1` where `row − v` is `u2` (rare: only where the two smallest
/// reduced costs are equal or too close to lower a price).
pub(super) fn second_at<T: Cost>(row: &[T], v: &[T], j1: usize, u2: T) -> usize {
    (row.iter().zip(v).enumerate())
        .position(|(j, (&c, &v))| j != j1 && c - v == u2)
        .expect("the second smallest is in the row")
}

/// The shortest path search from free row `f`: every column's distance `row − v` and
/// predecessor `f`; the smallest distance and its first column.
#[inline(always)]
pub(super) fn distances<T: Cost>(
    row: &[T],
    v: &[T],
    f: u32,
    dist: &mut [T],
    pred: &mut [u32],
) -> (T, usize) {
    pred.fill(f);
    for ((d, &c), &v) in dist.iter_mut().zip(row).zip(v) {
        *d = c - v;
    }
    nearest(dist)
}

/// The smallest distance that is not NaN and its first column.
#[inline(always)]
pub(super) fn nearest<T: Cost>(dist: &[T]) -> (T, usize) {
    let (mut m, mut at) = ([T::INFINITY; LANES], [0u32; LANES]);
    let (chunks, tail) = dist.as_chunks::<LANES>();
    for (k, d) in chunks.iter().enumerate() {
        for l in 0..LANES {
            at[l] = if d[l] < m[l] { k as u32 } else { at[l] };
            m[l] = less(d[l], m[l]);
        }
    }
    finish(lane_min(m, at), tail, chunks.len() * LANES)
}

/// The lanes' smallest `(value, column)` and the `tail` after them (columns from `start`): the
/// smallest and its first column.
#[inline(always)]
pub(super) fn finish<T: Cost>((mut m, key): (T, u32), tail: &[T], start: usize) -> (T, usize) {
    let mut j = key as usize;
    for (k, &d) in tail.iter().enumerate() {
        if d < m {
            (m, j) = (d, start + k);
        }
    }
    (m, j)
}

/// Relaxes the unsettled columns (distance not NaN) through row `i`, reached at its column's
/// distance: column `k` is at `row[k] − v[k] − h` from the start through it, its predecessor
/// `i` where that is shorter. Returns the smallest distance left and its first column.
#[inline(always)]
pub(super) fn relax<T: Cost>(
    row: &[T],
    v: &[T],
    h: T,
    i: u32,
    dist: &mut [T],
    pred: &mut [u32],
) -> (T, usize) {
    let (mut m, mut at) = ([T::INFINITY; LANES], [0u32; LANES]);
    let (rows, row_tail) = row.as_chunks::<LANES>();
    let (prices, price_tail) = v.as_chunks::<LANES>();
    let (dists, dist_tail) = dist.as_chunks_mut::<LANES>();
    let (preds, pred_tail) = pred.as_chunks_mut::<LANES>();
    let chunks = rows.iter().zip(prices).zip(dists).zip(preds);
    for (k, (((c, v), d), p)) in chunks.enumerate() {
        for l in 0..LANES {
            let r = (c[l] - v[l]) - h;
            let shorter = r < d[l];
            p[l] = if shorter { i } else { p[l] };
            d[l] = if shorter { r } else { d[l] };
            at[l] = if d[l] < m[l] { k as u32 } else { at[l] };
            m[l] = less(d[l], m[l]);
        }
    }
    let tails = row_tail.iter().zip(price_tail).zip(dist_tail.iter_mut());
    for (((&c, &v), d), p) in tails.zip(pred_tail) {
        let r = (c - v) - h;
        if r < *d {
            (*d, *p) = (r, i);
        }
    }
    let start = rows.len() * LANES;
    finish(lane_min(m, at), &dist[start..], start)
}
