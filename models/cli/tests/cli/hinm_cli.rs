//! `ember prune --hinm` and `ember eval` of a packed model end to end on LeNet-5 (embedded
//! MNIST subset), and every bad input of that path: one clear error line, a non-zero exit, and
//! nothing written.

use crate::common::{ember, fails_with, ok, s, scratch, small_train_args};
use std::path::{Path, PathBuf};

/// `ember train` of `model` for one epoch on 300 embedded MNIST images into `out`, with `extra`.
fn train(model: &str, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = small_train_args(model, out);
    args.extend(extra);
    ember(&args)
}

/// A LeNet-5 run trained for one epoch on 300 embedded MNIST images.
fn trained(dir: &Path) -> PathBuf {
    let run = dir.join("run");
    ok(&train("lenet5", &run, &[]));
    run
}

fn prune_args<'a>(run: &'a Path, out: &'a Path, level: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "prune",
        "--hinm",
        level,
        "--checkpoint",
        s(run),
        "--out",
        s(out),
    ];
    args.extend(extra);
    args
}

#[test]
fn a_pruned_model_is_written_packed_and_evaluates_through_the_sparse_product() {
    let dir = scratch("hinm-prune");
    let run = trained(&dir);
    let out = dir.join("pruned");
    let table = ok(&ember(&prune_args(&run, &out, "75:v4", &["--seed", "3"])));
    // first and last contraction layers stay dense; the others report the three choices
    assert!(
        table.contains("| conv1 | [6, 1, 5, 5] | dense |"),
        "{table}"
    );
    assert!(table.contains("| fc3 | [84, 10] | dense |"), "{table}");
    for layer in ["conv2", "fc1", "fc2"] {
        assert!(table.contains(&format!("| {layer} |")), "{table}");
    }
    assert!(table.contains("File sizes: dense model"), "{table}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("hinm.json")).unwrap()).unwrap();
    let dense = report["dense_bytes"].as_u64().unwrap();
    let packed = report["packed_bytes"].as_u64().unwrap();
    assert!(packed < dense, "packed {packed} ≥ dense {dense}");
    for layer in report["layers"].as_array().unwrap() {
        if let Some(kept) = layer["retained"].as_array() {
            let [none, ovw, gyro] = [0, 1, 2].map(|i| kept[i].as_f64().unwrap());
            assert!(gyro >= none && ovw > 0.0, "{layer}");
        }
    }
    assert!(out.join("hinm.md").is_file());

    let eval = ember(&["eval", "--checkpoint", s(&out)]);
    let stdout = ok(&eval);
    assert!(stdout.contains("test accuracy"), "{stdout}");
    let stderr = String::from_utf8_lossy(&eval.stderr);
    assert!(
        stderr.contains("| conv2 | native | native (hinm host) |"),
        "{stderr}"
    );
    assert!(
        stderr.contains("| conv1 | native | native (host im2col + GEMM) |"),
        "{stderr}"
    );
    assert!(!stderr.contains("densified"), "{stderr}");
    // the same on wgpu runs the kernel
    let eval = ember(&["eval", "--checkpoint", s(&out), "--backend", "wgpu"]);
    ok(&eval);
    let stderr = String::from_utf8_lossy(&eval.stderr);
    assert!(
        stderr.contains("| fc1 | native | native (hinm kernel) |"),
        "{stderr}"
    );
}

#[test]
fn every_bad_prune_or_packed_eval_is_one_error_and_writes_nothing() {
    let dir = scratch("hinm-bad");
    let run = trained(&dir);
    let out = dir.join("never");
    let policy = dir.join("conv1.toml");
    std::fs::write(
        &policy,
        "[[layer]]\npath = \"conv1\"\nhinm = \"93.75:v6\"\n",
    )
    .unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (prune_args(&run, &out, "75:v0", &[]), "at least 4 rows"),
        (prune_args(&run, &out, "80:v4", &[]), "not a HiNM level"),
        (prune_args(&run, &out, "75:64", &[]), "TOTAL:vV"),
        (
            prune_args(&run, &out, "75:v64", &[]),
            "divide the 16 output rows",
        ),
        (
            prune_args(&run, &out, "75:v4", &["--perm", "best"]),
            "unknown permutation",
        ),
        (
            prune_args(&run, &out, "75:v4", &["--policy", s(&policy)]),
            "layer conv1",
        ),
    ];
    for (args, says) in &cases {
        fails_with(&ember(args), says);
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
    // nnz_vec = 0 names the cause
    fails_with(
        &ember(&prune_args(&run, &out, "75:v4", &["--policy", s(&policy)])),
        "keeps no group of 4",
    );

    // a packed model cannot be pruned again, nor evaluated as another model, nor read corrupt
    let packed = dir.join("packed");
    ok(&ember(&prune_args(&run, &packed, "75:v4", &[])));
    let again = dir.join("again");
    fails_with(
        &ember(&prune_args(&packed, &again, "75:v4", &[])),
        "already a packed HiNM model",
    );
    assert!(!again.exists());
    fails_with(
        &ember(&["eval", "--checkpoint", s(&packed), "--model", "lenet300"]),
        "holds a lenet5 model, not lenet300",
    );
    fails_with(
        &ember(&["eval", "--checkpoint", s(&packed), "--test-limit", "0"]),
        "--test-limit must be at least 1",
    );
    let file = packed.join("model.hinm");
    let mut bytes = std::fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();
    fails_with(&ember(&["eval", "--checkpoint", s(&packed)]), "corrupt");
    // a lone model file (no run manifest) cannot be pruned
    let lone = dir.join("lone");
    std::fs::create_dir_all(&lone).unwrap();
    std::fs::copy(run.join("model.mpk"), lone.join("model.mpk")).unwrap();
    fails_with(
        &ember(&prune_args(&lone.join("model.mpk"), &out, "75:v4", &[])),
        "no ember-run.json beside it",
    );
    assert!(!out.exists());
    // packed files that are intact but do not fit: an unknown model, a missing parameter
    let good = dir.join("good");
    ok(&ember(&prune_args(&run, &good, "75:v4", &[])));
    let read = || {
        let bytes = std::fs::read(good.join("model.hinm")).unwrap();
        burn_hinm::file::PackedModel::from_bytes(&bytes).unwrap()
    };
    let write = |name: &str, m: &burn_hinm::file::PackedModel| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("model.hinm"), m.to_bytes()).unwrap();
        d
    };
    let mut unknown = read();
    unknown.model = "resnet99".into();
    fails_with(
        &ember(&["eval", "--checkpoint", s(&write("unknown", &unknown))]),
        "a model this build does not know",
    );
    let mut missing = read();
    missing.params.remove("fc3.bias");
    fails_with(
        &ember(&["eval", "--checkpoint", s(&write("missing", &missing))]),
        "it has no parameter fc3.bias",
    );
    let mut reshaped = read();
    reshaped.params.get_mut("fc3.bias").unwrap().0 = vec![5, 2];
    fails_with(
        &ember(&["eval", "--checkpoint", s(&write("reshaped", &reshaped))]),
        "fc3.bias is [5, 2] in it, [10] in the model",
    );

    // an existing, non-empty output directory is refused and left as it was
    fails_with(
        &ember(&prune_args(&run, &packed, "75:v4", &[])),
        "exists and is not empty",
    );
    assert_eq!(std::fs::read(&file).unwrap(), bytes);
}

