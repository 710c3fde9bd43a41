//! Per-layer policies in the library: two `Linear`s of one unmodified model run two different
//! multipliers in the forward pass and in both gradients, and the effects the ops recorded say
//! so, row by row.

use burn::backend::{NdArray, Wgpu};
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::optim::{GradientsParams, Optimizer};
use burn::tensor::{Tensor, TensorData};
use burn_approx_mul::{ApproxDevice, ApproxMul, Multiplier};
use burn_sparse_act::Policy;
use cubecl_kernels::decorator::KernelBackend;
use cubecl_kernels::decorator::effects::{self, Pass};
use ember_train::backend::{Stack, stack_device};
use ember_train::fused_optim::{FusedAdam, FusedSgd};
use ember_train::policy::{LayerPolicy, contraction_layers, tag_layers};

#[derive(Module, Debug)]
struct TwoLayers<B: burn::tensor::backend::Backend> {
    fc1: Linear<B>,
    fc2: Linear<B>,
}

fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 997.0 - 0.45)
        .collect()
}

fn values<B: burn::tensor::backend::Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data().to_vec::<f32>().unwrap()
}

/// Output, dx, dW1, dW2 of `sum(fc2(fc1(x)))` under the policy's model on the stack over `I`;
/// with `steps`, after a step of each fused optimizer at rate 0 (the values stay, and the
/// layers' tags must too).
fn under_policy<I: KernelBackend>(policy: &str, steps: bool) -> ([Vec<f32>; 4], effects::Effects) {
    type S<I> = Stack<I>;
    let device = stack_device::<I>(Multiplier::native(), Policy::default());
    let model = TwoLayers::<S<I>> {
        fc1: LinearConfig::new(6, 5).with_bias(false).init(&device),
        fc2: LinearConfig::new(5, 3).with_bias(false).init(&device),
    };
    let model = model.load_record(TwoLayersRecord {
        fc1: burn::nn::LinearRecord {
            weight: burn::module::Param::from_data(TensorData::new(data(30, 1), [6, 5]), &device),
            bias: None,
        },
        fc2: burn::nn::LinearRecord {
            weight: burn::module::Param::from_data(TensorData::new(data(15, 2), [5, 3]), &device),
            bias: None,
        },
    });
    let layers = contraction_layers(&ember_models::params::float_shapes(&model));
    assert_eq!(layers, ["fc1", "fc2"]);
    let choices = LayerPolicy::from_toml("test", policy)
        .unwrap()
        .resolve(&layers)
        .unwrap();
    let mut model = tag_layers::<S<I>, _>(model, &choices);
    let x =
        Tensor::<S<I>, 2>::from_data(TensorData::new(data(24, 3), [4, 6]), &device).require_grad();
    if steps {
        let mut adam = FusedAdam::default().init::<S<I>, TwoLayers<S<I>>>();
        let mut sgd = FusedSgd::new(Some((0.9, 0.0)), Some(5e-4)).init::<S<I>, TwoLayers<S<I>>>();
        for _ in 0..2 {
            let grads = model
                .fc2
                .forward(model.fc1.forward(x.clone()))
                .sum()
                .backward();
            model = adam.step(
                0.0,
                model.clone(),
                GradientsParams::from_grads(grads, &model),
            );
            let grads = model
                .fc2
                .forward(model.fc1.forward(x.clone()))
                .sum()
                .backward();
            model = sgd.step(
                0.0,
                model.clone(),
                GradientsParams::from_grads(grads, &model),
            );
        }
    }
    effects::start();
    let y = model.fc2.forward(model.fc1.forward(x.clone()));
    let grads = y.clone().sum().backward();
    let seen = effects::finish();
    (
        [
            values(y),
            values(x.grad(&grads).unwrap()),
            values(model.fc1.weight.val().grad(&grads).unwrap()),
            values(model.fc2.weight.val().grad(&grads).unwrap()),
        ],
        seen,
    )
}

