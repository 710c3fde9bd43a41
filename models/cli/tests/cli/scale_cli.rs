//! Data-parallel training in one process: two wgpu devices train LeNet-5 under `--multiplier
//! afm16 --sparse-act 0.5:16` with `--verify-replicas` (the run fails if the replicas'
//! parameters differ by one bit after any step) as one device with their summed batch; bad scale
//! options, and the removed cross-process form, are refused before anything is written. MPI jobs
//! are tested in `mpi_cli.rs`.

use crate::common::{fails_with, ok, read_manifest, s, scratch, train_losses};
use std::path::Path;
use std::time::{Duration, Instant};

/// LeNet-5 under the decorators on 256 embedded MNIST images, batch 16 per replica.
fn run_args<'a>(out: &'a Path, epochs: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "train",
        "--model",
        "lenet5",
        "--multiplier",
        "afm16",
        "--sparse-act",
        "0.5:16",
        "--epochs",
        epochs,
        "--train-limit",
        "256",
        "--test-limit",
        "64",
        "--batch-size",
        "16",
        "--lr",
        "0.003",
        "--plain",
        "--verify-replicas",
        "--out",
        s(out),
    ];
    args.extend(extra);
    args
}

#[test]
fn two_wgpu_devices_in_one_process_train_equal_replicas() {
    let tmp = scratch("two-devices");
    let out = tmp.join("run");
    let stdout = ok(&crate::common::ember(&run_args(
        &out,
        "2",
        &["--backend", "wgpu", "--devices", "2"],
    )));
    assert!(stdout.contains("test accuracy"), "{stdout}");
    let manifest = read_manifest(&out);
    assert_eq!(manifest["replicas"], 2);
    let losses = train_losses(&out);
    assert!(losses[1] < losses[0], "the loss did not fall: {losses:?}");
    // Two replicas of 16 take the steps one device takes with batches of 32: the mean of the
    // shards' gradients is the gradient of the whole batch, up to the order of the sums.
    let single = tmp.join("single");
    let mut args = run_args(&single, "2", &["--backend", "wgpu"]);
    let batch = args.iter().position(|a| *a == "--batch-size").unwrap();
    args[batch + 1] = "32";
    ok(&crate::common::ember(&args));
    for (a, b) in losses.iter().zip(train_losses(&single)) {
        assert!(
            (a - b).abs() <= 1e-4 * b.abs(),
            "2 × 16: {losses:?}, 1 × 32: {b}"
        );
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn bad_scale_options_are_refused_before_anything_is_written() {
    let tmp = scratch("bad-scale");
    let out = tmp.join("run");
    let moved = "was removed";
    let mut cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--devices", "0"], "--devices must be at least 1"),
        (
            vec!["--devices", "2"],
            "the ndarray backend has 1 device here",
        ),
        (
            vec!["--backend", "wgpu", "--devices", "3"],
            "the wgpu backend has 2 devices here",
        ),
        // the form of burn-collective's cross-process path says what to run instead
        (
            vec![
                "--ddp",
                "--rank",
                "0",
                "--world",
                "2",
                "--coordinator",
                "127.0.0.1:29500",
            ],
            moved,
        ),
        (vec!["--ddp"], "mpirun -np WORLD ember train --ddp mpi"),
        (vec!["--rank", "1"], moved),
        (vec!["--ddp", "nccl"], "the only engine is mpi"),
    ];
    if !cfg!(feature = "mpi") {
        cases.push((
            vec!["--ddp", "mpi"],
            "needs an ember built with the `mpi` feature",
        ));
    }
    for (extra, needle) in cases {
        let started = Instant::now();
        let output = crate::common::ember(&run_args(&out, "1", &extra));
        fails_with(&output, needle);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            stderr.lines().filter(|l| l.starts_with("error")).count(),
            1,
            "{stderr}"
        );
        assert!(!out.exists(), "{extra:?} left {} behind", out.display());
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{extra:?} took too long"
        );
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
