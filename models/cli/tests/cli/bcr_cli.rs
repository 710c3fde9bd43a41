//! The GRU on sequence datasets, `ember train --bcr [--admm]`, `ember prune --bcr`,
//! `ember eval` of a packed `model.bcr` and `ember tune-bcr` end to end on the committed
//! Japanese Vowels excerpt (one utterance of each of the 9 speakers, as both splits), and every
//! bad input of that path: one clear error line, a non-zero exit, and nothing written.

use crate::common::{ember, fails_with, jv_dir, ok, read_manifest, s, scratch};
use std::path::Path;

/// `ember train --model gru` on the excerpt ([`jv_dir`]) for `epochs` epochs into `out`, with `extra`.
pub fn gru_args<'a>(
    jv: &'a Path,
    out: &'a Path,
    epochs: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        "train",
        "--model",
        "gru",
        "--dataset",
        "japanese-vowels",
        "--data-dir",
        s(jv),
        "--epochs",
        epochs,
        "--batch-size",
        "3",
        "--plain",
        "--out",
        s(out),
    ];
    args.extend(extra);
    args
}

#[test]
fn a_gru_trains_with_admm_and_its_packed_model_evaluates_through_bcrc() {
    let dir = scratch("bcr-admm");
    let jv = jv_dir(&dir);
    let run = dir.join("admm");
    let train = ember(&gru_args(
        &jv,
        &run,
        "3",
        &["--bcr", "4x:4x4", "--admm", "--retrain-epochs", "1"],
    ));
    let stdout = ok(&train);
    assert!(stdout.contains("test accuracy"), "{stdout}");
    let stderr = String::from_utf8_lossy(&train.stderr);
    assert!(stderr.contains("ADMM update 1"), "{stderr}");
    assert!(stderr.contains("hard-pruned to 4x:4x4"), "{stderr}");
    // the classifier stays dense; every GRU gate weight is pruned
    assert!(!stderr.contains("head.weight: hard-pruned"), "{stderr}");
    assert!(
        stderr.contains("grus.0.reset_gate.hidden_transform.weight: hard-pruned"),
        "{stderr}"
    );
    assert!(run.join("model.bcr").is_file());
    assert!(run.join("checkpoint/bcr-3.bin").is_file());
    let manifest = read_manifest(&run);
    assert!(
        manifest["bcr"]
            .as_str()
            .unwrap()
            .contains("4x:4x4 admm every 1 (staged), retrain 1"),
        "{manifest}"
    );
    let accuracy = manifest["test_accuracy"].as_f64().unwrap();
    // the packed model gives the accuracy the masked one had, through the BCRC product of the
    // GRU's float_matmul
    let eval = ember(&["eval", "--checkpoint", s(&run), "--data-dir", s(&jv)]);
    let stdout = ok(&eval);
    assert!(
        stdout.contains(&format!("test accuracy {accuracy:.2}%")),
        "{stdout} vs {accuracy}"
    );
    let stderr = String::from_utf8_lossy(&eval.stderr);
    assert!(
        stderr.contains(
            "| grus.1.new_gate.hidden_transform | native | – (matmul: native (bcrc host)) |"
        ),
        "{stderr}"
    );
}

#[test]
fn one_shot_pruning_of_a_trained_run_retrains_masked_and_resumes_nothing_it_should_not() {
    let dir = scratch("bcr-prune");
    let jv = jv_dir(&dir);
    let dense = dir.join("dense");
    ok(&ember(&gru_args(&jv, &dense, "1", &[])));
    // a rate above a layer's size would keep none of its weights: refused, nothing written
    let zeros = dir.join("zeros");
    let out = ember(&[
        "prune",
        "--bcr",
        "1e10x:1x1",
        "--checkpoint",
        s(&dense),
        "--out",
        s(&zeros),
    ]);
    fails_with(&out, "would keep no weight");
    assert!(!zeros.exists());
    let pruned = dir.join("pruned");
    let prune = [
        "prune",
        "--bcr",
        "10x:4x16",
        "--checkpoint",
        s(&dense),
        "--out",
        s(&pruned),
    ];
    let out = ember(&prune);
    let stdout = ok(&out);
    assert!(stdout.contains("after BCR 10x:4x16"), "{stdout}");
    // the first layer's input weights (256 × 12) are narrower than a 16-column block
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("grus.0.update_gate.input_transform (256 × 12) stays dense"),
        "{stderr}"
    );
    assert!(pruned.join("model.bcr").is_file());
    let manifest = read_manifest(&pruned);
    assert!(
        manifest["bcr"].as_str().unwrap().contains("one-shot from"),
        "{manifest}"
    );
    // a second prune into the same directory is refused; the first is untouched
    let before = std::fs::read(pruned.join("model.bcr")).unwrap();
    fails_with(&ember(&prune), "already holds a run");
    assert_eq!(std::fs::read(pruned.join("model.bcr")).unwrap(), before);
}

