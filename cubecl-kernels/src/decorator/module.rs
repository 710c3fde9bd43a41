//! Walking, packing and loading the parameters of an unmodified `burn::nn` model (feature
//! `module`): what every weight-sparsity decorator's model helpers share.
//!
//! A **layer path** is Burn's module path of a contraction weight without its `.weight`
//! (`layer1.0.conv1`, `update_gate.input_transform`); a **parameter path** is the full path
//! (`fc.weight`, `norm.running_mean`).

use super::file::{PackedFormat, PackedModel, Stored};
use super::{KernelBackend, LayerSettings};
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Every float parameter of `model` (running statistics included) by its parameter path, with
/// its shape and values.
pub fn params<B: Backend, M: Module<B>>(model: &M) -> BTreeMap<String, (Vec<usize>, Vec<f32>)> {
    collect(model, true)
        .into_iter()
        .map(|(path, (dims, values))| (path, (dims, values.unwrap_or_default())))
        .collect()
}

/// The shape of every float parameter of `model` by its parameter path (no values read).
pub fn shapes<B: Backend, M: Module<B>>(model: &M) -> BTreeMap<String, Vec<usize>> {
    collect(model, false)
        .into_iter()
        .map(|(path, (dims, _))| (path, dims))
        .collect()
}

/// The contraction weights of `model` (parameters named `weight` of rank ≥ 2), by layer path,
/// with their shapes and values.
pub fn weights<B: Backend, M: Module<B>>(model: &M) -> BTreeMap<String, (Vec<usize>, Vec<f32>)> {
    params(model)
        .into_iter()
        .filter(|(_, (dims, _))| dims.len() >= 2)
        .filter_map(|(path, p)| Some((path.strip_suffix(".weight")?.to_string(), p)))
        .collect()
}

type Collected = BTreeMap<String, (Vec<usize>, Option<Vec<f32>>)>;

/// Every float parameter's shape, and its values when `read`.
fn collect<B: Backend, M: Module<B>>(model: &M, read: bool) -> Collected {
    struct Collect {
        path: Vec<String>,
        read: bool,
        found: Collected,
    }
    impl<B: Backend> ModuleVisitor<B> for Collect {
        fn enter_module(&mut self, name: &str, _container: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _name: &str, _container: &str) {
            self.path.pop();
        }
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let t = param.val();
            let values = self
                .read
                .then(|| t.to_data().convert::<f32>().to_vec::<f32>().expect("f32"));
            self.found
                .insert(self.path.join("."), (t.shape().as_slice().to_vec(), values));
        }
    }
    let mut c = Collect {
        path: Vec::new(),
        read,
        found: BTreeMap::new(),
    };
    model.visit(&mut c);
    c.found
}

/// `model` with every contraction weight (a parameter named `weight` of rank ≥ 2) for whose
/// layer path `settings` gives settings handed down the backend stack with them
/// ([`KernelBackend::float_for_layer`]): how a weight-sparsity decorator's per-layer entry
/// (its packed form) turns the weight into a packed one at its level of `B`, whatever
/// decorators sit above or below it. Parameter ids and everything else are kept.
pub fn pack_module<B: KernelBackend, M: Module<B>>(
    model: M,
    settings: &dyn Fn(&str) -> Option<LayerSettings>,
) -> M {
    struct Packer<'a> {
        path: Vec<String>,
        settings: &'a dyn Fn(&str) -> Option<LayerSettings>,
    }
    impl<B: KernelBackend> ModuleMapper<B> for Packer<'_> {
        fn enter_module(&mut self, name: &str, _container: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _name: &str, _container: &str) {
            self.path.pop();
        }
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let (id, tensor, mapper) = param.consume();
            let layer = match self.path.split_last() {
                Some((name, module)) if name == "weight" && D >= 2 => module.join("."),
                _ => return Param::from_mapped_value(id, tensor, mapper),
            };
            let tensor = match (self.settings)(&layer) {
                None => tensor,
                Some(settings) => {
                    let inner = tensor.into_primitive().tensor();
                    Tensor::from_primitive(TensorPrimitive::Float(B::float_for_layer(
                        inner, &settings,
                    )))
                }
            };
            Param::from_mapped_value(id, tensor, mapper)
        }
    }
    model.map(&mut Packer {
        path: Vec::new(),
        settings,
    })
}

