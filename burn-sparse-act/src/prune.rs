//! Per-sample top-k block pruning of an activation and its block-sparse storage, written with
//! Burn tensor ops so that it runs on every backend (the generic path).
//!
//! The stored form is the BSR of each sample's **transposed** activation `Xᵀ: [d, rows]` with
//! `b × 1` blocks: block row `c` is the embedding slice `c·b .. (c+1)·b`, and its stored blocks are
//! the rows `r` whose block `(r, c)` was kept, ascending. The arrays are the paper's (`values`,
//! `crow`, `col`) with the same sizes as the BSR of `X`; the weight gradient `dW = Xᵀ·G` then
//! reads, for every output row `i` of `dW`, one contiguous run of stored blocks
//! ([`cubecl_kernels::bsr`] has the host reference in the row orientation).

use burn::tensor::backend::Backend;
use burn::tensor::{Bool, IndexingUpdateOp, Int, IntDType, Shape, Tensor};
use cubecl_kernels::bsr::keep_count;

/// A pruned activation `x: [samples, rows, d]`, ready for the weight gradient.
#[derive(Clone)]
pub struct Pruned<B: Backend> {
    /// `[samples, k, b]`: the kept blocks, block-column major (`c` then `r` ascending).
    pub values: Tensor<B, 3>,
    /// `[samples, k]`: the row `r` of every kept block (32-bit).
    pub col: Tensor<B, 2, Int>,
    /// `[samples, ⌈d/b⌉ + 1]`: `crow[s, c] .. crow[s, c + 1]` are the kept blocks of block
    /// column `c` of sample `s` (32-bit).
    pub crow: Tensor<B, 2, Int>,
    /// `[samples, rows, d]` of the activation.
    pub dims: [usize; 3],
    /// Block width.
    pub block: usize,
}

impl<B: Backend> core::fmt::Debug for Pruned<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "Pruned {{ dims: {:?}, block: {}, kept: {:?} }}",
            self.dims,
            self.block,
            self.values.dims()
        )
    }
}

impl<B: Backend> Pruned<B> {
    /// Blocks kept per sample.
    pub fn kept(&self) -> usize {
        self.values.dims()[1]
    }

    /// Flat block index `c · rows + r` of every kept block, `[samples, k]`, ascending (in the
    /// backend's default int type), recovered from `crow` and `col`.
    pub fn index(&self) -> Tensor<B, 2, Int> {
        let [samples, rows, d] = self.dims;
        let nb = d.div_ceil(self.block);
        let k = self.kept();
        let device = self.values.device();
        let at = Tensor::<B, 1, Int>::arange(0..k as i64, &device);
        let dtype = at.dtype();
        let ends = self.crow.clone().cast(dtype).narrow(1, 1, nb);
        // block column of stored block j: the number of columns that end at or before j
        let c = at
            .reshape([1, k, 1])
            .expand([samples, k, nb])
            .greater_equal(ends.reshape([samples, 1, nb]).expand([samples, k, nb]))
            .int()
            .sum_dim(2)
            .reshape([samples, k]);
        c.mul_scalar(rows as i64) + self.col.clone().cast(dtype)
    }

    /// The masked dense activation `[samples, rows, d]` (zeros where blocks were pruned).
    pub fn to_dense(&self) -> Tensor<B, 3> {
        let [samples, rows, d] = self.dims;
        let b = self.block;
        let nb = d.div_ceil(b);
        let device = self.values.device();
        let k = self.kept();
        let index = self
            .index()
            .reshape([samples, k, 1])
            .expand([samples, k, b]);
        let blocks = Tensor::<B, 3>::zeros([samples, nb * rows, b], &device).scatter(
            1,
            index,
            self.values.clone(),
            IndexingUpdateOp::Add,
        );
        blocks
            .reshape([samples, nb, rows, b])
            .swap_dims(1, 2)
            .reshape([samples, rows, nb * b])
            .narrow(2, 0, d)
    }
}

/// `x: [samples, rows, d]` cut into blocks, block-column major: `[samples, ⌈d/b⌉ · rows, b]`
/// (zero-padded to a multiple of `b`).
fn blocks<B: Backend>(x: Tensor<B, 3>, b: usize) -> Tensor<B, 3> {
    let [samples, rows, d] = x.dims();
    let nb = d.div_ceil(b);
    let x = if nb * b == d {
        x
    } else {
        let pad = Tensor::zeros([samples, rows, nb * b - d], &x.device());
        Tensor::cat(vec![x, pad], 2)
    };
    x.reshape([samples, rows, nb, b])
        .swap_dims(1, 2)
        .reshape([samples, nb * rows, b])
}

