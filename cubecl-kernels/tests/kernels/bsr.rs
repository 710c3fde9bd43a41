//! SparseAct's kernels against their host references on the runtime `EMBER_TEST_RUNTIME` selects
//! (wgpu by default, lavapipe where there is no GPU), bit for bit: block norms, top-k selection and
//! compression (padded blocks, ties, NaN), and the block-sparse weight gradient under every
//! multiply kind, tile edges and long runs.

use burn::tensor::{Int, Tensor, TensorData};
use cubecl_kernels::approx::ApproxMultiply;
use cubecl_kernels::bsr::prune::{self, PrunedCube};
use cubecl_kernels::bsr::{host, keep_count, spmm};
use cubecl_kernels::testing::{
    TestBackend, TestRuntime, assert_matches_host, multipliers, uniform,
};

use crate::{Cube, cube, floats};

/// A u32 tensor read back (its handle reinterpreted as an int tensor of the same width).
fn words<R: TestRuntime, const D: usize>(mut t: Cube<R>) -> Vec<u32> {
    t.dtype = burn_std::DType::I32;
    Tensor::<TestBackend<R>, D, Int>::from_primitive(t)
        .into_data()
        .convert::<i32>()
        .to_vec::<i32>()
        .unwrap()
        .into_iter()
        .map(|v| v as u32)
        .collect()
}

fn prune_on_device<R: TestRuntime>(x: &[f32], dims: [usize; 3], b: usize, s: f64) -> PrunedCube<R> {
    let t = cube::<R, 3>(x, dims);
    let norms = prune::launch_block_norms(&t, b);
    let keep = keep_count(dims[1] * dims[2].div_ceil(b), s);
    prune::launch_compress(&t, &norms, b, keep)
}

/// Block norms of the host reference, reordered block-column major per sample.
fn host_norms(x: &[f32], [samples, rows, d]: [usize; 3], b: usize) -> Vec<f32> {
    let nb = d.div_ceil(b);
    let mut out = Vec::new();
    for s in 0..samples {
        let norms = host::block_norms(&x[s * rows * d..(s + 1) * rows * d], d, b);
        for c in 0..nb {
            out.extend((0..rows).map(|r| norms[r * nb + c]));
        }
    }
    out
}

fn cases() -> Vec<([usize; 3], usize, f64)> {
    vec![
        ([3, 5, 8], 2, 0.6),
        ([2, 3, 10], 4, 0.5), // b does not divide d: the last block is padded
        ([2, 7, 33], 16, 0.3),
        ([1, 4, 6], 6, 0.0),
        ([4, 9, 64], 64, 0.8), // one block per row
        ([2, 40, 48], 8, 0.9), // more than 256 blocks per sample
    ]
}

cubecl_kernels::runtime_test! {
    fn block_norms_equal_the_host_reference<R>() {
        for (dims, b, _) in cases() {
            let x = uniform(dims.iter().product(), 11);
            let got = floats::<R, 2>(prune::launch_block_norms(&cube::<R, 3>(&x, dims), b));
            assert_matches_host::<R>(&got, &host_norms(&x, dims, b), &format!("{dims:?} b={b}"));
        }
    }
}

cubecl_kernels::runtime_test! {
    fn pruning_equals_the_host_reference<R>() {
        for (dims, b, s) in cases() {
            let x = uniform(dims.iter().product(), 5);
            let want = prune::columns(&host::prune(&x, dims, b, s), dims[0]);
            let got = prune_on_device::<R>(&x, dims, b, s);
            assert_eq!(words::<R, 2>(got.crow), want.2, "crow {dims:?} b={b} s={s}");
            assert_eq!(words::<R, 2>(got.col), want.1, "col {dims:?} b={b} s={s}");
            assert_eq!(
                floats::<R, 3>(got.values),
                want.0,
                "values {dims:?} b={b} s={s}"
            );
        }
    }
}

cubecl_kernels::runtime_test! {
    fn ties_go_to_the_lower_index_and_nan_blocks_are_kept<R>() {
        let dims = [2, 4, 8];
        // every block of the first sample has the same norm; the second has NaN and +∞ blocks
        let mut x = vec![0.5f32; 64];
        x[32 + 3] = f32::NAN;
        x[32 + 20] = f32::INFINITY;
        x[32 + 9] = -3.0;
        for s in [0.25, 0.75] {
            let want = prune::columns(&host::prune(&x, dims, 4, s), 2);
            let got = prune_on_device::<R>(&x, dims, 4, s);
            assert_eq!(words::<R, 2>(got.col), want.1, "s={s}");
            assert_eq!(words::<R, 2>(got.crow), want.2, "s={s}");
            let (got, want) = (floats::<R, 3>(got.values), want.0);
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "s={s}: {got:?} vs {want:?}"
            );
        }
    }
}

