//! The broadcast kernels (PReLU and the per-channel affine map, forward and backward) against a
//! plain copy of the same bytes and against Burn's composite, on the host path and on the CubeCL
//! runtime `EMBER_TEST_RUNTIME` selects (`cubecl_kernels::testing`): wgpu by default (lavapipe
//! on machines without a GPU), `cuda` in a `--features cuda` build.
//!
//! Shapes: OneFlow's five PReLU shapes (96×64×112×112, 96×128×56×56, 96×256×28×28,
//! 96×512×14×14, 96×512×7×7) with the **batch scaled down from 96 to 4** (on lavapipe a row then
//! takes milliseconds, not seconds), and 4×64×15×15, whose inner size (225) does not divide the
//! pack: the kernels run one value a pack there. α (and β) have one value per channel (axis 1).
//! The host rows add 3136×128×1×1: the small ResMLP's channels-last scales (inner size 1).
//!
//! Groups `broadcast_<path>_<op>_<shape>` (`path`: `host` or the runtime), `op` one of `prelu_fwd`, `prelu_bwd` (`dx`, `dα`),
//! `affine_fwd` (with β), `affine_bwd` (`dx`, `dα`, `dβ`). Rows:
//!
//! - `0-copy` (device) / `0-memcpy` (host): a plain copy of as many bytes as the kernel moves: a
//!   forward pass reads `x` and writes `y` (a copy of `x`); a backward pass reads `x` and `dy`
//!   and writes `dx` (a copy of 1.5 times `x`'s values: the same bytes read and written). On
//!   the device the copy is a one-line `#[cube]` kernel (`y[i] = x[i]`) launched like the broadcast
//!   kernels (packs of 4 values, 256 units a cube) into a new buffer, so the ratio of row
//!   `1-kernel` to it is the kernel's cost over the bandwidth the runtime reaches; on the host
//!   `to_vec` (one thread's `memcpy` into a new allocation).
//! - `1-kernel` (device): `cubecl_kernels::broadcast::launch_*`; `1-reference` (host):
//!   `cubecl_kernels::broadcast::reference::*` (rayon, 2 threads on the reference machine).
//! - `2-burn`: Burn's composite on the same backend (Burn's backend of the runtime, autotune
//!   off; `NdArray` on the host): `burn::tensor::activation::prelu` (lower, broadcast multiply, `mask_where`),
//!   `x · α + β` with broadcast, and for the backward passes the ops Burn's autodiff runs for
//!   those composites (PReLU: the mask, two `mask_where`, the broadcast multiply, an add and the
//!   `sum_dim`s of the broadcast; affine: two multiplies and the `sum_dim`s).
//!
//! Every device row waits for the device; before the rows of a shape run, the kernels' results
//! are compared with the host reference (printed: the kernel tests assert them bit for bit).

use burn::backend::NdArray;
use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use burn::tensor::activation::prelu;
use burn_cubecl::tensor::CubeTensor;
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, criterion_group, criterion_main};
use cubecl_kernels::broadcast::{
    Layout, PACK, launch_affine, launch_affine_backward, launch_prelu, launch_prelu_backward,
    reference,
};
use cubecl_kernels::testing::{TestBackend, TestRuntime, uniform};
use std::time::Duration;

/// Batch of every shape (OneFlow's is 96).
const BATCH: usize = 4;

/// (name, [channels, height, width]).
const SHAPES: [(&str, [usize; 3]); 6] = [
    ("4x64x112x112", [64, 112, 112]),
    ("4x128x56x56", [128, 56, 56]),
    ("4x256x28x28", [256, 28, 28]),
    ("4x512x14x14", [512, 14, 14]),
    ("4x512x7x7", [512, 7, 7]),
    ("4x64x15x15", [64, 15, 15]),
];

mod common;

/// The copy row on the device.
mod copy {
    use burn_cubecl::CubeRuntime;
    use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
    use burn_cubecl::tensor::CubeTensor;
    use cubecl::prelude::*;
    use cubecl_kernels::broadcast::PACK;

    /// The copy row's kernel: `y[i] = x[i]`, one unit a pack.
    #[cube(launch_unchecked)]
    fn copy_kernel<N: Size>(x: &Array<Vector<f32, N>>, y: &mut Array<Vector<f32, N>>, packs: u32) {
        if ABSOLUTE_POS < packs as usize {
            y[ABSOLUTE_POS] = x[ABSOLUTE_POS];
        }
    }

