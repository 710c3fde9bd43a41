//! The host convolution against the naive one, its gradients as the adjoints of the forward
//! pass, and its refusals.

use super::*;
use crate::approx::im2col as reference;

/// Small integers: every sum below is exact, so results compare bit for bit.
fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 + seed * 13) % 11) as f32 - 5.0)
        .collect()
}

/// The naive convolution as the oracle: every output a direct sum over its window.
fn naive(x: &[f32], weight: &[f32], conv: &DenseConv) -> Vec<f32> {
    let cols = reference::im2col(x, conv.batch, &conv.window);
    let (k, l, og, g_n) = (conv.k(), conv.l(), conv.og(), conv.groups());
    let bl = conv.batch * l;
    let mut y = vec![0f32; conv.batch * conv.output_len()];
    for b in 0..conv.batch {
        for g in 0..g_n {
            for o in 0..og {
                for p in 0..l {
                    let mut acc = 0f32;
                    for r in 0..k {
                        acc += weight[(g * og + o) * k + r] * cols[(g * k + r) * bl + b * l + p];
                    }
                    y[(b * conv.out_channels + g * og + o) * l + p] = acc;
                }
            }
        }
    }
    y
}

fn cases() -> Vec<DenseConv> {
    let strided = Window {
        stride: [1, 2, 2],
        padding: [0, 1, 1],
        ..Window::dense(4, [1, 7, 6], [1, 3, 3])
    };
    let dilated = Window {
        dilation: [1, 2, 1],
        padding: [0, 2, 0],
        stride: [1, 1, 3],
        groups: 2,
        ..Window::dense(4, [1, 6, 9], [1, 3, 2])
    };
    let three_d = Window {
        padding: [1, 0, 1],
        ..Window::dense(2, [3, 4, 5], [2, 2, 3])
    };
    // a kernel larger than the input with padding: some runs read nothing
    let wide = Window {
        padding: [0, 2, 2],
        ..Window::dense(1, [1, 2, 2], [1, 5, 5])
    };
    vec![
        DenseConv {
            batch: 3,
            window: strided,
            out_channels: 5,
        },
        DenseConv {
            batch: 2,
            window: dilated,
            out_channels: 6,
        },
        DenseConv {
            batch: 2,
            window: three_d,
            out_channels: 3,
        },
        DenseConv {
            batch: 5,
            window: Window::dense(6, [1, 4, 4], [1, 1, 1]),
            out_channels: 4,
        },
        DenseConv {
            batch: 1,
            window: wide,
            out_channels: 2,
        },
        // 49 positions a sample: products of 3 samples' columns, the last of 2
        DenseConv {
            batch: 5,
            window: Window::dense(3, [1, 9, 9], [1, 3, 3]),
            out_channels: 4,
        },
    ]
}

#[test]
fn forward_equals_the_naive_convolution() {
    for conv in cases() {
        let x = values(conv.batch * conv.input_len(), 1);
        let w = values(conv.weight_len(), 2);
        let bias = values(conv.out_channels, 3);
        let mut want = naive(&x, &w, &conv);
        assert_eq!(forward(&x, &w, None, &conv), want, "{conv:?}");
        let l = conv.l();
        for (i, v) in want.iter_mut().enumerate() {
            *v += bias[i / l % conv.out_channels];
        }
        assert_eq!(forward(&x, &w, Some(&bias), &conv), want, "{conv:?}");
    }
}

#[test]
fn gradients_are_the_adjoints_of_the_forward_pass() {
    // <y, dy> = <x, dx(dy)> = <W, dW(x, dy)> with small integers (exact sums)
    for conv in cases() {
        let x = values(conv.batch * conv.input_len(), 4);
        let w = values(conv.weight_len(), 5);
        let dy = values(conv.batch * conv.output_len(), 6);
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(a, b)| a * b).sum::<f32>();
        let y = forward(&x, &w, None, &conv);
        let dx = input_grad(&dy, &w, &conv);
        let dw = weight_grad(&x, &dy, &conv);
        assert_eq!(dot(&y, &dy), dot(&x, &dx), "input grad of {conv:?}");
        assert_eq!(dot(&y, &dy), dot(&w, &dw), "weight grad of {conv:?}");
        // and each equals the reference lowering: dx by col2im of Wᵀ·dy
        let want_dx = {
            let (k, l, og) = (conv.k(), conv.l(), conv.og());
            let bl = conv.batch * l;
            let mut dcols = vec![0f32; conv.groups() * k * bl];
            for g in 0..conv.groups() {
                for r in 0..k {
                    for b in 0..conv.batch {
                        for p in 0..l {
                            dcols[(g * k + r) * bl + b * l + p] = (0..og)
                                .map(|o| {
                                    w[(g * og + o) * k + r]
                                        * dy[(b * conv.out_channels + g * og + o) * l + p]
                                })
                                .sum();
                        }
                    }
                }
            }
            reference::col2im(&dcols, conv.batch, &conv.window)
        };
        assert_eq!(dx, want_dx, "{conv:?}");
    }
}

#[test]
fn weight_gradient_sums_over_every_sample_with_any_thread_count() {
    let conv = cases()[0];
    let x = values(conv.batch * conv.input_len(), 7);
    let dy = values(conv.batch * conv.output_len(), 8);
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let three = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    let a = one.install(|| weight_grad(&x, &dy, &conv));
    let b = three.install(|| weight_grad(&x, &dy, &conv));
    assert_eq!(a, b);
    // per sample, summed by hand
    let mut want = vec![0f32; conv.weight_len()];
    for s in 0..conv.batch {
        let single = DenseConv { batch: 1, ..conv };
        let part = weight_grad(
            &x[s * conv.input_len()..][..conv.input_len()],
            &dy[s * conv.output_len()..][..conv.output_len()],
            &single,
        );
        want.iter_mut().zip(part).for_each(|(a, b)| *a += b);
    }
    assert_eq!(a, want);
}

#[test]
fn batched_columns_equal_the_host_reference_bit_for_bit() {
    for conv in cases() {
        let (w, batch) = (conv.window, conv.batch);
        let x: Vec<f32> = (0..batch * conv.input_len())
            .map(|i| (i as f32 * 0.37).sin())
            .collect();
        let cols = im2col_batch(&x, batch, &w);
        assert_eq!(cols, reference::im2col(&x, batch, &w), "{w:?}");
        let y: Vec<f32> = (0..cols.len()).map(|i| (i as f32 * 0.11).cos()).collect();
        assert_eq!(
            col2im_batch(&y, batch, &w),
            reference::col2im(&y, batch, &w),
            "{w:?}"
        );
    }
}

#[test]
fn empty_batches_and_channels_give_empty_or_zero_results() {
    let conv = DenseConv {
        batch: 0,
        ..cases()[0]
    };
    assert!(forward(&[], &values(conv.weight_len(), 1), None, &conv).is_empty());
    assert!(input_grad(&[], &values(conv.weight_len(), 1), &conv).is_empty());
    assert_eq!(weight_grad(&[], &[], &conv), vec![0.0; conv.weight_len()]);
}

#[test]
#[should_panic(expected = "dense conv: input length")]
fn a_wrong_input_length_is_refused() {
    let conv = cases()[0];
    forward(&[1.0; 3], &values(conv.weight_len(), 1), None, &conv);
}
