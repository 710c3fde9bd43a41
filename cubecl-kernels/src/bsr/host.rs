//! Host reference of the block-sparse activation path.

use super::keep_count;
use crate::approx::ApproxMultiply;
use crate::approx::host::{decode, product};
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

/// The weight gradient of a linear layer `y = x · W` from its pruned input:
/// `dW[i, o] = Σ_r x[r, i] · grad[r, o]` over the stored blocks (`r` ascending, pruned blocks
/// skipped), every product through `mul`. `grad: [x.rows, out]` → `[x.cols, out]`.
pub fn weight_grad(x: &Bsr, grad: &[f32], out: usize, mul: &ApproxMultiply) -> Vec<f32> {
    assert_eq!(grad.len(), x.rows * out, "gradient length");
    let (b, per_row) = (x.block, blocks_per_row(x.cols, x.block));
    // Stored blocks by block column, rows ascending (the transpose of the BSR index).
    let mut by_col: Vec<Vec<(usize, usize)>> = vec![Vec::new(); per_row];
    for r in 0..x.rows {
        for at in x.crow[r] as usize..x.crow[r + 1] as usize {
            by_col[x.col[at] as usize].push((r, at));
        }
    }
    let table = mul.table();
    let grad: Vec<_> = grad.par_iter().map(|&g| decode(g, mul, false)).collect();
    let mut dw = vec![0f32; x.cols * out];
    // the last chunk is shorter when `b` does not divide `cols`: `chunks_mut(out)` stops there
    dw.par_chunks_mut(b * out)
        .zip(by_col.par_iter())
        .for_each(|(rows_out, stored)| {
            for (i, acc) in rows_out.chunks_mut(out).enumerate() {
                for &(r, at) in stored {
                    let xa = decode(x.values[at * b + i], mul, true);
                    for (a, &g) in acc.iter_mut().zip(&grad[r * out..(r + 1) * out]) {
                        *a += product(xa, g, mul, table);
                    }
                }
            }
        });
    dw
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

    #[test]
    fn a_block_that_does_not_divide_the_row_is_padded() {
        let (samples, rows, d, b) = (2, 3, 10, 4);
        let x = values(samples * rows * d, 5);
        assert_eq!(blocks_per_row(d, b), 3);
        let norms = block_norms(&x[..d], d, b);
        let tail: f32 = x[8..10].iter().map(|v| v * v).sum();
        assert_eq!(norms[2], tail);
        let bsr = prune(&x, [samples, rows, d], b, 0.0);
        assert_eq!(bsr.values.len(), samples * rows * 3 * b);
        assert_eq!(bsr.to_dense(), x);
        let bsr = prune(&x, [samples, rows, d], b, 0.5);
        let kept = bsr.col.len();
        assert_eq!(kept, samples * keep_count(rows * 3, 0.5));
        for (got, want) in bsr.to_dense().chunks(d).zip(x.chunks(d)) {
            for (blk, (g, w)) in got.chunks(b).zip(want.chunks(b)).enumerate() {
                assert!(g == w || g.iter().all(|v| *v == 0.0), "block {blk}");
            }
        }
        let g = values(samples * rows * 3, 9);
        let dw = weight_grad(&bsr, &g, 3, &ApproxMultiply::Plain);
        assert_eq!(dw.len(), d * 3);
    }

    #[test]
    fn weight_gradient_equals_the_dense_product_of_the_masked_input() {
        let (samples, rows, d, b, out) = (2, 4, 8, 2, 5);
        // small integers: every sum exact, so skipping zero blocks must give the same bits
        let x: Vec<f32> = (0..samples * rows * d)
            .map(|i| ((i * 7) % 11) as f32 - 5.0)
            .collect();
        let g: Vec<f32> = (0..samples * rows * out)
            .map(|i| ((i * 5) % 9) as f32 - 4.0)
            .collect();
        let bsr = prune(&x, [samples, rows, d], b, 0.7);
        let masked = bsr.to_dense();
        let got = weight_grad(&bsr, &g, out, &ApproxMultiply::Plain);
        let want: Vec<f32> = (0..d * out)
            .map(|io| {
                let (i, o) = (io / out, io % out);
                (0..samples * rows)
                    .map(|r| masked[r * d + i] * g[r * out + o])
                    .sum()
            })
            .collect();
        assert_eq!(got, want);
    }
}
