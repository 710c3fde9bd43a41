//! Whole-model training steps on the CPU (burn-ndarray under Ember's training stack, as `ember
//! train` runs it): forward, backward and Adam's update of LeNet-5, ResNet-18 (CIFAR stem, full
//! width and width 16), ResMLP-S12 and DeiT-Ti at CIFAR-10's shapes, and the 2 × 256 GRU at
//! FSDD's, each under the native multiplier (convolutions on `--conv gemm`, the default, and on
//! Burn's own kernels), AFM16, and SparseAct 0.8:64 for the models made of linear layers; the
//! ResNets also with Burn's composite batch norm (`native-burn-norm`: the fused one unregistered
//! for the row); and
//! an inference step (the forward pass of the evaluation form, no autodiff) dense and with HiNM
//! 75 % packed weights (Gyro-permuted masks of the model's random weights, first and last layers
//! dense as `ember prune` leaves them) for the models whose layers take HiNM's tiles.
//!
//! Rows: `model_step/<model>_b<batch>/<backend>-<threads>t/<variant>`. The backend is
//! `EMBER_BENCH_BACKEND`: `ndarray` (the default), `wgpu`, or `cuda` (built with the `cuda`
//! feature). The thread count is `EMBER_BENCH_THREADS` (default: every core), for rayon
//! (burn-ndarray's and Ember's host paths) and for matrixmultiply (burn-ndarray's matmul):
//! `cargo xtask bench --filter model` runs this bench with every core and with one and puts
//! PyTorch's step of the same model beside each row (`xtask/gpu/torch_rows.py`, where torch is
//! installed). `EMBER_BENCH_MODELS` limits the models (comma-separated names); ResNet-18 at
//! full width (batch 128) runs on the CPU only when named there (seconds a step).

use burn::optim::{GradientsParams, Optimizer};
use burn::prelude::*;
use burn::tensor::Distribution;
use burn::tensor::backend::AutodiffBackend;
use burn_approx_mul::{ConvRoute, Multiplier};
use burn_hinm::Level;
use burn_hinm::gyro::Method;
use burn_sparse_act::{Policy, Pruning};
use criterion::Criterion;
use cubecl_kernels::decorator::KernelBackend;
use cubecl_kernels::workers;
use ember_models::broadcast::unregister_batch_norm;
use ember_models::classifier::Classifier;
use ember_models::classifier::{ModelKind, ModelVisitor, TrainableClassifier};
use ember_models::data::{Batch, DataSpec, ImageSpec, Inputs};
use ember_train::backend::{Stack, TrainBackend, stack_device};
use ember_train::fused_optim::FusedAdam;
use ember_train::hinm;
use ember_train::policy::contraction_layers;

/// One model of the table: its kind, batch and input.
struct Case {
    kind: ModelKind,
    batch: usize,
    spec: DataSpec,
    /// Whether the model's contractions are linear layers only (SparseAct's rows).
    linear: bool,
    /// The HiNM level of the packed inference rows, where every pruned layer takes its tiles.
    hinm: Option<&'static str>,
}

const CIFAR: DataSpec = DataSpec::Images(ImageSpec {
    channels: 3,
    side: 32,
    classes: 10,
});

/// FSDD's MFCC frames: 39 features, 48 frames (half a second).
const FSDD_FEATURES: usize = 39;
const FSDD_STEPS: usize = 48;

fn cases() -> Vec<Case> {
    let mnist = DataSpec::Images(ImageSpec {
        channels: 1,
        side: 28,
        classes: 10,
    });
    let case = |kind, batch, spec, linear, hinm| Case {
        kind,
        batch,
        spec,
        linear,
        hinm,
    };
    vec![
        // LeNet-5's 6, 120 and 84 outputs and the GRU's 39 inputs take no HiNM tile
        case(ModelKind::Lenet5, 64, mnist, false, None),
        case(
            ModelKind::Resnet18CifarW16,
            64,
            CIFAR,
            false,
            Some("75:v16"),
        ),
        case(ModelKind::Resnet18Cifar, 128, CIFAR, false, Some("75:v64")),
        case(ModelKind::ResmlpS12, 64, CIFAR, true, Some("75:v64")),
        case(ModelKind::DeitTi, 64, CIFAR, true, Some("75:v64")),
        case(
            ModelKind::Gru,
            64,
            DataSpec::Sequences {
                features: FSDD_FEATURES,
                classes: 10,
            },
            true,
            None,
        ),
    ]
}

