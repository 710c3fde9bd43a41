//! `ember tune-bcr`.

use crate::choice;
use ember_models::classifier::ModelKind;
use ember_models::data::DatasetKind;
use ember_train::EmberError;
use ember_train::backend::BackendKind;
use ember_train::bcr::{TuneOptions, tune, tune_table, untuned};

/// Arguments of `ember tune-bcr`.
#[derive(clap::Args)]
pub struct TuneBcrArgs {
    /// Model whose contraction layers are tuned.
    #[arg(long, value_parser = choice::<ModelKind>())]
    model: ModelKind,
    /// The dataset the model's shapes are for (gru: fsdd or japanese-vowels).
    #[arg(long, value_parser = choice::<DatasetKind>(), default_value_t = DatasetKind::Cifar10)]
    dataset: DatasetKind,
    /// Pruning rate of the synthesized layers (10 for 10×).
    #[arg(long, default_value_t = 10.0)]
    rate: f64,
    /// Backend the BCRC products are timed on.
    #[arg(long, value_parser = choice::<BackendKind>(), default_value_t = BackendKind::Ndarray)]
    backend: BackendKind,
    /// Stop at the first block whose speed-up over the last chosen one is below this ratio.
    #[arg(long, default_value_t = 1.10)]
    threshold: f64,
    /// Rows of the activation matrix of each timed product (the batch, or batch × output
    /// pixels of a convolution).
    #[arg(long, default_value_t = 256)]
    rows: usize,
    /// Candidate blocks RxC in the order tried (comma-separated).
    #[arg(long, default_value = "1x16,2x16,4x16,8x16,16x16,32x16")]
    blocks: Blocks,
    /// Timed calls per candidate (the fastest counts).
    #[arg(long, default_value_t = 10)]
    repeats: usize,
}

/// A list of blocks.
#[derive(Clone, Debug)]
pub struct Blocks(Vec<burn_bcr::Block>);

/// `RxC[,RxC...]`.
impl std::str::FromStr for Blocks {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        s.split(',')
            .map(|b| {
                let (r, c) = b.trim().split_once('x').ok_or_else(|| {
                    format!("{b:?} is not a block: write RxC, e.g. 4x16 (rows x columns)")
                })?;
                let n = |v: &str| {
                    v.trim()
                        .parse::<usize>()
                        .map_err(|_| format!("{b:?} is not a block: RxC with whole numbers"))
                };
                burn_bcr::Block::new(n(r)?, n(c)?).map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Blocks)
    }
}

/// Runs `ember tune-bcr`.
pub fn run(args: TuneBcrArgs) -> Result<(), EmberError> {
    let opts = TuneOptions {
        model: args.model,
        dataset: args.dataset,
        rate: args.rate,
        threshold: args.threshold,
        rows: args.rows,
        backend: args.backend,
        sizes: args.blocks.0,
        repeats: args.repeats,
    };
    let layers = tune(opts.clone())?;
    print!("{}", tune_table(&opts, &layers));
    // a layer without a block is a failure, not a table cell
    untuned(&layers)
}
