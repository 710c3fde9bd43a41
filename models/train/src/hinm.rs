//! `ember prune --hinm`: a trained run's weights pruned to HiNM with a permutation search and
//! written packed (`model.hinm`), with a per-layer table of the saliency each permutation
//! choice keeps; and reading a packed model back for `ember eval`.

use crate::atomic;
use crate::backend::{NdarrayStack, TrainBackend};
use crate::error::{EmberError, Result};
use crate::policy::{LayerPolicy, contraction_layers, uniform};
use crate::record::load_checked;
use crate::run::{Manifest, resolve_checkpoint};
use crate::technique::{self, Masks, Registration, Technique};
use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn_hinm::Level;
use burn_hinm::file::{PackedModel, Stored};
use burn_hinm::gyro::{Method, search};
use burn_hinm::mask::{HinmMask, Retained, Saliency, check_tile, nnz_vec};
use burn_hinm::module::params;
use burn_hinm::pack::{Layout, pack, scores};
use ember_models::classifier::{ModelKind, ModelVisitor, TrainableClassifier};
use ember_models::data::{DataSpec, DatasetKind};
use ember_models::shape::Shape;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// File name of a packed model in a prune output directory.
pub const PACKED_FILE: &str = "model.hinm";
const _: () = assert!(technique::HINM.packs);

/// Everything `ember prune --hinm` needs.
#[derive(Clone, Debug)]
pub struct PruneOptions {
    /// The trained run (its directory, model.mpk or a checkpoint file).
    pub checkpoint: PathBuf,
    /// The level of every pruned layer (a policy may set others, or `off`).
    pub level: Level,
    /// The permutation search the packed model is written with.
    pub perm: Method,
    /// Seed of the search.
    pub seed: u64,
    /// Output directory (must not exist, or be empty).
    pub out: PathBuf,
    /// Per-layer HiNM levels (`hinm = "…"` / `"off"`); without one, the first and the last
    /// contraction layer stay dense.
    pub policy: Option<LayerPolicy>,
    /// The model `checkpoint` holds: required for PyTorch weights (`.pth`, `.safetensors`),
    /// checked against a run's manifest otherwise.
    pub model: Option<ModelKind>,
}

/// One layer of a prune: its level and what each permutation choice keeps.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PrunedLayer {
    /// Layer path.
    pub path: String,
    /// Weight shape (Burn's layout).
    pub dims: Vec<usize>,
    /// Its level, `None` when kept dense.
    pub level: Option<String>,
    /// Total saliency `Σ|w|` of the weight.
    pub total: f64,
    /// Saliency kept after 2:4 with no permutation, OVW and Gyro (÷ total).
    pub retained: Option<[f64; 3]>,
    /// Seconds of the three searches.
    pub seconds: Option<[f64; 3]>,
}

/// What `ember prune` did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PruneReport {
    /// Every contraction layer.
    pub layers: Vec<PrunedLayer>,
    /// Bytes of the dense model file pruned.
    pub dense_bytes: u64,
    /// Bytes of `model.hinm`.
    pub packed_bytes: u64,
    /// Where it was written.
    pub out: PathBuf,
}

impl PruneReport {
    /// The per-layer table in Markdown.
    pub fn markdown(&self) -> String {
        let mut t = String::from(
            "| layer | shape | level | kept, none | kept, OVW | kept, Gyro | search s (none / OVW / Gyro) |\n\
             |---|---|---|---:|---:|---:|---:|\n",
        );
        for l in &self.layers {
            let (kept, secs) = match (l.retained, l.seconds) {
                (Some(r), Some(s)) => (
                    r.map(|x| format!("{x:.4}")),
                    format!("{:.2} / {:.2} / {:.2}", s[0], s[1], s[2]),
                ),
                _ => (["–".to_string(), "–".into(), "–".into()], "–".into()),
            };
            writeln!(
                t,
                "| {} | {:?} | {} | {} | {} | {} | {} |",
                l.path,
                l.dims,
                l.level.as_deref().unwrap_or("dense"),
                kept[0],
                kept[1],
                kept[2],
                secs
            )
            .expect("to a string");
        }
        writeln!(
            t,
            "\nFile sizes: dense model {} bytes, packed {} bytes ({:.2}×).",
            self.dense_bytes,
            self.packed_bytes,
            self.packed_bytes as f64 / self.dense_bytes.max(1) as f64
        )
        .expect("to a string");
        t
    }
}

