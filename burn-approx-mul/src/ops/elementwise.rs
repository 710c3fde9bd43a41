//! Burn's element-wise arithmetic on the GEMM routes of a backend without CubeCL kernels:
//! binary ops with broadcasting, sigmoid, tanh, GELU, ReLU's, sigmoid's and GELU's backward and
//! the reshape of a strided view run through [`cubecl_kernels::elementwise`], bit-identical to
//! burn-ndarray's. On CubeCL backends the activations run [`cubecl_kernels::activation`]'s
//! kernels. On [`ConvRoute::Burn`], and for operands neither takes (other element types), the
//! inner backend's op runs.

use super::native::ConvRoute;
use crate::ApproxMul;
use burn_backend::tensor::FloatTensor;
use burn_backend::{Shape, TensorData};
use cubecl_kernels::activation::{Activation, ops as activation};
use cubecl_kernels::decorator::{KernelBackend, Wrapped};
use cubecl_kernels::elementwise::{self, Binary};

/// `op` of `lhs` and `rhs` on the host, or both back when the host cannot view them or their
/// shapes do not broadcast (the inner backend's op then runs and reports it).
pub(crate) fn binary<B: KernelBackend>(
    op: Binary,
    lhs: FloatTensor<B>,
    rhs: FloatTensor<B>,
) -> Result<FloatTensor<B>, (FloatTensor<B>, FloatTensor<B>)> {
    let out = match (B::float_host_view(&lhs), B::float_host_view(&rhs)) {
        (Some(a), Some(b)) => elementwise::binary(op, &a, &b),
        _ => None,
    };
    match out {
        Some((values, shape)) => Ok(on_device_of::<B>(&lhs, values, shape)),
        None => Err((lhs, rhs)),
    }
}

/// Host `values` of `shape` as a tensor on `like`'s device.
fn on_device_of<B: KernelBackend>(
    like: &FloatTensor<B>,
    values: Vec<f32>,
    shape: impl Into<Shape>,
) -> FloatTensor<B> {
    let device = B::float_device(like);
    B::float_from_data(TensorData::new(values, shape), &device)
}

/// `t` reshaped to `shape` on the GEMM routes (`ApproxMul::float_reshape`, the linear layers'
/// rows): a row-major host tensor in place ([`KernelBackend::float_reshape_view`]: burn-ndarray
/// copies it), a strided host view copied in row-major order (in place of burn-ndarray's
/// value-by-value walk), anything else by the backend's own reshape.
pub(crate) fn reshape<B: KernelBackend>(t: FloatTensor<B>, shape: Shape) -> FloatTensor<B> {
    let t = match B::float_reshape_view(t, shape.as_slice()) {
        Ok(view) => return view,
        Err(t) => t,
    };
    let values = match B::float_host_view(&t) {
        Some(view) if !view.is_row_major() => {
            let numel: usize = view.shape.iter().product();
            (numel == shape.num_elements()).then(|| elementwise::to_row_major(&view))
        }
        _ => None,
    };
    match values {
        Some(values) => on_device_of::<B>(&t, values, shape),
        None => B::float_reshape(t, shape),
    }
}

/// `pass` of `t` on the host (a pass of [`elementwise`]: sigmoid, bit for bit the composite
/// of burn-ndarray's ops, or tanh, burn-ndarray's), or `t` back when the host cannot view it.
fn host_pass<B: KernelBackend>(
    t: FloatTensor<B>,
    pass: fn(&elementwise::HostView<'_>) -> Vec<f32>,
) -> Result<FloatTensor<B>, FloatTensor<B>> {
    let values = B::float_host_view(&t).map(|view| (pass(&view), view.shape));
    match values {
        Some((values, shape)) => Ok(on_device_of::<B>(&t, values, shape)),
        None => Err(t),
    }
}

/// tanh of `x` on the GEMM routes: Ember's host pass where the host views `x` (burn-ndarray's
/// values, over rayon's threads on long tensors); the inner backend's op elsewhere (one
/// kernel on a CubeCL runtime) and on `--conv burn`.
pub(crate) fn tanh<B: KernelBackend>(x: FloatTensor<ApproxMul<B>>) -> FloatTensor<ApproxMul<B>> {
    let cfg = x.config;
    let out = match cfg.conv() {
        ConvRoute::Burn => B::float_tanh(x.inner),
        _ => host_pass::<B>(x.inner, elementwise::tanh).unwrap_or_else(B::float_tanh),
    };
    Wrapped::new(out, cfg)
}

/// `op` of `x` on the GEMM routes: one kernel on a CubeCL runtime, Ember's host pass for
/// sigmoid and GELU where the host views `x`; by `inner` (the inner backend's op) where those
/// decline and on `--conv burn`.
pub(crate) fn activation_forward<B: KernelBackend>(
    op: Activation,
    x: FloatTensor<ApproxMul<B>>,
    inner: fn(FloatTensor<B>) -> FloatTensor<B>,
) -> FloatTensor<ApproxMul<B>> {
    let cfg = x.config;
    let out = match cfg.conv() {
        ConvRoute::Burn => inner(x.inner),
        _ => activation::forward::<B>(op, x.inner)
            .or_else(|x| match op {
                Activation::Sigmoid => host_pass::<B>(x, elementwise::sigmoid),
                Activation::Gelu => host_pass::<B>(x, elementwise::gelu),
                Activation::Relu => Err(x),
            })
            .unwrap_or_else(inner),
    };
    Wrapped::new(out, cfg)
}

/// `op`'s backward from `saved` (ReLU's and sigmoid's output, GELU's input) and `grad` on the
/// GEMM routes: Ember's host loop for ReLU, sigmoid and GELU where the host views both
/// operands, one kernel on a CubeCL runtime; by `inner` (the inner backend's op) where those
/// decline and on `--conv burn`.
pub(crate) fn activation_backward<B: KernelBackend>(
    op: Activation,
    saved: FloatTensor<ApproxMul<B>>,
    grad: FloatTensor<ApproxMul<B>>,
    inner: fn(FloatTensor<B>, FloatTensor<B>) -> FloatTensor<B>,
) -> FloatTensor<ApproxMul<B>> {
    let cfg = saved.config;
    let out = match cfg.conv() {
        ConvRoute::Burn => inner(saved.inner, grad.inner),
        _ => match op {
            Activation::Relu => binary::<B>(Binary::ReluBackward, saved.inner, grad.inner),
            Activation::Sigmoid => binary::<B>(Binary::SigmoidBackward, saved.inner, grad.inner),
            Activation::Gelu => binary::<B>(Binary::GeluBackward, saved.inner, grad.inner),
        }
        .or_else(|(s, g)| activation::backward::<B>(op, s, g))
        .unwrap_or_else(|(s, g)| inner(s, g)),
    };
    Wrapped::new(out, cfg)
}