    /// `x` (contiguous, `n` values) copied into a new buffer by [`copy_kernel`].
    pub fn device_copy<R: CubeRuntime>(x: &CubeTensor<R>, n: usize) -> CubeTensor<R> {
        let y = empty_device_contiguous_dtype(
            x.client.clone(),
            x.device.clone(),
            x.meta.shape().clone(),
            x.dtype,
        );
        let vector = if n.is_multiple_of(PACK) { PACK } else { 1 };
        let dim = CubeDim::new_1d(256);
        let count = cubecl::calculate_cube_count_elemwise(&x.client, n / vector, dim);
        // SAFETY: units past the last pack do nothing.
        unsafe {
            copy_kernel::launch_unchecked::<R>(
                &x.client,
                count,
                dim,
                vector,
                x.clone().into_array_arg(),
                y.clone().into_array_arg(),
                (n / vector) as u32,
            )
        };
        y
    }
}

/// A group of rows sampled flat (each sample the same number of iterations: the slow rows take
/// ten of them, not the 55 of criterion's linear sampling).
fn group(c: &mut Criterion, name: String) -> BenchmarkGroup<'_, WallTime> {
    let mut g = c.benchmark_group(name);
    g.sampling_mode(SamplingMode::Flat);
    g
}

fn primitive<B: Backend, const D: usize>(t: Tensor<B, D>) -> B::FloatTensorPrimitive {
    match t.into_primitive() {
        TensorPrimitive::Float(t) => t,
        TensorPrimitive::QFloat(_) => unreachable!("f32"),
    }
}

/// Burn's composite PReLU backward: what autodiff runs for `mask_where(x, x < 0, x · α)`.
fn burn_prelu_backward<B: Backend>(
    x: Tensor<B, 4>,
    alpha: Tensor<B, 1>,
    dy: Tensor<B, 4>,
) -> (Tensor<B, 4>, Tensor<B, 1>) {
    let channels = alpha.dims()[0];
    let mask = x.clone().lower_elem(0.0);
    let zeros = dy.zeros_like();
    let scaled = zeros.clone().mask_where(mask.clone(), dy.clone());
    let dx = dy.mask_where(mask, zeros) + scaled.clone() * alpha.reshape([1, channels, 1, 1]);
    let da = (scaled * x)
        .sum_dim(0)
        .sum_dim(2)
        .sum_dim(3)
        .reshape([channels]);
    (dx, da)
}

/// Burn's composite affine backward: what autodiff runs for `x · α + β` with broadcast.
fn burn_affine_backward<B: Backend>(
    x: Tensor<B, 4>,
    alpha: Tensor<B, 1>,
    dy: Tensor<B, 4>,
) -> (Tensor<B, 4>, Tensor<B, 1>, Tensor<B, 1>) {
    let channels = alpha.dims()[0];
    let dx = dy.clone() * alpha.reshape([1, channels, 1, 1]);
    let da = (dy.clone() * x)
        .sum_dim(0)
        .sum_dim(2)
        .sum_dim(3)
        .reshape([channels]);
    let db = dy.sum_dim(0).sum_dim(2).sum_dim(3).reshape([channels]);
    (dx, da, db)
}

fn burn_affine<B: Backend>(
    x: Tensor<B, 4>,
    alpha: Tensor<B, 1>,
    beta: Tensor<B, 1>,
) -> Tensor<B, 4> {
    let channels = alpha.dims()[0];
    x * alpha.reshape([1, channels, 1, 1]) + beta.reshape([1, channels, 1, 1])
}

/// Inputs of one shape: `x`, `α`, `β`, `dy` on the host, and the layout.
struct Data {
    dims: [usize; 4],
    l: Layout,
    x: Vec<f32>,
    alpha: Vec<f32>,
    beta: Vec<f32>,
    dy: Vec<f32>,
}

impl Data {
    fn new(chw: [usize; 3]) -> Data {
        Data::with_batch(BATCH, chw)
    }

    fn with_batch(batch: usize, [c, h, w]: [usize; 3]) -> Data {
        let dims = [batch, c, h, w];
        let l = Layout::of(&dims, 1, c).unwrap();
        Data {
            dims,
            l,
            x: uniform(l.len(), 1),
            alpha: uniform(c, 2),
            beta: uniform(c, 3),
            dy: uniform(l.len(), 4),
        }
    }

