//! What each layer really ran, and what it cost: the table printed at the end of `ember train`
//! and `ember eval`, and `effects.json` / `effects.md` in the run directory.
//!
//! Every figure comes from the ops that ran (`cubecl_kernels::decorator::effects`): the
//! multiplier each contraction used in each pass, the products it computed, how it ran, the
//! bytes each layer kept for its weight gradient. The policy only says what was *asked*; a row
//! whose ops did something else says so under `fallbacks`.

use crate::error::{EmberError, Result};
use crate::policy::LayerChoice;
use cubecl_kernels::decorator::effects::{Effects, LayerEffects, Pass};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The row of contractions that belong to no layer (a `matmul` between activations).
pub const OUTSIDE: &str = "(outside layers)";

/// One layer's row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerRow {
    /// The layer's path, or [`OUTSIDE`].
    pub layer: String,
    /// The multiplier the policy (or `--multiplier`) asked for.
    pub asked: String,
    /// The multiplier(s) the forward contraction ran (`–`: none ran).
    pub forward: String,
    /// The multiplier(s) of the input gradient.
    pub input_grad: String,
    /// The multiplier(s) of the weight gradient.
    pub weight_grad: String,
    /// Products through an approximate multiplier, per step.
    pub approx_multiplies: u64,
    /// All products, per step.
    pub multiplies: u64,
    /// Bytes kept for the weight gradient per step, and the dense bytes they stand for.
    pub stored_bytes: Option<(u64, u64)>,
    /// How the activation was kept.
    pub stored: String,
    /// How each pass ran (`pass: route`), e.g. `weight grad: block-sparse BSpMM kernel over the
    /// kept blocks`.
    pub routes: Vec<String>,
    /// Where the layer did not run as asked, or ran on a slow path, and why.
    pub fallbacks: Vec<String>,
    /// Estimated energy per step in picojoules (`--energy`), and the same work with FP32
    /// multiplies and dense activations.
    pub energy_pj: Option<(f64, f64)>,
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EffectsReport {
    /// What one step is (`training step`, `evaluation batch`) and over how many it was averaged.
    pub step: String,
    /// Steps recorded.
    pub steps: u64,
    /// One row per layer, in model order, then [`OUTSIDE`] when anything ran there.
    pub layers: Vec<LayerRow>,
    /// The energy file's name, when `--energy` was given.
    pub energy: Option<String>,
}

/// `--energy FILE`: picojoules per multiply of each multiplier and per byte of activation
/// memory (see `docs/examples/energy-45nm.toml`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnergyTable {
    /// pJ per multiply, by multiplier name (`fp32` is required: the dense baseline; `native`
    /// falls back to it).
    pub multiply: BTreeMap<String, f64>,
    /// pJ per byte of activation memory.
    pub memory: Memory,
    /// Where the figures come from (free text, kept in the report).
    #[serde(default)]
    pub source: String,
}

/// The memory entry of an [`EnergyTable`].
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Memory {
    /// pJ per byte stored and read back.
    pub byte: f64,
}

