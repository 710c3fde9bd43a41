//! `ember`: train and evaluate models under Ember's hardware-efficiency techniques.

use burn_approx_mul::Multiplier;
use burn_sparse_act::{Policy, PolicyError, Pruning};
use clap::{Parser, Subcommand};
use ember_models::backend::BackendKind;
use ember_models::compare::Comparison;
use ember_models::data::{DataSource, DatasetKind};
use ember_models::error::EmberError;
use ember_models::lut;
use ember_models::memory::{self, MemoryModel, MemoryOptions};
use ember_models::run::{self, OnExisting};
use ember_models::train::{self, EvalOptions, ModelKind, TrainOptions};
use std::path::PathBuf;
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
    Train {
        /// Model to train.
        #[arg(long, value_enum, default_value_t = ModelKind::Lenet5)]
        model: ModelKind,
        /// Backend to train on.
        #[arg(long, value_enum, default_value_t = BackendKind::Ndarray)]
        backend: BackendKind,
        /// Multiplier of every matmul/linear/conv product, forward and backward: native (the
        /// backend's own ops), fp32, bf16, accM, mbmM, mitchellM, realmM (M = 1..=11; mbm and
        /// mitchell also 23), afm16/afm32, mit16, realm16, or a LUT file (NAME_M.bin or .lut).
        #[arg(long, default_value = "native", value_parser = parse_multiplier)]
        multiplier: Multiplier,
        #[command(flatten)]
        sparse_act: SparseActArgs,
        /// Total number of epochs.
        #[arg(long, default_value_t = 3)]
        epochs: usize,
        /// Batch size.
        #[arg(long, default_value_t = 32)]
        batch_size: usize,
        /// Adam learning rate.
        #[arg(long, default_value_t = 2e-3)]
        lr: f64,
        /// Seed for parameter initialisation and shuffling.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Run directory (default: runs/<model>-<date>-<time>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Dataset: mnist (idx files: MNIST or Fashion-MNIST) or cifar10.
        #[arg(long, value_enum, default_value_t = DatasetKind::Mnist)]
        dataset: DatasetKind,
        /// Directory of the dataset: idx files (gz or raw) for mnist, default the MNIST subset
        /// embedded in the binary; for cifar10 (required) train/ and test/ image folders
        /// (cifar10-jpg.tar.gz extracted) or the official binary batches.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Continue the run in --out from its last checkpoint.
        #[arg(long, conflicts_with = "overwrite", requires = "out")]
        resume: bool,
        /// Replace the run in --out (never a directory that is not an Ember run).
        #[arg(long, requires = "out")]
        overwrite: bool,
        /// Use only the first N training images.
        #[arg(long)]
        train_limit: Option<usize>,
        /// Use only the first N test images.
        #[arg(long)]
        test_limit: Option<usize>,
        /// Plain progress lines even in a terminal (no TUI).
        #[arg(long)]
        plain: bool,
    },
    /// Evaluate a saved model on the test split.
    Eval {
        /// A run directory, its model.mpk, or a checkpoint/model-<epoch>.mpk.
        #[arg(long)]
        checkpoint: PathBuf,
        /// The model the checkpoint holds (read from the run's ember-run.json if omitted).
        #[arg(long, value_enum)]
        model: Option<ModelKind>,
        /// Backend to evaluate on.
        #[arg(long, value_enum, default_value_t = BackendKind::Ndarray)]
        backend: BackendKind,
        /// Multiplier to evaluate with (may differ from training's): every matmul/linear/conv product, native (the
        /// backend's own ops), fp32, bf16, accM, mbmM, mitchellM, realmM (M = 1..=11; mbm and
        /// mitchell also 23), afm16/afm32, mit16, realm16, or a LUT file (NAME_M.bin or .lut).
        #[arg(long, default_value = "native", value_parser = parse_multiplier)]
        multiplier: Multiplier,
        /// Dataset (default: the one the run was trained on, else mnist).
        #[arg(long, value_enum)]
        dataset: Option<DatasetKind>,
        /// Directory of the dataset (see `ember train --help`); default for mnist: the
        /// embedded subset.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Batch size.
        #[arg(long, default_value_t = 256)]
        batch_size: usize,
    },
    /// Training memory by component (inputs, model, optimizer, activations), dense and under
    /// SparseAct policies, measured from the runtime (the paper's Tables I and III).
    Memory {
        /// Model.
        #[arg(long, value_enum, default_value_t = MemoryModel::ResmlpS12)]
        model: MemoryModel,
        /// Image side in pixels (224: ImageNet input; 32: CIFAR).
        #[arg(long, default_value_t = 224)]
        image_size: usize,
        /// Patch side (default 16 from 64 px up, else 4).
        #[arg(long)]
        patch_size: Option<usize>,
        /// Classes (default 1000 from 64 px up, else 10).
        #[arg(long)]
        classes: Option<usize>,
        /// Batch size.
        #[arg(long, default_value_t = 32)]
        batch: usize,
        /// A policy S:B to measure after the dense baseline (repeatable).
        #[arg(long, value_parser = parse_pruning)]
        sparse_act: Vec<Pruning>,
        /// Measure the paper's Table III grid: s ∈ {0.6, 0.7, 0.8} × b ∈ {16, 32, 64}.
        #[arg(long, conflicts_with = "sparse_act")]
        table3: bool,
        /// Also measure every policy's fused variant (per-channel scales pruned too, `+scales`).
        #[arg(long)]
        fused: bool,
        /// Backend.
        #[arg(long, value_enum, default_value_t = BackendKind::Ndarray)]
        backend: BackendKind,
        /// Multiplier of every contraction.
        #[arg(long, default_value = "native", value_parser = parse_multiplier)]
        multiplier: Multiplier,
        /// Also write the table to this Markdown file (never overwritten).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Compare finished runs: loss curves on one figure, test accuracy relative to the dense
    /// run over sparsity × block size as a heat map, and a Markdown table.
    Compare {
        /// Run directories (at least one; at most one with --sparse-act off, the baseline).
        #[arg(required = true)]
        runs: Vec<PathBuf>,
        /// Directory for loss.png, accuracy-heatmap.png and summary.md (never overwritten).
        #[arg(long)]
        out: PathBuf,
        /// Figure title.
        #[arg(long, default_value = "runs")]
        title: String,
    },
    /// Mantissa-product lookup tables (ApproxTrain's NAME_M.bin, Ember's .lut).
    Lut {
        #[command(subcommand)]
        command: LutCommand,
    },
}

