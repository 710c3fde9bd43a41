//! PyTorch weights through the command line: `ember eval` and `ember train --from` on a
//! torchvision state dict (the fixture of `models/testdata/pretrained`), `ember export` of the
//! fine-tuned run, and the bad inputs of that path.

use crate::cifar_cli::image_folder;
use crate::common::{ember, fails_with, ok, s, scratch, sized_train_args};
use std::path::{Path, PathBuf};

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/pretrained")
        .join(name)
}

/// The accuracy an `ember eval` printed.
fn accuracy(out: &str) -> &str {
    let at = out.find("test accuracy").expect(out);
    out[at..].split('%').next().unwrap()
}

#[test]
fn a_run_exports_under_torchvision_names_and_fine_tunes_from_its_export() {
    let tmp = scratch("pretrained");
    let data = image_folder(&tmp.join("data"));
    let cifar = ["--dataset", "cifar10", "--data-dir", s(&data)];
    let train = |extra: &[&str], out: &Path| {
        let mut args = vec!["train", "--model", "resnet18-cifar-w16", "--epochs", "1"];
        args.extend_from_slice(&["--batch-size", "2", "--plain", "--out", s(out)]);
        args.extend_from_slice(&cifar);
        args.extend_from_slice(extra);
        ok(&ember(&args))
    };
    let run = tmp.join("run");
    train(&[], &run);
    let exported = tmp.join("r18.safetensors");
    let out = ok(&ember(&[
        "export",
        "--checkpoint",
        s(&run),
        "--out",
        s(&exported),
    ]));
    assert!(
        out.contains("resnet18-cifar-w16 under torchvision names"),
        "{out}"
    );
    let dict = ember_models::pretrained::StateDict::open(&exported).unwrap();
    assert_eq!(dict.get("fc.weight").unwrap().shape.to_vec(), vec![10, 128]);
    assert!(dict.get("layer1.0.bn1.num_batches_tracked").is_some());
    // the run and its export evaluate to the same accuracy
    let eval = |checkpoint: &Path, model: &[&str]| {
        let mut args = vec!["eval", "--checkpoint", s(checkpoint)];
        args.extend_from_slice(model);
        args.extend_from_slice(&cifar);
        ok(&ember(&args))
    };
    let from_run = eval(&run, &[]);
    let from_file = eval(&exported, &["--model", "resnet18-cifar-w16"]);
    assert_eq!(
        accuracy(&from_run),
        accuracy(&from_file),
        "{from_run}\n{from_file}"
    );
    // fine-tuning from the export, then exporting again under the same names
    let tuned = tmp.join("tuned");
    train(&["--from", s(&exported)], &tuned);
    let again = tmp.join("tuned.safetensors");
    ok(&ember(&[
        "export",
        "--checkpoint",
        s(&tuned),
        "--out",
        s(&again),
    ]));
    // an export over an existing file is refused, and the file is kept as it was
    let before = std::fs::read(&exported).unwrap();
    let refused = ember(&["export", "--checkpoint", s(&tuned), "--out", s(&exported)]);
    fails_with(&refused, "already exists");
    assert_eq!(std::fs::read(&exported).unwrap(), before);
    ok(&ember(&[
        "export",
        "--checkpoint",
        s(&tuned),
        "--out",
        s(&exported),
        "--overwrite",
    ]));
    assert_eq!(
        std::fs::read(&exported).unwrap(),
        std::fs::read(&again).unwrap()
    );
    // names the model does not have
    let timm = ember(&[
        "export",
        "--checkpoint",
        s(&run),
        "--names",
        "timm",
        "--out",
        s(&tmp.join("t.st")),
    ]);
    fails_with(&timm, "resnet18-cifar-w16 has no timm names");
    assert!(!tmp.join("t.st").exists());
    // --bcr retrains from a run; weights do not say which model they hold
    let out = tmp.join("refused");
    let refusals: [(Vec<&str>, &str); 2] = [
        (
            vec!["prune", "--hinm", "75:v8", "--checkpoint", s(&exported)],
            "pass --model",
        ),
        (
            vec!["prune", "--bcr", "10x:4x16", "--checkpoint", s(&exported)],
            "--bcr retrains from an Ember run, not from PyTorch weights",
        ),
    ];
    for (mut args, needle) in refusals {
        args.extend(["--out", s(&out)]);
        fails_with(&ember(&args), needle);
        assert!(!out.exists(), "{args:?}");
    }
}