    fn tensors<B: Backend>(&self, device: &B::Device) -> [Tensor<B, 4>; 2] {
        let t =
            |v: &[f32]| Tensor::<B, 4>::from_data(TensorData::new(v.to_vec(), self.dims), device);
        [t(&self.x), t(&self.dy)]
    }

    fn channels<B: Backend>(&self, device: &B::Device) -> [Tensor<B, 1>; 2] {
        let c = self.l.channels;
        let t = |v: &[f32]| Tensor::<B, 1>::from_data(TensorData::new(v.to_vec(), [c]), device);
        [t(&self.alpha), t(&self.beta)]
    }

    /// Values a copy of the same bytes as a forward pass (`1.0`) or a backward pass (`1.5`)
    /// moves.
    fn copied(&self, times: f64) -> usize {
        ((self.l.len() as f64 * times) as usize).next_multiple_of(PACK)
    }
}

fn read<R: TestRuntime, const D: usize>(t: CubeTensor<R>) -> Vec<f32> {
    Tensor::<TestBackend<R>, D>::from_primitive(TensorPrimitive::Float(t))
        .into_data()
        .to_vec::<f32>()
        .unwrap()
}

// The device rows, on the runtime `EMBER_TEST_RUNTIME` selects.
common::device_bench!(device, device_rows);

fn device_rows<R: TestRuntime>(c: &mut Criterion) {
    type B<R> = TestBackend<R>;
    let device = R::Device::default();
    let sync = || B::<R>::sync(&device).unwrap();
    for (name, chw) in SHAPES {
        let d = Data::new(chw);
        let l = d.l;
        let [x, dy] = d.tensors::<B<R>>(&device);
        let [alpha, beta] = d.channels::<B<R>>(&device);
        let (xp, dyp) = (primitive(x.clone()), primitive(dy.clone()));
        let (ap, bp) = (primitive(alpha.clone()), primitive(beta.clone()));
        let copy_fwd = primitive(Tensor::<B<R>, 1>::from_data(
            TensorData::new(uniform(d.copied(1.0), 5), [d.copied(1.0)]),
            &device,
        ));
        let copy_bwd = primitive(Tensor::<B<R>, 1>::from_data(
            TensorData::new(uniform(d.copied(1.5), 6), [d.copied(1.5)]),
            &device,
        ));

        // the kernels' results against the host reference
        let rows = |op: &str| format!("broadcast_{}_{op}_{name}", R::NAME);
        let check = |what: &str, got: Vec<f32>, want: Vec<f32>| {
            common::report_difference(
                &format!("broadcast_{}_{name}: {what}", R::NAME),
                &got,
                &want,
            )
        };
        check(
            "prelu y",
            read::<R, 4>(launch_prelu(&xp, &ap, l)),
            reference::prelu(&d.x, &d.alpha, l),
        );
        let (dx, da) = launch_prelu_backward(&xp, &ap, &dyp, l);
        let (want_dx, want_da) = reference::prelu_backward(&d.x, &d.alpha, &d.dy, l);
        check("prelu dx", read::<R, 4>(dx), want_dx);
        check("prelu dα", read::<R, 1>(da), want_da);
        check(
            "affine y",
            read::<R, 4>(launch_affine(&xp, &ap, Some(&bp), l)),
            reference::affine(&d.x, &d.alpha, Some(&d.beta), l),
        );
        let (dx, da, db) = launch_affine_backward(Some(&xp), &ap, &dyp, l);
        let (want_dx, want_da, want_db) =
            reference::affine_backward(Some(&d.x), &d.alpha, &d.dy, l);
        check("affine dx", read::<R, 4>(dx), want_dx);
        check("affine dα", read::<R, 1>(da.unwrap()), want_da.unwrap());
        check("affine dβ", read::<R, 1>(db), want_db);

        let fwd = || copy::device_copy(&copy_fwd, d.copied(1.0));
        let bwd = || copy::device_copy(&copy_bwd, d.copied(1.5));
        trio(
            group(c, rows("prelu_fwd")),
            DEVICE_ROWS,
            &sync,
            fwd,
            || launch_prelu(&xp, &ap, l),
            || prelu(x.clone(), alpha.clone()),
        );
        trio(
            group(c, rows("prelu_bwd")),
            DEVICE_ROWS,
            &sync,
            bwd,
            || launch_prelu_backward(&xp, &ap, &dyp, l),
            || burn_prelu_backward(x.clone(), alpha.clone(), dy.clone()),
        );
        trio(
            group(c, rows("affine_fwd")),
            DEVICE_ROWS,
            &sync,
            fwd,
            || launch_affine(&xp, &ap, Some(&bp), l),
            || burn_affine(x.clone(), alpha.clone(), beta.clone()),
        );
        trio(
            group(c, rows("affine_bwd")),
            DEVICE_ROWS,
            &sync,
            bwd,
            || launch_affine_backward(Some(&xp), &ap, &dyp, l),
            || burn_affine_backward(x.clone(), alpha.clone(), dy.clone()),
        );
    }
}

