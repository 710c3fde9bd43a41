//! One module per `ember` command: its arguments and the call into `ember-train`.

pub mod compare;
pub mod eval;
pub mod lut;
pub mod memory;
pub mod train;

use burn_approx_mul::Multiplier;
use burn_sparse_act::Pruning;

/// Parses `--multiplier` (the error lists the accepted names).
pub fn parse_multiplier(spec: &str) -> Result<Multiplier, String> {
    Multiplier::parse(spec).map_err(|e| e.to_string())
}

/// Parses a SparseAct `S:B` (the error says what is wrong).
pub fn parse_pruning(spec: &str) -> Result<Pruning, String> {
    Pruning::parse(spec).map_err(|e| e.to_string())
}
