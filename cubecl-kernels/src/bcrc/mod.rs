//! BCR's sparse matrix product: a weight pruned to block column-row sparsity, kept in the
//! **BCRC** compact format (GRIM, Section 4.3), times dense activations.
//!
//! The weight's GEMM view is `out × K`. BCR pruning leaves many rows with the same kept
//! columns; BCRC reorders the rows so that rows sharing a column pattern are adjacent and stores
//! each pattern once. Its six arrays ([`Bcrc`]), every index a `u32`, every weight an `f32`:
//! - `reorder[p]`: the view's row placed at row `p` of the reordered matrix;
//! - `row_offset[p]..row_offset[p + 1]`: row `p`'s weights in `weights` (`out + 1` entries);
//! - `occurrence[g]..occurrence[g + 1]`: the rows of the reordered matrix that share pattern `g`
//!   (`groups + 1` entries, from 0 to `out`);
//! - `column_stride[g]..column_stride[g + 1]`: pattern `g`'s columns in `compact_column`
//!   (`groups + 1` entries);
//! - `compact_column`: each pattern's columns, ascending, stored once however many rows share it;
//! - `weights`: the kept values, row by row of the reordered matrix, in the pattern's column order.
//!
//! Patterns are ordered by length, longest first (rows of similar work together), then by their
//! columns; the rows of a pattern keep the view's order. A row that keeps nothing has the empty
//! pattern (a group of zero columns, last). The paper leaves "occurrence" and the index widths
//! open; this is Ember's reading (`docs/bcr.md`).
//!
//! `y[i, reorder[p]] = Σ_t weights[row_offset[p] + t] · x[i, compact_column[column_stride[g] + t]]`
//! over `t` ascending from `+0`, one product then one add each: the order of the kernel and of
//! the host implementation ([`reference::spmm`]), which agree bit for bit (`kernel.rs`,
//! `launch.rs`: [`launch_spmm`]). The host
//! implementation computes all rows of a pattern together, so each activation is loaded once per
//! pattern (the paper's load-redundancy elimination, Fig. 9).

mod kernel;
mod launch;
pub mod reference;

pub use launch::{BcrcCube, launch_spmm};

use thiserror::Error;

/// A BCRC weight that does not hold together.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("BCRC weight: {0}")]
pub struct BcrcError(pub String);

/// A weight in BCRC (see the [module docs](self)), host side.
#[derive(Debug, Clone, PartialEq)]
pub struct Bcrc {
    /// Rows of the GEMM view (output channels).
    pub out: usize,
    /// Columns of the GEMM view.
    pub k: usize,
    /// `[out]`: the view's row at each row of the reordered matrix.
    pub reorder: Vec<u32>,
    /// `[out + 1]`: each reordered row's first weight.
    pub row_offset: Vec<u32>,
    /// `[groups + 1]`: each pattern's first reordered row.
    pub occurrence: Vec<u32>,
    /// `[groups + 1]`: each pattern's first entry in `compact_column`.
    pub column_stride: Vec<u32>,
    /// Every pattern's columns, ascending within a pattern.
    pub compact_column: Vec<u32>,
    /// The kept values.
    pub weights: Vec<f32>,
}

impl Bcrc {
    /// The BCRC form of an `out × k` view (row-major `values`) keeping the entries `keep`
    /// marks (a kept entry may be zero: it is stored).
    pub fn from_dense(
        out: usize,
        k: usize,
        values: &[f32],
        keep: &[bool],
    ) -> Result<Self, BcrcError> {
        if values.len() != out * k || keep.len() != out * k {
            return Err(BcrcError(format!(
                "{} values and {} marks for a {out} × {k} view",
                values.len(),
                keep.len()
            )));
        }
        if u32::try_from(out * k).is_err() {
            return Err(BcrcError(format!(
                "a {out} × {k} view does not fit 32-bit indices"
            )));
        }
        let pattern = |i: usize| -> Vec<u32> {
            (0..k)
                .filter(|&j| keep[i * k + j])
                .map(|j| j as u32)
                .collect()
        };
        let patterns: Vec<Vec<u32>> = (0..out).map(pattern).collect();
        let mut order: Vec<usize> = (0..out).collect();
        // longest patterns first, then by their columns, then the view's row order
        order.sort_by(|&a, &b| {
            let (pa, pb) = (&patterns[a], &patterns[b]);
            pb.len().cmp(&pa.len()).then(pa.cmp(pb)).then(a.cmp(&b))
        });
        let mut w = Self {
            out,
            k,
            reorder: Vec::with_capacity(out),
            row_offset: vec![0],
            occurrence: vec![],
            column_stride: vec![],
            compact_column: vec![],
            weights: vec![],
        };
        let mut last: Option<&Vec<u32>> = None;
        for (p, &i) in order.iter().enumerate() {
            let pat = &patterns[i];
            if last != Some(pat) {
                w.occurrence.push(p as u32);
                w.column_stride.push(w.compact_column.len() as u32);
                w.compact_column.extend_from_slice(pat);
                last = Some(pat);
            }
            w.reorder.push(i as u32);
            w.weights
                .extend(pat.iter().map(|&j| values[i * k + j as usize]));
            w.row_offset.push(w.weights.len() as u32);
        }
        w.occurrence.push(out as u32);
        w.column_stride.push(w.compact_column.len() as u32);
        w.validate()?;
        Ok(w)
    }

