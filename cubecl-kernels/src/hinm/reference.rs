//! The host implementation of HiNM's sparse product: the kernel's test oracle and the path of
//! backends without CubeCL kernels.
//!
//! It runs on activation panels (`crate::panel`): one task per tile of `V` rows. Every row of
//! the tile reads its kept columns from the panel through the tile's column array, the 2:4
//! positions decoded from its metadata on the fly; the groups are walked in chunks small enough
//! for their lines to stay in L1 while all `V` rows of the tile use them, and rows are taken
//! four at a time so that independent vector sums keep the adders busy. The inner loop is a
//! contiguous multiply-add over the panel's lanes that the compiler vectorises (AVX-512 or AVX
//! where the CPU has it, chosen at run time). Every output still sums its products groups
//! ascending from `+0`, one product and one add each (no fused multiply-add): the kernel's
//! order, bit for bit.

use super::{GROUPS_PER_WORD, Packed, meta_words};
use crate::panel::{Line, Orient, PanelWeight, product_as, product_into};

/// Groups of 4 walked together by every row of a tile: 32 groups touch at most 128 lines of a
/// panel (16 KiB for 32 lanes), which stay in L1 while the tile's rows read them.
const CHUNK_GROUPS: usize = 32;
const _: () = assert!(
    CHUNK_GROUPS.is_multiple_of(GROUPS_PER_WORD),
    "chunks start on a word"
);

/// `y = x · Wᵀ` through the packed weight: `x: [m, K]` row-major → `y: [m, out]`, output
/// columns in the view's order (the output permutation applied on the store).
///
/// # Panics
/// If `x` does not have `m · K` values, a column of `w` is out of range, or its output
/// permutation is not one.
pub fn spmm(x: &[f32], m: usize, w: &Packed) -> Vec<f32> {
    product_as(x, m, &Tiles::checked(w), Orient::Rows)
}

/// [`spmm`] on transposed operands: `xᵀ: [K, m]` row-major → `yᵀ: [out, m]` (a convolution's
/// im2col columns in, its output channels out), the same values bit for bit.
///
/// # Panics
/// As [`spmm`].
pub fn spmm_cols(xt: &[f32], m: usize, w: &Packed) -> Vec<f32> {
    product_as(xt, m, &Tiles::checked(w), Orient::Cols)
}

/// [`spmm_cols`] written into `yt` (`out · m` values, whatever they held).
///
/// # Panics
/// As [`spmm`], and if `yt` does not have `out · m` values.
pub fn spmm_cols_into(xt: &[f32], m: usize, w: &Packed, yt: &mut [f32]) {
    product_into(xt, m, &Tiles::checked(w), Orient::Cols, yt)
}

/// A packed weight whose output permutation is one (checked by [`Tiles::checked`]), run tile
/// by tile.
struct Tiles<'a>(&'a Packed);

impl<'a> Tiles<'a> {
    /// `w`'s tiles.
    ///
    /// # Panics
    /// If `w`'s output permutation is not one.
    fn checked(w: &'a Packed) -> Self {
        let mut seen = vec![false; w.out];
        assert!(
            w.out_perm.len() == w.out
                && w.out_perm
                    .iter()
                    .all(|&r| (r as usize) < w.out
                        && !std::mem::replace(&mut seen[r as usize], true)),
            "spmm: out_perm is not a permutation of 0..{}",
            w.out
        );
        Self(w)
    }
}

// SAFETY: task `t` returns the columns `out_perm[t·V..(t+1)·V]`; `out_perm` is a permutation of
// `0..out` (checked in `Tiles::checked`, the only constructor), so every column belongs to one tile.
unsafe impl PanelWeight for Tiles<'_> {
    fn k(&self) -> usize {
        self.0.k
    }
    fn out(&self) -> usize {
        self.0.out
    }
    fn tasks(&self) -> usize {
        self.0.out / self.0.v
    }
    fn pairs(&self) -> usize {
        // 2:4 keeps half of each row's kept columns
        self.0.out * self.0.nnz / 2
    }
    fn task<const L: usize>(&self, lines: &[Line<L>], t: usize) -> (Vec<[f32; L]>, &[u32]) {
        let w = self.0;
        (
            tile_product(lines, w, t),
            &w.out_perm[t * w.v..(t + 1) * w.v],
        )
    }
}

