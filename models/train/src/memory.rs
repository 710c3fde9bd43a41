//! `ember memory`: the training-memory footprint of a model by component (the paper's Table I),
//! measured from the runtime, dense and under SparseAct policies (Table III).
//!
//! - On CubeCL backends (wgpu, cuda) the bytes come from the CubeCL client's memory manager
//!   (`bytes_in_use`: live tensors, pool padding excluded).
//! - On ndarray they come from [`CountingAllocator`], a global allocator that counts live heap
//!   bytes. The `ember` binary installs it; a program that does not gets a clear error.
//!
//! Components, measured one after the other on a fresh model: **model** (the parameters),
//! **inputs** (a batch of images and labels), **activations** (what the autodiff graph holds
//! after the forward pass and the loss, i.e. everything kept for backward), **optimizer**
//! (Adam's state after one step, measured on the first configuration only: it does not depend
//! on the pruning policy).

use crate::backend::{BackendJob, BackendKind, TrainBackend};
use crate::error::{EmberError, Result};
use crate::fused_optim::FusedAdam;
use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{GradientsParams, Optimizer};
use burn::prelude::*;
use burn_approx_mul::Multiplier;
use burn_sparse_act::{Policy, Pruning};
use ember_models::resmlp::{ResMlp, ResMlpConfig};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A global allocator that counts the bytes currently allocated through it.
///
/// ```ignore
/// #[global_allocator]
/// static ALLOC: ember_models::memory::CountingAllocator = ember_models::memory::CountingAllocator;
/// ```
pub struct CountingAllocator;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static INSTALLED: AtomicBool = AtomicBool::new(false);

// SAFETY: every call forwards to `System` with the same arguments; the counters are atomics.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        INSTALLED.store(true, Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        INSTALLED.store(true, Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            LIVE.fetch_add(new_size, Ordering::Relaxed);
        }
        p
    }
}

/// Live heap bytes, if [`CountingAllocator`] is this program's global allocator.
pub fn heap_in_use() -> Option<usize> {
    // The allocation makes sure at least one has gone through the allocator before we ask.
    drop(std::hint::black_box(Box::new(0u64)));
    INSTALLED
        .load(Ordering::Relaxed)
        .then(|| LIVE.load(Ordering::Relaxed))
}

/// Reads the bytes in use on a backend's default device.
type Probe = Box<dyn Fn() -> u64>;

fn probe(kind: BackendKind) -> Result<Probe> {
    use cubecl_kernels::decorator::KernelBackend;
    let unavailable = || EmberError::Backend(format!("{kind} reports no memory usage"));
    Ok(match kind {
        BackendKind::Ndarray => {
            heap_in_use().ok_or_else(|| {
                EmberError::Backend(
                    "memory on ndarray is measured by ember's counting allocator, which this \
                     program does not install"
                        .into(),
                )
            })?;
            Box::new(|| heap_in_use().unwrap_or(0) as u64)
        }
        BackendKind::Wgpu => {
            type W = burn::backend::Wgpu;
            W::memory_in_use(&Default::default()).ok_or_else(unavailable)?;
            Box::new(|| W::memory_in_use(&Default::default()).unwrap_or(0))
        }
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => {
            type C = burn::backend::Cuda;
            C::memory_in_use(&Default::default()).ok_or_else(unavailable)?;
            Box::new(|| C::memory_in_use(&Default::default()).unwrap_or(0))
        }
        #[cfg(not(feature = "cuda"))]
        BackendKind::Cuda => return Err(unavailable()),
    })
}

/// The model `ember memory` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryModel {
    /// ResMLP-S12 (d = 384, 12 blocks).
    ResmlpS12,
    /// ResMLP-S24 (d = 384, 24 blocks).
    ResmlpS24,
    /// The small ResMLP of the CPU runs (d = 128, 4 blocks).
    ResmlpSmall,
}

ember_models::choices!(MemoryModel {
    ResmlpS12 => "resmlp-s12",
    ResmlpS24 => "resmlp-s24",
    ResmlpSmall => "resmlp-small",
});

