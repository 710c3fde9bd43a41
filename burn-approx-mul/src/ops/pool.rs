//! 2-d max pooling on the GEMM routes of a backend without CubeCL kernels: the forward pass
//! (with or without the maxima's indices) and its backward run on Ember's host loops
//! ([`cubecl_kernels::pool`]), bit-identical to burn-ndarray's, which copies the input into a
//! padded array and reads every value through bounds-checked 4-d indexing. On CubeCL backends,
//! on [`ConvRoute::Burn`], for operands the host cannot view row-major (other element types,
//! strided views) and for shapes the host loops decline, the inner backend's op runs.

use super::native::ConvRoute;
use burn_backend::ops::MaxPool2dWithIndices;
use burn_backend::tensor::{FloatTensor, IntTensor};
use burn_backend::{Shape, TensorData, TensorMetadata};
use cubecl_kernels::decorator::KernelBackend;
use cubecl_kernels::pool::{self, Pool2d};

/// The shape of a rank-4 tensor, or `None`.
fn dims4(shape: &Shape) -> Option<[usize; 4]> {
    (shape.num_dims() == 4).then(|| [shape[0], shape[1], shape[2], shape[3]])
}

/// The max pooling of `x` by `window` on the host (with the maxima's indices where `indices`),
/// where `route` and the backend allow it; `None` elsewhere.
fn host<B: KernelBackend>(
    x: &FloatTensor<B>,
    window: &Pool2d,
    indices: bool,
    route: ConvRoute,
) -> Option<pool::Pooled> {
    match (route, B::float_host_slice(x), dims4(&x.shape())) {
        (ConvRoute::Burn, _, _) => None,
        (_, Some(values), Some(shape)) => pool::max_pool2d(values, shape, window, indices),
        _ => None,
    }
}

/// Burn's `max_pool2d` of `x` by the window `w` on `route`.
pub(crate) fn max_pool2d<B: KernelBackend>(
    x: FloatTensor<B>,
    w: Pool2d,
    route: ConvRoute,
) -> FloatTensor<B> {
    match host::<B>(&x, &w, false, route) {
        Some(p) => B::float_from_data(TensorData::new(p.values, p.shape), &B::float_device(&x)),
        None => B::max_pool2d(x, w.kernel, w.stride, w.padding, w.dilation, w.ceil_mode),
    }
}

/// Burn's `max_pool2d_with_indices` of `x` by the window `w` on `route`.
pub(crate) fn max_pool2d_with_indices<B: KernelBackend>(
    x: FloatTensor<B>,
    w: Pool2d,
    route: ConvRoute,
) -> MaxPool2dWithIndices<B> {
    match host::<B>(&x, &w, true, route) {
        Some(pool::Pooled {
            values,
            indices: Some(indices),
            shape,
        }) => {
            let device = B::float_device(&x);
            MaxPool2dWithIndices {
                output: B::float_from_data(TensorData::new(values, shape), &device),
                indices: B::int_from_data(TensorData::new(indices, shape), &device),
            }
        }
        _ => B::max_pool2d_with_indices(x, w.kernel, w.stride, w.padding, w.dilation, w.ceil_mode),
    }
}

/// Burn's `max_pool2d_with_indices_backward`: the gradient of the input `x` of a max pooling by
/// the window `w` from its output gradient and the maxima's `indices`, on the host where `route` and
/// the backend allow it, the gradient is row-major, the indices are readable (borrowed where the
/// backend holds them as `i64` in host memory, [`KernelBackend::int_host_i64`]) and each falls
/// in its input plane; the inner backend's op otherwise.
pub(crate) fn max_pool2d_backward<B: KernelBackend>(
    x: FloatTensor<B>,
    w: Pool2d,
    output_grad: FloatTensor<B>,
    indices: IntTensor<B>,
    route: ConvRoute,
) -> FloatTensor<B> {
    let dx = match (
        route,
        dims4(&x.shape()),
        dims4(&output_grad.shape()),
        B::float_host_slice(&output_grad),
    ) {
        (ConvRoute::Burn, ..) => None,
        (_, Some(x_shape), Some([batch, channels, out_h, out_w]), Some(grad))
            if [batch, channels] == [x_shape[0], x_shape[1]] =>
        {
            let out = [out_h, out_w];
            match B::int_host_i64(&indices) {
                Some(index) => pool::max_pool2d_backward(grad, index, x_shape, out),
                // other int elements: read (value by value on ndarray)
                None => burn_std::reader::try_read_sync(B::int_into_data(indices.clone()))
                    .and_then(Result::ok)
                    .and_then(|data| data.convert::<i64>().into_vec::<i64>().ok())
                    .and_then(|index| pool::max_pool2d_backward(grad, &index, x_shape, out)),
            }
            .map(|dx| (dx, x_shape))
        }
        _ => None,
    };
    match dx {
        Some((dx, shape)) => {
            let device = B::float_device(&x);
            B::float_from_data(TensorData::new(dx, shape), &device)
        }
        None => {
            B::max_pool2d_with_indices_backward(
                x,
                w.kernel,
                w.stride,
                w.padding,
                w.dilation,
                w.ceil_mode,
                output_grad,
                indices,
            )
            .x_grad
        }
    }
}
