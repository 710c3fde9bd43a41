//! A BCR pruning level as the CLI and policy files name it: `10x:4x16` (pruning rate 10×,
//! blocks of 4 rows × 16 columns of the GEMM view).

use crate::error::BcrError;
use std::fmt;
use std::str::FromStr;

/// A block of the GEMM view: `rows × cols` (the paper's CNN blocks are 4 × 16). Blocks tile the
/// view from its top-left corner; where a dimension is not a multiple of the block's, the last
/// strip of blocks is smaller (the remainder), and is pruned like any other block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Block {
    /// Rows of the view per block (output channels).
    pub rows: usize,
    /// Columns of the view per block (inputs).
    pub cols: usize,
}

impl Block {
    /// A block of `rows × cols`, both at least 1.
    pub fn new(rows: usize, cols: usize) -> Result<Self, BcrError> {
        if rows == 0 || cols == 0 {
            return Err(BcrError::Block(format!(
                "{rows}x{cols}: a block needs at least one row and one column"
            )));
        }
        Ok(Self { rows, cols })
    }

    /// Checks that the block fits an `out × k` view (no larger than it in either dimension).
    pub fn fits(&self, out: usize, k: usize) -> Result<(), BcrError> {
        if self.rows > out || self.cols > k {
            return Err(BcrError::Block(format!(
                "{self} does not fit a weight whose GEMM view is {out} × {k}"
            )));
        }
        Ok(())
    }
}

impl fmt::Display for Block {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.rows, self.cols)
    }
}

/// A BCR level: the pruning rate (total weights ÷ kept weights, > 1) and the block.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Level {
    /// Pruning rate, e.g. 10 for 10× (90 % of the weights pruned).
    pub rate: f64,
    /// The block size.
    pub block: Block,
}

impl Level {
    /// Weights a view of `total` weights keeps at this rate: `floor(total / rate)`.
    pub fn budget(&self, total: usize) -> usize {
        (total as f64 / self.rate).floor() as usize
    }
}

impl FromStr for Level {
    type Err = BcrError;
    fn from_str(s: &str) -> Result<Self, BcrError> {
        let form = || {
            BcrError::Level(format!(
                "{s:?} is not a BCR level: write RATEx:RxC, e.g. 10x:4x16 (pruning rate 10×, \
                 blocks of 4 rows by 16 columns)"
            ))
        };
        let (rate, block) = s.trim().split_once(':').ok_or_else(form)?;
        let rate: f64 = rate
            .trim()
            .strip_suffix(['x', '×'])
            .ok_or_else(form)?
            .parse()
            .map_err(|_| form())?;
        let (r, c) = block.trim().split_once('x').ok_or_else(form)?;
        let r: usize = r.trim().parse().map_err(|_| form())?;
        let c: usize = c.trim().parse().map_err(|_| form())?;
        if rate.is_nan() || rate == f64::INFINITY {
            return Err(BcrError::Level(format!(
                "pruning rate {rate}× is not a finite number: it must be above 1× and finite \
                 (10x keeps one weight in ten; an infinite rate would keep none)"
            )));
        }
        if rate <= 1.0 {
            return Err(BcrError::Level(format!(
                "pruning rate {rate}× keeps every weight or more: it must be above 1× (10x keeps \
                 one weight in ten)"
            )));
        }
        Ok(Self {
            rate,
            block: Block::new(r, c)?,
        })
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x:{}", self.rate, self.block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_print_and_refuse() {
        let l: Level = "10x:4x16".parse().unwrap();
        assert_eq!((l.rate, l.block), (10.0, Block { rows: 4, cols: 16 }));
        assert_eq!(l.to_string(), "10x:4x16");
        assert_eq!(l.budget(1000), 100);
        assert_eq!("2.5x:1x1".parse::<Level>().unwrap().budget(10), 4);
        for (bad, says) in [
            ("10", "RATEx:RxC"),
            ("10:4x16", "RATEx:RxC"),
            ("10x:4", "RATEx:RxC"),
            ("10x:4xa", "RATEx:RxC"),
            ("tenx:4x16", "RATEx:RxC"),
            ("1x:4x16", "above 1×"),
            ("0.5x:4x16", "above 1×"),
            ("infx:4x16", "inf× is not a finite number"),
            ("NaNx:4x16", "NaN× is not a finite number"),
            ("-infx:4x16", "keeps every weight or more"),
            ("10x:0x16", "at least one row"),
            ("10x:4x0", "at least one row"),
        ] {
            let e = bad.parse::<Level>().unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_block_larger_than_the_view_does_not_fit() {
        let b = Block::new(4, 16).unwrap();
        assert!(b.fits(4, 16).is_ok());
        let e = b.fits(3, 100).unwrap_err().to_string();
        assert!(
            e.contains("4x16 does not fit") && e.contains("3 × 100"),
            "{e}"
        );
        assert!(b.fits(8, 15).is_err());
    }
}
