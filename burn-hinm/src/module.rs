//! Packing the weights of an unmodified `burn::nn` model.

use crate::backend::HinmLayer;
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::{Tensor, TensorPrimitive};
use cubecl_kernels::decorator::{KernelBackend, LayerSettings};
use cubecl_kernels::hinm::Packed;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The contraction weights of `model` (parameters named `weight` of rank ≥ 2), by layer path
/// (Burn's module path without `.weight`), with their shapes and values.
pub fn weights<B: burn::tensor::backend::Backend, M: Module<B>>(
    model: &M,
) -> BTreeMap<String, (Vec<usize>, Vec<f32>)> {
    params(model)
        .into_iter()
        .filter(|(_, (dims, _))| dims.len() >= 2)
        .filter_map(|(path, p)| Some((path.strip_suffix(".weight")?.to_string(), p)))
        .collect()
}

/// `model` with the weight of every layer named in `packed` (by layer path) replaced by its
/// packed form: [`HinmFloat::Packed`](crate::backend::HinmFloat) at the `Hinm` level of `B`,
/// whatever decorators sit above or below it. Check each packed weight against the model first
/// ([`check_fits`](crate::pack::check_fits)): a weight it does not fit stays dense.
pub fn pack_module<B: KernelBackend, M: Module<B>>(
    model: M,
    packed: &BTreeMap<String, Arc<Packed>>,
) -> M {
    struct Packer<'a> {
        path: Vec<String>,
        packed: &'a BTreeMap<String, Arc<Packed>>,
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
            let tensor = match self.packed.get(&layer) {
                None => tensor,
                Some(p) => {
                    let settings = LayerSettings::new(&layer).with(HinmLayer(p.clone()));
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
        packed,
    })
}

/// Every float parameter of `model` (running statistics included) by its full path
/// (`fc.weight`, `norm.running_mean`), with its shape and values.
pub fn params<B: burn::tensor::backend::Backend, M: Module<B>>(
    model: &M,
) -> BTreeMap<String, (Vec<usize>, Vec<f32>)> {
    struct Collect {
        path: Vec<String>,
        found: BTreeMap<String, (Vec<usize>, Vec<f32>)>,
    }
    impl<B: burn::tensor::backend::Backend> ModuleVisitor<B> for Collect {
        fn enter_module(&mut self, name: &str, _container: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _name: &str, _container: &str) {
            self.path.pop();
        }
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let t = param.val();
            let values = t.to_data().convert::<f32>().to_vec::<f32>().expect("f32");
            self.found
                .insert(self.path.join("."), (t.shape().as_slice().to_vec(), values));
        }
    }
    let mut c = Collect {
        path: Vec::new(),
        found: BTreeMap::new(),
    };
    model.visit(&mut c);
    c.found
}

/// `model` with every float parameter taken from `file` by path: dense ones as they are, packed
/// ones as [`HinmFloat::Packed`](crate::backend::HinmFloat) weights. The file must hold exactly
/// the model's parameters with their shapes; the error names the first that differs.
pub fn load_packed<B: KernelBackend, M: Module<B>>(
    model: M,
    file: &crate::file::PackedModel,
) -> Result<M, String> {
    use crate::file::Stored;
    let shapes = params(&model);
    for (path, (dims, _)) in &shapes {
        match file.params.get(path) {
            None => return Err(format!("it has no parameter {path} (the model does)")),
            Some((d, stored)) => {
                if d != dims {
                    return Err(format!("{path} is {d:?} in it, {dims:?} in the model"));
                }
                if let Stored::Packed(p) = stored {
                    crate::pack::check_fits(p, dims).map_err(|e| format!("{path}: {e}"))?;
                }
            }
        }
    }
    if let Some(extra) = file.params.keys().find(|p| !shapes.contains_key(*p)) {
        return Err(format!("it has a parameter {extra} the model does not"));
    }
    struct Load<'a> {
        path: Vec<String>,
        file: &'a crate::file::PackedModel,
    }
    impl<B: KernelBackend> ModuleMapper<B> for Load<'_> {
        fn enter_module(&mut self, name: &str, _container: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _name: &str, _container: &str) {
            self.path.pop();
        }
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let (id, tensor, mapper) = param.consume();
            let path = self.path.join(".");
            let (dims, stored) = &self.file.params[&path];
            let device = tensor.device();
            let dense = |values: Vec<f32>| {
                Tensor::<B, D>::from_data(
                    burn::tensor::TensorData::new(values, dims.clone()),
                    &device,
                )
            };
            let tensor = match stored {
                Stored::Dense(values) => dense(values.clone()),
                // packed below, through `pack_module`
                Stored::Packed(_) => tensor,
            };
            Param::from_mapped_value(id, tensor, mapper)
        }
    }
    let model = model.map(&mut Load {
        path: Vec::new(),
        file,
    });
    let packed: BTreeMap<String, Arc<Packed>> = file
        .params
        .iter()
        .filter_map(|(path, (_, stored))| match stored {
            Stored::Packed(p) => Some((
                path.strip_suffix(".weight")?.to_string(),
                Arc::new(p.clone()),
            )),
            Stored::Dense(_) => None,
        })
        .collect();
    Ok(pack_module(model, &packed))
}
