//! Packing the weights of an unmodified `burn::nn` model in BCRC, and loading a packed model
//! file into one: BCR's use of the model walks every weight-sparsity decorator shares
//! ([`cubecl_kernels::decorator::module`]).

use crate::error::BcrError;
use crate::file::PackedModel;
use burn::module::Module;
use cubecl_kernels::bcrc::Bcrc;
use cubecl_kernels::decorator::module as shared;
use cubecl_kernels::decorator::packed::PackedLayer;
use cubecl_kernels::decorator::{KernelBackend, LayerSettings};
use std::collections::BTreeMap;
use std::sync::Arc;

pub use cubecl_kernels::decorator::module::{params, weights};

/// `model` with the weight of every layer named in `packed` (by layer path: Burn's module path
/// without `.weight`) replaced by its BCRC form: [`BcrFloat::Packed`](crate::backend::BcrFloat)
/// at the `Bcr` level of `B`, whatever decorators sit above or below it. Check each packed
/// weight against the model first ([`check_fits`]): a weight it does not fit stays dense.
pub fn pack_module<B: KernelBackend, M: Module<B>>(
    model: M,
    packed: &BTreeMap<String, Arc<Bcrc>>,
) -> M {
    shared::pack_module(model, &|layer| {
        let w = packed.get(layer)?;
        Some(LayerSettings::new(layer).with(PackedLayer(w.clone())))
    })
}

pub use crate::pack::check_fits;

/// `model` with every float parameter taken from `file` by path: dense ones as they are, packed
/// ones as [`BcrFloat::Packed`](crate::backend::BcrFloat) weights. The file must hold exactly
/// the model's parameters with their shapes, every packed weight fitting its parameter
/// ([`check_fits`]); the error ([`BcrError::Shape`]) names the first parameter that does not.
pub fn load_packed<B: KernelBackend, M: Module<B>>(
    model: M,
    file: &PackedModel,
) -> Result<M, BcrError> {
    shared::load_packed(model, file, pack_module::<B, M>)
        .map_err(|e| BcrError::Shape(format!("the packed model does not fit: {e}")))
}
