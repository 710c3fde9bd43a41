//! BCR training state: the layer plan, one-shot masks, ADMM updates, hard pruning and the
//! checkpointed state.

use burn_bcr::Level;
use burn_bcr::project::project;
use ember_train::bcr::{self, BcrState, BcrTrain, Params, view_of};
use ember_train::policy::LayerPolicy;
use std::collections::BTreeMap;

fn level(s: &str) -> Level {
    s.parse().unwrap()
}

fn params() -> Params {
    let w = |n: usize, seed: usize| -> Vec<f32> {
        (0..n)
            .map(|i| (((i * 7919 + seed * 31) % 1009) as f32 - 504.0) / 504.0)
            .collect()
    };
    [
        ("a.weight", vec![16, 32], w(512, 1)),
        ("b.weight", vec![32, 8, 2, 2], w(1024, 2)),
        ("head.weight", vec![32, 10], w(320, 3)),
    ]
    .into_iter()
    .map(|(p, d, v)| (p.to_string(), (d, v)))
    .collect()
}

fn shapes(p: &Params) -> BTreeMap<String, Vec<usize>> {
    p.iter().map(|(k, (d, _))| (k.clone(), d.clone())).collect()
}

const LAYERS: [&str; 3] = ["a", "b", "head"];

#[test]
fn the_plan_prunes_all_but_the_classifier_and_skips_what_its_block_misses() {
    let p = params();
    let layers = LAYERS.map(String::from);
    let (plan, notes) = bcr::plan(&shapes(&p), &layers, None, level("4x:4x4")).unwrap();
    let names: Vec<&str> = plan.iter().map(|p| p.weight.as_str()).collect();
    assert_eq!(names, ["a.weight", "b.weight"]);
    assert!(notes.is_empty());
    // a 4 × 64 block: a's view is 32 × 16, b's 32 × 32
    let e = plan_err(&p, "4x:4x64");
    assert!(e.contains("no layer of this model can be pruned"), "{e}");
    let (plan, notes) = bcr::plan(&shapes(&p), &layers, None, level("4x:4x32")).unwrap();
    assert_eq!(plan.len(), 1);
    assert!(notes[0].contains("a (32 × 16) stays dense"), "{notes:?}");
    // a policy naming a layer its block does not fit is an error
    let policy =
        LayerPolicy::from_toml("p", "[[layer]]\npath = \"a\"\nbcr = \"4x:4x32\"\n").unwrap();
    let e = bcr::plan(&shapes(&p), &layers, Some(&policy), level("4x:4x4"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("layer a (32 outputs × 16 inputs)"), "{e}");
}

fn plan_err(p: &Params, l: &str) -> String {
    bcr::plan(&shapes(p), &LAYERS.map(String::from), None, level(l))
        .unwrap_err()
        .to_string()
}

fn opts(admm: Option<usize>) -> BcrTrain {
    BcrTrain {
        level: level("4x:4x4"),
        admm_every: admm,
        per_epoch: 1,
        smooth: false,
        retrain: 2,
        from: None,
    }
}

#[test]
fn one_shot_masks_keep_the_rate_in_the_burn_layout() {
    let p = params();
    let (plan, _) = bcr::plan(
        &shapes(&p),
        &LAYERS.map(String::from),
        None,
        level("4x:4x4"),
    )
    .unwrap();
    let state = BcrState::start(&opts(None), 4, &plan, &p).unwrap();
    let masks = state.masks();
    assert_eq!(
        masks["a.weight"].iter().filter(|&&m| m == 1.0).count(),
        512 / 4
    );
    assert_eq!(
        masks["b.weight"].iter().filter(|&&m| m == 1.0).count(),
        1024 / 4
    );
    // the kept entries of a Linear weight are the view's, transposed back
    let view = view_of(&[16, 32], &p["a.weight"].1).unwrap();
    let want = project(&view, level("4x:4x4")).unwrap();
    let back = view_of(&[16, 32], &masks["a.weight"]).unwrap();
    assert_eq!(
        back.data.iter().map(|&m| m == 1.0).collect::<Vec<_>>(),
        want.dense()
    );
}

#[test]
fn admm_state_updates_hard_prunes_and_round_trips() {
    let mut p = params();
    let o = opts(Some(1));
    let (plan, _) = bcr::plan(&shapes(&p), &LAYERS.map(String::from), None, o.level).unwrap();
    let mut state = BcrState::start(&o, 5, &plan, &p).unwrap();
    assert!(state.in_admm() && state.masks().is_empty());
    let d0 = state.relative_distance(&p).unwrap().unwrap();
    // the weights move towards Z, as the penalty pulls them
    for pruned in state.plan() {
        let target = state.target(&pruned.weight).unwrap().to_vec();
        let (dims, w) = p.get_mut(&pruned.weight).unwrap();
        assert_eq!(&pruned.dims, dims);
        for (w, t) in w.iter_mut().zip(&target) {
            *w = 0.5 * *w + 0.5 * t;
        }
    }
    assert!(state.relative_distance(&p).unwrap().unwrap() < d0);
    let (lines, hard) = state.end_epoch(1, &p).unwrap();
    assert!(
        !hard && lines.len() == 2 && lines[0].contains("ADMM update 1"),
        "{lines:?}"
    );
    let bytes = state.to_bytes();
    let back = BcrState::from_bytes(&bytes, &o, 5, &plan).unwrap();
    assert_eq!(back.to_bytes(), bytes);
    // ADMM state is not taken by a one-shot run
    let e = BcrState::from_bytes(&bytes, &opts(None), 5, &plan).unwrap_err();
    assert!(e.contains("this run is one-shot"), "{e}");
    // epochs 5, retrain 2: epoch 3 is the last ADMM epoch
    let (lines, hard) = state.end_epoch(3, &p).unwrap();
    assert!(hard && lines[0].contains("hard-pruned"), "{lines:?}");
    assert!(!state.in_admm());
    assert_eq!(
        state.masks()["a.weight"]
            .iter()
            .filter(|&&m| m == 1.0)
            .count(),
        128
    );
    let bytes = state.to_bytes();
    assert_eq!(
        BcrState::from_bytes(&bytes, &o, 5, &plan).unwrap().masks(),
        state.masks()
    );
    // damaged state is refused with a reason
    // (re-framed with a valid CRC-32, so the state's own checks are reached)
    let (header, _) = BcrState::FORMAT.read(&bytes).unwrap();
    let payload = &bytes[16 + header.len()..bytes.len() - 4];
    let reframe = |payload: &[u8]| BcrState::FORMAT.write(header, payload);
    let e =
        BcrState::from_bytes(&reframe(&payload[..payload.len() - 3]), &o, 5, &plan).unwrap_err();
    assert!(e.contains("truncated"), "{e}");
    let e = BcrState::from_bytes(&bytes[..bytes.len() - 3], &o, 5, &plan).unwrap_err();
    assert!(e.contains("corrupt"), "{e}");
    let e = BcrState::from_bytes(&bytes, &o, 5, &plan[..1]).unwrap_err();
    assert!(e.contains("2 pruned layers, this run 1"), "{e}");
    // a mask value that is not 0 or 1 (the last f32 of the file)
    let mut odd = payload.to_vec();
    let at = odd.len() - 4;
    odd[at..].copy_from_slice(&0.5f32.to_le_bytes());
    let e = BcrState::from_bytes(&reframe(&odd), &o, 5, &plan).unwrap_err();
    assert!(e.contains("is not 0/1"), "{e}");
    let e = BcrState::from_bytes(b"\x02\x00\x00\x00{x", &o, 5, &plan).unwrap_err();
    assert!(e.contains("not JSON"), "{e}");
    // the unframed state of an earlier Ember still reads
    let mut unframed = (header.len() as u32).to_le_bytes().to_vec();
    unframed.extend_from_slice(header);
    unframed.extend_from_slice(payload);
    let back = BcrState::from_bytes(&unframed, &o, 5, &plan).unwrap();
    assert_eq!(back.to_bytes(), bytes);
}

#[test]
fn several_admm_updates_an_epoch_fall_inside_it() {
    let p = params();
    let o = BcrTrain {
        per_epoch: 4,
        ..opts(Some(1))
    };
    let (plan, _) = bcr::plan(&shapes(&p), &LAYERS.map(String::from), None, o.level).unwrap();
    // epochs 5, retrain 2: epochs 1 to 3 are ADMM's, 4 updates each (the last at the end)
    let mut state = BcrState::start(&o, 5, &plan, &p).unwrap();
    let due: Vec<usize> = (1..=10).filter(|&s| state.update_due(1, s, 10)).collect();
    assert_eq!(due, [3, 5, 8]);
    assert_eq!(
        (1..=2).filter(|&s| state.update_due(2, s, 2)).count(),
        1,
        "fewer steps than updates: one inside, one at the end"
    );
    assert!(!state.update_due(4, 3, 10), "not after the ADMM epochs");
    let single = BcrState::start(&opts(Some(1)), 5, &plan, &p).unwrap();
    assert!((1..=10).all(|s| !single.update_due(1, s, 10)));
    for _ in &due {
        state.step_update(&p).unwrap();
    }
    // 12 updates in 4 stages of 3: the end of epoch 1 is the 4th, ρ in its second stage
    let (lines, hard) = state.end_epoch(1, &p).unwrap();
    assert!(
        !hard && lines[0].contains("ADMM update 4,") && lines[0].contains("ρ now 1e-3"),
        "{lines:?}"
    );
    assert!(o.describe().contains("4 updates an epoch"));
    assert!(!opts(Some(1)).describe().contains("updates an epoch"));
}

#[test]
fn admm_options_are_checked() {
    let per = |every, n| BcrTrain {
        per_epoch: n,
        ..opts(Some(every))
    };
    let e = per(1, 0).validate(5).unwrap_err().to_string();
    assert!(e.contains("--admm-per-epoch must be at least 1"), "{e}");
    let e = per(2, 3).validate(5).unwrap_err().to_string();
    assert!(e.contains("need one every epoch"), "{e}");
    assert!(per(1, 3).validate(5).is_ok());
    assert!(opts(Some(1)).validate(3).is_ok());
    let e = opts(Some(1)).validate(2).unwrap_err().to_string();
    assert!(e.contains("masked retraining at least one"), "{e}");
    let e = opts(Some(0)).validate(5).unwrap_err().to_string();
    assert!(e.contains("--admm-every must be at least 1"), "{e}");
    assert!(opts(None).validate(1).is_ok());
    assert!(
        opts(Some(2))
            .describe()
            .contains("admm every 2 (staged), retrain 2")
    );
}