    /// Number of column patterns.
    pub fn groups(&self) -> usize {
        self.occurrence.len().saturating_sub(1)
    }

    /// Pattern `g`'s columns.
    pub fn pattern(&self, g: usize) -> &[u32] {
        &self.compact_column[self.column_stride[g] as usize..self.column_stride[g + 1] as usize]
    }

    /// Reordered row `p`'s weights.
    pub fn row_weights(&self, p: usize) -> &[f32] {
        &self.weights[self.row_offset[p] as usize..self.row_offset[p + 1] as usize]
    }

    /// Checks that the arrays hold together: sizes, a permutation, offsets that start at 0,
    /// never fall and end at their array's length, each row's weights as many as its pattern's
    /// columns, columns in range and ascending within a pattern, finite weights.
    pub fn validate(&self) -> Result<(), BcrcError> {
        let err = |s: String| Err(BcrcError(s));
        let (out, k) = (self.out, self.k);
        if self.reorder.len() != out || self.row_offset.len() != out + 1 {
            return err(format!(
                "reorder has {} entries and row_offset {}, expected {out} and {}",
                self.reorder.len(),
                self.row_offset.len(),
                out + 1
            ));
        }
        if self.occurrence.is_empty() || self.occurrence.len() != self.column_stride.len() {
            return err(format!(
                "occurrence has {} entries and column_stride {}: both need groups + 1",
                self.occurrence.len(),
                self.column_stride.len()
            ));
        }
        let mut seen = vec![false; out];
        for &r in &self.reorder {
            if r as usize >= out || std::mem::replace(&mut seen[r as usize], true) {
                return err("reorder is not a permutation".into());
            }
        }
        for (name, offsets, end) in [
            ("row_offset", &self.row_offset, self.weights.len()),
            ("occurrence", &self.occurrence, out),
            (
                "column_stride",
                &self.column_stride,
                self.compact_column.len(),
            ),
        ] {
            if offsets[0] != 0
                || offsets.windows(2).any(|w| w[0] > w[1])
                || offsets[offsets.len() - 1] as usize != end
            {
                return err(format!("{name} must rise from 0 to {end} without falling"));
            }
        }
        for g in 0..self.groups() {
            let pat = self.pattern(g);
            if pat.iter().any(|&c| c as usize >= k) || pat.windows(2).any(|w| w[0] >= w[1]) {
                return err(format!(
                    "pattern {g}: columns out of range or not ascending"
                ));
            }
            for p in self.occurrence[g] as usize..self.occurrence[g + 1] as usize {
                if self.row_weights(p).len() != pat.len() {
                    return err(format!(
                        "row {p} has {} weights for the {} columns of its pattern",
                        self.row_weights(p).len(),
                        pat.len()
                    ));
                }
            }
        }
        if let Some(bad) = self.weights.iter().find(|x| !x.is_finite()) {
            return err(format!("non-finite weight {bad}"));
        }
        Ok(())
    }

    /// The dense `out × K` view (pruned entries `0`).
    pub fn dense(&self) -> Vec<f32> {
        let mut w = vec![0f32; self.out * self.k];
        for g in 0..self.groups() {
            let pat = self.pattern(g);
            for p in self.occurrence[g] as usize..self.occurrence[g + 1] as usize {
                let row = self.reorder[p] as usize;
                for (&c, &v) in pat.iter().zip(self.row_weights(p)) {
                    w[row * self.k + c as usize] = v;
                }
            }
        }
        w
    }

