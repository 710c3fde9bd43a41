//! The LUT GEMM kernels against their host reference on the runtime `EMBER_TEST_RUNTIME` selects
//! (wgpu by default, lavapipe where there is no GPU): both tiles (staged and direct) under every
//! multiply kind, shapes that are not multiples of the tile, batches, strided inputs, and IEEE
//! special values.

use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use cubecl_kernels::approx::gemm::{Tile, Tiling};
use cubecl_kernels::approx::host;
use cubecl_kernels::approx::{ApproxMultiply, LutStaging, MulKind, gemm};
use cubecl_kernels::testing::{
    FMA_TOLERANCE, TestBackend, TestRuntime, binades, mitchell_table, multipliers, unpackable_table,
};

/// Magnitudes spanning several binades, both signs.
fn values(n: usize, seed: u64) -> Vec<f32> {
    binades(n, seed, 8)
}

/// Both tiles for an `m × n` output: the staged one a GPU gets, the direct one a CPU gets.
fn tiles(m: usize, n: usize) -> [Tile; 2] {
    [Tile::Staged(Tiling::choose(m, n)), Tile::DIRECT]
}

fn run<R: TestRuntime>(
    lhs: Tensor<TestBackend<R>, 3>,
    rhs: Tensor<TestBackend<R>, 3>,
    mul: &ApproxMultiply,
    tile: Tile,
) -> Vec<f32> {
    let out = gemm::launch_tiled(
        lhs.into_primitive().tensor(),
        rhs.into_primitive().tensor(),
        mul,
        tile,
    );
    Tensor::<TestBackend<R>, 3>::from_primitive(TensorPrimitive::Float(out))
        .into_data()
        .to_vec()
        .unwrap()
}

/// Within 1e-5 of each value (at least 1), and on a runtime that fuses multiplies and adds
/// within [`FMA_TOLERANCE`] of the largest |want| (a plain product rounded once in an FMA).
fn assert_close<R: TestRuntime>(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(1f32, |m, w| m.max(w.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = g.to_bits() == w.to_bits()
            || (g - w).abs() <= 1e-5 * w.abs().max(1.0)
            || (R::CONTRACTS_MUL_ADD && (g - w).abs() <= FMA_TOLERANCE * scale);
        assert!(ok, "{what}: element {i}: kernel {g} vs host {w}");
    }
}

cubecl_kernels::runtime_test! {
    fn kernel_matches_host_reference_on_every_shape_and_multiply<R>() {
        let device = Default::default();
        for [batch, m, k, n] in [
            [1, 1, 1, 1],
            [1, 32, 16, 32],
            [2, 33, 17, 31],
            [3, 7, 50, 65],
            [1, 64, 100, 5],
            // one of each tiling, and long k cut into chunks (split_k)
            [2, 5, 40, 300],
            [1, 300, 40, 7],
            [1, 6, 2000, 25],
            [1, 16, 1100, 150],
            [2, 3, 1500, 70],
        ] {
            let (a, b) = (values(batch * m * k, 1), values(batch * k * n, 2));
            let lhs = Tensor::<TestBackend<R>, 3>::from_data(
                TensorData::new(a.clone(), [batch, m, k]),
                &device,
            );
            let rhs = Tensor::<TestBackend<R>, 3>::from_data(
                TensorData::new(b.clone(), [batch, k, n]),
                &device,
            );
            for (name, mul) in multipliers() {
                let want = host::gemm(&a, &b, [batch, m, k, n], &mul);
                for tile in tiles(m, n) {
                    let got = run(lhs.clone(), rhs.clone(), &mul, tile);
                    assert_close::<R>(&got, &want, &format!("{name} {tile:?} {batch}x{m}x{k}x{n}"));
                }
            }
        }
    }
}

cubecl_kernels::runtime_test! {
    fn strided_inputs_need_no_copy<R>() {
        let device = Default::default();
        let (m, k, n) = (19, 23, 29);
        let a = values(m * k, 3);
        let b = values(n * k, 4);
        // rhs given as the transpose of an [n, k] tensor
        let lhs =
            Tensor::<TestBackend<R>, 3>::from_data(TensorData::new(a.clone(), [1, m, k]), &device);
        let rhs_t =
            Tensor::<TestBackend<R>, 3>::from_data(TensorData::new(b.clone(), [1, n, k]), &device);
        let rhs = rhs_t.swap_dims(1, 2);
        let b_kn: Vec<f32> = (0..k * n).map(|i| b[(i % n) * k + i / n]).collect();
        for (name, mul) in multipliers() {
            let want = host::gemm(&a, &b_kn, [1, m, k, n], &mul);
            for tile in tiles(m, n) {
                let got = run(lhs.clone(), rhs.clone(), &mul, tile);
                assert_close::<R>(&got, &want, &format!("{name} {tile:?}"));
            }
        }
    }
}

cubecl_kernels::runtime_test! {
    fn special_values_follow_the_documented_semantics<R>() {
        let device = Default::default();
        // Single products (k = 1): kernel == scalar host multiply added to a +0 accumulator (which
        // turns a -0 product into +0, as any FP32 sum does), bit for bit.
        let a = [
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NAN,
            1e-40,
            3.0,
            -2.5e30,
            1.5e-20,
        ];
        let b = [-2.0, 5.0, 0.0, 1.0, f32::INFINITY, -7.0, 4e30, 2.5e-20];
        let lhs = Tensor::<TestBackend<R>, 3>::from_data(
            TensorData::new(a.to_vec(), [a.len(), 1, 1]),
            &device,
        );
        let rhs = Tensor::<TestBackend<R>, 3>::from_data(
            TensorData::new(b.to_vec(), [b.len(), 1, 1]),
            &device,
        );
        for (name, mul) in multipliers() {
            for tile in tiles(1, 1) {
                let got = run(lhs.clone(), rhs.clone(), &mul, tile);
                for i in 0..a.len() {
                    let want = 0.0 + host::multiply(a[i], b[i], &mul);
                    let same =
                        got[i].to_bits() == want.to_bits() || (got[i].is_nan() && want.is_nan());
                    assert!(
                        same,
                        "{name} {tile:?}: {} × {}: kernel {} vs host {want}",
                        a[i], b[i], got[i]
                    );
                }
            }
        }
    }
}

#[test]
fn tables_are_staged_by_width_and_form() {
    let staging = |mul: ApproxMultiply| match mul.kind() {
        MulKind::Lut(_, s) => s,
        other => panic!("{other:?} is not a table"),
    };
    assert_eq!(staging(mitchell_table(6)), LutStaging::Shared);
    assert_eq!(staging(mitchell_table(7)), LutStaging::Packed);
    assert_eq!(staging(unpackable_table(7)), LutStaging::Global);
    assert_eq!(staging(mitchell_table(8)), LutStaging::Global);
}
