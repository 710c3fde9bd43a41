//! The im2col / col2im kernels against their host references on the runtime
//! `EMBER_TEST_RUNTIME` selects (wgpu by default, lavapipe where there is no GPU): strides,
//! padding, dilation, groups, 1- to 3-d windows and a strided input, bit for bit; the chunked
//! layout is the same columns, each run of samples stored together.

use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use cubecl_kernels::approx::im2col::{self, Window};
use cubecl_kernels::testing::{TestBackend, TestRuntime};

fn values(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919) % 1013) as f32 / 101.0 - 5.0)
        .collect()
}

fn read<R: TestRuntime, const D: usize>(t: burn_cubecl::tensor::CubeTensor<R>) -> Vec<f32> {
    Tensor::<TestBackend<R>, D>::from_primitive(TensorPrimitive::Float(t))
        .into_data()
        .to_vec()
        .unwrap()
}

fn tensor<R: TestRuntime, const D: usize>(
    values: &[f32],
    shape: [usize; D],
) -> Tensor<TestBackend<R>, D> {
    Tensor::from_data(TensorData::new(values.to_vec(), shape), &Default::default())
}

fn windows() -> Vec<(usize, Window)> {
    let base = Window {
        channels: 3,
        input: [1, 9, 8],
        kernel: [1, 3, 3],
        stride: [1; 3],
        padding: [0; 3],
        dilation: [1; 3],
        groups: 1,
    };
    vec![
        (2, base),
        (
            3,
            Window {
                channels: 4,
                stride: [1, 2, 3],
                padding: [0, 1, 2],
                dilation: [1, 2, 1],
                groups: 2,
                ..base
            },
        ),
        (
            1,
            Window {
                channels: 2,
                input: [1, 1, 17],
                kernel: [1, 1, 4],
                padding: [0, 0, 3],
                ..base
            },
        ),
        (
            2,
            Window {
                input: [4, 5, 3],
                kernel: [2, 2, 3],
                stride: [2, 1, 1],
                padding: [1, 1, 1],
                groups: 3,
                ..base
            },
        ),
    ]
}

cubecl_kernels::runtime_test! {
    fn kernels_match_their_host_references<R>() {
        for (batch, w) in windows() {
            let channels = w.channels;
            let [d, h, wd] = w.input;
            let x = values(batch * channels * d * h * wd);
            let t = tensor::<R, 5>(&x, [batch, channels, d, h, wd]);
            let cols = im2col::launch_im2col(t.into_primitive().tensor(), &w);
            let want = im2col::im2col(&x, batch, &w);
            assert_eq!(read::<R, 3>(cols), want, "im2col {w:?}");

            let y = values(want.len());
            let rows = channels / w.groups * w.kvol();
            let t = tensor::<R, 3>(&y, [w.groups, rows, batch * w.positions()]);
            let back = im2col::launch_col2im(t.into_primitive().tensor(), batch, &w);
            assert_eq!(
                read::<R, 5>(back),
                im2col::col2im(&y, batch, &w),
                "col2im {w:?}"
            );
        }
    }
}

cubecl_kernels::runtime_test! {
    fn im2col_reads_strided_inputs<R>() {
        let (batch, w) = windows()[1];
        let channels = w.channels;
        let [d, h, wd] = w.input;
        // stored as [C, B, ...] and viewed as [B, C, ...]
        let stored = values(batch * channels * d * h * wd);
        let t = tensor::<R, 5>(&stored, [channels, batch, d, h, wd]).swap_dims(0, 1);
        let plane = d * h * wd;
        let x: Vec<f32> = (0..batch * channels * plane)
            .map(|i| {
                let (b, c, p) = (i / (channels * plane), i / plane % channels, i % plane);
                stored[(c * batch + b) * plane + p]
            })
            .collect();
        let cols = im2col::launch_im2col(t.into_primitive().tensor(), &w);
        assert_eq!(read::<R, 3>(cols), im2col::im2col(&x, batch, &w));
    }
}

cubecl_kernels::runtime_test! {
    fn col2im_reads_columns_with_padded_rows<R>() {
        let (batch, w) = windows()[0];
        let rows = w.channels / w.groups * w.kvol();
        let width = batch * w.positions();
        let y = values(w.groups * rows * width);
        // rows padded by 8 columns, as burn-cuda lays tensors out: a view, not a copy
        let wide = width + 8;
        let mut stored = vec![f32::NAN; w.groups * rows * wide];
        for (r, row) in y.chunks(width).enumerate() {
            stored[r * wide..r * wide + width].copy_from_slice(row);
        }
        let t =
            tensor::<R, 3>(&stored, [w.groups, rows, wide]).slice([0..w.groups, 0..rows, 0..width]);
        assert!(!t.clone().into_primitive().tensor().is_contiguous());
        let back = im2col::launch_col2im(t.into_primitive().tensor(), batch, &w);
        assert_eq!(read::<R, 5>(back), im2col::col2im(&y, batch, &w));
    }
}

cubecl_kernels::runtime_test! {
    fn chunked_columns_are_the_columns_of_each_run_of_samples<R>() {
        for (batch, w) in windows().into_iter().chain([(6, windows()[1].1)]) {
            let channels = w.channels;
            let [d, h, wd] = w.input;
            let x = values(batch * channels * d * h * wd);
            let plain = im2col::im2col(&x, batch, &w);
            let [groups, rows, len] = w.cols_shape(batch);
            for chunks in (1..=batch).filter(|c| batch % c == 0) {
                let t = tensor::<R, 5>(&x, [batch, channels, d, h, wd]);
                let cols = im2col::launch_im2col_chunked(t.into_primitive().tensor(), &w, chunks);
                let chunk = len / chunks;
                assert_eq!(cols.meta.shape().dims::<4>(), [chunks, groups, rows, chunk]);
                // plain [G·rows, S, chunk] → [S, G·rows, chunk]
                let want: Vec<f32> = (0..chunks * groups * rows * chunk)
                    .map(|i| {
                        let (s, r, at) = (i / (groups * rows * chunk), i / chunk % (groups * rows), i % chunk);
                        plain[r * len + s * chunk + at]
                    })
                    .collect();
                assert_eq!(read::<R, 4>(cols), want, "{chunks} chunks of {w:?}");
            }
        }
        // chunks that do not divide the batch are refused
        let (_, w) = windows()[1];
        let [d, h, wd] = w.input;
        let t = tensor::<R, 5>(&values(6 * w.channels * d * h * wd), [6, w.channels, d, h, wd]);
        let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            im2col::launch_im2col_chunked(t.into_primitive().tensor(), &w, 4)
        }))
        .expect_err("4 chunks of 6 samples");
        let why = refused.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(why.contains("4 chunks of a batch of 6"), "{why}");
    }
}
