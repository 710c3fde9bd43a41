//! The batch-norm kernels against their host implementation on the runtime
//! `EMBER_TEST_RUNTIME` selects, bit for bit where it rounds as the host does: training
//! forwards with and without running statistics, inference forwards and backwards, over
//! layouts that take packs of 4 and layouts that do not, channels of several segments,
//! channels-last, an empty batch, and inputs that are views. Outputs are allocated by the
//! launches, so the pool is poisoned before each launch (a value a kernel fails to write reads
//! NaN).

use crate::Cube;
use crate::broadcast::{poison, read, upload};
use burn::tensor::ops::FloatTensorOps;
use cubecl_kernels::broadcast::Layout;
use cubecl_kernels::norm::{
    BatchNormStep, launch_batch_norm, launch_batch_norm_backward, launch_normalize, reference,
};
use cubecl_kernels::testing::{TestBackend, assert_matches_host, uniform};

/// `(outer, channels, inner)`: packs of 4, single values, one channel of several segments,
/// channels-last with many channels, an empty batch.
const LAYOUTS: &[(usize, usize, usize)] = &[
    (2, 3, 7),
    (4, 2, 16),
    (1, 2, 40_000),
    (300, 5, 3),
    (16, 64, 1),
    (0, 3, 4),
];

/// `x` with channel `c` around `c` (a mean away from zero).
fn input(l: Layout, seed: u64) -> Vec<f32> {
    let mut x = uniform(l.len(), seed);
    for (k, v) in x.iter_mut().enumerate() {
        *v += ((k / l.inner) % l.channels) as f32;
    }
    x
}

fn layout((outer, channels, inner): (usize, usize, usize)) -> Layout {
    Layout {
        outer,
        channels,
        inner,
    }
}

cubecl_kernels::runtime_test! {
    fn the_training_forward_equals_the_host_bit_for_bit<R>() {
        let s = BatchNormStep::new(1e-5, 0.1);
        for &dims in LAYOUTS {
            let l = layout(dims);
            let shape = [l.outer, l.channels, l.inner];
            let c = l.channels;
            let (x, gamma, beta) = (input(l, 1), uniform(c, 2), uniform(c, 3));
            let (rm, rv) = (uniform(c, 4), vec![1.5; c]);
            let dx = upload::<R>(&x, &shape);
            let (dg, db) = (upload::<R>(&gamma, &[c]), upload::<R>(&beta, &[c]));
            let (drm, drv) = (upload::<R>(&rm, &[c]), upload::<R>(&rv, &[c]));
            for running in [false, true] {
                let what = format!("{l:?}, running statistics {running}");
                let want = reference::batch_norm(
                    &x,
                    &gamma,
                    &beta,
                    running.then_some((rm.as_slice(), rv.as_slice())),
                    l,
                    &s,
                );
                poison::<R>(&[l.len(), c, c, c, c]);
                let got = launch_batch_norm(&dx, &dg, &db, running.then_some((&drm, &drv)), l, &s);
                assert_eq!(got.y.meta.shape().to_vec(), shape.to_vec(), "{what}");
                assert_matches_host::<R>(&read(got.y), &want.y, &format!("{what}: y"));
                // an empty batch's statistics are 0 / 0: NaN on both sides
                assert_matches_host::<R>(&read(got.mean), &want.mean, &format!("{what}: mean"));
                assert_matches_host::<R>(&read(got.var), &want.var, &format!("{what}: var"));
                assert_eq!(got.running.is_some(), running, "{what}");
                if let (Some((m, v)), Some((wm, wv))) = (got.running, want.running) {
                    assert_matches_host::<R>(&read(m), &wm, &format!("{what}: running mean"));
                    assert_matches_host::<R>(&read(v), &wv, &format!("{what}: running var"));
                }
            }
        }
    }
}

cubecl_kernels::runtime_test! {
    fn inference_and_backward_equal_the_host_bit_for_bit<R>() {
        let eps = 1e-5f32;
        for &dims in LAYOUTS {
            let l = layout(dims);
            let shape = [l.outer, l.channels, l.inner];
            let c = l.channels;
            let (x, dy) = (input(l, 5), uniform(l.len(), 6));
            let (mean, gamma, beta) = (uniform(c, 7), uniform(c, 8), uniform(c, 9));
            let var: Vec<f32> = uniform(c, 10).into_iter().map(|v| v.abs() + 0.5).collect();
            let (dx_, ddy) = (upload::<R>(&x, &shape), upload::<R>(&dy, &shape));
            let per = |v: &[f32]| upload::<R>(v, &[c]);
            let (dm, dv, dg, db) = (per(&mean), per(&var), per(&gamma), per(&beta));
            let what = format!("{l:?}");

            let want = reference::normalize(&x, [&mean, &var, &gamma, &beta], l, eps);
            poison::<R>(&[l.len()]);
            let got = launch_normalize(&dx_, [&dm, &dv, &dg, &db], l, eps);
            assert_matches_host::<R>(&read(got), &want, &format!("{what}: inference"));

            let (want_dx, want_dg, want_db) =
                reference::batch_norm_backward(&x, &dy, [&mean, &var, &gamma], l, eps);
            poison::<R>(&[l.len(), c, c]);
            let (gdx, gdg, gdb) = launch_batch_norm_backward(&dx_, &ddy, [&dm, &dv, &dg], l, eps);
            assert_matches_host::<R>(&read(gdx), &want_dx, &format!("{what}: dx"));
            assert_matches_host::<R>(&read(gdg), &want_dg, &format!("{what}: dγ"));
            assert_matches_host::<R>(&read(gdb), &want_db, &format!("{what}: dβ"));
        }
    }
}

cubecl_kernels::runtime_test! {
    fn a_view_is_read_in_logical_order<R>() {
        // x stored as [C, B, L] and swapped to [B, C, L]: the kernels read the batch-first order
        let l = layout((3, 4, 8));
        let stored = uniform(l.len(), 11);
        let mut x = vec![0.0; l.len()];
        for b in 0..l.outer {
            for c in 0..l.channels {
                for i in 0..l.inner {
                    x[(b * l.channels + c) * l.inner + i] = stored[(c * l.outer + b) * l.inner + i];
                }
            }
        }
        let view: Cube<R> = <TestBackend<R> as FloatTensorOps<TestBackend<R>>>::float_swap_dims(
            upload::<R>(&stored, &[l.channels, l.outer, l.inner]),
            0,
            1,
        );
        let (gamma, beta) = (uniform(4, 12), uniform(4, 13));
        let s = BatchNormStep::new(1e-5, 0.1);
        let got = launch_batch_norm(&view, &upload::<R>(&gamma, &[4]), &upload::<R>(&beta, &[4]), None, l, &s);
        let want = reference::batch_norm(&x, &gamma, &beta, None, l, &s);
        assert_matches_host::<R>(&read(got.y), &want.y, "batch norm of a swapped view");
    }
}

cubecl_kernels::runtime_test! {
    fn a_gamma_of_another_length_is_refused<R>() {
        let l = layout((2, 3, 4));
        let x = upload::<R>(&[1.0; 24], &[2, 3, 4]);
        let gamma = upload::<R>(&[1.0; 2], &[2]);
        let beta = upload::<R>(&[0.0; 3], &[3]);
        let s = BatchNormStep::new(1e-5, 0.1);
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            launch_batch_norm(&x, &gamma, &beta, None, l, &s);
        }))
        .expect_err("γ of 2 values for 3 channels");
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("γ holds 2 values, the layout 3"), "{msg}");
    }
}
