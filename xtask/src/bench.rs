//! `cargo xtask bench`: runs the criterion benches of the workspace and writes
//! `docs/benchmarks.md` from criterion's `estimates.json` files.

use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::path::Path;

/// One measured benchmark: criterion group/function id and its mean time.
pub(crate) struct Row {
    /// `group/row`.
    pub(crate) id: String,
    /// Mean of the samples.
    pub(crate) mean_ns: f64,
    pub(crate) low_ns: f64,
    pub(crate) high_ns: f64,
}

/// The rows of every `estimates.json` under `dir` (criterion's output folder).
pub(crate) fn collect(dir: &Path, rows: &mut Vec<Row>) -> Result<()> {
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

/// A time in the unit that suits it.
pub(crate) fn fmt_time(ns: f64) -> String {
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

/// The report's rows: `| `id` | mean | CI | ratio |`, ratios to the first row of each group
/// (everything before the id's last `/`), `rows` sorted by id.
pub(crate) fn table_rows(rows: &[Row]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut group_base: Option<(String, f64)> = None;
    for r in rows {
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
        out.push((
            r.id.clone(),
            format!(
                "| `{}` | {} | {} – {} | {:.3}× |",
                r.id,
                fmt_time(r.mean_ns),
                fmt_time(r.low_ns),
                fmt_time(r.high_ns),
                r.mean_ns / base
            ),
        ));
    }
    out
}

/// The id of a report row (`| `id` | ...`), if `line` is one.
fn row_id(line: &str) -> Option<&str> {
    line.strip_prefix("| `")?.split_once('`').map(|(id, _)| id)
}

/// The report with the rows whose id contains `filter` replaced by `fresh` (a partial run):
/// every other row of `old` is kept as it was, with its ratio (its group was measured in one
/// run, since a filter selects whole groups by their common prefix), and a line under the
/// header says which rows were refreshed at `when`.
fn merge(old: &str, filter: &str, fresh: Vec<(String, String)>, when: &str) -> String {
    let (mut head, mut rows) = (Vec::new(), fresh);
    for line in old.lines() {
        match row_id(line) {
            Some(id) if id.contains(filter) => {}
            Some(id) => rows.push((id.to_string(), line.to_string())),
            None if line.starts_with("Rows containing `")
                && line.contains(&format!("`{filter}`")) => {}
            None => head.push(line.to_string()),
        }
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let note = format!("Rows containing `{filter}`: re-run alone at {when}.");
    let head = head.iter().map(String::as_str).collect::<Vec<_>>();
    with_note(
        &head,
        "| benchmark",
        &note,
        rows.iter().map(|(_, l)| l.as_str()),
    )
}

/// A merged report section: `head`'s lines before the one starting with `table` (the text
/// above the table), a blank line, `note`, a blank line, then `head`'s table lines (its header
/// and separator) and `rows`, each line ending in a newline.
pub(crate) fn with_note<'a>(
    head: &[&'a str],
    table: &str,
    note: &str,
    rows: impl Iterator<Item = &'a str>,
) -> String {
    let at = head
        .iter()
        .position(|l| l.starts_with(table))
        .unwrap_or(head.len());
    let mut md = format!("{}\n\n{note}\n\n", head[..at].join("\n").trim_end());
    for l in head[at..].iter().copied().chain(rows) {
        md += l;
        md += "\n";
    }
    md
}

/// The heading of the report's last section, the GPU runs (`cargo xtask gpu-bundle`'s tables,
/// measured elsewhere): kept as it is when the benches rewrite the report.
const GPU_SECTION: &str = "\n## GPU runs";

/// `report` cut before its GPU section: (what the benches write, the section or "").
fn split_gpu_section(report: &str) -> (&str, &str) {
    report
        .find(GPU_SECTION)
        .map_or((report, ""), |at| report.split_at(at))
}

/// The checked-out commit's short hash, or `unknown`.
pub(crate) fn commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(crate::root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "an unknown commit".into(),
            |o| format!("commit {}", String::from_utf8_lossy(&o.stdout).trim()),
        )
}

/// Runs the benches (optionally filtered) and writes the report. With a filter, only the rows
/// whose id contains it are measured and replaced; the report's other rows are kept.
pub fn run(filter: Option<&str>) -> Result<()> {
    let root = crate::root();
    let target = crate::target_dir();
    let criterion_dir = target.join("criterion");
    // Old results would be reported as new: start from an empty folder.
    if criterion_dir.exists() {
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
    if let Some(f) = filter {
        rows.retain(|r| r.id.contains(f));
    }
    rows.sort_by(|a, b| a.id.cmp(&b.id));
    let fresh = table_rows(&rows);
    let out = root.join("docs/benchmarks.md");
    let old = std::fs::read_to_string(&out).ok();
    let (old_table, gpu) = old.as_deref().map_or(("", ""), split_gpu_section);
    let mut md = match filter {
        Some(f) => {
            if old.is_none() {
                anyhow::bail!(
                    "{} not found: nothing to merge a filtered run into",
                    out.display()
                );
            }
            merge(old_table, f, fresh, &commit())
        }
        None => {
            let mut md = String::new();
            writeln!(md, "# Benchmarks\n")?;
            writeln!(
                md,
                "Written by `cargo xtask bench` on {} ({} cores) at {}. Mean of criterion's \
                 samples with its 95% confidence interval. Ratios are taken between rows of the \
                 same group, measured in the same run. Burn's `autotune` feature was **off** for \
                 every row (Ember builds Burn's backends without it).\n",
                std::env::consts::ARCH,
                crate::cores(),
                commit()
            )?;
            writeln!(
                md,
                "| benchmark | mean | 95% CI | ratio to group's first row |"
            )?;
            writeln!(md, "|---|---:|---|---:|")?;
            for (_, line) in fresh {
                writeln!(md, "{line}")?;
            }
            md
        }
    };
    md += gpu;
    // a temporary file renamed over the report: an interrupted write leaves the old one
    let tmp = out.with_extension("md.tmp");
    std::fs::write(&tmp, md)?;
    std::fs::rename(&tmp, &out)?;
    println!("wrote {} ({} rows measured)", out.display(), rows.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "# Benchmarks\n\nWritten by a full run.\n\n| benchmark | mean | 95% CI | ratio to group's first row |\n|---|---:|---|---:|\n| `a/0-dense` | 1 ms | x | 1.000× |\n| `hinm_x/0-dense` | 9 ms | x | 1.000× |\n| `z/1` | 2 ms | x | 1.000× |\n";

    #[test]
    fn the_gpu_section_is_kept_apart() {
        let report = format!("{OLD}\n## GPU runs (x)\n\n| `gemm/cuda/1` | 1 ms | x | 1× |\n");
        let (table, gpu) = split_gpu_section(&report);
        assert_eq!(table, OLD);
        assert!(gpu.starts_with("\n## GPU runs") && gpu.contains("gemm/cuda"));
        // a filtered run merges into the table alone: the GPU rows stay out of it
        let md = merge(table, "gemm", Vec::new(), "commit abc");
        assert!(!md.contains("cuda"));
        assert_eq!(split_gpu_section(OLD), (OLD, ""));
    }

    #[test]
    fn a_filtered_run_replaces_only_its_rows() {
        let rows = [("hinm_x/0-dense", 4e6), ("hinm_x/75", 1e6)].map(|(id, ns)| Row {
            id: id.into(),
            mean_ns: ns,
            low_ns: ns,
            high_ns: ns,
        });
        let md = merge(OLD, "hinm", table_rows(&rows), "commit abc");
        let ids: Vec<&str> = md.lines().filter_map(row_id).collect();
        assert_eq!(ids, ["a/0-dense", "hinm_x/0-dense", "hinm_x/75", "z/1"]);
        assert!(md.contains("| `hinm_x/75` | 1.000 ms | 1.000 ms – 1.000 ms | 0.250× |"));
        assert!(!md.contains("9 ms"), "the old row is gone");
        assert!(md.contains("Written by a full run."));
        assert!(md.contains("Rows containing `hinm`: re-run alone at commit abc."));
        // a second refresh replaces the note instead of adding one
        let again = merge(&md, "hinm", table_rows(&rows), "commit def");
        assert_eq!(again.matches("Rows containing `hinm`").count(), 1);
        assert!(again.contains("commit def"));
        assert_eq!(again.lines().filter_map(row_id).count(), 4);
    }
}
