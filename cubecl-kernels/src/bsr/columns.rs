//! SparseAct's host path, for backends without CubeCL kernels (ndarray): the pruned activation
//! as host arrays in the kernels' column-oriented layout ([`prune`](super::prune)'s module docs),
//! and the block-sparse weight gradient as one dense product per block column.
//!
//! **Pruning** ([`Columns::prune`]) runs per sample in parallel: the block norms in
//! block-column-major order (squares summed in element order, as the kernels and the host
//! reference sum them), the `keep` largest by a selection (not a sort) on the reference's order
//! (norm descending, NaN as +∞, ties to the lower block index), then one copy of every kept
//! block. It keeps the blocks [`super::host::prune`] keeps.
//!
//! **Weight gradient** ([`Columns::weight_grad`]): `dW[c·b .. c·b + b, :]` needs only block column
//! `c`'s kept blocks, which lie in one run per sample. Per block column (in parallel), the run's
//! blocks are copied into a contiguous panel `Pᵀ: [n_c, b]` and the gradient rows they select
//! into `G_c: [n_c, out]`, and `dW_c = P · G_c` is one dense product, so the cost falls with the
//! density. Chunks of [`CHUNK`] rows bound the panels to a few hundred KiB.
//! - The exact multiply takes `ndarray`'s `general_mat_mul` (matrixmultiply's packed FMA
//!   kernels, burn-ndarray's own matmul). Its sums are not the reference's (FMA, sums of `kc`
//!   products added to the output): the results agree with [`super::host::weight_grad`] within
//!   `n_c · 2⁻²³ · Σ|x·g|` per output (the bound of any order of `n_c` additions). With nothing
//!   pruned the operands and the order are burn-ndarray's dense weight gradient's: the same
//!   bits.
//! - Another multiply takes ApproxMul's host GEMM in `k` order ([`gemm_in_order`], the table
//!   expansion where it applies): the same bits as the reference.

use super::prune::Blocks;
use crate::approx::ApproxMultiply;
use crate::approx::gemm::gemm_in_order;
use ndarray::{ArrayView2, ArrayViewMut2, s};
use rayon::prelude::*;

/// Rows of the panels of one dense product of the exact multiply (a multiple of
/// matrixmultiply's f32 `kc` of 256, so every product sums its rows in chunks that start where
/// the dense weight gradient's do).
pub const CHUNK: usize = 1024;

/// A pruned activation `[samples, rows, d]` on the host, in the kernels' layout.
#[derive(Clone, Debug, PartialEq)]
pub struct Columns {
    /// `[samples, keep, b]`: the kept blocks, block-column major (`c` then `r` ascending),
    /// zero-padded where the last block column is shorter than `b`.
    pub values: Vec<f32>,
    /// `[samples, keep]`: the row `r` of every kept block.
    pub col: Vec<u32>,
    /// `[samples, ⌈d/b⌉ + 1]`: `crow[s, c] .. crow[s, c + 1]` are block column `c`'s kept blocks.
    pub crow: Vec<u32>,
    /// `[samples, rows, d]` of the activation.
    pub dims: [usize; 3],
    /// Block width `b`.
    pub block: usize,
}

impl Columns {
    /// Prunes `x: [samples, rows, d]` (row-major) to the `keep` blocks of width `b` of every
    /// sample with the largest L2 norms, each norm first multiplied by `scale` (`[samples, N]`,
    /// block-column major: the stochastic variant's jitter), when given.
    ///
    /// # Panics
    /// If `x` or `scale` have the wrong length, `b` is 0 or `keep` exceeds the blocks of a
    /// sample.
    pub fn prune(
        x: &[f32],
        dims: [usize; 3],
        b: usize,
        keep: usize,
        scale: Option<&[f32]>,
    ) -> Self {
        let [samples, rows, d] = dims;
        assert_eq!(x.len(), samples * rows * d, "activation length");
        assert!(b > 0, "block width 0");
        let g = Blocks { rows, d, b };
        let (nb, n) = (g.columns(), g.per_sample());
        assert!(keep <= n, "keep {keep} of {n} blocks");
        if let Some(scale) = scale {
            assert_eq!(scale.len(), samples * n, "norm scales length");
        }
        let mut values = vec![0f32; samples * keep * b];
        let mut col = vec![0u32; samples * keep];
        let mut crow = vec![0u32; samples * (nb + 1)];
        if samples * keep > 0 {
            values
                .par_chunks_mut(keep * b)
                .zip(col.par_chunks_mut(keep))
                .zip(crow.par_chunks_mut(nb + 1))
                .enumerate()
                .for_each(|(s, ((values, col), crow))| {
                    let x = &x[s * rows * d..(s + 1) * rows * d];
                    let kept = select(x, g, keep, scale.map(|v| &v[s * n..(s + 1) * n]));
                    let mut at = 0;
                    for c in 0..nb {
                        crow[c] = at as u32;
                        let w = b.min(d - c * b);
                        while at < keep && kept[at] / rows == c {
                            let r = kept[at] % rows;
                            col[at] = r as u32;
                            values[at * b..at * b + w]
                                .copy_from_slice(&x[r * d + c * b..r * d + c * b + w]);
                            at += 1;
                        }
                    }
                    crow[nb] = at as u32;
                });
        }
        Self {
            values,
            col,
            crow,
            dims,
            block: b,
        }
    }