impl EnergyTable {
    /// Reads and checks an energy file: TOML, every figure finite and ≥ 0, `fp32` present, and
    /// a figure for every multiplier in `needed`.
    pub fn read(path: &Path, needed: &[String]) -> Result<Self> {
        let error =
            |reason: String| EmberError::Invalid(format!("--energy {}: {reason}", path.display()));
        let text =
            std::fs::read_to_string(path).map_err(|e| error(format!("cannot read it ({e})")))?;
        let table: Self = toml::from_str(&text).map_err(|e| {
            error(format!(
                "not an energy file: {}",
                crate::policy::toml_error(&text, &e)
            ))
        })?;
        let figures = table.multiply.iter().map(|(k, v)| (k.as_str(), *v));
        for (name, v) in figures.chain([("memory.byte", table.memory.byte)]) {
            if !(v.is_finite() && v >= 0.0) {
                return Err(error(format!("{name} = {v} is not a finite energy ≥ 0")));
            }
        }
        let mut missing: Vec<&str> = ["fp32"]
            .into_iter()
            .chain(needed.iter().map(String::as_str))
            .filter(|n| table.per_multiply(n).is_none())
            .collect();
        missing.dedup();
        if !missing.is_empty() {
            return Err(error(format!(
                "no [multiply] figure for {} (it has: {})",
                missing.join(", "),
                table
                    .multiply
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(table)
    }

    /// pJ per multiply of `name` (`native` is an FP32 multiply unless listed).
    pub fn per_multiply(&self, name: &str) -> Option<f64> {
        self.multiply
            .get(name)
            .or_else(|| {
                (name == "native")
                    .then(|| self.multiply.get("fp32"))
                    .flatten()
            })
            .copied()
    }
}

fn pass_text(l: &LayerEffects, pass: Pass) -> String {
    let list = &l.passes[pass.index()];
    if list.is_empty() {
        return "–".into();
    }
    // a weight-sparse product says so: `native (hinm kernel)`, `native (bcrc host)`; so does a
    // native convolution's route: `native (host im2col + GEMM)`, `native (implicit GEMM)`
    let mut names: Vec<String> = list
        .iter()
        .map(|c| {
            if crate::technique::is_packed_route(&c.route) {
                format!("{} ({})", c.multiplier, c.route)
            } else if let Some(conv) = c.route.strip_prefix("native, ") {
                let conv = conv.split(';').next().unwrap_or(conv);
                format!("{} ({conv})", c.multiplier)
            } else {
                c.multiplier.clone()
            }
        })
        .collect();
    names.dedup();
    names.join(" + ")
}

/// The report of `effects`, recorded over `steps` steps of kind `step`, for the layers of
/// `choices` (model order) with `default` the run's multiplier.
pub fn report(
    effects: &Effects,
    steps: u64,
    step: &str,
    choices: &[LayerChoice],
    default: &str,
    energy: Option<(&str, &EnergyTable)>,
) -> EffectsReport {
    let steps = steps.max(1);
    let empty = LayerEffects::default();
    let mut rows: Vec<(String, String, &LayerEffects)> = choices
        .iter()
        .map(|c| {
            let asked = c
                .multiplier
                .as_ref()
                .map_or(default.to_string(), |m| m.name().to_string());
            (
                c.path.clone(),
                asked,
                effects.layers.get(&c.path).unwrap_or(&empty),
            )
        })
        .collect();
    if let Some(outside) = effects.layers.get("") {
        rows.push((OUTSIDE.into(), default.to_string(), outside));
    }
    let layers = rows
        .into_iter()
        .map(|(layer, asked, l)| row(layer, asked, l, steps, energy.map(|e| e.1)))
        .collect();
    EffectsReport {
        step: step.to_string(),
        steps,
        layers,
        energy: energy.map(|e| e.0.to_string()),
    }
}

fn row(
    layer: String,
    asked: String,
    l: &LayerEffects,
    steps: u64,
    energy: Option<&EnergyTable>,
) -> LayerRow {
    let all = || l.passes.iter().flatten();
    let mut fallbacks = Vec::new();
    if all().next().is_none() && l.stored.is_empty() && l.densified.is_empty() {
        fallbacks.push(
            "op not intercepted: no contraction ran with this weight (Ember intercepts linear, \
             conv, conv-transpose and matmul)"
                .to_string(),
        );
    }
    for c in all() {
        let note = if c.multiplier != asked && layer != OUTSIDE {
            Some(format!("ran {} where {asked} was asked", c.multiplier))
        } else if c.route.starts_with("host reference") || c.route.contains("; in place of ") {
            Some(c.route.clone())
        } else if c.route.contains("global memory") {
            Some(format!("{}: slower than a table in shared memory", c.route))
        } else {
            None
        };
        if let Some(note) = note.filter(|n| !fallbacks.contains(n)) {
            fallbacks.push(note);
        }
    }
    for (op, calls) in &l.densified {
        fallbacks.push(format!(
            "packed weight densified by {op} ({} times per {})",
            calls / steps.max(1),
            "step"
        ));
    }
    let sum = |f: &dyn Fn(&cubecl_kernels::decorator::effects::Contraction) -> u64| {
        all().map(f).sum::<u64>() / steps
    };
    let multiplies = sum(&|c| c.multiplies);
    let approx_multiplies = sum(&|c| if c.approximate { c.multiplies } else { 0 });
    let stored_bytes = (!l.stored.is_empty()).then(|| {
        let kept: u64 = l.stored.iter().map(|s| s.kept_bytes).sum();
        let dense: u64 = l.stored.iter().map(|s| s.dense_bytes).sum();
        (kept / steps, dense / steps)
    });
    let stored = if l.stored.is_empty() {
        "–".to_string()
    } else {
        l.stored
            .iter()
            .map(|s| s.how.as_str())
            .collect::<Vec<_>>()
            .join(" + ")
    };
    let energy_pj = energy.map(|e| {
        let fp32 = e.per_multiply("fp32").unwrap_or(0.0);
        let mut actual = 0.0;
        for c in all() {
            match e.per_multiply(&c.multiplier) {
                Some(pj) => actual += pj * c.multiplies as f64,
                None => {
                    let note = format!("no energy figure for {}: counted at fp32's", c.multiplier);
                    if !fallbacks.contains(&note) {
                        fallbacks.push(note);
                    }
                    actual += fp32 * c.multiplies as f64;
                }
            }
        }
        let dense_products = fp32 * all().map(|c| c.multiplies).sum::<u64>() as f64;
        let (kept, dense) = l.stored.iter().fold((0u64, 0u64), |(k, d), s| {
            (k + s.kept_bytes, d + s.dense_bytes)
        });
        let byte = e.memory.byte;
        let steps = steps as f64;
        (
            (actual + byte * kept as f64) / steps,
            (dense_products + byte * dense as f64) / steps,
        )
    });
    let routes = Pass::ALL
        .iter()
        .flat_map(|p| {
            l.passes[p.index()]
                .iter()
                .map(move |c| format!("{}: {}", p.label(), c.route))
        })
        .collect();
    LayerRow {
        layer,
        asked,
        routes,
        forward: pass_text(l, Pass::Forward) + &matmul_suffix(l),
        input_grad: pass_text(l, Pass::InputGrad),
        weight_grad: pass_text(l, Pass::WeightGrad),
        approx_multiplies,
        multiplies,
        stored_bytes,
        stored,
        fallbacks,
        energy_pj,
    }
}

fn matmul_suffix(l: &LayerEffects) -> String {
    match pass_text(l, Pass::Matmul).as_str() {
        "–" => String::new(),
        names => format!(" (matmul: {names})"),
    }
}

fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

fn energy(pj: f64) -> String {
    match pj {
        p if p >= 1e6 => format!("{:.2} µJ", p / 1e6),
        p if p >= 1e3 => format!("{:.2} nJ", p / 1e3),
        p => format!("{p:.1} pJ"),
    }
}

impl EffectsReport {
    /// The Markdown table (`effects.md`, and what the CLI prints).
    pub fn markdown(&self) -> String {
        let with_energy = self.energy.is_some();
        let mut t = format!(
            "Per {} (mean of {}), from the ops that ran.\n\n\
             | layer | asked | forward | input grad | weight grad | approx. multiplies | stored / dense | stored as |{}\n\
             |---|---|---|---|---|---:|---:|---|{}\n",
            self.step,
            self.steps,
            if with_energy {
                " energy (FP32 dense) |"
            } else {
                ""
            },
            if with_energy { "---:|" } else { "" },
        );
        let (mut total, mut total_dense) = (0.0, 0.0);
        for r in &self.layers {
            let stored = r.stored_bytes.map_or("–".into(), |(k, d)| {
                format!("{} / {}", bytes(k), bytes(d))
            });
            write!(
                t,
                "| {} | {} | {} | {} | {} | {} of {} | {stored} | {} |",
                r.layer,
                r.asked,
                r.forward,
                r.input_grad,
                r.weight_grad,
                r.approx_multiplies,
                r.multiplies,
                r.stored
            )
            .expect("to a string");
            if let Some((e, d)) = r.energy_pj {
                total += e;
                total_dense += d;
                write!(t, " {} ({}) |", energy(e), energy(d)).expect("to a string");
            } else if with_energy {
                t.push_str(" – |");
            }
            t.push('\n');
        }
        if with_energy {
            let cols = "| | | | | | | |";
            writeln!(
                t,
                "| **total** {cols} **{}** ({}, {:.1}× less) |",
                energy(total),
                energy(total_dense),
                if total > 0.0 {
                    total_dense / total
                } else {
                    f64::NAN
                }
            )
            .expect("to a string");
        }
        let notes: Vec<String> = self
            .layers
            .iter()
            .flat_map(|r| {
                r.fallbacks
                    .iter()
                    .map(move |f| format!("- {}: {f}", r.layer))
            })
            .collect();
        t.push_str(if notes.is_empty() {
            "\nFallbacks: none: every layer ran as asked.\n"
        } else {
            "\nFallbacks:\n"
        });
        for n in notes {
            t.push_str(&n);
            t.push('\n');
        }
        if let Some(file) = &self.energy {
            writeln!(t, "\nEnergy: estimated with the figures of {file}.").expect("to a string");
        }
        t
    }

    /// Writes `effects.json` and `effects.md` into `dir` (atomically).
    pub fn write(&self, dir: &Path) -> Result<()> {
        let json = serde_json::to_vec_pretty(self).expect("a report serialises");
        crate::atomic::write(&dir.join("effects.json"), &json)?;
        crate::atomic::write(&dir.join("effects.md"), self.markdown().as_bytes())
    }
}
