//! `Bcr<B>` on unmodified `burn::nn` layers, on ndarray (the host product) and wgpu (the
//! kernel): packed models equal the masked dense ones, packed contractions run BCRC's sparse
//! product and every other op densifies and says so, unpacked models are the inner backend bit
//! for bit, and the packed model file round-trips and refuses damaged bytes.

mod decorator;
mod file;
mod gru;

use burn::module::{Module, ModuleMapper, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Linear, LinearConfig, PaddingConfig2d};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use burn_bcr::module::weights;
use burn_bcr::pack::{masked, pack, view_of};
use burn_bcr::project::project;
use cubecl_kernels::bcrc::Bcrc;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The level every test prunes at: 4× in blocks of 4 × 4.
const LEVEL: &str = "4x:4x4";

#[derive(Module, Debug)]
pub struct Net<B: Backend> {
    pub conv: Conv2d<B>,
    pub fc: Linear<B>,
}

/// A freshly initialised net whose parameters hold values (Burn initialises parameters
/// lazily, and every clone of an uninitialised one would draw its own).
pub fn net<B: Backend>(device: &B::Device) -> Net<B> {
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

/// The BCRC forms (by layer path) of `model`'s contraction weights whose layer `take` accepts,
/// projected at [`LEVEL`], and their dense masked weights in Burn's layout.
pub fn packed_weights<B: Backend, M: Module<B>>(
    model: &M,
    take: impl Fn(&str) -> bool,
) -> (BTreeMap<String, Arc<Bcrc>>, BTreeMap<String, Vec<f32>>) {
    let mut packed = BTreeMap::new();
    let mut dense = BTreeMap::new();
    for (layer, (dims, w)) in weights(model) {
        if !take(&layer) {
            continue;
        }
        let view = view_of(&w, &dims).unwrap();
        let mask = project(&view, LEVEL.parse().unwrap()).unwrap();
        let bcrc = pack(&view, &mask).unwrap();
        assert_eq!(bcrc.weights.len(), view.data.len() / 4, "{layer}");
        dense.insert(layer.clone(), masked(&bcrc, &dims).unwrap());
        packed.insert(layer, Arc::new(bcrc));
    }
    (packed, dense)
}

/// `model` with the layers in `values` given those weights.
pub fn with_weights<B: Backend, M: Module<B>>(model: M, values: &BTreeMap<String, Vec<f32>>) -> M {
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

/// `a` equals `b` within 1e-4 relative (f32 sums in another order).
pub fn close<const D: usize>(a: Tensor<impl Backend, D>, b: Tensor<impl Backend, D>, what: &str) {
    assert_eq!(a.dims(), b.dims(), "{what}");
    let (a, b) = (
        a.into_data().to_vec::<f32>().unwrap(),
        b.into_data().to_vec::<f32>().unwrap(),
    );
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            (x - y).abs() <= 1e-4 * (1.0 + y.abs()),
            "{what} at {i}: {x} vs {y}"
        );
    }
}
