//! Host reference of the block-sparse weight-gradient kernel.

use crate::approx::ApproxMultiply;
use crate::approx::host::{decode, product};
use crate::bsr::prune::reference::{Bsr, blocks_per_row};
use rayon::prelude::*;

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
    use crate::bsr::keep_count;
    use crate::bsr::prune::reference::{block_norms, prune};
    use crate::testing::uniform as values;

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
