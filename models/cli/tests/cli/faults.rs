//! Runs that survive faults (issue 14): a diverging loss, a killed or interrupted run, corrupt
//! checkpoints, a checkpoint that cannot be written, absurd numbers, a missing Vulkan driver,
//! options that would silently do nothing. Each test fails without the handling it checks.

use crate::common::{
    ember, ember_file_limited, ember_with, fails_with, ok, read_manifest, s, scratch,
};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

/// LeNet-300-100 on 1,000 embedded MNIST images, 40 batches an epoch.
const SMALL: [&str; 9] = [
    "--model",
    "lenet300",
    "--train-limit",
    "1000",
    "--test-limit",
    "200",
    "--batch-size",
    "25",
    "--plain",
];

fn train_args<'a>(out: &'a Path, epochs: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["train", "--epochs", epochs, "--out", s(out)];
    args.extend(SMALL);
    args.extend(extra);
    args
}

/// `args` with `flag`'s value set to `value` (replaced where the flag is given, else added).
fn with<'a>(args: &[&'a str], flag: &'a str, value: &'a str) -> Vec<&'a str> {
    let mut args = args.to_vec();
    match args.iter().position(|a| *a == flag) {
        Some(i) => args[i + 1] = value,
        None => args.extend([flag, value]),
    }
    args
}

/// A directory of raw idx files: `n` training and `n` test images, 28 × 28, labels 0..9.
fn idx_dataset(dir: &Path, n: u32) {
    std::fs::create_dir_all(dir).unwrap();
    let images = {
        let mut v = vec![0, 0, 8, 3];
        v.extend(n.to_be_bytes());
        v.extend(28u32.to_be_bytes());
        v.extend(28u32.to_be_bytes());
        v.extend((0..n as usize * 784).map(|i| (i * 7 % 251) as u8));
        v
    };
    let labels = {
        let mut v = vec![0, 0, 8, 1];
        v.extend(n.to_be_bytes());
        v.extend((0..n).map(|i| (i % 10) as u8));
        v
    };
    for split in ["train", "t10k"] {
        std::fs::write(dir.join(format!("{split}-images-idx3-ubyte")), &images).unwrap();
        std::fs::write(dir.join(format!("{split}-labels-idx1-ubyte")), &labels).unwrap();
    }
}

/// Starts `ember args`, waits for a stderr line containing `when`, then sends `signal` (by
/// pid, with kill(1)) and returns the exit status and everything it printed on stderr.
pub fn kill_when(args: &[&str], when: &str, signal: &str) -> (std::process::ExitStatus, String) {
    kill_after(args, when, std::time::Duration::ZERO, signal)
}

/// [`kill_when`], the signal sent `wait` after the line is seen (so that what the line
/// announces has begun).
pub fn kill_after(
    args: &[&str],
    when: &str,
    wait: std::time::Duration,
    signal: &str,
) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .env("XDG_RUNTIME_DIR", std::env::temp_dir())
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start ember");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let mut line = String::new();
    let mut sent = false;
    while stderr.read_line(&mut line).unwrap() > 0 {
        seen.push_str(&line);
        if !sent && line.contains(when) {
            std::thread::sleep(wait);
            let status = Command::new("kill")
                .args([&format!("-{signal}"), &child.id().to_string()])
                .status()
                .unwrap();
            assert!(status.success());
            sent = true;
        }
        line.clear();
    }
    let status = child.wait().unwrap();
    assert!(sent, "never saw {when:?}: {seen}");
    (status, seen)
}

fn history(run: &Path) -> Vec<[f64; 4]> {
    read_manifest(run)["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            [
                "train_loss",
                "train_accuracy",
                "valid_loss",
                "valid_accuracy",
            ]
            .map(|k| r[k].as_f64().unwrap())
        })
        .collect()
}

fn assert_same_history(a: &[[f64; 4]], b: &[[f64; 4]]) {
    assert_eq!(a.len(), b.len());
    for (ra, rb) in a.iter().zip(b) {
        for (x, y) in ra.iter().zip(rb) {
            assert!(
                (x - y).abs() <= 1e-4 * x.abs().max(1.0),
                "interrupted and resumed {a:?}\nuninterrupted {b:?}"
            );
        }
    }
}

