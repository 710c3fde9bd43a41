//! A HiNM sparsity level as the CLI and policy files name it: `75:v64`.

use crate::error::HinmError;
use std::fmt;
use std::str::FromStr;

/// Total sparsities HiNM reaches with 2:4 under column-vector pruning: vector sparsity
/// 50 / 75 / 87.5 % (the paper's levels).
pub const LEVELS: [f64; 3] = [75.0, 87.5, 93.75];

/// A HiNM level: the total sparsity in percent and the tile height `V`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Level {
    /// Total sparsity, percent (one of [`LEVELS`]).
    pub total: f64,
    /// Tile height (output rows per tile).
    pub v: usize,
}

impl Level {
    /// The column-vector sparsity that gives [`Level::total`] with 2:4 on the kept columns.
    pub fn vector_sparsity(&self) -> f64 {
        1.0 - 2.0 * (1.0 - self.total / 100.0)
    }
}

impl FromStr for Level {
    type Err = HinmError;
    fn from_str(s: &str) -> Result<Self, HinmError> {
        let form = || {
            HinmError::Level(format!(
                "{s:?} is not a HiNM level: write TOTAL:vV, e.g. 75:v64 (TOTAL one of 75, 87.5, \
                 93.75 percent; V the tile height)"
            ))
        };
        let (total, v) = s.trim().split_once(":v").ok_or_else(form)?;
        let total: f64 = total.trim().parse().map_err(|_| form())?;
        let v: usize = v.trim().parse().map_err(|_| form())?;
        if !LEVELS.contains(&total) {
            return Err(HinmError::Level(format!(
                "{total} % is not a HiNM level: 2:4 under column-vector pruning gives 75, 87.5 or \
                 93.75 %"
            )));
        }
        if v < 4 {
            return Err(HinmError::Tile(format!(
                "V = {v}: a tile needs at least 4 rows (the paper uses 64 and 128)"
            )));
        }
        Ok(Self { total, v })
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:v{}", self.total, self.v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_print_and_refuse() {
        let l: Level = "87.5:v128".parse().unwrap();
        assert_eq!((l.total, l.v, l.vector_sparsity()), (87.5, 128, 0.75));
        assert_eq!(l.to_string(), "87.5:v128");
        assert_eq!("75:v64".parse::<Level>().unwrap().vector_sparsity(), 0.5);
        for (bad, says) in [
            ("75", "TOTAL:vV"),
            ("75:64", "TOTAL:vV"),
            ("x:v64", "TOTAL:vV"),
            ("80:v64", "not a HiNM level"),
            ("75:v0", "at least 4 rows"),
            ("75:v2", "at least 4 rows"),
        ] {
            let e = bad.parse::<Level>().unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
