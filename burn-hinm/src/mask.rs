//! HiNM masks: column-vector pruning per tile of `V` output rows, then 2:4 along each row of
//! the kept columns (the host reference; the search for permutations is in [`crate::gyro`]).
//!
//! A weight's **GEMM view** is `out × K`: `K = d_in` for a Linear (Burn stores its weight as
//! `[d_in, d_out]`, so the view is its transpose) and `K = c_in·kh·kw` in that order for a
//! convolution (`[c_out, c_in, kh, kw]` is already row-major `out × K`).

use crate::error::HinmError;

/// A saliency (importance) score per weight of a GEMM view `out × K`, row-major, in f64.
#[derive(Clone, Debug, PartialEq)]
pub struct Scores {
    rows: usize,
    cols: usize,
    data: Vec<f64>,
}

/// How a weight's saliency is computed from its values. A Fisher/OBS-style score (from
/// gradients or a Hessian estimate) plugs in through [`Scores::new`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Saliency {
    /// `|w|` (the paper's and the reference's default).
    #[default]
    Magnitude,
    /// `w²`.
    Squared,
}

impl Saliency {
    fn of(self, w: f32) -> f64 {
        let w = f64::from(w);
        match self {
            Saliency::Magnitude => w.abs(),
            Saliency::Squared => w * w,
        }
    }
}

impl Scores {
    /// Scores of an `rows × cols` GEMM view, row-major; every score finite and ≥ 0.
    pub fn new(rows: usize, cols: usize, data: Vec<f64>) -> Result<Self, HinmError> {
        if rows * cols != data.len() || rows == 0 || cols == 0 {
            return Err(HinmError::Shape(format!(
                "{} scores for a {rows} × {cols} view",
                data.len()
            )));
        }
        if let Some(i) = data.iter().position(|s| !(s.is_finite() && *s >= 0.0)) {
            return Err(HinmError::NonFinite(format!(
                "score {} at row {}, column {}",
                data[i],
                i / cols,
                i % cols
            )));
        }
        Ok(Self { rows, cols, data })
    }

    /// The GEMM view `d_out × d_in` of a Linear weight stored as Burn does, `[d_in, d_out]`.
    pub fn linear(
        weight: &[f32],
        d_in: usize,
        d_out: usize,
        s: Saliency,
    ) -> Result<Self, HinmError> {
        check_weight(weight, d_in * d_out)?;
        let data = (0..d_out)
            .flat_map(|o| (0..d_in).map(move |i| s.of(weight[i * d_out + o])))
            .collect();
        Self::new(d_out, d_in, data)
    }

    /// The GEMM view `c_out × (c_in·kh·kw)` of a convolution weight `[c_out, c_in, kh, kw]`
    /// (`dims`: its shape, any number of kernel axes).
    pub fn conv(weight: &[f32], dims: &[usize], s: Saliency) -> Result<Self, HinmError> {
        let out = *dims.first().unwrap_or(&0);
        let k: usize = dims.iter().skip(1).product();
        check_weight(weight, out * k)?;
        Self::new(out, k, weight.iter().map(|&w| s.of(w)).collect())
    }

    /// Output rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns `K`.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Row `r`.
    pub fn row(&self, r: usize) -> &[f64] {
        &self.data[r * self.cols..(r + 1) * self.cols]
    }

    /// The total saliency.
    pub fn total(&self) -> f64 {
        self.data.iter().sum()
    }
}

fn check_weight(weight: &[f32], len: usize) -> Result<(), HinmError> {
    if weight.len() != len {
        return Err(HinmError::Shape(format!(
            "{} values for a weight of {len}",
            weight.len()
        )));
    }
    match weight.iter().position(|w| !w.is_finite()) {
        Some(i) => Err(HinmError::NonFinite(format!("weight {} at {i}", weight[i]))),
        None => Ok(()),
    }
}

/// Columns kept per tile: `floor(K·(1 − vs))` rounded down to a multiple of 4 (the 2:4 groups).
/// Zero is an error (the reference crashes there, e.g. `K = 8` at 75 %).
pub fn nnz_vec(k: usize, vector_sparsity: f64) -> Result<usize, HinmError> {
    if !(0.0..1.0).contains(&vector_sparsity) {
        return Err(HinmError::Level(format!(
            "vector sparsity {vector_sparsity} is not in [0, 1)"
        )));
    }
    let kept = (k as f64 * (1.0 - vector_sparsity)).floor() as usize / 4 * 4;
    if kept == 0 {
        return Err(HinmError::Level(format!(
            "{} % vector sparsity keeps no group of 4 of K = {k} columns",
            vector_sparsity * 100.0
        )));
    }
    Ok(kept)
}

/// The tile height `v` for `out` rows: ≥ 4 and dividing `out`.
pub fn check_tile(out: usize, v: usize) -> Result<usize, HinmError> {
    if v < 4 || !out.is_multiple_of(v) {
        return Err(HinmError::Tile(format!(
            "V = {v} must be at least 4 and divide the {out} output rows"
        )));
    }
    Ok(out / v)
}

