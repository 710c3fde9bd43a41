//! `xtask gpu-run`: the runner inside a GPU bundle (`run.sh` calls it). It runs every kernel
//! test binary, the bench binaries' device rows, one-epoch trainings of `ember` and, where
//! `python3 -c 'import torch'` works, the same shapes in PyTorch; then prints one table and
//! writes it to the report file. The runtime is `EMBER_TEST_RUNTIME`'s (`run.sh` sets `cuda`
//! unless it is set).

use crate::bench::{collect, fmt_time, table_rows};
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod torch;
use torch::torch_column;

/// A part of the run, for `--skip`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// The kernel test binaries.
    Tests,
    /// The bench binaries' device rows.
    Benches,
    /// The one-epoch trainings.
    Train,
    /// The PyTorch column.
    Torch,
}

/// What `gpu-run` was asked.
pub struct Options {
    /// The unpacked binaries.
    pub bin: PathBuf,
    /// Logs, criterion's files, the trainings' run directories.
    pub work: PathBuf,
    /// The PyTorch script (`torch_rows.py`).
    pub torch: Option<PathBuf>,
    /// Where the table is written (default `<work>/report.md`).
    pub report: Option<PathBuf>,
    /// Criterion's filter of the bench rows (default: the runtime's name).
    pub bench_filter: Option<String>,
    /// Criterion's warm-up and measurement seconds per row.
    pub bench_seconds: (f64, f64),
    /// Parts left out.
    pub skip: Vec<Part>,
    /// Seconds each binary may run before it is stopped and reported as timed out.
    pub timeout: u64,
    /// `--train-limit` / `--test-limit` of the trainings.
    pub train_limit: Option<usize>,
    /// `--test-limit` of the trainings.
    pub test_limit: Option<usize>,
}

/// How one run of a binary ended.
#[derive(Debug, PartialEq)]
enum Ended {
    /// It exited with this code (`None`: killed by a signal).
    Exited(Option<i32>),
    /// It ran past the timeout and was killed.
    TimedOut,
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Exited(Some(code)) => write!(f, "exited with code {code}"),
            Ended::Exited(None) => f.write_str("was killed by a signal (a crash)"),
            Ended::TimedOut => f.write_str("ran past its timeout and was stopped"),
        }
    }
}