/// `none`, `ovw` or `gyro`, as `--perm` takes it.
pub fn method_name(m: Method) -> &'static str {
    match m {
        Method::None => "none",
        Method::Ovw => "ovw",
        Method::Gyro => "gyro",
    }
}

/// Whether `path` is (or holds) a packed HiNM model: where `ember eval` takes the packed route.
pub fn packed_file(path: &Path) -> Option<PathBuf> {
    technique::packed_file_at(&technique::HINM, path)
}

/// Loads a run's trained model and returns its float parameters by path.
struct Weights<B: TrainBackend> {
    file: PathBuf,
    checksum: Option<u32>,
    kind: ModelKind,
    device: B::Device,
}

impl<B: TrainBackend> ModelVisitor<B> for Weights<B> {
    type Output = Result<BTreeMap<String, (Vec<usize>, Vec<f32>)>>;
    fn visit<M: TrainableClassifier<B>>(self, model: M) -> Self::Output {
        let model = load_checked(&self.file, self.checksum, model, self.kind, &self.device)?;
        Ok(params(&model.valid()))
    }
}

/// The float parameter shapes of a freshly built model, in visiting order.
struct Order;

impl<B: TrainBackend> ModelVisitor<B> for Order {
    type Output = Vec<(String, Vec<usize>)>;
    fn visit<M: TrainableClassifier<B>>(self, model: M) -> Self::Output {
        ember_models::params::float_shapes(&model)
    }
}

/// One contraction layer's HiNM decision: its table row and, when pruned, its mask.
#[derive(Clone, Debug)]
pub struct LayerPlan {
    /// What the table shows.
    pub row: PrunedLayer,
    /// The mask searched with the chosen permutation (`None`: kept dense).
    pub mask: Option<HinmMask>,
}