#[test]
fn sparse_fine_tuning_keeps_the_masks_and_writes_the_packed_model() {
    let dir = scratch("hinm-tune");
    let run = trained(&dir);
    let tuned = dir.join("tuned");
    let tune = ["--hinm", "75:v4", "--seed", "5", "--from", s(&run)];
    ok(&train("lenet5", &tuned, &tune));
    assert!(tuned.join("model.hinm").is_file() && tuned.join("model.mpk").is_file());
    // the dense fine-tuned model and its packed form classify alike
    let dense = ok(&ember(&[
        "eval",
        "--checkpoint",
        s(&tuned.join("model.mpk")),
    ]));
    let packed = ok(&ember(&["eval", "--checkpoint", s(&tuned)]));
    let accuracy = |out: &str| -> f64 {
        out.split_whitespace()
            .nth(2)
            .unwrap()
            .trim_end_matches('%')
            .parse()
            .unwrap()
    };
    assert!(
        (accuracy(&dense) - accuracy(&packed)).abs() <= 1.0,
        "{dense} vs {packed}"
    );
    // the packed file holds the middle layers packed (first and last dense by default)
    let bytes = std::fs::read(tuned.join("model.hinm")).unwrap();
    let params = burn_hinm::file::PackedModel::from_bytes(&bytes).unwrap();
    let packed_layers: Vec<&String> = params
        .params
        .iter()
        .filter(|(_, (_, s))| matches!(s, burn_hinm::file::Stored::Packed(_)))
        .map(|(p, _)| p)
        .collect();
    assert_eq!(packed_layers, ["conv2.weight", "fc1.weight", "fc2.weight"]);

    // --overwrite with a dense run removes the packed model with the rest of the old run: `eval`
    // of the directory then reads the new model.mpk, not the old model.hinm
    let mut args = small_train_args("lenet5", &tuned);
    args.extend(["--overwrite", "--seed", "9"]);
    let overwritten = ember(&args);
    ok(&overwritten);
    let stderr = String::from_utf8_lossy(&overwritten.stderr);
    assert!(!stderr.contains("other file(s)"), "{stderr}");
    assert!(
        !tuned.join("model.hinm").exists(),
        "the old packed model was kept"
    );
    let eval = ember(&["eval", "--checkpoint", s(&tuned)]);
    ok(&eval);
    assert!(!String::from_utf8_lossy(&eval.stderr).contains("hinm"));

    // a --from run of another model is refused before anything is written
    let lenet300 = dir.join("other");
    fails_with(
        &train("lenet300", &lenet300, &tune),
        "holds a lenet5 model, not lenet300",
    );
    assert!(!lenet300.exists());
    // --hinm needs --from
    let out = ember(&["train", "--hinm", "75:v4", "--out", s(&dir.join("none"))]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--from"));
    assert!(!dir.join("none").exists());
}

#[test]
fn a_hinm_prune_ended_by_a_signal_writes_nothing_and_its_rerun_starts_clean() {
    let tmp = scratch("hinm-signal");
    let data = crate::cifar_cli::image_folder(&tmp.join("data"));
    let dense = tmp.join("dense");
    // ResNet-18 at full width: its Gyro search takes seconds per layer on 2 cores
    let mut args = vec!["train", "--model", "resnet18-cifar", "--epochs", "1"];
    args.extend_from_slice(&["--batch-size", "3", "--plain", "--out", s(&dense)]);
    args.extend_from_slice(&["--dataset", "cifar10", "--data-dir", s(&data)]);
    ok(&ember(&args));
    let pruned = tmp.join("pruned");
    let prune = |level: &'static str, run: &Path| {
        let mut args = vec!["prune", "--hinm", level, "--checkpoint", s(run)];
        args.extend_from_slice(&["--out", s(&pruned)]);
        ember(&args)
    };
    let mut args = vec!["prune", "--hinm", "75:v64", "--checkpoint", s(&dense)];
    args.extend_from_slice(&["--out", s(&pruned)]);
    let (status, stderr) = crate::faults::kill_when(&args, "searching HiNM", "TERM");
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("nothing was written"), "{stderr}");
    assert!(!pruned.exists(), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().contains("pruned"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // the same --out takes the next prune (of a LeNet-5: seconds) without a manual rm
    let lenet = tmp.join("lenet");
    ok(&train("lenet5", &lenet, &[]));
    ok(&prune("75:v4", &lenet));
    assert!(pruned.join("model.hinm").is_file());
}