/// A parameter as a packed model file holds it, for [`load_params`].
pub trait StoredParam {
    /// Its dense values in Burn's layout; `None` for a packed weight (which the caller packs
    /// afterwards, through [`pack_module`]).
    fn dense(&self) -> Option<&[f32]>;
    /// Whether it fits a parameter of shape `dims` (a packed weight: its `out × K` view).
    fn fits(&self, dims: &[usize]) -> Result<(), String>;
}

/// `model` with every float parameter's dense values taken from `file` (parameter path →
/// shape and stored form); packed weights (at `….weight` paths only) keep the model's values,
/// for the caller to pack. The file must hold exactly the model's parameters with their
/// shapes, each fitting its parameter; the error names the first that does not.
pub fn load_params<B: Backend, M: Module<B>, S: StoredParam>(
    model: M,
    file: &BTreeMap<String, (Vec<usize>, S)>,
) -> Result<M, String> {
    let shapes = shapes(&model);
    for (path, dims) in &shapes {
        match file.get(path) {
            None => return Err(format!("it has no parameter {path} (the model does)")),
            Some((d, stored)) => {
                if d != dims {
                    return Err(format!("{path} is {d:?} in it, {dims:?} in the model"));
                }
                if stored.dense().is_none() && !path.ends_with(".weight") {
                    return Err(format!("{path} is packed in it, and only weights can be"));
                }
                stored.fits(dims).map_err(|e| format!("{path}: {e}"))?;
            }
        }
    }
    if let Some(extra) = file.keys().find(|p| !shapes.contains_key(*p)) {
        return Err(format!("it has a parameter {extra} the model does not"));
    }
    struct Load<'a, S> {
        path: Vec<String>,
        file: &'a BTreeMap<String, (Vec<usize>, S)>,
    }
    impl<B: Backend, S: StoredParam> ModuleMapper<B> for Load<'_, S> {
        fn enter_module(&mut self, name: &str, _container: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _name: &str, _container: &str) {
            self.path.pop();
        }
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let (id, tensor, mapper) = param.consume();
            let (dims, stored) = &self.file[&self.path.join(".")];
            let tensor = match stored.dense() {
                Some(values) => Tensor::<B, D>::from_data(
                    TensorData::new(values.to_vec(), dims.clone()),
                    &tensor.device(),
                ),
                None => tensor,
            };
            Param::from_mapped_value(id, tensor, mapper)
        }
    }
    Ok(model.map(&mut Load {
        path: Vec::new(),
        file,
    }))
}

/// A parameter of a packed model file of format `F`: dense values fit a parameter of as many
/// values, a packed weight one the format says it fits ([`PackedFormat::fits`]).
impl<F: PackedFormat> StoredParam for Stored<F> {
    fn dense(&self) -> Option<&[f32]> {
        match self {
            Stored::Dense(values) => Some(values),
            Stored::Packed(_) => None,
        }
    }
    fn fits(&self, dims: &[usize]) -> Result<(), String> {
        match self {
            Stored::Dense(values) => {
                let count: usize = dims.iter().product();
                if values.len() != count {
                    return Err(format!(
                        "{} values for a parameter of {dims:?}",
                        values.len()
                    ));
                }
                Ok(())
            }
            Stored::Packed(weight) => F::fits(weight, dims),
        }
    }
}

/// `model` with every float parameter taken from `file` by path ([`load_params`]), then
/// `pack` given the model and every packed weight of the file by layer path (Burn's module
/// path without `.weight`): the format's `pack_module`, which hands each one down the backend
/// stack to its decorator. The error names the first parameter that does not fit.
pub fn load_packed<B: Backend, M: Module<B>, F: PackedFormat>(
    model: M,
    file: &PackedModel<F>,
    pack: impl FnOnce(M, &BTreeMap<String, Arc<F::Weight>>) -> M,
) -> Result<M, String> {
    let model = load_params(model, &file.params)?;
    let packed: BTreeMap<String, Arc<F::Weight>> = file
        .params
        .iter()
        .filter_map(|(path, (_, stored))| match stored {
            Stored::Packed(weight) => Some((
                path.strip_suffix(".weight")?.to_string(),
                Arc::new(weight.clone()),
            )),
            Stored::Dense(_) => None,
        })
        .collect();
    Ok(pack(model, &packed))
}