/// The HiNM masks of a model's contraction `layers` (paths, model order) from its parameters
/// `all` (by full path): every layer at `level` except the first and the last, unless `policy`
/// sets them (`hinm = "…"` / `"off"`). Every layer is checked (tile height, kept columns)
/// before any search runs. With `compare`, the saliency kept with no permutation, OVW and Gyro
/// is measured for the table; the mask is the one of `perm`.
pub fn plan(
    all: &BTreeMap<String, (Vec<usize>, Vec<f32>)>,
    layers: &[String],
    policy: Option<&LayerPolicy>,
    level: Level,
    perm: Method,
    seed: u64,
    compare: bool,
) -> Result<Vec<LayerPlan>> {
    let choices = match policy {
        Some(p) => p.resolve(layers)?,
        None => uniform(layers),
    };
    let last = layers.len().saturating_sub(1);
    let chosen: Vec<(String, Option<Level>)> = choices
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let l = match c.hinm {
                Some(l) => l,
                None if i == 0 || i == last => None,
                None => Some(level),
            };
            (c.path.clone(), l)
        })
        .collect();
    // the policy's own level for a layer, for an error about it
    let set_by_policy = |path: &str| {
        let c = choices.iter().find(|c| c.path == path)?;
        Some((policy?.origin(), c.hinm.flatten()?))
    };
    let weight = |path: &str| -> Result<&(Vec<usize>, Vec<f32>)> {
        all.get(&format!("{path}.weight"))
            .ok_or_else(|| EmberError::Invalid(format!("--hinm: layer {path} has no weight")))
    };
    for (path, level) in &chosen {
        let Some(level) = level else { continue };
        let (dims, _) = weight(path)?;
        let (out, k) = Layout::of(dims)
            .map(|l| l.view())
            .ok_or_else(|| EmberError::Invalid(format!("--hinm: layer {path} cannot be packed")))?;
        let what = |e: burn_hinm::HinmError| match set_by_policy(path) {
            Some((origin, own)) => EmberError::Policy {
                origin: origin.to_string(),
                reason: format!(
                    "layer {path} sets hinm = \"{own}\" ({out} outputs × {k} inputs): {e}; \
                     choose another level for it, or \"off\""
                ),
            },
            None => EmberError::Invalid(format!(
                "--hinm {level}: layer {path} ({out} outputs × {k} inputs): {e}; keep it dense \
                 with a policy (hinm = \"off\") or choose another level"
            )),
        };
        check_tile(out, level.v).map_err(what)?;
        nnz_vec(k, level.vector_sparsity()).map_err(what)?;
    }
    let bar =
        indicatif::ProgressBar::new(chosen.iter().filter(|(_, l)| l.is_some()).count() as u64)
            .with_style(
                indicatif::ProgressStyle::with_template(
                    "HiNM search {bar:30} {pos}/{len} layers {msg}",
                )
                .expect("a valid template"),
            );
    let mut plans = Vec::new();
    for (path, level) in &chosen {
        let (dims, values) = weight(path)?;
        let s = scores(values, dims, Saliency::Magnitude)
            .map_err(|e| EmberError::Invalid(format!("--hinm: layer {path}: {e}")))?;
        let total = s.total();
        let mut row = PrunedLayer {
            path: path.clone(),
            dims: dims.clone(),
            level: level.map(|l| l.to_string()),
            total,
            retained: None,
            seconds: None,
        };
        let Some(level) = level else {
            plans.push(LayerPlan { row, mask: None });
            continue;
        };
        bar.set_message(path.clone());
        let methods: Vec<Method> = if compare {
            vec![Method::None, Method::Ovw, Method::Gyro]
        } else {
            vec![perm]
        };
        let mut kept = [f64::NAN; 3];
        let mut secs = [f64::NAN; 3];
        let mut mask = None;
        for method in methods {
            let i = method as usize;
            let start = Instant::now();
            let (m, Retained { nm, .. }) =
                search(&s, level.v, level.vector_sparsity(), method, seed)
                    .map_err(|e| EmberError::Invalid(format!("--hinm: layer {path}: {e}")))?;
            secs[i] = start.elapsed().as_secs_f64();
            kept[i] = nm / total.max(f64::MIN_POSITIVE);
            if method == perm {
                mask = Some(m);
            }
        }
        row.retained = Some(kept);
        row.seconds = Some(secs);
        plans.push(LayerPlan { row, mask });
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(plans)
}

/// The packed model of parameters `all` under `plans`: pruned weights packed, the rest dense.
pub fn packed_model(
    kind: ModelKind,
    all: &BTreeMap<String, (Vec<usize>, Vec<f32>)>,
    plans: &[LayerPlan],
    about: BTreeMap<String, String>,
) -> Result<PackedModel> {
    let mut params: BTreeMap<String, (Vec<usize>, Stored)> = all
        .iter()
        .map(|(p, (d, v))| (p.clone(), (d.clone(), Stored::Dense(v.clone()))))
        .collect();
    for plan in plans {
        let Some(mask) = &plan.mask else { continue };
        let key = format!("{}.weight", plan.row.path);
        let (dims, values) = &all[&key];
        let packed = pack(values, dims, mask)
            .map_err(|e| EmberError::Invalid(format!("--hinm: layer {}: {e}", plan.row.path)))?;
        params.insert(key, (dims.clone(), Stored::Packed(packed)));
    }
    Ok(PackedModel {
        model: kind.to_string(),
        about,
        params,
    })
}

