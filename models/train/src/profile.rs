//! `ember profile`: where a training step's time goes on a CubeCL backend (wgpu, CUDA).
//!
//! One training step is what `ember train` runs for a batch: the forward pass, cross-entropy,
//! the backward pass and Adam's update, of a freshly initialised model on a batch of random
//! inputs of the dataset's shape. Two measurements, each in a process of its own (the `ember`
//! command runs them as children):
//!
//! - **wall** ([`Stage::Wall`]): the mean wall time of `steps` steps after `warmup` steps, each
//!   ended by a device sync, with CubeCL's profiler off;
//! - **kernels** ([`Stage::Kernels`]): the same steps with CubeCL's per-kernel profiler on
//!   ([`cubecl_kernels::profiler`]), which times every launch on the device. The launches of
//!   each measured step are grouped by kernel into [`KernelRow`]s.
//!
//! [`ProfileReport`] puts them together: per kernel, its launches and device time per step,
//! its share of the step's device time and the sizes of its grids; and the step's device time
//! against its wall time. A device busy for much less than the wall time means the host
//! (launch overhead, synchronisation) bounds the step.

use crate::backend::{BackendJob, BackendKind, TrainBackend};
use crate::error::{EmberError, Result};
use crate::fused_optim::FusedAdam;
use burn::optim::{GradientsParams, Optimizer};
use burn::prelude::*;
use burn::tensor::Distribution;
use burn::tensor::backend::AutodiffBackend;
use burn_approx_mul::{MatmulKernel, Multiplier};
use burn_sparse_act::Policy;
use cubecl_kernels::profiler::{self, Launch};
use ember_models::classifier::{ModelKind, ModelVisitor, TrainableClassifier};
use ember_models::data::{Batch, DataSpec, Inputs};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Everything `ember profile` needs.
#[derive(Clone, Debug)]
pub struct ProfileOptions {
    /// The model.
    pub model: ModelKind,
    /// The shape of its items (a dataset's: images or sequences of frames).
    pub spec: DataSpec,
    /// Frames per sequence, for sequence data.
    pub frames: usize,
    /// Batch size.
    pub batch: usize,
    /// Backend: wgpu or CUDA (ndarray runs no kernels).
    pub backend: BackendKind,
    /// Multiplier of every contraction (and the convolution route).
    pub multiplier: Multiplier,
    /// SparseAct policy.
    pub policy: Policy,
    /// Unmeasured steps first (kernel compilation, memory pools).
    pub warmup: usize,
    /// Measured steps.
    pub steps: usize,
}

impl ProfileOptions {
    /// Refuses what cannot be profiled, with the reason.
    pub fn validate(&self) -> Result<()> {
        if self.backend == BackendKind::Ndarray {
            return Err(EmberError::Invalid(
                "--backend ndarray runs no kernels to profile: choose wgpu or cuda (on ndarray, \
                 a sampling profiler such as `perf record` shows where a step goes)"
                    .into(),
            ));
        }
        for (flag, value) in [
            ("--batch-size", self.batch),
            ("--steps", self.steps),
            ("--frames", self.frames),
        ] {
            if value == 0 {
                return Err(EmberError::Invalid(format!("{flag} must be at least 1")));
            }
        }
        self.model
            .accepts(self.spec)
            .map_err(|e| EmberError::Invalid(e.to_string()))
    }
}

/// What one child process measures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The mean wall time of a step, the profiler off.
    Wall,
    /// Every launch of the measured steps, the profiler on and logging to this file.
    Kernels(PathBuf),
}

/// One kernel's part in a step: its launches of the measured steps together, per step.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KernelRow {
    /// The kernel's name without module paths (generic arguments kept).
    pub kernel: String,
    /// Launches per step.
    pub launches: f64,
    /// Device time per step, in milliseconds.
    pub ms: f64,
    /// The fewest and the most cubes one of its launches had, where the log gives grids.
    pub cubes: Option<(u64, u64)>,
}

/// What a stage prints (one JSON line).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum StageResult {
    /// [`Stage::Wall`]: milliseconds per step, and the native matmuls' use of the kernel
    /// `--matmul` chose (`None` without one).
    Wall {
        /// Milliseconds per step.
        ms: f64,
        /// The chosen matmul kernel's products per step.
        matmul: Option<MatmulUse>,
    },
    /// [`Stage::Kernels`]: the kernels, most device time first.
    Kernels(Vec<KernelRow>),
}

