//! `ember`: train and evaluate models under Ember's hardware-efficiency techniques.
//!
//! Argument parsing and dispatch only: one module per command under [`commands`], each turning
//! its arguments into a call of `ember-train`.

mod commands;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand};
use ember_models::choice::Choice;
use ember_train::EmberError;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "ember",
    version,
    about = "Train and evaluate Burn models under Ember's techniques"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train a model (defaults: LeNet-5 on the embedded MNIST subset, ndarray backend).
    Train(commands::train::TrainArgs),
    /// Evaluate a saved model on the test split.
    Eval(commands::eval::EvalArgs),
    /// Training memory by component (inputs, model, optimizer, activations), dense and under
    /// SparseAct policies, measured from the runtime (the paper's Tables I and III).
    Memory(commands::memory::MemoryArgs),
    /// Compare finished runs: loss curves on one figure, test accuracy relative to the dense
    /// run over sparsity × block size as a heat map, and a Markdown table.
    Compare(commands::compare::CompareArgs),
    /// Mantissa-product lookup tables (ApproxTrain's NAME_M.bin, Ember's .lut).
    Lut {
        #[command(subcommand)]
        command: commands::lut::LutCommand,
    },
}

/// A value parser for a closed set of names (models, datasets, backends), listing them in the
/// help and in the error.
pub(crate) fn choice<T: Choice>() -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(T::NAMES).try_map(|name| name.parse::<T>())
}

fn run(cli: Cli) -> Result<(), EmberError> {
    match cli.command {
        Command::Train(args) => commands::train::run(args),
        Command::Eval(args) => commands::eval::run(args),
        Command::Memory(args) => commands::memory::run(args),
        Command::Compare(args) => commands::compare::run(args),
        Command::Lut { command } => commands::lut::run(command),
    }
}

/// Counts live heap bytes for `ember memory` on ndarray (a few atomic adds per allocation).
#[global_allocator]
static ALLOC: ember_train::memory::CountingAllocator = ember_train::memory::CountingAllocator;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
