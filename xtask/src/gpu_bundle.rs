//! `cargo xtask gpu-bundle`: the CUDA build of Ember's kernel tests, benches and `ember` in one
//! folder that runs on a GPU machine without Rust (`docs/gpu-bundle.md`).
//!
//! The folder holds `run.sh`, `README.txt` and `ember-gpu.tar.xz`: the release binaries built
//! with every crate's `cuda` feature, stripped (test binaries `test-<crate>-<target>`, bench
//! binaries `bench-<crate>-<target>`, `ember`, and this `xtask`, whose `gpu-run` task is the
//! runner), the PyTorch script of the runner's side-by-side column and `BUNDLE.txt` (the commit
//! it was built from). Eleven binaries that each link Burn, CubeCL, wgpu and the CUDA runtime
//! weigh about 25 MB apiece stripped; they share most of their code, which xz with a
//! dictionary larger than one binary folds, so the archive stays under [`MAX_BYTES`].

use anyhow::{Context, Result, bail};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The most the bundle folder may weigh: what a GPU machine of the project receives.
pub const MAX_BYTES: u64 = 64 << 20;

/// The archive of the binaries, inside the bundle folder.
pub const ARCHIVE: &str = "ember-gpu.tar.xz";

/// What the bundle builds, read from the workspace's `cargo metadata` (so a new technique crate
/// is in it once it has a `cuda` feature): every package with a `cuda` feature (built with it),
/// the test targets of those outside `models/` (the kernel and technique crates, whose tests
/// are generic over the runtime; the zoo's train whole models on the CPU), and the bench
/// targets of them all.
#[derive(Debug, PartialEq)]
pub struct Targets {
    /// Package names.
    pub packages: Vec<String>,
    /// Test target names.
    pub tests: Vec<String>,
    /// Bench target names.
    pub benches: Vec<String>,
}

impl Targets {
    /// The workspace's.
    pub fn of_workspace() -> Result<Self> {
        Ok(Self::from_metadata(&crate::metadata()?))
    }

    /// Those of the packages `meta` (`cargo metadata --no-deps` output) describes.
    pub fn from_metadata(meta: &serde_json::Value) -> Self {
        let mut t = Self {
            packages: Vec::new(),
            tests: Vec::new(),
            benches: Vec::new(),
        };
        let root = meta["workspace_root"].as_str().unwrap_or_default();
        for package in meta["packages"].as_array().into_iter().flatten() {
            if package["features"].get("cuda").is_none() {
                continue;
            }
            let manifest = package["manifest_path"].as_str().unwrap_or_default();
            let zoo = manifest
                .strip_prefix(root)
                .is_some_and(|rel| rel.trim_start_matches('/').starts_with("models/"));
            t.packages
                .push(package["name"].as_str().unwrap_or_default().to_string());
            for target in package["targets"].as_array().into_iter().flatten() {
                let name = target["name"].as_str().unwrap_or_default().to_string();
                let kinds = target["kind"].as_array().into_iter().flatten();
                for kind in kinds.filter_map(|k| k.as_str()) {
                    match kind {
                        "test" if !zoo => t.tests.push(name.clone()),
                        "bench" => t.benches.push(name.clone()),
                        _ => {}
                    }
                }
            }
        }
        t
    }
}

/// The runner's shell entry point, copied into the bundle.
const RUN_SH: &str = include_str!("../gpu/run.sh");
/// The PyTorch column's script, packed into the archive.
const TORCH_ROWS: &str = include_str!("../gpu/torch_rows.py");
/// The bundle's README.
const README: &str = include_str!("../gpu/README.txt");

