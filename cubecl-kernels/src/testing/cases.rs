//! The op-level suites' cases: every contraction of Burn's, as named outputs and gradients.

use super::leaf;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::module::{
    conv_transpose1d, conv_transpose2d, conv_transpose3d, conv1d, conv2d, conv3d, linear,
};
use burn::tensor::ops::{ConvOptions, ConvTransposeOptions};

/// Named outputs and gradients of a suite of cases (`"conv2d output"`, `"conv2d dw"`, …).
pub type Record = Vec<(String, Vec<f32>)>;

/// Outputs and gradients of every contraction Burn has, by name: matmul with a broadcast
/// batch, linear, conv1d/2d/3d and conv_transpose1d/2d/3d, with strides, padding, dilation and
/// groups, biases on some. What a decorator of contractions must reproduce (the identity
/// decorators bit for bit, ApproxMul's native multiplier bit for bit and its exact products
/// within rounding).
pub fn contraction_cases<B: AutodiffBackend>(device: &B::Device) -> Record {
    let mut out = Vec::new();
    let mut record =
        |name: &str, t: TensorData| out.push((name.to_string(), t.to_vec::<f32>().unwrap()));
    macro_rules! case {
        ($($case:tt)*) => {
            crate::record_case!(record, device, B, $($case)*)
        };
    }
    let (a, b) = (
        leaf::<B, 4>([2, 1, 3, 4], 1, device),
        leaf::<B, 4>([1, 3, 4, 5], 2, device),
    );
    case!(
        "matmul (broadcast batch)",
        [a, b],
        a.clone().matmul(b.clone())
    );
    let (x, w, bias) = (
        leaf::<B, 3>([2, 3, 6], 3, device),
        leaf::<B, 2>([6, 5], 4, device),
        leaf::<B, 1>([5], 5, device),
    );
    case!(
        "linear",
        [x, w, bias],
        linear(x.clone(), w.clone(), Some(bias.clone()))
    );
    let (x, w, bias) = (
        leaf::<B, 3>([2, 4, 11], 6, device),
        leaf::<B, 3>([6, 2, 3], 7, device),
        leaf::<B, 1>([6], 8, device),
    );
    case!(
        "conv1d",
        [x, w, bias],
        conv1d(
            x.clone(),
            w.clone(),
            Some(bias.clone()),
            ConvOptions::new([2], [1], [2], 2)
        )
    );
    let (x, w, bias) = (
        leaf::<B, 4>([2, 4, 7, 8], 9, device),
        leaf::<B, 4>([6, 2, 3, 2], 10, device),
        leaf::<B, 1>([6], 11, device),
    );
    case!(
        "conv2d",
        [x, w, bias],
        conv2d(
            x.clone(),
            w.clone(),
            Some(bias.clone()),
            ConvOptions::new([2, 1], [1, 2], [1, 2], 2)
        )
    );
    let (x, w) = (
        leaf::<B, 5>([1, 2, 4, 5, 4], 12, device),
        leaf::<B, 5>([3, 2, 2, 3, 2], 13, device),
    );
    case!(
        "conv3d",
        [x, w],
        conv3d(
            x.clone(),
            w.clone(),
            None,
            ConvOptions::new([1, 2, 1], [1, 0, 1], [1, 1, 2], 1)
        )
    );
    let (x, w, bias) = (
        leaf::<B, 3>([2, 4, 5], 14, device),
        leaf::<B, 3>([4, 3, 3], 15, device),
        leaf::<B, 1>([6], 16, device),
    );
    case!(
        "conv_transpose1d",
        [x, w, bias],
        conv_transpose1d(
            x.clone(),
            w.clone(),
            Some(bias.clone()),
            ConvTransposeOptions::new([2], [1], [1], [1], 2)
        )
    );
    let (x, w) = (
        leaf::<B, 4>([2, 4, 4, 3], 17, device),
        leaf::<B, 4>([4, 1, 3, 2], 18, device),
    );
    case!(
        "conv_transpose2d",
        [x, w],
        conv_transpose2d(
            x.clone(),
            w.clone(),
            None,
            ConvTransposeOptions::new([2, 3], [1, 0], [1, 2], [1, 2], 4)
        )
    );
    let (x, w) = (
        leaf::<B, 5>([1, 2, 3, 2, 3], 19, device),
        leaf::<B, 5>([2, 3, 2, 2, 2], 20, device),
    );
    case!(
        "conv_transpose3d",
        [x, w],
        conv_transpose3d(
            x.clone(),
            w.clone(),
            None,
            ConvTransposeOptions::new([2, 1, 2], [0, 1, 1], [1, 0, 0], [1, 1, 2], 1)
        )
    );
    out
}
