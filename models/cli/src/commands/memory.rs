//! `ember memory`.

use crate::choice;
use burn_approx_mul::Multiplier;
use burn_sparse_act::Pruning;
use ember_train::EmberError;
use ember_train::backend::BackendKind;
use ember_train::memory::{self, MemoryModel, MemoryOptions, MemoryRow};
use std::path::PathBuf;

/// Arguments of `ember memory`.
#[derive(clap::Args)]
pub struct MemoryArgs {
    /// Model.
    #[arg(long, value_parser = choice::<MemoryModel>(), default_value_t = MemoryModel::ResmlpS12)]
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
    #[arg(long)]
    sparse_act: Vec<Pruning>,
    /// Measure the paper's Table III grid: s ∈ {0.6, 0.7, 0.8} × b ∈ {16, 32, 64}.
    #[arg(long, conflicts_with = "sparse_act")]
    table3: bool,
    /// Also measure every policy's fused variant (per-channel scales pruned too, `+scales`).
    #[arg(long)]
    fused: bool,
    /// Backend.
    #[arg(long, value_parser = choice::<BackendKind>(), default_value_t = BackendKind::Ndarray)]
    backend: BackendKind,
    /// Multiplier of every contraction.
    #[arg(long, default_value = "native")]
    multiplier: Multiplier,
    #[command(flatten)]
    conv: super::ConvArgs,
    /// Also write the table to this Markdown file (never overwritten).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Internal: measure only this configuration (0 = dense) and print its row as JSON. The
    /// command runs every configuration in a child process of its own this way.
    #[arg(long, hide = true)]
    configuration: Option<usize>,
}

/// Runs `ember memory`: every configuration in a child process of its own (so no
/// configuration's transient buffers or allocator slack inflate the next one's, and each reports
/// its own peak), then the table.
pub fn run(args: MemoryArgs) -> Result<(), EmberError> {
    let grid = if args.table3 {
        memory::table3_grid()
    } else {
        args.sparse_act.clone()
    };
    let opts = MemoryOptions {
        model: args.model,
        image_size: args.image_size,
        patch_size: args.patch_size,
        classes: args.classes,
        batch: args.batch,
        policies: memory::policies(&grid, args.fused),
        backend: args.backend,
        multiplier: args.conv.apply(args.multiplier.clone()),
    };
    if let Some(index) = args.configuration {
        let row = memory::measure_configuration(&opts, index)?;
        let json = serde_json::to_string(&row)
            .map_err(|e| EmberError::Invalid(format!("cannot encode the row: {e}")))?;
        println!("{json}");
        return Ok(());
    }
    if let Some(path) = &args.out {
        memory::check_new(path)?;
    }
    // Checked here too, so a bad option or a missing backend is one error, not one per child.
    opts.validate()?;
    opts.backend.check_available()?;
    let mut rows = Vec::new();
    for (index, (label, _)) in memory::configurations(&opts).iter().enumerate() {
        eprintln!("measuring {label} (in a process of its own) ...");
        rows.push(measure_in_child(index)?);
    }
    let table = memory::report(&opts, rows)?.markdown();
    print!("{table}");
    if let Some(path) = args.out {
        memory::write_new(&path, &table)?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(peak) = memory::peak_rss() {
        eprintln!(
            "peak resident memory of this (parent) process: {:.1} MiB",
            peak as f64 / (1024.0 * 1024.0)
        );
    }
    Ok(())
}

/// Runs this same command line with `--configuration index` and reads the row it prints.
fn measure_in_child(index: usize) -> Result<MemoryRow, EmberError> {
    // One worker: a product's per-thread workspace is then made once, in the throw-away step,
    // whatever the machine's load; with several, a worker that first multiplies in the
    // measured step counts its workspace (1-2 MiB on ndarray) as activations.
    super::in_child(
        "--configuration",
        &index.to_string(),
        &[("RAYON_NUM_THREADS", "1")],
        &format!("measuring configuration {index}"),
    )
}