    /// Bytes of the index arrays (everything but `weights`): BCRC's extra data.
    pub fn index_bytes(&self) -> usize {
        4 * (self.reorder.len()
            + self.row_offset.len()
            + self.occurrence.len()
            + self.column_stride.len()
            + self.compact_column.len())
    }

    /// The same weight with every row its own group (no pattern shared), in the view's row
    /// order: the layout of the product without load-redundancy elimination.
    pub fn ungrouped(&self) -> Self {
        let mut w = Self {
            out: self.out,
            k: self.k,
            reorder: (0..self.out as u32).collect(),
            row_offset: vec![0],
            occurrence: (0..=self.out as u32).collect(),
            column_stride: vec![0],
            compact_column: vec![],
            weights: vec![],
        };
        // each view row's reordered row and pattern
        let mut at = vec![(0, 0); self.out];
        for g in 0..self.groups() {
            for p in self.occurrence[g] as usize..self.occurrence[g + 1] as usize {
                at[self.reorder[p] as usize] = (p, g);
            }
        }
        for (p, g) in at {
            w.weights.extend_from_slice(self.row_weights(p));
            w.compact_column.extend_from_slice(self.pattern(g));
            w.row_offset.push(w.weights.len() as u32);
            w.column_stride.push(w.compact_column.len() as u32);
        }
        w
    }
}

/// The same kept entries in CSR (row pointers, column indices, values; `u32` indices, `f32`
/// values, the view's row order): the baseline BCRC is compared with.
#[derive(Debug, Clone, PartialEq)]
pub struct Csr {
    /// Rows of the view.
    pub out: usize,
    /// Columns of the view.
    pub k: usize,
    /// `[out + 1]`.
    pub row_ptr: Vec<u32>,
    /// Column of every kept entry, ascending within a row.
    pub col_idx: Vec<u32>,
    /// The kept values.
    pub values: Vec<f32>,
}

impl Csr {
    /// The CSR form of a BCRC weight (the same kept entries).
    pub fn of(w: &Bcrc) -> Self {
        let u = w.ungrouped();
        Self {
            out: u.out,
            k: u.k,
            row_ptr: u.row_offset,
            col_idx: u.compact_column,
            values: u.weights,
        }
    }

    /// Bytes of the index arrays (`row_ptr` and `col_idx`): CSR's extra data.
    pub fn index_bytes(&self) -> usize {
        4 * (self.row_ptr.len() + self.col_idx.len())
    }
}

/// Bytes of a dense bitmask over an `out × k` view (one bit per weight).
pub fn bitmask_bytes(out: usize, k: usize) -> usize {
    (out * k).div_ceil(8)
}

