//! Deterministic test data shared by the kernels' tests and the crates built on them, the
//! small net and model helpers of the weight-sparsity decorators' suites, and the CubeCL
//! runtime every kernel test runs on (`EMBER_TEST_RUNTIME`: [`runtime_test!`](crate::runtime_test),
//! [`TestRuntime`], [`TestBackend`]).

pub mod cases;
mod runtime;

pub use runtime::{
    RUNTIME_VAR, RuntimeTest, Selected, TestBackend, TestRuntime, on_selected_runtime,
    selected_runtime,
};

/// `n` values in `[-1, 1)` from a xorshift generator seeded by `seed` (same `seed`, same values).
pub fn uniform(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// `n` values of [`uniform`] scaled to `[-4, 4)` with special ones first: ±0 and values either
/// side of zero, then with `non_finite` NaN and ±∞ (what an activation's tests feed it).
pub fn with_specials(n: usize, seed: u64, non_finite: bool) -> Vec<f32> {
    let special: &[f32] = match non_finite {
        true => &[
            -0.0,
            0.0,
            1.5,
            -2.5,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ],
        false => &[-0.0, 0.0, 1.5, -2.5],
    };
    let mut v: Vec<f32> = uniform(n, seed).iter().map(|v| v * 4.0).collect();
    for (slot, s) in v.iter_mut().zip(special) {
        *slot = *s;
    }
    v
}

pub use crate::approx::host::{binades, mitchell_table};
use crate::approx::{ApproxMultiply, LutTable};
use crate::decorator::effects;
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Linear, LinearConfig, PaddingConfig2d};
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Distribution, Tensor, TensorData};
use std::collections::BTreeMap;

/// `shape`'s worth of values in `[-1, 1)` from a linear congruential generator seeded by
/// `seed`: the data of the op-level suites (identity, ApproxMul decorator).
pub fn lcg_data(shape: &[usize], seed: u64) -> TensorData {
    let n: usize = shape.iter().product();
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let values: Vec<f32> = (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    TensorData::new(values, shape.to_vec())
}

/// A tensor of [`lcg_data`] that requires its gradient.
pub fn leaf<B: AutodiffBackend, const D: usize>(
    shape: [usize; D],
    seed: u64,
    device: &B::Device,
) -> Tensor<B, D> {
    Tensor::from_data(lcg_data(&shape, seed), device).require_grad()
}

/// Runs one op case of the op-level suites: `record(name, data)` receives the output of
/// `$output` and the gradient of each listed input for the loss `Σ output ⊙ w` (fixed `w`).
/// `record_case!(record, device, B, "linear", [x, w, bias], linear(x.clone(), …))`.
#[macro_export]
macro_rules! record_case {
    ($record:ident, $device:expr, $b:ty, $name:expr, [$($input:ident),*], $output:expr) => {{
        let y = $output;
        let weights =
            ::burn::tensor::Tensor::<$b, _>::from_data($crate::testing::lcg_data(&y.dims(), 99), $device);
        let grads = (y.clone() * weights).sum().backward();
        $record(&format!("{} output", $name), y.into_data());
        $($record(
            &format!("{} d{}", $name, stringify!($input)),
            $input.grad(&grads).expect("gradient").into_data(),
        );)*
    }};
}

/// The gradient of every parameter of `module` in `grads`, in visiting order (the identity and
/// gradient suites compare these bit for bit).
///
/// # Panics
/// If a parameter has no gradient.
pub fn param_grads<B: AutodiffBackend, M: Module<B>>(
    module: &M,
    grads: &B::Gradients,
) -> Vec<Vec<f32>> {
    struct Collect<'a, B: AutodiffBackend> {
        grads: &'a B::Gradients,
        out: Vec<Vec<f32>>,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Collect<'_, B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let g = param
                .val()
                .grad(self.grads)
                .expect("every parameter has a gradient");
            self.out.push(g.into_data().to_vec().unwrap());
        }
    }
    let mut collect = Collect::<B> {
        grads,
        out: Vec::new(),
    };
    module.visit(&mut collect);
    collect.out
}

