//! Per-channel broadcast ops of the zoo: the affine `x · α + β` (ResMLP's Affine; without `β`,
//! its layer-scales), fused where the backend provides it.
//!
//! Burn has no affine op, so a backend cannot intercept `x * α + β` as one piece of work. A
//! backend stack that has a fused affine (one autodiff node, one kernel forward, one fused pass
//! backward: `burn_sparse_act::fused_affine` over Ember's kernels) registers it here once,
//! keyed by the backend's type ([`register_affine`]; `ember-train` does it for every stack it
//! builds); [`affine`] then calls it, and on any other backend composes Burn's ops
//! (`x * α + β`, broadcast), the same values. Registration changes speed, never results beyond
//! the order of a sum (tested within 1e-6 relative).

use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use burn::tensor::ops::FloatTensor;
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{LazyLock, RwLock};

/// A backend's fused affine on primitives: `(x, α, β, axis)`, `α` and `β` holding one value per
/// channel of `x`'s `axis` (checked by [`affine`] before the call).
pub type AffineHook<B> =
    fn(FloatTensor<B>, FloatTensor<B>, Option<FloatTensor<B>>, usize) -> FloatTensor<B>;

/// The registered hooks: an `AffineHook<B>` per backend type `B`.
static HOOKS: LazyLock<RwLock<HashMap<TypeId, Box<dyn Any + Send + Sync>>>> =
    LazyLock::new(Default::default);

/// Makes [`affine`] on backend `B` call `hook` (replacing an earlier one).
pub fn register_affine<B: Backend>(hook: AffineHook<B>) {
    HOOKS
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(TypeId::of::<B>(), Box::new(hook));
}

/// Whether [`affine`] on backend `B` runs a registered fused op.
pub fn is_fused<B: Backend>() -> bool {
    hook::<B>().is_some()
}

fn hook<B: Backend>() -> Option<AffineHook<B>> {
    HOOKS
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&TypeId::of::<B>())
        .and_then(|h| h.downcast_ref::<AffineHook<B>>().copied())
}

/// A per-channel op whose shapes do not fit.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BroadcastError {
    /// The channel axis is not an axis of the input.
    #[error("channel axis {axis} out of range for a rank-{rank} input")]
    Axis {
        /// The axis asked for.
        axis: usize,
        /// The input's rank.
        rank: usize,
    },
    /// A per-channel parameter's length is not the input's channel count.
    #[error("{name} has {len} values for {channels} channels on axis {axis} of {shape:?}")]
    Length {
        /// `α` or `β`.
        name: &'static str,
        /// Its length.
        len: usize,
        /// Channels of the input on the axis.
        channels: usize,
        /// The axis.
        axis: usize,
        /// The input's shape.
        shape: Vec<usize>,
    },
}

/// Checks that `params` (name, length) hold one value per channel of `shape`'s `axis`.
fn check(
    shape: &[usize],
    axis: usize,
    params: &[(&'static str, usize)],
) -> Result<(), BroadcastError> {
    let channels = *shape.get(axis).ok_or(BroadcastError::Axis {
        axis,
        rank: shape.len(),
    })?;
    match params.iter().find(|(_, len)| *len != channels) {
        Some(&(name, len)) => Err(BroadcastError::Length {
            name,
            len,
            channels,
            axis,
            shape: shape.to_vec(),
        }),
        None => Ok(()),
    }
}

/// `x · α + β` per channel of `x`'s `axis` (`β`: `None` for a scale `x · α`), fused on a
/// backend that registered it, Burn's broadcast ops elsewhere.
///
/// # Errors
/// If `axis` is not an axis of `x`, or `α` or `β` does not hold one value per channel there.
pub fn affine<B: Backend, const D: usize>(
    x: Tensor<B, D>,
    alpha: Tensor<B, 1>,
    beta: Option<Tensor<B, 1>>,
    axis: usize,
) -> Result<Tensor<B, D>, BroadcastError> {
    let dims = x.dims();
    let mut params = vec![("α", alpha.dims()[0])];
    if let Some(beta) = &beta {
        params.push(("β", beta.dims()[0]));
    }
    check(&dims, axis, &params)?;
    if let Some(hook) = hook::<B>() {
        let y = hook(
            x.into_primitive().tensor(),
            alpha.into_primitive().tensor(),
            beta.map(|b| b.into_primitive().tensor()),
            axis,
        );
        return Ok(Tensor::from_primitive(TensorPrimitive::Float(y)));
    }
    let mut shape = [1; D];
    shape[axis] = dims[axis];
    let y = x * alpha.reshape(shape);
    Ok(match beta {
        Some(beta) => y + beta.reshape(shape),
        None => y,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;

    type B = NdArray;

    #[test]
    fn the_composite_is_the_definition() {
        let device = Default::default();
        let x = Tensor::<B, 3>::from_floats([[[1.0, -2.0], [3.0, 0.5]]], &device);
        let alpha = Tensor::<B, 1>::from_floats([2.0, -1.0], &device);
        let beta = Tensor::<B, 1>::from_floats([0.5, 1.0], &device);
        let y = affine(x.clone(), alpha.clone(), Some(beta), 2).unwrap();
        assert_eq!(
            y.to_data().to_vec::<f32>().unwrap(),
            vec![2.5, 3.0, 6.5, 0.5]
        );
        let y = affine(x, alpha, None, 2).unwrap();
        assert_eq!(
            y.to_data().to_vec::<f32>().unwrap(),
            vec![2.0, 2.0, 6.0, -0.5]
        );
    }

    #[test]
    fn an_alpha_of_the_wrong_length_is_an_error() {
        let device = Default::default();
        let x = Tensor::<B, 3>::zeros([2, 3, 4], &device);
        let err = affine(x, Tensor::zeros([5], &device), None, 1).unwrap_err();
        assert_eq!(
            err.to_string(),
            "α has 5 values for 3 channels on axis 1 of [2, 3, 4]"
        );
    }

    #[test]
    fn a_beta_of_the_wrong_length_is_an_error() {
        let device = Default::default();
        let x = Tensor::<B, 2>::zeros([2, 3], &device);
        let err = affine(
            x,
            Tensor::zeros([3], &device),
            Some(Tensor::zeros([2], &device)),
            1,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "β has 2 values for 3 channels on axis 1 of [2, 3]"
        );
    }

    #[test]
    fn a_channel_axis_out_of_range_is_an_error() {
        let device = Default::default();
        let x = Tensor::<B, 2>::zeros([2, 3], &device);
        let err = affine(x, Tensor::zeros([3], &device), None, 4).unwrap_err();
        assert_eq!(
            err.to_string(),
            "channel axis 4 out of range for a rank-2 input"
        );
    }
}
