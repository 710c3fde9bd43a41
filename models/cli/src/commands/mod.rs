//! One module per `ember` command: its arguments and the call into `ember-train`.

pub mod compare;
pub mod eval;
pub mod lut;
pub mod memory;
pub mod policy;
pub mod train;

use burn_approx_mul::{BUILT_IN_HELP, Multiplier};
use burn_sparse_act::Pruning;

/// The help of a `--multiplier` option: `what` it sets, then the names it accepts — the list
/// [`parse_multiplier`]'s "unknown multiplier" error prints.
pub fn multiplier_help(what: &str) -> String {
    format!("{what}: {BUILT_IN_HELP}; or a LUT file (NAME_M.bin or .lut)")
}

/// Parses `--multiplier` (the error lists the accepted names).
pub fn parse_multiplier(spec: &str) -> Result<Multiplier, String> {
    Multiplier::parse(spec).map_err(|e| e.to_string())
}

/// Parses a SparseAct `S:B` (the error says what is wrong).
pub fn parse_pruning(spec: &str) -> Result<Pruning, String> {
    Pruning::parse(spec).map_err(|e| e.to_string())
}