/// Which blocks each sample keeps: `[samples, N]` with exactly `keep` trues per row, the largest
/// `norms` (NaN ranked as +∞), ties to the lower index. Deterministic on every backend: only the
/// k-th largest *value* is taken from a (possibly unstable) sort; the ties at that value are
/// ranked by a running count in index order.
pub fn keep_mask<B: Backend>(norms: Tensor<B, 2>, keep: usize) -> Tensor<B, 2, Bool> {
    let [samples, n] = norms.dims();
    let device = norms.device();
    if keep == n {
        return Tensor::<B, 2, Int>::ones([samples, n], &device).bool();
    }
    if keep == 0 {
        return Tensor::<B, 2, Int>::zeros([samples, n], &device).bool();
    }
    let nan = norms.clone().is_nan();
    let norms = norms.mask_fill(nan, f32::INFINITY);
    // (not `topk`: burn-cubecl 0.21 unrolls it over `k` at compile time, which takes minutes
    // to compile for the thousands of blocks of a ResMLP layer)
    let threshold = norms.clone().sort_descending(1).narrow(1, keep - 1, 1);
    let above = norms
        .clone()
        .greater(threshold.clone().expand([samples, n]));
    let tie = norms.equal(threshold.expand([samples, n]));
    let need = Tensor::<B, 2, Int>::full([samples, 1], keep as i64, &device)
        - above.clone().int().sum_dim(1);
    let tie_rank = tie.clone().int().cumsum(1);
    above.bool_or(tie.bool_and(tie_rank.lower_equal(need.expand([samples, n]))))
}

/// Prunes `x: [samples, rows, d]` per sample to its `keep_count(N, s)` blocks of width `b` with
/// the largest L2 norms. `jitter`: the stochastic variant's band (norms scaled by a uniform
/// factor in `[1 − band, 1 + band]` from the backend's RNG before ranking).
pub fn prune<B: Backend>(x: Tensor<B, 3>, b: usize, s: f64, jitter: Option<f64>) -> Pruned<B> {
    let dims = x.dims();
    let [samples, rows, d] = dims;
    let nb = d.div_ceil(b);
    let n = nb * rows;
    let keep = keep_count(n, s);
    let device = x.device();
    let blocks = blocks(x, b);
    let mut norms = blocks
        .clone()
        .powi_scalar(2)
        .sum_dim(2)
        .reshape([samples, n]);
    if let Some(band) = jitter {
        let noise = Tensor::<B, 2>::random(
            [samples, n],
            burn::tensor::Distribution::Uniform(1.0 - band, 1.0 + band),
            &device,
        );
        norms = norms * noise;
    }
    let mask = keep_mask(norms, keep);
    // Kept indices ascending: unique keys (pruned ones pushed past `n`), so any sort agrees.
    let arange = Tensor::<B, 1, Int>::arange(0..n as i64, &device)
        .reshape([1, n])
        .expand([samples, n]);
    let key = arange + (Tensor::<B, 2, Int>::ones([samples, n], &device) - mask.int()) * n as i64;
    let index = key.sort(1).narrow(1, 0, keep);
    let values = blocks.gather(
        1,
        index
            .clone()
            .reshape([samples, keep, 1])
            .expand([samples, keep, b]),
    );
    let col = index
        .clone()
        .remainder_scalar(rows as i64)
        .cast(IntDType::I32);
    let starts = Tensor::<B, 1, Int>::arange(0..(nb as i64 + 1), &device).mul_scalar(rows as i64);
    let crow = index
        .clone()
        .reshape([samples, keep, 1])
        .lower(
            starts
                .reshape([1, 1, nb + 1])
                .expand([samples, keep, nb + 1]),
        )
        .int()
        .sum_dim(1)
        .reshape([samples, nb + 1])
        .cast(IntDType::I32);
    // `lower` counts the blocks *before* each start: crow[s, c] = #{kept with c' < c}
    Pruned {
        values,
        col,
        crow,
        dims,
        block: b,
    }
}