#[test]
fn killed_and_interrupted_runs_resume_to_the_uninterrupted_result() {
    let tmp = scratch("kill");
    let (whole, broken) = (tmp.join("whole"), tmp.join("broken"));
    ok(&ember(&train_args(&whole, "3", &[])));
    let reference = history(&whole);
    assert_eq!(reference.len(), 3);

    // SIGKILL in epoch 2: epoch 1 is on disk and named by the manifest.
    let (status, _) = kill_when(&train_args(&broken, "3", &[]), "epoch 2/3 [", "KILL");
    assert!(!status.success());
    let manifest = read_manifest(&broken);
    assert_eq!(manifest["completed_epochs"], 1);
    assert_eq!(history(&broken).len(), 1);
    assert!(broken.join("metrics.csv").is_file() && broken.join("curves.png").is_file());

    // SIGTERM in epoch 3 of the resumed run: abandoned cleanly, exit 130, resumable.
    let resume = |epochs| train_args(&broken, epochs, &["--resume"]);
    let (status, stderr) = kill_when(&resume("3"), "epoch 3/3 [", "TERM");
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted in epoch 3"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(read_manifest(&broken)["completed_epochs"], 2);

    ok(&ember(&resume("3")));
    assert_same_history(&history(&broken), &reference);
    let acc = |run: &Path| read_manifest(run)["test_accuracy"].as_f64().unwrap();
    assert!((acc(&broken) - acc(&whole)).abs() < 1e-6);

    // Extending the finished run and killing it mid-way erases none of its results.
    let model = std::fs::read(broken.join("model.mpk")).unwrap();
    let (status, _) = kill_when(&resume("5"), "epoch 4/5 [", "INT");
    assert_eq!(status.code(), Some(130));
    let manifest = read_manifest(&broken);
    assert_eq!(manifest["test_accuracy"].as_f64(), Some(acc(&whole)));
    assert_eq!(manifest["tested_epoch"], 3);
    assert_eq!(manifest["completed_epochs"], 3);
    assert_eq!(std::fs::read(broken.join("model.mpk")).unwrap(), model);
    ok(&ember(&["eval", "--checkpoint", s(&broken)]));
    let figures = tmp.join("figures");
    ok(&ember(&["compare", s(&broken), "--out", s(&figures)]));
    ok(&ember(&resume("4")));
    assert_eq!(read_manifest(&broken)["tested_epoch"], 4);

    // Corrupt checkpoints: one error line naming the file; nothing in the run changes.
    let before = std::fs::read(broken.join("ember-run.json")).unwrap();
    let ckpt = broken.join("checkpoint/model-4.mpk");
    let good = std::fs::read(&ckpt).unwrap();
    std::fs::write(&ckpt, &good[..good.len() / 2]).unwrap();
    fails_with(&ember(&resume("5")), "checkpoint/model-4.mpk");
    let optim = broken.join("checkpoint/optim-4.mpk");
    std::fs::write(&ckpt, &good).unwrap();
    let mut flipped = std::fs::read(&optim).unwrap();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x40;
    std::fs::write(&optim, &flipped).unwrap();
    fails_with(&ember(&resume("5")), "corrupt");
    assert_eq!(
        std::fs::read(broken.join("ember-run.json")).unwrap(),
        before
    );
    std::fs::write(&optim, b"random bytes, not a record").unwrap();
    fails_with(&ember(&resume("5")), "checkpoint/optim-4.mpk");
    assert_eq!(
        std::fs::read(broken.join("ember-run.json")).unwrap(),
        before
    );

    // A changed setting is refused on resume, naming it; the run is untouched.
    for (flag, value) in [
        ("--lr", "0.01"),
        ("--batch-size", "50"),
        ("--seed", "7"),
        ("--train-limit", "900"),
        ("--test-limit", "100"),
        ("--backend", "wgpu"),
    ] {
        let args = with(&resume("5"), flag, value);
        fails_with(&ember(&args), &format!("it was started with {flag}"));
    }
    let data = tmp.join("idx");
    idx_dataset(&data, 100);
    let args = with(&resume("5"), "--data-dir", s(&data));
    fails_with(&ember(&args), "it was started with data");
    assert_eq!(
        std::fs::read(broken.join("ember-run.json")).unwrap(),
        before
    );

    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn a_killed_admm_run_resumes_from_its_bcr_state_to_the_uninterrupted_result() {
    let tmp = scratch("kill-admm");
    let jv = crate::common::jv_dir(&tmp);
    let (whole, broken) = (tmp.join("whole"), tmp.join("broken"));
    let bcr = ["--bcr", "4x:4x4", "--admm", "--retrain-epochs", "2"];
    let args = |out| crate::bcr_cli::gru_args(&jv, out, "5", &bcr);
    ok(&ember(&args(&whole)));
    let reference = history(&whole);
    assert_eq!(reference.len(), 5);
    // killed during ADMM (epochs 1-3): Z, U and ρ must come back from checkpoint/bcr-<e>.bin
    let (status, _) = kill_when(&args(&broken), "epoch 3/5 [", "KILL");
    assert!(!status.success());
    let done = read_manifest(&broken)["completed_epochs"].as_u64().unwrap();
    assert!((1..5).contains(&done), "{done} epochs done");
    assert!(broken.join(format!("checkpoint/bcr-{done}.bin")).is_file());
    let mut resume = args(&broken);
    resume.push("--resume");
    ok(&ember(&resume));
    assert_same_history(&history(&broken), &reference);
    // the same packed weights (the files differ in the source path they record)
    let kept = |run: &Path| -> Vec<(String, usize)> {
        let bytes = std::fs::read(run.join("model.bcr")).unwrap();
        let model = burn_bcr::file::PackedModel::from_bytes(&bytes).unwrap();
        model
            .params
            .iter()
            .filter_map(|(path, (_, stored))| match stored {
                burn_bcr::file::Stored::Packed(w) => Some((path.clone(), w.weights.len())),
                burn_bcr::file::Stored::Dense(_) => None,
            })
            .collect()
    };
    assert_eq!(kept(&broken), kept(&whole));
    assert_eq!(
        kept(&whole).len(),
        12,
        "every GRU gate weight, the classifier dense"
    );
    // a resume that asks for other BCR settings is refused, the run untouched
    let before = std::fs::read(broken.join("ember-run.json")).unwrap();
    let mut other = crate::bcr_cli::gru_args(&jv, &broken, "6", &["--bcr", "8x:4x4", "--admm"]);
    other.push("--resume");
    crate::common::fails_with(&ember(&other), "--bcr");
    assert_eq!(
        std::fs::read(broken.join("ember-run.json")).unwrap(),
        before
    );
}

#[test]
fn a_diverging_loss_stops_cleanly_or_is_plotted_as_gaps() {
    let tmp = scratch("nan");
    let stopped = tmp.join("stopped");
    let out = ember(&train_args(&stopped, "2", &["--lr", "1e30"]));
    fails_with(&out, "training loss became");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("epoch 1, batch"), "{stderr}");
    assert!(
        !stopped.exists(),
        "a run without a completed epoch leaves nothing"
    );

    let diverged = tmp.join("diverged");
    ok(&ember(&train_args(
        &diverged,
        "2",
        &["--lr", "1e30", "--on-nan", "continue"],
    )));
    assert!(diverged.join("curves.png").is_file());
    let csv = std::fs::read_to_string(diverged.join("metrics.csv")).unwrap();
    assert!(csv.contains("NaN"), "{csv}");
    // its weights are not numbers: evaluating them is refused, naming one
    let eval = ember(&["eval", "--checkpoint", s(&diverged)]);
    fails_with(&eval, "holds NaN or infinite values");
    fails_with(&eval, "its parameter ");
    let figures = tmp.join("figures");
    ok(&ember(&["compare", s(&diverged), "--out", s(&figures)]));
    assert!(figures.join("loss.png").is_file());
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn checkpoints_that_cannot_be_written_stop_the_run_and_leave_no_partial_file() {
    let tmp = scratch("fsize");
    let run = tmp.join("run");
    std::fs::create_dir_all(&tmp).unwrap();
    // LeNet-300-100's checkpoint is about 1 MiB; the limit lets the manifest through.
    let out = ember_file_limited(256, &train_args(&run, "1", &[]));
    fails_with(&out, "cannot write");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("model-1.mpk"), "{stderr}");
    let leftovers: Vec<_> = walk(&tmp)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "mpk") || s(p).contains(".ember-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    std::fs::remove_dir_all(&tmp).unwrap();
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[test]
fn eval_reads_the_file_given_and_checks_shapes() {
    let tmp = scratch("eval-files");
    let (five, three) = (tmp.join("five"), tmp.join("three"));
    let tiny = [
        "--train-limit",
        "64",
        "--test-limit",
        "32",
        "--epochs",
        "1",
        "--plain",
    ];
    let mut args = vec!["train", "--model", "lenet5", "--out", s(&five)];
    args.extend(tiny);
    ok(&ember(&args));
    let mut args = vec!["train", "--model", "lenet300", "--out", s(&three)];
    args.extend(tiny);
    ok(&ember(&args));

    // Garbage X.bin beside a good X.mpk is X.bin, not X.mpk.
    let loose = tmp.join("loose");
    std::fs::create_dir_all(&loose).unwrap();
    std::fs::copy(five.join("model.mpk"), loose.join("good.mpk")).unwrap();
    std::fs::write(loose.join("good.bin"), b"garbage").unwrap();
    fails_with(
        &ember(&[
            "eval",
            "--checkpoint",
            s(&loose.join("good.bin")),
            "--model",
            "lenet5",
        ]),
        "good.bin",
    );
    // A valid model under another extension loads.
    std::fs::copy(five.join("model.mpk"), loose.join("weights.bin")).unwrap();
    ok(&ember(&[
        "eval",
        "--checkpoint",
        s(&loose.join("weights.bin")),
        "--model",
        "lenet5",
    ]));
    // LeNet-5 weights as LeNet-300-100: refused at load, naming a parameter.
    let out = ember(&[
        "eval",
        "--checkpoint",
        s(&loose.join("good.mpk")),
        "--model",
        "lenet300",
    ]);
    fails_with(&out, "cannot load it as lenet300");
    // A run's model.mpk whose bytes changed since the run wrote it is refused as corrupt.
    let model = three.join("model.mpk");
    let mut bytes = std::fs::read(&model).unwrap();
    let last = bytes.len() - 8;
    bytes[last] ^= 1;
    std::fs::write(&model, &bytes).unwrap();
    fails_with(&ember(&["eval", "--checkpoint", s(&three)]), "corrupt");
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn absurd_numbers_are_refused_up_front_and_leave_no_run_directory() {
    let tmp = scratch("absurd");
    let run = tmp.join("run");
    let cases: [(&[&str], &str); 8] = [
        (
            &["--batch-size", "18446744073709551615"],
            "larger than the 1000 training images",
        ),
        (
            &["--batch-size", "1000000000"],
            "larger than the 1000 training images",
        ),
        (
            &["--sparse-act", "0.5:18446744073709551615"],
            "block size must be at most",
        ),
        (&["--test-limit", "0"], "--test-limit must be at least 1"),
        (
            &["--keep-checkpoints", "0"],
            "keep at least the last epoch's checkpoint",
        ),
        (
            &["--keep-checkpoints", "some"],
            "\"some\" is not a number of epochs or \"all\"",
        ),
        (&["--sparse-act", "0.5:1000"], "prunes nothing in any layer"),
        (
            &[
                "--sparse-act",
                "0.5:4",
                "--sparse-act-layer",
                "999x120=0.5:4",
            ],
            "names no linear layer of the model (its layers, IN×OUT: 784x300, 300x100, 100x10)",
        ),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["train", "--out", s(&run)];
        args.extend(SMALL);
        for pair in extra.chunks(2) {
            args = with(&args, pair[0], pair[1]);
        }
        fails_with(&ember(&args), needle);
        assert!(!run.exists(), "{extra:?} left a run directory");
    }
    for (flag, value) in [
        ("--batch", "18446744073709551615"),
        ("--classes", "18446744073709551615"),
        ("--image-size", "18446744073709551600"),
        ("--batch", "100000000"),
    ] {
        fails_with(
            &ember(&["memory", "--model", "resmlp-small", flag, value]),
            "would have more than",
        );
    }
    // every tensor within 2³¹ elements, the step's MLP activations alone 188 GiB: refused
    // before anything is allocated
    fails_with(
        &ember(&[
            "memory",
            "--model",
            "resmlp-s12",
            "--image-size",
            "224",
            "--batch",
            "7000",
        ]),
        "the MLP activations a training step keeps would need 188.4 GiB",
    );
    // memory --out into a missing directory is refused before measuring anything.
    let out = ember(&["memory", "--out", s(&tmp.join("missing/table.md"))]);
    fails_with(&out, "does not exist");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("measuring"));
}

#[test]
fn sparse_act_that_prunes_nothing_somewhere_says_so() {
    let tmp = scratch("idle-layers");
    let run = tmp.join("run");
    let mut args = vec!["train", "--epochs", "1", "--out", s(&run)];
    args.extend(SMALL);
    // 0.5:200: one block of the 100-input layer, none of it dropped; `×` as the help writes it.
    args.extend([
        "--sparse-act",
        "0.5:200",
        "--sparse-act-layer",
        "784×300=0.5:16",
    ]);
    let out = ember(&args);
    ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: --sparse-act: layer 100x10: 0.5:200 prunes nothing"),
        "{stderr}"
    );
    assert!(!stderr.contains("layer 300x100"), "{stderr}");
    assert_eq!(
        read_manifest(&run)["sparse_act"]["overrides"]["784x300"]["block"],
        16
    );

    // --overwrite removes what Ember wrote and nothing else.
    std::fs::write(run.join("notes.txt"), b"mine").unwrap();
    let mut again = vec!["train", "--epochs", "1", "--overwrite", "--out", s(&run)];
    again.extend(SMALL);
    ok(&ember(&again));
    assert_eq!(std::fs::read(run.join("notes.txt")).unwrap(), b"mine");
    assert!(read_manifest(&run)["sparse_act"]["default"].is_null());

    // Two dense baselines are refused, as compare's help says.
    fails_with(
        &ember(&["compare", s(&run), s(&run), "--out", s(&tmp.join("fig"))]),
        "at most one dense baseline",
    );
    assert!(!tmp.join("fig").exists());
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn no_vulkan_driver_is_an_error_before_any_run_directory() {
    let tmp = scratch("no-vulkan");
    let run = tmp.join("run");
    let hidden = [
        ("VK_ICD_FILENAMES", "/nonexistent/icd.json"),
        ("VK_DRIVER_FILES", "/nonexistent/icd.json"),
    ];
    let mut args = vec!["train", "--backend", "wgpu", "--out", s(&run)];
    args.extend(SMALL);
    fails_with(&ember_with(&args, &hidden), "backend unavailable");
    assert!(!run.exists());
    // Checked before the checkpoint is even looked for.
    fails_with(
        &ember_with(
            &[
                "eval",
                "--backend",
                "wgpu",
                "--checkpoint",
                s(&run),
                "--model",
                "lenet5",
            ],
            &hidden,
        ),
        "backend unavailable",
    );
    fails_with(
        &ember_with(
            &[
                "memory",
                "--backend",
                "wgpu",
                "--model",
                "resmlp-small",
                "--image-size",
                "8",
            ],
            &hidden,
        ),
        "backend unavailable",
    );
}

#[test]
fn wgpu_runs_print_no_xdg_runtime_dir_noise() {
    let tmp = scratch("xdg");
    let run = tmp.join("run");
    let out = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args([
            "train",
            "--backend",
            "wgpu",
            "--model",
            "lenet300",
            "--epochs",
            "1",
            "--train-limit",
            "64",
            "--test-limit",
            "32",
            "--plain",
            "--out",
            s(&run),
        ])
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("XDG_RUNTIME_DIR"), "{stderr}");
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn an_interrupted_prune_exits_130_and_its_rerun_resumes_or_starts_clean() {
    let tmp = scratch("prune-signal");
    let dense = tmp.join("dense");
    ok(&ember(&train_args(&dense, "1", &[])));
    let pruned = tmp.join("pruned");
    let prune = |extra: &[&'static str]| {
        let mut args = vec![
            "prune",
            "--bcr",
            "4x:4x4",
            "--epochs",
            "3",
            "--checkpoint",
            s(&dense),
            "--out",
            s(&pruned),
        ];
        args.extend_from_slice(extra);
        args
    };
    // SIGTERM in the retraining's second epoch: as `train` takes it
    let (status, stderr) = kill_when(&prune(&[]), "epoch 2/3 [", "TERM");
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let done = read_manifest(&pruned)["completed_epochs"].as_u64().unwrap();
    assert!((1..=2).contains(&done), "{done} epochs kept");
    // the same command says what to pass, and prune takes it
    fails_with(&ember(&prune(&[])), "--resume");
    ok(&ember(&prune(&["--resume"])));
    assert_eq!(read_manifest(&pruned)["completed_epochs"], 3);
    assert!(pruned.join("model.bcr").is_file());
    // --resume and --overwrite are BCR's: a HiNM prune writes its outputs at once
    let hinm = ember(&[
        "prune",
        "--hinm",
        "75:v4",
        "--resume",
        "--checkpoint",
        s(&dense),
        "--out",
        s(&tmp.join("hinm")),
    ]);
    fails_with(&hinm, "continue or replace a --bcr run");
    assert!(!tmp.join("hinm").exists());
}

#[test]
fn a_sequence_past_the_cap_is_refused_and_a_batch_that_outlasts_a_signal_ends_in_bounded_time() {
    let tmp = scratch("long-sequence");
    let jv = crate::common::jv_dir(&tmp);
    // three series of 20,000 frames (every channel its first value, repeated): one batch of 3
    // that takes over 10 minutes on 2 cores (burn-autodiff's graph registration grows with the
    // sequence: the step is quadratic in its length), far past the 20 s grace period
    let train = std::fs::read_to_string(jv.join("JapaneseVowels_TRAIN.ts")).unwrap();
    let (head, data) = train.split_once("@data\n").unwrap();
    let first = data.lines().next().unwrap();
    let (channels, label) = first.rsplit_once(':').unwrap();
    let long: Vec<String> = channels
        .split(':')
        .map(|c| vec![c.split(',').next().unwrap(); 20_000].join(","))
        .collect();
    let series = format!("{}:{label}\n", long.join(":"));
    std::fs::write(
        jv.join("JapaneseVowels_TRAIN.ts"),
        format!("{head}@data\n{series}{series}{series}"),
    )
    .unwrap();
    let out = tmp.join("run");
    let args = |extra: &[&'static str]| crate::bcr_cli::gru_args(&jv, &out, "1", extra);
    // the default cap refuses the series by its place in the file
    fails_with(
        &ember(&args(&[])),
        "JapaneseVowels_TRAIN.ts: series 1 has 20000 frames, more than the 1000",
    );
    assert!(!out.exists());
    // allowed, its one batch outlasts the signal, sent 3 s into the epoch (a signal before the
    // first batch ends the run cleanly instead): the process ends within the grace period
    let started = std::time::Instant::now();
    let (status, stderr) = kill_after(
        &args(&["--max-frames", "20000"]),
        "training gru",
        std::time::Duration::from_secs(3),
        "TERM",
    );
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("did not end within 20 s"), "{stderr}");
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
}