/// The `cargo build` arguments of the bundle's binaries.
pub fn build_args(t: &Targets) -> Vec<String> {
    let features = t
        .packages
        .iter()
        .map(|p| format!("{p}/cuda"))
        .collect::<Vec<_>>()
        .join(",");
    let mut args: Vec<String> = [
        "build",
        "--release",
        "--message-format=json-render-diagnostics",
        "--features",
        &features,
    ]
    .map(String::from)
    .to_vec();
    for p in &t.packages {
        args.extend(["-p".into(), p.clone()]);
    }
    for test in &t.tests {
        args.extend(["--test".into(), test.clone()]);
    }
    for b in &t.benches {
        args.extend(["--bench".into(), b.clone()]);
    }
    args.extend(["--bin".into(), "ember".into()]);
    args
}

/// The bundle's name of an executable cargo reported: `test-<crate>-<target>`,
/// `bench-<crate>-<target>`, or a binary's own name; `None` for anything else (build scripts).
fn bundle_name(message: &serde_json::Value) -> Option<String> {
    if message["reason"] != "compiler-artifact" {
        return None;
    }
    message["executable"].as_str()?;
    let target = &message["target"];
    let name = target["name"].as_str()?;
    // `path+file:///…/cubecl-kernels#0.1.0`, `…#cubecl-kernels@0.1.0` or `name version (url)`
    let id = message["package_id"].as_str()?;
    let package = match id.rsplit_once('#') {
        Some((path, tail)) => match tail.split_once('@') {
            Some((pkg, _)) => pkg,
            None => path.rsplit('/').next()?,
        },
        None => id.split(' ').next()?,
    };
    let kind = target["kind"].as_array()?.first()?.as_str()?;
    match kind {
        "test" | "bench" => Some(format!("{kind}-{package}-{name}")),
        "bin" => Some(name.to_string()),
        _ => None,
    }
}

/// Builds the binaries; returns each one's bundle name and path.
fn build(targets: &Targets) -> Result<Vec<(String, PathBuf)>> {
    let args = build_args(targets);
    println!("==> cargo {}", args.join(" "));
    let mut child = Command::new(env!("CARGO"))
        .args(&args)
        .current_dir(crate::root())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("running cargo build")?;
    let mut built = Vec::new();
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let line = line?;
        let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if let Some(name) = bundle_name(&message) {
            let path = PathBuf::from(message["executable"].as_str().expect("checked"));
            built.push((name, path));
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("the CUDA build of the bundle failed ({status})");
    }
    built.sort();
    built.dedup();
    let want = targets.tests.len() + targets.benches.len() + 1;
    if built.len() != want {
        bail!(
            "cargo reported {} executables, {want} expected: {:?}",
            built.len(),
            built.iter().map(|(n, _)| n).collect::<Vec<_>>()
        );
    }
    Ok(built)
}

/// Copies `from` to `to` and strips its symbols.
fn copy_stripped(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to).with_context(|| format!("copying {}", from.display()))?;
    let status = Command::new("strip")
        .arg("--strip-all")
        .arg(to)
        .status()
        .context("running `strip` (binutils): install it, or put it on PATH")?;
    if !status.success() {
        bail!("strip {} failed ({status})", to.display());
    }
    Ok(())
}

/// The checked-out commit, or `unknown`.
fn commit() -> String {
    Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .current_dir(crate::root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "unknown".into(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_string(),
        )
}

/// Sum of the sizes of the files directly in `dir`.
fn folder_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        total += entry?.metadata()?.len();
    }
    Ok(total)
}

/// Whether `dir` is a bundle this task wrote (so it may be replaced).
fn is_bundle(dir: &Path) -> bool {
    dir.join("run.sh").is_file() && dir.join(ARCHIVE).is_file()
}