/// Tile `t`'s outputs for one panel: `[V]` rows of `L` lanes.
fn tile_product<const L: usize>(lines: &[Line<L>], w: &Packed, t: usize) -> Vec<[f32; L]> {
    let (half, words) = (w.nnz / 2, meta_words(w.groups()));
    let tile = &w.cols[t * w.nnz..][..w.nnz];
    let mut acc = vec![[0f32; L]; w.v];
    for g0 in (0..w.groups()).step_by(CHUNK_GROUPS) {
        let g1 = (g0 + CHUNK_GROUPS).min(w.groups());
        let cols = &tile[4 * g0..4 * g1];
        let part = |r: usize| Part {
            meta: &w.meta[r * words + g0 / GROUPS_PER_WORD..(r + 1) * words],
            values: &w.values[r * half + 2 * g0..r * half + 2 * g1],
        };
        let mut r = t * w.v;
        for acc in acc.chunks_mut(ROWS) {
            if let Ok(acc) = <&mut [[f32; L]; ROWS]>::try_from(&mut *acc) {
                let parts = std::array::from_fn(|q| part(r + q));
                accumulate(lines, cols, parts, acc);
            } else {
                for (q, acc) in acc.iter_mut().enumerate() {
                    accumulate(lines, cols, [part(r + q)], std::array::from_mut(acc));
                }
            }
            r += acc.len();
        }
    }
    acc
}

/// One packed row's share of a chunk of groups: its metadata from the chunk's first word on,
/// and its two values per group of the chunk.
#[derive(Clone, Copy)]
struct Part<'a> {
    meta: &'a [u32],
    values: &'a [f32],
}

/// Rows of a tile accumulated together: their independent vector sums keep the adders busy
/// although each output's sum is one sequential chain.
const ROWS: usize = 4;

