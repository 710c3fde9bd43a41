//! BCRC's sparse-product kernel against its host implementation on the runtime `EMBER_TEST_RUNTIME`
//! selects (wgpu by default, lavapipe where there is no GPU), bit for bit: shared and unshared
//! patterns, empty rows, row counts that do not fill a cube, padded-row and strided activations.

use crate::hinm::padded_rows;
use crate::{cube, floats};
use burn::tensor::{Tensor, TensorData};
use cubecl_kernels::bcrc::{Bcrc, BcrcCube, launch_spmm, reference};
use cubecl_kernels::testing::{TestBackend, assert_matches_host, random_bcrc, uniform};

cubecl_kernels::runtime_test! {
    fn the_kernel_equals_the_host_implementation_bit_for_bit<R>() {
        let device = Default::default();
        for (m, out, k, block, keep) in [
            (5, 16, 40, (4, 16), (2, 5)),
            (33, 64, 96, (4, 96), (3, 20)), // wide blocks: the kept rows of a strip share a pattern
            (17, 30, 50, (4, 16), (1, 16)), // remainder strips, rows not a multiple of 16
            (3, 8, 8, (1, 1), (1, 1)),
        ] {
            let w = random_bcrc(out, k, block, keep, (m * out) as u64);
            let x = uniform(m * k, 3);
            let want = reference::spmm(&x, m, &w);
            let got = floats::<R, 2>(launch_spmm(
                &cube::<R, 2>(&x, [m, k]),
                &BcrcCube::upload(&w, &device),
            ));
            let what = format!("m={m} {out}x{k} blocks {block:?}");
            assert_matches_host::<R>(&got, &want, &what);
            // the layout without shared patterns gives the same outputs
            let ungrouped = BcrcCube::upload(&w.ungrouped(), &device);
            assert_matches_host::<R>(
                &floats::<R, 2>(launch_spmm(&cube::<R, 2>(&x, [m, k]), &ungrouped)),
                &want,
                &format!("{what}, ungrouped"),
            );
        }
    }
}

cubecl_kernels::runtime_test! {
    fn empty_rows_and_an_empty_weight_give_zeros<R>() {
        let (m, out, k) = (4, 6, 10);
        let mut keep = vec![false; out * k];
        keep[2 * k + 3] = true; // row 2 keeps one weight, every other row nothing
        let values: Vec<f32> = (0..out * k).map(|i| i as f32).collect();
        let w = Bcrc::from_dense(out, k, &values, &keep).unwrap();
        let x = uniform(m * k, 5);
        let got = floats::<R, 2>(launch_spmm(
            &cube::<R, 2>(&x, [m, k]),
            &BcrcCube::upload(&w, &Default::default()),
        ));
        assert_matches_host::<R>(&got, &reference::spmm(&x, m, &w), "spmm");
        assert!(
            got.iter()
                .enumerate()
                .all(|(i, &y)| (i % out == 2) || y == 0.0)
        );
        let none = Bcrc::from_dense(out, k, &values, &[false; 60]).unwrap();
        let got = floats::<R, 2>(launch_spmm(
            &cube::<R, 2>(&x, [m, k]),
            &BcrcCube::upload(&none, &Default::default()),
        ));
        assert_eq!(got, vec![0.0; m * out]);
    }
}

cubecl_kernels::runtime_test! {
    fn padded_and_strided_activations_are_read_through_their_strides<R>() {
        let (m, out, k) = (9, 16, 32);
        let w = random_bcrc(out, k, (4, 8), (2, 3), 5);
        let x = uniform(m * k, 8);
        let want = reference::spmm(&x, m, &w);
        let device = Default::default();
        let got = floats::<R, 2>(launch_spmm(
            &padded_rows::<R>(&x, [m, k]),
            &BcrcCube::upload(&w, &device),
        ));
        assert_matches_host::<R>(&got, &want, "padded rows");
        // x stored transposed: [k, m] then viewed as [m, k]
        let xt: Vec<f32> = (0..k * m).map(|j| x[(j % m) * k + j / m]).collect();
        let t = Tensor::<TestBackend<R>, 2>::from_data(TensorData::new(xt, [k, m]), &device)
            .transpose()
            .into_primitive()
            .tensor();
        assert_matches_host::<R>(
            &floats::<R, 2>(launch_spmm(&t, &BcrcCube::upload(&w, &device))),
            &want,
            "transposed",
        );
    }
}

cubecl_kernels::runtime_test! {
    #[should_panic(expected = "BCRC upload")]
    fn a_corrupt_weight_is_not_uploaded<R>() {
        let mut w = random_bcrc(8, 16, (4, 16), (2, 4), 1);
        w.compact_column[0] = 99;
        BcrcCube::<R>::upload(&w, &Default::default());
    }
}
