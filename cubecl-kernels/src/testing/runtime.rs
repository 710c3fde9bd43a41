//! The CubeCL runtime every kernel test runs on, chosen by one environment variable.
//!
//! The kernel tests of the workspace are generic over a [`TestRuntime`] `R` (their CubeCL side
//! runs on [`TestBackend<R>`] and `CubeTensor<R>`) and run on the runtime [`RUNTIME_VAR`]
//! (`EMBER_TEST_RUNTIME`) selects:
//!
//! - unset or empty, or `wgpu`: wgpu (Vulkan; Mesa's lavapipe on a machine without a GPU);
//! - `cuda`: CUDA, in a test binary built with the `cuda` feature (`--features cuda`).
//!
//! Nothing is skipped: an unknown value, a runtime the binary was built without, or a runtime
//! that cannot start here fails every test with a sentence saying why.
//!
//! A test is written with [`runtime_test!`](crate::runtime_test):
//!
//! ```ignore
//! use burn::tensor::Tensor;
//! use cubecl_kernels::testing::TestBackend;
//!
//! cubecl_kernels::runtime_test! {
//!     /// A tensor makes the round trip to the device.
//!     fn round_trip<R>() {
//!         let x = Tensor::<TestBackend<R>, 1>::from_floats([1.0, 2.0], &Default::default());
//!         assert_eq!(x.into_data().to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
//!     }
//! }
//! ```

use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime};
use std::io::Write;
use std::sync::OnceLock;

/// The environment variable that picks the runtime of the kernel tests: `wgpu` (the default
/// when unset or empty) or `cuda`, in any case.
pub const RUNTIME_VAR: &str = "EMBER_TEST_RUNTIME";

/// A CubeCL runtime the kernel tests run on.
pub trait TestRuntime: CubeRuntime {
    /// The bool element of Burn's backend on this runtime ([`TestBackend<Self>`] is then
    /// `burn::backend::Wgpu` or `burn::backend::Cuda`, without fusion).
    type Bool: BoolElement;

    /// The runtime's name, as [`RUNTIME_VAR`] spells it (`wgpu`, `cuda`).
    const NAME: &'static str;

    /// Whether the runtime's compiler fuses a multiply and the add it feeds into one FMA
    /// (rounded once), so a kernel's result can differ from the host reference's separately
    /// rounded product and sum in the last bits: CUDA, whose NVRTC compiles with its default
    /// `--fmad=true` (CubeCL 0.10 passes no option to turn it off). wgpu on lavapipe does not:
    /// the kernel tests compare bits there. [`assert_matches_host`](super::assert_matches_host)
    /// reads it.
    const CONTRACTS_MUL_ADD: bool;

    /// The relative tolerance a comparison with Burn's own matmul or convolution on this
    /// runtime needs at least: 0 on wgpu, whose f32 matmul is f32; `2e-3` on CUDA, where Burn
    /// 0.21's matmul (cubek-matmul's `Auto` strategy, autotune or not) tries CMMA first and
    /// stages f32 operands as TF32 (10 mantissa bits: each operand rounded to 2⁻¹¹ relative; the
    /// largest difference measured by the decorator tests on an H100 was 1.8e-4).
    const DENSE_TOLERANCE: f32;

    /// `tolerance`, raised to [`DENSE_TOLERANCE`](Self::DENSE_TOLERANCE): for a comparison with
    /// Burn's dense ops on this runtime.
    fn dense_tolerance(tolerance: f32) -> f32 {
        tolerance.max(Self::DENSE_TOLERANCE)
    }
}

/// Burn's backend on the test runtime `R`: f32 floats, i32 ints and `R`'s bools, the types
/// `burn::backend::Wgpu` (u32 bools) and `burn::backend::Cuda` (u8 bools) have.
pub type TestBackend<R> = CubeBackend<R, f32, i32, <R as TestRuntime>::Bool>;

impl TestRuntime for cubecl::wgpu::WgpuRuntime {
    type Bool = u32;
    const NAME: &'static str = "wgpu";
    const CONTRACTS_MUL_ADD: bool = false;
    const DENSE_TOLERANCE: f32 = 0.0;
}