/// How the native matmuls of a measured step used the kernel `--matmul` chose
/// ([`cubecl_kernels::matmul::tally`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MatmulUse {
    /// The kernel's name.
    pub kernel: String,
    /// Products asked of it per step.
    pub products: f64,
    /// Of those, the ones that ran Burn's own matmul instead, per step.
    pub fallbacks: f64,
    /// Why the first of the process's fallbacks fell back.
    pub first_reason: Option<String>,
}

/// Runs `stage` of `opts` in this process. [`Stage::Kernels`] switches CubeCL's profiler on for
/// the whole process, so it must come before anything touches a CubeCL device here.
pub fn measure(opts: &ProfileOptions, stage: Stage) -> Result<StageResult> {
    opts.validate()?;
    // before anything that may read CubeCL's configuration (the backend's check included)
    if let Stage::Kernels(log) = &stage {
        profiler::enable(log).map_err(|e| EmberError::Backend(e.to_string()))?;
    }
    opts.backend.check_available()?;
    let job = StepJob {
        opts: opts.clone(),
        stage,
    };
    opts.backend
        .dispatch(opts.multiplier.clone(), opts.policy.clone(), job)
}

struct StepJob {
    opts: ProfileOptions,
    stage: Stage,
}

impl BackendJob for StepJob {
    type Output = StageResult;

    fn run<B: TrainBackend>(self, device: B::Device) -> Result<StageResult> {
        let batch = self.opts.batch;
        let visitor = Steps::<B> {
            batch: inputs::<B>(&self.opts, &device),
            device: device.clone(),
            opts: self.opts.clone(),
            stage: self.stage,
        };
        let spec = self.opts.spec;
        crate::record::catch(|| self.opts.model.build::<B, _>(spec, &device, visitor)).map_err(
            |c| {
                let message = c.message.unwrap_or_default();
                EmberError::device_failure(batch, &message, c.location.as_deref())
            },
        )??
    }
}

/// A batch of random inputs of the options' shape (normal values, every sequence of the full
/// length) and cycling targets.
fn inputs<B: Backend>(opts: &ProfileOptions, device: &B::Device) -> Batch<B> {
    B::seed(device, 7);
    let inputs = match opts.spec {
        DataSpec::Images(s) => Inputs::Images(Tensor::random(
            [opts.batch, s.channels, s.side, s.side],
            Distribution::Normal(0.0, 1.0),
            device,
        )),
        DataSpec::Sequences { features, .. } => Inputs::Sequences {
            frames: Tensor::random(
                [opts.batch, opts.frames, features],
                Distribution::Normal(0.0, 1.0),
                device,
            ),
            lengths: vec![opts.frames; opts.batch],
        },
    };
    let classes = opts.spec.classes().max(1) as i64;
    let targets: Vec<i64> = (0..opts.batch as i64).map(|i| i % classes).collect();
    Batch {
        inputs,
        targets: Tensor::from_ints(targets.as_slice(), device),
    }
}

struct Steps<B: AutodiffBackend> {
    batch: Batch<B>,
    device: B::Device,
    opts: ProfileOptions,
    stage: Stage,
}

impl<B: TrainBackend> ModelVisitor<B> for Steps<B> {
    type Output = Result<StageResult>;