/// A batch of random inputs of the case's shape and random targets.
fn batch<B: Backend>(case: &Case, device: &B::Device) -> Batch<B> {
    B::seed(device, 7);
    let inputs = match case.spec {
        DataSpec::Images(s) => Inputs::Images(Tensor::random(
            [case.batch, s.channels, s.side, s.side],
            Distribution::Normal(0.0, 1.0),
            device,
        )),
        DataSpec::Sequences { features, .. } => Inputs::Sequences {
            frames: Tensor::random(
                [case.batch, FSDD_STEPS, features],
                Distribution::Normal(0.0, 1.0),
                device,
            ),
            lengths: (0..case.batch)
                .map(|i| FSDD_STEPS - i % (FSDD_STEPS / 2))
                .collect(),
        },
    };
    let targets: Vec<i64> = (0..case.batch as i64).map(|i| i % 10).collect();
    Batch {
        inputs,
        targets: Tensor::from_ints(targets.as_slice(), device),
    }
}

/// Benchmarks one inference step (the logits of a batch, no autodiff) of the evaluation form of
/// the model it visits, dense or with its layers packed under a HiNM level.
struct Infer<'a, B: AutodiffBackend> {
    c: &'a mut Criterion,
    id: String,
    batch: Batch<B::InnerBackend>,
    device: B::Device,
    kind: ModelKind,
    hinm: Option<Level>,
}

impl<B: TrainBackend> ModelVisitor<B> for Infer<'_, B> {
    type Output = ();

    fn visit<M: TrainableClassifier<B>>(self, model: M) {
        let shapes = ember_models::params::float_shapes(&model);
        let model = model.valid();
        let model = match self.hinm {
            None => model,
            Some(level) => {
                let all = burn_hinm::module::params(&model);
                let layers = contraction_layers(&shapes);
                let plans = hinm::plan(&all, &layers, None, level, Method::Gyro, 7, false)
                    .expect("the case's level fits its pruned layers");
                let packed = hinm::packed_model(self.kind, &all, &plans, Default::default())
                    .expect("the masks pack");
                burn_hinm::module::load_packed(model, &packed).expect("the packed model loads")
            }
        };
        let inputs = self.batch.inputs;
        let device = self.device;
        let mut model = Some(model);
        self.c.bench_function(&self.id, |b| {
            b.iter(|| {
                let m = model.take().expect("the model between steps");
                let inputs = inputs.clone();
                // on one of rayon's workers where the backend computes on the host
                let (m, logits) = workers::run_for::<B::InnerBackend, _>(|| {
                    let logits = m.logits(inputs);
                    (m, logits)
                });
                model = Some(m);
                B::InnerBackend::sync(&device).expect("the step completes");
                logits
            })
        });
    }
}

/// Benchmarks one training step of the model it visits.
struct Step<'a, B: AutodiffBackend> {
    c: &'a mut Criterion,
    id: String,
    batch: Batch<B>,
    device: B::Device,
}

impl<B: TrainBackend> ModelVisitor<B> for Step<'_, B> {
    type Output = ();

    fn visit<M: TrainableClassifier<B>>(self, model: M) {
        let mut optim = FusedAdam::default().init::<B, M>();
        let mut model = Some(model);
        let (batch, device) = (self.batch, self.device);
        let mut step = || {
            let m = model.take().expect("the model between steps");
            let batch = batch.clone();
            // on one of rayon's workers where the backend computes on the host, as `ember train`
            let m = workers::run_for::<B::InnerBackend, _>(|| {
                let out = m.forward_classification(batch);
                let grads = GradientsParams::from_grads(out.loss.backward(), &m);
                optim.step(1e-3, m, grads)
            });
            B::sync(&device).expect("the step completes");
            model = Some(m);
        };
        let mut warmed = false;
        self.c.bench_function(&self.id, |b| {
            // two untimed steps first (only for a row criterion runs): a GPU runtime compiles
            // kernels and grows its memory pools over the first steps, which a short warm-up
            // would otherwise leave in the measurement
            if !warmed {
                step();
                step();
                warmed = true;
            }
            b.iter(&mut step)
        });
    }
}