/// Everything `ember memory` needs.
#[derive(Clone, Debug)]
pub struct MemoryOptions {
    /// The model.
    pub model: MemoryModel,
    /// Image side in pixels.
    pub image_size: usize,
    /// Patch side (default: 16 from 64 px up, else 4).
    pub patch_size: Option<usize>,
    /// Classes (default: 1000 from 64 px up, else 10).
    pub classes: Option<usize>,
    /// Batch size.
    pub batch: usize,
    /// The pruning policies to measure after the dense one.
    pub policies: Vec<(String, Policy)>,
    /// Backend.
    pub backend: BackendKind,
    /// Multiplier of every contraction.
    pub multiplier: Multiplier,
}

/// One measured configuration (bytes).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MemoryRow {
    /// `dense` or the policy's `S:B`.
    pub label: String,
    /// The batch of images and labels.
    pub inputs: u64,
    /// The parameters.
    pub model: u64,
    /// Adam's state (measured with the first row).
    pub optimizer: Option<u64>,
    /// Held by the autodiff graph after forward + loss.
    pub activations: u64,
    /// Peak resident memory of the process that measured this configuration (Linux's `VmHWM`;
    /// `None` elsewhere). `ember memory` measures each configuration in a process of its own,
    /// so this is the configuration's own peak: live bytes plus transient buffers, allocator
    /// slack and the runtime.
    #[serde(default)]
    pub peak_rss: Option<u64>,
}

/// Peak resident memory of this process so far (`VmHWM` of `/proc/self/status`), if the
/// system reports it.
pub fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The measured table.
#[derive(Clone, Debug)]
pub struct MemoryReport {
    /// What was measured, for the table's title.
    pub title: String,
    /// Where the bytes came from.
    pub source: &'static str,
    /// Dense first, then every policy.
    pub rows: Vec<MemoryRow>,
    /// Whether the configuration is the paper's (ResMLP-S12, 224 px, batch 32), so that the
    /// table shows Table III's numbers beside the measured ones.
    pub paper: bool,
}

/// The paper's Table III grid: s ∈ {0.6, 0.7, 0.8} × b ∈ {16, 32, 64}.
pub fn table3_grid() -> Vec<Pruning> {
    [0.6, 0.7, 0.8]
        .iter()
        .flat_map(|&s| [16, 32, 64].map(|b| Pruning::new(s, b).expect("Table III's S:B are valid")))
        .collect()
}

/// The labelled policies measuring `grid` takes: each pruning applied to every linear layer,
/// then, when `fused`, each one's fused variant (per-channel scales pruned too, `S:B+scales`).
pub fn policies(grid: &[Pruning], fused: bool) -> Vec<(String, Policy)> {
    let mut policies: Vec<(String, Policy)> = grid
        .iter()
        .map(|&p| (p.to_string(), Policy::uniform(p)))
        .collect();
    if fused {
        policies.extend(grid.iter().map(|&p| {
            let mut policy = Policy::uniform(p);
            policy.scales = true;
            (format!("{p}+scales"), policy)
        }));
    }
    policies
}

const MIB: f64 = 1024.0 * 1024.0;

/// The paper's Table III (ResMLP-S12, ImageNet, batch 32): (label, activations MiB, δ %).
pub const PAPER_TABLE3: &[(&str, f64, f64)] = &[
    ("dense", 1599.2, 0.0),
    ("0.6:16", 1234.0, -22.8),
    ("0.6:32", 1215.0, -24.0),
    ("0.6:64", 1205.3, -24.6),
    ("0.7:16", 1161.5, -27.4),
    ("0.7:32", 1142.9, -28.5),
    ("0.7:64", 1137.2, -29.0),
    ("0.8:16", 1082.8, -32.3),
    ("0.8:32", 1075.1, -32.8),
    ("0.8:64", 1071.0, -33.0),
];