/// Per pruned weight (full parameter path), its mask in Burn's layout: `1` kept, `0` pruned.
pub fn weight_masks(
    all: &BTreeMap<String, (Vec<usize>, Vec<f32>)>,
    plans: &[LayerPlan],
) -> BTreeMap<String, Vec<f32>> {
    plans
        .iter()
        .filter_map(|p| {
            let mask = p.mask.as_ref()?;
            let key = format!("{}.weight", p.row.path);
            let (dims, _) = &all[&key];
            let layout = Layout::of(dims).expect("checked by plan");
            let view: Vec<f32> = mask
                .dense()
                .iter()
                .map(|&k| f32::from(u8::from(k)))
                .collect();
            Some((key, layout.from_view(&view)))
        })
        .collect()
}

/// Prunes a trained run to HiNM and writes the packed model (see the module docs).
pub fn prune(opts: PruneOptions) -> Result<PruneReport> {
    if let Some(file) = packed_file(&opts.checkpoint) {
        return Err(EmberError::BadCheckpoint {
            path: file,
            reason: "it is already a packed HiNM model: prune the dense run it came from".into(),
        });
    }
    if opts.out.exists()
        && std::fs::read_dir(&opts.out)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(atomic::not_empty(&opts.out));
    }
    let SourceRun {
        kind,
        file,
        params: all,
        layers,
        shape,
        dataset,
        ..
    } = source_params(&opts.checkpoint, opts.model)?;
    eprintln!(
        "searching HiNM {} masks of {kind} ({} permutations) in {}",
        opts.level,
        method_name(opts.perm),
        file.display()
    );
    let plans = plan(
        &all,
        &layers,
        opts.policy.as_ref(),
        opts.level,
        opts.perm,
        opts.seed,
        true,
    )?;
    let about: BTreeMap<String, String> = [
        ("level", opts.level.to_string()),
        ("perm", method_name(opts.perm).to_string()),
        ("seed", opts.seed.to_string()),
        ("source", file.display().to_string()),
    ]
    .into_iter()
    .chain(dataset.map(|d| ("dataset", d.to_string())))
    .chain(shape.map(|s| (technique::ABOUT_SHAPE, s.to_json())))
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let model = packed_model(kind, &all, &plans, about)?;
    let rows = plans.into_iter().map(|p| p.row).collect();
    let bytes = model.to_bytes();
    let dense_bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    let report = PruneReport {
        layers: rows,
        dense_bytes,
        packed_bytes: bytes.len() as u64,
        out: opts.out.clone(),
    };
    // the three files appear together: an interruption or a failed write leaves none
    let staging = atomic::Staging::new(&opts.out)?;
    atomic::write_new(&staging.path().join(PACKED_FILE), &bytes)?;
    let json = serde_json::to_vec_pretty(&report).expect("a report serialises");
    atomic::write_new(&staging.path().join("hinm.json"), &json)?;
    atomic::write_new(
        &staging.path().join("hinm.md"),
        report.markdown().as_bytes(),
    )?;
    staging.publish()?;
    Ok(report)
}

/// What `ember train --hinm LEVEL --from RUN` fine-tunes: the trained run's weights under the
/// HiNM masks searched on them (the same search as `ember prune`, one permutation choice).
#[derive(Clone, Debug)]
pub struct HinmTune {
    /// The level of every pruned layer (first and last layer dense unless `--policy` sets them).
    pub level: Level,
    /// The permutation search.
    pub perm: Method,
    /// The trained run whose weights are pruned and fine-tuned.
    pub from: PathBuf,
}

impl HinmTune {
    /// How a run manifest records it (a resume must ask for the same).
    pub fn describe(&self) -> String {
        format!(
            "{} {} from {}",
            self.level,
            method_name(self.perm),
            self.from.display()
        )
    }
}

