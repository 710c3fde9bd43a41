//! Burn's element-wise arithmetic on the GEMM routes of ndarray (Ember's host loops) equals
//! burn-ndarray's bit for bit: batch norm in training mode and ReLU, forward and every
//! gradient, broadcasts in both directions, permuted operands and reshapes of strided views,
//! with NaN and infinities in the data.

use burn::backend::{Autodiff, NdArray};
use burn::module::Module;
use burn::nn::BatchNormConfig;
use burn::tensor::activation::relu;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, Tensor, TensorData};
use burn_approx_mul::{ApproxDevice, ApproxMul, ConvRoute, Multiplier};

/// Values, then every gradient, of the element-wise ops batch norm and ReLU are made of.
fn run<B: AutodiffBackend>(device: &B::Device) -> Vec<Vec<f32>> {
    B::seed(device, 11);
    let mut out = Vec::new();
    let values = |t: burn::tensor::TensorData| t.to_vec::<f32>().unwrap();

    // batch norm (swap_dims + reshape of a strided view, per-channel broadcasts) and ReLU
    let bn = BatchNormConfig::new(5).init::<B>(device);
    let x =
        Tensor::<B, 4>::random([3, 5, 6, 7], Distribution::Normal(0.5, 2.0), device).require_grad();
    let y = relu(bn.forward(x.clone()));
    // broadcasts in both directions and a permuted operand
    let c = Tensor::<B, 4>::random([1, 5, 1, 1], Distribution::Default, device).require_grad();
    let row = Tensor::<B, 4>::random([3, 1, 1, 7], Distribution::Default, device).require_grad();
    let z =
        (c.clone() - y.clone()) / (row.clone() + 2.0) * y.clone().swap_dims(0, 1).swap_dims(0, 1);
    let z = z.clone() + z.swap_dims(2, 3).reshape([3, 5, 6, 7]);
    let w = Tensor::<B, 4>::random([3, 5, 6, 7], Distribution::Default, device);
    let grads = (z.clone() * w).sum().backward();
    out.push(values(y.into_data()));
    out.push(values(z.into_data()));
    for t in [x, c, row] {
        out.push(values(t.grad(&grads).expect("a gradient").into_data()));
    }
    let mut params = Vec::new();
    bn.visit(&mut ParamGrads {
        grads: &grads,
        out: &mut params,
    });
    out.extend(params);

    // NaN and infinities through ReLU's backward and the broadcasts
    let special = TensorData::new(
        vec![
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            0.0,
            1.5,
            -2.5,
            3.0,
        ],
        [1, 2, 2, 2],
    );
    let s = Tensor::<B, 4>::from_data(special, device).require_grad();
    let y = relu(s.clone()) * Tensor::<B, 4>::from_floats([[[[2.0]], [[-1.0]]]], device);
    let grads = y.clone().sum().backward();
    out.push(values(y.into_data()));
    out.push(values(s.grad(&grads).expect("a gradient").into_data()));
    out
}

struct ParamGrads<'a, B: AutodiffBackend> {
    grads: &'a B::Gradients,
    out: &'a mut Vec<Vec<f32>>,
}

impl<B: AutodiffBackend> burn::module::ModuleVisitor<B> for ParamGrads<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<B, D>>) {
        if let Some(g) = param.val().grad(self.grads) {
            self.out.push(g.into_data().to_vec::<f32>().unwrap());
        }
    }
}

fn bits(runs: &[Vec<f32>]) -> Vec<Vec<u32>> {
    runs.iter()
        .map(|v| v.iter().map(|x| x.to_bits()).collect())
        .collect()
}

#[test]
fn element_wise_ops_on_the_gemm_routes_equal_burn_ndarray_bit_for_bit() {
    let plain = run::<Autodiff<NdArray>>(&Default::default());
    assert_eq!(plain.len(), 9);
    for route in [ConvRoute::Gemm, ConvRoute::Im2col, ConvRoute::Burn] {
        for mul in [Multiplier::native(), Multiplier::parse("afm16").unwrap()] {
            let device = ApproxDevice::<NdArray>::new(Default::default(), mul.with_conv(route));
            let got = run::<Autodiff<ApproxMul<NdArray>>>(&device);
            assert_eq!(bits(&got), bits(&plain), "{route}");
        }
    }
}
