//! `cargo xtask bench`: runs the criterion benches of the workspace and writes
//! `docs/benchmarks.md` from criterion's `estimates.json` files.

use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::path::Path;

/// One measured benchmark: criterion group/function id and its mean time.
struct Row {
    id: String,
    mean_ns: f64,
    low_ns: f64,
    high_ns: f64,
}

fn collect(dir: &Path, rows: &mut Vec<Row>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if !path.is_dir() {
            continue;
        }
        let est = path.join("new/estimates.json");
        let meta = path.join("new/benchmark.json");
        if est.exists() && meta.exists() {
            let e: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&est)?)?;
            let m: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&meta)?)?;
            let mean = &e["mean"];
            rows.push(Row {
                id: m["full_id"].as_str().unwrap_or("?").to_string(),
                mean_ns: mean["point_estimate"].as_f64().context("point_estimate")?,
                low_ns: mean["confidence_interval"]["lower_bound"]
                    .as_f64()
                    .unwrap_or(f64::NAN),
                high_ns: mean["confidence_interval"]["upper_bound"]
                    .as_f64()
                    .unwrap_or(f64::NAN),
            });
        } else {
            collect(&path, rows)?;
        }
    }
    Ok(())
}

fn fmt_time(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.3} µs", ns / 1e3)
    } else {
        format!("{ns:.1} ns")
    }
}

/// Runs the benches (optionally filtered) and writes the report.
pub fn run(filter: Option<&str>) -> Result<()> {
    let root = crate::root();
    let target = crate::target_dir();
    let criterion_dir = target.join("criterion");
    // Old results would be reported as new: start from an empty folder.
    if criterion_dir.exists() && filter.is_none() {
        std::fs::remove_dir_all(&criterion_dir)?;
    }
    let mut args = vec!["bench", "--workspace", "--benches"];
    if let Some(f) = filter {
        args.extend(["--", f]);
    }
    crate::cargo(&args)?;

    let mut rows = Vec::new();
    if criterion_dir.exists() {
        collect(&criterion_dir, &mut rows)?;
    }
    rows.sort_by(|a, b| a.id.cmp(&b.id));
    let mut md = String::new();
    writeln!(md, "# Benchmarks\n")?;
    writeln!(
        md,
        "Written by `cargo xtask bench` on {} ({} cores). Mean of criterion's samples with its \
         95% confidence interval. Ratios are taken between rows of the same group, measured in \
         the same run. Burn's `autotune` feature was **off** for every row (Ember builds Burn's \
         backends without it).\n",
        std::env::consts::ARCH,
        crate::cores()
    )?;
    writeln!(
        md,
        "| benchmark | mean | 95% CI | ratio to group's first row |"
    )?;
    writeln!(md, "|---|---:|---|---:|")?;
    let mut group_base: Option<(String, f64)> = None;
    for r in &rows {
        // A group is everything before the last `/`: its rows are variants of one measurement.
        let group =
            r.id.rsplit_once('/')
                .map_or(r.id.as_str(), |(g, _)| g)
                .to_string();
        let base = match &group_base {
            Some((g, b)) if *g == group => *b,
            _ => {
                group_base = Some((group, r.mean_ns));
                r.mean_ns
            }
        };
        writeln!(
            md,
            "| `{}` | {} | {} – {} | {:.3}× |",
            r.id,
            fmt_time(r.mean_ns),
            fmt_time(r.low_ns),
            fmt_time(r.high_ns),
            r.mean_ns / base
        )?;
    }
    let out = root.join("docs/benchmarks.md");
    std::fs::write(&out, md)?;
    println!("wrote {} ({} rows)", out.display(), rows.len());
    Ok(())
}
