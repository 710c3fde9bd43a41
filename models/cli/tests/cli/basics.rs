//! The `ember` binary end to end: a short real training run, resume, evaluation, and every bad
//! input it handles (one clear error line, a non-zero exit, no panic, nothing overwritten).

use crate::common::{ember, fails_with, ok, read_manifest, s, scratch};
use std::path::Path;

const TINY: [&str; 6] = [
    "--train-limit",
    "2000",
    "--test-limit",
    "500",
    "--batch-size",
    "32",
];

#[test]
fn unknown_model_and_backend_are_rejected() {
    fails_with(
        &ember(&["train", "--model", "resnet9"]),
        "invalid value 'resnet9'",
    );
    fails_with(
        &ember(&["train", "--backend", "tpu"]),
        "invalid value 'tpu'",
    );
    fails_with(
        &ember(&["train", "--epochs", "0", "--out", "/nonexistent/x"]),
        "--epochs must be at least 1",
    );
    let bad: [(&[&str], &str); 19] = [
        (&["train", "--optimizer", "lion"], "invalid value 'lion'"),
        (&["train", "--schedule", "step"], "invalid value 'step'"),
        (
            &["train", "--momentum", "1"],
            "--momentum must be in [0, 1)",
        ),
        (
            &["train", "--weight-decay=-0.1"],
            "--weight-decay must be a number ≥ 0",
        ),
        (
            &["train", "--epochs", "2", "--warmup-epochs", "2"],
            "--warmup-epochs 2 leaves none of the 2 epochs",
        ),
        (
            &["train", "--time-limit", "0"],
            "--time-limit must be a positive number of seconds",
        ),
        (
            &["train", "--conv", "winograd"],
            "unknown convolution route `winograd` (choose gemm, im2col, burn)",
        ),
        (
            &["eval", "--conv", "direct", "--checkpoint"],
            "unknown convolution route `direct`",
        ),
        (
            &["train", "--matmul", "cublas"],
            "invalid value 'cublas' for '--matmul <MATMUL>'",
        ),
        (
            &["train", "--batch-size", "0"],
            "--batch-size must be at least 1",
        ),
        (&["train", "--lr=-1"], "--lr must be a positive number"),
        (&["train", "--lr", "NaN"], "--lr must be a positive number"),
        (
            &["train", "--lr", "1e-300"],
            "--lr 1e-300 is outside what an f32 holds",
        ),
        (&["train", "--lr", "1e300"], "is outside what an f32 holds"),
        (&["train", "--lr", "fast"], "invalid value 'fast'"),
        (
            &["train", "--train-limit", "0"],
            "--train-limit must be at least 1",
        ),
        (&["train", "--resume"], "does not exist"),
        (&["train", "--resume", "--overwrite"], "cannot be used with"),
        (
            &["eval", "--batch-size", "0", "--checkpoint"],
            "--batch-size must be at least 1",
        ),
    ];
    for (args, needle) in bad {
        let mut args = args.to_vec();
        if args[0] == "train" {
            args.push("--out");
        }
        args.push("/nonexistent/x");
        fails_with(&ember(&args), needle);
    }
    assert!(!Path::new("/nonexistent/x").exists());
}

#[cfg(not(feature = "cuda"))]
#[test]
fn cuda_without_the_feature_says_how_to_get_it() {
    let out = scratch("cuda");
    fails_with(
        &ember(&["train", "--backend", "cuda", "--out", s(&out)]),
        "--features cuda",
    );
}

