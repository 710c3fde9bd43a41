//! Burn's element-wise arithmetic on the GEMM routes of a backend without CubeCL kernels:
//! binary ops with broadcasting, ReLU's backward and the reshape of a strided view run through
//! [`cubecl_kernels::elementwise`], bit-identical to burn-ndarray's. On
//! CubeCL backends, on [`ConvRoute::Burn`](super::native::ConvRoute::Burn), and for operands
//! the host cannot view (other element types), the inner backend's op runs.

use burn_backend::tensor::FloatTensor;
use burn_backend::{Shape, TensorData};
use cubecl_kernels::decorator::KernelBackend;
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
        Some((values, shape)) => {
            let device = B::float_device(&lhs);
            Ok(B::float_from_data(TensorData::new(values, shape), &device))
        }
        None => Err((lhs, rhs)),
    }
}

/// `t` reshaped to `shape`: a strided host view is copied in row-major order on the host (in
/// place of burn-ndarray's value-by-value walk); anything else is handed back.
pub(crate) fn reshape<B: KernelBackend>(
    t: FloatTensor<B>,
    shape: &Shape,
) -> Result<FloatTensor<B>, FloatTensor<B>> {
    let values = match B::float_host_view(&t) {
        Some(view) if !view.is_row_major() => {
            let numel: usize = view.shape.iter().product();
            (numel == shape.num_elements()).then(|| elementwise::to_row_major(&view))
        }
        _ => None,
    };
    match values {
        Some(values) => {
            let device = B::float_device(&t);
            Ok(B::float_from_data(
                TensorData::new(values, shape.clone()),
                &device,
            ))
        }
        None => Err(t),
    }
}