/// Builds the bundle into `out` (default `target/gpu-bundle` in the workspace). An existing
/// `out` is replaced only when it is a bundle, and only once the new one is complete.
pub fn run(out: Option<PathBuf>, ember_only: bool) -> Result<()> {
    let out = out.unwrap_or_else(|| crate::root().join("target/gpu-bundle"));
    if out.exists() && !is_bundle(&out) {
        bail!(
            "{} exists and is not a GPU bundle (no run.sh and {ARCHIVE}): choose another \
             --out, or move it away",
            out.display()
        );
    }
    for tool in ["xz", "tar", "strip"] {
        if Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_err()
        {
            bail!("`{tool}` is needed to make the bundle and was not found on PATH");
        }
    }
    let mut targets = Targets::of_workspace()?;
    if ember_only {
        // what `device-session.sh reproduce` needs: `ember` and this runner
        targets.tests.clear();
        targets.benches.clear();
    }
    let built = build(&targets)?;

    let target = crate::target_dir();
    let staging = target.join("gpu-bundle-staging");
    if staging.exists() {
        std::fs::remove_dir_all(&staging)?;
    }
    let bin = staging.join("bin");
    std::fs::create_dir_all(&bin)?;
    let mut unpacked = 0;
    for (name, path) in &built {
        let to = bin.join(name);
        copy_stripped(path, &to)?;
        unpacked += std::fs::metadata(&to)?.len();
    }
    let runner = std::env::current_exe().context("finding the xtask binary")?;
    copy_stripped(&runner, &bin.join("xtask"))?;
    unpacked += std::fs::metadata(bin.join("xtask"))?.len();
    std::fs::write(staging.join("torch_rows.py"), TORCH_ROWS)?;
    let commit = commit();
    std::fs::write(
        staging.join("BUNDLE.txt"),
        format!(
            "commit {commit}\nbuilt with: cargo {}\n{}",
            build_args(&targets)[..5].join(" "),
            if ember_only {
                "ember only: for `cargo xtask reproduce` (device-session.sh reproduce)\n"
            } else {
                ""
            }
        ),
    )?;

    let fresh = out.with_extension("new");
    if fresh.exists() {
        std::fs::remove_dir_all(&fresh)?;
    }
    std::fs::create_dir_all(&fresh)?;
    println!(
        "==> packing {} binaries ({:.1} MiB stripped) into {ARCHIVE}",
        built.len() + 1,
        unpacked as f64 / (1 << 20) as f64
    );
    // One xz stream over the tar, its dictionary larger than any binary: the code the binaries
    // share is stored once.
    let archive = std::fs::File::create(fresh.join(ARCHIVE))?;
    let mut tar = Command::new("tar")
        .arg("-C")
        .arg(&staging)
        .args(["-cf", "-", "bin", "torch_rows.py", "BUNDLE.txt"])
        .stdout(Stdio::piped())
        .spawn()
        .context("running tar")?;
    let xz = Command::new("xz")
        .args(["-c", "-T1", "--lzma2=preset=9e,dict=256MiB"])
        .stdin(tar.stdout.take().expect("piped"))
        .stdout(archive)
        .status()
        .context("running xz")?;
    if !tar.wait()?.success() || !xz.success() {
        bail!("packing the bundle failed (tar or xz)");
    }
    std::fs::write(fresh.join("run.sh"), RUN_SH)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(fresh.join("run.sh"), std::fs::Permissions::from_mode(0o755))?;
    }
    std::fs::write(fresh.join("README.txt"), README)?;
    let bytes = folder_bytes(&fresh)?;
    if bytes > MAX_BYTES {
        bail!(
            "the bundle weighs {:.1} MiB, over the {} MiB a GPU machine receives (left in {})",
            bytes as f64 / (1 << 20) as f64,
            MAX_BYTES >> 20,
            fresh.display()
        );
    }
    if out.exists() {
        std::fs::remove_dir_all(&out)?;
    }
    std::fs::rename(&fresh, &out)?;
    std::fs::remove_dir_all(&staging)?;
    println!(
        "wrote {} ({:.1} MiB; commit {commit}): run it with `{}/run.sh` on a machine with an \
         NVIDIA driver and CUDA's runtime libraries",
        out.display(),
        bytes as f64 / (1 << 20) as f64,
        out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn artifact(kind: &str, name: &str, id: &str, exe: Option<&str>) -> serde_json::Value {
        serde_json::json!({
            "reason": "compiler-artifact",
            "package_id": id,
            "target": {"kind": [kind], "name": name},
            "executable": exe,
        })
    }

    #[test]
    fn cargo_artifacts_get_bundle_names() {
        let id = "path+file:///w/cubecl-kernels#0.1.0";
        assert_eq!(
            bundle_name(&artifact("test", "kernels", id, Some("/t/kernels-1"))).as_deref(),
            Some("test-cubecl-kernels-kernels")
        );
        let id = "path+file:///w/models/cli#ember-cli@0.1.0";
        assert_eq!(
            bundle_name(&artifact("bin", "ember", id, Some("/t/ember"))).as_deref(),
            Some("ember")
        );
        let id = "burn-hinm 0.1.0 (path+file:///w/burn-hinm)";
        assert_eq!(
            bundle_name(&artifact("bench", "hinm", id, Some("/t/hinm-2"))).as_deref(),
            Some("bench-burn-hinm-hinm")
        );
        // a library (no executable) and a build script are not bundled
        assert_eq!(bundle_name(&artifact("lib", "x", id, None)), None);
        assert_eq!(
            bundle_name(&artifact(
                "custom-build",
                "build-script-build",
                id,
                Some("/t/b")
            )),
            None
        );
    }

    #[test]
    fn the_targets_are_the_workspaces_cuda_crates_with_their_kernel_tests_and_benches() {
        let t = Targets::of_workspace().unwrap();
        let sorted = |v: &[String]| {
            let mut v = v.to_vec();
            v.sort();
            v
        };
        let packages = [
            "burn-approx-mul",
            "burn-bcr",
            "burn-hinm",
            "burn-sparse-act",
            "cubecl-kernels",
            "ember-cli",
            "ember-train",
        ];
        assert_eq!(sorted(&t.packages), packages);
        let tests = ["approx_mul", "bcr", "hinm", "kernels", "sparse_act"];
        assert_eq!(sorted(&t.tests), tests);
        let benches = [
            "bcrc",
            "broadcast",
            "bspmm",
            "conv",
            "gemm",
            "hinm",
            "model_step",
            "optim_step",
        ];
        assert_eq!(sorted(&t.benches), benches);
    }

    #[test]
    fn a_package_without_cuda_is_left_out_and_the_zoos_tests_too() {
        let meta = serde_json::json!({
            "workspace_root": "/w",
            "packages": [
                {"name": "cpu-only", "features": {}, "manifest_path": "/w/cpu/Cargo.toml",
                 "targets": [{"name": "t", "kind": ["test"]}]},
                {"name": "kern", "features": {"cuda": []}, "manifest_path": "/w/kern/Cargo.toml",
                 "targets": [{"name": "kern", "kind": ["lib"]}, {"name": "k", "kind": ["test"]},
                             {"name": "b", "kind": ["bench"]}]},
                {"name": "zoo", "features": {"cuda": []},
                 "manifest_path": "/w/models/train/Cargo.toml",
                 "targets": [{"name": "z", "kind": ["test"]}, {"name": "s", "kind": ["bench"]}]}
            ]
        });
        let t = Targets::from_metadata(&meta);
        assert_eq!(t.packages, ["kern", "zoo"]);
        assert_eq!(t.tests, ["k"]);
        assert_eq!(t.benches, ["b", "s"]);
    }

    #[test]
    fn every_package_is_built_with_its_cuda_feature() {
        let t = Targets::of_workspace().unwrap();
        let args = build_args(&t);
        let features = &args[args.iter().position(|a| a == "--features").unwrap() + 1];
        for p in &t.packages {
            assert!(features.contains(&format!("{p}/cuda")), "{p}");
            assert!(args.windows(2).any(|w| w[0] == "-p" && w[1] == *p), "{p}");
        }
        assert!(args.contains(&"--release".to_string()));
    }

    #[test]
    fn a_folder_that_is_not_a_bundle_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
        let err = run(Some(dir.path().to_path_buf()), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a GPU bundle"), "{err}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
            "mine"
        );
    }
}
