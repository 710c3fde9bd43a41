//! Every kernel launched on a grid past the runtime's per-dimension limit (65,535 cubes in `y`
//! and `z` on CUDA, 65,535 in every dimension on wgpu), against its host reference: the launch
//! lays the kernel's cubes onto the runtime's grid (`cubecl_kernels`' virtual grids), so no
//! shape a model gives fails at launch. Each case has more than 65,535 cubes along the
//! dimension named, with as little work per cube as the kernel allows.

use crate::{cube, floats};
use cubecl_kernels::approx::im2col::{self, Window};
use cubecl_kernels::approx::{ApproxMultiply, gemm, host as approx_host};
use cubecl_kernels::bcrc::BcrcCube;
use cubecl_kernels::broadcast::{self, Layout};
use cubecl_kernels::bsr::{host as bsr_host, keep_count, prune, spmm};
use cubecl_kernels::hinm::PackedCube;
use cubecl_kernels::testing::{assert_matches_host, random_bcrc, random_packed, uniform};

/// Cubes past every runtime's per-dimension limit.
const PAST: usize = 65_536;

cubecl_kernels::runtime_test! {
    fn im2col_and_col2im_with_more_rows_than_a_grid_dimension<R>() {
        // one column row per channel, one row of cubes each: 65,537 rows (im2col) and batch ×
        // channels = 65,537 planes (col2im)
        let w = Window {
            channels: PAST + 1,
            input: [1, 1, 1],
            kernel: [1, 1, 1],
            stride: [1; 3],
            padding: [0; 3],
            dilation: [1; 3],
            groups: 1,
        };
        let x = uniform(PAST + 1, 1);
        let cols = im2col::launch_im2col(cube::<R, 5>(&x, [1, PAST + 1, 1, 1, 1]), &w);
        assert_eq!(floats::<R, 3>(cols), im2col::im2col(&x, 1, &w), "im2col");
        let back = im2col::launch_col2im(cube::<R, 3>(&x, [1, PAST + 1, 1]), 1, &w);
        assert_eq!(floats::<R, 5>(back), im2col::col2im(&x, 1, &w), "col2im");
    }
}

cubecl_kernels::runtime_test! {
    fn gemm_with_more_cubes_than_a_grid_dimension_along_each_axis<R>() {
        let mul = ApproxMultiply::Plain;
        // z: batches (65,537 products of 1 × 1); y: rows; x: columns (every tile's cube covers
        // at most 128 rows or columns)
        let wide = PAST * 128 + 3;
        for (what, [batch, m, k, n]) in [
            ("batches along z", [PAST + 1, 1, 1, 1]),
            ("rows along y", [1, wide, 1, 1]),
            ("columns along x", [1, 1, 1, wide]),
        ] {
            let a = uniform(batch * m * k, 2);
            let b = uniform(batch * k * n, 3);
            let got = gemm::launch(
                cube::<R, 3>(&a, [batch, m, k]),
                cube::<R, 3>(&b, [batch, k, n]),
                &mul,
            );
            let want = approx_host::gemm(&a, &b, [batch, m, k, n], &mul);
            assert_matches_host::<R>(&floats::<R, 3>(got), &want, what);
        }
    }
}

cubecl_kernels::runtime_test! {
    fn sparse_act_pruning_and_weight_gradient_past_the_limits<R>() {
        // pruning: 256 units a cube over 65,536 · 256 + 1 blocks (of 1 value) along x
        let dims = [1, PAST * 256 + 1, 1];
        let x = uniform(dims[1], 4);
        let t = cube::<R, 3>(&x, dims);
        let norms = prune::launch_block_norms(&t, 1);
        let want: Vec<f32> = x.iter().map(|v| v * v).collect();
        assert_matches_host::<R>(&floats::<R, 2>(norms), &want, "block norms");
        // weight gradient: one row of cubes per block column, 65,537 of them
        let (dims, b, s, out) = ([1, 1, PAST + 1], 1, 0.5, 1);
        let x = uniform(dims[2], 5);
        let g = uniform(out, 6);
        let t = cube::<R, 3>(&x, dims);
        let norms = prune::launch_block_norms(&t, b);
        let pruned = prune::launch_compress(&t, &norms, b, keep_count(dims[2], s));
        let mul = ApproxMultiply::Plain;
        let dw = spmm::launch_weight_grad(&pruned, dims, b, &cube::<R, 2>(&g, [1, out]), &mul);
        let want = bsr_host::weight_grad(&bsr_host::prune(&x, dims, b, s), &g, out, &mul);
        assert_matches_host::<R>(&floats::<R, 2>(dw), &want, "BSpMM weight gradient");
    }
}

cubecl_kernels::runtime_test! {
    fn sparse_products_with_more_row_cubes_than_a_grid_dimension<R>() {
        // 16 activation rows a cube: 65,537 cubes along y
        let m = PAST * 16 + 1;
        let device = Default::default();
        let (out, k) = (4, 8);
        let x = uniform(m * k, 7);
        let w = random_packed(out, k, 4, 4, 8);
        let got = cubecl_kernels::hinm::launch_spmm(
            &cube::<R, 2>(&x, [m, k]),
            &PackedCube::upload(&w, &device),
        );
        let want = cubecl_kernels::hinm::reference::spmm(&x, m, &w);
        assert_matches_host::<R>(&floats::<R, 2>(got), &want, "HiNM");
        let w = random_bcrc(out, k, (1, 1), (1, 1), 9);
        let got = cubecl_kernels::bcrc::launch_spmm(
            &cube::<R, 2>(&x, [m, k]),
            &BcrcCube::upload(&w, &device),
        );
        let want = cubecl_kernels::bcrc::reference::spmm(&x, m, &w);
        assert_matches_host::<R>(&floats::<R, 2>(got), &want, "BCRC");
    }
}

