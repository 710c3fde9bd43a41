//! `ember compare`: figures and table of finished runs, and its bad inputs.

use crate::common::{ember, fails_with, ok, s, scratch};

fn train(run: &std::path::Path, sparse_act: Option<&str>) {
    let mut args = vec![
        "train",
        "--model",
        "lenet300",
        "--train-limit",
        "256",
        "--test-limit",
        "128",
        "--epochs",
        "2",
        "--batch-size",
        "32",
        "--plain",
        "--out",
        s(run),
    ];
    if let Some(p) = sparse_act {
        args.extend(["--sparse-act", p]);
    }
    ok(&ember(&args));
}

#[test]
fn compares_runs_and_never_overwrites() {
    let tmp = scratch("compare");
    let (dense, sparse) = (tmp.join("dense"), tmp.join("sparse"));
    train(&dense, None);
    train(&sparse, Some("0.5:4"));
    let out = tmp.join("figures");
    let table = ok(&ember(&[
        "compare",
        s(&dense),
        s(&sparse),
        "--out",
        s(&out),
        "--title",
        "test",
    ]));
    // Both runs are in the table; the dense one is the baseline (Δ +0.00).
    assert!(
        table.contains("| `dense` |") && table.contains("| `sparse` |"),
        "{table}"
    );
    assert!(
        table.contains("| off | 2 |") && table.contains("+0.00"),
        "{table}"
    );
    for f in ["loss.png", "accuracy-heatmap.png", "summary.md"] {
        let bytes = std::fs::read(out.join(f)).unwrap();
        assert!(bytes.len() > 100, "{f} is empty");
    }
    let before = std::fs::read(out.join("summary.md")).unwrap();
    fails_with(
        &ember(&["compare", s(&dense), "--out", s(&out)]),
        "never overwrites",
    );
    assert_eq!(std::fs::read(out.join("summary.md")).unwrap(), before);
    // the figures never go into a compared run (nor a new folder inside one)
    let listing = |d: &std::path::Path| {
        let mut names: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    let files = listing(&dense);
    for into in [dense.clone(), dense.join("figures")] {
        fails_with(
            &ember(&["compare", s(&dense), s(&sparse), "--out", s(&into)]),
            "is inside the compared run",
        );
        assert_eq!(listing(&dense), files);
    }
    // Not runs: a missing directory, a directory without a manifest.
    fails_with(
        &ember(&["compare", s(&tmp.join("nope")), "--out", s(&tmp.join("o1"))]),
        "no such run directory",
    );
    fails_with(
        &ember(&["compare", s(&out), "--out", s(&tmp.join("o2"))]),
        "ember-run.json",
    );
    fails_with(
        &ember(&["compare", "--out", s(&tmp.join("o3"))]),
        "required",
    );
    assert!(!tmp.join("o1").exists() && !tmp.join("o2").exists());
    std::fs::remove_dir_all(&tmp).unwrap();
}