/// A table with more significand bits than `m`: it cannot be packed into bytes.
pub fn unpackable_table(m: u32) -> ApproxMultiply {
    let n = 1u32 << m;
    let sig = (0..n * n)
        .map(|i| 1.0 + (i as f32 + 0.5) / (n * n) as f32)
        .collect();
    let table = LutTable::new(m, sig);
    assert!(table.packed().is_none());
    ApproxMultiply::Lut(table)
}

/// One multiply of every comptime shape a kernel compiles: plain, the FP32-width models, and
/// tables staged in shared memory, packed into bytes, and read from global memory.
pub fn multipliers() -> Vec<(&'static str, ApproxMultiply)> {
    vec![
        ("plain", ApproxMultiply::Plain),
        ("mitchell23", ApproxMultiply::Mitchell),
        ("mbm23", ApproxMultiply::Mbm),
        ("lut m=3 (shared)", mitchell_table(3)),
        ("lut m=7 (packed bytes)", mitchell_table(7)),
        ("lut m=7 (unpackable, global)", unpackable_table(7)),
        ("lut m=8 (global)", mitchell_table(8)),
    ]
}

pub use crate::bcrc::random_bcrc;
pub use crate::hinm::random_packed;

/// The small net of the weight-sparsity decorators' suites: a Conv2d (6 → 16 channels, 3 × 3,
/// stride 2 × 1, padding 1, a 16 × 54 GEMM view) and a Linear (24 → 16).
#[derive(burn::module::Module, Debug)]
pub struct Net<B: Backend> {
    /// 6 → 16 channels, 3 × 3.
    pub conv: Conv2d<B>,
    /// 24 → 16.
    pub fc: Linear<B>,
}

/// A freshly initialised [`Net`] whose parameters hold values (Burn initialises parameters
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

/// `model` with the weight of every layer in `values` (by layer path: Burn's module path
/// without `.weight`) given those values, in Burn's layout.
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

/// The largest difference relative to the largest |value| [`assert_matches_host`] allows on a
/// runtime that fuses multiplies and adds ([`TestRuntime::CONTRACTS_MUL_ADD`]): an FMA rounds
/// once where the host rounds twice, a difference of at most one rounding of each product,
/// which stays far below this on the kernels' sizes (the largest measured on an H100 by the
/// benches was 2.4e-7).
pub const FMA_TOLERANCE: f32 = 1e-5;

/// Asserts that a kernel's result `got` on runtime `R` is the host reference `want`: bit for
/// bit, where `R` rounds as the host does; within [`FMA_TOLERANCE`] of the largest |want| where
/// it fuses multiplies and adds ([`TestRuntime::CONTRACTS_MUL_ADD`], CUDA). A NaN matches any
/// NaN (IEEE 754 leaves a NaN's sign and payload to the implementation); infinities and
/// zeros' signs must match everywhere.
///
/// # Panics
/// Naming `what`, the first value that differs, and both values.
pub fn assert_matches_host<R: TestRuntime>(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want
        .iter()
        .filter(|v| v.is_finite())
        .fold(0f32, |m, v| m.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let same = if g.is_nan() || w.is_nan() {
            g.is_nan() && w.is_nan()
        } else if R::CONTRACTS_MUL_ADD && g.is_finite() && w.is_finite() {
            (g - w).abs() <= FMA_TOLERANCE * scale
                && (*g != 0.0 || *w != 0.0 || g.to_bits() == w.to_bits())
        } else {
            g.to_bits() == w.to_bits()
        };
        assert!(
            same,
            "{what}: value {i} is {g:?} on {}, {w:?} on the host",
            R::NAME
        );
    }
}