/// The same four by hand on `ApproxMul<I>`: every product of fc1's contractions under `m1`, of
/// fc2's under `m2`.
fn by_hand<I: KernelBackend>(m1: &str, m2: &str) -> [Vec<f32>; 4] {
    let on = |m: &str| ApproxDevice::<I>::new(Default::default(), Multiplier::parse(m).unwrap());
    let (d1, d2) = (on(m1), on(m2));
    let t = |v: Vec<f32>, shape: [usize; 2], d: &ApproxDevice<I>| {
        Tensor::<ApproxMul<I>, 2>::from_data(TensorData::new(v, shape), d)
    };
    let x = data(24, 3);
    let (w1, w2) = (data(30, 1), data(15, 2));
    let h = values(t(x.clone(), [4, 6], &d1).matmul(t(w1.clone(), [6, 5], &d1)));
    let y = values(t(h.clone(), [4, 5], &d2).matmul(t(w2.clone(), [5, 3], &d2)));
    let ones = vec![1.0; 12];
    let dw2 = values(
        t(h, [4, 5], &d2)
            .transpose()
            .matmul(t(ones.clone(), [4, 3], &d2)),
    );
    let dh = values(t(ones, [4, 3], &d2).matmul(t(w2, [5, 3], &d2).transpose()));
    let dw1 = values(
        t(x, [4, 6], &d1)
            .transpose()
            .matmul(t(dh.clone(), [4, 5], &d1)),
    );
    let dx = values(t(dh, [4, 5], &d1).matmul(t(w1, [6, 5], &d1).transpose()));
    [y, dx, dw1, dw2]
}

fn two_linears<I: KernelBackend>(route: &str, steps: bool) {
    let policy = r#"
        [[layer]]
        path = "fc1"
        multiplier = "mitchell7"
        [[layer]]
        path = "fc2"
        multiplier = "bf16"
    "#;
    let (got, seen) = under_policy::<I>(policy, steps);
    let names = ["output", "dx", "dW1", "dW2"];
    let want = by_hand::<I>("mitchell7", "bf16");
    for i in 0..4 {
        assert_eq!(got[i], want[i], "{} under the policy", names[i]);
    }
    // and it is not what one multiplier everywhere gives
    for uniform in [
        by_hand::<I>("mitchell7", "mitchell7"),
        by_hand::<I>("bf16", "bf16"),
    ] {
        assert!(
            (0..4).any(|i| got[i] != uniform[i]),
            "the two layers must differ"
        );
    }
    // the recorded effects: every pass of every layer, from the ops that ran
    for (layer, mul, products) in [("fc1", "mitchell7", 4 * 6 * 5), ("fc2", "bf16", 4 * 5 * 3)] {
        let l = &seen.layers[layer];
        for pass in [Pass::Forward, Pass::InputGrad, Pass::WeightGrad] {
            let ran = &l.passes[pass.index()];
            assert_eq!(ran.len(), 1, "{layer} {pass:?}: {ran:?}");
            assert_eq!(ran[0].multiplier, mul, "{layer} {pass:?}");
            assert_eq!(ran[0].multiplies, products as u64, "{layer} {pass:?}");
            assert!(ran[0].approximate);
            assert_eq!(ran[0].route, route);
        }
        assert_eq!(l.stored.len(), 1, "{layer}: {:?}", l.stored);
        assert_eq!(l.stored[0].how, "dense: the layer is not pruned");
    }
    assert!(
        !seen.layers.contains_key(""),
        "nothing ran outside the layers"
    );
}

#[test]
fn two_linears_run_two_multipliers_forward_and_in_both_gradients_on_ndarray() {
    two_linears::<NdArray>("host reference: this backend has no CubeCL kernels", false);
}

#[test]
fn the_layers_keep_their_multipliers_through_the_fused_optimizer_steps() {
    two_linears::<NdArray>("host reference: this backend has no CubeCL kernels", true);
    two_linears::<Wgpu>("CubeCL kernel on WgpuRuntime, table in shared memory", true);
}

#[test]
fn two_linears_run_two_multipliers_forward_and_in_both_gradients_on_wgpu() {
    two_linears::<Wgpu>(
        "CubeCL kernel on WgpuRuntime, table in shared memory",
        false,
    );
}

