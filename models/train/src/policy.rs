//! Per-layer policies: which multiplier and which SparseAct pruning each layer of a model runs,
//! by the module path Burn gives it (`conv1`, `blocks.3.mlp.fc2`, globs allowed), applied to an
//! unmodified model by tagging its weights ([`tag_layers`]); and what a policy can name
//! (`ember policy show`).

use crate::error::{EmberError, Result};
use burn::backend::{Autodiff, NdArray};
use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorPrimitive};
use burn_approx_mul::Multiplier;
use burn_hinm::Level;
use burn_sparse_act::{LayerPruning, Pruning};
use cubecl_kernels::decorator::{KernelBackend, LayerSettings};
use ember_models::classifier::{ModelKind, ModelVisitor, TrainableClassifier};
use ember_models::data::DataSpec;
use ember_models::params::float_shapes;
use std::fmt::Write as _;

/// One module that holds parameters directly: its path and its parameters (name, shape).
#[derive(Clone, Debug, PartialEq)]
pub struct ModuleParams {
    /// Burn's path of the module (`fc1`, `blocks.0.mlp.fc2`; empty for the model itself).
    pub path: String,
    /// Its own parameters: name (`weight`, `bias`, …) and shape.
    pub params: Vec<(String, Vec<usize>)>,
}

impl ModuleParams {
    /// `IN×OUT` when this module is a linear layer (a 2-D `weight`): the key SparseAct's
    /// `--sparse-act-layer` takes.
    pub fn linear_key(&self) -> Option<String> {
        self.params
            .iter()
            .find(|(name, shape)| name == "weight" && shape.len() == 2)
            .map(|(_, s)| format!("{}x{}", s[0], s[1]))
    }
}

/// The modules of a `model` built for images of `spec`, in visiting order, each with the
/// parameters it holds itself.
pub fn module_params(model: ModelKind, spec: DataSpec) -> Result<Vec<ModuleParams>> {
    struct Shapes;
    impl ModelVisitor<Autodiff<NdArray>> for Shapes {
        type Output = Vec<(String, Vec<usize>)>;
        fn visit<M: TrainableClassifier<Autodiff<NdArray>>>(self, model: M) -> Self::Output {
            float_shapes(&model)
        }
    }
    let shapes = model.build::<Autodiff<NdArray>, _>(spec, &Default::default(), Shapes)?;
    let mut modules: Vec<ModuleParams> = Vec::new();
    for (path, shape) in shapes {
        let (module, name) = path.rsplit_once('.').unwrap_or(("", path.as_str()));
        match modules.iter_mut().find(|m| m.path == module) {
            Some(m) => m.params.push((name.to_string(), shape)),
            None => modules.push(ModuleParams {
                path: module.to_string(),
                params: vec![(name.to_string(), shape)],
            }),
        }
    }
    Ok(modules)
}

/// The table `ember policy show` prints: one line per module with its parameters, and the
/// `IN×OUT` key of every linear layer.
pub fn describe(model: ModelKind, spec: DataSpec) -> Result<String> {
    let modules = module_params(model, spec)?;
    let width = modules
        .iter()
        .map(|m| m.path.len())
        .max()
        .unwrap_or(0)
        .max(6);
    let mut text = format!(
        "{model} for {spec}, {} classes: {} modules with parameters\n\n\
         {:width$}  {:<9}  parameters\n",
        spec.classes(),
        modules.len(),
        "module",
        "linear",
    );
    for m in &modules {
        let params: Vec<String> = m
            .params
            .iter()
            .map(|(name, shape)| format!("{name} {shape:?}"))
            .collect();
        let path = if m.path.is_empty() {
            "(model)"
        } else {
            &m.path
        };
        let key = m.linear_key().unwrap_or_else(|| "–".into());
        writeln!(text, "{path:width$}  {key:<9}  {}", params.join(", ")).expect("to a string");
    }
    Ok(text)
}