cubecl_kernels::runtime_test! {
    fn broadcast_past_the_limits<R>() {
        // one channel over 65,536 · 256 + 1 values: past 65,535 cubes of 256 units along x
        let n = PAST * 256 + 1;
        let l = Layout::of(&[n, 1], 1, 1).unwrap();
        let x = uniform(n, 10);
        let alpha = [0.25f32];
        let y = broadcast::launch_prelu(&cube::<R, 2>(&x, [n, 1]), &cube::<R, 1>(&alpha, [1]), l);
        let want = broadcast::reference::prelu(&x, &alpha, l);
        assert_matches_host::<R>(&floats::<R, 2>(y), &want, "prelu");
    }
}

cubecl_kernels::runtime_test! {
    fn optimizer_steps_past_the_limits<R>() {
        // 65,536 · 256 + 1 values, one a unit: past 65,535 cubes of 256 units along x
        let n = PAST * 256 + 1;
        let (p, g) = (uniform(n, 11), uniform(n, 12));
        let s = cubecl_kernels::optim::AdamStep::new(0.9, 0.999, 1e-5, None, 1, 1e-3);
        let (gp, _, gv) = cubecl_kernels::optim::launch_adam(
            &cube::<R, 1>(&p, [n]),
            &cube::<R, 1>(&g, [n]),
            None,
            &s,
        );
        let (want_p, _, want_v) = cubecl_kernels::optim::reference::adam(&p, &g, None, &s);
        assert_matches_host::<R>(&floats::<R, 1>(gp), &want_p, "Adam: the parameter");
        assert_matches_host::<R>(&floats::<R, 1>(gv), &want_v, "Adam: the second moment");
    }
}

cubecl_kernels::runtime_test! {
    fn batch_norm_past_the_limits<R>() {
        // about 65,536 · 256 single values (inner 1: packs of one) over 3 channels: past 65,535
        // cubes of 256 units in the element-wise passes, thousands of segments a channel in
        // the sums; then 70,001 channels of one value (hundreds of cubes of one unit per
        // channel)
        use cubecl_kernels::broadcast::Layout;
        use cubecl_kernels::norm::{BatchNormStep, launch_batch_norm, launch_batch_norm_backward, reference};
        let s = BatchNormStep::new(1e-5, 0.1);
        for (outer, channels) in [(PAST * 256 / 3 + 1, 3), (1, 70_001)] {
            let l = Layout { outer, channels, inner: 1 };
            let n = l.len();
            let (x, dy) = (uniform(n, 13), uniform(n, 14));
            let (gamma, beta) = (uniform(channels, 15), uniform(channels, 16));
            let dx = cube::<R, 2>(&x, [outer, channels]);
            let (dg, db) = (cube::<R, 1>(&gamma, [channels]), cube::<R, 1>(&beta, [channels]));
            let got = launch_batch_norm(&dx, &dg, &db, None, l, &s);
            let want = reference::batch_norm(&x, &gamma, &beta, None, l, &s);
            let what = format!("batch norm of {l:?}");
            assert_matches_host::<R>(&floats::<R, 1>(got.var.clone()), &want.var, &format!("{what}: var"));
            assert_matches_host::<R>(&floats::<R, 2>(got.y), &want.y, &format!("{what}: y"));
            let (gdx, gdg, _) = launch_batch_norm_backward(
                &dx,
                &cube::<R, 2>(&dy, [outer, channels]),
                [&got.mean, &got.var, &dg],
                l,
                s.epsilon,
            );
            let (want_dx, want_dg, _) = reference::batch_norm_backward(
                &x,
                &dy,
                [&want.mean, &want.var, &gamma],
                l,
                s.epsilon,
            );
            assert_matches_host::<R>(&floats::<R, 2>(gdx), &want_dx, &format!("{what}: dx"));
            assert_matches_host::<R>(&floats::<R, 1>(gdg), &want_dg, &format!("{what}: dγ"));
        }
    }
}

cubecl_kernels::runtime_test! {
    fn relu_and_its_backward_past_the_limits<R>() {
        // 65,536 · 256 + 1 single values (an odd length: packs of one): past 65,535 cubes of
        // 256 units, in place and not
        use cubecl_kernels::activation::{Activation, launch_backward, launch_forward, reference};
        let n = PAST * 256 + 1;
        let (x, g) = (uniform(n, 17), uniform(n, 18));
        let dx = cube::<R, 1>(&x, [n]);
        let y = launch_forward(Activation::Relu, dx.clone());
        let want_y = reference::relu(&x);
        assert_matches_host::<R>(&floats::<R, 1>(y.clone()), &want_y, "ReLU");
        let got = launch_backward(Activation::Relu, &y, cube::<R, 1>(&g, [n]));
        let want = reference::relu_backward(&want_y, &g);
        assert_matches_host::<R>(&floats::<R, 1>(got), &want, "ReLU backward");
    }
}