/// A valid BCRC weight for tests and benches: an `out × k` view pruned in blocks of `br × bc`,
/// each block keeping a random `rows × cols` sub-grid (`rows ≤ br`, `cols ≤ bc`), values in
/// `[-1, 1)` (same `seed`, same weight).
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn random_bcrc(
    out: usize,
    k: usize,
    (br, bc): (usize, usize),
    (rows, cols): (usize, usize),
    seed: u64,
) -> Bcrc {
    let mut s = seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
    let mut unit = move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        (s.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40) as f32 / (1u64 << 24) as f32
    };
    let mut keep = vec![false; out * k];
    let pick = |n: usize, take: usize, unit: &mut dyn FnMut() -> f32| {
        let mut all: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            all.swap(i, ((unit() * (i + 1) as f32) as usize).min(i));
        }
        all.truncate(take.min(n));
        all
    };
    for bi in 0..out.div_ceil(br) {
        for bj in 0..k.div_ceil(bc) {
            let (r0, c0) = (bi * br, bj * bc);
            let (nr, nc) = (br.min(out - r0), bc.min(k - c0));
            let rs = pick(nr, rows, &mut unit);
            let cs = pick(nc, cols, &mut unit);
            for &r in &rs {
                for &c in &cs {
                    keep[(r0 + r) * k + c0 + c] = true;
                }
            }
        }
    }
    let values: Vec<f32> = (0..out * k).map(|_| unit() * 2.0 - 1.0).collect();
    Bcrc::from_dense(out, k, &values, &keep).expect("a valid random weight")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's Fig. 8 situation in small: rows 0 and 3 share a pattern, row 2 is empty.
    fn small() -> (Vec<f32>, Vec<bool>) {
        #[rustfmt::skip]
        let values = vec![
            1.0, 0.0, 2.0, 0.0, 3.0, 0.0,
            0.0, 4.0, 0.0, 5.0, 0.0, 0.0,
            0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            6.0, 0.0, 7.0, 0.0, 0.0, 0.0,
        ];
        // row 3 keeps column 4 too, with a zero value: a kept zero is stored
        let keep: Vec<bool> = values
            .iter()
            .enumerate()
            .map(|(i, &v)| v != 0.0 || i == 3 * 6 + 4)
            .collect();
        (values, keep)
    }

    #[test]
    fn bcrc_groups_rows_of_one_pattern_and_round_trips() {
        let (values, keep) = small();
        let w = Bcrc::from_dense(4, 6, &values, &keep).unwrap();
        assert_eq!(w.reorder, [0, 3, 1, 2]);
        assert_eq!(w.occurrence, [0, 2, 3, 4]);
        assert_eq!(w.column_stride, [0, 3, 5, 5]);
        assert_eq!(w.compact_column, [0, 2, 4, 1, 3]);
        assert_eq!(w.row_offset, [0, 3, 6, 8, 8]);
        assert_eq!(w.weights, [1.0, 2.0, 3.0, 6.0, 7.0, 0.0, 4.0, 5.0]);
        assert_eq!(w.dense(), values);
        // the same entries without sharing, and in CSR
        let u = w.ungrouped();
        u.validate().unwrap();
        assert_eq!(u.dense(), values);
        assert_eq!(u.groups(), 4);
        let csr = Csr::of(&w);
        assert_eq!(csr.row_ptr, [0, 3, 5, 5, 8]);
        assert_eq!(csr.col_idx, [0, 2, 4, 1, 3, 0, 2, 4]);
        // shared pattern stored once: 5 compact columns against CSR's 8
        assert_eq!(w.index_bytes(), 4 * (4 + 5 + 4 + 4 + 5));
        assert_eq!(csr.index_bytes(), 4 * (5 + 8));
        assert_eq!(bitmask_bytes(4, 6), 3);
    }

    #[test]
    fn random_bcr_weights_round_trip_and_share_patterns() {
        // whole-width blocks: the kept rows of a strip share one pattern
        let w = random_bcrc(64, 96, (4, 96), (2, 10), 5);
        assert!(w.groups() <= 64 / 4 + 1);
        let again = Bcrc::from_dense(64, 96, &w.dense(), &dense_keep(&w)).unwrap();
        assert_eq!(again, w);
        let w = random_bcrc(30, 50, (4, 16), (2, 5), 6); // remainder strips both ways
        let again = Bcrc::from_dense(30, 50, &w.dense(), &dense_keep(&w)).unwrap();
        assert_eq!(again, w);
    }

    fn dense_keep(w: &Bcrc) -> Vec<bool> {
        let mut keep = vec![false; w.out * w.k];
        for g in 0..w.groups() {
            for p in w.occurrence[g] as usize..w.occurrence[g + 1] as usize {
                for &c in w.pattern(g) {
                    keep[w.reorder[p] as usize * w.k + c as usize] = true;
                }
            }
        }
        keep
    }

    #[test]
    fn validation_names_what_is_wrong() {
        let (values, keep) = small();
        let good = Bcrc::from_dense(4, 6, &values, &keep).unwrap();
        let mut w = good.clone();
        w.reorder[0] = 3;
        assert!(w.validate().unwrap_err().0.contains("permutation"));
        let mut w = good.clone();
        w.weights.pop();
        assert!(w.validate().unwrap_err().0.contains("row_offset"));
        let mut w = good.clone();
        w.compact_column[1] = 9;
        assert!(w.validate().unwrap_err().0.contains("out of range"));
        let mut w = good.clone();
        w.compact_column.swap(0, 1);
        assert!(w.validate().unwrap_err().0.contains("ascending"));
        let mut w = good.clone();
        w.occurrence[1] = 3;
        assert!(w.validate().unwrap_err().0.contains("weights for the"));
        let mut w = good.clone();
        w.occurrence.pop();
        assert!(w.validate().unwrap_err().0.contains("groups + 1"));
        let mut w = good.clone();
        w.weights[0] = f32::NAN;
        assert!(w.validate().unwrap_err().0.contains("non-finite"));
        let mut w = good;
        w.row_offset.truncate(3);
        assert!(
            w.validate()
                .unwrap_err()
                .0
                .contains("reorder has 4 entries")
        );
        assert!(Bcrc::from_dense(2, 2, &[0.0; 3], &[true; 4]).is_err());
    }
}
