//! `ember lut generate | inspect | convert`.

use ember_train::EmberError;
use ember_train::lut;
use std::path::PathBuf;

/// The `ember lut` subcommands.
#[derive(clap::Subcommand)]
pub enum LutCommand {
    /// Write the table of a built-in multiplier (default path: NAME_M.bin, or NAME_M.lut for m > 7).
    Generate {
        /// Multiplier name, e.g. mbm7, mitchell5, bf16, realm16.
        multiplier: String,
        /// Output file (.bin: ApproxTrain's raw format, m ≤ 7; .lut: Ember's format).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Summarise a table: width, error statistics, carries (and draw its error with --plot).
    Inspect {
        /// Multiplier name or table file.
        multiplier: String,
        /// Also draw the relative error of every entry as a PNG heat map.
        #[arg(long)]
        plot: Option<PathBuf>,
    },
    /// Convert a table file between formats (chosen by extension: .lut or NAME_M.bin).
    Convert {
        /// Input table file.
        input: PathBuf,
        /// Output table file (never overwritten).
        output: PathBuf,
    },
}

/// Runs `ember lut …`.
pub fn run(command: LutCommand) -> Result<(), EmberError> {
    match command {
        LutCommand::Generate { multiplier, out } => {
            let path = lut::generate(&multiplier, out)?;
            println!("wrote {}", path.display());
        }
        LutCommand::Inspect { multiplier, plot } => {
            print!("{}", lut::inspect(&multiplier)?);
            if let Some(path) = plot {
                lut::plot(&multiplier, &path)?;
                println!("error heat map: {}", path.display());
            }
        }
        LutCommand::Convert { input, output } => {
            lut::convert(&input, &output)?;
            println!("wrote {}", output.display());
        }
    }
    Ok(())
}
