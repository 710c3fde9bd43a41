//! Packing the weights of an unmodified `burn::nn` model, and loading a packed model file into
//! one: HiNM's use of the model walks every weight-sparsity decorator shares
//! ([`cubecl_kernels::decorator::module`]).

use crate::error::HinmError;
use crate::file::PackedModel;
use burn::module::Module;
use cubecl_kernels::decorator::module as shared;
use cubecl_kernels::decorator::packed::PackedLayer;
use cubecl_kernels::decorator::{KernelBackend, LayerSettings};
use cubecl_kernels::hinm::Packed;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The contraction weights of `model` (parameters named `weight` of rank ≥ 2), by layer path
/// (Burn's module path without `.weight`), with their shapes and values.
pub fn weights<B: burn::tensor::backend::Backend, M: Module<B>>(
    model: &M,
) -> BTreeMap<String, (Vec<usize>, Vec<f32>)> {
    shared::weights(model)
}

/// Every float parameter of `model` (running statistics included) by its full path
/// (`fc.weight`, `norm.running_mean`), with its shape and values.
pub fn params<B: burn::tensor::backend::Backend, M: Module<B>>(
    model: &M,
) -> BTreeMap<String, (Vec<usize>, Vec<f32>)> {
    shared::params(model)
}

/// `model` with the weight of every layer named in `packed` (by layer path) replaced by its
/// packed form: [`HinmFloat::Packed`](crate::backend::HinmFloat) at the `Hinm` level of `B`,
/// whatever decorators sit above or below it. Check each packed weight against the model first
/// ([`check_fits`](crate::pack::check_fits)): a weight it does not fit stays dense.
pub fn pack_module<B: KernelBackend, M: Module<B>>(
    model: M,
    packed: &BTreeMap<String, Arc<Packed>>,
) -> M {
    shared::pack_module(model, &|layer| {
        let p = packed.get(layer)?;
        Some(LayerSettings::new(layer).with(PackedLayer(p.clone())))
    })
}

/// `model` with every float parameter taken from `file` by path: dense ones as they are, packed
/// ones as [`HinmFloat::Packed`](crate::backend::HinmFloat) weights. The file must hold exactly
/// the model's parameters with their shapes; the error names the first that differs.
pub fn load_packed<B: KernelBackend, M: Module<B>>(
    model: M,
    file: &PackedModel,
) -> Result<M, HinmError> {
    shared::load_packed(model, file, pack_module::<B, M>)
        .map_err(|e| HinmError::Shape(format!("the packed model does not fit: {e}")))
}
