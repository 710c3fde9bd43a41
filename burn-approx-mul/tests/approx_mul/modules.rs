//! Stock `burn::nn` modules train under `Autodiff<ApproxMul<B>>` unchanged: Linear, Conv2d,
//! MultiHeadAttention and Gru. With exact products (`fp32`) outputs and every parameter gradient
//! match the plain backend; with an approximate multiplier they move, but stay close.

use burn::backend::{Autodiff, NdArray};
use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::LinearConfig;
use burn::nn::attention::{MhaInput, MultiHeadAttentionConfig};
use burn::nn::conv::Conv2dConfig;
use burn::nn::gru::GruConfig;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, Tensor};
use burn_approx_mul::{ApproxDevice, ApproxMul, Multiplier};

/// Collects every parameter gradient of a module.
struct Grads<'a, B: AutodiffBackend> {
    grads: &'a B::Gradients,
    out: Vec<Vec<f32>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Grads<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = param.val().grad(self.grads) {
            self.out.push(g.into_data().to_vec::<f32>().unwrap());
        }
    }
}

/// Outputs and parameter gradients of the four modules (same seed on every backend).
fn run<B: AutodiffBackend>(device: &B::Device) -> Vec<Vec<f32>> {
    let _rng = crate::seeded_rng();
    B::seed(device, 3);
    let mut all = Vec::new();
    let mut finish = |y: Tensor<B, 3>, module_grads: &dyn Fn(&B::Gradients) -> Vec<Vec<f32>>| {
        let w = Tensor::<B, 3>::random(y.dims(), Distribution::Default, device);
        let grads = (y.clone() * w).sum().backward();
        all.push(y.into_data().to_vec::<f32>().unwrap());
        all.extend(module_grads(&grads));
    };
    let collect = |m: &dyn Fn(&mut Grads<B>), grads: &B::Gradients| {
        let mut v = Grads::<B> {
            grads,
            out: Vec::new(),
        };
        m(&mut v);
        v.out
    };

    let linear = LinearConfig::new(12, 7).init::<B>(device);
    let x = Tensor::<B, 3>::random([2, 5, 12], Distribution::Default, device);
    finish(linear.forward(x), &|g| collect(&|v| linear.visit(v), g));

    let conv = Conv2dConfig::new([3, 4], [3, 3]).init::<B>(device);
    let x = Tensor::<B, 4>::random([2, 3, 6, 6], Distribution::Default, device);
    let y: Tensor<B, 4> = conv.forward(x);
    let y = y.flatten::<3>(2, 3);
    finish(y, &|g| collect(&|v| conv.visit(v), g));

    let mha = MultiHeadAttentionConfig::new(8, 2).init::<B>(device);
    let x = Tensor::<B, 3>::random([2, 5, 8], Distribution::Default, device);
    let y = mha.forward(MhaInput::self_attn(x)).context;
    finish(y, &|g| collect(&|v| mha.visit(v), g));

    let gru = GruConfig::new(6, 5, true).init::<B>(device);
    let x = Tensor::<B, 3>::random([2, 4, 6], Distribution::Default, device);
    let y = gru.forward(x, None);
    finish(y, &|g| collect(&|v| gru.visit(v), g));
    all
}

fn approx(mul: &str) -> Vec<Vec<f32>> {
    let device = ApproxDevice::<NdArray>::new(Default::default(), Multiplier::parse(mul).unwrap());
    run::<Autodiff<ApproxMul<NdArray>>>(&device)
}

fn max_rel(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    assert_eq!(a.len(), b.len(), "same number of outputs and gradients");
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            assert_eq!(x.len(), y.len());
            let scale = y.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
            x.iter()
                .zip(y)
                .fold(0f32, |m, (p, q)| m.max((p - q).abs() / scale))
        })
        .fold(0.0, f32::max)
}

#[test]
fn stock_modules_train_under_approx_mul() {
    let plain = run::<Autodiff<NdArray>>(&Default::default());
    assert!(
        plain.len() > 20,
        "outputs and parameter gradients of four modules: {}",
        plain.len()
    );
    assert_eq!(approx("native"), plain, "native: bit for bit");
    let exact = max_rel(&approx("fp32"), &plain);
    assert!(exact < 1e-4, "fp32 kernels vs plain backend: {exact}");
    let afm16 = max_rel(&approx("afm16"), &plain);
    assert!(
        afm16 > 1e-3 && afm16 < 0.3,
        "AFM16 moves every module a little: {afm16}"
    );
    for v in approx("afm16") {
        assert!(v.iter().all(|x| x.is_finite()));
    }
}
