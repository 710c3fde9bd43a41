//! `--policy` and `--energy` end to end: a mixed per-layer policy trains and evaluates, the
//! effects table is printed and saved, and every bad policy or energy file is one clear error
//! line, a non-zero exit and nothing written.

use crate::common::{
    ember, fails_with, ok, read_manifest, s, scratch, sized_train_args, small_train_args,
};
use std::path::{Path, PathBuf};

/// LeNet-300-100 on 300 embedded MNIST images.
fn train_args<'a>(out: &'a Path, policy: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = small_train_args("lenet300", out);
    args.extend(["--policy", policy]);
    args.extend(extra);
    args
}

fn file(dir: &Path, name: &str, text: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const MIXED: &str = r#"
[default]
multiplier = "mitchell7"
[[layer]]
path = "fc1"
multiplier = "native"
sparse-act = "0.5:4"
[[layer]]
path = "fc[23]"
multiplier = "bf16"
"#;

#[test]
fn a_mixed_policy_trains_evaluates_and_reports_every_layer() {
    let dir = scratch("policy-mixed");
    let policy = file(&dir, "policy.toml", MIXED);
    let energy = file(
        &dir,
        "energy.toml",
        "[multiply]\nfp32 = 4.0\nmitchell7 = 1.0\nbf16 = 2.0\n[memory]\nbyte = 10.0\n",
    );
    let out = dir.join("run");
    let train = ember(&train_args(&out, s(&policy), &["--energy", s(&energy)]));
    ok(&train);
    let stderr = String::from_utf8_lossy(&train.stderr);
    assert!(stderr.contains("What each layer ran"), "{stderr}");
    let effects: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("effects.json")).unwrap()).unwrap();
    let rows = effects["layers"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["layer"].as_str().unwrap()).collect();
    assert_eq!(names, ["fc1", "fc2", "fc3"]);
    // fc1: exact, its stored input pruned; its input gradient is never needed (the image).
    let (fc1, fc2, fc3) = (&rows[0], &rows[1], &rows[2]);
    assert_eq!(
        (
            fc1["asked"].as_str(),
            fc1["forward"].as_str(),
            fc1["input_grad"].as_str()
        ),
        (Some("native"), Some("native"), Some("–"))
    );
    assert_eq!(fc1["weight_grad"], "native");
    assert_eq!(fc1["approx_multiplies"], 0);
    assert_eq!(fc1["stored"], "block-sparse 0.5:4");
    assert_eq!(
        fc1["routes"][0], "forward: native: the inner backend's own op",
        "{fc1}"
    );
    let [kept, dense] = [0, 1].map(|i| fc1["stored_bytes"][i].as_u64().unwrap());
    assert_eq!(dense, 50 * 784 * 4, "one batch of 50 images of 784 floats");
    assert!(kept < dense, "{kept} of {dense}");
    for (row, mul) in [(fc2, "bf16"), (fc3, "bf16")] {
        for pass in ["forward", "input_grad", "weight_grad"] {
            assert_eq!(row[pass], mul, "{pass} of {}", row["layer"]);
        }
        assert_eq!(row["approx_multiplies"], row["multiplies"]);
        assert_eq!(row["stored"], "dense: the layer is not pruned");
    }
    // fc2: 300 → 100, forward and both gradients over 50 rows.
    assert_eq!(fc2["multiplies"], 3 * 50 * 300 * 100);
    // energy: fc2 at bf16's 2 pJ a product plus its 50 × 300 floats at 10 pJ a byte.
    let e = fc2["energy_pj"][0].as_f64().unwrap();
    assert_eq!(
        e,
        2.0 * (3 * 50 * 300 * 100) as f64 + 10.0 * (50 * 300 * 4) as f64
    );
    let md = std::fs::read_to_string(out.join("effects.md")).unwrap();
    assert!(md.contains("| fc2 | bf16 | bf16 | bf16 | bf16 |"), "{md}");
    assert!(md.contains("**total**"), "{md}");
    // the manifest keeps the resolved policy
    let manifest = read_manifest(&out);
    assert_eq!(
        manifest["policy"][0],
        "fc1: multiplier native, sparse-act 0.5:4"
    );
    // eval under the preset: first and last exact, the middle the --multiplier
    let eval = ember(&[
        "eval",
        "--checkpoint",
        s(&out),
        "--policy",
        "first-last-exact",
        "--multiplier",
        "afm16",
    ]);
    ok(&eval);
    let stderr = String::from_utf8_lossy(&eval.stderr);
    assert!(stderr.contains("| fc1 | native | native |"), "{stderr}");
    assert!(stderr.contains("| fc2 | afm16 | afm16 |"), "{stderr}");
    assert!(stderr.contains("| fc3 | native | native |"), "{stderr}");
}

