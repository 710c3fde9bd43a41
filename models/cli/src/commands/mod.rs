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

use burn_approx_mul::{BUILT_IN_HELP, ConvRoute, Multiplier};

/// The help of a `--multiplier` option: `what` it sets, then the names it accepts — the list
/// `Multiplier`'s parser's "unknown multiplier" error prints.
pub fn multiplier_help(what: &str) -> String {
    format!("{what}: {BUILT_IN_HELP}; or a LUT file (NAME_M.bin or .lut)")
}

/// `--conv`, shared by the commands that run a model.
#[derive(clap::Args)]
pub struct ConvArgs {
    /// How native (exact) convolutions and their gradients run: gemm (a GEMM: burn-cubecl's
    /// implicit GEMM on GPUs with tensor cores, else im2col + the backend's matmul; host
    /// im2col + GEMM on ndarray), im2col (never implicit GEMM), or burn (Burn's own kernels,
    /// bit for bit).
    #[arg(long, default_value = "gemm")]
    conv: ConvRoute,
}

impl ConvArgs {
    /// `multiplier` with native convolutions on the chosen route.
    pub fn apply(&self, multiplier: Multiplier) -> Multiplier {
        multiplier.with_conv(self.conv)
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