/// Asserts that every value of each tensor in `a` is within `rel` of the same value in `b`,
/// relative to the largest magnitude of its tensor in `a` (tensors read flat; `what` names the
/// comparison).
pub fn assert_all_close(a: &[Vec<f32>], b: &[Vec<f32>], rel: f32, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: tensor count");
    for (i, (a, b)) in a.iter().zip(b).enumerate() {
        assert_eq!(a.len(), b.len(), "{what}: tensor {i}");
        let scale = a.iter().fold(f32::MIN_POSITIVE, |m, v| m.max(v.abs()));
        for (j, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= rel * scale,
                "{what}: tensor {i}[{j}]: {x} vs {y}"
            );
        }
    }
}

/// Asserts that `a` equals `b` (same shape) within `tolerance` relative: `|a - b| ≤ tolerance
/// · (1 + |b|)` everywhere (f32 sums in another order); `what` names them in the failure.
pub fn assert_close<const D: usize>(
    a: Tensor<impl Backend, D>,
    b: Tensor<impl Backend, D>,
    tolerance: f32,
    what: &str,
) {
    assert_eq!(a.dims(), b.dims(), "{what}");
    let (a, b) = (
        a.into_data().to_vec::<f32>().unwrap(),
        b.into_data().to_vec::<f32>().unwrap(),
    );
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            (x - y).abs() <= tolerance * (1.0 + y.abs()),
            "{what} at {i}: {x} vs {y}"
        );
    }
}

/// Asserts that an op other than a contraction (adding a scalar) on the packed weight `packed`
/// of `layer` densifies it, that the effects say so, and that it computes what it does on the
/// dense masked weight `dense` (within `tolerance`, as [`assert_close`]).
pub fn assert_other_ops_densify<const D: usize>(
    packed: Tensor<impl Backend, D>,
    dense: Tensor<impl Backend, D>,
    layer: &str,
    tolerance: f32,
) {
    effects::start();
    let shifted = packed + 1.0;
    let seen = effects::finish();
    assert_eq!(
        seen.layers[layer].densified.get("float_add_scalar"),
        Some(&1)
    );
    assert_close(shifted, dense + 1.0, tolerance, "densified");
}

/// Runs a packed [`Net`] (`sparse`) beside its masked dense twin (`reference`), on one device:
/// its conv2d, its linear layer and a matmul by its fc weight equal the twin's within
/// `tolerance`; every forward contraction of `conv` and `fc`, and the matmul, ran on `route`
/// with nothing densified; and any other op on the packed fc weight densifies it
/// ([`assert_other_ops_densify`], within `dense_tolerance`). Returns the effects of the three
/// contractions, for a packed format's own checks.
pub fn assert_packed_net_matches<B: Backend>(
    sparse: &Net<B>,
    reference: &Net<B>,
    route: &str,
    tolerance: f32,
    dense_tolerance: f32,
) -> effects::Effects {
    use effects::Pass;
    let device = sparse.fc.weight.device();
    let x = Tensor::<B, 4>::random([2, 6, 7, 5], Distribution::Default, &device);
    let v = Tensor::<B, 2>::random([5, 24], Distribution::Default, &device);
    effects::start();
    let conv = sparse.conv.forward(x.clone());
    let fc = sparse.fc.forward(v.clone());
    let mm = v.clone().matmul(sparse.fc.weight.val());
    let seen = effects::finish();
    assert_close(conv, reference.conv.forward(x), tolerance, "conv2d");
    assert_close(fc, reference.fc.forward(v.clone()), tolerance, "linear");
    assert_close(mm, v.matmul(reference.fc.weight.val()), tolerance, "matmul");
    for layer in ["conv", "fc"] {
        let l = &seen.layers[layer];
        assert!(l.densified.is_empty(), "{layer}: {:?}", l.densified);
        let forward = &l.passes[Pass::Forward.index()];
        assert!(!forward.is_empty(), "{layer} ran no forward contraction");
        assert!(
            forward.iter().all(|c| c.route == route),
            "{layer}: {forward:?}"
        );
    }
    let mm = &seen.layers["fc"].passes[Pass::Matmul.index()];
    assert_eq!(mm.first().map(|c| c.route.as_str()), Some(route));
    assert_other_ops_densify(
        sparse.fc.weight.val(),
        reference.fc.weight.val(),
        "fc",
        dense_tolerance,
    );
    seen
}

