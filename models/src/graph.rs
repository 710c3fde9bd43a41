//! One autodiff graph for a module's parameters, before a forward pass that reuses them many
//! times (a recurrent layer unrolled over a sequence).
//!
//! burn-autodiff 0.21 keeps a graph per tracked tensor without tracked parents: each parameter
//! starts in one of its own, and an operation whose parents lie in two graphs merges them. The
//! merge keeps either graph (hash order) and moves the other's node map into it; the graph of a
//! parameter merged earlier into the loser still names the emptied graph, so the parameter's
//! next use merges again. A GRU uses every gate's weights and biases once per time step, so
//! its forward pass moves the map of the whole unrolled sequence at every step: its cost grows
//! with the square of the sequence length. Two stacked Burn `Gru`s of 64 units, batch 16,
//! forward and backward on `Autodiff<NdArray>`: 124.6 ms at 48 steps and 1.653 s at 192
//! (13×), and 60.2 ms and 320.9 ms (5.3×) after [`join_params`] (`cargo xtask bench --filter
//! gru_graph`).
//!
//! [`join_params`] gives every tracked parameter one graph up front, with a single operation
//! that has them all as parents (a concatenation of one element of each, then dropped). No
//! later operation of the pass then has parents in two graphs, and the cost of a step
//! barely grows with the length. It changes no value and no gradient (tested).
//! [`crate::gru::GruClassifier`] calls it at the start of its forward pass; a model of your own
//! that unrolls `burn::nn` recurrent layers should too. On a backend without autodiff, or with
//! no tracked parameter, it does nothing.

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;

/// Puts every tracked float parameter of `module` in one autodiff graph (see the module docs).
pub fn join_params<B: Backend, M: Module<B>>(module: &M) {
    struct Firsts<B: Backend>(Vec<Tensor<B, 1>>);
    impl<B: Backend> ModuleVisitor<B> for Firsts<B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let tensor = param.val();
            if tensor.is_require_grad() && tensor.shape().num_elements() > 0 {
                self.0.push(tensor.reshape([-1]).slice(0..1));
            }
        }
    }
    let mut firsts = Firsts(Vec::new());
    module.visit(&mut firsts);
    if firsts.0.len() < 2 {
        return;
    }
    let dtype = firsts.0[0].dtype();
    // a concatenation takes one dtype: parameters of another are cast (one element each)
    let firsts = firsts
        .0
        .into_iter()
        .map(|t| if t.dtype() == dtype { t } else { t.cast(dtype) })
        .collect();
    drop(Tensor::cat(firsts, 0));
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, NdArray};
    use burn::module::{ModuleMapper, ParamId};
    use burn::nn::gru::{Gru, GruConfig};
    use burn::tensor::DType;

    type A = Autodiff<NdArray>;

    /// Every float parameter set to fixed values, tracked (as after an optimizer step).
    struct Fixed;
    impl ModuleMapper<A> for Fixed {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<A, D>>) -> Param<Tensor<A, D>> {
            let (id, tensor, mapper) = param.consume();
            let shape = tensor.shape();
            let values = (0..shape.num_elements())
                .map(|i| ((i as f32 + 1.0) * 0.71).sin() * 0.4)
                .collect();
            let fixed = Tensor::from_data(TensorData::new(values, shape), &tensor.device());
            Param::from_mapped_value(id, fixed.require_grad(), mapper)
        }
    }

    /// The gradients of a loss of two stacked Burn GRUs (3 inputs, 8 hidden units), by
    /// parameter, with or without the join first.
    fn gradients(join: bool) -> Vec<Vec<f32>> {
        let device = Default::default();
        let m: Vec<Gru<A>> = [3, 8]
            .map(|d| GruConfig::new(d, 8, true).init(&device).map(&mut Fixed))
            .into();
        let x = Tensor::<A, 3>::from_data(
            TensorData::new(
                (0..2 * 7 * 3).map(|i| (i as f32 * 0.37).sin()).collect(),
                [2, 7, 3],
            ),
            &device,
        );
        if join {
            join_params(&m);
        }
        let h = m.iter().fold(x, |h, gru| gru.forward(h, None));
        let grads = h.powi_scalar(2).sum().backward();
        struct Grads<'a>(
            &'a <A as burn::tensor::backend::AutodiffBackend>::Gradients,
            Vec<Vec<f32>>,
        );
        impl ModuleVisitor<A> for Grads<'_> {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<A, D>>) {
                let g = param
                    .val()
                    .grad(self.0)
                    .expect("every parameter has a gradient");
                self.1.push(g.into_data().to_vec().unwrap());
            }
        }
        let mut found = Grads(&grads, Vec::new());
        m.visit(&mut found);
        found.1
    }

    #[test]
    fn joining_changes_no_gradient() {
        let (plain, joined) = (gradients(false), gradients(true));
        // 2 layers × 3 gates × input and hidden products × weight and bias
        assert_eq!(plain.len(), 2 * 3 * 2 * 2);
        assert_eq!(plain, joined);
    }

    /// A module of parameters as given.
    #[derive(Module, Debug)]
    struct Params<B: Backend> {
        params: Vec<Param<Tensor<B, 1>>>,
    }

    fn params<B: Backend>(tensors: Vec<Tensor<B, 1>>) -> Params<B> {
        Params {
            params: tensors
                .into_iter()
                .map(|t| Param::initialized(ParamId::new(), t))
                .collect(),
        }
    }

    #[test]
    fn parameters_of_two_dtypes_empty_ones_and_untracked_modules_are_joined_or_left_alone() {
        let device = Default::default();
        let f32s = Tensor::<A, 1>::from_data([1.0f32, 2.0], &device).require_grad();
        let f64s = Tensor::<A, 1>::from_data([3.0f64], (&device, DType::F64)).require_grad();
        assert_eq!(f64s.dtype(), DType::F64);
        let empty = Tensor::<A, 1>::empty([0], &device).require_grad();
        let m = params(vec![empty.clone(), f32s.clone(), f64s.clone()]);
        join_params(&m);
        // the parameters themselves are untouched and still train
        let loss = f32s.clone().sum() + f64s.clone().cast(DType::F32).sum() * 2.0;
        let grads = loss.backward();
        assert_eq!(
            f32s.grad(&grads)
                .unwrap()
                .into_data()
                .to_vec::<f32>()
                .unwrap(),
            [1.0, 1.0]
        );
        assert_eq!(
            f64s.grad(&grads)
                .unwrap()
                .into_data()
                .to_vec::<f64>()
                .unwrap(),
            [2.0]
        );
        // nothing to join: none, one, only empty or only untracked parameters
        join_params(&params::<A>(vec![]));
        join_params(&params(vec![f32s.clone()]));
        join_params(&params(vec![empty.clone(), empty]));
        join_params(&params(vec![Tensor::<NdArray, 1>::from_data(
            [1.0f32],
            &device,
        )]));
    }
}