#[test]
fn a_pruned_layer_reports_the_bytes_it_kept_and_a_report_has_a_row_per_layer() {
    let policy = r#"
        [default]
        multiplier = "bf16"
        [[layer]]
        path = "fc2"
        multiplier = "native"
        sparse-act = "0.6:1"
    "#;
    let (got, seen) = under_policy::<NdArray>(policy, false);
    // fc2's input [4, 5] keeps 2 of 5 blocks of width 1 per sample
    let fc2 = &seen.layers["fc2"];
    assert_eq!(fc2.stored[0].how, "block-sparse 0.6:1");
    assert_eq!(fc2.stored[0].dense_bytes, 4 * 5 * 4);
    // values [4, 2, 1], col [4, 2], crow [4, 5 + 1], 32-bit each: on a 5-wide input the block
    // indices cost more than the pruning saves, which is what the report is there to show
    assert_eq!(fc2.stored[0].kept_bytes, (8 + 8 + 24) * 4);
    assert_eq!(fc2.passes[Pass::Forward.index()][0].multiplier, "native");
    assert!(!fc2.passes[Pass::Forward.index()][0].approximate);
    let choices = LayerPolicy::from_toml("test", policy)
        .unwrap()
        .resolve(&["fc1".into(), "fc2".into()])
        .unwrap();
    let report = ember_train::effects::report(&seen, 1, "step", &choices, "native", None);
    let rows: Vec<(&str, &str, &str)> = report
        .layers
        .iter()
        .map(|r| (r.layer.as_str(), r.asked.as_str(), r.forward.as_str()))
        .collect();
    assert_eq!(rows, [("fc1", "bf16", "bf16"), ("fc2", "native", "native")]);
    assert_eq!(report.layers[0].approx_multiplies, 3 * 4 * 6 * 5);
    assert_eq!(report.layers[1].approx_multiplies, 0);
    assert!(got[0].iter().all(|v| v.is_finite()));
}

#[test]
fn the_shipped_policy_and_energy_examples_apply_to_lenet5() {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples");
    let policy =
        LayerPolicy::from_arg(examples.join("lenet5-policy.toml").to_str().unwrap()).unwrap();
    let layers = ["conv1", "conv2", "fc1", "fc2", "fc3"].map(String::from);
    let lines: Vec<String> = policy
        .resolve(&layers)
        .unwrap()
        .iter()
        .map(|c| c.to_string())
        .collect();
    assert_eq!(
        lines,
        [
            "conv1: multiplier native",
            "conv2: multiplier afm16",
            "fc1: multiplier afm16, sparse-act 0.5:4",
            "fc2: multiplier afm16, sparse-act 0.5:4",
            "fc3: multiplier native, sparse-act off",
        ]
    );
    let needed = ["afm16", "native", "bf16", "mbm7"].map(String::from);
    let energy =
        ember_train::effects::EnergyTable::read(&examples.join("energy-45nm.toml"), &needed)
            .unwrap();
    assert_eq!(energy.per_multiply("native"), Some(3.7));
    assert_eq!(energy.per_multiply("afm16"), Some(0.074));
    let err = ember_train::effects::EnergyTable::read(
        &examples.join("energy-45nm.toml"),
        &["mitchell7".to_string()],
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("no [multiply] figure for mitchell7"),
        "{err}"
    );
}