/// The contraction layers of a model: modules holding a `weight` of rank ≥ 2 (linear,
/// convolution, embedding), by path, in visiting order. These are what a per-layer policy
/// names and what the effects report has a row for.
pub fn contraction_layers(shapes: &[(String, Vec<usize>)]) -> Vec<String> {
    shapes
        .iter()
        .filter(|(path, shape)| shape.len() >= 2 && (path == "weight" || path.ends_with(".weight")))
        .map(|(path, _)| {
            path.strip_suffix("weight")
                .unwrap_or(path)
                .trim_end_matches('.')
                .to_string()
        })
        .collect()
}

/// What a policy file or its `[default]` sets for a layer.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Settings {
    /// A multiplier name or table file, as `--multiplier` takes.
    pub multiplier: Option<String>,
    /// SparseAct `S:B`, or `off` to keep the layer's input dense.
    pub sparse_act: Option<String>,
    /// HiNM level `TOTAL:vV` (`75:v64`) for `ember prune --hinm` and `ember train --hinm`, or
    /// `off` to keep the layer's weight dense.
    pub hinm: Option<String>,
    /// BCR level `RATEx:RxC` (`10x:4x16`) for `ember train --bcr` and `ember prune --bcr`, or
    /// `off` to keep the layer's weight dense.
    pub bcr: Option<String>,
}

/// One `[[layer]]` entry: a module-path pattern and what it sets.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Rule {
    /// Burn's module path (`conv1`, `blocks.3.mlp.fc2`) or a glob over paths
    /// (`blocks.*.mlp.fc2`, `fc[12]`).
    pub path: String,
    /// What the matching layers run.
    #[serde(flatten)]
    pub settings: Settings,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    default: Settings,
    #[serde(default)]
    layer: Vec<Rule>,
}

/// A per-layer policy: which multiplier and which SparseAct pruning each contraction layer of a
/// model runs, by module path. Written as a TOML file (`--policy FILE`) or named as a preset
/// (`--policy first-last-exact`). Layers it does not set run the run's `--multiplier` and
/// `--sparse-act`.
///
/// ```
/// use ember_train::policy::LayerPolicy;
/// let policy = LayerPolicy::from_toml("example", r#"
///     [default]
///     multiplier = "afm16"
///     [[layer]]
///     path = "conv1"
///     multiplier = "native"
///     [[layer]]
///     path = "fc*"
///     sparse-act = "0.5:4"
/// "#).unwrap();
/// let layers = ["conv1", "conv2", "fc1", "fc2"].map(String::from);
/// let choices = policy.resolve(&layers).unwrap();
/// assert_eq!(choices[0].to_string(), "conv1: multiplier native");
/// assert_eq!(choices[2].to_string(), "fc1: multiplier afm16, sparse-act 0.5:4");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum LayerPolicy {
    /// A policy file: its `[default]`, then its `[[layer]]` rules (a later rule overrides an
    /// earlier one, field by field).
    File {
        /// Where it came from (shown in errors).
        origin: String,
        /// Applies to every layer.
        default: Settings,
        /// Applies to the layers each path matches.
        rules: Vec<Rule>,
    },
    /// `first-last-exact`: the first contraction layer (convolution, embedding or linear) and
    /// the last (the classifier) run `native`; the others the run's multiplier.
    FirstLastExact,
}

/// The presets `--policy` knows.
pub const PRESETS: &[&str] = &["first-last-exact"];

/// What one layer runs under a policy: entries it sets, `None` for the run's own.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerChoice {
    /// The layer's path.
    pub path: String,
    /// Its multiplier, when the policy sets one.
    pub multiplier: Option<Multiplier>,
    /// Its pruning (`Some(None)`: dense), when the policy sets one.
    pub sparse_act: Option<Option<Pruning>>,
    /// Its HiNM level (`Some(None)`: weight kept dense), when the policy sets one.
    pub hinm: Option<Option<Level>>,
    /// Its BCR level (`Some(None)`: weight kept dense), when the policy sets one.
    pub bcr: Option<Option<burn_bcr::Level>>,
}

