//! The native matmul's kernel, by name: which of cubek's matmul kernels a product of Ember's
//! native routes launches on a CubeCL runtime (`--matmul`).
//!
//! burn-cubecl 0.21 without its `autotune` feature multiplies with cubek's `Auto` strategy:
//! `SimpleCyclicCmma` with its default arguments (one stage, no double buffering, no TMA) where
//! the runtime has cooperative-matrix (CMMA) instructions, `SimpleUnit` elsewhere, for every
//! shape. With autotune it would time about thirty candidates per shape
//! (double-buffered, ordered, specialized and TMA loaders; CMMA and PTX `mma` tiles), which on
//! a new model costs minutes of compilation (`docs/architecture.md`). [`MatmulKernel`] names
//! those candidates, so one can be chosen for a whole run and measured against the others
//! without tuning: [`MatmulKernel::Burn`] (the default) keeps burn-cubecl's own op, bit for bit.
//!
//! A kernel the runtime or a shape does not take (CMMA without cooperative-matrix instructions,
//! TMA without a tensor memory accelerator, a shape the kernel's tiling refuses) runs Burn's op
//! instead, and [`matmul`] says why; [`tally`] counts those fallbacks for the process. A
//! backend without CubeCL kernels (ndarray) runs its own arithmetic whatever the name, with
//! strided operands read in place ([`host`]).
//!
//! **Each shape is checked once.** Not every cubek kernel is right for every shape: on lavapipe
//! `double-unit` returns wrong sums where the inner dimension is not a multiple of 16 and the
//! right operand is column-major or batched. So the first product of each kernel, operand
//! shapes and strides in a process also runs Burn's matmul and compares the two on the device
//! ([`AGREEMENT`]); a kernel that disagrees is refused for that shape from then on, with the
//! difference in its reason. The check costs one more product and one read of two numbers per
//! distinct shape (a model's first step).

pub mod host;

use crate::decorator::{CubeVisitor, KernelBackend};
use burn_backend::tensor::FloatTensor;
use burn_backend::{DType, TensorData};
use burn_cubecl::CubeRuntime;
use burn_cubecl::kernel::matmul::init_matmul_output;
use burn_cubecl::tensor::CubeTensor;
use cubek::matmul::components::tile::TileMatmulKind;
use cubek::matmul::definition::{MatmulElems, MatmulGlobalElems};
use cubek::matmul::launch::Strategy;
use cubek::matmul::routines::double_buffering::DoubleBufferingArgs;
use cubek::matmul::routines::double_unit::DoubleUnitSelectionArgs;
use cubek::matmul::routines::ordered_double_buffering::OrderedSelectionArgs;
use cubek::matmul::routines::simple::SimpleArgs;
use cubek::matmul::routines::simple_unit::SimpleUnitSelectionArgs;
use cubek::matmul::routines::{BlueprintStrategy, TileSizeSelection};
use cubek::std::InputBinding;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// A matmul kernel of cubek, as `--matmul` names it: each is one of the candidates burn-cubecl's
/// autotune would time, with the arguments it would give.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MatmulKernel {
    /// burn-cubecl's own `float_matmul` (cubek's `Auto`: `simple-cyclic-cmma` where the runtime
    /// has CMMA, `simple-unit` elsewhere).
    #[default]
    Burn,
    /// One shared-memory stage, tiles loaded cyclically, CMMA tiles.
    SimpleCyclicCmma,
    /// As [`MatmulKernel::SimpleCyclicCmma`] with PTX `mma` tiles.
    SimpleCyclicMma,
    /// As [`MatmulKernel::SimpleCyclicCmma`], several rows of tiles per plane.
    SimpleMultiRowCmma,
    /// Two shared-memory stages (loads overlap the products), CMMA tiles.
    DoubleCyclicCmma,
    /// As [`MatmulKernel::DoubleCyclicCmma`] with `mma` tiles.
    DoubleCyclicMma,
    /// As [`MatmulKernel::DoubleCyclicCmma`] with planes specialized into loaders and
    /// computers.
    DoubleSpecializedCmma,
    /// Double buffering with an ordered sum over a partitioned `k` (4 rows, 2 per plane).
    OrderedDoubleCmma,
    /// As [`MatmulKernel::OrderedDoubleCmma`] with `mma` tiles.
    OrderedDoubleMma,
    /// Asynchronous partial loads by specialized planes, CMMA tiles.
    SpecializedCyclicCmma,
    /// Tiles loaded by the tensor memory accelerator (Hopper and later), CMMA tiles.
    SimpleTmaCmma,
    /// As [`MatmulKernel::SimpleTmaCmma`] with `mma` tiles.
    SimpleTmaMma,
    /// TMA loads by specialized planes, CMMA tiles.
    SpecializedTmaCmma,
    /// One output tile per unit, no matrix instructions (what a runtime without CMMA runs).
    SimpleUnit,
    /// As [`MatmulKernel::SimpleUnit`] with double buffering.
    DoubleUnit,
}

