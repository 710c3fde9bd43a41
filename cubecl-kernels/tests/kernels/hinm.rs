//! HiNM's sparse-product kernel against its host implementation on the runtime `EMBER_TEST_RUNTIME`
//! selects (wgpu by default, lavapipe where there is no GPU), bit for bit: tile heights below and
//! above a cube, row counts that do not fill a cube, strided activations, a single group per row.

use crate::{Cube, cube, floats};
use burn::tensor::{Tensor, TensorData};
use cubecl_kernels::hinm::{PackedCube, launch_spmm, reference};
use cubecl_kernels::testing::{
    TestBackend, TestRuntime, assert_matches_host, random_packed as packed, uniform,
};

cubecl_kernels::runtime_test! {
    fn the_kernel_equals_the_host_implementation_bit_for_bit<R>() {
        let device = Default::default();
        for (m, out, k, v, nnz) in [
            (5, 16, 24, 8, 12),
            (33, 64, 72, 64, 36),    // V = 64: four cubes of rows per tile
            (17, 12, 8, 4, 4),       // one group per row, rows not a multiple of 16
            (40, 128, 200, 32, 100), // 25 groups: four metadata words per row
        ] {
            let w = packed(out, k, v, nnz, (m * out) as u64);
            let x = uniform(m * k, 3);
            let got = floats::<R, 2>(launch_spmm(
                &cube::<R, 2>(&x, [m, k]),
                &PackedCube::upload(&w, &device),
            ));
            assert_matches_host::<R>(
                &got,
                &reference::spmm(&x, m, &w),
                &format!("m={m} {out}x{k} V={v} nnz={nnz}"),
            );
        }
    }
}

cubecl_kernels::runtime_test! {
    fn strided_activations_are_read_through_their_strides<R>() {
        let (m, out, k) = (9, 16, 32);
        let w = packed(out, k, 16, 16, 5);
        let x = uniform(m * k, 8);
        // x stored transposed: [k, m] then viewed as [m, k]
        let xt: Vec<f32> = (0..k * m).map(|j| x[(j % m) * k + j / m]).collect();
        let t = Tensor::<TestBackend<R>, 2>::from_data(
            TensorData::new(xt, [k, m]),
            &Default::default(),
        )
        .transpose()
        .into_primitive()
        .tensor();
        let got = floats::<R, 2>(launch_spmm(
            &t,
            &PackedCube::upload(&w, &Default::default()),
        ));
        assert_matches_host::<R>(&got, &reference::spmm(&x, m, &w), "spmm");
    }
}

/// `values` `[rows, cols]` as burn-cuda lays tensors out: rows padded, a view whose row stride
/// is not its width. The padding is the runtime's memory alignment (8 values on wgpu), so the
/// slice that cuts it off stays a view: Burn copies a slice whose end is not aligned.
pub(crate) fn padded_rows<R: TestRuntime>(values: &[f32], [rows, cols]: [usize; 2]) -> Cube<R> {
    let client = <R as cubecl::Runtime>::client(&Default::default());
    let align = client.properties().memory.alignment as usize / size_of::<f32>();
    let wide = cols + align.max(8);
    let mut stored = vec![f32::NAN; rows * wide];
    for (r, row) in values.chunks(cols).enumerate() {
        stored[r * wide..r * wide + cols].copy_from_slice(row);
    }
    let t = Tensor::<TestBackend<R>, 2>::from_data(
        TensorData::new(stored, [rows, wide]),
        &Default::default(),
    )
    .slice([0..rows, 0..cols])
    .into_primitive()
    .tensor();
    assert!(!t.is_contiguous(), "a view with padded rows, not a copy");
    t
}

cubecl_kernels::runtime_test! {
    fn device_values_with_padded_rows_are_read_as_values<R>() {
        let (m, out, k, v, nnz) = (7, 12, 40, 4, 20);
        let w = packed(out, k, v, nnz, 21);
        let x = uniform(m * k, 4);
        let values = padded_rows::<R>(&w.values, [out, nnz / 2]);
        let got = floats::<R, 2>(launch_spmm(
            &cube::<R, 2>(&x, [m, k]),
            &PackedCube::with_values(&w, values),
        ));
        assert_matches_host::<R>(&got, &reference::spmm(&x, m, &w), "spmm");
    }
}