/// The shape `[samples, rows, d]` a linear layer's input of any rank is pruned as: the first
/// dimension is the sample, the last the embedding, everything between the rows.
pub fn sample_view(shape: &Shape) -> [usize; 3] {
    let dims = shape.as_slice();
    let d = *dims
        .last()
        .expect("a linear input has at least one dimension");
    match dims.len() {
        1 => [1, 1, d],
        _ => [dims[0], dims[1..dims.len() - 1].iter().product(), d],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;
    use burn::tensor::TensorData;
    use cubecl_kernels::bsr::host;
    use cubecl_kernels::testing::uniform as values;

    /// An int tensor's values as `i64`, whatever its stored width.
    fn ints(t: &Tensor<B, 2, Int>) -> Vec<i64> {
        t.clone().into_data().convert::<i64>().to_vec().unwrap()
    }

    type B = NdArray;

    fn tensor(v: &[f32], dims: [usize; 3]) -> Tensor<B, 3> {
        Tensor::from_data(TensorData::new(v.to_vec(), dims), &Default::default())
    }

    /// The generic path equals the host reference: same kept blocks, same masked tensor, same
    /// BSR arrays (row orientation converted), on divisible and padded widths.
    #[test]
    fn tensor_ops_prune_like_the_host_reference() {
        for (dims, b, s) in [
            ([3, 5, 8], 2, 0.6),
            ([2, 7, 12], 4, 0.5),
            ([2, 3, 10], 4, 0.3),
            ([4, 6, 16], 16, 0.8),
            ([2, 4, 8], 2, 0.0),
        ] {
            let [samples, rows, d] = dims;
            let x = values(samples * rows * d, (d * 31 + b) as u64);
            let want = host::prune(&x, dims, b, s);
            let got = prune(tensor(&x, dims), b, s, None);
            let dense = got.to_dense().into_data().to_vec::<f32>().unwrap();
            assert_eq!(dense, want.to_dense(), "{dims:?} b={b} s={s}");
            // crow/col describe the same blocks as the host's row-oriented BSR
            let nb = d.div_ceil(b);
            let index = ints(&got.index());
            let col = ints(&got.col);
            let crow = ints(&got.crow);
            let k = got.kept();
            // indices are stored as 32-bit integers
            assert_eq!(got.col.dtype(), burn::tensor::DType::I32);
            assert_eq!(got.crow.dtype(), burn::tensor::DType::I32);
            let mut from_host = Vec::new();
            for r in 0..samples * rows {
                for at in want.crow[r] as usize..want.crow[r + 1] as usize {
                    let (n, row) = (r / rows, r % rows);
                    from_host.push((n, want.col[at] as usize * rows + row));
                }
            }
            from_host.sort();
            let mine: Vec<_> = (0..samples * k)
                .map(|i| (i / k, index[i] as usize))
                .collect();
            assert_eq!(mine, from_host);
            for n in 0..samples {
                for c in 0..nb {
                    for at in crow[n * (nb + 1) + c]..crow[n * (nb + 1) + c + 1] {
                        let at = n * k + at as usize;
                        assert_eq!(index[at] as usize, c * rows + col[at] as usize);
                    }
                }
                assert_eq!(crow[n * (nb + 1) + nb] as usize, k);
            }
        }
    }

    #[test]
    fn ties_and_nan_follow_the_documented_order() {
        let norms = Tensor::<B, 2>::from_floats(
            [
                [1.0, 2.0, 2.0, 2.0, 0.0],
                [f32::INFINITY, 5.0, f32::NAN, 0.0, 0.0],
            ],
            &Default::default(),
        );
        let mask: Vec<bool> = keep_mask(norms, 2).into_data().to_vec().unwrap();
        assert_eq!(
            mask,
            vec![
                false, true, true, false, false, //
                true, false, true, false, false
            ]
        );
    }

    #[test]
    fn stochastic_variant_keeps_k_and_swaps_some_blocks() {
        let dims = [4, 8, 16];
        let x = values(4 * 8 * 16, 11);
        let exact = prune(tensor(&x, dims), 4, 0.5, None);
        let noisy = prune(tensor(&x, dims), 4, 0.5, Some(0.2));
        assert_eq!(noisy.kept(), exact.kept());
        let a = ints(&exact.index());
        let b = ints(&noisy.index());
        assert_ne!(a, b, "a 20% band should swap some blocks");
    }

    #[test]
    fn sample_view_flattens_the_middle() {
        assert_eq!(sample_view(&Shape::new([4, 196, 384])), [4, 196, 384]);
        assert_eq!(sample_view(&Shape::new([4, 384])), [4, 1, 384]);
        assert_eq!(sample_view(&Shape::new([2, 3, 5, 8])), [2, 15, 8]);
    }
}
