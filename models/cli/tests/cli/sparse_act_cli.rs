//! `ember` with SparseAct: training with `--sparse-act`, `ember memory`, and every bad input
//! (one clear error line, a non-zero exit, no panic, nothing overwritten).

use crate::common::{ember, ember_with, fails_with, ok, read_manifest, s, scratch};

#[test]
fn bad_policies_are_refused_before_anything_runs() {
    for (spec, needle) in [
        ("1.5:16", "sparsity must be in [0, 1)"),
        ("-0.1:16", "sparsity must be in [0, 1)"),
        ("0.5:0", "block size must be at least 1"),
        ("0.5", "expected SPARSITY:BLOCK"),
        ("nan:4", "sparsity must be in [0, 1)"),
    ] {
        let flag = format!("--sparse-act={spec}");
        fails_with(&ember(&["train", &flag, "--epochs", "1"]), needle);
        fails_with(
            &ember(&["memory", "--model", "resmlp-small", &flag]),
            needle,
        );
    }
    fails_with(
        &ember(&[
            "train",
            "--sparse-act",
            "0.5:4",
            "--sparse-act-layer",
            "84x10",
        ]),
        "expected IN×OUT=SPARSITY:BLOCK",
    );
    fails_with(
        &ember(&[
            "train",
            "--sparse-act",
            "0.5:4",
            "--sparse-act-stochastic",
            "1.5",
        ]),
        "stochastic band must be in (0, 1)",
    );
    fails_with(
        &ember(&["train", "--sparse-act-layer", "84x10=0:1"]),
        "--sparse-act",
    );
    fails_with(
        &ember(&["memory", "--model", "resmlp-small", "--image-size", "30"]),
        "must be a positive multiple of the patch size",
    );
    fails_with(
        &ember(&["memory", "--model", "resmlp-small", "--batch", "0"]),
        "--batch must be at least 1",
    );
    fails_with(
        &ember(&["memory", "--model", "resmlp-small", "--patch-size", "0"]),
        "must be a positive multiple of the patch size 0",
    );
    fails_with(
        &ember(&["memory", "--model", "resmlp-small", "--classes", "0"]),
        "--classes must be at least 1",
    );
    #[cfg(not(feature = "cuda"))]
    fails_with(
        &ember(&["memory", "--model", "resmlp-small", "--backend", "cuda"]),
        "built without CUDA support",
    );
}

/// The hidden per-configuration mode refuses a configuration that does not exist.
#[test]
fn memory_refuses_a_configuration_that_does_not_exist() {
    let args = [
        "memory",
        "--model",
        "resmlp-small",
        "--image-size",
        "32",
        "--batch",
        "2",
        "--sparse-act",
        "0.5:16",
        "--configuration",
        "2",
    ];
    fails_with(&ember(&args), "no configuration 2 to measure");
}

/// With no Vulkan driver visible, `--backend wgpu` is one clear error before anything calls
/// into the wgpu runtime (which would panic on its device thread), and leaves no run behind.
#[test]
fn wgpu_without_a_vulkan_driver_is_refused_before_the_runtime_starts() {
    let hidden = [
        ("VK_ICD_FILENAMES", "/nonexistent/ember-icd.json"),
        ("VK_DRIVER_FILES", "/nonexistent/ember-icd.json"),
    ];
    let memory = [
        "memory",
        "--model",
        "resmlp-small",
        "--image-size",
        "32",
        "--batch",
        "2",
        "--backend",
        "wgpu",
    ];
    fails_with(&ember_with(&memory, &hidden), "no wgpu adapter found");
    let out = scratch("no-vulkan-run");
    let train = [
        "train",
        "--backend",
        "wgpu",
        "--epochs",
        "1",
        "--out",
        s(&out),
    ];
    fails_with(&ember_with(&train, &hidden), "no wgpu adapter found");
    assert!(!out.exists(), "a refused start leaves no run directory");
}

#[test]
fn trains_with_sparse_act_and_refuses_to_resume_with_another_policy() {
    let run = scratch("sparse-run");
    let base = [
        "train",
        "--model",
        "lenet300",
        "--epochs",
        "1",
        "--plain",
        "--train-limit",
        "1000",
        "--test-limit",
        "300",
        "--out",
        s(&run),
    ];
    let mut args = base.to_vec();
    args.extend(["--sparse-act", "0.5:4", "--sparse-act-layer", "100x10=0:1"]);
    ok(&ember(&args));
    let manifest = read_manifest(&run);
    assert_eq!(
        manifest["sparse_act"],
        serde_json::json!({
            "default": {"sparsity": 0.5, "block": 4},
            "overrides": {"100x10": {"sparsity": 0.0, "block": 1}},
            "stochastic": null,
            "scales": false
        })
    );
    assert!(manifest["test_accuracy"].as_f64().unwrap() > 60.0);
    // combined with an approximate multiplier underneath (SparseAct<Autodiff<ApproxMul<B>>>)
    let both = scratch("both");
    let mut combined = base.to_vec();
    combined[11] = s(&both);
    combined.extend(["--sparse-act", "0.5:4", "--multiplier", "afm16"]);
    ok(&ember(&combined));
    let m = read_manifest(&both);
    assert_eq!(
        (&m["sparse_act"]["default"], m["multiplier"].as_str()),
        (
            &serde_json::json!({"sparsity": 0.5, "block": 4}),
            Some("afm16")
        )
    );
    assert!(m["test_accuracy"].as_f64().unwrap() > 60.0);
    let _ = std::fs::remove_dir_all(&both);
    let mut resume = base.to_vec();
    resume[4] = "2";
    resume.extend(["--resume", "--sparse-act", "0.8:4"]);
    fails_with(&ember(&resume), "it was started with --sparse-act 0.5:4");
    let _ = std::fs::remove_dir_all(&run);
}

#[test]
fn memory_table_shows_the_saving_and_never_overwrites() {
    let dir = scratch("mem");
    std::fs::create_dir_all(&dir).unwrap();
    let table = dir.join("table.md");
    let args = [
        "memory",
        "--model",
        "resmlp-small",
        "--image-size",
        "32",
        "--batch",
        "4",
        "--sparse-act",
        "0.8:16",
        "--out",
        s(&table),
    ];
    let out = ok(&ember(&args));
    assert!(
        out.contains("| dense |") && out.contains("| 0.8:16 |"),
        "{out}"
    );
    // the pruned row holds fewer activation bytes than the dense one
    let activations = |label: &str| -> f64 {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("| {label} |")))
            .unwrap();
        line.split('|').nth(5).unwrap().trim().parse().unwrap()
    };
    assert!(activations("0.8:16") < 0.8 * activations("dense"), "{out}");
    // Each configuration ran in a process of its own and reports that process's peak resident
    // memory beside its live bytes (at least the live bytes it measured).
    assert!(out.contains("| peak RSS |"), "{out}");
    let peak = |label: &str| -> f64 {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("| {label} |")))
            .unwrap();
        line.split('|').nth(8).unwrap().trim().parse().unwrap()
    };
    for label in ["dense", "0.8:16"] {
        assert!(peak(label) >= activations(label), "{label}: {out}");
    }
    assert_eq!(std::fs::read_to_string(&table).unwrap(), out);
    // an existing --out is refused and left as it was
    std::fs::write(&table, "mine").unwrap();
    fails_with(&ember(&args), "already exists");
    assert_eq!(std::fs::read_to_string(&table).unwrap(), "mine");
    let _ = std::fs::remove_dir_all(&dir);
}