    fn visit<M: TrainableClassifier<B>>(self, model: M) -> Result<StageResult> {
        let mut optim = FusedAdam::default().init::<B, M>();
        let mut model = Some(model);
        let device = self.device.clone();
        let mut step = || -> Result<()> {
            let m = model.take().expect("the model between steps");
            let out = m.forward_classification(self.batch.clone());
            let grads = GradientsParams::from_grads(out.loss.backward(), &m);
            model = Some(optim.step(1e-3, m, grads));
            B::sync(&device).map_err(|e| EmberError::Backend(format!("{e:?}")))
        };
        for _ in 0..self.opts.warmup {
            step()?;
        }
        match &self.stage {
            Stage::Wall => {
                let before = cubecl_kernels::matmul::tally();
                let start = Instant::now();
                for _ in 0..self.opts.steps {
                    step()?;
                }
                let steps = self.opts.steps as f64;
                let ms = start.elapsed().as_secs_f64() * 1e3 / steps;
                let after = cubecl_kernels::matmul::tally();
                let kernel = self.opts.multiplier.matmul();
                let matmul = (kernel != MatmulKernel::Burn).then(|| MatmulUse {
                    kernel: kernel.to_string(),
                    products: (after.products - before.products) as f64 / steps,
                    fallbacks: (after.fallbacks - before.fallbacks) as f64 / steps,
                    first_reason: after.first_reason,
                });
                Ok(StageResult::Wall { ms, matmul })
            }
            Stage::Kernels(log) => {
                // the launches logged so far are the model's initialisation and the warm-up's
                B::sync(&device).map_err(|e| EmberError::Backend(format!("{e:?}")))?;
                let mut from = settled_len(log)?;
                let mut measured = Vec::new();
                for _ in 0..self.opts.steps {
                    step()?;
                    let to = settled_len(log)?;
                    measured.extend(read_launches(log, from, to)?);
                    from = to;
                }
                Ok(StageResult::Kernels(kernel_rows(
                    &measured,
                    self.opts.steps,
                )))
            }
        }
    }
}

/// The profiler log's length once everything launched before the last sync is in it. The log
/// is written by a logger task of CubeCL's after the launches it times, and a sync appends a
/// summary table after them; this waits until the log is empty or ends in one, and has not
/// grown for 100 ms (at most a minute). Only the log's length and its last bytes are read.
fn settled_len(log: &Path) -> Result<u64> {
    let io = |source| EmberError::Io {
        path: log.to_path_buf(),
        source,
    };
    let start = Instant::now();
    let mut last: Option<(u64, Instant)> = None;
    loop {
        std::thread::sleep(Duration::from_millis(10));
        let len = match std::fs::metadata(log) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(io(e)),
        };
        match last {
            Some((seen, since)) if seen == len => {
                if since.elapsed() >= Duration::from_millis(100)
                    && (len == 0
                        || profiler::ends_in_summary(&read_range(
                            log,
                            len.saturating_sub(512),
                            len,
                        )?))
                {
                    return Ok(len);
                }
            }
            _ => last = Some((len, Instant::now())),
        }
        if start.elapsed() > Duration::from_secs(60) {
            return Err(EmberError::Backend(format!(
                "CubeCL's profiler log {} did not settle within a minute of a step",
                log.display()
            )));
        }
    }
}

/// Bytes `from..to` of `log`, as text (a character cut at either end is replaced).
fn read_range(log: &Path, from: u64, to: u64) -> Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let io = |source| EmberError::Io {
        path: log.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(log).map_err(io)?;
    file.seek(SeekFrom::Start(from)).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(to.saturating_sub(from))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The launches logged between byte offsets `from` and `to` of `log`.
fn read_launches(log: &Path, from: u64, to: u64) -> Result<Vec<Launch>> {
    Ok(profiler::launches(&read_range(log, from, to)?))
}

/// `name` without module paths: `a::b::c<d::E, f>` → `c<E, f>`.
pub fn short_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut word = String::new();
    for ch in name.chars() {
        if ch.is_alphanumeric() || ch == '_' || ch == ':' {
            word.push(ch);
        } else {
            out.push_str(word.rsplit("::").next().unwrap_or(&word));
            word.clear();
            out.push(ch);
        }
    }
    out.push_str(word.rsplit("::").next().unwrap_or(&word));
    out
}

/// `launches` of `steps` steps grouped by kernel ([`short_name`]), per step, most device time
/// first.
pub fn kernel_rows(launches: &[Launch], steps: usize) -> Vec<KernelRow> {
    #[derive(Default)]
    struct Acc {
        launches: usize,
        time: Duration,
        cubes: Option<(u64, u64)>,
    }
    let mut by: BTreeMap<String, Acc> = BTreeMap::new();
    for l in launches {
        let acc = by.entry(short_name(&l.kernel)).or_default();
        acc.launches += 1;
        acc.time += l.time;
        if let Some(n) = l.cubes.as_deref().and_then(profiler::cube_total) {
            acc.cubes = Some(match acc.cubes {
                Some((lo, hi)) => (lo.min(n), hi.max(n)),
                None => (n, n),
            });
        }
    }
    let steps = steps.max(1) as f64;
    let mut rows: Vec<KernelRow> = by
        .into_iter()
        .map(|(kernel, a)| KernelRow {
            kernel,
            launches: a.launches as f64 / steps,
            ms: a.time.as_secs_f64() * 1e3 / steps,
            cubes: a.cubes,
        })
        .collect();
    rows.sort_by(|a, b| b.ms.total_cmp(&a.ms).then_with(|| a.kernel.cmp(&b.kernel)));
    rows
}

