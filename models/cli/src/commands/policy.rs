//! `ember policy show`.

use crate::choice;
use ember_models::classifier::ModelKind;
use ember_models::data::DatasetKind;
use ember_train::EmberError;
use ember_train::policy;

/// The `ember policy` subcommands.
#[derive(clap::Subcommand)]
pub enum PolicyCommand {
    /// Print a model's modules by their Burn path with their parameters' shapes, and the
    /// IN×OUT key of every linear layer (what --sparse-act-layer names).
    Show {
        /// Model.
        #[arg(long, value_parser = choice::<ModelKind>())]
        model: ModelKind,
        /// Dataset whose images the model is built for.
        #[arg(long, value_parser = choice::<DatasetKind>(), default_value_t = DatasetKind::Mnist)]
        dataset: DatasetKind,
    },
}

/// Runs `ember policy …`.
pub fn run(command: PolicyCommand) -> Result<(), EmberError> {
    match command {
        PolicyCommand::Show { model, dataset } => {
            print!("{}", policy::describe(model, dataset.spec())?);
        }
    }
    Ok(())
}
