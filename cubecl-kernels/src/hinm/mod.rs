//! HiNM's sparse matrix product: a weight pruned to hierarchical N:M sparsity, kept **packed**,
//! times dense activations.
//!
//! The weight's GEMM view is `out × K` (`K` = the Linear's `d_in`, or `c_in·kh·kw` of a conv).
//! Its packed form ([`Packed`], the V:N:M layout of VENOM with N:M = 2:4):
//! - rows in tiles of `V`; packed row `r` is row `out_perm[r]` of the view (the output
//!   permutation, applied when a result is **stored**: the kernel writes row `r`'s outputs to
//!   column `out_perm[r]`, so no layer is pre-ordered offline);
//! - per tile, its `nnz` kept columns in group order (`cols`: the column-vector mask with the
//!   tile's input permutation folded in; the kernel **loads** activations through it, so the
//!   permutation costs nothing);
//! - per row, the two kept values of every group of 4 (`values`) and their positions in the
//!   group (`meta`: 2 bits each, a 4-bit pattern per group, 8 groups per `u32`).
//!
//! `y[i, out_perm[r]] = Σ_g v[r, 2g]·x[i, c(r, g, p₀)] + v[r, 2g+1]·x[i, c(r, g, p₁)]`, groups
//! ascending, from `+0`, one product then one add each: the order of the kernel
//! ([`launch_spmm`]) and of the host implementation ([`reference::spmm`]), so the two agree
//! bit for bit. CubeCL has no sparse tensor-core instruction (`mma.sp`), so the kernel uses
//! ordinary FP32 units and gains only by skipping the pruned products.
//!
//! `kernel.rs` holds the kernel, `launch.rs` [`launch_spmm`], `reference.rs` the host
//! implementation (multi-threaded and vectorised: it is also the ndarray path).

mod kernel;
mod launch;
pub mod reference;

pub use launch::{PackedCube, launch_spmm};

use thiserror::Error;

/// Groups of 4 whose metadata share one `u32` word.
pub const GROUPS_PER_WORD: usize = 8;

/// Metadata words of one packed row with `groups` groups of 4.
pub fn meta_words(groups: usize) -> usize {
    groups.div_ceil(GROUPS_PER_WORD)
}

/// A packed weight that does not hold together.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("HiNM packed weight: {0}")]
pub struct PackedError(pub String);

/// A weight in HiNM's packed layout (see the [module docs](self)), host side.
#[derive(Debug, Clone, PartialEq)]
pub struct Packed {
    /// Rows of the GEMM view (output channels).
    pub out: usize,
    /// Columns of the GEMM view.
    pub k: usize,
    /// Tile height.
    pub v: usize,
    /// Kept columns per tile (a multiple of 4).
    pub nnz: usize,
    /// Packed row `r` is row `out_perm[r]` of the view.
    pub out_perm: Vec<u32>,
    /// `[out / v, nnz]`: each tile's kept columns in group order.
    pub cols: Vec<u32>,
    /// `[out, nnz / 2]`: each row's two kept values per group.
    pub values: Vec<f32>,
    /// `[out, meta_words(nnz / 4)]`: each group's positions `p₀ | p₁ << 2` (`p₀ < p₁`) in
    /// 4 bits, group `g` at bit `4·(g mod 8)` of word `g / 8`.
    pub meta: Vec<u32>,
}

impl Packed {
    /// Checks that the parts hold together: sizes, a permutation, columns in range and
    /// distinct within a tile, positions `p₀ < p₁ < 4`.
    pub fn validate(&self) -> Result<(), PackedError> {
        let err = |s: String| Err(PackedError(s));
        let Self { out, k, v, nnz, .. } = *self;
        if v == 0 || !out.is_multiple_of(v) {
            return err(format!("tile height {v} does not divide {out} rows"));
        }
        if nnz == 0 || !nnz.is_multiple_of(4) || nnz > k {
            return err(format!(
                "{nnz} kept columns of {k}: need a positive multiple of 4 ≤ {k}"
            ));
        }
        let tiles = out / v;
        let words = meta_words(nnz / 4);
        for (name, len, want) in [
            ("out_perm", self.out_perm.len(), out),
            ("cols", self.cols.len(), tiles * nnz),
            ("values", self.values.len(), out * nnz / 2),
            ("meta", self.meta.len(), out * words),
        ] {
            if len != want {
                return err(format!("{name} has {len} entries, expected {want}"));
            }
        }
        let mut seen = vec![false; out];
        for &r in &self.out_perm {
            if r as usize >= out || std::mem::replace(&mut seen[r as usize], true) {
                return err("out_perm is not a permutation".into());
            }
        }
        // each tile's columns sorted (nothing sized by `k`: a file may claim any `k`)
        let mut sorted = Vec::with_capacity(nnz);
        for (t, tile) in self.cols.chunks(nnz).enumerate() {
            sorted.clear();
            sorted.extend_from_slice(tile);
            sorted.sort_unstable();
            let repeated = sorted.windows(2).find(|w| w[0] == w[1]).map(|w| w[0]);
            let outside = sorted.last().copied().filter(|&c| c as usize >= k);
            if let Some(c) = outside.or(repeated) {
                return err(format!("tile {t}: column {c} out of range or repeated"));
            }
        }
        for r in 0..out {
            for g in 0..nnz / 4 {
                let [p0, p1] = self.positions(r, g);
                if p0 >= p1 {
                    return err(format!("row {r}, group {g}: positions {p0}, {p1}"));
                }
            }
        }
        if let Some(bad) = self.values.iter().find(|x| !x.is_finite()) {
            return err(format!("non-finite value {bad}"));
        }
        Ok(())
    }

