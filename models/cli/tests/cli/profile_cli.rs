//! `ember profile`: a step's kernels on wgpu (lavapipe here) beside its wall time, and the
//! inputs it refuses before measuring anything.

use crate::common::{ember, fails_with, ok, s, scratch};

const LENET: [&str; 11] = [
    "profile",
    "--model",
    "lenet5",
    "--backend",
    "wgpu",
    "--batch-size",
    "4",
    "--warmup",
    "1",
    "--steps",
    "2",
];

/// `LENET` with the flags and values of `extra`: a flag it has takes the new value, others are
/// added.
fn lenet(extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = LENET.iter().map(|a| a.to_string()).collect();
    for pair in extra.chunks(2) {
        match args.iter().position(|a| a == pair[0]) {
            Some(i) => args[i + 1] = pair[1].to_string(),
            None => args.extend(pair.iter().map(|a| a.to_string())),
        }
    }
    args
}

fn run(args: &[String]) -> std::process::Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ember(&args)
}

#[test]
fn a_lenet_step_is_profiled_kernel_by_kernel_and_the_report_kept() {
    let tmp = scratch("profile");
    std::fs::create_dir_all(&tmp).unwrap();
    let out = tmp.join("profile.md");
    let stdout = ok(&run(&lenet(&["--out", s(&out)])));
    assert!(
        stdout.starts_with("# Kernel profile: lenet5, batch 4, wgpu backend, multiplier native"),
        "{stdout}"
    );
    // the GEMM route's convolutions: Ember's im2col and Burn's matmul
    assert!(stdout.contains("| Im2colKernel |"), "{stdout}");
    assert!(stdout.contains("| MatmulEntry |"), "{stdout}");
    let wall: f64 = number_after(&stdout, "profiler off: **");
    let device: f64 = number_after(&stdout, "the same steps): **");
    assert!(wall > 0.0 && device > 0.0, "{stdout}");
    // the kernels' rows add up to the step's device time
    let rows: f64 = stdout
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| kernel"))
        .map(|l| {
            l.split(" | ")
                .nth(2)
                .unwrap()
                .trim()
                .parse::<f64>()
                .unwrap()
        })
        .sum();
    assert!(
        (rows - device).abs() < 0.01 * device + 0.01,
        "{rows} vs {device}"
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), stdout);

    // never overwritten
    std::fs::write(&out, "mine").unwrap();
    fails_with(&run(&lenet(&["--out", s(&out)])), "already exists");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "mine");

    // Burn's own convolution kernels instead of the im2col route
    let burn = ok(&run(&lenet(&["--conv", "burn"])));
    assert!(burn.contains("(--conv burn)"), "{burn}");
    assert!(!burn.contains("Im2colKernel"), "{burn}");
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn a_chosen_matmul_kernel_is_timed_without_the_kernel_profile_and_its_use_reported() {
    let mut args = lenet(&["--matmul", "simple-unit"]);
    args.push("--wall-only".into());
    let stdout = ok(&run(&args));
    assert!(
        stdout.contains("(--conv gemm, --matmul simple-unit)"),
        "{stdout}"
    );
    // the convolutions' GEMMs and the linear layers: a few products a step, none refused
    let products = number_after(&stdout, "Native matmuls on `simple-unit`: ");
    assert!(products >= 4.0, "{stdout}");
    assert!(
        stdout.contains(" a step, 0 of them on Burn's own matmul instead."),
        "{stdout}"
    );
    assert!(stdout.ends_with("- Kernels not profiled.\n"), "{stdout}");
    assert!(!stdout.contains("| kernel |"), "{stdout}");
}

/// The number after `marker` in `text`.
fn number_after(text: &str, marker: &str) -> f64 {
    let rest = text.split_once(marker).expect(marker).1;
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap();
    rest[..end].parse().unwrap()
}

#[test]
fn what_cannot_be_profiled_is_refused_before_measuring() {
    let tmp = scratch("profile-bad");
    let cases: [(&[&str], &str); 7] = [
        (&["--backend", "ndarray"], "runs no kernels"),
        (&["--steps", "0"], "--steps must be at least 1"),
        (&["--batch-size", "0"], "--batch-size must be at least 1"),
        (&["--frames", "0"], "--frames must be at least 1"),
        (&["--model", "gru"], "gru"),
        (&["--multiplier", "nosuch"], "nosuch"),
        (&["--stage", "nosuch"], "unknown stage nosuch"),
    ];
    for (extra, needle) in cases {
        let out = run(&lenet(extra));
        fails_with(&out, needle);
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("timing"),
            "{extra:?} measured before refusing"
        );
    }
    let missing = tmp.join("missing/profile.md");
    let out = run(&lenet(&["--out", s(&missing)]));
    fails_with(&out, "does not exist");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("timing"));
}
