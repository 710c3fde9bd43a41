//! Pruning on the device: block norms, per-sample top-k selection, and compression into the
//! column-oriented BSR that the weight gradient reads.
//!
//! Layout (the same as `burn_sparse_act::prune::Pruned`'s): blocks are numbered block-column
//! major within a sample, `n = c · rows + r` (`c` the block column along `d`, `r` the row). A
//! sample keeps `keep` blocks; `values: [samples, keep, b]` holds them in `n` order (zero-padded
//! where the last block column is shorter than `b`), `col: [samples, keep]` their rows `r`, and
//! `crow: [samples, nb + 1]` the start of every block column's run (`nb = ⌈d / b⌉`).
//!
//! Three launches: [`block_norms_kernel`] (one unit per block, squares summed in element
//! order), [`select_kernel`] (one unit per block: its rank among the sample's blocks by norm,
//! descending, ties to the lower index, NaN as +∞; kept when the rank is below `keep`), and
//! [`compress_kernel`] (one unit per sample and block column: the column's start from the flags
//! before it, then its kept blocks in row order).
// `#[cube]` generates undocumented expansion items for public functions.
#![allow(missing_docs)]

use super::host::Bsr;
use burn_cubecl::CubeRuntime;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_std::{DType, Shape};
use cubecl::prelude::*;

/// The geometry of a pruned activation `[samples, rows, d]` cut into blocks of `b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Blocks {
    /// Rows per sample.
    pub rows: usize,
    /// Row length.
    pub d: usize,
    /// Block width.
    pub b: usize,
}

impl Blocks {
    /// Block columns `⌈d / b⌉`.
    pub fn columns(&self) -> usize {
        self.d.div_ceil(self.b)
    }
    /// Blocks per sample.
    pub fn per_sample(&self) -> usize {
        self.rows * self.columns()
    }
}

/// `norms[s, c·rows + r] = Σ_e x[s, r, c·b + e]²` over the block's elements, in order.
#[cube(launch)]
fn block_norms_kernel(x: &Tensor<f32>, norms: &mut Array<f32>, #[comptime] g: Blocks) {
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
fn select_kernel(norms: &Array<f32>, kept: &mut Array<u32>, keep: u32, #[comptime] n_per: usize) {
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
fn compress_kernel(
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

/// A pruned activation on the device, in the layout of the [module docs](self).
#[derive(Clone, Debug)]
pub struct PrunedCube<R: CubeRuntime> {
    /// `[samples, keep, b]` f32.
    pub values: CubeTensor<R>,
    /// `[samples, keep]` u32 rows.
    pub col: CubeTensor<R>,
    /// `[samples, nb + 1]` u32 column starts.
    pub crow: CubeTensor<R>,
}

fn units(n: usize) -> (CubeCount, CubeDim) {
    (
        CubeCount::Static(n.div_ceil(256) as u32, 1, 1),
        CubeDim::new_1d(256),
    )
}

fn geometry<R: CubeRuntime>(x: &CubeTensor<R>, b: usize) -> (usize, Blocks) {
    let [samples, rows, d] = x.meta.shape().dims::<3>();
    assert_eq!(x.dtype, DType::F32, "SparseAct prunes f32 activations");
    assert!(
        b > 0 && rows > 0 && d > 0,
        "blocks of {b} in [{samples}, {rows}, {d}]"
    );
    (samples, Blocks { rows, d, b })
}

/// Launches [`block_norms_kernel`]: `x: [samples, rows, d]` (any strides) → squared norms
/// `[samples, N]` in block-column-major order.
pub fn launch_block_norms<R: CubeRuntime>(x: &CubeTensor<R>, b: usize) -> CubeTensor<R> {
    let (samples, g) = geometry(x, b);
    let n = samples * g.per_sample();
    let norms = empty_device_dtype(
        x.client.clone(),
        x.device.clone(),
        Shape::new([samples, g.per_sample()]),
        DType::F32,
    );
    if n > 0 {
        let (count, dim) = units(n);
        block_norms_kernel::launch::<R>(
            &x.client,
            count,
            dim,
            x.clone().into_tensor_arg(),
            norms.clone().into_array_arg(),
            g,
        );
    }
    norms
}

/// Launches [`select_kernel`] and [`compress_kernel`]: keeps the `keep` blocks of every sample
/// of `x` with the largest `norms` (as [`launch_block_norms`] computes them, possibly jittered).
///
/// # Panics
/// If `norms` is not `[samples, N]` of `x`'s blocks or `keep` exceeds `N`.
pub fn launch_compress<R: CubeRuntime>(
    x: &CubeTensor<R>,
    norms: &CubeTensor<R>,
    b: usize,
    keep: usize,
) -> PrunedCube<R> {
    let (samples, g) = geometry(x, b);
    let n_per = g.per_sample();
    assert_eq!(
        norms.meta.shape().dims::<2>(),
        [samples, n_per],
        "block norms"
    );
    assert!(keep <= n_per, "keep {keep} of {n_per} blocks");
    let (client, device) = (&x.client, &x.device);
    let new = |dims: Vec<usize>, dtype| {
        empty_device_dtype(client.clone(), device.clone(), Shape::from(dims), dtype)
    };
    let nb = g.columns();
    let kept = new(vec![samples, n_per], DType::U32);
    let out = PrunedCube {
        values: new(vec![samples, keep, b], DType::F32),
        col: new(vec![samples, keep], DType::U32),
        crow: new(vec![samples, nb + 1], DType::U32),
    };
    if samples == 0 {
        return out;
    }
    let (count, dim) = units(samples * n_per);
    select_kernel::launch::<R>(
        client,
        count,
        dim,
        norms.clone().into_array_arg(),
        kept.clone().into_array_arg(),
        keep as u32,
        n_per,
    );
    let (count, dim) = units(samples * nb);
    compress_kernel::launch::<R>(
        client,
        count,
        dim,
        x.clone().into_tensor_arg(),
        kept.into_array_arg(),
        out.values.clone().into_array_arg(),
        out.col.clone().into_array_arg(),
        out.crow.clone().into_array_arg(),
        samples as u32,
        keep as u32,
        g,
    );
    out
}

/// The column-oriented arrays of a host [`Bsr`] of `samples` samples (the test oracle of
/// [`launch_compress`]): `(values, col, crow)` in the layout of the [module docs](self).
pub fn columns(bsr: &Bsr, samples: usize) -> (Vec<f32>, Vec<u32>, Vec<u32>) {
    let rows = bsr.rows / samples.max(1);
    let (b, nb) = (bsr.block, bsr.cols.div_ceil(bsr.block));
    let (mut values, mut col, mut crow) = (Vec::new(), Vec::new(), Vec::new());
    for s in 0..samples {
        let mut by_col: Vec<Vec<(u32, usize)>> = vec![Vec::new(); nb];
        for r in 0..rows {
            let row = s * rows + r;
            for at in bsr.crow[row] as usize..bsr.crow[row + 1] as usize {
                by_col[bsr.col[at] as usize].push((r as u32, at));
            }
        }
        let mut start = 0u32;
        for blocks in &by_col {
            crow.push(start);
            start += blocks.len() as u32;
            for &(r, at) in blocks {
                col.push(r);
                values.extend_from_slice(&bsr.values[at * b..(at + 1) * b]);
            }
        }
        crow.push(start);
    }
    (values, col, crow)
}