/// What the instructions of a kernel need of the runtime.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Needs {
    Nothing,
    Cmma,
    Mma,
    TmaCmma,
    TmaMma,
}

impl MatmulKernel {
    /// Every kernel, in the order `--matmul` lists them.
    pub const ALL: [MatmulKernel; 15] = [
        Self::Burn,
        Self::SimpleCyclicCmma,
        Self::SimpleCyclicMma,
        Self::SimpleMultiRowCmma,
        Self::DoubleCyclicCmma,
        Self::DoubleCyclicMma,
        Self::DoubleSpecializedCmma,
        Self::OrderedDoubleCmma,
        Self::OrderedDoubleMma,
        Self::SpecializedCyclicCmma,
        Self::SimpleTmaCmma,
        Self::SimpleTmaMma,
        Self::SpecializedTmaCmma,
        Self::SimpleUnit,
        Self::DoubleUnit,
    ];

    /// The name `--matmul` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Burn => "burn",
            Self::SimpleCyclicCmma => "simple-cyclic-cmma",
            Self::SimpleCyclicMma => "simple-cyclic-mma",
            Self::SimpleMultiRowCmma => "simple-multirow-cmma",
            Self::DoubleCyclicCmma => "double-cyclic-cmma",
            Self::DoubleCyclicMma => "double-cyclic-mma",
            Self::DoubleSpecializedCmma => "double-specialized-cmma",
            Self::OrderedDoubleCmma => "ordered-double-cmma",
            Self::OrderedDoubleMma => "ordered-double-mma",
            Self::SpecializedCyclicCmma => "specialized-cyclic-cmma",
            Self::SimpleTmaCmma => "simple-tma-cmma",
            Self::SimpleTmaMma => "simple-tma-mma",
            Self::SpecializedTmaCmma => "specialized-tma-cmma",
            Self::SimpleUnit => "simple-unit",
            Self::DoubleUnit => "double-unit",
        }
    }

    /// Parses a name of [`MatmulKernel::ALL`] (any case).
    pub fn parse(name: &str) -> Result<Self, UnknownMatmulKernel> {
        Self::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| UnknownMatmulKernel(name.to_string()))
    }

    fn needs(self) -> Needs {
        match self {
            Self::Burn | Self::SimpleUnit | Self::DoubleUnit => Needs::Nothing,
            Self::SimpleCyclicMma | Self::DoubleCyclicMma | Self::OrderedDoubleMma => Needs::Mma,
            Self::SimpleTmaCmma | Self::SpecializedTmaCmma => Needs::TmaCmma,
            Self::SimpleTmaMma => Needs::TmaMma,
            _ => Needs::Cmma,
        }
    }

    /// cubek's strategy for this kernel (`None`: Burn's own op), with the arguments
    /// burn-cubecl's autotune gives the same candidate.
    fn strategy(self) -> Option<Strategy> {
        let simple = |tile_matmul, multi_rows| {
            BlueprintStrategy::Inferred(SimpleArgs {
                multi_rows,
                tile_matmul,
            })
        };
        let double = |tile_matmul, specialized| {
            BlueprintStrategy::Inferred(DoubleBufferingArgs {
                specialized,
                tile_matmul,
            })
        };
        let ordered = |tile_matmul| {
            BlueprintStrategy::Inferred(OrderedSelectionArgs {
                partition_k: Some(2),
                row_count: Some(4),
                rows_per_plane: Some(2),
                tile_matmul,
            })
        };
        let (cmma, mma) = (TileMatmulKind::Cmma, TileMatmulKind::Mma);
        let tile_size = TileSizeSelection::MaxTileSize;
        Some(match self {
            Self::Burn => return None,
            Self::SimpleCyclicCmma => Strategy::SimpleCyclicCmma(simple(cmma, false)),
            Self::SimpleCyclicMma => Strategy::SimpleCyclicMma(simple(mma, false)),
            Self::SimpleMultiRowCmma => Strategy::SimpleCyclicCmma(simple(cmma, true)),
            Self::DoubleCyclicCmma => Strategy::DoubleCyclicCmma(double(cmma, false)),
            Self::DoubleCyclicMma => Strategy::DoubleCyclicMma(double(mma, false)),
            Self::DoubleSpecializedCmma => Strategy::DoubleCyclicCmma(double(cmma, true)),
            Self::OrderedDoubleCmma => Strategy::OrderedDoubleCmma(ordered(cmma)),
            Self::OrderedDoubleMma => Strategy::OrderedDoubleMma(ordered(mma)),
            Self::SpecializedCyclicCmma => {
                Strategy::SpecializedCyclicCmma(BlueprintStrategy::Inferred(().into()))
            }
            // the TMA loaders are another algorithm with the same arguments
            Self::SimpleTmaCmma => {
                Strategy::SimpleTmaCmma(BlueprintStrategy::Inferred(SimpleArgs {
                    multi_rows: false,
                    tile_matmul: cmma,
                }))
            }
            Self::SimpleTmaMma => Strategy::SimpleTmaMma(BlueprintStrategy::Inferred(SimpleArgs {
                multi_rows: false,
                tile_matmul: mma,
            })),
            Self::SpecializedTmaCmma => {
                Strategy::SpecializedTmaCmma(BlueprintStrategy::Inferred(().into()))
            }
            Self::SimpleUnit => {
                Strategy::SimpleUnit(BlueprintStrategy::Inferred(SimpleUnitSelectionArgs {
                    tile_size,
                }))
            }
            Self::DoubleUnit => {
                Strategy::DoubleUnit(BlueprintStrategy::Inferred(DoubleUnitSelectionArgs {
                    tile_size,
                }))
            }
        })
    }

    /// Why `client`'s runtime cannot run this kernel at all, `None` where it has the
    /// instructions the kernel needs.
    fn missing<R: CubeRuntime>(self, client: &cubecl::client::ComputeClient<R>) -> Option<String> {
        let features = &client.properties().features;
        let (cmma, mma, tma) = (
            !features.matmul.cmma.is_empty(),
            !features.matmul.mma.is_empty(),
            !features.tma.is_empty(),
        );
        let lacks = match self.needs() {
            Needs::Nothing => return None,
            Needs::Cmma if !cmma => "cooperative-matrix (CMMA) instructions",
            Needs::Mma if !mma => "matrix (mma) instructions",
            Needs::TmaCmma | Needs::TmaMma if !tma => "a tensor memory accelerator (TMA)",
            Needs::TmaCmma if !cmma => "cooperative-matrix (CMMA) instructions",
            Needs::TmaMma if !mma => "matrix (mma) instructions",
            _ => return None,
        };
        Some(format!("the runtime has no {lacks}"))
    }
}