/// A profile: the kernels of a step beside its wall time.
#[derive(Clone, Debug)]
pub struct ProfileReport {
    /// What was profiled, in words (model, batch, backend, multiplier, policy).
    pub title: String,
    /// Wall time of a step without the profiler, milliseconds.
    pub wall_ms: f64,
    /// Measured steps (each stage).
    pub steps: usize,
    /// Warm-up steps before them.
    pub warmup: usize,
    /// The kernels, most device time first (empty where they were not profiled).
    pub kernels: Vec<KernelRow>,
    /// The native matmuls' use of the kernel `--matmul` chose, if it chose one.
    pub matmul: Option<MatmulUse>,
}

impl ProfileReport {
    /// Device time per step: every kernel's, in milliseconds.
    pub fn device_ms(&self) -> f64 {
        self.kernels.iter().map(|k| k.ms).sum()
    }

    /// Launches per step.
    pub fn launches(&self) -> f64 {
        self.kernels.iter().map(|k| k.launches).sum()
    }

    /// The report as Markdown, the `top` kernels by device time in the table and the rest
    /// summed in one row.
    pub fn markdown(&self, top: usize) -> String {
        let device = self.device_ms();
        let share = |ms: f64| {
            if device > 0.0 {
                100.0 * ms / device
            } else {
                0.0
            }
        };
        let mut s = format!("# Kernel profile: {}\n\n", self.title);
        s.push_str(&format!(
            "- Wall time of a training step (forward, loss, backward, Adam), profiler off: \
             **{:.2} ms** (mean of {} steps after {} warm-up steps).\n",
            self.wall_ms, self.steps, self.warmup
        ));
        if let Some(m) = &self.matmul {
            s.push_str(&format!(
                "- Native matmuls on `{}`: {:.0} a step, {:.0} of them on Burn's own matmul \
                 instead{}.\n",
                m.kernel,
                m.products,
                m.fallbacks,
                match (&m.first_reason, m.fallbacks > 0.0) {
                    (Some(why), true) => format!(" (the first: {why})"),
                    _ => String::new(),
                }
            ));
        }
        if self.kernels.is_empty() {
            s.push_str("- Kernels not profiled.\n");
            return s;
        }
        s.push_str(&format!(
            "- Device time of a step, every kernel's (profiler on, the same steps): **{:.2} ms** \
             in {:.0} launches: the device is busy {:.0} % of the wall time{}.\n\n",
            device,
            self.launches(),
            100.0 * device / self.wall_ms.max(f64::MIN_POSITIVE),
            if device < 0.5 * self.wall_ms {
                "; the rest is the host's (launches, synchronisation, allocation)"
            } else {
                ""
            }
        ));
        s.push_str(
            "| kernel | launches / step | ms / step | share | µs / launch | cubes a launch |\n\
             |---|---:|---:|---:|---:|---|\n",
        );
        let row = |s: &mut String, name: &str, launches: f64, ms: f64, cubes: String| {
            s.push_str(&format!(
                "| {} | {:.0} | {:.3} | {:.1} % | {:.1} | {} |\n",
                name.replace('|', "\\|"),
                launches,
                ms,
                share(ms),
                1e3 * ms / launches.max(f64::MIN_POSITIVE),
                cubes
            ));
        };
        let shown = &self.kernels[..top.min(self.kernels.len())];
        let labels = labels(shown);
        for (k, (label, _)) in shown.iter().zip(&labels) {
            let cubes = match k.cubes {
                Some((lo, hi)) if lo == hi => lo.to_string(),
                Some((lo, hi)) => format!("{lo} – {hi}"),
                None => "—".into(),
            };
            row(&mut s, label, k.launches, k.ms, cubes);
        }
        let rest = &self.kernels[top.min(self.kernels.len())..];
        if !rest.is_empty() {
            let launches = rest.iter().map(|k| k.launches).sum();
            let ms = rest.iter().map(|k| k.ms).sum();
            row(
                &mut s,
                &format!("{} other kernels", rest.len()),
                launches,
                ms,
                "—".into(),
            );
        }
        let full: Vec<String> = shown
            .iter()
            .zip(&labels)
            .filter(|(_, (_, abbreviated))| *abbreviated)
            .map(|(k, (label, _))| format!("- {label}: `{}`\n", k.kernel))
            .collect();
        if !full.is_empty() {
            s.push_str("\nThe kernels' names in full (module paths left out):\n\n");
            s.extend(full);
        }
        s
    }
}

