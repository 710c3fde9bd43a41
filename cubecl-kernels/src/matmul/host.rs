//! The product on host memory: burn-ndarray's own arithmetic with its operands read where they
//! lie.
//!
//! burn-ndarray 0.21's `float_matmul` reshapes each operand to `[batch, m, k]` before it
//! multiplies, and a strided operand (autodiff hands both gradients of every product a transposed
//! view: `dy · Wᵀ`, `xᵀ · dy`) is copied there value by value. Its product is matrixmultiply's
//! `sgemm`, one call per batch entry, which takes a row and a column stride for each operand and
//! packs both into panels of its own whatever their layout: called here on the views as they are,
//! it sums the same products in the same order, so the result has burn-ndarray's bits. Batch
//! entries run in parallel as burn-ndarray runs them (each is one `sgemm`, whose own threads are
//! matrixmultiply's).

use crate::elementwise::{HostView, broadcast_shape};
use rayon::prelude::*;

/// `lhs · rhs` of host views `lhs: [..., m, k]` and `rhs: [..., k, n]` of one rank `≥ 2`, leading
/// dimensions broadcast as Burn's `float_matmul` does (equal, or 1 on one side): the row-major
/// values of `[..., m, n]` and that shape. `None` where the ranks or the shapes do not agree
/// (the caller runs the backend's op, which reports the error).
pub fn matmul(lhs: &HostView<'_>, rhs: &HostView<'_>) -> Option<(Vec<f32>, Vec<usize>)> {
    let rank = lhs.shape.len();
    if rank < 2 || rhs.shape.len() != rank {
        return None;
    }
    let (m, k, n) = (
        lhs.shape[rank - 2],
        lhs.shape[rank - 1],
        rhs.shape[rank - 1],
    );
    if rhs.shape[rank - 2] != k {
        return None;
    }
    let mut shape = broadcast_shape(&lhs.shape[..rank - 2], &rhs.shape[..rank - 2])?;
    let batch: usize = shape.iter().product();
    shape.extend([m, n]);
    let mut out = vec![0f32; batch * m * n];
    if m * n == 0 || k == 0 {
        // burn-ndarray's output starts zeroed, and an empty sum leaves it so
        return Some((out, shape));
    }
    // an operand's offset for output batch entry `b` (length-1 axes have stride 0)
    let offset = |view: &HostView<'_>, mut b: usize| {
        let mut at = 0;
        for d in (0..rank - 2).rev() {
            if view.shape[d] > 1 {
                at += b % shape[d] * view.strides[d];
            }
            b /= shape[d];
        }
        at
    };
    let product = |(b, c): (usize, &mut [f32])| {
        let (a, r) = (&lhs.values[offset(lhs, b)..], &rhs.values[offset(rhs, b)..]);
        // SAFETY: every index of both views falls inside their values (`HostView`'s contract),
        // read from their entry's offset with their strides; `c` holds `m · n` values, written
        // row-major; beta is 0, so `c` is only written.
        unsafe {
            matrixmultiply::sgemm(
                m,
                k,
                n,
                1.0,
                a.as_ptr(),
                stride(lhs.strides[rank - 2]),
                stride(lhs.strides[rank - 1]),
                r.as_ptr(),
                stride(rhs.strides[rank - 2]),
                stride(rhs.strides[rank - 1]),
                0.0,
                c.as_mut_ptr(),
                n as isize,
                1,
            )
        }
    };
    if batch == 1 {
        product((0, &mut out));
    } else {
        out.par_chunks_mut(m * n).enumerate().for_each(product);
    }
    Some((out, shape))
}

fn stride(s: usize) -> isize {
    isize::try_from(s).expect("a host view's stride fits in isize")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The naive product of two views in f64, for the shapes' sake (the bits are checked
    /// against burn-ndarray in the crate's integration tests).
    fn naive(lhs: &HostView<'_>, rhs: &HostView<'_>) -> Vec<f64> {
        let at = |v: &HostView<'_>, i: &[usize]| -> f64 {
            let idx: usize = i
                .iter()
                .zip(&v.shape)
                .zip(&v.strides)
                .map(|((&i, &n), &s)| if n == 1 { 0 } else { i * s })
                .sum();
            v.values[idx] as f64
        };
        let (m, k, n) = (lhs.shape[1], lhs.shape[2], rhs.shape[2]);
        let batch = lhs.shape[0].max(rhs.shape[0]);
        let mut out = Vec::new();
        for b in 0..batch {
            for i in 0..m {
                for j in 0..n {
                    out.push(
                        (0..k)
                            .map(|p| at(lhs, &[b, i, p]) * at(rhs, &[b, p, j]))
                            .sum(),
                    );
                }
            }
        }
        out
    }

    fn values(len: usize, seed: f32) -> Vec<f32> {
        (0..len)
            .map(|i| ((i as f32 + seed) * 0.731).sin())
            .collect()
    }

    /// A `[batch, rows, cols]` view of row-major `[batch, cols, rows]` values: transposed.
    fn transposed(values: &[f32], [batch, rows, cols]: [usize; 3]) -> HostView<'_> {
        HostView {
            values,
            shape: vec![batch, rows, cols],
            strides: vec![if batch == 1 { 0 } else { rows * cols }, 1, rows],
        }
    }

    #[test]
    fn transposed_and_broadcast_operands_give_the_product() {
        for (batch_l, batch_r, m, k, n) in [(1, 1, 5, 7, 3), (3, 3, 4, 1, 6), (1, 4, 9, 17, 2)] {
            let (a, b) = (values(batch_l * m * k, 0.0), values(batch_r * k * n, 1.0));
            let lhs_views = [
                HostView::row_major(&a, &[batch_l, m, k]),
                transposed(&a, [batch_l, m, k]),
            ];
            let rhs_views = [
                HostView::row_major(&b, &[batch_r, k, n]),
                transposed(&b, [batch_r, k, n]),
            ];
            for lhs in &lhs_views {
                for rhs in &rhs_views {
                    let (got, shape) = matmul(lhs, rhs).unwrap();
                    assert_eq!(shape, [batch_l.max(batch_r), m, n]);
                    for (g, w) in got.iter().zip(naive(lhs, rhs)) {
                        assert!((*g as f64 - w).abs() < 1e-5, "{g} vs {w}");
                    }
                }
            }
        }
    }

    #[test]
    fn empty_sums_are_zero_and_disagreeing_shapes_are_declined() {
        let (a, b) = (vec![0f32; 0], vec![0f32; 0]);
        let (got, shape) = matmul(
            &HostView::row_major(&a, &[2, 3, 0]),
            &HostView::row_major(&b, &[2, 0, 4]),
        )
        .unwrap();
        assert_eq!((got, shape), (vec![0f32; 24], vec![2, 3, 4]));
        let (a, b) = (values(6, 0.0), values(8, 0.0));
        // inner dimensions 3 and 4
        assert!(
            matmul(
                &HostView::row_major(&a, &[2, 3]),
                &HostView::row_major(&b, &[4, 2])
            )
            .is_none()
        );
        // batches 2 and 3
        let (a, b) = (values(12, 0.0), values(18, 0.0));
        assert!(
            matmul(
                &HostView::row_major(&a, &[2, 2, 3]),
                &HostView::row_major(&b, &[3, 3, 2])
            )
            .is_none()
        );
        // ranks 2 and 3
        assert!(
            matmul(
                &HostView::row_major(&a, &[4, 3]),
                &HostView::row_major(&b, &[3, 3, 2])
            )
            .is_none()
        );
    }
}
