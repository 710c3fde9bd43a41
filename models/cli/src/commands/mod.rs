//! One module per `ember` command: its arguments and the call into `ember-train`.

pub mod compare;
pub mod eval;
pub mod export;
pub mod lut;
pub mod memory;
pub mod policy;
pub mod profile;
pub mod prune;
pub mod train;
pub mod tune_bcr;

use burn_approx_mul::{BUILT_IN_HELP, ConvRoute, MatmulKernel, Multiplier};
use ember_train::EmberError;

/// Runs this same command line with `flag value` added, in a child process of its own with the
/// environment variables `env`, and reads the JSON value it prints last: how the commands that
/// measure one configuration per process (`memory`, `profile`) run each. `what` names the
/// measurement in the errors.
pub(crate) fn in_child<T: serde::de::DeserializeOwned>(
    flag: &str,
    value: &str,
    env: &[(&str, &str)],
    what: &str,
) -> Result<T, EmberError> {
    let exe = std::env::current_exe()
        .map_err(|e| EmberError::Invalid(format!("cannot find the ember executable: {e}")))?;
    let output = std::process::Command::new(&exe)
        .args(std::env::args_os().skip(1))
        .arg(flag)
        .arg(value)
        .envs(env.iter().copied())
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| EmberError::Invalid(format!("cannot run {}: {e}", exe.display())))?;
    if !output.status.success() {
        return Err(EmberError::Invalid(format!(
            "{what} failed ({}); its error is above",
            output.status
        )));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .map_err(|e| EmberError::Invalid(format!("{what} printed no result ({e}): {stdout}")))
}

/// The help of a `--multiplier` option: `what` it sets, then the names it accepts — the list
/// `Multiplier`'s parser's "unknown multiplier" error prints.
pub fn multiplier_help(what: &str) -> String {
    format!("{what}: {BUILT_IN_HELP}; or a LUT file (NAME_M.bin or .lut)")
}

/// `--conv` and `--matmul`, shared by the commands that run a model.
#[derive(clap::Args)]
pub struct ConvArgs {
    /// How native (exact) convolutions and their gradients run: gemm (a GEMM: burn-cubecl's
    /// implicit GEMM on GPUs with tensor cores, else im2col + the backend's matmul; host
    /// im2col + GEMM on ndarray), im2col (never implicit GEMM), or burn (Burn's own kernels,
    /// bit for bit).
    #[arg(long, default_value = "gemm")]
    conv: ConvRoute,
    /// Which of cubek's matmul kernels the native matmuls run on wgpu and CUDA (the linear
    /// layers, attention, the convolutions' GEMMs): burn (burn-cubecl's own choice) or one of
    /// the candidates Burn's autotune would time. A kernel the GPU or a shape refuses runs
    /// Burn's instead (the effects report and `ember profile` say so); ndarray ignores it.
    #[arg(long, value_parser = matmul_kernel(), default_value = "burn")]
    matmul: MatmulKernel,
}

/// `--matmul`'s parser: the kernels' names, listed in the help and in the error.
fn matmul_kernel() -> impl clap::builder::TypedValueParser<Value = MatmulKernel> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(MatmulKernel::ALL.map(MatmulKernel::name))
        .try_map(|name| name.parse::<MatmulKernel>())
}

impl ConvArgs {
    /// `multiplier` with native convolutions on the chosen route and native matmuls on the
    /// chosen kernel.
    pub fn apply(&self, multiplier: Multiplier) -> Multiplier {
        multiplier.with_conv(self.conv).with_matmul(self.matmul)
    }
}

/// `--policy` and `--energy`, shared by `ember train` and `ember eval`.
#[derive(clap::Args)]
pub struct LayerArgs {
    /// Per-layer policy: a TOML file mapping module paths (globs allowed; see `ember policy
    /// show`) to a multiplier and/or a SparseAct S:B, or the preset first-last-exact (the first
    /// and the last layer exact). Layers it does not set run --multiplier and --sparse-act.
    #[arg(long, value_name = "FILE|PRESET")]
    policy: Option<String>,
    /// Energy figures (TOML: pJ per multiply of each multiplier, pJ per byte of activation
    /// memory) for an energy column in the effects report; example:
    /// docs/examples/energy-45nm.toml.
    #[arg(long, value_name = "FILE")]
    energy: Option<std::path::PathBuf>,
}

impl LayerArgs {
    /// The policy, read and checked, and the energy file.
    pub fn parse(
        self,
    ) -> Result<
        (
            Option<ember_train::policy::LayerPolicy>,
            Option<std::path::PathBuf>,
        ),
        ember_train::EmberError,
    > {
        let policy = self
            .policy
            .map(|arg| ember_train::policy::LayerPolicy::from_arg(&arg))
            .transpose()?;
        Ok((policy, self.energy))
    }
}
