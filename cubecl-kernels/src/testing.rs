//! Deterministic test data shared by the kernels' tests and the crates built on them.

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

use crate::approx::host::mitchell_significand;
use crate::approx::{ApproxMultiply, LutTable};
use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};

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

/// Mitchell's table at `m` bits, built from the FP32-width model on truncated mantissas.
pub fn mitchell_table(m: u32) -> ApproxMultiply {
    let n = 1u32 << m;
    let sig = (0..n * n)
        .map(|i| mitchell_significand((i >> m) << (23 - m), (i & (n - 1)) << (23 - m)))
        .collect();
    ApproxMultiply::Lut(LutTable::new(m, sig))
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
