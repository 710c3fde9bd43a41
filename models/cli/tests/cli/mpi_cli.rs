//! `ember train --ddp mpi` under Open MPI's `mpirun` on this machine (the `mpi` feature): ranks
//! train as one process with their summed batch (losses and parameters), under ApproxMul with
//! SparseAct and under HiNM fine-tuning; three ranks; batch norm's statistics stay equal on
//! every rank; a rank killed or stopped mid-run ends the job with an error and the run resumes to
//! the uninterrupted result; ranks started differently are refused naming the setting;
//! `mpirun -np 1` is a single process.

use crate::common::{ember, fails_with, ok, read_manifest, s, scratch, train_losses};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `mpirun` of `np` ranks of `ember` with `args` (root allowed, more ranks than cores allowed).
fn mpirun_command(np: usize, args: &[&str]) -> Command {
    let mut c = Command::new("mpirun");
    c.args(["--oversubscribe", "-np", &np.to_string()])
        .arg(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("XDG_RUNTIME_DIR", std::env::temp_dir());
    c
}

fn mpirun(np: usize, args: &[&str]) -> Output {
    mpirun_command(np, args).output().expect("run mpirun")
}

fn spawn(np: usize, args: &[&str]) -> Child {
    mpirun_command(np, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mpirun")
}

/// LeNet-5 on `items` embedded MNIST images for `epochs`, batch `batch` per rank, plain
/// progress, the replicas checked bit for bit after every step.
fn lenet<'a>(out: &'a Path, epochs: &'a str, items: &'a str, batch: &'a str) -> Vec<&'a str> {
    vec![
        "train",
        "--model",
        "lenet5",
        "--epochs",
        epochs,
        "--train-limit",
        items,
        "--test-limit",
        "64",
        "--batch-size",
        batch,
        "--lr",
        "0.003",
        "--plain",
        "--out",
        s(out),
    ]
}

/// Asserts that two runs' losses and final parameters agree within `tol` (relative for the
/// losses, absolute for the parameters).
fn assert_same_run(a: &Path, b: &Path, tol: f64) {
    let (la, lb) = (train_losses(a), train_losses(b));
    assert_eq!(la.len(), lb.len());
    for (x, y) in la.iter().zip(&lb) {
        assert!((x - y).abs() <= tol * y.abs(), "losses {la:?} vs {lb:?}");
    }
    let pa = ember_train::hinm::run_params(&a.join("model.mpk"))
        .unwrap()
        .params;
    let pb = ember_train::hinm::run_params(&b.join("model.mpk"))
        .unwrap()
        .params;
    assert_eq!(pa.keys().collect::<Vec<_>>(), pb.keys().collect::<Vec<_>>());
    for (path, (shape, va)) in &pa {
        let (shape_b, vb) = &pb[path];
        assert_eq!(shape, shape_b, "{path}");
        let worst = va
            .iter()
            .zip(vb)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(
            f64::from(worst) <= tol,
            "{path}: parameters differ by {worst}"
        );
    }
}

#[test]
fn two_ranks_train_as_one_process_with_their_summed_batch() {
    let dir = scratch("mpi-two");
    let decorated = ["--multiplier", "afm16", "--sparse-act", "0.5:16"];
    // 96 items: 3 steps of 2 × 16, or of 32 in one process
    let (two, one) = (dir.join("two"), dir.join("one"));
    let mut args = lenet(&two, "1", "96", "16");
    args.extend(decorated);
    args.extend(["--ddp", "mpi", "--verify-replicas"]);
    let out = mpirun(2, &args);
    let stdout = ok(&out);
    // rank 0 reports and writes; rank 1 prints nothing of its own
    assert_eq!(stdout.matches("test accuracy").count(), 1, "{stdout}");
    assert_eq!(read_manifest(&two)["replicas"], 2);
    let mut args = lenet(&one, "1", "96", "32");
    args.extend(decorated);
    ok(&ember(&args));
    assert_same_run(&two, &one, 1e-4);

    // HiNM fine-tuning from the one-process run, 75 % in vectors of 16, its masks on every
    // rank: conv2 (16 outputs) pruned; fc1 and fc2 (120 and 84 outputs: no tile of 16) dense
    let (two_tuned, one_tuned) = (dir.join("two-tuned"), dir.join("one-tuned"));
    let policy = dir.join("v16.toml");
    std::fs::write(&policy, "[[layer]]\npath = \"fc[12]\"\nhinm = \"off\"\n").unwrap();
    let tune = [
        "--hinm",
        "75:v16",
        "--from",
        s(&one),
        "--policy",
        s(&policy),
    ];
    let mut args = lenet(&two_tuned, "1", "96", "16");
    args.extend(tune);
    args.extend(["--ddp", "mpi", "--verify-replicas"]);
    ok(&mpirun(2, &args));
    let mut args = lenet(&one_tuned, "1", "96", "32");
    args.extend(tune);
    ok(&ember(&args));
    assert_same_run(&two_tuned, &one_tuned, 1e-4);
    assert!(two_tuned.join("model.hinm").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn three_ranks_and_one_rank_train() {
    let dir = scratch("mpi-three");
    let three = dir.join("three");
    let mut args = lenet(&three, "1", "96", "16");
    args.extend(["--ddp", "mpi", "--verify-replicas"]);
    let stdout = ok(&mpirun(3, &args));
    assert!(stdout.contains("test accuracy"), "{stdout}");
    assert_eq!(read_manifest(&three)["replicas"], 3);
    // one rank is a single process: the same run as without MPI
    let (single, plain) = (dir.join("single"), dir.join("plain"));
    let mut args = lenet(&single, "1", "96", "16");
    args.extend(["--ddp", "mpi"]);
    ok(&mpirun(1, &args));
    ok(&ember(&lenet(&plain, "1", "96", "16")));
    assert_same_run(&single, &plain, 1e-4);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each rank's batch norm updates its running statistics from its own shard: they are averaged
/// after every step, so `--verify-replicas` (which digests them with the parameters) passes.
#[test]
fn batch_norm_statistics_stay_equal_on_every_rank() {
    let dir = scratch("mpi-bn");
    let out = dir.join("run");
    let mut args = lenet(&out, "1", "32", "8");
    args[2] = "resnet18-cifar-w16";
    args.extend(["--ddp", "mpi", "--verify-replicas"]);
    ok(&mpirun(2, &args));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The process id of rank `rank` among `mpirun`'s children.
fn rank_pid(mpirun: u32, rank: usize) -> Option<u32> {
    let want = format!("OMPI_COMM_WORLD_RANK={rank}");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        // the parent id is the second field after the command name in brackets
        let ppid: u32 = stat
            .rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        let env = std::fs::read(e.path().join("environ")).ok()?;
        let env = String::from_utf8_lossy(&env);
        (ppid == mpirun && env.split('\0').any(|v| v == want)).then_some(pid)
    })
}

/// Starts a 2-rank run of 4 epochs into `out`, waits for its first completed epoch and sends
/// each `(rank, signal)` in turn; returns the job's output and how long it took to end after the
/// last signal.
fn signal_ranks(out: &Path, signals: &[(usize, &str)], extra: &[&str]) -> (Output, Duration) {
    let mut args = lenet(out, "4", "1280", "16");
    args.extend(["--ddp", "mpi"]);
    args.extend(extra);
    let job = spawn(2, &args);
    let started = Instant::now();
    let manifest = out.join("ember-run.json");
    loop {
        let done = std::fs::read_to_string(&manifest)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|m| m["completed_epochs"].as_u64().is_some_and(|e| e >= 1));
        if done {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no epoch completed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    for (rank, signal) in signals {
        let pid = rank_pid(job.id(), *rank).expect("the rank runs");
        let status = Command::new("kill")
            .args([*signal, &pid.to_string()])
            .status();
        assert!(status.unwrap().success());
    }
    let signalled = Instant::now();
    let output = job.wait_with_output().unwrap();
    (output, signalled.elapsed())
}

/// Resumes the 2-rank run in `out` under `mpirun` and checks that it ends as `whole` did.
fn resumes_to(out: &Path, whole: &Path) {
    let mut args = lenet(out, "4", "1280", "16");
    args.extend(["--ddp", "mpi", "--resume"]);
    ok(&mpirun(2, &args));
    assert_same_run(out, whole, 1e-4);
}

#[test]
fn a_lost_rank_ends_the_job_and_the_run_resumes_to_the_uninterrupted_result() {
    let dir = scratch("mpi-lost");
    let whole = dir.join("whole");
    let mut args = lenet(&whole, "4", "1280", "16");
    args.extend(["--ddp", "mpi"]);
    ok(&mpirun(2, &args));

    // killed: mpirun sees the rank die and ends the others
    let killed = dir.join("killed");
    let (output, took) = signal_ranks(&killed, &[(1, "-KILL")], &[]);
    assert!(!output.status.success(), "the job survived a killed rank");
    assert!(
        took < Duration::from_secs(30),
        "the job took {took:?} to end"
    );
    resumes_to(&killed, &whole);

    // stopped (it hangs): rank 0 waits past --collective-timeout and aborts the job
    let stopped = dir.join("stopped");
    let (output, took) = signal_ranks(&stopped, &[(1, "-STOP")], &["--collective-timeout", "3"]);
    fails_with(&output, "no answer from the other replicas for 3 s");
    let stderr = String::from_utf8_lossy(&output.stderr);
    // rank 0's; Open MPI's abort continues the stopped rank 1 (SIGCONT) before it terminates
    // it, and rank 1 may report the same expired wait first: no other error
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert!(
        !errors.is_empty()
            && errors
                .iter()
                .all(|l| l.contains("no answer from the other")),
        "{stderr}"
    );
    assert!(
        took < Duration::from_secs(30),
        "the job took {took:?} to end"
    );
    resumes_to(&stopped, &whole);

    // rank 1 hangs and rank 0 is asked to stop: rank 0 cannot reach the batch where both would
    // stop together, so it ends the job after the grace period, not after the 300 s timeout
    let asked = dir.join("asked");
    let (output, took) = signal_ranks(&asked, &[(1, "-STOP"), (0, "-TERM")], &[]);
    fails_with(
        &output,
        "interrupted while waiting 10 s for the other replicas",
    );
    assert!(
        took < Duration::from_secs(40),
        "the job took {took:?} to end"
    );
    let kept = read_manifest(&asked)["completed_epochs"].as_u64().unwrap();
    assert!((1..4).contains(&kept), "{kept} epochs kept");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ranks_started_differently_or_with_devices_are_refused() {
    let dir = scratch("mpi-bad");
    let out = dir.join("run");
    // MPMD: rank 0 with batch 16, rank 1 with batch 8
    let mut cmd = mpirun_command(1, &lenet(&out, "1", "96", "16"));
    cmd.args(["--ddp", "mpi", ":", "-np", "1", env!("CARGO_BIN_EXE_ember")]);
    cmd.args(lenet(&out, "1", "96", "8"));
    cmd.args(["--ddp", "mpi"]);
    let output = cmd.output().unwrap();
    fails_with(
        &output,
        "replica 1 was started with another --batch-size than replica 0",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.matches("error: ").count(), 1, "{stderr}");
    assert!(!out.exists(), "{} was left behind", out.display());

    let mut args = lenet(&out, "1", "96", "16");
    args.extend(["--ddp", "mpi", "--devices", "2"]);
    fails_with(
        &mpirun(2, &args),
        "an MPI job trains one device per process",
    );
    assert!(!out.exists());

    // a resumed run needs its run directory on every rank, and an existing one is not
    // overwritten
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let mut args = lenet(&out, "1", "96", "16");
    args.extend(["--ddp", "mpi"]);
    fails_with(&mpirun(2, &args), "not an Ember run");
    assert_eq!(
        std::fs::read_to_string(out.join("notes.txt")).unwrap(),
        "mine"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_image_a_rank_cannot_decode_stops_every_rank_at_the_same_batch() {
    use crate::pretrained_cli::{fixture, imagenet_folder, imagenet_split};
    let dir = scratch("mpi-folder");
    let data = imagenet_folder(&dir.join("inet"), 5);
    imagenet_split(&data, "train", 5);
    // the header reads (the file is listed), the pixels do not
    let png = std::fs::read(fixture("folder/dog/image.png")).unwrap();
    std::fs::write(data.join("train/n00000003/dog.png"), &png[..120]).unwrap();
    let run = dir.join("run");
    let weights = fixture("resnet18-w8.pth");
    let args = [
        "train",
        "--ddp",
        "mpi",
        "--from",
        s(&weights),
        "--model",
        "resnet18",
        "--dataset",
        "imagenet-folder",
        "--data-dir",
        s(&data),
        "--epochs",
        "1",
        "--batch-size",
        "2",
        "--plain",
        "--out",
        s(&run),
    ];
    let out = mpirun(2, &args);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    // the rank that read it names the file; the other stops at the same batch, saying why
    assert!(
        stderr.contains("n00000003/dog.png: cannot decode the image"),
        "{stderr}"
    );
    assert!(
        stderr.contains("another replica could not load its items of batch"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        !run.exists(),
        "a run that completed no epoch leaves nothing"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