impl LayerChoice {
    /// The settings handed down the backend stack to tag the layer's weight.
    pub fn settings(&self) -> LayerSettings {
        let mut s = LayerSettings::new(&self.path);
        if let Some(m) = &self.multiplier {
            s = s.with(m.clone());
        }
        if let Some(p) = self.sparse_act {
            s = s.with(LayerPruning(p));
        }
        s
    }
}

/// `path: multiplier M, sparse-act S:B` (only what the policy sets; `path: run defaults`).
impl std::fmt::Display for LayerChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(m) = &self.multiplier {
            parts.push(format!("multiplier {m}"));
        }
        if let Some(p) = self.sparse_act {
            parts.push(format!(
                "sparse-act {}",
                p.map_or("off".to_string(), |p| p.to_string())
            ));
        }
        match self.hinm {
            Some(Some(l)) => parts.push(format!("hinm {l}")),
            Some(None) => parts.push("hinm off".into()),
            None => {}
        }
        match self.bcr {
            Some(Some(l)) => parts.push(format!("bcr {l}")),
            Some(None) => parts.push("bcr off".into()),
            None => {}
        }
        if parts.is_empty() {
            parts.push("run defaults".into());
        }
        write!(f, "{}: {}", self.path, parts.join(", "))
    }
}

