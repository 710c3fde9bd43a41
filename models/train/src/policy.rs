//! What a per-layer policy can name: a model's modules by the path Burn gives them
//! (`conv1`, `blocks.3.mlp.fc2`) with their parameters' shapes (`ember policy show`).

use crate::error::Result;
use burn::backend::{Autodiff, NdArray};
use ember_models::classifier::{ModelKind, ModelVisitor, TrainableClassifier};
use ember_models::data::ImageSpec;
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
pub fn module_params(model: ModelKind, spec: ImageSpec) -> Result<Vec<ModuleParams>> {
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
pub fn describe(model: ModelKind, spec: ImageSpec) -> Result<String> {
    let modules = module_params(model, spec)?;
    let width = modules
        .iter()
        .map(|m| m.path.len())
        .max()
        .unwrap_or(0)
        .max(6);
    let mut text = format!(
        "{model} for {}×{}×{} images, {} classes: {} modules with parameters\n\n\
         {:width$}  {:<9}  parameters\n",
        spec.side,
        spec.side,
        spec.channels,
        spec.classes,
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