impl std::fmt::Display for MatmulKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// [`MatmulKernel::parse`].
impl std::str::FromStr for MatmulKernel {
    type Err = UnknownMatmulKernel;
    fn from_str(name: &str) -> Result<Self, UnknownMatmulKernel> {
        Self::parse(name)
    }
}

/// A name that is not one of [`MatmulKernel::ALL`]'s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownMatmulKernel(pub String);

impl std::fmt::Display for UnknownMatmulKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = MatmulKernel::ALL.iter().map(|k| k.name()).collect();
        write!(
            f,
            "unknown matmul kernel '{}': one of {}",
            self.0,
            names.join(", ")
        )
    }
}

impl std::error::Error for UnknownMatmulKernel {}

/// The process's products on a chosen kernel (not [`MatmulKernel::Burn`]) on a CubeCL runtime:
/// how many there were, how many ran Burn's op instead, and the first reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Products asked of a chosen kernel.
    pub products: u64,
    /// Of those, the ones that ran Burn's op instead.
    pub fallbacks: u64,
    /// Why the first fallback fell back.
    pub first_reason: Option<String>,
}

static PRODUCTS: AtomicU64 = AtomicU64::new(0);
static FALLBACKS: AtomicU64 = AtomicU64::new(0);
static FIRST_REASON: Mutex<Option<String>> = Mutex::new(None);

/// The process's [`Tally`] so far.
pub fn tally() -> Tally {
    Tally {
        products: PRODUCTS.load(Ordering::Relaxed),
        fallbacks: FALLBACKS.load(Ordering::Relaxed),
        first_reason: FIRST_REASON.lock().map(|r| r.clone()).unwrap_or_default(),
    }
}