/// Refuses choices that set a HiNM or BCR level on a layer of a run without that technique
/// (`hinm`, `bcr`: whether the run prunes with it): nothing would prune the layer, and the
/// manifest would record a level that never applied. `off` is accepted.
pub fn check_levels_apply(
    choices: &[LayerChoice],
    hinm: bool,
    bcr: bool,
    policy: Option<&LayerPolicy>,
) -> Result<()> {
    for c in choices {
        let levels = [
            ("hinm", c.hinm.flatten().map(|l| l.to_string()), hinm),
            ("bcr", c.bcr.flatten().map(|l| l.to_string()), bcr),
        ];
        for (name, level, on) in levels {
            if let (Some(level), false) = (level, on) {
                return Err(EmberError::Policy {
                    origin: policy.map_or("", |p| p.origin()).to_string(),
                    reason: format!(
                        "layer {} sets {name} = \"{level}\", but this run has no --{name}: \
                         nothing would prune it (give --{name}, or set the layer's {name} to \
                         \"off\")",
                        c.path
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Checks the SparseAct pruning a policy sets on each layer as `--sparse-act` is checked
/// ([`burn_sparse_act::Policy::check_layers`]), but as an error, since the policy names the
/// layer: SparseAct prunes the inputs of linear layers only, and a pruning must drop at least
/// one block of the layer's input rows (a block as wide as the row, or a sparsity that rounds
/// to no block, stores more than the dense input). `shapes` are the model's
/// [`ember_models::params::float_shapes`].
pub fn check_sparse_act(
    choices: &[LayerChoice],
    shapes: &[(String, Vec<usize>)],
    policy: &LayerPolicy,
) -> Result<()> {
    for c in choices {
        let Some(Some(p)) = c.sparse_act else {
            continue;
        };
        let error = |reason: String| EmberError::Policy {
            origin: policy.origin().to_string(),
            reason: format!("layer {} sets sparse-act = \"{p}\": {reason}", c.path),
        };
        let weight = format!("{}.weight", c.path);
        match shapes.iter().find(|(path, _)| *path == weight) {
            Some((_, dims)) if dims.len() == 2 => {
                let (blocks, pruned) = p.pruned_blocks(dims[0]);
                if pruned == 0 {
                    return Err(error(format!(
                        "it prunes nothing: {blocks} block{} of width {} per input row of {}, \
                         ⌊{}·{blocks}⌋ = 0 dropped (the stored input would be larger than the \
                         dense one); choose a narrower block or a higher sparsity, or \"off\"",
                        if blocks == 1 { "" } else { "s" },
                        p.block,
                        dims[0],
                        p.sparsity
                    )));
                }
            }
            _ => {
                return Err(error(
                    "SparseAct prunes the inputs of linear layers only, and this layer is not \
                     one (set it on a linear layer, or \"off\")"
                        .into(),
                ));
            }
        }
    }
    Ok(())
}

/// `off`, or what `T`'s `FromStr` reads (a per-layer level or pruning).
fn off_or<T: std::str::FromStr>(text: &str) -> std::result::Result<Option<T>, String>
where
    T::Err: std::fmt::Display,
{
    match text.trim() {
        "off" => Ok(None),
        spec => spec.parse::<T>().map(Some).map_err(|e| e.to_string()),
    }
}

impl LayerPolicy {
    /// What `--policy ARG` names: a preset, else a TOML file.
    pub fn from_arg(arg: &str) -> Result<Self> {
        if arg == "first-last-exact" {
            return Ok(Self::FirstLastExact);
        }
        let path = std::path::Path::new(arg);
        let text = std::fs::read_to_string(path).map_err(|e| EmberError::Policy {
            origin: arg.to_string(),
            reason: format!(
                "cannot read it ({e}); a policy is a TOML file or one of the presets: {}",
                PRESETS.join(", ")
            ),
        })?;
        Self::from_toml(arg, &text)
    }

    /// Parses and checks a policy file's text (`origin` names it in errors): TOML syntax,
    /// field names, every multiplier, every `S:B` and every path pattern.
    pub fn from_toml(origin: &str, text: &str) -> Result<Self> {
        let error = |reason: String| EmberError::Policy {
            origin: origin.to_string(),
            reason,
        };
        let file: PolicyFile = toml::from_str(text)
            .map_err(|e| error(format!("not a policy file: {}", toml_error(text, &e))))?;
        let check = |what: &str, s: &Settings| -> Result<()> {
            if let Some(m) = &s.multiplier {
                Multiplier::parse(m).map_err(|e| error(format!("{what}: {e}")))?;
            }
            if let Some(p) = &s.sparse_act {
                off_or::<Pruning>(p)
                    .map_err(|e| error(format!("{what}: sparse-act {p:?}: {e}")))?;
            }
            if let Some(h) = &s.hinm {
                off_or::<Level>(h).map_err(|e| error(format!("{what}: hinm {h:?}: {e}")))?;
            }
            if let Some(b) = &s.bcr {
                off_or::<burn_bcr::Level>(b)
                    .map_err(|e| error(format!("{what}: bcr {b:?}: {e}")))?;
            }
            Ok(())
        };
        check("[default]", &file.default)?;
        for rule in &file.layer {
            glob::Pattern::new(&rule.path)
                .map_err(|e| error(format!("path {:?} is not a valid pattern: {e}", rule.path)))?;
            check(&format!("layer {:?}", rule.path), &rule.settings)?;
            if rule.settings == Settings::default() {
                return Err(error(format!(
                    "layer {:?} sets nothing: give it a multiplier, sparse-act, hinm or bcr",
                    rule.path
                )));
            }
        }
        Ok(Self::File {
            origin: origin.to_string(),
            default: file.default,
            rules: file.layer,
        })
    }

    /// What each of `layers` (a model's [`contraction_layers`]) runs. A rule whose path matches
    /// no layer is an error that lists the layers.
    pub fn resolve(&self, layers: &[String]) -> Result<Vec<LayerChoice>> {
        match self {
            Self::FirstLastExact => {
                let last = layers.len().saturating_sub(1);
                Ok(layers
                    .iter()
                    .enumerate()
                    .map(|(i, path)| LayerChoice {
                        path: path.clone(),
                        multiplier: (i == 0 || i == last).then(Multiplier::native),
                        sparse_act: None,
                        hinm: None,
                        bcr: None,
                    })
                    .collect())
            }
            Self::File {
                origin,
                default,
                rules,
            } => {
                let error = |reason: String| EmberError::Policy {
                    origin: origin.clone(),
                    reason,
                };
                let patterns = rules
                    .iter()
                    .map(|r| glob::Pattern::new(&r.path).map_err(|e| error(e.to_string())))
                    .collect::<Result<Vec<_>>>()?;
                for (rule, pattern) in rules.iter().zip(&patterns) {
                    if !layers.iter().any(|l| pattern.matches(l)) {
                        return Err(error(format!(
                            "path {:?} matches no layer of this model; its layers are: {}",
                            rule.path,
                            layers.join(", ")
                        )));
                    }
                }
                layers
                    .iter()
                    .map(|path| {
                        let mut s = default.clone();
                        for (rule, pattern) in rules.iter().zip(&patterns) {
                            if pattern.matches(path) {
                                let r = &rule.settings;
                                s.multiplier = r.multiplier.clone().or(s.multiplier);
                                s.sparse_act = r.sparse_act.clone().or(s.sparse_act);
                                s.hinm = r.hinm.clone().or(s.hinm);
                                s.bcr = r.bcr.clone().or(s.bcr);
                            }
                        }
                        let multiplier = s
                            .multiplier
                            .map(|m| Multiplier::parse(&m))
                            .transpose()
                            .map_err(|e| error(e.to_string()))?;
                        let sparse_act = s
                            .sparse_act
                            .map(|p| off_or::<Pruning>(&p))
                            .transpose()
                            .map_err(error)?;
                        let hinm = s
                            .hinm
                            .map(|h| off_or::<Level>(&h))
                            .transpose()
                            .map_err(error)?;
                        let bcr = s
                            .bcr
                            .map(|b| off_or::<burn_bcr::Level>(&b))
                            .transpose()
                            .map_err(error)?;
                        Ok(LayerChoice {
                            path: path.clone(),
                            multiplier,
                            sparse_act,
                            hinm,
                            bcr,
                        })
                    })
                    .collect()
            }
        }
    }

    /// The file or preset, as `--policy` took it.
    pub fn origin(&self) -> &str {
        match self {
            Self::File { origin, .. } => origin,
            Self::FirstLastExact => "first-last-exact",
        }
    }
}

/// Every layer with the run's own settings (no policy): tagged by path only, so the effects
/// report still has a row per layer.
pub fn uniform(layers: &[String]) -> Vec<LayerChoice> {
    layers
        .iter()
        .map(|path| LayerChoice {
            path: path.clone(),
            multiplier: None,
            sparse_act: None,
            hinm: None,
            bcr: None,
        })
        .collect()
}

/// Gives the weight of every layer in `choices` its layer's configuration at every level of
/// the backend stack ([`KernelBackend::float_for_layer`]); values, parameter ids and
/// `require_grad` are unchanged. Apply it after building or loading a model: a loaded record
/// brings untagged tensors.
pub fn tag_layers<B, M>(model: M, choices: &[LayerChoice]) -> M
where
    B: AutodiffBackend<InnerBackend: KernelBackend>,
    M: Module<B>,
{
    struct Tagger<'a> {
        path: Vec<String>,
        choices: &'a [LayerChoice],
    }
    impl<B: AutodiffBackend<InnerBackend: KernelBackend>> ModuleMapper<B> for Tagger<'_> {
        fn enter_module(&mut self, name: &str, _container: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _name: &str, _container: &str) {
            self.path.pop();
        }
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let (id, tensor, mapper) = param.consume();
            let (module, name) = match self.path.split_last() {
                Some((name, module)) => (module.join("."), name.as_str()),
                None => (String::new(), ""),
            };
            let choice = (name == "weight" && D >= 2)
                .then(|| self.choices.iter().find(|c| c.path == module))
                .flatten();
            let tensor = match choice {
                None => tensor,
                Some(choice) => {
                    let grad = tensor.is_require_grad();
                    let inner = tensor.inner().into_primitive().tensor();
                    let tagged = B::InnerBackend::float_for_layer(inner, &choice.settings());
                    let inner = Tensor::<B::InnerBackend, D>::from_primitive(
                        TensorPrimitive::Float(tagged),
                    );
                    Tensor::from_inner(inner).set_require_grad(grad)
                }
            };
            Param::from_mapped_value(id, tensor, mapper)
        }
    }
    model.map(&mut Tagger {
        path: Vec::new(),
        choices,
    })
}

/// A TOML error in one line: `line L: message`.
pub(crate) fn toml_error(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!("line {line}: {}", e.message())
        }
        None => e.message().to_string(),
    }
}
