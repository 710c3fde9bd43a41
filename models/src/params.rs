//! What a model's parameters look like, by path: the linear layers a SparseAct policy can name,
//! and the shape check that keeps a record of another architecture from loading.

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;

/// Every float parameter of `module`: its path (`fc1.weight`) and shape, in visiting order.
pub fn float_shapes<B: Backend, M: Module<B>>(module: &M) -> Vec<(String, Vec<usize>)> {
    struct Shapes {
        path: Vec<String>,
        found: Vec<(String, Vec<usize>)>,
    }
    impl<B: Backend> ModuleVisitor<B> for Shapes {
        fn enter_module(&mut self, name: &str, _container: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _name: &str, _container: &str) {
            self.path.pop();
        }
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let shape = param.lazy_shape().dims::<D>().to_vec();
            self.found.push((self.path.join("."), shape));
        }
    }
    let mut shapes = Shapes {
        path: Vec::new(),
        found: Vec::new(),
    };
    module.visit(&mut shapes);
    shapes.found
}

/// Trainable parameters of `module`: its float parameters without batch norm's running
/// statistics (which `Module::num_params` counts).
pub fn trainable_params<B: Backend, M: Module<B>>(module: &M) -> usize {
    float_shapes(module)
        .into_iter()
        .filter(|(path, _)| !path.ends_with("running_mean") && !path.ends_with("running_var"))
        .map(|(_, shape)| shape.iter().product::<usize>())
        .sum()
}

/// The `(IN, OUT)` weight shapes of the linear layers (2-D parameters named `weight`), in
/// visiting order: the layers a SparseAct policy prunes and names.
pub fn linear_layers<B: Backend, M: Module<B>>(module: &M) -> Vec<(usize, usize)> {
    float_shapes(module)
        .into_iter()
        .filter(|(path, shape)| shape.len() == 2 && (path == "weight" || path.ends_with(".weight")))
        .map(|(_, shape)| (shape[0], shape[1]))
        .collect()
}

/// Compares the parameters a record brought (`loaded`) with the ones the model has
/// (`expected`), both from [`float_shapes`]: the first difference, in words.
pub fn shape_mismatch(
    expected: &[(String, Vec<usize>)],
    loaded: &[(String, Vec<usize>)],
) -> Option<String> {
    if expected.len() != loaded.len() {
        return Some(format!(
            "it holds {} parameter tensors, the model has {}",
            loaded.len(),
            expected.len()
        ));
    }
    expected
        .iter()
        .zip(loaded)
        .find(|(e, l)| e.1 != l.1)
        .map(|(e, l)| {
            format!(
                "parameter {} has shape {:?} in the file, the model expects {:?}",
                e.0, l.1, e.1
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lenet::{LeNet5, LeNet300};
    type B = burn::backend::NdArray;

    #[test]
    fn linear_layers_of_the_lenets() {
        let device = Default::default();
        let five = LeNet5::<B>::init(&device);
        let layers = linear_layers(&five);
        assert_eq!(layers.len(), 3, "{layers:?}");
        assert_eq!(layers.last(), Some(&(84, 10)));
        let three = LeNet300::<B>::init(&device);
        assert_eq!(
            linear_layers(&three),
            vec![(784, 300), (300, 100), (100, 10)]
        );
        let mismatch = shape_mismatch(&float_shapes(&three), &float_shapes(&five)).unwrap();
        assert!(mismatch.contains("parameter"), "{mismatch}");
        assert_eq!(
            shape_mismatch(&float_shapes(&five), &float_shapes(&five)),
            None
        );
    }
}
