//! `ember train` / `ember eval` with ResMLP on CIFAR-10 (a tiny ImageFolder made of the three
//! real CIFAR-10 images committed as test data), and the bad inputs of that path.

use crate::common::{ember, fails_with, ok, read_manifest, s, scratch};
use std::path::{Path, PathBuf};

/// `train/` and `test/` ImageFolders of CIFAR-10's ten class directories, holding the three
/// committed test images (labels 3, 8, 8) in their classes.
pub fn image_folder(root: &Path) -> PathBuf {
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/cifar10");
    let classes = ember_models::data::cifar::CLASS_NAMES;
    for split in ["train", "test"] {
        for class in classes {
            std::fs::create_dir_all(root.join(split).join(class)).unwrap();
        }
        for (file, label) in [
            ("cifar10_00_3.png", 3),
            ("cifar10_01_8.png", 8),
            ("cifar10_02_8.png", 8),
        ] {
            std::fs::copy(
                samples.join(file),
                root.join(split).join(classes[label]).join(file),
            )
            .unwrap();
        }
    }
    root.to_path_buf()
}

#[test]
fn resmlp_trains_on_cifar10_with_sparse_act_and_evaluates() {
    let tmp = scratch("cifar");
    let data = image_folder(&tmp.join("data"));
    let run = tmp.join("run");
    let out = ok(&ember(&[
        "train",
        "--model",
        "resmlp-small",
        "--dataset",
        "cifar10",
        "--data-dir",
        s(&data),
        "--sparse-act",
        "0.5:16",
        "--epochs",
        "1",
        "--batch-size",
        "2",
        "--out",
        s(&run),
        "--plain",
    ]));
    assert!(out.contains("test accuracy"), "{out}");
    let manifest = read_manifest(&run);
    assert_eq!(manifest["model"], "resmlp-small");
    assert_eq!(manifest["dataset"], "cifar10");
    assert_eq!(
        manifest["sparse_act"]["default"],
        serde_json::json!({"sparsity": 0.5, "block": 16})
    );
    assert!(run.join("model.mpk").is_file() && run.join("curves.png").is_file());
    // eval reads model and dataset from the manifest; only the directory is needed.
    let out = ok(&ember(&[
        "eval",
        "--checkpoint",
        s(&run),
        "--data-dir",
        s(&data),
    ]));
    assert!(out.contains("(loss") && out.contains("3 images"), "{out}");
    // Resuming on another dataset is refused, and the run stays as it was.
    fails_with(
        &ember(&[
            "train",
            "--model",
            "resmlp-small",
            "--epochs",
            "2",
            "--out",
            s(&run),
            "--resume",
            "--plain",
        ]),
        "it was started with --dataset cifar10, not mnist",
    );
    assert_eq!(read_manifest(&run)["completed_epochs"], 1);
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn resmlp_trains_on_the_embedded_mnist_subset() {
    let run = scratch("mnist-resmlp");
    let out = ok(&ember(&[
        "train",
        "--model",
        "resmlp-small",
        "--train-limit",
        "64",
        "--test-limit",
        "32",
        "--epochs",
        "1",
        "--batch-size",
        "16",
        "--out",
        s(&run),
        "--plain",
    ]));
    assert!(out.contains("32 images"), "{out}");
    assert_eq!(read_manifest(&run)["dataset"], "mnist");
    std::fs::remove_dir_all(&run).unwrap();
}

#[test]
fn bad_dataset_choices_are_refused() {
    let tmp = scratch("cifar-bad");
    fails_with(
        &ember(&["train", "--model", "resmlp-small", "--dataset", "cifar10"]),
        "--dataset cifar10 needs --data-dir",
    );
    fails_with(
        &ember(&[
            "train",
            "--dataset",
            "cifar10",
            "--data-dir",
            s(&tmp.join("missing")),
        ]),
        "no such directory",
    );
    let data = image_folder(&tmp.join("data"));
    let run = tmp.join("run");
    fails_with(
        &ember(&[
            "train",
            "--model",
            "lenet5",
            "--dataset",
            "cifar10",
            "--data-dir",
            s(&data),
            "--out",
            s(&run),
        ]),
        "lenet5 takes 28×28 grayscale images",
    );
    assert!(!run.exists(), "a refused run must not create its directory");
    // A folder that is not CIFAR-10: nine class directories.
    std::fs::remove_dir_all(data.join("train/truck")).unwrap();
    fails_with(
        &ember(&[
            "train",
            "--model",
            "resmlp-small",
            "--dataset",
            "cifar10",
            "--data-dir",
            s(&data),
            "--out",
            s(&run),
        ]),
        "needs 10 class directories, found 9",
    );
    assert!(!run.exists());
    std::fs::remove_dir_all(&tmp).unwrap();
}