fn write_gz(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut e =
        flate2::write::GzEncoder::new(std::fs::File::create(path).unwrap(), Default::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap();
}

/// A directory of idx files; `images` replaces the training images' bytes.
fn dataset(dir: &Path, images: Vec<u8>) {
    std::fs::create_dir_all(dir).unwrap();
    let good_images = |n: u32| {
        let mut v = vec![0, 0, 8, 3];
        v.extend(n.to_be_bytes());
        v.extend(28u32.to_be_bytes());
        v.extend(28u32.to_be_bytes());
        v.extend(vec![7u8; n as usize * 784]);
        v
    };
    let labels = |n: u32| {
        let mut v = vec![0, 0, 8, 1];
        v.extend(n.to_be_bytes());
        v.extend((0..n).map(|i| (i % 10) as u8));
        v
    };
    write_gz(&dir.join("train-images-idx3-ubyte.gz"), &images);
    write_gz(&dir.join("train-labels-idx1-ubyte.gz"), &labels(4));
    std::fs::write(dir.join("t10k-images-idx3-ubyte"), good_images(2)).unwrap();
    std::fs::write(dir.join("t10k-labels-idx1-ubyte"), labels(2)).unwrap();
}

#[test]
fn missing_and_malformed_dataset_files_are_reported() {
    let out = scratch("bad-data-out");
    let data = scratch("empty-data");
    std::fs::create_dir_all(&data).unwrap();
    fails_with(
        &ember(&["train", "--data-dir", s(&data), "--out", s(&out)]),
        "dataset file not found",
    );
    assert!(
        !out.exists(),
        "a failed start must not create the run directory"
    );

    fails_with(
        &ember(&[
            "train",
            "--data-dir",
            "/nonexistent/mnist",
            "--out",
            s(&out),
        ]),
        "not a directory",
    );

    let mut wrong_magic = vec![0, 0, 8, 1];
    wrong_magic.extend(4u32.to_be_bytes());
    dataset(&data, wrong_magic);
    fails_with(
        &ember(&["train", "--data-dir", s(&data), "--out", s(&out)]),
        "magic number",
    );

    let mut truncated = vec![0, 0, 8, 3];
    for d in [4u32, 28, 28] {
        truncated.extend(d.to_be_bytes());
    }
    truncated.extend(vec![0u8; 3 * 784]);
    dataset(&data, truncated);
    fails_with(
        &ember(&["train", "--data-dir", s(&data), "--out", s(&out)]),
        "truncated",
    );

    std::fs::write(
        data.join("train-images-idx3-ubyte.gz"),
        b"\x1f\x8bnot really gzip",
    )
    .unwrap();
    fails_with(
        &ember(&["train", "--data-dir", s(&data), "--out", s(&out)]),
        "cannot read",
    );
    assert!(!out.exists());
    std::fs::remove_dir_all(&data).unwrap();
}

#[test]
fn a_time_limit_stops_sgd_at_an_epoch_with_status_75_and_resume_finishes_it() {
    let run = scratch("time-limit");
    let mut args = vec![
        "train",
        "--model",
        "lenet300",
        "--epochs",
        "2",
        "--optimizer",
        "sgd",
        "--lr",
        "0.05",
        "--weight-decay",
        "5e-4",
        "--schedule",
        "cosine",
        "--warmup-epochs",
        "1",
        "--plain",
        "--train-limit",
        "256",
        "--test-limit",
        "64",
        "--out",
        s(&run),
    ];
    let mut limited = args.clone();
    limited.extend(["--time-limit", "0.001"]);
    let out = ember(&limited);
    fails_with(&out, "stopped before epoch 2 of 2");
    fails_with(&out, "continue with --resume");
    assert_eq!(out.status.code(), Some(75));
    let manifest = read_manifest(&run);
    assert_eq!(manifest["completed_epochs"], 1);
    assert_eq!(manifest["optimizer"]["kind"], "sgd");
    assert_eq!(manifest["optimizer"]["schedule"], "cosine");
    args.push("--resume");
    ok(&ember(&args));
    assert_eq!(read_manifest(&run)["completed_epochs"], 2);
    std::fs::remove_dir_all(&run).unwrap();
}

#[test]
fn trains_resumes_evaluates_and_protects_runs() {
    let run = scratch("run");
    let run_s = s(&run);

    // A short real run: LeNet-300-100 on 2,000 embedded MNIST images learns.
    let mut args = vec![
        "train", "--model", "lenet300", "--epochs", "1", "--plain", "--out", run_s,
    ];
    args.extend(TINY);
    let out = ember(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "ember-run.json",
        "metrics.csv",
        "curves.png",
        "model.mpk",
        "checkpoint/model-1.mpk",
    ] {
        assert!(run.join(f).is_file(), "{f} missing");
    }
    let manifest = read_manifest(&run);
    let acc = manifest["test_accuracy"].as_f64().unwrap();
    assert!(
        acc > 80.0,
        "LeNet-300-100 after one epoch on 2000 images: {acc}%"
    );

    // The same --out again is refused, and the run is untouched.
    let before = std::fs::read(run.join("ember-run.json")).unwrap();
    fails_with(&ember(&args), "already holds a run");
    assert_eq!(std::fs::read(run.join("ember-run.json")).unwrap(), before);

    // Resume continues to epoch 2 from the checkpoint.
    let mut resume = vec![
        "train", "--model", "lenet300", "--epochs", "2", "--plain", "--resume", "--out", run_s,
    ];
    resume.extend(TINY);
    let out = ember(&resume);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest = read_manifest(&run);
    assert_eq!(manifest["completed_epochs"], 2);
    assert_eq!(manifest["epoch_seconds"].as_array().unwrap().len(), 2);
    let csv = std::fs::read_to_string(run.join("metrics.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "header + 2 epochs: {csv}");

    // Resuming with another model, another convolution route or matmul kernel, or past the
    // last epoch, is refused.
    let mut other = resume.clone();
    other[2] = "lenet5";
    fails_with(&ember(&other), "not lenet5");
    let mut other = resume.clone();
    other[4] = "3";
    other.extend(["--conv", "burn"]);
    fails_with(&ember(&other), "--conv gemm, not burn");
    let mut other = resume.clone();
    other[4] = "3";
    other.extend(["--matmul", "simple-unit"]);
    fails_with(&ember(&other), "--matmul burn, not simple-unit");
    fails_with(&ember(&resume), "already completed 2 epochs");

    // Evaluation of the run, of its checkpoint file, and of another model's checkpoint.
    let out = ember(&["eval", "--checkpoint", run_s]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("test accuracy"));
    let ckpt = run.join("checkpoint/model-2.mpk");
    assert!(ember(&["eval", "--checkpoint", s(&ckpt)]).status.success());
    fails_with(
        &ember(&["eval", "--checkpoint", run_s, "--model", "lenet5"]),
        "holds a lenet300 model",
    );
    let loose = scratch("loose");
    std::fs::create_dir_all(&loose).unwrap();
    std::fs::copy(run.join("model.mpk"), loose.join("weights.mpk")).unwrap();
    let loose_file = loose.join("weights.mpk");
    fails_with(
        &ember(&["eval", "--checkpoint", s(&loose_file)]),
        "pass --model",
    );
    fails_with(
        &ember(&["eval", "--checkpoint", s(&loose_file), "--model", "lenet5"]),
        "cannot load it as lenet5",
    );
    fails_with(
        &ember(&["eval", "--checkpoint", "/nonexistent/run"]),
        "no such file or directory",
    );
    let empty = scratch("empty-run");
    std::fs::create_dir_all(&empty).unwrap();
    fails_with(
        &ember(&["eval", "--checkpoint", s(&empty), "--model", "lenet5"]),
        "no model.mpk",
    );

    // A corrupt manifest is reported, not trusted, and left as it was.
    let manifest = run.join("ember-run.json");
    let good = std::fs::read(&manifest).unwrap();
    std::fs::write(&manifest, b"{ not json").unwrap();
    fails_with(&ember(&resume), "malformed file");
    // Evaluation names the corrupt manifest instead of defaulting to MNIST, for the run
    // directory and for a checkpoint file inside it.
    let out = ember(&["eval", "--checkpoint", run_s]);
    fails_with(&out, "malformed file");
    assert!(String::from_utf8_lossy(&out.stderr).contains("ember-run.json"));
    fails_with(
        &ember(&["eval", "--checkpoint", s(&ckpt)]),
        "malformed file",
    );
    assert_eq!(std::fs::read(&manifest).unwrap(), b"{ not json");
    std::fs::write(&manifest, good).unwrap();
    std::fs::remove_dir_all(&empty).unwrap();

    // A directory that is not an Ember run is never written to, even with --overwrite.
    std::fs::write(loose.join("notes.txt"), b"mine").unwrap();
    fails_with(
        &ember(&["train", "--out", s(&loose), "--overwrite"]),
        "is not an Ember run",
    );
    assert_eq!(std::fs::read(loose.join("notes.txt")).unwrap(), b"mine");

    std::fs::remove_dir_all(&run).unwrap();
    std::fs::remove_dir_all(&loose).unwrap();
}

#[test]
fn approximate_training_cross_format_evaluation_and_lookup_tables() {
    let run = scratch("approx-run");
    let run_s = s(&run);
    let mut args = vec![
        "train",
        "--model",
        "lenet300",
        "--epochs",
        "1",
        "--plain",
        "--multiplier",
        "mbm7",
        "--out",
        run_s,
    ];
    args.extend(TINY);
    let out = ember(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest = read_manifest(&run);
    assert_eq!(manifest["multiplier"], "mbm7");
    let acc = manifest["test_accuracy"].as_f64().unwrap();
    assert!(
        acc > 75.0,
        "LeNet-300-100 with MBM (AFM16) after one epoch on 2000 images: {acc}%"
    );

    // Resuming under another multiplier is refused; evaluating under one is the point.
    let mut resume = args.clone();
    resume[4] = "2";
    resume[7] = "bf16";
    resume.push("--resume");
    fails_with(&ember(&resume), "started with --multiplier mbm7, not bf16");
    for mul in ["bf16", "mitchell7", "native", "afm32"] {
        let out = ember(&[
            "eval",
            "--checkpoint",
            run_s,
            "--multiplier",
            mul,
            "--batch-size",
            "500",
        ]);
        assert!(
            out.status.success(),
            "{mul}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("test accuracy"));
    }

    // Bad multipliers: unknown, m out of range, a table that cannot be read or has the wrong size.
    fails_with(
        &ember(&["train", "--multiplier", "wallace7"]),
        "unknown multiplier `wallace7`",
    );
    fails_with(&ember(&["train", "--multiplier", "mbm12"]), "m = 12");
    fails_with(
        &ember(&["eval", "--checkpoint", run_s, "--multiplier", "acc0"]),
        "m = 0",
    );
    let tables = scratch("tables");
    std::fs::create_dir_all(&tables).unwrap();
    let short = tables.join("MINE_7.bin");
    std::fs::write(&short, vec![0u8; 1000]).unwrap();
    fails_with(
        &ember(&["eval", "--checkpoint", run_s, "--multiplier", s(&short)]),
        "1000 bytes",
    );
    let missing = tables.join("NONE_3.bin");
    fails_with(
        &ember(&["train", "--multiplier", s(&missing)]),
        "NONE_3.bin",
    );
    fails_with(
        &ember(&["train", "--multiplier", s(&tables.join("MINE.bin"))]),
        "NAME_M.bin",
    );

    // ember lut: generate, refuse to overwrite, inspect, convert, and bad requests.
    let table = tables.join("MBM_5.bin");
    let out = ember(&["lut", "generate", "mbm5", "--out", s(&table)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::metadata(&table).unwrap().len(), 1 << 10);
    let bytes = std::fs::read(&table).unwrap();
    fails_with(
        &ember(&["lut", "generate", "mitchell5", "--out", s(&table)]),
        "already exists",
    );
    assert_eq!(std::fs::read(&table).unwrap(), bytes, "untouched");
    let out = ember(&["lut", "inspect", s(&table)]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("m = 5"),
        "{out:?}"
    );
    let wide = tables.join("wide.lut");
    assert!(
        ember(&["lut", "convert", s(&table), s(&wide)])
            .status
            .success()
    );
    let back = tables.join("BACK_5.bin");
    assert!(
        ember(&["lut", "convert", s(&wide), s(&back)])
            .status
            .success()
    );
    assert_eq!(
        std::fs::read(&back).unwrap(),
        bytes,
        "raw → .lut → raw is lossless"
    );
    let trained = ember(&[
        "eval",
        "--checkpoint",
        run_s,
        "--multiplier",
        s(&back),
        "--batch-size",
        "500",
    ]);
    assert!(
        trained.status.success(),
        "a converted table is a multiplier"
    );
    fails_with(&ember(&["lut", "generate", "fp32"]), "has no lookup table");
    fails_with(&ember(&["lut", "generate", "acc12"]), "m = 12");
    fails_with(
        &ember(&["lut", "convert", s(&wide), s(&tables.join("X_9.bin"))]),
        "m = 9",
    );
    fails_with(&ember(&["lut", "inspect", s(&short)]), "1000 bytes");
    let png = tables.join("err.png");
    assert!(
        ember(&["lut", "inspect", "mbm3", "--plot", s(&png)])
            .status
            .success()
    );
    assert!(png.is_file());
    fails_with(
        &ember(&["lut", "inspect", "mbm3", "--plot", s(&png)]),
        "already exists",
    );

    std::fs::remove_dir_all(&run).unwrap();
    std::fs::remove_dir_all(&tables).unwrap();
}

#[test]
fn policy_show_lists_module_paths_shapes_and_linear_keys() {
    let out = ok(&ember(&["policy", "show", "--model", "lenet5"]));
    assert!(
        out.contains("lenet5 for 28×28×1 images, 10 classes: 5 modules"),
        "{out}"
    );
    let line = |path: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(path))
            .unwrap_or_else(|| panic!("no {path}: {out}"))
            .to_string()
    };
    assert!(
        line("conv1").contains("weight [6, 1, 5, 5], bias [6]"),
        "{out}"
    );
    assert!(line("fc1").contains("400x120"), "{out}");
    assert!(line("fc3").contains("84x10"), "{out}");
    // Nested paths as Burn names them, for the CIFAR configuration of a ResMLP.
    let out = ok(&ember(&[
        "policy",
        "show",
        "--model",
        "resmlp-small",
        "--dataset",
        "cifar10",
    ]));
    assert!(out.contains("for 32×32×3 images"), "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("blocks.3.")),
        "no fourth block: {out}"
    );
    fails_with(
        &ember(&["policy", "show", "--model", "lenet7"]),
        "invalid value 'lenet7'",
    );
}

#[test]
fn convolutions_run_on_the_gemm_route_unless_told_and_the_report_says_so() {
    let run = scratch("conv-route");
    let run_s = s(&run);
    let mut args = vec![
        "train", "--model", "lenet5", "--epochs", "1", "--plain", "--out", run_s,
    ];
    args.extend(TINY);
    let out = ember(&args);
    ok(&out);
    assert_eq!(read_manifest(&run)["conv"], "gemm");
    let md = std::fs::read_to_string(run.join("effects.md")).unwrap();
    for layer in ["conv1", "conv2"] {
        assert!(
            md.contains(&format!(
                "| {layer} | native | native (host im2col + GEMM) |"
            )),
            "{md}"
        );
    }
    assert!(md.contains("Fallbacks: none"), "{md}");
    // Burn's own kernels on request: the same model evaluates to the same accuracy
    let eval = |conv: &str| {
        let out = ember(&["eval", "--checkpoint", run_s, "--conv", conv]);
        ok(&out);
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        (stdout, stderr)
    };
    let (gemm, _) = eval("gemm");
    let (burn, report) = eval("burn");
    assert!(
        report.contains("| conv1 | native | native | – |"),
        "{report}"
    );
    // "test accuracy 82.80% (...)": within one image of each other (the two sum in different
    // orders, so a logit tie may break the other way)
    let accuracy = |text: &str| -> f64 {
        let line = text.lines().find(|l| l.contains("test accuracy")).unwrap();
        line.split_whitespace()
            .nth(2)
            .unwrap()
            .trim_end_matches('%')
            .parse()
            .unwrap()
    };
    let (a, b) = (accuracy(&gemm), accuracy(&burn));
    assert!((a - b).abs() <= 0.21, "{gemm}\n{burn}");
}
