//! `ember train --act prelu`: PReLU(channels) in the LeNets and the ResNets, one fused autodiff
//! node per site; the choice is recorded, kept on resume and used by `ember eval`; bad choices
//! are refused before anything is written.

use crate::common::{ember, fails_with, ok, read_manifest, s, scratch, small_train_args};

#[test]
fn a_prelu_lenet_trains_records_its_activation_and_evaluates() {
    let run = scratch("prelu-lenet");
    let mut args = small_train_args("lenet5", &run);
    args.extend([
        "--act",
        "prelu",
        "--sparse-act",
        "0.5:4",
        "--multiplier",
        "afm16",
    ]);
    ok(&ember(&args));
    let manifest = read_manifest(&run);
    assert_eq!(manifest["act"], "prelu");
    assert!(
        manifest["history"][0]["valid_loss"]
            .as_f64()
            .unwrap()
            .is_finite()
    );
    // eval builds the model with the run's activation (a ReLU LeNet-5 has no slopes to load)
    let eval = ok(&ember(&["eval", "--checkpoint", s(&run)]));
    assert!(eval.contains("accuracy"), "{eval}");
    // a resumed run keeps its activation
    let mut more = small_train_args("lenet5", &run);
    let epochs = more.iter().position(|&a| a == "--epochs").unwrap();
    more[epochs + 1] = "2";
    more.extend(["--sparse-act", "0.5:4", "--multiplier", "afm16"]);
    more.extend(["--act", "relu", "--resume"]);
    fails_with(&ember(&more), "it was started with --act prelu, not relu");
}

#[test]
fn bad_activations_are_refused_before_anything_is_written() {
    let out = scratch("bad-act");
    let mut args = small_train_args("resmlp-small", &out);
    args.extend(["--act", "prelu"]);
    fails_with(
        &ember(&args),
        "--act prelu applies to the LeNets and the ResNets, not to resmlp-small",
    );
    assert!(!out.exists(), "nothing is written for a refused run");
    let mut args = small_train_args("lenet5", &out);
    args.extend(["--act", "tanh"]);
    fails_with(&ember(&args), "unknown activation \"tanh\" (relu, prelu)");
    assert!(!out.exists());
}