impl MemoryReport {
    /// The table as Markdown, with the paper's Table III numbers where a row matches one and the
    /// configuration is the paper's (ResMLP-S12, 224 px, batch 32).
    pub fn markdown(&self) -> String {
        let paper = self.paper;
        let mib = |b: u64| b as f64 / MIB;
        let dense = self.rows[0].activations as f64;
        let mut s = format!(
            "{}\n\nbytes from {}; MiB = 2^20 bytes.\n\n",
            self.title, self.source
        );
        let peaks = self.rows.iter().any(|r| r.peak_rss.is_some());
        s.push_str("| policy S:B | inputs | model | optimizer | activations | δ MiB | δ % |");
        if peaks {
            s.push_str(" peak RSS |");
        }
        if paper {
            s.push_str(" paper activations | paper δ % |");
        }
        s.push('\n');
        s.push_str("|---|---:|---:|---:|---:|---:|---:|");
        if peaks {
            s.push_str("---:|");
        }
        if paper {
            s.push_str("---:|---:|");
        }
        s.push('\n');
        for r in &self.rows {
            let delta = r.activations as f64 - dense;
            s.push_str(&format!(
                "| {} | {:.1} | {:.1} | {} | {:.1} | {} | {} |",
                r.label,
                mib(r.inputs),
                mib(r.model),
                r.optimizer.map_or("—".into(), |o| format!("{:.1}", mib(o))),
                mib(r.activations),
                if r.label == "dense" {
                    "—".into()
                } else {
                    format!("{:+.1}", delta / MIB)
                },
                if r.label == "dense" {
                    "—".into()
                } else {
                    format!("{:+.1}", 100.0 * delta / dense)
                },
            ));
            if peaks {
                match r.peak_rss {
                    Some(p) => s.push_str(&format!(" {:.1} |", mib(p))),
                    None => s.push_str(" — |"),
                }
            }
            if paper {
                match PAPER_TABLE3.iter().find(|(l, _, _)| *l == r.label) {
                    Some((_, a, d)) => s.push_str(&format!(" {a:.1} | {d:+.1} |")),
                    None => s.push_str(" — | — |"),
                }
            }
            s.push('\n');
        }
        s
    }
}

impl MemoryOptions {
    /// Checks the options (batch, image and patch sizes, classes) before anything is measured.
    pub fn validate(&self) -> Result<()> {
        self.config().map(|_| ())
    }

    /// Whether this is the configuration of the paper's Table III (ResMLP-S12, 224 px, batch 32).
    pub fn is_paper_configuration(&self) -> bool {
        self.model == MemoryModel::ResmlpS12 && self.image_size == 224 && self.batch == 32
    }

    fn config(&self) -> Result<ResMlpConfig> {
        if self.batch == 0 {
            return Err(EmberError::Invalid("--batch must be at least 1".into()));
        }
        let big = self.image_size >= 64;
        let patch = self.patch_size.unwrap_or(if big { 16 } else { 4 });
        let classes = self.classes.unwrap_or(if big { 1000 } else { 10 });
        if patch == 0 || self.image_size == 0 || !self.image_size.is_multiple_of(patch) {
            return Err(EmberError::Invalid(format!(
                "--image-size {} must be a positive multiple of the patch size {patch}",
                self.image_size
            )));
        }
        if classes == 0 {
            return Err(EmberError::Invalid("--classes must be at least 1".into()));
        }
        let config = match self.model {
            MemoryModel::ResmlpS12 => ResMlpConfig::s12(self.image_size, patch, classes),
            MemoryModel::ResmlpS24 => ResMlpConfig::s24(self.image_size, patch, classes),
            MemoryModel::ResmlpSmall => ResMlpConfig::small(self.image_size, patch, classes),
        };
        self.check_size(&config)?;
        Ok(config)
    }