#[cfg(feature = "cuda")]
impl TestRuntime for cubecl::cuda::CudaRuntime {
    type Bool = u8;
    const NAME: &'static str = "cuda";
    const CONTRACTS_MUL_ADD: bool = true;
    const DENSE_TOLERANCE: f32 = 2e-3;
}

/// The runtime [`RUNTIME_VAR`] selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selected {
    /// wgpu (`cubecl::wgpu::WgpuRuntime`), the default.
    Wgpu,
    /// CUDA (`cubecl::cuda::CudaRuntime`); needs the `cuda` feature.
    Cuda,
}

impl Selected {
    /// The runtime's name, as [`RUNTIME_VAR`] spells it.
    pub fn name(self) -> &'static str {
        match self {
            Selected::Wgpu => "wgpu",
            Selected::Cuda => "cuda",
        }
    }
}

/// The runtime a value of [`RUNTIME_VAR`] selects (`None`: the variable is unset), or why it
/// selects none.
fn parse_runtime(value: Option<&str>) -> Result<Selected, String> {
    let trimmed = value.unwrap_or("").trim();
    match trimmed.to_ascii_lowercase().as_str() {
        "" | "wgpu" => Ok(Selected::Wgpu),
        "cuda" if cfg!(feature = "cuda") => Ok(Selected::Cuda),
        "cuda" => Err(format!(
            "{RUNTIME_VAR}={trimmed} but this test binary was built without the `cuda` feature: \
             build with `--features cuda`"
        )),
        _ => Err(format!(
            "{RUNTIME_VAR}={:?} names no runtime: accepted values are `wgpu` (the default, also \
             when unset or empty) and `cuda` (with `--features cuda`), in any case",
            value.unwrap_or("")
        )),
    }
}

/// What `selected` runs on here (adapter or device), or why it cannot start.
fn probe(selected: Selected) -> Result<String, String> {
    match selected {
        Selected::Wgpu => crate::runtime::wgpu_adapter()
            .map(|adapter| format!("wgpu on {adapter}"))
            .map_err(|e| format!("{RUNTIME_VAR} selects wgpu (its default), but {e}")),
        Selected::Cuda => probe_cuda(),
    }
}

#[cfg(feature = "cuda")]
fn probe_cuda() -> Result<String, String> {
    use cubecl::cuda::{CudaDevice, CudaRuntime};
    let device = CudaDevice::default();
    // cudarc panics when libcuda cannot be loaded or has no device: say what to check instead.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        <CudaRuntime as cubecl::Runtime>::client(&device);
    }))
    .map(|()| format!("cuda on {device:?}"))
    .map_err(|payload| {
        let why = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("(no message)");
        format!(
            "{RUNTIME_VAR}=cuda, but CUDA device {device:?} could not be opened ({why}): check \
             that an NVIDIA GPU and its driver are installed (`nvidia-smi`) and that libcuda and \
             libnvrtc can be loaded (e.g. LD_LIBRARY_PATH=/usr/local/cuda/lib64), or run the \
             tests on wgpu (leave {RUNTIME_VAR} unset)"
        )
    })
}

#[cfg(not(feature = "cuda"))]
fn probe_cuda() -> Result<String, String> {
    unreachable!("parse_runtime refuses cuda without the `cuda` feature")
}

/// The runtime [`RUNTIME_VAR`] selects, checked to start here. Decided once per process (the
/// first call prints it to stderr); every later call returns the same choice.
///
/// # Panics
/// With a sentence saying why, on every call: when the variable names no runtime, names CUDA
/// in a binary built without the `cuda` feature, or names a runtime that cannot start here (no
/// wgpu adapter, no CUDA driver or device). A test never skips.
pub fn selected_runtime() -> Selected {
    static CHOICE: OnceLock<Result<Selected, String>> = OnceLock::new();
    let choice = CHOICE.get_or_init(|| {
        let value = match std::env::var(RUNTIME_VAR) {
            Ok(v) => Some(v),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(v)) => Some(v.to_string_lossy().into_owned()),
        };
        let selected = parse_runtime(value.as_deref())?;
        let what = probe(selected)?;
        let set = match value.as_deref() {
            Some(v) => format!("{RUNTIME_VAR}={v}"),
            None => format!("{RUNTIME_VAR} unset"),
        };
        // Straight to the process's stderr, past the test harness's capture: once per binary.
        let _ = writeln!(
            std::io::stderr().lock(),
            "kernel tests run on {what} ({set})"
        );
        Ok(selected)
    });
    match choice {
        Ok(selected) => *selected,
        Err(why) => panic!("{why}"),
    }
}