fn count(fallback: Option<&str>) {
    PRODUCTS.fetch_add(1, Ordering::Relaxed);
    if let Some(why) = fallback {
        FALLBACKS.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut first) = FIRST_REASON.lock() {
            first.get_or_insert_with(|| why.to_string());
        }
    }
}

/// How a product of [`matmul`] ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ran {
    /// The backend's own `float_matmul`: no kernel chosen ([`MatmulKernel::Burn`]), or no
    /// CubeCL runtime.
    Own,
    /// The chosen kernel.
    Chosen,
    /// Burn's matmul in place of the chosen kernel, which refused for this reason.
    Refused(String),
}

/// `lhs · rhs` (Burn's `float_matmul`: batch dimensions broadcast) on `kernel` where `B` runs
/// CubeCL kernels, and how it ran: Burn's op where the kernel refused (counted in [`tally`]),
/// and where no kernel was chosen. Where `B` has no CubeCL runtime, [`host::matmul`] where the
/// host can view both operands (burn-ndarray's own arithmetic on its operands as they lie: its
/// bits, without its copy of a strided operand), else `B`'s op.
pub fn matmul<B: KernelBackend>(
    kernel: MatmulKernel,
    lhs: FloatTensor<B>,
    rhs: FloatTensor<B>,
) -> (FloatTensor<B>, Ran) {
    if B::cube_runtime().is_none() {
        return (on_host::<B>(lhs, rhs), Ran::Own);
    }
    if kernel == MatmulKernel::Burn {
        return (B::float_matmul(lhs, rhs), Ran::Own);
    }
    let (out, why) = B::visit(Chosen(kernel), vec![lhs, rhs]);
    count(why.as_deref());
    (out, why.map_or(Ran::Chosen, Ran::Refused))
}

/// `lhs · rhs` on a backend without CubeCL kernels: [`host::matmul`] (burn-ndarray's
/// arithmetic, operands read in place) where the host can view both operands, the backend's
/// own op otherwise.
fn on_host<B: KernelBackend>(lhs: FloatTensor<B>, rhs: FloatTensor<B>) -> FloatTensor<B> {
    let out = match (B::float_host_view(&lhs), B::float_host_view(&rhs)) {
        (Some(a), Some(b)) => host::matmul(&a, &b),
        _ => None,
    };
    match out {
        Some((values, shape)) => {
            B::float_from_data(TensorData::new(values, shape), &B::float_device(&lhs))
        }
        None => B::float_matmul(lhs, rhs),
    }
}

/// The largest difference from Burn's product a kernel's may have on its first product of a
/// shape, relative to the largest magnitude of Burn's: TF32 against f32 staging differs by
/// about 10⁻³ of it; a kernel that gets a shape wrong, by tens of percent.
pub const AGREEMENT: f32 = 1e-2;

/// A kernel on operands of these shapes and strides (`[dims, strides]` of each).
type ShapeKey = (MatmulKernel, [Vec<usize>; 4]);

/// What the first product of each [`ShapeKey`] found: `Err` with the reason where the kernel
/// cannot run it or got it wrong.
static VERDICTS: Mutex<Option<HashMap<ShapeKey, Result<(), String>>>> = Mutex::new(None);

fn verdict(key: &ShapeKey) -> Option<Result<(), String>> {
    let verdicts = VERDICTS.lock().ok()?;
    verdicts.as_ref()?.get(key).cloned()
}

fn remember(key: ShapeKey, found: Result<(), String>) {
    if let Ok(mut verdicts) = VERDICTS.lock() {
        verdicts.get_or_insert_with(HashMap::new).insert(key, found);
    }
}

/// The largest difference of `got` from `want` and the largest magnitude of `want`.
fn difference<B: KernelBackend>(got: FloatTensor<B>, want: FloatTensor<B>) -> (f32, f32) {
    let largest = |t: FloatTensor<B>| {
        let t = B::float_max(B::float_abs(t));
        crate::decorator::read_f32::<B>(t)[0]
    };
    let scale = largest(want.clone());
    (largest(B::float_sub(got, want)), scale)
}

struct Chosen(MatmulKernel);

impl<B: KernelBackend> CubeVisitor<B> for Chosen {
    type Output = (FloatTensor<B>, Option<String>);