/// A fine-tuning's starting point: the source model file, its masks and the plans they came
/// from.
#[derive(Clone, Debug)]
pub struct Tuning {
    /// The model the source run holds.
    pub kind: ModelKind,
    /// The source run's model file.
    pub file: PathBuf,
    /// Its CRC-32 as its run recorded it.
    pub checksum: Option<u32>,
    /// The source model's shape when not its kind's own (the fine-tuning run takes it).
    pub shape: Option<Shape>,
    /// Per pruned weight (full path), its 0/1 mask in Burn's layout.
    pub masks: Masks,
    /// The per-layer plans (for the packed model written at the end).
    pub plans: Vec<LayerPlan>,
}

/// A trained run's parameters on the host (what pruning and fine-tuning start from).
pub struct SourceRun {
    /// Its model.
    pub kind: ModelKind,
    /// Its manifest (`None` for PyTorch weights).
    pub manifest: Option<Manifest>,
    /// The model file read.
    pub file: PathBuf,
    /// That file's CRC-32 as the run recorded it.
    pub checksum: Option<u32>,
    /// Every float parameter by full path.
    pub params: Params,
    /// The contraction layers in model order.
    pub layers: Vec<String>,
    /// The model's shape when not its kind's own ([`ModelKind::own_shape`]).
    pub shape: Option<Shape>,
    /// The dataset it classifies: its run's, or the one weights' shape says
    /// (`imagenet-folder` for an ImageNet ResNet); `None` when unknown.
    pub dataset: Option<DatasetKind>,
}

/// The parameters a prune starts from: a trained run's ([`run_params`]; `model`, when given,
/// must be the run's), or PyTorch weights of `model` ([`crate::weights`]), at their shape.
pub fn source_params(checkpoint: &Path, model: Option<ModelKind>) -> Result<SourceRun> {
    let Some(dict) = crate::weights::open(checkpoint)? else {
        let source = run_params(checkpoint)?;
        return match model {
            Some(asked) if asked != source.kind => Err(EmberError::BadCheckpoint {
                path: checkpoint.to_path_buf(),
                reason: format!("it holds a {} model, not {asked}", source.kind),
            }),
            _ => Ok(source),
        };
    };
    let kind = crate::weights::model_for(checkpoint, model)?;
    let arch = kind.check_weights(&dict)?;
    let shape = kind.shape_of(&arch);
    let spec = crate::weights::arch_spec(&arch);
    let device = crate::backend::stack_device::<burn::backend::NdArray>(
        burn_approx_mul::Multiplier::native(),
        Default::default(),
    );
    let all = kind.build_pretrained::<NdarrayStack, _>(
        &dict,
        ember_models::pretrained::Head::Keep,
        ember_models::act::Activation::Relu,
        spec,
        &device,
        Loaded,
    )?;
    let layers = contraction_layers(&build(kind, shape, spec, &device, Order)?);
    Ok(SourceRun {
        kind,
        manifest: None,
        file: checkpoint.to_path_buf(),
        checksum: None,
        params: all,
        layers,
        shape,
        dataset: crate::weights::arch_dataset(&arch),
    })
}

/// The parameters of a model built loaded (from PyTorch weights).
struct Loaded;

impl<B: TrainBackend> ModelVisitor<B> for Loaded {
    type Output = BTreeMap<String, (Vec<usize>, Vec<f32>)>;
    fn visit<M: TrainableClassifier<B>>(self, model: M) -> Self::Output {
        params(&model.valid())
    }
}

/// Loads a trained run's parameters on the host.
pub fn run_params(checkpoint: &Path) -> Result<SourceRun> {
    if let Some(file) = packed_file(checkpoint) {
        return Err(EmberError::BadCheckpoint {
            path: file,
            reason: "it is already a packed HiNM model: use the dense run it came from".into(),
        });
    }
    let (file, manifest, checksum) = resolve_checkpoint(checkpoint)?;
    let manifest: Manifest = manifest.ok_or_else(|| EmberError::BadCheckpoint {
        path: checkpoint.to_path_buf(),
        reason: "no ember-run.json beside it: give a run directory".into(),
    })?;
    let (kind, shape) = (manifest.model, manifest.shape);
    let spec = manifest.spec();
    let device = crate::backend::stack_device::<burn::backend::NdArray>(
        burn_approx_mul::Multiplier::native(),
        Default::default(),
    );
    let weights = Weights::<NdarrayStack> {
        file: file.clone(),
        checksum,
        kind,
        device: device.clone(),
    };
    let all = build(kind, shape, spec, &device, weights)??;
    let layers = contraction_layers(&build(kind, shape, spec, &device, Order)?);
    Ok(SourceRun {
        kind,
        dataset: Some(manifest.dataset),
        manifest: Some(manifest),
        file,
        checksum,
        params: all,
        layers,
        shape,
    })
}