#[test]
fn bad_bcr_levels_are_refused_before_anything_is_written() {
    let dir = scratch("bcr-bad-level");
    let jv = jv_dir(&dir);
    let out = dir.join("never");
    for (level, says) in [
        ("10x:0x16", "at least one row and one column"),
        ("1x:4x16", "rate"),
        ("0.5x:4x16", "rate"),
        ("10x4x16", "is not a BCR level"),
        ("ten:4x16", "is not a BCR level"),
    ] {
        let run = ember(&gru_args(&jv, &out, "1", &["--bcr", level]));
        fails_with(&run, says);
        assert!(!out.exists(), "{level}: {} was created", out.display());
    }
    // a block no layer can take
    let run = ember(&gru_args(&jv, &out, "1", &["--bcr", "10x:512x512"]));
    fails_with(&run, "no layer of this model can be pruned");
    assert!(!out.exists());
    // ADMM without a masked epoch after it
    let run = ember(&gru_args(
        &jv,
        &out,
        "2",
        &["--bcr", "4x:4x4", "--admm", "--retrain-epochs", "2"],
    ));
    fails_with(&run, "masked retraining at least one");
    assert!(!out.exists());
    // no ADMM update an epoch, or several with updates only every other epoch
    for (extra, says) in [
        (
            &["--admm-per-epoch", "0"][..],
            "--admm-per-epoch must be at least 1",
        ),
        (
            &["--admm-per-epoch", "4", "--admm-every", "2"][..],
            "need one every epoch",
        ),
    ] {
        let mut args = vec!["--bcr", "4x:4x4", "--admm", "--retrain-epochs", "1"];
        args.extend(extra);
        let run = ember(&gru_args(&jv, &out, "3", &args));
        fails_with(&run, says);
        assert!(!out.exists());
    }
    // --admm without --bcr
    let run = ember(&gru_args(&jv, &out, "2", &["--admm"]));
    fails_with(&run, "--bcr");
    assert!(!out.exists());
}

#[test]
fn several_admm_updates_an_epoch_run_inside_the_epoch() {
    let dir = scratch("bcr-admm-per-epoch");
    let jv = jv_dir(&dir);
    let run = dir.join("run");
    // 9 utterances in batches of 3: 3 steps an epoch, updates after steps 1 and 2 and at the
    // end of the first epoch (the second ADMM epoch ends in the hard pruning)
    let train = ember(&gru_args(
        &jv,
        &run,
        "3",
        &[
            "--bcr",
            "4x:4x4",
            "--admm",
            "--retrain-epochs",
            "1",
            "--admm-per-epoch",
            "3",
        ],
    ));
    ok(&train);
    let stderr = String::from_utf8_lossy(&train.stderr);
    assert!(stderr.contains("ADMM update 3,"), "{stderr}");
    assert!(!stderr.contains("ADMM update 1,"), "{stderr}");
    let manifest = read_manifest(&run);
    assert!(
        manifest["bcr"]
            .as_str()
            .unwrap()
            .contains("retrain 1, 3 updates an epoch"),
        "{manifest}"
    );
    assert!(run.join("model.bcr").is_file());
}

#[test]
fn corrupt_and_truncated_bcr_files_are_refused_by_name() {
    let dir = scratch("bcr-corrupt");
    let jv = jv_dir(&dir);
    let run = dir.join("run");
    ok(&ember(&gru_args(&jv, &run, "1", &["--bcr", "4x:4x4"])));
    let good = std::fs::read(run.join("model.bcr")).unwrap();
    let file = dir.join("bad.bcr");
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x40;
    for (bytes, says) in [
        (good[..good.len() / 3].to_vec(), "bad.bcr"),
        (flipped, "bad.bcr"),
        (b"not a model".to_vec(), "bad.bcr"),
    ] {
        std::fs::write(&file, &bytes).unwrap();
        let out = ember(&[
            "eval",
            "--checkpoint",
            s(&file),
            "--data-dir",
            s(&jv),
            "--dataset",
            "japanese-vowels",
        ]);
        fails_with(&out, says);
        // the file the user had is left as it was
        assert_eq!(std::fs::read(&file).unwrap(), bytes);
    }
}