/// The rows of a device group: a device copy of the same bytes, the kernel, Burn's composite.
const DEVICE_ROWS: [&str; 3] = ["0-copy", "1-kernel", "2-burn"];
/// The rows of a host group: a `memcpy` of `x`, the reference, Burn's ndarray composite.
const HOST_ROWS: [&str; 3] = ["0-memcpy", "1-reference", "2-burn"];

/// Fills `g` with three rows named `names`, each run followed by `after` (the device sync).
fn trio<A, B, C>(
    mut g: BenchmarkGroup<'_, WallTime>,
    names: [&str; 3],
    after: &dyn Fn(),
    mut baseline: impl FnMut() -> A,
    mut ours: impl FnMut() -> B,
    mut burn: impl FnMut() -> C,
) {
    g.bench_function(names[0], |b| {
        b.iter(|| {
            let y = baseline();
            after();
            y
        })
    });
    g.bench_function(names[1], |b| {
        b.iter(|| {
            let y = ours();
            after();
            y
        })
    });
    g.bench_function(names[2], |b| {
        b.iter(|| {
            let y = burn();
            after();
            y
        })
    });
    g.finish();
}

/// A host-only shape: the small ResMLP's per-channel scales at batch 64 (64 · 49 patches of
/// 128 channels, channels last: one value per channel and row, `inner` = 1).
const CHANNELS_LAST: (&str, usize, [usize; 3]) = ("3136x128x1x1", 3136, [128, 1, 1]);

fn host(c: &mut Criterion) {
    let device = Default::default();
    let shapes = SHAPES.map(|(name, chw)| (name, BATCH, chw));
    for (name, batch, chw) in shapes.into_iter().chain([CHANNELS_LAST]) {
        let d = Data::with_batch(batch, chw);
        let l = d.l;
        let [x, dy] = d.tensors::<NdArray>(&device);
        let [alpha, beta] = d.channels::<NdArray>(&device);
        let copy_fwd = uniform(d.copied(1.0), 5);
        let copy_bwd = uniform(d.copied(1.5), 6);

        let rows = |op: &str| format!("broadcast_host_{op}_{name}");
        let (fwd, bwd) = (|| copy_fwd.to_vec(), || copy_bwd.to_vec());
        trio(
            group(c, rows("prelu_fwd")),
            HOST_ROWS,
            &|| {},
            fwd,
            || reference::prelu(&d.x, &d.alpha, l),
            || prelu(x.clone(), alpha.clone()),
        );
        trio(
            group(c, rows("prelu_bwd")),
            HOST_ROWS,
            &|| {},
            bwd,
            || reference::prelu_backward(&d.x, &d.alpha, &d.dy, l),
            || burn_prelu_backward(x.clone(), alpha.clone(), dy.clone()),
        );
        trio(
            group(c, rows("affine_fwd")),
            HOST_ROWS,
            &|| {},
            fwd,
            || reference::affine(&d.x, &d.alpha, Some(&d.beta), l),
            || burn_affine(x.clone(), alpha.clone(), beta.clone()),
        );
        trio(
            group(c, rows("affine_bwd")),
            HOST_ROWS,
            &|| {},
            bwd,
            || reference::affine_backward(Some(&d.x), &d.alpha, &d.dy, l),
            || burn_affine_backward(x.clone(), alpha.clone(), dy.clone()),
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    targets = device, host
}
criterion_main!(benches);
