//! Host reference of the pruning kernels: block norms, per-sample top-k, the BSR they give.

use crate::bsr::keep_count;
use rayon::prelude::*;

/// A `[samples · rows, d]` matrix in block-sparse-row form with `1 × block` blocks. When `block`
/// does not divide `d`, the last block of a row is shorter and stored zero-padded to `block`.
#[derive(Clone, Debug, PartialEq)]
pub struct Bsr {
    /// Matrix rows (`samples · rows`).
    pub rows: usize,
    /// Matrix columns (`d`).
    pub cols: usize,
    /// Block width `b`.
    pub block: usize,
    /// `crow[r]..crow[r + 1]` index the blocks of row `r` (length `rows + 1`).
    pub crow: Vec<u32>,
    /// Block column of each stored block, ascending within a row.
    pub col: Vec<u32>,
    /// `b` values per stored block.
    pub values: Vec<f32>,
}

impl Bsr {
    /// The masked dense matrix (zeros where blocks were pruned).
    pub fn to_dense(&self) -> Vec<f32> {
        let mut out = vec![0f32; self.rows * self.cols];
        for r in 0..self.rows {
            for at in self.crow[r] as usize..self.crow[r + 1] as usize {
                let c = self.col[at] as usize * self.block;
                let w = self.block.min(self.cols - c);
                out[r * self.cols + c..r * self.cols + c + w]
                    .copy_from_slice(&self.values[at * self.block..at * self.block + w]);
            }
        }
        out
    }
}

/// Blocks per row of length `d` at width `b` (the last one shorter when `b` does not divide `d`).
pub fn blocks_per_row(d: usize, b: usize) -> usize {
    d.div_ceil(b)
}

/// Squared L2 norm of every `1 × b` block of `x: [rows, d]` (row-major),
/// `rows · ⌈d / b⌉` values, summed in element order.
pub fn block_norms(x: &[f32], d: usize, b: usize) -> Vec<f32> {
    assert!(
        b > 0 && d > 0 && x.len().is_multiple_of(d),
        "blocks of {b} in rows of {d}"
    );
    x.par_chunks(d)
        .flat_map_iter(|row| row.chunks(b).map(|blk| blk.iter().map(|v| v * v).sum()))
        .collect()
}

/// The kept blocks of one sample: indices of the `keep` largest norms, ascending. A NaN norm
/// ranks as +∞; ties go to the lower index.
pub fn top_k(norms: &[f32], keep: usize) -> Vec<usize> {
    let rank = |v: f32| if v.is_nan() { f32::INFINITY } else { v };
    let mut order: Vec<usize> = (0..norms.len()).collect();
    // norm descending, then index ascending (a stable sort keeps the index order of ties)
    order.sort_by(|&i, &j| rank(norms[j]).total_cmp(&rank(norms[i])));
    let mut kept = order[..keep].to_vec();
    kept.sort_unstable();
    kept
}

/// The kept blocks of one sample `[rows, d]`, as row-major block indices `r · nb + c`,
/// ascending. Ties are ranked by the block-column-major index `c · rows + r` (the order the
/// kernels and the tensor-op path number blocks in).
pub fn kept_blocks(sample: &[f32], rows: usize, d: usize, b: usize, keep: usize) -> Vec<usize> {
    let nb = blocks_per_row(d, b);
    let norms = block_norms(sample, d, b);
    let by_column: Vec<f32> = (0..nb * rows)
        .map(|n| norms[(n % rows) * nb + n / rows])
        .collect();
    let mut kept: Vec<usize> = top_k(&by_column, keep)
        .into_iter()
        .map(|n| (n % rows) * nb + n / rows)
        .collect();
    kept.sort_unstable();
    kept
}