/// `kind` at `shape` on the host stack, handed to `visitor`.
fn build<V: ModelVisitor<NdarrayStack>>(
    kind: ModelKind,
    shape: Option<Shape>,
    spec: DataSpec,
    device: &burn::tensor::Device<NdarrayStack>,
    visitor: V,
) -> Result<V::Output> {
    let act = ember_models::act::Activation::Relu;
    Ok(kind.build_shaped::<NdarrayStack, _>(shape, act, spec, device, visitor)?)
}

pub use crate::technique::Params;

/// The starting point of `ember train --hinm`: the `--from` run must hold a `model` model.
pub fn tuning(
    tune: &HinmTune,
    model: ModelKind,
    policy: Option<&LayerPolicy>,
    seed: u64,
) -> Result<Tuning> {
    let SourceRun {
        kind,
        file,
        checksum,
        params: all,
        layers,
        shape,
        ..
    } = run_params(&tune.from)?;
    if kind != model {
        return Err(EmberError::BadCheckpoint {
            path: tune.from.clone(),
            reason: format!("it holds a {kind} model, not {model}"),
        });
    }
    let plans = plan(&all, &layers, policy, tune.level, tune.perm, seed, false)?;
    Ok(Tuning {
        kind,
        file,
        checksum,
        shape,
        masks: weight_masks(&all, &plans),
        plans,
    })
}

/// HiNM fine-tuning's part in a training run: the run starts from the source run's weights
/// under the masks, the gradients of pruned weights are masked and the masks re-applied after
/// every optimizer step, and `model.hinm` is written at the end with the masks' plans.
#[derive(Clone, Debug)]
pub struct HinmRun {
    /// What was asked for.
    pub tune: HinmTune,
    /// The masks searched on the source run's weights.
    pub tuning: Tuning,
}

impl<B: AutodiffBackend, M: Module<B>> Technique<B, M> for HinmRun {
    fn registration(&self) -> &'static Registration {
        &technique::HINM
    }
    fn settings(&self) -> Vec<String> {
        vec![self.tune.describe()]
    }
    fn source(&self) -> Option<(PathBuf, Option<u32>)> {
        Some((self.tuning.file.clone(), self.tuning.checksum))
    }
    fn start(&mut self, model: M, _: Option<technique::Resumed>) -> Result<M> {
        Ok(technique::apply_masks(model, &self.tuning.masks))
    }
    fn grads(&self, model: &M, grads: &mut GradientsParams) {
        technique::mask_grads(model, grads, &self.tuning.masks);
    }
    fn after_step(&mut self, model: M, _: usize, _: usize, _: usize) -> Result<M> {
        Ok(technique::apply_masks(model, &self.tuning.masks))
    }
    fn export(
        &self,
        params: &Params,
        mut about: BTreeMap<String, String>,
    ) -> Result<Option<Vec<u8>>> {
        about.insert("level".into(), self.tune.level.to_string());
        about.insert("perm".into(), method_name(self.tune.perm).to_string());
        let kind = self.tuning.kind;
        Ok(Some(
            packed_model(kind, params, &self.tuning.plans, about)?.to_bytes(),
        ))
    }
    fn boxed(&self) -> Box<dyn Technique<B, M>> {
        Box::new(self.clone())
    }
}