    /// The masked activation `[samples, rows, d]` (zeros where blocks were pruned).
    pub fn to_dense(&self) -> Vec<f32> {
        let [samples, rows, d] = self.dims;
        let (b, keep) = (self.block, self.keep());
        let nb = d.div_ceil(b);
        let mut out = vec![0f32; samples * rows * d];
        if keep == 0 {
            return out;
        }
        out.par_chunks_mut(rows * d)
            .enumerate()
            .for_each(|(s, out)| {
                for c in 0..nb {
                    let w = b.min(d - c * b);
                    let (start, end) =
                        (self.crow[s * (nb + 1) + c], self.crow[s * (nb + 1) + c + 1]);
                    for at in s * keep + start as usize..s * keep + end as usize {
                        let r = self.col[at] as usize;
                        out[r * d + c * b..r * d + c * b + w]
                            .copy_from_slice(&self.values[at * b..at * b + w]);
                    }
                }
            });
        out
    }

    /// Blocks kept per sample.
    pub fn keep(&self) -> usize {
        self.col.len() / self.dims[0].max(1)
    }

    /// Bytes held: the values (f32) and both index arrays (32-bit).
    pub fn bytes(&self) -> u64 {
        ((self.values.len() + self.col.len() + self.crow.len()) * 4) as u64
    }

    /// `dW = Xᵀ · G: [d, out]` of a linear layer from its pruned input, `grad: [samples · rows,
    /// out]`, every product through `mul` (the [module docs](self) give the order and the
    /// tolerance).
    ///
    /// # Panics
    /// If `grad` has the wrong length.
    pub fn weight_grad(&self, grad: &[f32], out: usize, mul: &ApproxMultiply) -> Vec<f32> {
        let [samples, rows, d] = self.dims;
        assert_eq!(grad.len(), samples * rows * out, "gradient length");
        let b = self.block;
        let (nb, keep) = (d.div_ceil(b), self.keep());
        let mut dw = vec![0f32; d * out];
        if out == 0 {
            return dw;
        }
        // the last chunk is shorter when `b` does not divide `d`
        dw.par_chunks_mut(b * out).enumerate().for_each(|(c, dw)| {
            // the kept blocks of column `c`, sample by sample: (first stored block, sample)
            let mut runs = (0..samples).flat_map(|s| {
                let (start, end) = (self.crow[s * (nb + 1) + c], self.crow[s * (nb + 1) + c + 1]);
                (s * keep + start as usize..s * keep + end as usize).map(move |at| (at, s))
            });
            let w = dw.len() / out;
            let gather =
                |blocks: &[(usize, usize)], panel: &mut Vec<f32>, rows_g: &mut Vec<f32>| {
                    panel.clear();
                    rows_g.clear();
                    for &(at, s) in blocks {
                        panel.extend_from_slice(&self.values[at * b..(at + 1) * b]);
                        let r = s * rows + self.col[at] as usize;
                        rows_g.extend_from_slice(&grad[r * out..(r + 1) * out]);
                    }
                };
            let (mut panel, mut rows_g) = (Vec::new(), Vec::new());
            match mul {
                ApproxMultiply::Plain => {
                    let mut dw = ArrayViewMut2::from_shape((w, out), dw).expect("dW chunk");
                    let mut blocks = Vec::with_capacity(CHUNK);
                    let mut first = true;
                    loop {
                        blocks.clear();
                        blocks.extend(runs.by_ref().take(CHUNK));
                        if blocks.is_empty() {
                            break;
                        }
                        gather(&blocks, &mut panel, &mut rows_g);
                        let n = blocks.len();
                        let p = ArrayView2::from_shape((n, b), &panel).expect("panel");
                        let g = ArrayView2::from_shape((n, out), &rows_g).expect("rows");
                        let beta = if first { 0.0 } else { 1.0 };
                        ndarray::linalg::general_mat_mul(
                            1.0,
                            &p.slice(s![.., ..w]).t(),
                            &g,
                            beta,
                            &mut dw,
                        );
                        first = false;
                    }
                }
                mul => {
                    let blocks: Vec<_> = runs.collect();
                    if blocks.is_empty() {
                        return;
                    }
                    gather(&blocks, &mut panel, &mut rows_g);
                    let n = blocks.len();
                    // the lhs row-major: `P: [w, n]`, the transpose of the panel
                    let lhs: Vec<f32> = (0..w)
                        .flat_map(|i| panel.iter().skip(i).step_by(b).copied())
                        .collect();
                    dw.copy_from_slice(&gemm_in_order(&lhs, &rows_g, [1, w, n, out], mul));
                }
            }
        });
        dw
    }
}

