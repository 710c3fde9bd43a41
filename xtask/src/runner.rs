//! `cargo xtask test`'s test runner: every test of every test binary in a process of its own,
//! as many processes at once as the machine has cores (the model of `cargo nextest`, which CI
//! does not have).
//!
//! Why not `cargo test`: a CubeCL runtime serves each device from one compute server a process,
//! so the kernels that tests on libtest's threads compile (on lavapipe, each one LLVM
//! compilation of seconds) queue behind one another. With the shader cache empty, ApproxMul's
//! suite took 601 s under `cargo test` and 297 s as a process a test, two at once.
//!
//! Each test binary runs from its package's directory with `CARGO_MANIFEST_DIR` set, as
//! `cargo test` runs it. A test that fails has its output printed after the run, and the run
//! fails; a filter that matches no test (a listed test not run) fails it too.

use anyhow::{Context, Result, bail};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// One test of one binary.
struct Job {
    binary: PathBuf,
    /// The binary's name as cargo prints it (`package::target`).
    label: String,
    dir: PathBuf,
    name: String,
}

/// How a test's process ended.
enum Outcome {
    Passed,
    Ignored,
    Failed(String),
}

/// Builds the test binaries `cargo test <args>` would run and runs each of their tests in a
/// process of its own, `threads` at a time.
pub fn run(args: &[&str], threads: usize) -> Result<()> {
    let binaries = build(args)?;
    let start = Instant::now();
    let mut jobs = Vec::new();
    for (binary, label, dir) in binaries {
        for name in list(&binary, &dir)? {
            jobs.push(Job {
                binary: binary.clone(),
                label: label.clone(),
                dir: dir.clone(),
                name,
            });
        }
    }
    let total = jobs.len();
    println!("==> running {total} tests, {threads} at a time, each in its own process");
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, f64, Outcome)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    let t0 = Instant::now();
                    let outcome = run_one(job);
                    let secs = t0.elapsed().as_secs_f64();
                    let k = done.fetch_add(1, Ordering::Relaxed) + 1;
                    let tag = match &outcome {
                        Outcome::Passed => "PASS",
                        Outcome::Ignored => "SKIP",
                        Outcome::Failed(_) => "FAIL",
                    };
                    println!(
                        "{tag} [{secs:8.2} s] ({k}/{total}) {} {}",
                        job.label, job.name
                    );
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((i, secs, outcome));
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut slow: Vec<_> = results.iter().map(|(i, s, _)| (*s, *i)).collect();
    slow.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!("==> the slowest tests:");
    for (secs, i) in slow.iter().take(10) {
        println!("    {secs:8.2} s  {} {}", jobs[*i].label, jobs[*i].name);
    }
    let mut failed = Vec::new();
    let (mut passed, mut ignored) = (0, 0);
    for (i, _, outcome) in &results {
        match outcome {
            Outcome::Passed => passed += 1,
            Outcome::Ignored => ignored += 1,
            Outcome::Failed(output) => {
                let job = &jobs[*i];
                println!("\n==> FAILED: {} {}\n{output}", job.label, job.name);
                failed.push(format!("{} {}", job.label, job.name));
            }
        }
    }
    println!(
        "==> {passed} passed, {} failed, {ignored} ignored of {total} tests in {:.1} s",
        failed.len(),
        start.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        bail!("{} tests failed:\n  {}", failed.len(), failed.join("\n  "));
    }
    Ok(())
}

/// `cargo test <args> --no-run`: the test binaries it built, each with its label and its
/// package's directory.
fn build(args: &[&str]) -> Result<Vec<(PathBuf, String, PathBuf)>> {
    let start = Instant::now();
    println!("==> cargo {} --no-run", args.join(" "));
    let out = Command::new(env!("CARGO"))
        .args(args)
        .args(["--no-run", "--message-format", "json-render-diagnostics"])
        .current_dir(crate::root())
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo to build the tests")?;
    if !out.status.success() {
        bail!("building the tests failed ({})", out.status);
    }
    // each package's name by its manifest
    let packages: HashMap<String, String> = crate::metadata()?["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some((
                p["manifest_path"].as_str()?.into(),
                p["name"].as_str()?.into(),
            ))
        })
        .collect();
    let mut binaries = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
            continue;
        }
        let Some(executable) = message["executable"].as_str() else {
            continue;
        };
        let manifest = message["manifest_path"]
            .as_str()
            .context("a compiler artifact without its manifest path")?;
        let dir = PathBuf::from(manifest)
            .parent()
            .context("a manifest path without a directory")?
            .to_path_buf();
        let package = packages.get(manifest).map_or("", String::as_str);
        let target = message["target"]["name"].as_str().unwrap_or_default();
        binaries.push((
            PathBuf::from(executable),
            format!("{package}::{target}"),
            dir,
        ));
    }
    println!(
        "==> building the tests took {:.1} s ({} binaries)",
        start.elapsed().as_secs_f64(),
        binaries.len()
    );
    Ok(binaries)
}

/// The tests of a test binary (`--list --format terse`: a line `name: test` each).
fn list(binary: &Path, dir: &Path) -> Result<Vec<String>> {
    let out = Command::new(binary)
        .args(["--list", "--format", "terse"])
        .current_dir(dir)
        .env("CARGO_MANIFEST_DIR", dir)
        .output()
        .with_context(|| format!("listing the tests of {}", binary.display()))?;
    if !out.status.success() {
        bail!(
            "listing the tests of {} failed ({}):\n{}",
            binary.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.strip_suffix(": test"))
        .map(str::to_string)
        .collect())
}

/// Runs one test alone in its binary (`--exact NAME --test-threads 1`).
fn run_one(job: &Job) -> Outcome {
    let out = Command::new(&job.binary)
        .args(["--exact", &job.name, "--test-threads", "1"])
        .current_dir(&job.dir)
        .env("CARGO_MANIFEST_DIR", &job.dir)
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) => return Outcome::Failed(format!("could not start it: {e}")),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let text = || format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        return Outcome::Failed(format!("{}\n{}", out.status, text()));
    }
    if stdout.contains("test result: ok. 1 passed; 0 failed; 0 ignored") {
        Outcome::Passed
    } else if stdout.contains("test result: ok. 0 passed; 0 failed; 1 ignored") {
        Outcome::Ignored
    } else {
        Outcome::Failed(format!(
            "the filter did not run exactly this test:\n{}",
            text()
        ))
    }
}