#[derive(Subcommand)]
enum LutCommand {
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

fn parse_multiplier(spec: &str) -> Result<Multiplier, String> {
    Multiplier::parse(spec).map_err(|e| e.to_string())
}

fn parse_pruning(spec: &str) -> Result<Pruning, String> {
    Pruning::parse(spec).map_err(|e| e.to_string())
}

/// SparseAct: which inputs of linear layers are kept pruned for backward.
#[derive(clap::Args)]
struct SparseActArgs {
    /// Prune every linear layer's saved input per sample to the top (1 − S) of its blocks of
    /// width B by L2 norm, e.g. 0.8:64 (S in [0, 1), B ≥ 1). Default: off (dense).
    #[arg(long, value_parser = parse_pruning)]
    sparse_act: Option<Pruning>,
    /// A per-layer override IN×OUT=S:B, the layer named by its weight shape (repeatable).
    #[arg(long, requires = "sparse_act")]
    sparse_act_layer: Vec<String>,
    /// The stochastic variant: blocks whose norm is within this relative band of the top-k
    /// threshold may swap (0 < BAND < 1).
    #[arg(long, requires = "sparse_act")]
    sparse_act_stochastic: Option<f64>,
    /// The fused variant: also keep the activations of per-channel scales (ResMLP's Affine and
    /// layer-scale) pruned for the scales' gradients.
    #[arg(long, requires = "sparse_act")]
    sparse_act_scales: bool,
}

impl SparseActArgs {
    fn policy(self) -> Result<Policy, EmberError> {
        let invalid = |e: PolicyError| EmberError::Invalid(e.to_string());
        let Some(default) = self.sparse_act else {
            return Ok(Policy::default());
        };
        let mut policy = Policy::uniform(default);
        policy.scales = self.sparse_act_scales;
        for spec in &self.sparse_act_layer {
            policy.add_override(spec).map_err(invalid)?;
        }
        if let Some(band) = self.sparse_act_stochastic {
            policy = policy.with_stochastic(band).map_err(invalid)?;
        }
        Ok(policy)
    }
}

fn run(cli: Cli) -> Result<(), EmberError> {
    match cli.command {
        Command::Train {
            model,
            backend,
            multiplier,
            sparse_act,
            epochs,
            batch_size,
            lr,
            seed,
            out,
            dataset,
            data_dir,
            resume,
            overwrite,
            train_limit,
            test_limit,
            plain,
        } => {
            let on_existing = match (resume, overwrite) {
                (true, _) => OnExisting::Resume,
                (_, true) => OnExisting::Overwrite,
                _ => OnExisting::Refuse,
            };
            let report = train::train(TrainOptions {
                model,
                backend,
                multiplier,
                sparse_act: sparse_act.policy()?,
                epochs,
                batch_size,
                lr,
                seed,
                out: out.unwrap_or_else(|| run::default_out(model)),
                data: DataSource::new(dataset, data_dir)?,
                on_existing,
                train_limit,
                test_limit,
                plain,
            })?;
            println!(
                "test accuracy {:.2}% (loss {:.4}, {} images); run in {} (metrics.csv, curves.png, model.mpk)",
                report.test.accuracy,
                report.test.loss,
                report.test.images,
                report.out.display()
            );
        }
        Command::Eval {
            checkpoint,
            model,
            backend,
            multiplier,
            dataset,
            data_dir,
            batch_size,
        } => {
            let report = train::eval(EvalOptions {
                checkpoint,
                model,
                backend,
                multiplier,
                dataset,
                data_dir,
                batch_size,
            })?;
            println!(
                "test accuracy {:.2}% (loss {:.4}, {} images)",
                report.accuracy, report.loss, report.images
            );
        }
        Command::Memory {
            model,
            image_size,
            patch_size,
            classes,
            batch,
            sparse_act,
            table3,
            fused,
            backend,
            multiplier,
            out,
        } => {
            if let Some(path) = out.as_ref().filter(|p| p.exists()) {
                return Err(EmberError::Invalid(format!(
                    "{} exists: ember never overwrites, choose another --out",
                    path.display()
                )));
            }
            let grid: Vec<Pruning> = if table3 {
                [0.6, 0.7, 0.8]
                    .iter()
                    .flat_map(|&s| [16, 32, 64].map(|b| Pruning::new(s, b).expect("valid")))
                    .collect()
            } else {
                sparse_act
            };
            let mut policies: Vec<(String, Policy)> = grid
                .iter()
                .map(|&p| (p.to_string(), Policy::uniform(p)))
                .collect();
            if fused {
                policies.extend(grid.iter().map(|&p| {
                    let mut policy = Policy::uniform(p);
                    policy.scales = true;
                    (format!("{p}+scales"), policy)
                }));
            }
            let report = memory::measure(MemoryOptions {
                model,
                image_size,
                patch_size,
                classes,
                batch,
                policies,
                backend,
                multiplier,
            })?;
            let paper = model == MemoryModel::ResmlpS12 && image_size == 224 && batch == 32;
            let table = report.markdown(paper);
            print!("{table}");
            if let Some(path) = out {
                memory::write_new(&path, &table)?;
                eprintln!("wrote {}", path.display());
            }
        }
        Command::Compare { runs, out, title } => {
            let comparison = Comparison::read(&runs)?;
            let files = comparison.write(&out, &title)?;
            print!("{}", comparison.markdown());
            for f in files {
                eprintln!("wrote {}", f.display());
            }
        }
        Command::Lut { command } => match command {
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
        },
    }
    Ok(())
}

/// Counts live heap bytes for `ember memory` on ndarray (a few atomic adds per allocation).
#[global_allocator]
static ALLOC: memory::CountingAllocator = memory::CountingAllocator;

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
