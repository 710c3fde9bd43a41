//! The pruning kernels: block norms, per-sample top-k selection, compression.

use super::Blocks;
use cubecl::prelude::*;

/// `norms[s, c·rows + r] = Σ_e x[s, r, c·b + e]²` over the block's elements, in order.
#[cube(launch)]
pub(super) fn block_norms_kernel(x: &Tensor<f32>, norms: &mut Array<f32>, #[comptime] g: Blocks) {
    let i = ABSOLUTE_POS;
    if i < norms.len() {
        let n_per = comptime!(g.per_sample());
        let rows = comptime!(g.rows);
        let (s, n) = (i / n_per, i % n_per);
        let (c, r) = (n / rows, n % rows);
        let start = c * comptime!(g.b);
        let end = select(
            start + comptime!(g.b) > comptime!(g.d),
            comptime!(g.d),
            start + comptime!(g.b),
        );
        let base = s * x.stride(0) + r * x.stride(1);
        let mut acc = 0.0f32;
        for e in start..end {
            let v = x[base + e * x.stride(2)];
            acc += v * v;
        }
        norms[i] = acc;
    }
}

/// The rank key of a non-negative norm: its bits (which order like the values), NaN as +∞.
#[cube]
fn rank_key(v: f32) -> u32 {
    let bits = u32::reinterpret(v) & 0x7fff_ffffu32;
    select(bits > 0x7f80_0000u32, 0x7f80_0000u32, bits)
}

/// `kept[s, n] = 1` when fewer than `keep` blocks of sample `s` rank before block `n`.
#[cube(launch)]
pub(super) fn select_kernel(
    norms: &Array<f32>,
    kept: &mut Array<u32>,
    keep: u32,
    #[comptime] n_per: usize,
) {
    let i = ABSOLUTE_POS;
    if i < kept.len() {
        let (s, n) = (i / n_per, i % n_per);
        let base = s * n_per;
        let mine = rank_key(norms[i]);
        let mut before = 0u32;
        for j in 0..n_per {
            let other = rank_key(norms[base + j]);
            if other > mine || (other == mine && j < n) {
                before += 1u32;
            }
        }
        kept[i] = select(before < keep, 1u32, 0u32);
    }
}

/// One unit per (sample, block column): writes the column's start in `crow` and its kept
/// blocks, rows ascending, into `values` / `col`.
#[cube(launch)]
pub(super) fn compress_kernel(
    x: &Tensor<f32>,
    kept: &Array<u32>,
    values: &mut Array<f32>,
    col: &mut Array<u32>,
    crow: &mut Array<u32>,
    samples: u32,
    keep: u32,
    #[comptime] g: Blocks,
) {
    let i = ABSOLUTE_POS;
    let nb = comptime!(g.columns());
    if i < samples as usize * nb {
        let rows = comptime!(g.rows);
        let (b, d) = comptime!((g.b, g.d));
        let n_per = comptime!(g.per_sample());
        let (s, c) = (i / nb, i % nb);
        let flags = s * n_per;
        let mut pos = 0u32;
        for n in 0..c * rows {
            pos += kept[flags + n];
        }
        crow[s * (nb + 1) + c] = pos;
        if c == nb - 1 {
            crow[s * (nb + 1) + nb] = keep;
        }
        let keep = keep as usize;
        for r in 0..rows {
            if kept[flags + c * rows + r] == 1u32 {
                let at = s * keep + pos as usize;
                col[at] = r as u32;
                let src = s * x.stride(0) + r * x.stride(1);
                for e in 0..b {
                    let j = c * b + e;
                    let mut v = 0.0f32;
                    if j < d {
                        v = x[src + j * x.stride(2)];
                    }
                    values[at * b + e] = v;
                }
                pos += 1u32;
            }
        }
    }
}
