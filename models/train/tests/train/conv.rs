//! Whole models with their convolutions on Ember's GEMM routes (`--conv gemm`, the default)
//! against Burn's own kernels on ndarray (`--conv burn`), on the training stack: LeNet-5 and
//! ResNet-18 at width 16 (CIFAR stem), the same weights and batch, one forward and backward
//! pass: logits and every parameter's gradient equal within 1e-4 of the largest magnitude of
//! each, on ndarray (host im2col + GEMM) and on wgpu (im2col + matmul where the runtime has no
//! CMMA).
//!
//! The reference is ndarray's: burn-cubecl 0.21's own kernel (`--conv burn` on wgpu) gives a
//! wrong input gradient for ResNet's 1×1 stride-2 shortcut convolutions (burn-approx-mul's
//! `burn_cubecl_strided_input_gradients_are_wrong` pins it).

use burn::module::{ModuleVisitor, Param};
use burn::prelude::*;
use burn::record::{FullPrecisionSettings, NamedMpkBytesRecorder, Recorder};
use burn::tensor::backend::AutodiffBackend;
use burn_approx_mul::{ConvRoute, Multiplier};
use cubecl_kernels::decorator::KernelBackend;
use ember_models::classifier::{ModelKind, ModelVisitor, TrainableClassifier};
use ember_models::data::{Batch, DataSpec, ImageSpec, Inputs};
use ember_train::backend::{Stack, stack_device};

/// Logits, then each parameter's gradient.
type Step = Vec<Vec<f32>>;

/// One forward and backward pass of the visited model: with the weights in `weights` where
/// given, and the record of the weights it ran with.
struct Run<B: AutodiffBackend> {
    batch: Batch<B>,
    weights: Option<Vec<u8>>,
    device: B::Device,
}

fn recorder() -> NamedMpkBytesRecorder<FullPrecisionSettings> {
    NamedMpkBytesRecorder::new()
}

impl<B: AutodiffBackend> ModelVisitor<B> for Run<B> {
    type Output = (Step, Vec<u8>);

    fn visit<M: TrainableClassifier<B>>(self, model: M) -> (Step, Vec<u8>) {
        let model = match self.weights {
            Some(bytes) => {
                let record = recorder().load(bytes, &self.device).unwrap();
                model.load_record(record)
            }
            None => model,
        };
        let out = model.forward_classification(self.batch);
        let logits = out.output.to_data().to_vec::<f32>().unwrap();
        let grads = out.loss.backward();
        let mut collect = Grads::<B> {
            grads: &grads,
            out: vec![logits],
        };
        model.visit(&mut collect);
        // recorded after the pass: parameters are initialised lazily, at their first use (a
        // clone recorded before would draw its own values)
        let bytes = recorder().record(model.into_record(), ()).unwrap();
        (collect.out, bytes)
    }
}

/// The gradient of every parameter that has one (batch norm's running statistics have none).
struct Grads<'a, B: AutodiffBackend> {
    grads: &'a B::Gradients,
    out: Step,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Grads<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = param.val().grad(self.grads) {
            self.out.push(g.into_data().to_vec().unwrap());
        }
    }
}

/// A pass of `kind` on `B` with its convolutions on `route`, from `weights` (else freshly
/// initialised); the same four images whatever the backend.
fn step<B: KernelBackend>(
    kind: ModelKind,
    spec: DataSpec,
    route: ConvRoute,
    weights: Option<Vec<u8>>,
) -> (Step, Vec<u8>) {
    let device = stack_device::<B>(Multiplier::native().with_conv(route), Default::default());
    let _rng = crate::seeded();
    <Stack<B> as Backend>::seed(&device, 11);
    let DataSpec::Images(s) = spec else {
        unreachable!("image models")
    };
    let n = 4 * s.channels * s.side * s.side;
    let pixels: Vec<f32> = (0..n).map(|i| (i as f32 * 0.731).sin()).collect();
    let images = Tensor::from_data(
        TensorData::new(pixels, [4, s.channels, s.side, s.side]),
        &device,
    );
    let batch = Batch {
        inputs: Inputs::Images(images),
        targets: Tensor::from_ints([1, 3, 0, 7], &device),
    };
    let run = Run {
        batch,
        weights,
        device: device.clone(),
    };
    kind.build::<Stack<B>, _>(spec, &device, run).unwrap()
}

fn assert_close(got: &Step, want: &Step, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: parameters");
    assert!(got.len() > 2, "{what}: the gradients were collected");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let scale = w.iter().fold(1e-12f32, |m, v| m.max(v.abs()));
        let worst = g.iter().zip(w).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(
            worst <= 1e-4 * scale,
            "{what}: tensor {i} differs by {worst} (largest {scale})"
        );
    }
}

fn models() -> [(ModelKind, DataSpec); 2] {
    let image = |channels, side| {
        DataSpec::Images(ImageSpec {
            channels,
            side,
            classes: 10,
        })
    };
    [
        (ModelKind::Lenet5, image(1, 28)),
        (ModelKind::Resnet18CifarW16, image(3, 32)),
    ]
}

#[test]
fn gemm_convolutions_equal_burns_on_ndarray_and_wgpu() {
    use burn::backend::{NdArray, Wgpu};
    cubecl_kernels::runtime::wgpu_adapter().unwrap_or_else(|e| panic!("{e}"));
    for (kind, spec) in models() {
        let (want, weights) = step::<NdArray>(kind, spec, ConvRoute::Burn, None);
        let (got, _) = step::<NdArray>(kind, spec, ConvRoute::Gemm, Some(weights.clone()));
        assert_close(&got, &want, &format!("{kind} on ndarray"));
        for route in [ConvRoute::Gemm, ConvRoute::Im2col] {
            let (got, _) = step::<Wgpu>(kind, spec, route, Some(weights.clone()));
            assert_close(&got, &want, &format!("{kind} on wgpu, {route}"));
        }
    }
}