/// For every group `g` of the chunk (`cols`: its tile columns, 4 per group), in order, and
/// every row `q`: `acc[q] += v₀ · lines[cols[4g + p₀]]`, then `acc[q] += v₁ · lines[cols[4g + p₁]]`,
/// the positions decoded from the row's metadata.
fn accumulate<const L: usize, const R: usize>(
    lines: &[Line<L>],
    cols: &[u32],
    parts: [Part; R],
    acc: &mut [[f32; L]; R],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked just above).
            unsafe { accumulate_avx512(lines, cols, parts, acc) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: the CPU has AVX (checked just above).
            unsafe { accumulate_avx(lines, cols, parts, acc) };
            return;
        }
    }
    accumulate_plain(lines, cols, parts, acc)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn accumulate_avx512<const L: usize, const R: usize>(
    lines: &[Line<L>],
    cols: &[u32],
    parts: [Part; R],
    acc: &mut [[f32; L]; R],
) {
    accumulate_plain(lines, cols, parts, acc)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn accumulate_avx<const L: usize, const R: usize>(
    lines: &[Line<L>],
    cols: &[u32],
    parts: [Part; R],
    acc: &mut [[f32; L]; R],
) {
    accumulate_plain(lines, cols, parts, acc)
}

#[inline(always)]
#[allow(clippy::needless_range_loop)] // lanes indexed alike in both arrays: vectorised as is
fn accumulate_plain<const L: usize, const R: usize>(
    lines: &[Line<L>],
    cols: &[u32],
    parts: [Part; R],
    acc: &mut [[f32; L]; R],
) {
    let groups = cols.len() / 4;
    // every index below is in range: checked here, once per chunk, so the loop needs no checks
    assert!(cols.len() == 4 * groups && cols.iter().all(|&c| (c as usize) < lines.len()));
    assert!(parts.iter().all(|p| {
        p.values.len() == 2 * groups && p.meta.len() >= groups.div_ceil(GROUPS_PER_WORD)
    }));
    let mut sum = *acc;
    for g in 0..groups {
        for (sum, part) in sum.iter_mut().zip(&parts) {
            // SAFETY: g < groups, so g / 8 < meta.len(), 2g + 1 < values.len(), 4g + 3 <
            // cols.len(), and every column indexes `lines` (all asserted above).
            let (x0, x1, v0, v1) = unsafe {
                let meta = *part.meta.get_unchecked(g / GROUPS_PER_WORD);
                let bits = (meta >> (4 * (g % GROUPS_PER_WORD))) as usize;
                let c0 = *cols.get_unchecked(4 * g + (bits & 3)) as usize;
                let c1 = *cols.get_unchecked(4 * g + ((bits >> 2) & 3)) as usize;
                (
                    &lines.get_unchecked(c0).0,
                    &lines.get_unchecked(c1).0,
                    *part.values.get_unchecked(2 * g),
                    *part.values.get_unchecked(2 * g + 1),
                )
            };
            for l in 0..L {
                sum[l] += v0 * x0[l];
            }
            for l in 0..L {
                sum[l] += v1 * x1[l];
            }
        }
    }
    *acc = sum;
}

/// The same product one output at a time, in the order of the definition: the oracle of
/// [`spmm`] itself.
pub fn spmm_naive(x: &[f32], m: usize, w: &Packed) -> Vec<f32> {
    let half = w.nnz / 2;
    let mut y = vec![0f32; m * w.out];
    for i in 0..m {
        for r in 0..w.out {
            let mut acc = 0f32;
            for j in 0..half {
                acc += w.values[r * half + j] * x[i * w.k + w.column(r, j)];
            }
            y[i * w.out + w.out_perm[r] as usize] = acc;
        }
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hinm::random_packed as random;
    use crate::panel::transposed;

    #[test]
    fn the_fast_product_is_the_definition_bit_for_bit() {
        for (out, k, v, nnz, m) in [
            (16, 24, 8, 12, 5),
            (64, 64, 64, 32, 33),
            (12, 8, 4, 4, 1),
            // remainders of 8, 12 and 20 rows after whole panels: each panel width
            (32, 40, 16, 20, 40),
            (32, 40, 16, 20, 44),
            (32, 40, 16, 20, 52),
            // above `crate::panel::SERIAL_PAIRS` (64 · 256 pairs a panel, two panels): rayon
            (256, 512, 64, 256, 64),
        ] {
            let w = random(out, k, v, nnz, 7);
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i * 37 % 97) as f32 - 48.0) / 17.0)
                .collect();
            let want = spmm_naive(&x, m, &w);
            assert_eq!(spmm(&x, m, &w), want, "{out}x{k} V={v} m={m}");
            let cols = spmm_cols(&transposed(&x, m, k), m, &w);
            assert_eq!(
                cols,
                transposed(&want, m, out),
                "{out}x{k} V={v} m={m}, transposed"
            );
            // into a buffer that held something else: every value overwritten
            let mut into = vec![f32::NAN; m * out];
            spmm_cols_into(&transposed(&x, m, k), m, &w, &mut into);
            assert_eq!(into, cols, "{out}x{k} V={v} m={m}, into a used buffer");
        }
    }

    #[test]
    fn the_product_is_the_dense_masked_product() {
        let w = random(16, 32, 8, 16, 9);
        let dense = w.dense();
        let m = 3;
        let x: Vec<f32> = (0..m * 32).map(|i| (i % 7) as f32 - 3.0).collect();
        let y = spmm(&x, m, &w);
        for i in 0..m {
            for o in 0..16 {
                // another summation order: equal up to rounding
                let want: f32 = (0..32).map(|c| x[i * 32 + c] * dense[o * 32 + c]).sum();
                assert!((y[i * 16 + o] - want).abs() <= 1e-4 * want.abs().max(1.0));
            }
        }
    }
}