fn benches<B: KernelBackend>(
    c: &mut Criterion,
    backend: &str,
    threads: usize,
    only: &Option<Vec<String>>,
) {
    let afm16 = Multiplier::parse("afm16").expect("afm16 is built in");
    let native = Multiplier::native();
    let sparse = Policy::uniform(Pruning::new(0.8, 64).expect("0.8:64 is valid"));
    for case in cases() {
        let named = only
            .as_ref()
            .map(|o| o.iter().any(|m| m == &case.kind.to_string()));
        let heavy = case.kind == ModelKind::Resnet18Cifar && backend == "ndarray";
        if named == Some(false) || (heavy && named.is_none()) {
            continue;
        }
        let mut variants = vec![
            (
                "1-native",
                native.clone().with_conv(ConvRoute::Gemm),
                Policy::default(),
            ),
            (
                "2-native-burn-conv",
                native.clone().with_conv(ConvRoute::Burn),
                Policy::default(),
            ),
            (
                "2-native-burn-norm",
                native.clone().with_conv(ConvRoute::Gemm),
                Policy::default(),
            ),
            (
                "3-afm16",
                afm16.clone().with_conv(ConvRoute::Gemm),
                Policy::default(),
            ),
        ];
        if case.linear {
            variants.push((
                "4-sparse-act-0.8:64",
                native.clone().with_conv(ConvRoute::Gemm),
                sparse.clone(),
            ));
        }
        // Burn's own convolution is what the model step had without `--conv`: the models
        // without convolutions (GRU) have no such row, and ResNet-18 at full width would take
        // minutes a step on it
        // Burn's own batch norm (the fused one unregistered for this row) where the model has
        // batch norms
        let resnet = matches!(
            case.kind,
            ModelKind::Resnet18Cifar | ModelKind::Resnet18CifarW16
        );
        variants.retain(|(name, ..)| {
            (!name.contains("burn-conv")
                || matches!(case.kind, ModelKind::Lenet5 | ModelKind::Resnet18CifarW16))
                && (!name.contains("burn-norm") || resnet)
        });
        for (variant, multiplier, policy) in variants {
            // every stack_device registers the fused ops again
            let device = stack_device::<B>(multiplier, policy);
            if variant.contains("burn-norm") {
                unregister_batch_norm::<Stack<B>>();
                unregister_batch_norm::<ember_train::backend::Decorated<B>>();
            }
            let id = format!(
                "model_step/{}_b{}/{backend}-{threads}t/{variant}",
                case.kind, case.batch
            );
            let step = Step::<Stack<B>> {
                c,
                id,
                batch: batch::<Stack<B>>(&case, &device),
                device: device.clone(),
            };
            case.kind
                .build::<Stack<B>, _>(case.spec, &device, step)
                .expect("the case's model takes its inputs");
        }
        let levels = [("5-dense-infer", None), ("6-hinm-75-infer", case.hinm)];
        for (variant, level) in levels.into_iter().filter(|_| case.hinm.is_some()) {
            let device =
                stack_device::<B>(native.clone().with_conv(ConvRoute::Gemm), Policy::default());
            let id = format!(
                "model_step/{}_b{}/{backend}-{threads}t/{variant}",
                case.kind, case.batch
            );
            let infer = Infer::<Stack<B>> {
                c,
                id,
                batch: batch(&case, &device),
                device: device.clone(),
                kind: case.kind,
                hinm: level.map(|l| l.parse().expect("the case's level parses")),
            };
            case.kind
                .build::<Stack<B>, _>(case.spec, &device, infer)
                .expect("the case's model takes its inputs");
        }
    }
}

fn main() {
    let threads = std::env::var("EMBER_BENCH_THREADS")
        .ok()
        .and_then(|t| t.parse::<usize>().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // SAFETY: set before any thread of this process starts (criterion and rayon start later).
    unsafe { std::env::set_var("MATMUL_NUM_THREADS", threads.to_string()) };
    workers::build_global(Some(threads)).expect("rayon's global pool is built once, here");
    let only = std::env::var("EMBER_BENCH_MODELS")
        .ok()
        .map(|m| m.split(',').map(str::to_string).collect());
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(8))
        .configure_from_args();
    match std::env::var("EMBER_BENCH_BACKEND").as_deref() {
        Ok("wgpu") => {
            cubecl_kernels::runtime::wgpu_adapter().unwrap_or_else(|e| panic!("{e}"));
            benches::<burn::backend::Wgpu>(&mut c, "wgpu", threads, &only)
        }
        #[cfg(feature = "cuda")]
        Ok("cuda") => benches::<burn::backend::Cuda>(&mut c, "cuda", threads, &only),
        Ok("ndarray") | Err(_) => {
            benches::<burn::backend::NdArray>(&mut c, "ndarray", threads, &only)
        }
        Ok(other) => {
            panic!("EMBER_BENCH_BACKEND={other}: ndarray, wgpu or cuda (with the cuda feature)")
        }
    }
    c.final_summary();
}