/// `into` with the parameters of `model` (of another backend), through Burn's full-precision
/// binary recorder.
pub fn reloaded<A: Backend, B: Backend, M: Module<A>, N: Module<B>>(
    model: M,
    into: N,
    device: &B::Device,
) -> N {
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let bytes = Recorder::<A>::record(&recorder, model.into_record(), ()).unwrap();
    into.load_record(Recorder::<B>::load(&recorder, bytes, device).unwrap())
}

/// Asserts that `read` refuses damaged copies of `bytes`, a well-formed file of a format whose
/// magic is `magic`, each with its reason: a flipped byte and a truncated copy are corrupt
/// (their CRC-32), and bytes of another kind (an empty file, text) name the magic they lack.
///
/// # Panics
/// When a damaged copy is read, or refused for another reason.
pub fn assert_damage_refused<T: std::fmt::Debug, E: std::fmt::Display>(
    bytes: &[u8],
    magic: &str,
    read: impl Fn(&[u8]) -> Result<T, E>,
) {
    let refusal = |b: &[u8], what: &str| match read(b) {
        Ok(read) => panic!("{what} was read: {read:?}"),
        Err(e) => e.to_string(),
    };
    for at in [magic.len() + 8, bytes.len() / 2, bytes.len() - 1] {
        let mut flipped = bytes.to_vec();
        flipped[at] ^= 0x04;
        let e = refusal(&flipped, &format!("a copy with byte {at} flipped"));
        assert!(e.contains("corrupt") && e.contains("CRC-32"), "{e}");
    }
    let e = refusal(&bytes[..bytes.len() - 9], "a truncated copy");
    assert!(e.contains("corrupt"), "{e}");
    for other in [&b""[..], b"not a model at all"] {
        let e = refusal(other, "another file");
        assert!(e.contains(magic), "{e}");
    }
}

/// Asserts that [`net`] on the decorated backend `D` with nothing packed computes what the
/// same weights compute on its inner backend `B`, bit for bit: the convolution, the linear
/// layer, and a matmul by the linear layer's weight.
///
/// # Panics
/// When an output differs in a bit.
pub fn assert_unpacked_is_inner<D: Backend, B: Backend>(device: &D::Device, inner: &B::Device) {
    let model = net::<D>(device);
    let plain = reloaded(model.clone(), net::<B>(inner), inner);
    let x: Vec<f32> = (0..2 * 6 * 7 * 5)
        .map(|i| (i % 13) as f32 / 7.0 - 0.9)
        .collect();
    let v: Vec<f32> = (0..3 * 24).map(|i| (i % 11) as f32 / 5.0 - 1.0).collect();
    let dx = Tensor::<D, 4>::from_data(TensorData::new(x.clone(), [2, 6, 7, 5]), device);
    let px = Tensor::<B, 4>::from_data(TensorData::new(x, [2, 6, 7, 5]), inner);
    let dv = Tensor::<D, 2>::from_data(TensorData::new(v.clone(), [3, 24]), device);
    let pv = Tensor::<B, 2>::from_data(TensorData::new(v, [3, 24]), inner);
    let bits = |t: TensorData| {
        t.to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        bits(model.conv.forward(dx).into_data()),
        bits(plain.conv.forward(px).into_data()),
        "conv"
    );
    assert_eq!(
        bits(model.fc.forward(dv.clone()).into_data()),
        bits(plain.fc.forward(pv.clone()).into_data()),
        "linear"
    );
    assert_eq!(
        bits(dv.matmul(model.fc.weight.val()).into_data()),
        bits(pv.matmul(plain.fc.weight.val()).into_data()),
        "matmul"
    );
}