/// The `shape` a run directory's manifest records.
fn recorded_shape(run: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(run.join("ember-run.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    manifest["shape"].clone()
}

#[test]
fn weights_of_another_width_fine_tune_resume_prune_and_export_at_their_shape() {
    let tmp = scratch("pretrained-shape");
    let data = image_folder(&tmp.join("data"));
    let cifar = ["--dataset", "cifar10", "--data-dir", s(&data)];
    let w8 = fixture("resnet18-w8.pth");
    let run = tmp.join("run");
    let train = |model: &str, out: &Path, extra: &[&str]| {
        let mut args = vec!["train", "--model", model, "--batch-size", "2", "--plain"];
        args.extend_from_slice(&["--out", s(out)]);
        args.extend_from_slice(&cifar);
        args.extend_from_slice(extra);
        ok(&ember(&args))
    };
    // torchvision's ResNet-18 layout at width 8: the run records and keeps the width
    train("resnet18", &run, &["--from", s(&w8), "--epochs", "1"]);
    let width8 = serde_json::json!({"family": "resnet", "width": 8});
    assert_eq!(recorded_shape(&run), width8);
    train("resnet18", &run, &["--epochs", "2", "--resume"]);
    assert_eq!(recorded_shape(&run), width8);
    let eval = |checkpoint: &Path, extra: &[&str]| {
        let mut args = vec!["eval", "--checkpoint", s(checkpoint)];
        args.extend_from_slice(extra);
        ok(&ember(&args))
    };
    let at = ["--data-dir", s(&data)];
    assert!(eval(&run, &at).contains("3 images"));
    let exported = tmp.join("w8.safetensors");
    ok(&ember(&[
        "export",
        "--checkpoint",
        s(&run),
        "--out",
        s(&exported),
    ]));
    let dict = ember_models::pretrained::StateDict::open(&exported).unwrap();
    assert_eq!(dict.get("fc.weight").unwrap().shape.to_vec(), vec![10, 64]);
    // HiNM of the run: the packed model is rebuilt at width 8, on the run's dataset
    let packed = tmp.join("packed");
    let prune = |checkpoint: &Path, out: &Path, model: &[&str]| {
        let mut args = vec!["prune", "--hinm", "75:v8", "--checkpoint", s(checkpoint)];
        args.extend_from_slice(model);
        args.extend_from_slice(&["--out", s(out)]);
        ok(&ember(&args))
    };
    prune(&run, &packed, &[]);
    assert!(eval(&packed, &at).contains("3 images"));
    // HiNM of the weights themselves: their ImageNet stem says which dataset they classify
    let from_weights = tmp.join("packed-weights");
    prune(&w8, &from_weights, &["--model", "resnet18"]);
    let imagenet = imagenet_folder(&tmp.join("imagenet"), 5);
    let out = eval(&from_weights, &["--data-dir", s(&imagenet)]);
    assert!(out.contains("10 images"), "{out}");
    // fine-tuning a HiNM mask from the width-8 run
    let tuned = tmp.join("tuned");
    let from_run = ["--hinm", "75:v8", "--from", s(&run), "--epochs", "1"];
    train("resnet18", &tuned, &from_run);
    assert_eq!(recorded_shape(&tuned), width8);
    assert!(eval(&tuned, &at).contains("3 images"));
    // timm's layout at dim 128 with 16×16 patches fine-tunes as a DeiT-Ti of that shape
    let deit = tmp.join("deit");
    let d128 = fixture("deit-d128.safetensors");
    train("deit-ti", &deit, &["--from", s(&d128), "--epochs", "1"]);
    let shape =
        serde_json::json!({"family": "deit", "dim": 128, "depth": 2, "heads": 2, "patch": 16});
    assert_eq!(recorded_shape(&deit), shape);
    assert!(eval(&deit, &at).contains("3 images"));
    // a packed model of weights whose shape names no dataset (4 classes) asks for one
    let deit_packed = tmp.join("deit-packed");
    prune(&d128, &deit_packed, &["--model", "deit-ti"]);
    let unknown = ember(&[
        "eval",
        "--checkpoint",
        s(&deit_packed),
        "--data-dir",
        s(&data),
    ]);
    fails_with(
        &unknown,
        "does not say which dataset its deit-ti classifies: pass --dataset",
    );
    // a recorded shape the model cannot have is refused, naming it
    let text = std::fs::read_to_string(deit.join("ember-run.json")).unwrap();
    let edited = text.replace("\"heads\": 2", "\"heads\": 3");
    assert_ne!(edited, text);
    std::fs::write(deit.join("ember-run.json"), edited).unwrap();
    let refused = ember(&["eval", "--checkpoint", s(&deit), "--data-dir", s(&data)]);
    fails_with(&refused, "its heads must divide its width");
    // a resumed run keeps the shape it was started with: weights of another are refused
    let text = std::fs::read_to_string(run.join("ember-run.json")).unwrap();
    let edited = text.replace("\"width\": 8", "\"width\": 16");
    assert_ne!(edited, text);
    std::fs::write(run.join("ember-run.json"), edited).unwrap();
    let mut args = vec!["train", "--model", "resnet18", "--from", s(&w8), "--resume"];
    args.extend_from_slice(&["--epochs", "3", "--batch-size", "2", "--out", s(&run)]);
    args.extend_from_slice(&cifar);
    fails_with(
        &ember(&args),
        "it was started with the model's shape \"width 16\", not \"width 8\"",
    );
}

#[test]
fn weights_that_do_not_fit_are_refused_naming_why() {
    let tmp = scratch("pretrained-bad");
    let data = image_folder(&tmp.join("data"));
    let eval = |file: &Path, model: Option<&str>| {
        let mut args = vec!["eval", "--checkpoint", s(file), "--dataset", "cifar10"];
        if let Some(m) = model {
            args.extend_from_slice(&["--model", m]);
        }
        args.extend_from_slice(&["--data-dir", s(&data)]);
        ember(&args)
    };
    let r18 = fixture("resnet18-w8.pth");
    fails_with(&eval(&r18, None), "pass --model");
    // a .bin is read as weights by its first bytes (Hugging Face's pytorch_model.bin)
    let bin = tmp.join("pytorch_model.bin");
    std::fs::copy(&r18, &bin).unwrap();
    fails_with(
        &eval(&bin, Some("resnet18")),
        "its head classifies 5 classes",
    );
    fails_with(
        &eval(&r18, Some("resnet18")),
        "its head classifies 5 classes; the dataset has 10",
    );
    fails_with(
        &eval(&r18, Some("resnet34")),
        "--model resnet34 is another ResNet (use --model resnet18)",
    );
    fails_with(&eval(&r18, Some("resnet18-cifar")), "use --model resnet18");
    fails_with(
        &eval(&r18, Some("lenet5")),
        "--model lenet5 is not a ResNet",
    );
    fails_with(
        &eval(&fixture("resnet18-script.pt"), Some("resnet18")),
        "TorchScript archive",
    );
    fails_with(
        &eval(&fixture("resnet18-model.pth"), Some("resnet18")),
        "whole pickled model",
    );
    fails_with(
        &eval(&fixture("distilled.safetensors"), Some("deit-ti")),
        "distilled DeiT",
    );
    fails_with(
        &eval(&tmp.join("missing.pth"), Some("resnet18")),
        "missing.pth: no such weights file",
    );
    let cut = tmp.join("cut.pth");
    std::fs::write(&cut, &std::fs::read(&r18).unwrap()[..4000]).unwrap();
    fails_with(
        &eval(&cut, Some("resnet18")),
        "cut.pth: it is a zip archive (torch.save) that cannot be read: truncated or damaged",
    );
    // Ember's own module paths (`--names ember`) are written for tools, not read back
    let lenet = tmp.join("lenet");
    ok(&ember(&sized_train_args(
        "lenet5",
        &lenet,
        ["64", "32", "32"],
    )));
    let paths = tmp.join("lenet.safetensors");
    ok(&ember(&[
        "export",
        "--checkpoint",
        s(&lenet),
        "--out",
        s(&paths),
    ]));
    let back = ember(&["eval", "--checkpoint", s(&paths), "--model", "lenet5"]);
    fails_with(&back, "Ember's own module paths");
    // a DeiT's position embeddings fix its image size
    let deit = fixture("deit-d128.safetensors");
    let mnist = ember(&[
        "eval",
        "--checkpoint",
        s(&deit),
        "--model",
        "deit-ti",
        "--dataset",
        "mnist",
    ]);
    fails_with(&mnist, "takes 3-channel images; the dataset's have 1");
    // fine-tuning weights under HiNM or BCR, which start from Ember runs
    let out = tmp.join("run");
    let hinm = ember(&[
        "train",
        "--from",
        s(&r18),
        "--hinm",
        "75:v8",
        "--model",
        "resnet18",
        "--dataset",
        "cifar10",
        "--data-dir",
        s(&data),
        "--out",
        s(&out),
    ]);
    fails_with(&hinm, "start from an Ember run, not from PyTorch weights");
    assert!(!out.exists());
}

/// An ImageFolder of `classes` class directories under `root/val`, each holding the fixture's
/// two PNG images.
pub fn imagenet_folder(root: &Path, classes: usize) -> PathBuf {
    imagenet_split(root, "val", classes)
}

/// [`imagenet_folder`]'s images under `root/split`.
pub fn imagenet_split(root: &Path, split: &str, classes: usize) -> PathBuf {
    for c in 0..classes {
        let dir = root.join(split).join(format!("n{c:08}"));
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["cat", "dog"] {
            let file = fixture(&format!("folder/{name}/image.png"));
            std::fs::copy(file, dir.join(format!("{name}.png"))).unwrap();
        }
    }
    root.to_path_buf()
}

#[test]
fn torchvision_weights_evaluate_on_an_imagenet_folder() {
    let tmp = scratch("pretrained-folder");
    let data = imagenet_folder(&tmp.join("imagenet"), 5);
    let r18 = fixture("resnet18-w8.pth");
    let eval = |dir: &Path, extra: &[&str]| {
        let mut args = vec!["eval", "--checkpoint", s(&r18), "--model", "resnet18"];
        args.extend_from_slice(&["--dataset", "imagenet-folder", "--data-dir", s(dir)]);
        args.extend_from_slice(extra);
        ember(&args)
    };
    let out = ok(&eval(&data, &[]));
    assert!(out.contains("10 images"), "{out}");
    let out = ok(&eval(&data, &["--test-limit", "3", "--batch-size", "2"]));
    assert!(out.contains("3 images"), "{out}");
    // a file whose header reads but whose pixels do not: an error naming it, after the batch
    let png = std::fs::read(fixture("folder/cat/image.png")).unwrap();
    let broken = data.join("val/n00000002/cat.png");
    std::fs::write(&broken, &png[..120]).unwrap();
    fails_with(&eval(&data, &[]), "n00000002/cat.png");
    // other classes than the head's, no classes, and training on a folder
    let six = imagenet_folder(&tmp.join("six"), 6);
    fails_with(
        &eval(&six, &[]),
        "its head classifies 5 classes; the dataset has 6",
    );
    let empty = tmp.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    fails_with(&eval(&empty, &[]), "no class directories");
    // fine-tuning on the folder: train/ beside val/, the weights' 5-class head kept
    let run = tmp.join("run");
    let train = |dir: &Path| {
        let mut args = vec!["train", "--from", s(&r18), "--model", "resnet18"];
        args.extend_from_slice(&["--dataset", "imagenet-folder", "--data-dir", s(dir)]);
        args.extend_from_slice(&["--epochs", "1", "--batch-size", "4", "--plain"]);
        args.extend_from_slice(&["--out", s(&run)]);
        ember(&args)
    };
    fails_with(&train(&six), "no train/ beside it");
    assert!(!run.exists());
    let five = imagenet_folder(&tmp.join("five"), 5);
    imagenet_split(&five, "train", 5);
    let out = ok(&train(&five));
    assert!(out.contains("10 images"), "{out}");
    let text = std::fs::read_to_string(run.join("ember-run.json")).unwrap();
    assert!(text.contains("\"classes\": 5"), "{text}");
    let out = ok(&ember(&[
        "eval",
        "--checkpoint",
        s(&run),
        "--data-dir",
        s(&five),
    ]));
    assert!(out.contains("10 images"), "{out}");
    // a training image whose pixels do not decode ends the run naming it, leaving no run
    std::fs::remove_dir_all(&run).unwrap();
    let broken = five.join("train/n00000003/dog.png");
    std::fs::write(&broken, &png[..120]).unwrap();
    fails_with(&train(&five), "n00000003/dog.png");
    assert!(!run.exists());
    // so does a validation image, found when the epoch is evaluated
    std::fs::write(&broken, &png).unwrap();
    std::fs::write(five.join("val/n00000001/cat.png"), &png[..120]).unwrap();
    fails_with(&train(&five), "n00000001/cat.png: cannot decode the image");
    assert!(!run.exists());
}