/// A test body generic over the runtime, run by [`on_selected_runtime`] (the struct that
/// [`runtime_test!`](crate::runtime_test) defines for each test).
pub trait RuntimeTest {
    /// Runs the test on runtime `R`.
    fn run<R: TestRuntime>(self);
}

/// Runs `test` on the runtime [`selected_runtime`] returns.
///
/// # Panics
/// As [`selected_runtime`] does, and as the test does.
pub fn on_selected_runtime(test: impl RuntimeTest) {
    match selected_runtime() {
        Selected::Wgpu => test.run::<cubecl::wgpu::WgpuRuntime>(),
        #[cfg(feature = "cuda")]
        Selected::Cuda => test.run::<cubecl::cuda::CudaRuntime>(),
        #[cfg(not(feature = "cuda"))]
        Selected::Cuda => unreachable!("parse_runtime refuses cuda without the `cuda` feature"),
    }
}

/// Defines `#[test]` functions generic over the CubeCL runtime, each run on the runtime
/// `EMBER_TEST_RUNTIME` selects ([`on_selected_runtime`](crate::testing::on_selected_runtime)).
///
/// Each `fn name<R>() { body }` (attributes and docs allowed, several per invocation) becomes a
/// `#[test] fn name()` whose body runs with `R: TestRuntime` in scope, so it can name
/// `TestBackend<R>`, `CubeTensor<R>` and call helpers generic over `R`:
///
/// ```ignore
/// cubecl_kernels::runtime_test! {
///     /// Doc of the test.
///     #[should_panic(expected = "BCRC upload")]
///     fn a_corrupt_weight_is_not_uploaded<R>() {
///         BcrcCube::<R>::upload(&corrupt, &Default::default());
///     }
/// }
/// ```
#[macro_export]
macro_rules! runtime_test {
    ($(
        $(#[$meta:meta])*
        fn $name:ident<$r:ident>() $body:block
    )*) => {$(
        $(#[$meta])*
        #[test]
        fn $name() {
            struct Test;
            impl $crate::testing::RuntimeTest for Test {
                fn run<$r: $crate::testing::TestRuntime>(self) $body
            }
            $crate::testing::on_selected_runtime(Test);
        }
    )*};
}

#[cfg(test)]
mod tests {
    use super::{Selected, TestBackend, parse_runtime};
    use core::marker::PhantomData;

    /// Compiles only where both types are one.
    fn same_type<T>(_: PhantomData<T>, _: PhantomData<T>) {}

    #[test]
    fn the_test_backends_are_burns_backends() {
        same_type(
            PhantomData::<TestBackend<cubecl::wgpu::WgpuRuntime>>,
            PhantomData::<burn::backend::Wgpu>,
        );
        #[cfg(feature = "cuda")]
        same_type(
            PhantomData::<TestBackend<cubecl::cuda::CudaRuntime>>,
            PhantomData::<burn_cuda::Cuda>,
        );
    }

    #[test]
    fn the_runtime_variable_is_parsed_without_the_environment() {
        assert_eq!(parse_runtime(None), Ok(Selected::Wgpu));
        assert_eq!(parse_runtime(Some("")), Ok(Selected::Wgpu));
        assert_eq!(parse_runtime(Some("wgpu")), Ok(Selected::Wgpu));
        assert_eq!(parse_runtime(Some("WGPU")), Ok(Selected::Wgpu));
        let garbage = parse_runtime(Some("vulkan")).unwrap_err();
        for part in ["EMBER_TEST_RUNTIME", "\"vulkan\"", "`wgpu`", "`cuda`"] {
            assert!(garbage.contains(part), "{part} in {garbage}");
        }
        #[cfg(feature = "cuda")]
        assert_eq!(parse_runtime(Some("CUDA")), Ok(Selected::Cuda));
        #[cfg(not(feature = "cuda"))]
        {
            let cuda = parse_runtime(Some("CUDA")).unwrap_err();
            assert!(cuda.contains("EMBER_TEST_RUNTIME=CUDA"), "{cuda}");
            assert!(cuda.contains("`--features cuda`"), "{cuda}");
        }
    }
}