    /// Refuses a configuration whose largest tensor (the input batch, an MLP's hidden
    /// activation, or the classifier weight) would exceed [`MAX_ELEMENTS`]: it could not be
    /// allocated, and the sizes would overflow before that.
    fn check_size(&self, c: &ResMlpConfig) -> Result<()> {
        let tokens = (c.image_size / c.patch_size).checked_pow(2);
        let tensors = [
            (
                "the input batch",
                [
                    Some(self.batch),
                    Some(c.channels),
                    c.image_size.checked_pow(2),
                ],
            ),
            (
                "an MLP activation",
                [Some(self.batch), tokens, c.dim.checked_mul(4)],
            ),
            (
                "the classifier weight",
                [Some(c.dim), Some(c.classes), Some(1)],
            ),
        ];
        for (what, dims) in tensors {
            let elements = dims
                .into_iter()
                .try_fold(1usize, |n, d| n.checked_mul(d?))
                .filter(|&n| n <= MAX_ELEMENTS);
            if elements.is_none() {
                return Err(EmberError::Invalid(format!(
                    "--batch {} --image-size {} --classes {}: {what} would have more than \
                     {MAX_ELEMENTS} elements ({} GiB of f32); choose smaller values",
                    self.batch,
                    self.image_size,
                    c.classes,
                    (MAX_ELEMENTS * 4) >> 30
                )));
            }
        }
        // a lower bound of the step's total: the MLP hidden activations every block keeps for
        // its backward pass (before and after the GELU), tokens × 4·dim each per image
        let tokens = tokens.unwrap_or(usize::MAX) as u128;
        let bytes = c.depth as u128 * self.batch as u128 * tokens * 4 * c.dim as u128 * 2 * 4;
        check_fits(
            bytes,
            &format!(
                "--batch {} --image-size {}: the MLP activations a training step keeps",
                self.batch, self.image_size
            ),
            available_memory(),
        )
    }
}

/// The memory this machine has available for new allocations (Linux's `MemAvailable`),
/// `None` where it cannot be read.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Refuses `bytes` that a job would allocate (`what`: the options and what they size) when
/// that is more than `available` (from [`available_memory`]; `None` accepts anything): the
/// allocation would end the process (an abort, or the kernel's OOM killer) instead of an
/// error.
pub fn check_fits(bytes: u128, what: &str, available: Option<u64>) -> Result<()> {
    match available {
        Some(free) if bytes > free as u128 => Err(EmberError::Invalid(format!(
            "{what} would need {:.1} GiB, more than the {:.1} GiB this machine has available; \
             choose smaller values",
            bytes as f64 / (1u64 << 30) as f64,
            free as f64 / (1u64 << 30) as f64
        ))),
        _ => Ok(()),
    }
}

/// The most elements [`MemoryOptions::validate`] lets one tensor have (8 GiB of f32).
pub const MAX_ELEMENTS: usize = 1 << 31;

/// Checks that `path` can be written later: it does not exist and its directory does (so a
/// bad `--out` is refused before a long measurement, not after).
pub fn check_new(path: &std::path::Path) -> Result<()> {
    if path.exists() {
        return Err(EmberError::Exists(path.to_path_buf()));
    }
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => {
            Err(EmberError::Invalid(format!(
                "--out {}: the directory {} does not exist",
                path.display(),
                dir.display()
            )))
        }
        _ => Ok(()),
    }
}

/// Writes `text` to a new file at `path` atomically; an existing file is an error, never
/// overwritten.
pub fn write_new(path: &std::path::Path, text: &str) -> Result<()> {
    crate::atomic::write_new(path, text.as_bytes())
}

/// The configurations `opts` asks for, labelled: dense first, then every policy.
pub fn configurations(opts: &MemoryOptions) -> Vec<(String, Policy)> {
    let mut configs = vec![("dense".to_string(), Policy::default())];
    configs.extend(opts.policies.iter().cloned());
    configs
}

/// Measures configuration `index` of [`configurations`] in this process (Adam's state with the
/// first one), recording the process's peak resident memory.
pub fn measure_configuration(opts: &MemoryOptions, index: usize) -> Result<MemoryRow> {
    let config = opts.config()?;
    // Before `probe`: asking a wgpu runtime without an adapter for its memory panics.
    opts.backend.check_available()?;
    let (label, policy) = configurations(opts)
        .into_iter()
        .nth(index)
        .ok_or_else(|| EmberError::Invalid(format!("no configuration {index} to measure")))?;
    let job = MemoryJob {
        probe: probe(opts.backend)?,
        config,
        batch: opts.batch,
        optimizer: index == 0,
    };
    let mut row = opts
        .backend
        .dispatch(opts.multiplier.clone(), policy, job)?;
    row.label = label;
    row.peak_rss = peak_rss();
    Ok(row)
}

