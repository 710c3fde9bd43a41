//! The block-size tuner: GRIM's Listing 1, as written.
//!
//! For one layer and a pruning rate, candidate block sizes are tried in the order given (from
//! small blocks to large ones): each is **synthesized** — a random weight of the layer's shape
//! projected to a BCR pattern of that block at the rate (Listing 1, lines 1–6: only the pattern's
//! shape matters for speed, not trained values) — and **timed**; the tuner stops at the first
//! size whose speed-up over the best so far, `best latency ÷ latency`, is below the threshold,
//! and returns the last size that passed (lines 10–25). The first size always passes (its
//! speed-up over "no size yet" is infinite).
//!
//! Section 5's prose describes a different rule: "select the smallest block size such that the
//! inference acceleration performance degradation (compared with pruning whole rows/columns
//! under the same pruning rate) is within a predefined threshold" — a comparison with the
//! coarsest structure, not with the previous size. Ember implements the listing; the trials it
//! returns hold every timing, so the prose's rule can be applied to them as well.

use crate::error::BcrError;
use crate::level::{Block, Level};
use crate::project::{BcrMask, View, project};
use rand::{Rng, SeedableRng};

/// One candidate's timing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Trial {
    /// The block size tried.
    pub block: Block,
    /// Its latency, seconds.
    pub seconds: f64,
    /// `best latency so far ÷ this latency` (infinite for the first).
    pub speedup: f64,
}

/// The tuner's answer for one layer.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuned {
    /// The block size chosen (Listing 1's `opt_size`).
    pub block: Block,
    /// Every size tried, in order (the last one failed the threshold unless all passed).
    pub trials: Vec<Trial>,
}

/// A random `out × k` weight pruned to a BCR pattern of `block` at `rate` (Listing 1's
/// `synthesize`): uniform values in `[-1, 1)` from `seed`, projected.
pub fn synthesize(
    out: usize,
    k: usize,
    rate: f64,
    block: Block,
    seed: u64,
) -> Result<(View, BcrMask), BcrError> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let data = (0..out * k)
        .map(|_| rng.random_range(-1.0f32..1.0))
        .collect();
    let view = View::new(out, k, data)?;
    let mask = project(&view, Level { rate, block })?;
    Ok((view, mask))
}

/// Refuses a tuner threshold that is not a positive speed-up ratio (NaN, infinite, ≤ 0).
pub fn check_threshold(threshold: f64) -> Result<(), BcrError> {
    if !(threshold.is_finite() && threshold > 0.0) {
        return Err(BcrError::Level(format!(
            "tuner threshold {threshold}: it must be a positive speed-up ratio, e.g. 1.05"
        )));
    }
    Ok(())
}

/// Listing 1: tries `sizes` in order on an `out × k` layer at `rate`, timing each synthesized
/// layer with `latency` (seconds), and stops at the first whose speed-up over the best so far
/// is below `threshold` (e.g. 1.05: keep growing the block while it buys at least 5 %). Sizes
/// that do not fit the layer are skipped.
pub fn find_opt_blk(
    out: usize,
    k: usize,
    rate: f64,
    sizes: &[Block],
    threshold: f64,
    mut latency: impl FnMut(&View, &BcrMask) -> f64,
) -> Result<Tuned, BcrError> {
    check_threshold(threshold)?;
    let mut best: Option<(Block, f64)> = None;
    let mut trials = Vec::new();
    for (i, &block) in sizes.iter().enumerate() {
        if block.fits(out, k).is_err() {
            continue;
        }
        let (view, mask) = synthesize(out, k, rate, block, i as u64)?;
        let seconds = latency(&view, &mask);
        let speedup = best.map_or(f64::INFINITY, |(_, b)| b / seconds);
        trials.push(Trial {
            block,
            seconds,
            speedup,
        });
        if speedup < threshold {
            break;
        }
        best = Some((block, seconds));
    }
    let (block, _) = best.ok_or_else(|| {
        BcrError::Block(format!("no candidate block size fits a {out} × {k} layer"))
    })?;
    Ok(Tuned { block, trials })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes() -> Vec<Block> {
        [(1, 16), (2, 16), (4, 16), (8, 16), (16, 16)]
            .map(|(r, c)| Block::new(r, c).unwrap())
            .to_vec()
    }

    #[test]
    fn the_tuner_stops_where_the_next_speedup_falls_below_the_threshold() {
        // latencies by block rows: 10, 6, 5, 4.9, 1 → speed-ups 1.67, 1.2, 1.02 (stop)
        let lat = |rows: usize| match rows {
            1 => 10.0,
            2 => 6.0,
            4 => 5.0,
            8 => 4.9,
            _ => 1.0,
        };
        let t = find_opt_blk(32, 64, 10.0, &sizes(), 1.05, |_, m| lat(m.block.rows)).unwrap();
        assert_eq!(t.block, Block::new(4, 16).unwrap());
        assert_eq!(t.trials.len(), 4, "the fourth fails and ends the search");
        assert!(t.trials[0].speedup.is_infinite());
        assert!((t.trials[3].speedup - 5.0 / 4.9).abs() < 1e-12);
        // a lower threshold goes on to the end (even past a later, larger gain: the listing
        // stops only on a failure, and here none fails)
        let t = find_opt_blk(32, 64, 10.0, &sizes(), 1.01, |_, m| lat(m.block.rows)).unwrap();
        assert_eq!(t.block, Block::new(16, 16).unwrap());
    }

    #[test]
    fn the_synthesized_layers_are_bcr_at_the_rate() {
        let mut seen = Vec::new();
        find_opt_blk(32, 64, 8.0, &sizes(), 0.5, |v, m| {
            assert_eq!((v.rows, v.cols), (32, 64));
            assert_eq!(m.nnz(), 32 * 64 / 8);
            seen.push(m.block);
            1.0
        })
        .unwrap();
        assert_eq!(seen, sizes());
    }

    #[test]
    fn sizes_that_do_not_fit_are_skipped_and_none_fitting_is_an_error() {
        let t = find_opt_blk(8, 64, 4.0, &sizes(), 1.05, |_, _| 1.0).unwrap();
        assert!(t.trials.iter().all(|t| t.block.rows <= 8));
        let e = find_opt_blk(8, 8, 4.0, &sizes(), 1.05, |_, _| 1.0).unwrap_err();
        assert!(
            e.to_string().contains("no candidate block size fits"),
            "{e}"
        );
        let e = find_opt_blk(8, 64, 4.0, &sizes(), 0.0, |_, _| 1.0).unwrap_err();
        assert!(e.to_string().contains("threshold"), "{e}");
    }
}
