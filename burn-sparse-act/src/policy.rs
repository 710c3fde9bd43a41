//! The pruning policy a `SparseAct` device carries, validated before any tensor is touched.

use std::collections::BTreeMap;

/// What goes wrong with a pruning policy.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// Sparsity outside `[0, 1)` (NaN included).
    #[error("sparsity must be in [0, 1), got {0}")]
    Sparsity(f64),
    /// A block width of zero.
    #[error("block size must be at least 1")]
    ZeroBlock,
    /// A block width that does not divide the row it cuts.
    #[error(
        "block size {block} does not divide the row length {row} of layer `{layer}`; \
         choose a divisor of {row}"
    )]
    Indivisible {
        /// The layer (its override name, or `*` for the default).
        layer: String,
        /// Block width.
        block: usize,
        /// Row length (embedding width).
        row: usize,
    },
    /// A policy string that is not `S:B`.
    #[error("expected SPARSITY:BLOCK (e.g. 0.8:64), got `{0}`")]
    Syntax(String),
}

/// Sparsity and block width of one layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pruning {
    /// Fraction of blocks pruned per sample, in `[0, 1)`.
    pub sparsity: f64,
    /// Block width along the embedding dimension.
    pub block: usize,
}

impl Pruning {
    /// Checks the ranges (`s ∈ [0, 1)`, `b ≥ 1`).
    pub fn new(sparsity: f64, block: usize) -> Result<Self, PolicyError> {
        if !(0.0..1.0).contains(&sparsity) {
            return Err(PolicyError::Sparsity(sparsity));
        }
        if block == 0 {
            return Err(PolicyError::ZeroBlock);
        }
        Ok(Self { sparsity, block })
    }

    /// Parses the CLI form `S:B` (e.g. `0.8:64`).
    pub fn parse(spec: &str) -> Result<Self, PolicyError> {
        let syntax = || PolicyError::Syntax(spec.to_string());
        let (s, b) = spec.split_once(':').ok_or_else(syntax)?;
        let s: f64 = s.trim().parse().map_err(|_| syntax())?;
        let b: usize = b.trim().parse().map_err(|_| syntax())?;
        Self::new(s, b)
    }
}

/// The policy: a default pruning, per-layer overrides by name, and the optional stochastic
/// variant (blocks near the top-k threshold swapped at random, the paper's Section VI).
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Pruning of every layer without an override.
    pub default: Pruning,
    /// Pruning by layer name.
    pub overrides: BTreeMap<String, Pruning>,
    /// Seed of the stochastic variant; `None` for the deterministic top-k.
    pub stochastic: Option<u64>,
}

impl Policy {
    /// Every layer pruned the same way, deterministically.
    pub fn uniform(default: Pruning) -> Self {
        Self {
            default,
            overrides: BTreeMap::new(),
            stochastic: None,
        }
    }

    /// The pruning of `layer` (its override, else the default).
    pub fn for_layer(&self, layer: Option<&str>) -> Pruning {
        layer
            .and_then(|l| self.overrides.get(l))
            .copied()
            .unwrap_or(self.default)
    }

    /// The pruning of `layer` for rows of length `row`, rejecting block widths that do not divide
    /// it (Ember rejects rather than pads: padded blocks would carry zeros into the norms).
    pub fn check_row(&self, layer: Option<&str>, row: usize) -> Result<Pruning, PolicyError> {
        let p = self.for_layer(layer);
        if !row.is_multiple_of(p.block) {
            return Err(PolicyError::Indivisible {
                layer: layer.unwrap_or("*").to_string(),
                block: p.block,
                row,
            });
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_sparsities_and_blocks_are_refused() {
        for s in [-0.1, 1.0, 1.5, f64::NAN, f64::INFINITY] {
            assert!(
                matches!(Pruning::new(s, 4), Err(PolicyError::Sparsity(_))),
                "{s}"
            );
        }
        assert_eq!(Pruning::new(0.5, 0), Err(PolicyError::ZeroBlock));
        assert!(Pruning::new(0.0, 1).is_ok());
        assert!(Pruning::new(0.999, 64).is_ok());
    }

    #[test]
    fn cli_form_parses_or_says_what_it_expects() {
        assert_eq!(Pruning::parse("0.8:64"), Pruning::new(0.8, 64));
        for bad in ["0.8", "0.8:", ":64", "a:64", "0.8:-1", "0.8:64:2"] {
            let err = Pruning::parse(bad).unwrap_err();
            assert!(matches!(err, PolicyError::Syntax(_)), "{bad}: {err}");
        }
        assert_eq!(Pruning::parse("1.0:64"), Err(PolicyError::Sparsity(1.0)));
    }

    #[test]
    fn blocks_must_divide_rows_and_overrides_win() {
        let mut p = Policy::uniform(Pruning::new(0.5, 64).unwrap());
        p.overrides
            .insert("head".into(), Pruning::new(0.2, 16).unwrap());
        assert_eq!(p.check_row(None, 384).unwrap().block, 64);
        assert_eq!(p.check_row(Some("head"), 48).unwrap().sparsity, 0.2);
        let err = p.check_row(Some("fc"), 100).unwrap_err();
        assert!(
            err.to_string()
                .contains("does not divide the row length 100"),
            "{err}"
        );
    }
}