/// The `keep` largest blocks of one sample `x: [rows, d]`, as block-column-major indices
/// `c · rows + r`, ascending.
fn select(x: &[f32], g: Blocks, keep: usize, scale: Option<&[f32]>) -> Vec<usize> {
    let Blocks { rows, d, b } = g;
    let n = g.per_sample();
    let rank = |i: usize| {
        let (c, r) = (i / rows, i % rows);
        let block = &x[r * d + c * b..r * d + (c * b + b).min(d)];
        let norm: f32 = block.iter().map(|v| v * v).sum();
        let norm = scale.map_or(norm, |s| norm * s[i]);
        if norm.is_nan() { f32::INFINITY } else { norm }
    };
    let norms: Vec<f32> = (0..n).map(rank).collect();
    let mut kept: Vec<usize> = (0..n).collect();
    if keep < n && keep > 0 {
        // norm descending, then index ascending: a total order, so the selection is unique
        kept.select_nth_unstable_by(keep - 1, |&i, &j| {
            norms[j].total_cmp(&norms[i]).then(i.cmp(&j))
        });
    }
    kept.truncate(keep);
    kept.sort_unstable();
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bsr::host;
    use crate::bsr::keep_count;
    use crate::bsr::prune::columns;
    use crate::testing::uniform;

    const SHAPES: [([usize; 3], usize); 5] = [
        ([3, 5, 8], 2),
        ([2, 7, 12], 4),
        ([2, 3, 10], 4),
        ([4, 6, 16], 16),
        ([2, 40, 33], 8),
    ];

    #[test]
    fn keeps_the_blocks_of_the_host_reference_in_the_kernels_layout() {
        for (dims, b) in SHAPES {
            for s in [0.0, 0.3, 0.5, 0.8] {
                let [samples, rows, d] = dims;
                let mut x = uniform(samples * rows * d, (d * 7 + b) as u64);
                // ties (equal blocks) and a NaN, ranked as the reference ranks them
                x.copy_within(0..b.min(d), d);
                x[2 * d + 1] = f32::NAN;
                let keep = keep_count(rows * d.div_ceil(b), s);
                let got = Columns::prune(&x, dims, b, keep, None);
                let (values, col, crow) = columns(&host::prune(&x, dims, b, s), samples);
                let same =
                    |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(p, q)| p.to_bits() == q.to_bits());
                assert!(
                    same(&got.values, &values) && got.values.len() == values.len(),
                    "{dims:?} b={b} s={s}"
                );
                assert_eq!((&got.col, &got.crow), (&col, &crow), "{dims:?} b={b} s={s}");
                assert_eq!(got.keep(), keep);
                let (dense, want) = (got.to_dense(), host::prune(&x, dims, b, s).to_dense());
                assert!(
                    same(&dense, &want) && dense.len() == want.len(),
                    "{dims:?} b={b} s={s}"
                );
            }
        }
    }

    #[test]
    fn scaled_norms_choose_other_blocks() {
        let dims = [2, 6, 8];
        let x = uniform(2 * 6 * 8, 5);
        let n = 6 * 4;
        let plain = Columns::prune(&x, dims, 2, 10, None);
        // a scale that reverses the order of the norms' ranks: the smallest blocks win
        let scale: Vec<f32> = (0..2 * n)
            .map(|i| {
                let (s, j) = (i / n, i % n);
                let (c, r) = (j / 6, j % 6);
                let v: f32 = x[s * 48 + r * 8 + c * 2..][..2].iter().map(|v| v * v).sum();
                1.0 / (v * v + 1e-6)
            })
            .collect();
        let scaled = Columns::prune(&x, dims, 2, 10, Some(&scale));
        assert_eq!(scaled.keep(), 10);
        assert_ne!(plain.col, scaled.col);
        let ones = vec![1.0; 2 * n];
        assert_eq!(Columns::prune(&x, dims, 2, 10, Some(&ones)), plain);
    }

    /// The exact multiply within the stated bound of the reference; every other multiply the
    /// reference's bits (a LUT at m = 5 and 7 takes the expansion, mbm23 the decoded path).
    #[test]
    fn the_weight_gradient_is_the_references() {
        let muls = [
            ApproxMultiply::Plain,
            crate::approx::host::mitchell_table(5),
            crate::approx::host::mitchell_table(7),
            ApproxMultiply::Mbm,
        ];
        for (dims, b) in SHAPES.into_iter().chain([([3, 700, 40], 16)]) {
            let [samples, rows, d] = dims;
            let x = uniform(samples * rows * d, 3);
            for out in [1, 5, 19] {
                let grad = uniform(samples * rows * out, 4);
                for s in [0.0, 0.5, 0.9] {
                    let pruned =
                        Columns::prune(&x, dims, b, keep_count(rows * d.div_ceil(b), s), None);
                    let bsr = host::prune(&x, dims, b, s);
                    let masked = bsr.to_dense();
                    for mul in &muls {
                        let got = pruned.weight_grad(&grad, out, mul);
                        let want = host::weight_grad(&bsr, &grad, out, mul);
                        if *mul != ApproxMultiply::Plain {
                            assert!(
                                got.iter()
                                    .zip(&want)
                                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                                "{dims:?} b={b} s={s} out={out} {mul:?}"
                            );
                            continue;
                        }
                        for (io, (a, w)) in got.iter().zip(&want).enumerate() {
                            let (i, o) = (io / out, io % out);
                            let abs: f32 = (0..samples * rows)
                                .map(|r| (masked[r * d + i] * grad[r * out + o]).abs())
                                .sum();
                            let n = (samples * rows) as f32;
                            assert!(
                                (a - w).abs() <= n * f32::EPSILON * abs,
                                "{dims:?} b={b} s={s} out={out}: dW[{i}, {o}] {a} vs {w}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// Nothing pruned: the exact multiply gives the bits of the dense `Xᵀ · G` as burn-ndarray
    /// computes it (`general_mat_mul` of the transposed view), over several chunks of rows.
    #[test]
    fn nothing_pruned_is_the_dense_products_bits() {
        for (dims, b, out) in [([3, 700, 40], 16, 19), ([2, 600, 24], 8, 64)] {
            let [samples, rows, d] = dims;
            let x = uniform(samples * rows * d, 8);
            let grad = uniform(samples * rows * out, 9);
            let pruned = Columns::prune(&x, dims, b, rows * d.div_ceil(b), None);
            let got = pruned.weight_grad(&grad, out, &ApproxMultiply::Plain);
            let xm = ArrayView2::from_shape((samples * rows, d), &x).unwrap();
            let gm = ArrayView2::from_shape((samples * rows, out), &grad).unwrap();
            let mut want = ndarray::Array2::<f32>::zeros((d, out));
            ndarray::linalg::general_mat_mul(1.0, &xm.t(), &gm, 0.0, &mut want);
            assert!(
                got.iter()
                    .zip(want.iter())
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{dims:?}"
            );
        }
    }

    #[test]
    fn nothing_kept_gives_zeros_and_empty_shapes_pass() {
        let dims = [2, 3, 8];
        let x = uniform(48, 1);
        let none = Columns::prune(&x, dims, 4, 0, None);
        assert_eq!(none.bytes(), (2 * 3 * 4) as u64);
        assert_eq!(
            none.weight_grad(&uniform(6 * 3, 2), 3, &ApproxMultiply::Plain),
            vec![0.0; 24]
        );
        let empty = Columns::prune(&[], [0, 3, 8], 4, 2, None);
        assert!(
            empty
                .weight_grad(&[], 3, &ApproxMultiply::Plain)
                .iter()
                .all(|v| *v == 0.0)
        );
    }
}