/// The indices of the `n` largest of `values`, ties to the lower index (a stable top-k, never a
/// threshold), in ascending index order.
pub fn top_k(values: &[f64], n: usize) -> Vec<u32> {
    let mut idx: Vec<u32> = (0..values.len() as u32).collect();
    idx.sort_by(|&a, &b| {
        values[b as usize]
            .total_cmp(&values[a as usize])
            .then(a.cmp(&b))
    });
    idx.truncate(n);
    idx.sort_unstable();
    idx
}

/// Sum of the `n` smallest of `values` (what a tile loses when it keeps the others).
pub fn smallest_sum(values: &mut [f64], n: usize) -> f64 {
    if n == 0 {
        return 0.0;
    }
    if n < values.len() {
        values.select_nth_unstable_by(n - 1, f64::total_cmp);
    }
    values[..n].iter().sum()
}

/// A HiNM mask of an `out × K` GEMM view, with its permutations.
#[derive(Clone, Debug, PartialEq)]
pub struct HinmMask {
    /// Tile height `V`.
    pub v: usize,
    /// Columns `K` of the view.
    pub k: usize,
    /// Row `r` of the packed layout is row `out_perm[r]` of the view (identity: no output
    /// permutation).
    pub out_perm: Vec<u32>,
    /// Per tile, its `nnz_vec` kept columns in group order (groups of 4 consecutive entries):
    /// the input permutation is this order.
    pub columns: Vec<Vec<u32>>,
    /// Per packed row, per group of 4: the two kept positions as a 4-bit pattern.
    pub keep: Vec<Vec<u8>>,
}

impl HinmMask {
    /// Whether the view's entry `(row, col)` is kept.
    pub fn is_kept(&self, row: usize, col: usize) -> bool {
        let Some(r) = self.out_perm.iter().position(|&o| o as usize == row) else {
            return false;
        };
        let cols = &self.columns[r / self.v];
        cols.iter()
            .position(|&c| c as usize == col)
            .is_some_and(|p| self.keep[r][p / 4] >> (p % 4) & 1 == 1)
    }

    /// The dense 0/1 mask of the view, row-major.
    pub fn dense(&self) -> Vec<bool> {
        let out = self.out_perm.len();
        let mut m = vec![false; out * self.k];
        for (r, &row) in self.out_perm.iter().enumerate() {
            for (p, &c) in self.columns[r / self.v].iter().enumerate() {
                if self.keep[r][p / 4] >> (p % 4) & 1 == 1 {
                    m[row as usize * self.k + c as usize] = true;
                }
            }
        }
        m
    }
}

/// Saliency kept at each stage: after the column-vector pruning, and after 2:4.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Retained {
    /// Saliency of the kept columns of every tile.
    pub vector: f64,
    /// Saliency of the kept entries.
    pub nm: f64,
}

/// Keeps, per tile of `v` rows of `scores` taken in `out_perm` order, the `nnz_vec` columns of
/// largest summed saliency (stable top-k), in ascending column order.
pub fn vector_columns(scores: &Scores, out_perm: &[u32], v: usize, nnz: usize) -> Vec<Vec<u32>> {
    out_perm
        .chunks(v)
        .map(|tile| top_k(&column_sums(scores, tile), nnz))
        .collect()
}

/// Per column, the saliency summed over `rows`.
pub fn column_sums(scores: &Scores, rows: &[u32]) -> Vec<f64> {
    let mut sums = vec![0.0; scores.cols];
    for &r in rows {
        for (s, x) in sums.iter_mut().zip(scores.row(r as usize)) {
            *s += x;
        }
    }
    sums
}

/// The 2:4 pattern of each group of 4 of `values` (the two largest, ties to the lower position).
pub fn two_of_four(values: &[f64]) -> Vec<u8> {
    values
        .chunks(4)
        .map(|g| top_k(g, 2).iter().fold(0u8, |m, &p| m | 1 << p))
        .collect()
}

/// The mask of `scores` for rows in `out_perm` order and per-tile kept columns in `columns`
/// order (group order), with the saliency it keeps at each stage.
pub fn mask_with(
    scores: &Scores,
    v: usize,
    out_perm: Vec<u32>,
    columns: Vec<Vec<u32>>,
) -> (HinmMask, Retained) {
    let mut vector = 0.0;
    let mut nm = 0.0;
    let mut keep = Vec::with_capacity(out_perm.len());
    for (r, &row) in out_perm.iter().enumerate() {
        let s = scores.row(row as usize);
        let vals: Vec<f64> = columns[r / v].iter().map(|&c| s[c as usize]).collect();
        vector += vals.iter().sum::<f64>();
        let pattern = two_of_four(&vals);
        for (g, &p) in pattern.iter().enumerate() {
            nm += (0..4)
                .filter(|b| p >> b & 1 == 1)
                .map(|b| vals[g * 4 + b])
                .sum::<f64>();
        }
        keep.push(pattern);
    }
    let mask = HinmMask {
        v,
        k: scores.cols,
        out_perm,
        columns,
        keep,
    };
    (mask, Retained { vector, nm })
}