/// The weight gradient under `multipliers()[which]` equals the host reference on the tile
/// edges, through the tile the device gets and then the other one. One test per multiply: each
/// compiles its own kernels (minutes on lavapipe), so the test threads compile them side by side.
///
/// The block size is comptime, so every shape compiles five kernels again (about 5 s each on
/// lavapipe): with `every_shape` (plain products and the packed 7-bit table, AFM16's form) all
/// seven shapes run, otherwise the four that reach both tiles' edges (one staged tile and two,
/// long runs, two direct tiles).
fn weight_gradient_equals_the_host_reference<R: TestRuntime>(which: usize, every_shape: bool) {
    let every = multipliers();
    assert_eq!(
        every.len(),
        7,
        "each multiply of `multipliers()` has a test below"
    );
    let (name, mul) = &every[which];
    // (dims, b, s, out): tile edges along out (70 > 64 columns: the staged tile; 150 > 128,
    // the direct one) and rows (b = 20, 40, 48: one staged tile of 32 rows or two; b = 72:
    // two direct tiles, the second of 8 rows), runs longer than the 16 staged blocks
    let shapes = [
        ([2, 5, 8], 2, 0.5, 5),
        ([3, 30, 20], 20, 0.4, 70),
        ([2, 50, 48], 16, 0.5, 33),
        ([2, 7, 40], 48, 0.0, 9),
        ([4, 12, 64], 64, 0.8, 64),
        ([2, 9, 80], 40, 0.3, 150),
        ([2, 6, 150], 72, 0.3, 20),
    ];
    for (dims, b, s, out) in shapes {
        if !every_shape && ![20, 16, 48, 72].contains(&b) {
            continue;
        }
        let [samples, rows, d] = dims;
        let x = uniform(samples * rows * d, 21);
        let g = uniform(samples * rows * out, 22);
        let bsr = host::prune(&x, dims, b, s);
        let want = host::weight_grad(&bsr, &g, out, mul);
        let pruned = prune_on_device::<R>(&x, dims, b, s);
        let grad = cube::<R, 2>(&g, [samples * rows, out]);
        // the tile the device gets, then the other one
        let dw = spmm::launch_weight_grad(&pruned, dims, b, &grad, mul);
        let case = format!("{name} {dims:?} b={b} s={s} out={out}");
        assert_matches_host::<R>(&floats::<R, 2>(dw), &want, &case);
        let kind = mul.kind();
        let chosen = spmm::device_tile(&grad, b, kind);
        for tile in [spmm::Tile::staged(b), spmm::Tile::direct(b, kind)] {
            if tile == chosen {
                continue;
            }
            let dw = spmm::launch_weight_grad_tiled(&pruned, dims, b, &grad, mul, tile);
            let case = format!("{case}, {} tile", tile.name());
            assert_matches_host::<R>(&floats::<R, 2>(dw), &want, &case);
        }
    }
}

cubecl_kernels::runtime_test! {
    fn weight_gradient_equals_the_host_reference_plain<R>() {
        weight_gradient_equals_the_host_reference::<R>(0, true);
    }
    fn weight_gradient_equals_the_host_reference_mitchell23<R>() {
        weight_gradient_equals_the_host_reference::<R>(1, false);
    }
    fn weight_gradient_equals_the_host_reference_mbm23<R>() {
        weight_gradient_equals_the_host_reference::<R>(2, false);
    }
    fn weight_gradient_equals_the_host_reference_lut3_shared<R>() {
        weight_gradient_equals_the_host_reference::<R>(3, false);
    }
    fn weight_gradient_equals_the_host_reference_lut7_packed<R>() {
        weight_gradient_equals_the_host_reference::<R>(4, true);
    }
    fn weight_gradient_equals_the_host_reference_lut7_unpackable<R>() {
        weight_gradient_equals_the_host_reference::<R>(5, false);
    }
    fn weight_gradient_equals_the_host_reference_lut8_global<R>() {
        weight_gradient_equals_the_host_reference::<R>(6, false);
    }
}

cubecl_kernels::runtime_test! {
    fn weight_gradient_of_a_strided_gradient<R>() {
        let (dims, b, out) = ([2, 6, 12], 4, 10);
        let x = uniform(144, 1);
        let g = uniform(12 * out, 2);
        // the gradient as the transpose of an [out, rows] tensor
        let gt: Vec<f32> = (0..out * 12).map(|i| g[(i % 12) * out + i / 12]).collect();
        let strided = Tensor::<TestBackend<R>, 2>::from_data(
            TensorData::new(gt, [out, 12]),
            &Default::default(),
        )
        .transpose()
        .into_primitive()
        .tensor();
        let pruned = prune_on_device::<R>(&x, dims, b, 0.5);
        let got = floats::<R, 2>(spmm::launch_weight_grad(
            &pruned,
            dims,
            b,
            &strided,
            &ApproxMultiply::Plain,
        ));
        let want = host::weight_grad(
            &host::prune(&x, dims, b, 0.5),
            &g,
            out,
            &ApproxMultiply::Plain,
        );
        assert_matches_host::<R>(&got, &want, "a strided gradient");
    }
}

cubecl_kernels::runtime_test! {
    fn block_norms_with_padded_rows_are_read_as_norms<R>() {
        let (dims, b, s) = ([3, 5, 8], 2, 0.6);
        let x = uniform(dims.iter().product(), 17);
        let t = cube::<R, 3>(&x, dims);
        let norms = floats::<R, 2>(prune::launch_block_norms(&t, b));
        let n_per = norms.len() / dims[0];
        let padded = crate::hinm::padded_rows::<R>(&norms, [dims[0], n_per]);
        let keep = keep_count(n_per, s);
        let got = prune::launch_compress(&t, &padded, b, keep);
        let want = prune::columns(&host::prune(&x, dims, b, s), dims[0]);
        assert_eq!(words::<R, 2>(got.col), want.1);
        assert_eq!(words::<R, 2>(got.crow), want.2);
    }
}