/// Table labels of `rows`: each kernel's name without the runtime among its generic arguments
/// (`KernelBinop<AddOp>`); where the arguments are long, the name alone, numbered `#1`, `#2`,
/// ... where several rows share it; and whether the label leaves arguments out (the report
/// names those kernels in full below the table).
fn labels(rows: &[KernelRow]) -> Vec<(String, bool)> {
    const RUNTIMES: [&str; 3] = ["WgpuRuntime", "CudaRuntime", "HipRuntime"];
    let compact = |k: &KernelRow| {
        let mut name = k.kernel.clone();
        for r in RUNTIMES {
            name = name
                .replace(&format!(", {r}>"), ">")
                .replace(&format!("<{r}>"), "");
        }
        name
    };
    let outer = |k: &KernelRow| k.kernel.split('<').next().unwrap_or(&k.kernel).to_string();
    let long = |k: &KernelRow| compact(k).len() > 48;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    rows.iter()
        .map(|k| {
            if !long(k) {
                return (compact(k), false);
            }
            let name = outer(k);
            let shared = rows.iter().filter(|o| long(o) && outer(o) == name).count() > 1;
            let n = seen.entry(name.clone()).or_default();
            *n += 1;
            let label = if shared { format!("{name} #{n}") } else { name };
            (label, true)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_models::data::DatasetKind;

    fn launch(kernel: &str, cubes: Option<&str>, us: u64) -> Launch {
        Launch {
            kernel: kernel.into(),
            cubes: cubes.map(str::to_string),
            time: Duration::from_micros(us),
        }
    }

    #[test]
    fn a_settled_log_is_read_by_byte_range() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        std::fs::write(&log, "| 1ms | a\n|⎯⎯| \n\n").unwrap();
        let len = std::fs::metadata(&log).unwrap().len();
        assert_eq!(settled_len(&log).unwrap(), len);
        assert_eq!(read_launches(&log, 0, len).unwrap().len(), 1);
        assert_eq!(read_range(&log, 2, 5).unwrap(), "1ms");
    }

    #[test]
    fn names_lose_their_module_paths_and_keep_their_generics() {
        assert_eq!(
            short_name("burn_cubecl::kernel::unary<f32, burn_cubecl::ops::Relu>"),
            "unary<f32, Relu>"
        );
        assert_eq!(short_name("matmul_entry"), "matmul_entry");
    }

    #[test]
    fn launches_are_grouped_per_kernel_and_per_step() {
        let launches = [
            launch("a::gemm", Some("(4, 2, 1)"), 300),
            launch("b::relu", Some("(1, 1, 1)"), 10),
            launch("a::gemm", Some("(64, 1, 1)"), 500),
            launch("b::relu", None, 30),
        ];
        let rows = kernel_rows(&launches, 2);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].kernel, "gemm");
        assert_eq!(rows[0].launches, 1.0);
        assert!((rows[0].ms - 0.4).abs() < 1e-12);
        assert_eq!(rows[0].cubes, Some((8, 64)));
        assert_eq!(rows[1].kernel, "relu");
        assert!((rows[1].ms - 0.02).abs() < 1e-12);
        assert_eq!(rows[1].cubes, Some((1, 1)));
    }

    #[test]
    fn the_report_sums_the_kernels_and_compares_them_with_the_wall_time() {
        let report = ProfileReport {
            title: "test".into(),
            wall_ms: 10.0,
            steps: 3,
            warmup: 1,
            matmul: None,
            kernels: kernel_rows(
                &[
                    launch("gemm", Some("(2, 1, 1)"), 2000),
                    launch("relu", None, 500),
                    launch("add", None, 500),
                ],
                1,
            ),
        };
        assert!((report.device_ms() - 3.0).abs() < 1e-9);
        let md = report.markdown(1);
        assert!(md.contains("**3.00 ms** in 3 launches"), "{md}");
        assert!(md.contains("busy 30 %"), "{md}");
        assert!(md.contains("the rest is the host's"), "{md}");
        assert!(
            md.contains("| gemm | 1 | 2.000 | 66.7 % | 2000.0 | 2 |"),
            "{md}"
        );
        assert!(
            md.contains("| 2 other kernels | 2 | 1.000 | 33.3 % |"),
            "{md}"
        );
    }

    #[test]
    fn a_chosen_matmul_kernel_and_its_fallbacks_are_reported() {
        let mut report = ProfileReport {
            title: "t".into(),
            wall_ms: 2.0,
            steps: 1,
            warmup: 0,
            kernels: Vec::new(),
            matmul: Some(MatmulUse {
                kernel: "double-cyclic-cmma".into(),
                products: 62.0,
                fallbacks: 0.0,
                first_reason: None,
            }),
        };
        let md = report.markdown(10);
        assert!(
            md.contains("- Native matmuls on `double-cyclic-cmma`: 62 a step, 0 of them on Burn's own matmul instead.\n"),
            "{md}"
        );
        assert!(md.ends_with("- Kernels not profiled.\n"), "{md}");
        report.matmul = Some(MatmulUse {
            kernel: "simple-tma-cmma".into(),
            products: 62.0,
            fallbacks: 2.0,
            first_reason: Some("simple-tma-cmma refused: the runtime has no TMA".into()),
        });
        let md = report.markdown(10);
        assert!(
            md.contains("2 of them on Burn's own matmul instead (the first: simple-tma-cmma refused: the runtime has no TMA)."),
            "{md}"
        );
    }

    #[test]
    fn kernels_sharing_a_name_are_numbered_and_named_in_full() {
        let rows = kernel_rows(
            &[
                launch(
                    "m::Matmul<m::UnitMatmulFamily<m::StridedStageFamily, m::Option<m::StridedStageFamily>>, m::A>",
                    None,
                    30,
                ),
                launch(
                    "m::Matmul<m::CmmaMatmulFamily<m::StridedStageFamily, m::Option<m::StridedStageFamily>>, m::A>",
                    None,
                    20,
                ),
                launch("e::Binop<e::AddOp, r::WgpuRuntime>", None, 15),
                launch("e::relu", None, 10),
            ],
            1,
        );
        let names: Vec<String> = labels(&rows).into_iter().map(|(l, _)| l).collect();
        assert_eq!(names, ["Matmul #1", "Matmul #2", "Binop<AddOp>", "relu"]);
        let md = ProfileReport {
            title: "t".into(),
            wall_ms: 1.0,
            steps: 1,
            warmup: 0,
            kernels: rows,
            matmul: None,
        }
        .markdown(10);
        assert!(
            md.contains("- Matmul #1: `Matmul<UnitMatmulFamily<StridedStageFamily, Option<StridedStageFamily>>, A>`"),
            "{md}"
        );
        assert!(md.contains("- Matmul #2: `Matmul<CmmaMatmulFamily"), "{md}");
        assert!(md.contains("| Binop<AddOp> |"), "{md}");
        assert!(!md.contains("- relu") && !md.contains("- Binop"), "{md}");
    }

    #[test]
    fn what_cannot_be_profiled_is_refused_with_the_reason() {
        let opts = ProfileOptions {
            model: ModelKind::Lenet5,
            spec: DatasetKind::Mnist.spec(),
            frames: 48,
            batch: 8,
            backend: BackendKind::Wgpu,
            multiplier: Multiplier::native(),
            policy: Policy::default(),
            warmup: 1,
            steps: 1,
        };
        assert!(opts.validate().is_ok());
        let err = |o: ProfileOptions| o.validate().unwrap_err().to_string();
        let ndarray = err(ProfileOptions {
            backend: BackendKind::Ndarray,
            ..opts.clone()
        });
        assert!(ndarray.contains("runs no kernels"), "{ndarray}");
        assert!(
            err(ProfileOptions {
                steps: 0,
                ..opts.clone()
            })
            .contains("--steps")
        );
        assert!(
            err(ProfileOptions {
                batch: 0,
                ..opts.clone()
            })
            .contains("--batch-size")
        );
        let gru = err(ProfileOptions {
            model: ModelKind::Gru,
            ..opts
        });
        assert!(!gru.is_empty());
    }
}
