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
            if let Some((name, module)) = self.path.split_last()
                && name == "weight"
                && D >= 2
            {
                let t = param.val();
                let data = t.to_data().convert::<f32>();
                let values = data.to_vec::<f32>().expect("f32 values");
                self.found
                    .insert(module.join("."), (t.shape().as_slice().to_vec(), values));
            }
        }
    }
    let mut c = Collect {
        path: Vec::new(),
        found: BTreeMap::new(),
    };
    model.visit(&mut c);
    c.found
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