    fn cube<R: CubeRuntime>(
        self,
        inputs: Vec<CubeTensor<R>>,
        rewrap: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> Self::Output {
        let kernel = self.0;
        let mut it = inputs.into_iter();
        let (lhs, rhs) = (it.next().expect("lhs"), it.next().expect("rhs"));
        let refused = |why: &str| Some(format!("{kernel} refused: {why}"));
        let burns = |lhs, rhs| B::float_matmul(rewrap(lhs), rewrap(rhs));
        let key: ShapeKey = (
            kernel,
            [
                lhs.meta.shape().to_vec(),
                lhs.meta.strides().to_vec(),
                rhs.meta.shape().to_vec(),
                rhs.meta.strides().to_vec(),
            ],
        );
        let known = verdict(&key);
        if let Some(Err(why)) = &known {
            return (burns(lhs, rhs), refused(why));
        }
        let out = match launch(kernel, &lhs, &rhs) {
            Ok(out) => rewrap(out),
            Err(why) => {
                let reason = refused(&why);
                remember(key, Err(why));
                return (burns(lhs, rhs), reason);
            }
        };
        if known.is_some() {
            return (out, None);
        }
        // the first product of this shape: Burn's beside it
        let want = burns(lhs, rhs);
        let (diff, scale) = difference::<B>(out.clone(), want.clone());
        if !scale.is_finite() {
            // no verdict from products that overflow (NaN entries are left out of the maximum):
            // check the next product
            return (
                want,
                refused(
                    "its first product of this shape was not finite (checked again on the next)",
                ),
            );
        }
        if diff <= AGREEMENT * scale {
            remember(key, Ok(()));
            return (out, None);
        }
        let why = format!(
            "its products of this shape differ from Burn's by {:.2e} of their largest ({diff:e} \
             against {scale:e})",
            diff / scale.max(f32::MIN_POSITIVE)
        );
        let reason = refused(&why);
        remember(key, Err(why));
        (want, reason)
    }

    fn host(self, inputs: Vec<FloatTensor<B>>) -> Self::Output {
        let mut it = inputs.into_iter();
        let (lhs, rhs) = (it.next().expect("lhs"), it.next().expect("rhs"));
        (B::float_matmul(lhs, rhs), None)
    }
}

/// `lhs · rhs` on `kernel`'s strategy, or why it cannot run.
fn launch<R: CubeRuntime>(
    kernel: MatmulKernel,
    lhs: &CubeTensor<R>,
    rhs: &CubeTensor<R>,
) -> Result<CubeTensor<R>, String> {
    let strategy = kernel.strategy().ok_or("Burn's own op")?;
    if let Some(why) = kernel.missing(&lhs.client) {
        return Err(why);
    }
    let float = matches!(lhs.dtype, DType::F32 | DType::F16 | DType::BF16);
    if !float || rhs.dtype != lhs.dtype || lhs.qparams.is_some() || rhs.qparams.is_some() {
        return Err(format!("operands of {:?} and {:?}", lhs.dtype, rhs.dtype));
    }
    let out = init_matmul_output(lhs, rhs, lhs.dtype);
    if out.meta.shape().num_elements() == 0 {
        return Err("an empty product".into());
    }
    let dtype = lhs.dtype;
    let mut dtypes = MatmulElems::from_globals(&MatmulGlobalElems {
        lhs: dtype.into(),
        rhs: dtype.into(),
        out: dtype.into(),
    });
    cubek::matmul::launch::launch_ref(
        &strategy,
        &lhs.client,
        InputBinding::new(lhs.clone().binding(), dtype.into()),
        InputBinding::new(rhs.clone().binding(), dtype.into()),
        out.clone().binding(),
        &mut dtypes,
    )
    .map_err(|e| format!("{e:?}"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_parse_by_name_in_any_case_and_unknown_names_are_errors() {
        for kernel in MatmulKernel::ALL {
            assert_eq!(MatmulKernel::parse(kernel.name()), Ok(kernel));
            assert_eq!(
                MatmulKernel::parse(&kernel.name().to_uppercase()),
                Ok(kernel)
            );
            assert_eq!(kernel.strategy().is_none(), kernel == MatmulKernel::Burn);
        }
        let err = MatmulKernel::parse("cublas").unwrap_err().to_string();
        assert!(
            err.contains("'cublas'") && err.contains("burn, simple-cyclic-cmma"),
            "{err}"
        );
    }

    #[test]
    fn every_kernel_has_its_own_name() {
        let names: std::collections::HashSet<&str> =
            MatmulKernel::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names.len(), MatmulKernel::ALL.len());
    }
}
