//! `ember`: train and evaluate models under Ember's hardware-efficiency techniques.
//!
//! Argument parsing and dispatch only: one module per command under [`commands`], each turning
//! its arguments into a call of `ember-train`.

// Doc comments on clap arguments are the `--help` text, written for a terminal (`<epoch>`,
// `[[layer]]`), not rustdoc markup.
#![allow(rustdoc::invalid_html_tags, rustdoc::broken_intra_doc_links)]

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
    Train(Box<commands::train::TrainArgs>),
    /// Evaluate a saved model (or a packed one from `ember prune`) on the test split.
    Eval(commands::eval::EvalArgs),
    /// Write a saved model as one dense safetensors file under torchvision's (ResNets) or
    /// timm's (DeiTs) key names, zeros where pruned: what PyTorch's `load_state_dict` takes.
    Export(commands::export::ExportArgs),
    /// Prune a trained run's weights to HiNM (hierarchical N:M with Gyro-Permutation; a table
    /// of the saliency each permutation choice keeps per layer) or to BCR (one-shot projection
    /// and masked retraining), and write the packed model.
    Prune(commands::prune::PruneArgs),
    /// GRIM's block-size tuner (Listing 1): per layer of a model, time synthesized BCR layers
    /// of each candidate block and stop where the next one's speed-up falls below a threshold.
    TuneBcr(commands::tune_bcr::TuneBcrArgs),
    /// Training memory by component (inputs, model, optimizer, activations), dense and under
    /// SparseAct policies, measured from the runtime (the paper's Tables I and III).
    Memory(commands::memory::MemoryArgs),
    /// Where a training step's time goes on wgpu or CUDA: every kernel's launches and device
    /// time per step (CubeCL's profiler), beside the step's wall time.
    Profile(commands::profile::ProfileArgs),
    /// Compare finished runs: loss curves on one figure, test accuracy relative to the dense
    /// run over sparsity × block size as a heat map, and a Markdown table.
    Compare(commands::compare::CompareArgs),
    /// Mantissa-product lookup tables (ApproxTrain's NAME_M.bin, Ember's .lut).
    Lut {
        #[command(subcommand)]
        command: commands::lut::LutCommand,
    },
    /// What a per-layer policy names: a model's module paths and parameter shapes.
    Policy {
        #[command(subcommand)]
        command: commands::policy::PolicyCommand,
    },
}

/// A value parser for a closed set of names (models, datasets, backends), listing them in the
/// help and in the error.
pub(crate) fn choice<T: Choice>() -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(T::NAMES).try_map(|name| name.parse::<T>())
}

fn run(cli: Cli) -> Result<(), EmberError> {
    match cli.command {
        Command::Train(args) => commands::train::run(*args),
        Command::Eval(args) => commands::eval::run(args),
        Command::Export(args) => commands::export::run(args),
        Command::Prune(args) => commands::prune::run(args),
        Command::Memory(args) => commands::memory::run(args),
        Command::Profile(args) => commands::profile::run(args),
        Command::TuneBcr(args) => commands::tune_bcr::run(args),
        Command::Compare(args) => commands::compare::run(args),
        Command::Lut { command } => commands::lut::run(command),
        Command::Policy { command } => commands::policy::run(command),
    }
}

/// Counts live heap bytes for `ember memory` on ndarray (a few atomic adds per allocation).
#[global_allocator]
static ALLOC: ember_train::memory::CountingAllocator = ember_train::memory::CountingAllocator;

/// Mesa's Vulkan loader (lavapipe included) prints "error: XDG_RUNTIME_DIR is invalid or not
/// set in the environment" whenever the variable is missing, though a headless `wgpu` run needs
/// no display. When it is unset or not a directory, point it at a private directory under the
/// temporary directory (created with mode 0700, as the XDG spec asks).
fn quiet_vulkan_loader() {
    let valid =
        std::env::var_os("XDG_RUNTIME_DIR").is_some_and(|d| std::path::Path::new(&d).is_dir());
    if valid {
        return;
    }
    let dir = std::env::temp_dir().join(format!("ember-runtime-{}", user_tag()));
    let made = {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&dir)
    };
    if made.is_ok() {
        // SAFETY: called first thing in `main`, before any other thread exists.
        unsafe { std::env::set_var("XDG_RUNTIME_DIR", &dir) };
    }
}

/// Something that tells users apart in a shared temporary directory.
fn user_tag() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "user".into())
}

fn main() -> ExitCode {
    quiet_vulkan_loader();
    let cli = Cli::parse();
    // host training steps run on rayon's workers (`cubecl_kernels::workers`): give them the
    // main thread's stack room
    if let Err(e) = cubecl_kernels::workers::build_global(None) {
        eprintln!("error: rayon's thread pool could not start: {e}");
        return ExitCode::from(1);
    }
    let code = match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            if !e.is_reported_elsewhere() {
                eprintln!("error: {e}");
            }
            e.exit_code()
        }
    };
    // in an MPI job (`train --ddp mpi`): finalize, or abort the job after a failure
    ember_train::scale::end_process(code);
    ExitCode::from(code)
}