#[test]
fn bad_energy_files_are_clear_errors() {
    let dir = std::env::temp_dir().join(format!("ember-energy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text, needle) in [
        (
            "syntax.toml",
            "[multiply\nfp32 = 1",
            "not an energy file: line 1",
        ),
        (
            "field.toml",
            "[multiply]\nfp32 = 1.0\n[memory]\nbyte = 1.0\nwatts = 2",
            "unknown field `watts`",
        ),
        (
            "negative.toml",
            "[multiply]\nfp32 = -1.0\n[memory]\nbyte = 1.0",
            "fp32 = -1 is not a finite energy",
        ),
        (
            "nan.toml",
            "[multiply]\nfp32 = 1.0\n[memory]\nbyte = nan",
            "memory.byte = NaN is not a finite energy",
        ),
        (
            "nofp32.toml",
            "[multiply]\nbf16 = 1.0\n[memory]\nbyte = 1.0",
            "no [multiply] figure for fp32",
        ),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let err = ember_train::effects::EnergyTable::read(&path, &[]).unwrap_err();
        assert!(err.to_string().contains(needle), "{name}: {err}");
    }
    let missing = ember_train::effects::EnergyTable::read(&dir.join("none.toml"), &[]).unwrap_err();
    assert!(missing.to_string().contains("cannot read it"), "{missing}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_policys_weight_level_without_its_technique_is_refused_before_anything_is_written() {
    let _rng = crate::seeded();
    for (name, level) in [("hinm", "75:v4"), ("bcr", "4x:4x4")] {
        let (err, left) = refused_training(&format!(
            "[[layer]]\npath = \"fc1\"\n{name} = \"{level}\"\n"
        ));
        assert!(
            err.contains(&format!(
                "--policy test.toml: layer fc1 sets {name} = \"{level}\""
            )) && err.contains(&format!("no --{name}")),
            "{err}"
        );
        assert!(!left, "{name}: nothing written");
    }
}

/// A LeNet-5 training on 16 embedded images under `policy` (a policy file's text, named
/// `test.toml`) into a fresh directory, expected to fail: the error, and whether the run
/// directory was left.
fn refused_training(policy: &str) -> (String, bool) {
    use ember_models::classifier::ModelKind;
    use ember_models::data::{DataSource, mnist::MnistSource};
    use ember_train::train::{TrainOptions, train};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let opts = TrainOptions {
        policy: Some(LayerPolicy::from_toml("test.toml", policy).unwrap()),
        epochs: 1,
        batch_size: 8,
        train_limit: Some(16),
        test_limit: Some(16),
        plain: true,
        ..TrainOptions::new(
            ModelKind::Lenet5,
            DataSource::Mnist(MnistSource::Embedded),
            &out,
        )
    };
    let err = train(opts).expect_err(policy).to_string();
    (err, out.exists())
}

#[test]
fn a_policys_sparse_act_is_checked_as_the_command_lines_is() {
    let _rng = crate::seeded();
    // fc1 takes 400 inputs, fc3 84; conv1 is no linear layer
    for (path, pruning, says) in [
        (
            "fc*",
            "0.5:65536",
            "1 block of width 65536 per input row of 400",
        ),
        (
            "fc3",
            "0.5:1000",
            "1 block of width 1000 per input row of 84",
        ),
        ("fc1", "0:4", "100 blocks of width 4 per input row of 400"),
        ("conv1", "0.5:4", "linear layers only"),
    ] {
        let (err, left) = refused_training(&format!(
            "[[layer]]\npath = \"{path}\"\nsparse-act = \"{pruning}\"\n"
        ));
        assert!(
            err.starts_with("--policy test.toml: layer ")
                && err.contains(&format!("sets sparse-act = \"{pruning}\""))
                && err.contains(says),
            "{path} {pruning}: {err}"
        );
        assert!(!left, "{path} {pruning}: nothing written");
    }
}

#[test]
fn a_policy_rule_that_sets_nothing_is_refused_naming_the_file_and_the_rule() {
    let err = LayerPolicy::from_toml("test.toml", "[[layer]]\npath = \"fc1\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--policy test.toml: layer \"fc1\" sets nothing"),
        "{err}"
    );
    // an empty [default] is no rule: a file with only layer rules is the usual form
    LayerPolicy::from_toml(
        "test.toml",
        "[default]\n[[layer]]\npath = \"fc1\"\nmultiplier = \"afm16\"\n",
    )
    .unwrap();
}

#[test]
fn a_policys_hinm_level_that_does_not_fit_its_layer_names_the_file_and_the_layer() {
    use burn_hinm::gyro::Method;
    use ember_models::classifier::{ModelKind, ModelVisitor, TrainableClassifier};
    use ember_models::data::{DataSpec, ImageSpec};
    type A = burn::backend::Autodiff<NdArray>;
    struct Params;
    impl ModelVisitor<A> for Params {
        type Output = std::collections::BTreeMap<String, (Vec<usize>, Vec<f32>)>;
        fn visit<M: TrainableClassifier<A>>(self, model: M) -> Self::Output {
            burn_hinm::module::params(&model)
        }
    }
    let _rng = crate::seeded();
    let spec = DataSpec::Images(ImageSpec {
        channels: 1,
        side: 28,
        classes: 10,
    });
    let all = ModelKind::Lenet300
        .build::<A, _>(spec, &Default::default(), Params)
        .unwrap();
    let shapes: Vec<(String, Vec<usize>)> = all
        .iter()
        .map(|(k, (d, _))| (k.clone(), d.clone()))
        .collect();
    let layers = contraction_layers(&shapes);
    // fc1 has 300 outputs: a tile of 64 rows does not divide them
    let policy = LayerPolicy::from_toml(
        "test.toml",
        "[[layer]]\npath = \"fc1\"\nhinm = \"75:v64\"\n",
    )
    .unwrap();
    let level = "75:v4".parse().unwrap();
    let err = ember_train::hinm::plan(&all, &layers, Some(&policy), level, Method::Gyro, 7, false)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("--policy test.toml: layer fc1 sets hinm = \"75:v64\""),
        "{err}"
    );
}
