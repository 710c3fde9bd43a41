//! The optimizer step alone, Burn's composed optimizers beside Ember's fused ones
//! ([`ember_train::fused_optim`]), on the parameters of ResNet-18-CIFAR (62 tensors, 11.2 M
//! values) and LeNet-5 (10 tensors, 62 k values) under Ember's training stack, with fixed
//! random gradients: Adam, and SGD with momentum 0.9 and weight decay 5e-4 (ApproxTrain's
//! schedule).
//!
//! Rows: `optim_step/<model>/<backend>/<optimizer>/<1-burn | 2-fused>`, so each fused row's
//! ratio is to Burn's step of the same run. The backend is `EMBER_BENCH_BACKEND`: `ndarray`
//! (the default), `wgpu`, or `cuda` (built with the `cuda` feature).

use burn::module::{ModuleVisitor, Param, ParamId};
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamConfig, GradientsParams, Optimizer, SgdConfig, SimpleOptimizer};
use burn::prelude::*;
use burn::tensor::Distribution;
use burn::tensor::backend::AutodiffBackend;
use burn_approx_mul::Multiplier;
use burn_sparse_act::Policy;
use criterion::Criterion;
use cubecl_kernels::decorator::KernelBackend;
use ember_models::classifier::{ModelKind, ModelVisitor, TrainableClassifier};
use ember_models::data::{DataSpec, ImageSpec};
use ember_train::backend::{Stack, TrainBackend, stack_device};
use ember_train::fused_optim::{FusedAdam, FusedSgd};

/// A gradient for every float parameter of a model, of its shape, random; kept per rank so
/// that each step registers clones of the same tensors.
#[derive(Default)]
struct Grads<B: Backend> {
    r1: Vec<(ParamId, Tensor<B, 1>)>,
    r2: Vec<(ParamId, Tensor<B, 2>)>,
    r3: Vec<(ParamId, Tensor<B, 3>)>,
    r4: Vec<(ParamId, Tensor<B, 4>)>,
}

impl<B: Backend> Grads<B> {
    fn params(&self) -> GradientsParams {
        let mut g = GradientsParams::new();
        self.r1
            .iter()
            .for_each(|(id, t)| g.register(*id, t.clone()));
        self.r2
            .iter()
            .for_each(|(id, t)| g.register(*id, t.clone()));
        self.r3
            .iter()
            .for_each(|(id, t)| g.register(*id, t.clone()));
        self.r4
            .iter()
            .for_each(|(id, t)| g.register(*id, t.clone()));
        g
    }
}

/// Collects [`Grads`] of an autodiff model's parameters, on the inner backend.
struct Collect<B: AutodiffBackend>(Grads<B::InnerBackend>);

impl<B: AutodiffBackend> ModuleVisitor<B> for Collect<B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let value = param.val().inner();
        let g = Tensor::<B::InnerBackend, D>::random(
            value.shape(),
            Distribution::Normal(0.0, 1e-2),
            &value.device(),
        );
        let any: Box<dyn std::any::Any> = Box::new(g);
        match D {
            1 => self.0.r1.push((param.id, *any.downcast().expect("rank 1"))),
            2 => self.0.r2.push((param.id, *any.downcast().expect("rank 2"))),
            3 => self.0.r3.push((param.id, *any.downcast().expect("rank 3"))),
            4 => self.0.r4.push((param.id, *any.downcast().expect("rank 4"))),
            _ => panic!("no model of the bench has a rank-{D} parameter"),
        }
    }
}

/// Benchmarks Burn's and the fused optimizers' steps on the model it visits.
struct Steps<'a, B: AutodiffBackend> {
    c: &'a mut Criterion,
    group: String,
    device: B::Device,
}

impl<B: TrainBackend> ModelVisitor<B> for Steps<'_, B> {
    type Output = ();

    fn visit<M: TrainableClassifier<B>>(self, model: M) {
        let mut collect = Collect::<B>(Grads::default());
        model.visit(&mut collect);
        let grads = collect.0;
        let sgd = |momentum: f64| {
            SgdConfig::new()
                .with_weight_decay(Some(WeightDecayConfig::new(5e-4)))
                .with_momentum(Some(
                    MomentumConfig::new()
                        .with_momentum(momentum)
                        .with_dampening(0.0),
                ))
        };
        let (c, group, device) = (self.c, self.group, self.device);
        bench(
            c,
            &format!("{group}/adam/1-burn"),
            AdamConfig::new().init(),
            &model,
            &grads,
            &device,
        );
        bench(
            c,
            &format!("{group}/adam/2-fused"),
            FusedAdam::default().init(),
            &model,
            &grads,
            &device,
        );
        bench(
            c,
            &format!("{group}/sgd/1-burn"),
            sgd(0.9).init(),
            &model,
            &grads,
            &device,
        );
        let fused = FusedSgd::new(Some((0.9, 0.0)), Some(5e-4)).init();
        bench(
            c,
            &format!("{group}/sgd/2-fused"),
            fused,
            &model,
            &grads,
            &device,
        );
    }
}

/// One row: steps of `optim` from `model` with `grads`, each synchronised.
fn bench<B, M, O>(
    c: &mut Criterion,
    id: &str,
    mut optim: OptimizerAdaptor<O, M, B>,
    model: &M,
    grads: &Grads<B::InnerBackend>,
    device: &B::Device,
) where
    B: AutodiffBackend,
    M: TrainableClassifier<B>,
    O: SimpleOptimizer<B::InnerBackend>,
{
    let mut model = Some(model.clone());
    let mut step = || {
        let m = optim.step(1e-3, model.take().expect("the model"), grads.params());
        B::sync(device).expect("the step completes");
        model = Some(m);
    };
    // two untimed steps: the state exists (the first step creates it) and a GPU runtime has
    // compiled the kernels
    step();
    step();
    c.bench_function(id, |b| b.iter(&mut step));
}

fn benches<B: KernelBackend>(c: &mut Criterion, backend: &str) {
    let image = |channels, side| {
        DataSpec::Images(ImageSpec {
            channels,
            side,
            classes: 10,
        })
    };
    for (kind, spec) in [
        (ModelKind::Lenet5, image(1, 28)),
        (ModelKind::Resnet18Cifar, image(3, 32)),
    ] {
        let device = stack_device::<B>(Multiplier::native(), Policy::default());
        let steps = Steps::<Stack<B>> {
            c,
            group: format!("optim_step/{kind}/{backend}"),
            device: device.clone(),
        };
        kind.build::<Stack<B>, _>(spec, &device, steps)
            .expect("the model builds");
    }
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(5))
        .configure_from_args();
    match std::env::var("EMBER_BENCH_BACKEND").as_deref() {
        Ok("wgpu") => {
            cubecl_kernels::runtime::wgpu_adapter().unwrap_or_else(|e| panic!("{e}"));
            benches::<burn::backend::Wgpu>(&mut c, "wgpu")
        }
        #[cfg(feature = "cuda")]
        Ok("cuda") => benches::<burn::backend::Cuda>(&mut c, "cuda"),
        Ok("ndarray") | Err(_) => benches::<burn::backend::NdArray>(&mut c, "ndarray"),
        Ok(other) => {
            panic!("EMBER_BENCH_BACKEND={other}: ndarray, wgpu or cuda (with the cuda feature)")
        }
    }
    c.final_summary();
}