/// The HiNM mask of `scores` without permutations: tiles of `v` consecutive rows, kept columns
/// in ascending order.
pub fn mask(
    scores: &Scores,
    v: usize,
    vector_sparsity: f64,
) -> Result<(HinmMask, Retained), HinmError> {
    check_tile(scores.rows, v)?;
    let nnz = nnz_vec(scores.cols, vector_sparsity)?;
    let perm: Vec<u32> = (0..scores.rows as u32).collect();
    let columns = vector_columns(scores, &perm, v, nnz);
    Ok(mask_with(scores, v, perm, columns))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn random_scores(rows: usize, cols: usize, seed: u64) -> Scores {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let data = (0..rows * cols)
            .map(|_| rng.random::<f64>().powi(2))
            .collect();
        Scores::new(rows, cols, data).unwrap()
    }

    #[test]
    fn both_constraints_hold_and_counts_are_exact() {
        for (vs, total) in [(0.5, 0.75), (0.75, 0.875), (0.875, 0.9375)] {
            let s = random_scores(128, 256, 7);
            let (m, r) = mask(&s, 64, vs).unwrap();
            let dense = m.dense();
            let kept = dense.iter().filter(|&&b| b).count();
            assert_eq!(kept as f64, 128.0 * 256.0 * (1.0 - total), "vs = {vs}");
            for tile in 0..2 {
                // every row of a tile keeps entries only in the tile's columns, 2 of every 4
                let cols = &m.columns[tile];
                assert_eq!(cols.len(), (256.0 * (1.0 - vs)) as usize);
                for row in tile * 64..(tile + 1) * 64 {
                    let in_row: Vec<usize> = (0..256).filter(|&c| dense[row * 256 + c]).collect();
                    assert_eq!(in_row.len(), cols.len() / 2);
                    assert!(in_row.iter().all(|c| cols.contains(&(*c as u32))));
                    for g in cols.chunks(4) {
                        let n = g.iter().filter(|&&c| dense[row * 256 + c as usize]).count();
                        assert_eq!(n, 2);
                    }
                }
            }
            assert!(r.nm <= r.vector && r.vector <= s.total());
        }
    }

    #[test]
    fn ties_go_to_the_lower_index_never_through_a_threshold() {
        assert_eq!(top_k(&[1.0, 2.0, 2.0, 2.0, 0.5], 2), vec![1, 2]);
        assert_eq!(two_of_four(&[3.0, 3.0, 3.0, 3.0]), vec![0b0011]);
        // a threshold test (>= the 2nd largest) would keep three here
        let s = Scores::new(4, 8, vec![1.0; 32]).unwrap();
        let (m, _) = mask(&s, 4, 0.5).unwrap();
        assert_eq!(m.columns[0], vec![0, 1, 2, 3]);
        assert_eq!(m.dense().iter().filter(|&&b| b).count(), 4 * 2);
    }

    #[test]
    fn bad_levels_tiles_and_values_are_errors() {
        assert!(matches!(nnz_vec(8, 0.75), Err(HinmError::Level(_))));
        assert_eq!(nnz_vec(8, 0.5).unwrap(), 4);
        assert_eq!(nnz_vec(100, 0.75).unwrap(), 24);
        assert!(nnz_vec(64, 1.0).is_err());
        assert!(matches!(check_tile(96, 64), Err(HinmError::Tile(_))));
        assert!(matches!(check_tile(64, 0), Err(HinmError::Tile(_))));
        assert!(matches!(check_tile(8, 2), Err(HinmError::Tile(_))));
        assert_eq!(check_tile(128, 64).unwrap(), 2);
        assert!(matches!(
            Scores::linear(&[1.0, f32::NAN], 1, 2, Saliency::Magnitude),
            Err(HinmError::NonFinite(_))
        ));
        assert!(Scores::new(2, 2, vec![1.0, -1.0, 0.0, 0.0]).is_err());
    }

    #[test]
    fn gemm_views_follow_burn_layouts() {
        // Linear [d_in = 2, d_out = 3]: view row o is column o of the stored weight
        let w = [1.0, -2.0, 3.0, -4.0, 5.0, -6.0];
        let s = Scores::linear(&w, 2, 3, Saliency::Magnitude).unwrap();
        assert_eq!((s.rows(), s.cols()), (3, 2));
        assert_eq!(s.row(0), &[1.0, 4.0]);
        assert_eq!(s.row(2), &[3.0, 6.0]);
        let sq = Scores::linear(&w, 2, 3, Saliency::Squared).unwrap();
        assert_eq!(sq.row(1), &[4.0, 25.0]);
        // conv [c_out = 2, c_in = 1, 1, 3]: rows are output channels
        let c = Scores::conv(&w, &[2, 1, 1, 3], Saliency::Magnitude).unwrap();
        assert_eq!(c.row(1), &[4.0, 5.0, 6.0]);
    }
}
