//! Per-channel broadcast ops of the zoo: the affine `x · α + β` (ResMLP's Affine; without `β`,
//! its layer-scales) and batch norm (the ResNets' and VGG's `burn::nn::BatchNorm`), fused
//! where the backend provides them.
//!
//! Burn has no affine op, and its `BatchNorm` is a composite of tensor ops, so a backend
//! cannot intercept either as one piece of work. A backend stack that has fused versions (one
//! autodiff node each: `burn_sparse_act::fused_affine`, `burn_sparse_act::fused_batch_norm`
//! over Ember's kernels) registers them here once, keyed by the backend's type
//! ([`register_affine`], [`register_batch_norm`], [`register_normalize`]; `ember-train` does it
//! for every stack it builds); [`affine`] and [`batch_norm`] then call them, and on any other
//! backend compose Burn's ops (`x * α + β` broadcast; `BatchNorm::forward`). Registration
//! changes speed, never results beyond the order of a sum and the rounding of an equal
//! formula (tested within 1e-6 relative for the affine, 1e-5 for batch norm).

use burn::nn::BatchNorm;
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

/// A backend's fused batch norm in training (where `B::ad_enabled`): `(x, [γ, β, running mean,
/// running variance], ε, momentum)` to the output and the running mean and variance after the
/// step, the per-channel tensors holding one value per channel of `x`'s axis 1 (checked by
/// [`batch_norm`] before the call).
pub type BatchNormHook<B> = fn(
    FloatTensor<B>,
    [FloatTensor<B>; 4],
    f64,
    f64,
) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>);

/// A backend's fused batch norm in inference: `(x, [mean, variance, γ, β], ε)` to the output,
/// as [`BatchNormHook`].
pub type NormalizeHook<B> = fn(FloatTensor<B>, [FloatTensor<B>; 4], f64) -> FloatTensor<B>;

/// The registered hooks, keyed by the hook's type (which names the backend).
static HOOKS: LazyLock<RwLock<HashMap<TypeId, Box<dyn Any + Send + Sync>>>> =
    LazyLock::new(Default::default);

fn register<H: Any + Send + Sync>(hook: H) {
    HOOKS
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(TypeId::of::<H>(), Box::new(hook));
}

fn unregister<H: Any>() {
    HOOKS
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&TypeId::of::<H>());
}

fn hook<H: Any + Copy>() -> Option<H> {
    HOOKS
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&TypeId::of::<H>())
        .and_then(|h| h.downcast_ref::<H>().copied())
}

/// Makes [`affine`] on backend `B` call `hook` (replacing an earlier one).
pub fn register_affine<B: Backend>(hook: AffineHook<B>) {
    register(hook);
}

/// Makes [`batch_norm`] in training on backend `B` call `hook` (replacing an earlier one).
pub fn register_batch_norm<B: Backend>(hook: BatchNormHook<B>) {
    register(hook);
}

/// Makes [`batch_norm`] in inference on backend `B` call `hook` (replacing an earlier one).
pub fn register_normalize<B: Backend>(hook: NormalizeHook<B>) {
    register(hook);
}

/// Makes [`batch_norm`] on backend `B` run Burn's `BatchNorm::forward` again, in training and
/// in inference (what the `native-burn-norm` rows of the `model_step` bench measure).
pub fn unregister_batch_norm<B: Backend>() {
    unregister::<BatchNormHook<B>>();
    unregister::<NormalizeHook<B>>();
}

/// Whether [`affine`] on backend `B` runs a registered fused op.
pub fn is_fused<B: Backend>() -> bool {
    hook::<AffineHook<B>>().is_some()
}

/// Whether [`batch_norm`] on backend `B` runs a registered fused op: `(in training, in
/// inference)`.
pub fn is_batch_norm_fused<B: Backend>() -> (bool, bool) {
    (
        hook::<BatchNormHook<B>>().is_some(),
        hook::<NormalizeHook<B>>().is_some(),
    )
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
    if let Some(hook) = hook::<AffineHook<B>>() {
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

/// Burn's `BatchNorm::forward` on `x` (`[batch, channels, …]`): in training (where
/// `B::ad_enabled`) with the batch's statistics, updating the module's running ones; in
/// inference with the running ones. Fused on a backend that registered it
/// ([`register_batch_norm`], [`register_normalize`]), Burn's composite elsewhere, and Burn's
/// composite (with its panics) for a rank below 2, tensors that are not f32, or per-channel
/// tensors that do not hold one value per channel of `x`.
pub fn batch_norm<B: Backend, const D: usize>(
    norm: &BatchNorm<B>,
    x: Tensor<B, D>,
) -> Tensor<B, D> {
    let device = x.device();
    let training = B::ad_enabled(&device);
    let (train, infer) = match training {
        true => (hook::<BatchNormHook<B>>(), None),
        false => (None, hook::<NormalizeHook<B>>()),
    };
    if train.is_none() && infer.is_none() {
        return norm.forward(x);
    }
    let (mean, var) = match training {
        true => (
            norm.running_mean.value_sync(),
            norm.running_var.value_sync(),
        ),
        false => (norm.running_mean.value(), norm.running_var.value()),
    };
    let per_channel = [
        norm.gamma.val(),
        norm.beta.val(),
        mean.to_device(&device),
        var.to_device(&device),
    ];
    // the fused ops take f32 and one value per channel; Burn's module anything else
    let f32 = |dtype| dtype == burn::tensor::DType::F32;
    let fits = |t: &Tensor<B, 1>| t.dims()[0] == x.dims()[1] && f32(t.dtype());
    if D < 2 || !f32(x.dtype()) || !per_channel.iter().all(fits) {
        return norm.forward(x);
    }
    let [gamma, beta, mean, var] = per_channel.map(primitive);
    match (train, infer) {
        (Some(hook), _) => {
            let (y, mean, var) = hook(
                primitive(x),
                [gamma, beta, mean, var],
                norm.epsilon,
                norm.momentum,
            );
            norm.running_mean.update(tensor(mean));
            norm.running_var.update(tensor(var));
            tensor(y)
        }
        (None, Some(hook)) => tensor(hook(primitive(x), [mean, var, gamma, beta], norm.epsilon)),
        (None, None) => unreachable!("one hook at least (above)"),
    }
}

fn primitive<B: Backend, const D: usize>(t: Tensor<B, D>) -> FloatTensor<B> {
    t.into_primitive().tensor()
}

fn tensor<B: Backend, const D: usize>(t: FloatTensor<B>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(t))
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
