//! The optimizer kernels (Adam's and SGD's fused steps) against their host implementation on
//! the runtime `EMBER_TEST_RUNTIME` selects, bit for bit where it rounds as the host does: first
//! and later steps, with and without weight decay, SGD with and without momentum, lengths that
//! take packs of 4 and lengths that do not, an empty parameter, special values, and inputs that
//! are views. Outputs are allocated by the launches, so the pool is poisoned before each launch
//! (a value a kernel fails to write reads NaN).

use crate::Cube;
use crate::broadcast::{poison, read, upload};
use burn::tensor::ops::FloatTensorOps;
use cubecl_kernels::optim::{AdamStep, SgdStep, launch_adam, launch_sgd, reference};
use cubecl_kernels::testing::{TestBackend, assert_matches_host, uniform};

/// Lengths: empty, below a pack, not a multiple of a pack, packs, several cubes of packs.
const LENGTHS: &[usize] = &[0, 1, 3, 4, 1000, 4099, 70_000];

/// Values in [-1, 1) with a zero, an infinity and a NaN among the gradients' (where long
/// enough): every one of them passes through the arithmetic as the host's does.
fn grad(n: usize, seed: u64) -> Vec<f32> {
    let mut g = uniform(n, seed);
    for (k, v) in [(5, 0.0), (7, f32::INFINITY), (9, f32::NAN)] {
        if k < n {
            g[k] = v;
        }
    }
    g
}

/// The second moment: non-negative, as Adam keeps it.
fn second(n: usize, seed: u64) -> Vec<f32> {
    uniform(n, seed).into_iter().map(f32::abs).collect()
}

fn adam_steps() -> Vec<AdamStep> {
    let mut steps = Vec::new();
    for decay in [None, Some(5e-4)] {
        for time in [1, 2, 37] {
            steps.push(AdamStep::new(0.9, 0.999, 1e-5, decay, time, 1e-3));
        }
    }
    steps
}

fn sgd_steps() -> Vec<SgdStep> {
    let mut steps = Vec::new();
    for decay in [None, Some(5e-4)] {
        for momentum in [None, Some((0.9, 0.0)), Some((0.9, 0.1))] {
            for first in [true, false] {
                steps.push(SgdStep::new(momentum, decay, 0.05, first));
            }
        }
    }
    steps
}

cubecl_kernels::runtime_test! {
    fn adam_equals_the_host_bit_for_bit<R>() {
        for &n in LENGTHS {
            let (p, g, m, v) = (uniform(n, 1), grad(n, 2), uniform(n, 3), second(n, 4));
            let (dp, dg, dm, dv) = (
                upload::<R>(&p, &[n]),
                upload::<R>(&g, &[n]),
                upload::<R>(&m, &[n]),
                upload::<R>(&v, &[n]),
            );
            for s in adam_steps() {
                let what = format!("Adam n = {n}, {s:?}");
                let moments = (!s.first).then_some((m.as_slice(), v.as_slice()));
                let (want_p, want_m, want_v) = reference::adam(&p, &g, moments, &s);
                poison::<R>(&[n, n, n]);
                let (gp, gm, gv) = launch_adam(&dp, &dg, (!s.first).then_some((&dm, &dv)), &s);
                assert_eq!(gp.meta.shape().to_vec(), vec![n], "{what}");
                assert_matches_host::<R>(&read(gp), &want_p, &format!("{what}: parameter"));
                assert_matches_host::<R>(&read(gm), &want_m, &format!("{what}: first moment"));
                assert_matches_host::<R>(&read(gv), &want_v, &format!("{what}: second moment"));
            }
        }
    }
}

cubecl_kernels::runtime_test! {
    fn sgd_equals_the_host_bit_for_bit<R>() {
        for &n in LENGTHS {
            let (p, g, u) = (uniform(n, 5), grad(n, 6), uniform(n, 7));
            let (dp, dg, du) = (upload::<R>(&p, &[n]), upload::<R>(&g, &[n]), upload::<R>(&u, &[n]));
            for s in sgd_steps() {
                let what = format!("SGD n = {n}, {s:?}");
                let reads = s.momentum.is_some() && !s.first;
                let (want_p, want_u) = reference::sgd(&p, &g, reads.then_some(u.as_slice()), &s);
                poison::<R>(&[n, n]);
                let (gp, gu) = launch_sgd(&dp, &dg, reads.then_some(&du), &s);
                assert_matches_host::<R>(&read(gp), &want_p, &format!("{what}: parameter"));
                assert_eq!(gu.is_some(), want_u.is_some(), "{what}: a velocity kept");
                if let (Some(gu), Some(want_u)) = (gu, want_u) {
                    assert_matches_host::<R>(&read(gu), &want_u, &format!("{what}: velocity"));
                }
            }
        }
    }
}

cubecl_kernels::runtime_test! {
    fn the_steps_read_views_in_logical_order<R>() {
        // a transposed gradient (what a linear layer's weight gradient can be): the kernel reads
        // it in the parameter's order
        let (rows, cols) = (33, 7);
        let n = rows * cols;
        let p = uniform(n, 8);
        let g_t = uniform(n, 9); // [cols, rows], read transposed
        let mut g = vec![0.0; n];
        for r in 0..rows {
            for c in 0..cols {
                g[r * cols + c] = g_t[c * rows + r];
            }
        }
        let view: Cube<R> = <TestBackend<R> as FloatTensorOps<TestBackend<R>>>::float_swap_dims(
            upload::<R>(&g_t, &[cols, rows]),
            0,
            1,
        );
        let dp = upload::<R>(&p, &[rows, cols]);
        let s = AdamStep::new(0.9, 0.999, 1e-5, Some(0.01), 1, 1e-2);
        let (gp, _, _) = launch_adam(&dp, &view, None, &s);
        let (want, _, _) = reference::adam(&p, &g, None, &s);
        assert_matches_host::<R>(&read(gp), &want, "Adam on a transposed gradient");
        let s = SgdStep::new(Some((0.9, 0.0)), None, 0.1, true);
        let (gp, gu) = launch_sgd(&dp, &view, None, &s);
        let (want_p, want_u) = reference::sgd(&p, &g, None, &s);
        assert_matches_host::<R>(&read(gp), &want_p, "SGD on a transposed gradient");
        assert_matches_host::<R>(&read(gu.unwrap()), &want_u.unwrap(), "its velocity");
    }
}

cubecl_kernels::runtime_test! {
    fn a_gradient_of_another_length_is_refused<R>() {
        let dp = upload::<R>(&[1.0; 6], &[6]);
        let dg = upload::<R>(&[1.0; 5], &[5]);
        let s = AdamStep::new(0.9, 0.999, 1e-5, None, 1, 1e-3);
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            launch_adam(&dp, &dg, None, &s);
        }))
        .expect_err("a gradient of 5 values for a parameter of 6");
        let msg = err
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(msg.contains("the gradient holds 5 values, the parameter 6"), "{msg}");
    }
}