#[test]
fn every_bad_policy_is_one_error_and_writes_nothing() {
    let dir = scratch("policy-bad");
    let cases = [
        (
            "malformed.toml",
            "[default\nmultiplier = 1",
            "not a policy file: line 1",
        ),
        (
            "field.toml",
            "[default]\nmultiplyer = \"bf16\"",
            "unknown field `multiplyer`",
        ),
        (
            "path.toml",
            "[[layer]]\npath = \"conv1\"\nmultiplier = \"bf16\"",
            "path \"conv1\" matches no layer of this model; its layers are: fc1, fc2, fc3",
        ),
        (
            "multiplier.toml",
            "[[layer]]\npath = \"fc1\"\nmultiplier = \"mbm99\"",
            "does not support m = 99",
        ),
        (
            "unknown.toml",
            "[default]\nmultiplier = \"frobnicate\"",
            "unknown multiplier `frobnicate`",
        ),
        (
            "sb.toml",
            "[[layer]]\npath = \"fc*\"\nsparse-act = \"0.5\"",
            "sparse-act \"0.5\"",
        ),
        (
            "glob.toml",
            "[[layer]]\npath = \"fc[\"\n",
            "not a valid pattern",
        ),
    ];
    for (name, text, needle) in cases {
        let policy = file(&dir, name, text);
        let out = dir.join(format!("run-{name}"));
        let run = ember(&train_args(&out, s(&policy), &[]));
        fails_with(&run, needle);
        fails_with(&run, &format!("--policy {}", policy.display()));
        let errors = String::from_utf8_lossy(&run.stderr)
            .lines()
            .filter(|l| l.starts_with("error"))
            .count();
        assert_eq!(errors, 1, "{name}");
        assert!(!out.exists(), "{name}: nothing may be written");
    }
    let missing = dir.join("run-missing");
    fails_with(
        &ember(&train_args(&missing, "no-such-preset", &[])),
        "a policy is a TOML file or one of the presets: first-last-exact",
    );
    assert!(!missing.exists());
    let energy = file(
        &dir,
        "energy.toml",
        "[multiply]\nfp32 = 1.0\n[memory]\nbyte = 1.0\n",
    );
    let out = dir.join("run-energy");
    let run = ember(&train_args(
        &out,
        "first-last-exact",
        &["--multiplier", "bf16", "--energy", s(&energy)],
    ));
    fails_with(&run, "no [multiply] figure for bf16");
    assert!(!out.exists());
}

#[test]
fn a_resumed_run_refuses_a_policy_that_contradicts_its_own() {
    let dir = scratch("policy-resume");
    let policy = file(&dir, "policy.toml", MIXED);
    let out = dir.join("run");
    ok(&ember(&train_args(&out, s(&policy), &[])));
    let before = std::fs::read(out.join("ember-run.json")).unwrap();
    let changed = file(&dir, "changed.toml", &MIXED.replace("bf16", "afm16"));
    let mut args = train_args(&out, s(&changed), &["--resume"]);
    args[4] = "2";
    fails_with(
        &ember(&args),
        "it was started with --policy [fc1: multiplier native",
    );
    let mut args = train_args(&out, "first-last-exact", &["--resume"]);
    args[4] = "2";
    fails_with(&ember(&args), "cannot resume");
    assert_eq!(std::fs::read(out.join("ember-run.json")).unwrap(), before);
}

#[test]
fn the_preset_keeps_the_first_and_last_layer_of_every_model_exact() {
    let dir = scratch("policy-models");
    for (model, first, last) in [
        ("lenet5", "conv1", "fc3"),
        ("lenet300", "fc1", "fc3"),
        ("resmlp-small", "embed", "head"),
    ] {
        let out = dir.join(model);
        let mut args = sized_train_args(model, &out, ["64", "32", "32"]);
        args.extend(["--policy", "first-last-exact", "--multiplier", "bf16"]);
        ok(&ember(&args));
        let effects: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("effects.json")).unwrap()).unwrap();
        let rows = effects["layers"].as_array().unwrap();
        let n = rows.len();
        assert!(n >= 3, "{model}: {rows:?}");
        for (i, row) in rows.iter().enumerate() {
            let want = if i == 0 || i == n - 1 {
                "native"
            } else {
                "bf16"
            };
            // the route a native product took follows the name in brackets
            let forward = row["forward"].as_str().unwrap();
            let ran = forward.split(" (").next().unwrap();
            assert_eq!(ran, want, "{model}: {row}");
            assert_eq!(row["asked"], want, "{model}: {row}");
        }
        assert_eq!(rows[0]["layer"], first, "{model}");
        assert_eq!(rows[n - 1]["layer"], last, "{model}");
    }
}
