//! Helpers shared by the `ember` CLI tests: run the binary, a scratch directory per test
//! (removed after it), and the "clean failure" assertion (one error line, non-zero exit, no panic).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `ember` with `args` (Mesa's loader gets a runtime directory for wgpu runs).
pub fn ember(args: &[&str]) -> Output {
    ember_with(args, &[])
}

/// Runs `ember` with `args` and the environment variables `env` set.
pub fn ember_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .env("XDG_RUNTIME_DIR", std::env::temp_dir())
        .envs(env.iter().copied())
        .output()
        .expect("run ember")
}

/// Runs `ember` with `args` under `ulimit -f blocks` (the shell's file-size limit, in its
/// blocks of 512 or 1024 bytes), with SIGXFSZ ignored so that a write past the limit fails with
/// EFBIG instead of killing the process.
pub fn ember_file_limited(blocks: u32, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            r#"trap "" XFSZ; ulimit -f {blocks}; exec "$0" "$@""#
        ))
        .arg(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .env("XDG_RUNTIME_DIR", std::env::temp_dir())
        .output()
        .expect("run ember under sh")
}

/// The arguments of a one-epoch `ember train` of `model` on 300 embedded MNIST images (100 test
/// images, batch 50, plain progress) into `out`.
pub fn small_train_args<'a>(model: &'a str, out: &'a Path) -> Vec<&'a str> {
    sized_train_args(model, out, ["300", "100", "50"])
}

/// A one-epoch `ember train` of `model` into `out` with `[train limit, test limit, batch size]`
/// on the embedded MNIST images, plain progress.
pub fn sized_train_args<'a>(
    model: &'a str,
    out: &'a Path,
    [train, test, batch]: [&'a str; 3],
) -> Vec<&'a str> {
    vec![
        "train",
        "--model",
        model,
        "--epochs",
        "1",
        "--train-limit",
        train,
        "--test-limit",
        test,
        "--batch-size",
        batch,
        "--plain",
        "--out",
        s(out),
    ]
}

/// An empty scratch path, unique to this process and test binary, removed with whatever was
/// written there when the guard drops, except when the test panics (its files are then left
/// for a look).
pub fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!(
        "ember-{}-{}-{name}",
        env!("CARGO_CRATE_NAME"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    Scratch(dir)
}

/// A scratch path ([`scratch`]): a `PathBuf` that removes itself when dropped.
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Asserts a clean failure whose stderr contains `needle`.
pub fn fails_with(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "expected failure, got success; stderr: {stderr}"
    );
    assert!(
        !stderr.contains("panicked"),
        "panic instead of an error: {stderr}"
    );
    assert!(stderr.contains(needle), "stderr lacks {needle:?}: {stderr}");
}

/// Asserts success and returns stdout.
pub fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A path as `&str`.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The training loss of every epoch in the run's manifest.
pub fn train_losses(run: &Path) -> Vec<f64> {
    read_manifest(run)["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["train_loss"].as_f64().unwrap())
        .collect()
}

/// The run's `ember-run.json`.
pub fn read_manifest(run: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(run.join("ember-run.json")).unwrap()).unwrap()
}

/// The committed excerpt of `JapaneseVowels_TRAIN.ts` (models/src/data/fixtures): one
/// utterance of each of the 9 speakers.
const JV: &str = include_str!("../../../src/data/fixtures/japanese_vowels_9.ts");

/// A Japanese Vowels directory under `dir` whose two splits are the 9-utterance excerpt.
pub fn jv_dir(dir: &Path) -> PathBuf {
    let jv = dir.join("jv");
    std::fs::create_dir_all(&jv).unwrap();
    for f in ["JapaneseVowels_TRAIN.ts", "JapaneseVowels_TEST.ts"] {
        std::fs::write(jv.join(f), JV).unwrap();
    }
    jv
}
