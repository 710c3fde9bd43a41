//! `ember prune`.

use burn_hinm::Level;
use burn_hinm::gyro::Method;
use ember_train::EmberError;
use ember_train::hinm::{self, PruneOptions};
use std::path::PathBuf;

/// Arguments of `ember prune`.
#[derive(clap::Args)]
pub struct PruneArgs {
    /// HiNM level TOTAL:vV: total sparsity 75, 87.5 or 93.75 percent (2:4 on the columns a
    /// column-vector pruning of 50, 75 or 87.5 % keeps), V the tile height (64 in the paper).
    /// The first and the last contraction layer stay dense unless --policy sets them.
    #[arg(long, value_name = "TOTAL:vV", value_parser = parse_level)]
    hinm: Level,
    /// Permutation search the packed model is written with: gyro (output and tile-wise input
    /// permutations), ovw (output only) or none. The table reports all three.
    #[arg(long, default_value = "gyro", value_parser = parse_method)]
    perm: Method,
    /// Seed of the permutation search (same seed, same permutations).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The trained run to prune (its directory, model.mpk or a checkpoint file).
    #[arg(long)]
    checkpoint: PathBuf,
    /// Output directory for model.hinm, hinm.md and hinm.json (must not exist, or be empty).
    #[arg(long)]
    out: PathBuf,
    /// Per-layer levels: a TOML policy whose [[layer]] entries set hinm = "TOTAL:vV" or "off"
    /// (see `ember policy show`).
    #[arg(long, value_name = "FILE")]
    policy: Option<String>,
}

/// Parses `TOTAL:vV`.
pub fn parse_level(s: &str) -> Result<Level, String> {
    s.parse::<Level>().map_err(|e| e.to_string())
}

/// Parses `gyro`, `ovw` or `none`.
pub fn parse_method(s: &str) -> Result<Method, String> {
    s.parse::<Method>().map_err(|e| e.to_string())
}

/// Runs `ember prune`.
pub fn run(args: PruneArgs) -> Result<(), EmberError> {
    let policy = args
        .policy
        .map(|arg| ember_train::policy::LayerPolicy::from_arg(&arg))
        .transpose()?;
    let report = hinm::prune(PruneOptions {
        checkpoint: args.checkpoint,
        level: args.hinm,
        perm: args.perm,
        seed: args.seed,
        out: args.out,
        policy,
    })?;
    println!("{}", report.markdown());
    println!(
        "wrote {} (evaluate it with `ember eval --checkpoint {}`)",
        report.out.join(hinm::PACKED_FILE).display(),
        report.out.display()
    );
    Ok(())
}
