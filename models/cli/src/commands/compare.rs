//! `ember compare`.

use ember_train::EmberError;
use ember_train::compare::Comparison;
use std::path::PathBuf;

/// Arguments of `ember compare`.
#[derive(clap::Args)]
pub struct CompareArgs {
    /// Run directories (at least one; at most one with --sparse-act off, the baseline).
    #[arg(required = true)]
    runs: Vec<PathBuf>,
    /// Directory for loss.png, accuracy-heatmap.png and summary.md (never overwritten).
    #[arg(long)]
    out: PathBuf,
    /// Figure title.
    #[arg(long, default_value = "runs")]
    title: String,
}

/// Runs `ember compare`.
pub fn run(args: CompareArgs) -> Result<(), EmberError> {
    let comparison = Comparison::read(&args.runs)?;
    let files = comparison.write(&args.out, &args.title)?;
    print!("{}", comparison.markdown());
    for f in files {
        eprintln!("wrote {}", f.display());
    }
    Ok(())
}