/// Runs `cmd` with its output in `log`, killed after `timeout`.
fn run_logged(mut cmd: Command, log: &Path, timeout: Duration) -> Result<Ended> {
    let file = std::fs::File::create(log)?;
    let mut child = cmd
        .stdout(file.try_clone()?)
        .stderr(file)
        .stdin(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {cmd:?}"))?;
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Ended::Exited(status.code()));
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(Ended::TimedOut);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A test binary's outcome, from libtest's output.
#[derive(Debug, Default, PartialEq)]
struct TestOutcome {
    passed: usize,
    failed: usize,
    ignored: usize,
    /// The failing tests' names.
    failures: Vec<String>,
    /// libtest printed its summary line.
    summary: bool,
}

/// Parses libtest's `test x ... FAILED` lines and its `test result:` line.
fn parse_tests(log: &str) -> TestOutcome {
    let mut out = TestOutcome::default();
    for line in log.lines() {
        if let Some(name) = line
            .strip_prefix("test ")
            .and_then(|l| l.strip_suffix(" ... FAILED"))
        {
            out.failures.push(name.to_string());
        }
        if let Some(rest) = line.strip_prefix("test result: ") {
            out.summary = true;
            for part in rest.split(';') {
                let mut words = part.split_whitespace().rev();
                let (Some(what), Some(n)) = (words.next(), words.next()) else {
                    continue;
                };
                let Ok(n) = n.parse::<usize>() else { continue };
                match what {
                    "passed" => out.passed += n,
                    "failed" => out.failed += n,
                    "ignored" => out.ignored += n,
                    _ => {}
                }
            }
        }
    }
    out
}

/// The binaries in `bin` whose name starts with `prefix`, sorted.
fn binaries(bin: &Path, prefix: &str) -> Result<Vec<PathBuf>> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(bin)
        .with_context(|| format!("reading {}", bin.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect();
    found.sort();
    Ok(found)
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// The runtime `EMBER_TEST_RUNTIME` names (`wgpu` when unset or empty), lower case.
fn runtime() -> String {
    let value = std::env::var("EMBER_TEST_RUNTIME").unwrap_or_default();
    match value.trim().to_ascii_lowercase().as_str() {
        "" => "wgpu".into(),
        other => other.into(),
    }
}

/// One line of the training table.
struct Trained {
    label: String,
    result: std::result::Result<(f64, f64), String>,
}

/// Runs the bundle and writes the report; fails when a test, a bench or a training failed.
pub fn run(opts: Options) -> Result<()> {
    let runtime = runtime();
    let logs = opts.work.join("logs");
    std::fs::create_dir_all(&logs)?;
    let timeout = Duration::from_secs(opts.timeout);
    let mut failures = Vec::new();
    let mut md = String::new();
    let bundle = std::fs::read_to_string(opts.bin.join("../BUNDLE.txt")).unwrap_or_default();
    writeln!(md, "# Ember GPU bundle report\n")?;
    writeln!(
        md,
        "Runtime `{runtime}` (EMBER_TEST_RUNTIME); bundle {}; Burn's `autotune` **off** (Ember \
         builds Burn's backends without it).{}\n",
        bundle.lines().next().unwrap_or("of unknown commit"),
        if runtime == "cuda" {
            " Burn 0.21's CUDA matmul still runs TF32 tensor cores on f32 (cubek-matmul's default \
             `Auto` strategy tries CMMA first, which stages f32 operands as TF32): the `0-dense` \
             and `1-native` rows and a native training's matmuls are TF32; Ember's kernels are \
             f32."
        } else {
            ""
        }
    )?;

    // 1. kernel tests
    let mut device_line = None;
    if !opts.skip.contains(&Part::Tests) {
        writeln!(md, "## Kernel tests\n")?;
        writeln!(md, "| test binary | passed | failed | ignored | result |")?;
        writeln!(md, "|---|---:|---:|---:|---|")?;
        for exe in binaries(&opts.bin, "test-")? {
            let name = file_name(&exe);
            eprintln!("==> {name}");
            let log = logs.join(format!("{name}.log"));
            let start = Instant::now();
            let ended = run_logged(Command::new(&exe), &log, timeout)?;
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if device_line.is_none() {
                device_line = text
                    .lines()
                    .find(|l| l.starts_with("kernel tests run on "))
                    .map(str::to_string);
            }
            let t = parse_tests(&text);
            let result = match (&ended, t.summary) {
                (Ended::Exited(Some(0)), true) => {
                    format!("ok ({:.0} s)", start.elapsed().as_secs_f64())
                }
                (Ended::TimedOut, _) => format!("timed out after {} s", opts.timeout),
                (_, true) => format!("FAILED: {}", t.failures.join(", ")),
                (ended, false) => format!("no test summary: it {ended}, see logs/{name}.log"),
            };
            if !result.starts_with("ok") {
                failures.push(format!("{name}: {result}"));
            }
            writeln!(
                md,
                "| `{name}` | {} | {} | {} | {result} |",
                t.passed, t.failed, t.ignored
            )?;
            eprintln!("    {} passed, {} failed: {result}", t.passed, t.failed);
        }
        if let Some(line) = &device_line {
            writeln!(md, "\n{line}.")?;
        }
        writeln!(md)?;
    }

    // 2. benches
    let mut rows = Vec::new();
    if !opts.skip.contains(&Part::Benches) {
        let criterion = opts.work.join("criterion");
        if criterion.exists() {
            std::fs::remove_dir_all(&criterion)?;
        }
        let filter = opts.bench_filter.clone().unwrap_or_else(|| runtime.clone());
        for exe in binaries(&opts.bin, "bench-")? {
            let name = file_name(&exe);
            eprintln!("==> {name} (rows matching `{filter}`)");
            let mut cmd = Command::new(&exe);
            cmd.env("CRITERION_HOME", &criterion)
                .env("EMBER_BENCH_BACKEND", &runtime)
                .args([
                    "--bench",
                    "--noplot",
                    "--warm-up-time",
                    &opts.bench_seconds.0.to_string(),
                    "--measurement-time",
                    &opts.bench_seconds.1.to_string(),
                    &filter,
                ]);
            let ended = run_logged(cmd, &logs.join(format!("{name}.log")), timeout)?;
            if ended != Ended::Exited(Some(0)) {
                failures.push(format!("{name}: {ended}, see logs/{name}.log"));
            }
        }
        if criterion.exists() {
            collect(&criterion, &mut rows)?;
        }
        rows.sort_by(|a, b| a.id.cmp(&b.id));
    }
    let (torch, torch_what) = if opts.skip.contains(&Part::Torch) || rows.is_empty() {
        (BTreeMap::new(), "PyTorch: not run".to_string())
    } else {
        torch_column(&opts, &rows, &runtime)
    };
    if !rows.is_empty() {
        writeln!(md, "## Benches\n")?;
        let torch_rows = if torch.is_empty() {
            format!("{torch_what}.")
        } else {
            format!(
                "{torch_what}: the same op on the same shape, each call also followed by a \
                 device synchronisation, beside the Ember row that runs it (÷ PyTorch > 1: \
                 Ember is slower)."
            )
        };
        writeln!(
            md,
            "Mean of criterion's samples with its 95% CI; ratios to the group's first row, \
             measured in the same run; every device row waits for the device after each call. \
             {torch_rows}\n"
        )?;
        writeln!(
            md,
            "| benchmark | mean | 95% CI | ratio to group's first row | PyTorch | ÷ PyTorch |"
        )?;
        writeln!(md, "|---|---:|---|---:|---:|---:|")?;
        for ((id, line), row) in table_rows(&rows).into_iter().zip(&rows) {
            let (t, ratio) = torch.get(&id).map_or((String::new(), String::new()), |t| {
                (fmt_time(*t), format!("{:.2}×", row.mean_ns / t))
            });
            writeln!(md, "{line} {t} | {ratio} |")?;
        }
        writeln!(md)?;
    }

    // 3. one-epoch trainings on the embedded MNIST subset
    if !opts.skip.contains(&Part::Train) {
        let ember = opts.bin.join("ember");
        let mut trained = Vec::new();
        for (label, extra) in [
            ("LeNet-5, native", &[][..]),
            (
                "LeNet-5, --multiplier afm16 --sparse-act 0.5:16",
                &["--multiplier", "afm16", "--sparse-act", "0.5:16"][..],
            ),
        ] {
            let slug = if extra.is_empty() {
                "native"
            } else {
                "afm16-sa"
            };
            let out = opts.work.join("runs").join(slug);
            let mut cmd = Command::new(&ember);
            cmd.args(["train", "--backend", &runtime, "--epochs", "1", "--plain"])
                .args(extra)
                .arg("--out")
                .arg(&out);
            if out.exists() {
                cmd.arg("--overwrite");
            }
            if let Some(n) = opts.train_limit {
                cmd.args(["--train-limit", &n.to_string()]);
            }
            if let Some(n) = opts.test_limit {
                cmd.args(["--test-limit", &n.to_string()]);
            }
            eprintln!("==> ember train ({label})");
            let log = logs.join(format!("train-{slug}.log"));
            let ended = run_logged(cmd, &log, timeout)?;
            let result = if ended == Ended::Exited(Some(0)) {
                read_run(&out)
            } else {
                Err(format!("{ended}, see logs/train-{slug}.log"))
            };
            if let Err(e) = &result {
                failures.push(format!("ember train ({label}): {e}"));
            }
            trained.push(Trained {
                label: label.into(),
                result,
            });
        }
        let limits = match (opts.train_limit, opts.test_limit) {
            (None, None) => "12,000 training and 2,000 test images".to_string(),
            (a, b) => format!(
                "the first {} training and {} test images",
                a.map_or("12,000".into(), |n| n.to_string()),
                b.map_or("2,000".into(), |n| n.to_string())
            ),
        };
        writeln!(
            md,
            "## Training: one epoch of `ember train --backend {runtime}` on the embedded MNIST \
             subset ({limits}), batch 32, Adam 2e-3, seed 42\n"
        )?;
        writeln!(md, "| run | test accuracy | epoch time |")?;
        writeln!(md, "|---|---:|---:|")?;
        for t in trained {
            match t.result {
                Ok((acc, secs)) => writeln!(md, "| {} | {acc:.2} % | {secs:.1} s |", t.label)?,
                Err(e) => writeln!(md, "| {} | failed: {e} | |", t.label)?,
            }
        }
        writeln!(md)?;
    }

    if failures.is_empty() {
        writeln!(md, "**All passed.**")?;
    } else {
        writeln!(md, "**Failures:**\n")?;
        for f in &failures {
            writeln!(md, "- {f}")?;
        }
    }
    let report = opts
        .report
        .clone()
        .unwrap_or_else(|| opts.work.join("report.md"));
    let tmp = report.with_extension("md.tmp");
    std::fs::write(&tmp, &md)?;
    std::fs::rename(&tmp, &report)?;
    println!("{md}");
    eprintln!("wrote {}", report.display());
    if !failures.is_empty() {
        bail!("{} part(s) failed (see the report)", failures.len());
    }
    Ok(())
}

/// Test accuracy and the epoch's seconds from a finished run's `ember-run.json`.
fn read_run(out: &Path) -> std::result::Result<(f64, f64), String> {
    let path = out.join("ember-run.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let acc = v["test_accuracy"]
        .as_f64()
        .ok_or("no test_accuracy in ember-run.json")?;
    let secs = v["epoch_seconds"][0]
        .as_f64()
        .ok_or("no epoch_seconds in ember-run.json")?;
    Ok((acc, secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libtest_output_is_counted() {
        let log = "running 3 tests\ntest a ... ok\ntest b::c ... FAILED\ntest d ... ignored\n\
                   kernel tests run on cuda\n\nfailures:\n\ntest result: FAILED. 1 passed; 1 \
                   failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.1s\n";
        let t = parse_tests(log);
        assert_eq!((t.passed, t.failed, t.ignored), (1, 1, 1));
        assert_eq!(t.failures, ["b::c"]);
        assert!(t.summary);
        let crashed = parse_tests("running 3 tests\ntest a ... ok\nSIGSEGV\n");
        assert!(!crashed.summary);
    }

    #[test]
    fn a_binary_past_its_timeout_is_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let start = Instant::now();
        let ended = run_logged(cmd, &dir.path().join("log"), Duration::from_millis(300)).unwrap();
        assert_eq!(ended, Ended::TimedOut);
        assert!(start.elapsed() < Duration::from_secs(10));
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo hi; exit 3"]);
        let log = dir.path().join("log2");
        assert_eq!(
            run_logged(cmd, &log, Duration::from_secs(10)).unwrap(),
            Ended::Exited(Some(3))
        );
        assert_eq!(std::fs::read_to_string(log).unwrap(), "hi\n");
    }
}