    /// Number of groups of 4 per row.
    pub fn groups(&self) -> usize {
        self.nnz / 4
    }

    /// The two kept positions of packed row `r`'s group `g`.
    pub fn positions(&self, r: usize, g: usize) -> [usize; 2] {
        let word = self.meta[r * meta_words(self.groups()) + g / GROUPS_PER_WORD];
        let bits = (word >> (4 * (g % GROUPS_PER_WORD))) & 0xf;
        [(bits & 3) as usize, (bits >> 2) as usize]
    }

    /// The view's column of packed row `r`'s kept value `j` (`j < nnz / 2`).
    pub fn column(&self, r: usize, j: usize) -> usize {
        let [p0, p1] = self.positions(r, j / 2);
        let p = if j.is_multiple_of(2) { p0 } else { p1 };
        self.cols[(r / self.v) * self.nnz + (j / 2) * 4 + p] as usize
    }

    /// The metadata of one row from its groups' kept positions.
    pub fn encode_meta(positions: &[[usize; 2]]) -> Vec<u32> {
        let mut words = vec![0u32; meta_words(positions.len())];
        for (g, [p0, p1]) in positions.iter().enumerate() {
            let bits = (*p0 as u32) | (*p1 as u32) << 2;
            words[g / GROUPS_PER_WORD] |= bits << (4 * (g % GROUPS_PER_WORD));
        }
        words
    }

    /// The dense `out × K` view (rows in the view's order, pruned entries `0`).
    pub fn dense(&self) -> Vec<f32> {
        let half = self.nnz / 2;
        let mut w = vec![0f32; self.out * self.k];
        for r in 0..self.out {
            let row = self.out_perm[r] as usize;
            for j in 0..half {
                w[row * self.k + self.column(r, j)] = self.values[r * half + j];
            }
        }
        w
    }

    /// Bytes of the packed arrays (values, metadata, columns, output permutation).
    pub fn bytes(&self) -> usize {
        4 * (self.values.len() + self.meta.len() + self.cols.len() + self.out_perm.len())
    }
}

/// A valid packed weight for tests and benches: a random output permutation, every tile keeping
/// `nnz` random columns, two random positions per group, values in `[-1, 1)` (same `seed`, same
/// weight).
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn random_packed(out: usize, k: usize, v: usize, nnz: usize, seed: u64) -> Packed {
    let mut s = seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
    let mut unit = move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        (s.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40) as f32 / (1u64 << 24) as f32
    };
    let mut next = |n: usize| ((unit() * n as f32) as usize).min(n - 1);
    let mut out_perm: Vec<u32> = (0..out as u32).collect();
    for i in (1..out).rev() {
        out_perm.swap(i, next(i + 1));
    }
    let mut cols = Vec::new();
    for _ in 0..out / v {
        let mut all: Vec<u32> = (0..k as u32).collect();
        for i in (1..k).rev() {
            all.swap(i, next(i + 1));
        }
        cols.extend_from_slice(&all[..nnz]);
    }
    let pairs = [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]];
    let mut meta = Vec::new();
    for _ in 0..out {
        let pos: Vec<[usize; 2]> = (0..nnz / 4).map(|_| pairs[next(6)]).collect();
        meta.extend(Packed::encode_meta(&pos));
    }
    let values = (0..out * nnz / 2).map(|_| unit() * 2.0 - 1.0).collect();
    let w = Packed {
        out,
        k,
        v,
        nnz,
        out_perm,
        cols,
        values,
        meta,
    };
    w.validate().expect("a valid random weight");
    w
}

#[cfg(test)]
mod tests {

    use super::random_packed as random;

    #[test]
    fn the_dense_view_keeps_two_of_four_in_the_kept_columns_of_each_tile() {
        let p = random(16, 24, 8, 12, 3);
        p.validate().unwrap();
        let w = p.dense();
        for r in 0..16 {
            let row = p.out_perm[r] as usize;
            let tile = &p.cols[(r / 8) * 12..(r / 8 + 1) * 12];
            let nonzero: Vec<usize> = (0..24).filter(|&c| w[row * 24 + c] != 0.0).collect();
            assert!(nonzero.iter().all(|c| tile.contains(&(*c as u32))));
            for g in tile.chunks(4) {
                let kept = g
                    .iter()
                    .filter(|&&c| w[row * 24 + c as usize] != 0.0)
                    .count();
                assert!(kept <= 2, "2:4 in every group");
            }
        }
    }

    #[test]
    fn validation_names_what_is_wrong() {
        let good = random(8, 16, 4, 8, 1);
        let mut p = good.clone();
        p.out_perm[0] = p.out_perm[1];
        assert!(p.validate().unwrap_err().0.contains("permutation"));
        let mut p = good.clone();
        p.cols[1] = p.cols[0];
        assert!(p.validate().unwrap_err().0.contains("repeated"));
        let mut p = good.clone();
        p.meta[0] = 0; // positions 0, 0
        assert!(p.validate().unwrap_err().0.contains("positions"));
        let mut p = good.clone();
        p.values.pop();
        assert!(p.validate().unwrap_err().0.contains("values"));
        let mut p = good;
        p.v = 3;
        assert!(p.validate().unwrap_err().0.contains("tile height"));
    }
}