/// Prunes `x: [samples, rows, d]` per sample at sparsity `s` with block width `b` and stores it
/// in BSR.
pub fn prune(x: &[f32], [samples, rows, d]: [usize; 3], b: usize, s: f64) -> Bsr {
    assert_eq!(x.len(), samples * rows * d, "activation length");
    let per_row = blocks_per_row(d, b);
    let keep = keep_count(rows * per_row, s);
    let kept: Vec<Vec<usize>> = x
        .par_chunks(rows * d)
        .map(|sample| kept_blocks(sample, rows, d, b, keep))
        .collect();
    let mut crow = Vec::with_capacity(samples * rows + 1);
    let mut col = Vec::with_capacity(samples * keep);
    let mut values = Vec::with_capacity(samples * keep * b);
    crow.push(0u32);
    for (n, blocks) in kept.iter().enumerate() {
        let mut it = blocks.iter().peekable();
        for r in 0..rows {
            while let Some(&&blk) = it.peek() {
                if blk / per_row != r {
                    break;
                }
                let c = blk % per_row;
                col.push(c as u32);
                let at = (n * rows + r) * d + c * b;
                let w = b.min(d - c * b);
                values.extend_from_slice(&x[at..at + w]);
                values.resize(values.len() + b - w, 0.0);
                it.next();
            }
            crow.push(col.len() as u32);
        }
    }
    Bsr {
        rows: samples * rows,
        cols: d,
        block: b,
        crow,
        col,
        values,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::uniform as values;

    #[test]
    fn keeps_exactly_k_largest_blocks_per_sample() {
        let (samples, rows, d, b) = (3, 5, 8, 2);
        let x = values(samples * rows * d, 7);
        let bsr = prune(&x, [samples, rows, d], b, 0.6);
        let keep = keep_count(rows * d / b, 0.6);
        assert_eq!(keep, 8);
        for n in 0..samples {
            let stored = bsr.crow[(n + 1) * rows] - bsr.crow[n * rows];
            assert_eq!(stored as usize, keep);
            // every kept norm ≥ every pruned norm
            let norms = block_norms(&x[n * rows * d..(n + 1) * rows * d], d, b);
            let kept = kept_blocks(&x[n * rows * d..(n + 1) * rows * d], rows, d, b, keep);
            let min_kept = kept.iter().map(|&i| norms[i]).fold(f32::INFINITY, f32::min);
            let max_pruned = (0..norms.len())
                .filter(|i| !kept.contains(i))
                .map(|i| norms[i])
                .fold(0.0, f32::max);
            assert!(min_kept >= max_pruned);
        }
    }

    #[test]
    fn ties_go_to_the_lower_index_and_nan_is_kept() {
        assert_eq!(top_k(&[1.0, 2.0, 2.0, 2.0], 2), vec![1, 2]);
        assert_eq!(top_k(&[5.0, f32::NAN, f32::INFINITY, 1.0], 2), vec![1, 2]);
        // NaN ranks as +∞: among them the lower index wins
        assert_eq!(top_k(&[f32::INFINITY, 5.0, f32::NAN], 1), vec![0]);
        assert_eq!(top_k(&[1.0, f32::NAN, f32::INFINITY], 1), vec![1]);
        assert_eq!(top_k(&[0.0; 4], 0), Vec::<usize>::new());
    }

    #[test]
    fn bsr_round_trips_to_the_masked_input() {
        let (samples, rows, d, b) = (2, 3, 12, 4);
        let x = values(samples * rows * d, 3);
        let bsr = prune(&x, [samples, rows, d], b, 0.5);
        let dense = bsr.to_dense();
        let mut kept = 0;
        for (blk, (got, want)) in dense.chunks(b).zip(x.chunks(b)).enumerate() {
            if got.iter().any(|v| *v != 0.0) {
                assert_eq!(got, want, "block {blk}");
                kept += 1;
            }
        }
        assert_eq!(kept, samples * keep_count(rows * d / b, 0.5));
        // s = 0: everything stored
        assert_eq!(prune(&x, [samples, rows, d], b, 0.0).to_dense(), x);
    }
}