#[test]
fn malformed_sequence_data_is_refused_naming_the_file() {
    let dir = scratch("bcr-bad-data");
    let jv = jv_dir(&dir);
    let out = dir.join("never");
    std::fs::write(
        jv.join("JapaneseVowels_TEST.ts"),
        "@dimensions 12\n@classLabel true 1 2\n@data\n1,2:3\n",
    )
    .unwrap();
    let run = ember(&gru_args(&jv, &out, "1", &[]));
    fails_with(&run, "JapaneseVowels_TEST.ts");
    assert!(!out.exists());
    // an image model on a sequence dataset, a GRU on images
    let mut args = gru_args(&jv, &out, "1", &[]);
    args[2] = "lenet5";
    fails_with(&ember(&args), "use --model gru");
    let run = ember(&["train", "--model", "gru", "--out", s(&out)]);
    fails_with(&run, "classifies sequences");
    assert!(!out.exists());
    // FSDD: a recording that is not 8 kHz mono 16-bit, inside the archive
    let wav = include_bytes!("../../../src/data/fixtures/0_jackson_0.wav");
    let mut fast = wav.to_vec();
    // the sample rate and the byte rate of the canonical 44-byte header
    fast[24..28].copy_from_slice(&16_000u32.to_le_bytes());
    fast[28..32].copy_from_slice(&32_000u32.to_le_bytes());
    let archive = dir.join("fsdd.tar.gz");
    {
        let gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&archive).unwrap(),
            flate2::Compression::fast(),
        );
        let mut tar = tar::Builder::new(gz);
        let mut header = tar::Header::new_gnu();
        header.set_size(fast.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, "recordings/0_jackson_0.wav", fast.as_slice())
            .unwrap();
        tar.into_inner().unwrap().finish().unwrap();
    }
    let run = ember(&[
        "train",
        "--model",
        "gru",
        "--dataset",
        "fsdd",
        "--data-dir",
        s(&archive),
        "--out",
        s(&out),
    ]);
    fails_with(&run, "0_jackson_0.wav");
    fails_with(&run, "8000 Hz mono 16-bit");
    assert!(!out.exists());
}

#[test]
fn the_tuner_prints_a_block_per_layer() {
    let out = ember(&[
        "tune-bcr",
        "--model",
        "gru",
        "--dataset",
        "japanese-vowels",
        "--rate",
        "4",
        "--rows",
        "4",
        "--repeats",
        "1",
        "--blocks",
        "1x4,2x4",
    ]);
    let table = ok(&out);
    assert!(
        table.contains("| grus.1.new_gate.hidden_transform | 256 × 256 |"),
        "{table}"
    );
    assert!(table.contains("| head | 9 × 256 |"), "{table}");
    for (args, says) in [
        (vec!["--rate", "1"], "a pruning rate is a number above 1"),
        (vec!["--blocks", "4y16"], "is not a block"),
        (vec!["--blocks", "0x16"], "at least one row"),
        (
            vec!["--threshold", "nan"],
            "--threshold: level: tuner threshold NaN",
        ),
        (
            vec!["--threshold=-1"],
            "--threshold: level: tuner threshold -1",
        ),
        // a block larger than every layer: no layer is tuned, whatever the table shows
        (
            vec!["--blocks", "100000x100000", "--rows", "4", "--repeats", "1"],
            "no layer could be tuned (13 of 13 failed)",
        ),
        // rows past what a tensor holds: refused before anything is allocated
        (
            vec!["--rows", "100000000"],
            "would have tensors of more than 2147483648 elements; at most --rows",
        ),
    ] {
        let mut all = vec!["tune-bcr", "--model", "gru", "--dataset", "fsdd"];
        all.extend(args);
        fails_with(&ember(&all), says);
    }
}

#[test]
fn options_and_state_that_do_not_hold_together_are_refused() {
    let dir = scratch("bcr-bad-options");
    let jv = jv_dir(&dir);
    let never = dir.join("never");
    // --from belongs to a pruning run
    let run = ember(&gru_args(&jv, &never, "1", &["--from", s(&dir)]));
    fails_with(&run, "--from RUN starts a --hinm or --bcr run");
    assert!(!never.exists());
    // the tuner needs rows to multiply
    let tune = ember(&[
        "tune-bcr",
        "--model",
        "gru",
        "--dataset",
        "fsdd",
        "--rows",
        "0",
    ]);
    fails_with(&tune, "must be at least 1");
    // a one-shot run whose BCR state was damaged is not resumed from it
    let run = dir.join("run");
    ok(&ember(&gru_args(&jv, &run, "2", &["--bcr", "4x:4x4"])));
    let state = run.join("checkpoint/bcr-2.bin");
    let mut bytes = std::fs::read(&state).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&state, &bytes).unwrap();
    let manifest = std::fs::read(run.join("ember-run.json")).unwrap();
    let mut resume = gru_args(&jv, &run, "3", &["--bcr", "4x:4x4"]);
    resume.push("--resume");
    let out = ember(&resume);
    fails_with(&out, "bcr-2.bin");
    fails_with(&out, "is corrupt");
    assert_eq!(std::fs::read(run.join("ember-run.json")).unwrap(), manifest);
    // pruning a model file with no run beside it
    let lone = dir.join("lone");
    std::fs::create_dir_all(&lone).unwrap();
    std::fs::copy(run.join("model.mpk"), lone.join("model.mpk")).unwrap();
    let out = ember(&[
        "prune",
        "--bcr",
        "4x:4x4",
        "--checkpoint",
        s(&lone.join("model.mpk")),
        "--out",
        s(&never),
    ]);
    fails_with(&out, "no ember-run.json beside it");
    assert!(!never.exists());
}