/// The table of `rows`, measured for `opts`.
pub fn report(opts: &MemoryOptions, rows: Vec<MemoryRow>) -> Result<MemoryReport> {
    let config = opts.config()?;
    Ok(MemoryReport {
        title: format!(
            "Training memory of ResMLP (d = {}, depth {}), {} px, {}×{} patches, {} classes, \
             batch {}, on {} with multiplier {}",
            config.dim,
            config.depth,
            config.image_size,
            config.patch_size,
            config.patch_size,
            config.classes,
            opts.batch,
            opts.backend,
            opts.multiplier
        ),
        source: match opts.backend {
            BackendKind::Ndarray => {
                "a counting global allocator (ndarray: tensors live on the heap)"
            }
            _ => "the CubeCL client's memory manager (bytes_in_use)",
        },
        rows,
        paper: opts.is_paper_configuration(),
    })
}

/// Measures every configuration of `opts` in this process, one after the other. The peak
/// column is then the process's running peak; `ember memory` runs each configuration in a
/// process of its own instead ([`measure_configuration`]), so that one configuration's
/// allocator slack does not carry into the next and each peak is its own.
pub fn measure(opts: MemoryOptions) -> Result<MemoryReport> {
    opts.config()?;
    opts.backend.check_available()?;
    let mut rows = Vec::new();
    for (i, (label, _)) in configurations(&opts).iter().enumerate() {
        eprintln!("measuring {label} ...");
        rows.push(measure_configuration(&opts, i)?);
    }
    report(&opts, rows)
}

struct MemoryJob {
    probe: Probe,
    config: ResMlpConfig,
    batch: usize,
    optimizer: bool,
}

/// Forces every (lazily initialised) parameter into memory.
struct Touch;
impl<B: Backend> ModuleVisitor<B> for Touch {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let _ = param.val();
    }
}

impl BackendJob for MemoryJob {
    type Output = MemoryRow;

    fn run<B: TrainBackend>(self, device: B::Device) -> Result<MemoryRow> {
        let probe = &self.probe;
        let sync = || B::sync(&device).map_err(|e| EmberError::Backend(format!("{e:?}")));
        // One step thrown away first: the buffers a worker thread allocates on its first
        // product and keeps (the host GEMM's workspaces) then exist before the first probe, so
        // no column counts them, whichever threads happened to run which product.
        {
            let model = self.config.init::<B>(&device);
            let side = self.config.image_size;
            let images =
                Tensor::<B, 4>::zeros([self.batch, self.config.channels, side, side], &device);
            let _ = model.forward(images).sum().backward();
        }
        B::seed(&device, 1);
        sync()?;
        let start = probe();
        let model = self.config.init::<B>(&device);
        model.visit(&mut Touch);
        sync()?;
        let after_model = probe();
        let side = self.config.image_size;
        let images = Tensor::<B, 4>::random(
            [self.batch, self.config.channels, side, side],
            burn::tensor::Distribution::Normal(0.0, 1.0),
            &device,
        );
        let targets = Tensor::<B, 1, Int>::from_data(
            TensorData::new(
                (0..self.batch)
                    .map(|i| (i % self.config.classes) as i64)
                    .collect::<Vec<_>>(),
                [self.batch],
            ),
            &device,
        );
        sync()?;
        let after_inputs = probe();
        let logits = model.forward(images.clone());
        let loss = CrossEntropyLossConfig::new()
            .init(&device)
            .forward(logits, targets.clone());
        sync()?;
        let after_forward = probe();
        let optimizer = if self.optimizer {
            let mut optim = FusedAdam::default().init::<B, ResMlp<B>>();
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            let model = optim.step(1e-3, model, grads);
            sync()?;
            let after_step = probe();
            drop(model);
            Some(after_step.saturating_sub(after_inputs))
        } else {
            None
        };
        let _ = (images, targets);
        Ok(MemoryRow {
            label: String::new(),
            inputs: after_inputs.saturating_sub(after_model),
            model: after_model.saturating_sub(start),
            optimizer,
            activations: after_forward.saturating_sub(after_inputs),
            peak_rss: None,
        })
    }
}
