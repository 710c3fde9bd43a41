//! `Bcr<B>` on unmodified `burn::nn` layers, on ndarray (the host product) and on the CubeCL
//! runtime `EMBER_TEST_RUNTIME` selects (the kernel; wgpu by default): packed models equal the
//! masked dense ones, packed contractions run BCRC's sparse product and every other op densifies
//! and says so, unpacked models are the inner backend bit for bit, and the packed model file
//! round-trips and refuses damaged bytes.

mod decorator;
mod file;
mod gru;

use burn::module::Module;
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use burn_bcr::module::weights;
use burn_bcr::pack::{masked, pack, view_of};
use burn_bcr::project::project;
use cubecl_kernels::bcrc::Bcrc;
use cubecl_kernels::testing::assert_close;
pub use cubecl_kernels::testing::{Net, net, with_weights};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The level every test prunes at: 4× in blocks of 4 × 4.
const LEVEL: &str = "4x:4x4";

/// How close a packed model's results are to the masked dense model's, relative.
const TOLERANCE: f32 = 1e-4;

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

/// `a` equals `b` within [`TOLERANCE`] (f32 sums in another order).
pub fn close<const D: usize>(a: Tensor<impl Backend, D>, b: Tensor<impl Backend, D>, what: &str) {
    assert_close(a, b, TOLERANCE, what)
}
