//! `Hinm<B>` on unmodified `burn::nn` layers, on ndarray (host path) and wgpu (the kernel):
//! a packed model's outputs equal the masked dense model's, packed contractions run the sparse
//! product, and every other op densifies and says so.

use burn::backend::{NdArray, Wgpu};
use burn::module::{Module, ModuleMapper, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Linear, LinearConfig, PaddingConfig2d};
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Tensor, TensorData};
use burn_hinm::backend::{Hinm, HinmDevice};
use burn_hinm::gyro::{Method, search};
use burn_hinm::mask::Saliency;
use burn_hinm::module::{pack_module, weights};
use burn_hinm::pack::{masked, pack, scores};
use cubecl_kernels::decorator::KernelBackend;
use cubecl_kernels::decorator::effects;
use cubecl_kernels::hinm::Packed;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Module, Debug)]
struct Net<B: Backend> {
    conv: Conv2d<B>,
    fc: Linear<B>,
}

/// A freshly initialised net whose parameters hold values (Burn initialises parameters
/// lazily, and every clone of an uninitialised one would draw its own).
fn net<B: Backend>(device: &B::Device) -> Net<B> {
    let lazy = lazy_net(device);
    lazy_net(device).load_record(lazy.into_record())
}

fn lazy_net<B: Backend>(device: &B::Device) -> Net<B> {
    Net {
        conv: Conv2dConfig::new([6, 16], [3, 3])
            .with_stride([2, 1])
            .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
            .init(device),
        fc: LinearConfig::new(24, 16).init(device),
    }
}

/// `model` with the layers in `values` given those weights.
fn with_weights<B: Backend, M: Module<B>>(model: M, values: &BTreeMap<String, Vec<f32>>) -> M {
    struct Set<'a> {
        path: Vec<String>,
        values: &'a BTreeMap<String, Vec<f32>>,
    }
    impl<B: Backend> ModuleMapper<B> for Set<'_> {
        fn enter_module(&mut self, name: &str, _: &str) {
            self.path.push(name.into());
        }
        fn exit_module(&mut self, _: &str, _: &str) {
            self.path.pop();
        }
        fn map_float<const D: usize>(&mut self, p: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let (id, t, mapper) = p.consume();
            let layer = self.path[..self.path.len() - 1].join(".");
            let t = match self.values.get(&layer) {
                Some(v) if self.path.last().is_some_and(|n| n == "weight") => {
                    let data = TensorData::new(v.clone(), t.shape());
                    Tensor::from_data(data, &t.device())
                }
                _ => t,
            };
            Param::from_mapped_value(id, t, mapper)
        }
    }
    model.map(&mut Set {
        path: Vec::new(),
        values,
    })
}

fn close(a: Tensor<impl Backend, 2>, b: Tensor<impl Backend, 2>, what: &str) {
    let (a, b) = (
        a.into_data().to_vec::<f32>().unwrap(),
        b.into_data().to_vec::<f32>().unwrap(),
    );
    assert_eq!(a.len(), b.len(), "{what}");
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            (x - y).abs() <= 1e-5 * (1.0 + y.abs()),
            "{what} at {i}: {x} vs {y}"
        );
    }
}

fn packed_model_equals_masked_dense<B: KernelBackend>(route: &str) {
    let device = HinmDevice::<B>::new(Default::default(), ());
    let model = net::<Hinm<B>>(&device);
    let mut packed = BTreeMap::new();
    let mut dense = BTreeMap::new();
    for (layer, (dims, w)) in weights(&model) {
        let s = scores(&w, &dims, Saliency::Magnitude).unwrap();
        let (mask, _) = search(&s, 8, 0.5, Method::Gyro, 7).unwrap();
        let p: Packed = pack(&w, &dims, &mask).unwrap();
        dense.insert(layer.clone(), masked(&p, &dims).unwrap());
        packed.insert(layer, Arc::new(p));
    }
    let reference = with_weights(model.clone(), &dense);
    let sparse = pack_module(model, &packed);
    assert_eq!(
        sparse.fc.weight.val().dims(),
        [24, 16],
        "a packed weight keeps its shape"
    );

    let x = Tensor::<Hinm<B>, 4>::random([2, 6, 7, 5], Distribution::Default, &device);
    let v = Tensor::<Hinm<B>, 2>::random([5, 24], Distribution::Default, &device);
    effects::start();
    let conv = sparse.conv.forward(x.clone()).flatten::<2>(1, 3);
    let fc = sparse.fc.forward(v.clone());
    let mm = v.clone().matmul(sparse.fc.weight.val());
    let seen = effects::finish();
    close(conv, reference.conv.forward(x).flatten::<2>(1, 3), "conv2d");
    close(fc, reference.fc.forward(v.clone()), "linear");
    close(mm, v.matmul(reference.fc.weight.val()), "matmul");
    for layer in ["conv", "fc"] {
        let l = &seen.layers[layer];
        assert!(l.densified.is_empty(), "{layer}: {:?}", l.densified);
        let forward = &l.passes[effects::Pass::Forward.index()];
        assert!(
            forward.iter().all(|c| c.route == route),
            "{layer}: {forward:?}"
        );
    }
    assert_eq!(
        seen.layers["fc"].passes[effects::Pass::Matmul.index()][0].route,
        route
    );

    // any other op densifies the packed weight and the effects say which
    effects::start();
    let shifted = sparse.fc.weight.val() + 1.0;
    let seen = effects::finish();
    assert_eq!(
        seen.layers["fc"].densified.get("float_add_scalar"),
        Some(&1)
    );
    close(shifted, reference.fc.weight.val() + 1.0, "densified");
}

#[test]
fn ndarray_runs_the_host_product() {
    packed_model_equals_masked_dense::<NdArray>("hinm host");
}

#[test]
fn wgpu_runs_the_kernel() {
    packed_model_equals_masked_dense::<Wgpu>("hinm kernel");
}

#[test]
fn unpacked_models_are_the_inner_backend_bit_for_bit() {
    let device = HinmDevice::<NdArray>::new(Default::default(), ());
    let model = net::<Hinm<NdArray>>(&device);
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let bytes = recorder.record(model.clone().into_record(), ()).unwrap();
    let plain = net::<NdArray>(&Default::default())
        .load_record(recorder.load(bytes, &Default::default()).unwrap());
    let x = [0.5f32; 6 * 7 * 5];
    let xh =
        Tensor::<Hinm<NdArray>, 4>::from_data(TensorData::new(x.to_vec(), [1, 6, 7, 5]), &device);
    let xp = Tensor::<NdArray, 4>::from_data(
        TensorData::new(x.to_vec(), [1, 6, 7, 5]),
        &Default::default(),
    );
    assert_eq!(
        model.conv.forward(xh).into_data().to_vec::<f32>().unwrap(),
        plain.conv.forward(xp).into_data().to_vec::<f32>().unwrap()
    );
}
