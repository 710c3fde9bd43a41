//! The pruning policy a `SparseAct` device carries, validated before any tensor is touched.

use std::collections::BTreeMap;
use std::sync::Arc;

/// What goes wrong with a pruning policy.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// Sparsity outside `[0, 1)` (NaN included).
    #[error("sparsity must be in [0, 1), got {0}")]
    Sparsity(f64),
    /// A block width of zero.
    #[error("block size must be at least 1")]
    ZeroBlock,
    /// A block width above [`MAX_BLOCK`] (wider than any layer: rows are padded to it).
    #[error("block size must be at most {max}, got {0}", max = MAX_BLOCK)]
    HugeBlock(usize),
    /// A policy string that is not `S:B`.
    #[error("expected SPARSITY:BLOCK (e.g. 0.8:64), got `{0}`")]
    Syntax(String),
    /// A layer override that is not `IN×OUT=S:B`.
    #[error("expected IN×OUT=SPARSITY:BLOCK (e.g. 384x10=0:1; `x` or `×`), got `{0}`")]
    Override(String),
    /// Layer overrides that name no linear layer of the model.
    #[error(
        "--sparse-act-layer {unknown} names no linear layer of the model (its layers, IN×OUT: {layers})"
    )]
    UnknownLayer {
        /// The keys that match nothing.
        unknown: String,
        /// The model's layers.
        layers: String,
    },
    /// A policy that prunes no block of any layer (every block wider than the layer, or a
    /// sparsity too small to drop one block).
    #[error(
        "--sparse-act {policy} prunes nothing in any layer ({why}): it would train exactly like dense"
    )]
    PrunesNothing {
        /// The policy, in its text form.
        policy: String,
        /// Each layer with its block count, in words.
        why: String,
    },
    /// A stochastic band outside `(0, 1)`.
    #[error("the stochastic band must be in (0, 1), got {0}")]
    Band(f64),
}

/// The widest block a policy accepts: rows are padded to whole blocks, so a block far wider than
/// any layer would only allocate padding (and a block near `usize::MAX` would overflow).
pub const MAX_BLOCK: usize = 1 << 16;

/// Sparsity and block width of one layer. Serialised as `{"sparsity": S, "block": B}`, checked
/// on the way in like [`Pruning::new`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "PruningFields")]
pub struct Pruning {
    /// Fraction of blocks pruned per sample, in `[0, 1)`.
    pub sparsity: f64,
    /// Block width along the embedding dimension.
    pub block: usize,
}

/// The fields of a [`Pruning`] before their ranges are checked.
#[derive(serde::Deserialize)]
struct PruningFields {
    sparsity: f64,
    block: usize,
}

impl TryFrom<PruningFields> for Pruning {
    type Error = PolicyError;
    fn try_from(f: PruningFields) -> Result<Self, PolicyError> {
        Self::new(f.sparsity, f.block)
    }
}

impl Pruning {
    /// Checks the ranges (`s ∈ [0, 1)`, `b ≥ 1`).
    pub fn new(sparsity: f64, block: usize) -> Result<Self, PolicyError> {
        if !(0.0..1.0).contains(&sparsity) {
            return Err(PolicyError::Sparsity(sparsity));
        }
        if block == 0 {
            return Err(PolicyError::ZeroBlock);
        }
        if block > MAX_BLOCK {
            return Err(PolicyError::HugeBlock(block));
        }
        Ok(Self { sparsity, block })
    }

    /// Blocks of one row of a layer with `d_in` inputs, and how many of them are pruned per
    /// sample (`keep_count` of the kernels: `⌊s·N⌋` dropped of `N = ⌈d_in / b⌉`).
    pub fn pruned_blocks(&self, d_in: usize) -> (usize, usize) {
        let blocks = d_in.div_ceil(self.block);
        (
            blocks,
            blocks - cubecl_kernels::bsr::keep_count(blocks, self.sparsity),
        )
    }

    /// Parses the CLI form `S:B` (e.g. `0.8:64`).
    pub fn parse(spec: &str) -> Result<Self, PolicyError> {
        let syntax = || PolicyError::Syntax(spec.to_string());
        let (s, b) = spec.split_once(':').ok_or_else(syntax)?;
        let s: f64 = s.trim().parse().map_err(|_| syntax())?;
        let b: usize = b.trim().parse().map_err(|_| syntax())?;
        Self::new(s, b)
    }
}

/// The policy: a default pruning, per-layer overrides, and the optional stochastic variant
/// (blocks near the top-k threshold swapped at random, the paper's Section VI).
///
/// A linear layer is identified by its weight's shape, `IN×OUT` (e.g. `384x1536`): it is the
/// only identity an op sees, and in ResMLP it names the layer kinds (cross-patch `196x196`,
/// `fc1` `384x1536`, `fc2` `1536x384`, the classifier).
///
/// A block width that does not divide the row is **padded**: the last block of each row is
/// shorter (zero-padded, which leaves its L2 norm unchanged) and stored at full width. ResMLP's
/// cross-patch layer at 224 px has rows of 196 patches, which no `b ∈ {16, 32, 64}` of the
/// paper's Table III divides.
///
/// Serialised field by field (`default`, `overrides`, `stochastic`, `scales`); its text form
/// ([`Display`](std::fmt::Display)) parses back with [`FromStr`](std::str::FromStr) to an equal
/// policy.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "PolicyFields", into = "PolicyFields")]
pub struct Policy {
    /// Pruning of every layer without an override; `None`: inputs are kept dense (the
    /// decorator is then exactly its autodiff backend).
    pub default: Option<Pruning>,
    /// Pruning by layer (`IN×OUT`).
    pub overrides: Arc<BTreeMap<String, Pruning>>,
    /// Width of the band around the top-k threshold, relative to the threshold norm, in which
    /// blocks are swapped at random (the backend's RNG, seeded by `Backend::seed`); `None`:
    /// deterministic top-k.
    pub stochastic: Option<f64>,
    /// The fused variant: also keep the activation of every per-channel scale `x ⊙ γ`
    /// (ResMLP's Affine and layer-scale, `γ: [1, …, 1, d]`) pruned for `γ`'s gradient, with the
    /// default pruning (the paper's outlook: "a block-sparse version of the affine scaling
    /// layer").
    pub scales: bool,
    /// The layer whose weight carries this policy (a per-layer policy tags weights,
    /// [`crate::LayerPruning`]); what the layer stores is reported under this path. Not part
    /// of the written form.
    pub layer: Option<Arc<str>>,
}

/// [`Pruning::parse`]: `S:B`.
impl std::str::FromStr for Pruning {
    type Err = PolicyError;
    fn from_str(spec: &str) -> Result<Self, PolicyError> {
        Self::parse(spec)
    }
}

impl std::fmt::Display for Pruning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.sparsity, self.block)
    }
}

/// `off`, or `S:B` followed by ` IN×OUT=S:B` overrides and ` stochastic=BAND`: what the CLI
/// accepts, and what run manifests record.
impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.default {
            Some(p) => write!(f, "{p}")?,
            None => f.write_str("off")?,
        }
        for (layer, p) in self.overrides.iter() {
            write!(f, " {layer}={p}")?;
        }
        if let Some(band) = self.stochastic {
            write!(f, " stochastic={band}")?;
        }
        if self.scales {
            f.write_str(" +scales")?;
        }
        Ok(())
    }
}

/// The fields of a [`Policy`] as serialised (checked on the way in).
#[derive(serde::Serialize, serde::Deserialize)]
struct PolicyFields {
    default: Option<Pruning>,
    #[serde(default)]
    overrides: BTreeMap<String, Pruning>,
    #[serde(default)]
    stochastic: Option<f64>,
    #[serde(default)]
    scales: bool,
}

impl From<Policy> for PolicyFields {
    fn from(p: Policy) -> Self {
        Self {
            default: p.default,
            overrides: (*p.overrides).clone(),
            stochastic: p.stochastic,
            scales: p.scales,
        }
    }
}

impl TryFrom<PolicyFields> for Policy {
    type Error = PolicyError;
    fn try_from(f: PolicyFields) -> Result<Self, PolicyError> {
        let mut policy = Self {
            default: f.default,
            overrides: Arc::new(BTreeMap::new()),
            stochastic: None,
            scales: f.scales,
            layer: None,
        };
        for (layer, pruning) in f.overrides {
            policy.add_override(&format!("{layer}={pruning}"))?;
        }
        match f.stochastic {
            Some(band) => policy.with_stochastic(band),
            None => Ok(policy),
        }
    }
}

/// Parses every form [`Policy`]'s `Display` prints: `off` or `S:B`, then any of ` IN×OUT=S:B`,
/// ` stochastic=BAND` and ` +scales`, separated by spaces.
impl std::str::FromStr for Policy {
    type Err = PolicyError;
    fn from_str(text: &str) -> Result<Self, PolicyError> {
        let mut words = text.split_whitespace();
        let first = words
            .next()
            .ok_or_else(|| PolicyError::Syntax(text.to_string()))?;
        let mut policy = match first {
            "off" => Self::default(),
            spec => Self::uniform(Pruning::parse(spec)?),
        };
        for word in words {
            if word == "+scales" {
                policy.scales = true;
            } else if let Some(band) = word.strip_prefix("stochastic=") {
                let band = band
                    .parse()
                    .map_err(|_| PolicyError::Syntax(text.to_string()))?;
                policy = policy.with_stochastic(band)?;
            } else {
                policy.add_override(word)?;
            }
        }
        Ok(policy)
    }
}

impl Policy {
    /// Whether nothing is pruned: no default and no override (the decorator is then exactly its
    /// autodiff backend).
    pub fn is_off(&self) -> bool {
        self.default.is_none() && self.overrides.is_empty()
    }

    /// The single pruning of every layer when the policy is uniform (a default, no overrides,
    /// deterministic, scales dense); the reason when it is not.
    pub fn as_uniform(&self) -> Result<Pruning, &'static str> {
        match self.default {
            None => Err("it prunes no default layer"),
            Some(_) if !self.overrides.is_empty() => Err("it has per-layer overrides"),
            Some(_) if self.stochastic.is_some() => Err("it is stochastic"),
            Some(_) if self.scales => Err("it prunes per-channel scales too (+scales)"),
            Some(p) => Ok(p),
        }
    }

    /// Every layer pruned the same way, deterministically.
    pub fn uniform(default: Pruning) -> Self {
        Self {
            default: Some(default),
            ..Self::default()
        }
    }

    /// The layer key of a weight of `d_in × d_out`.
    pub fn layer_key(d_in: usize, d_out: usize) -> String {
        format!("{d_in}x{d_out}")
    }

    /// The pruning of the layer with a `d_in × d_out` weight (its override, else the default).
    pub fn for_layer(&self, d_in: usize, d_out: usize) -> Option<Pruning> {
        self.overrides
            .get(&Self::layer_key(d_in, d_out))
            .copied()
            .or(self.default)
    }

    /// Adds an override from the CLI form `IN×OUT=S:B` (e.g. `384x10=0.5:16`).
    pub fn add_override(&mut self, spec: &str) -> Result<(), PolicyError> {
        let syntax = || PolicyError::Override(spec.to_string());
        let (layer, pruning) = spec.split_once('=').ok_or_else(syntax)?;
        let layer = layer.trim();
        let (i, o) = layer
            .split_once('x')
            .or_else(|| layer.split_once('×'))
            .or_else(|| layer.split_once('X'))
            .ok_or_else(syntax)?;
        let (i, o): (usize, usize) = (
            i.trim().parse().map_err(|_| syntax())?,
            o.trim().parse().map_err(|_| syntax())?,
        );
        let pruning = Pruning::parse(pruning)?;
        Arc::make_mut(&mut self.overrides).insert(Self::layer_key(i, o), pruning);
        Ok(())
    }

    /// Checks the policy against the linear layers of a model (`(IN, OUT)` weight shapes):
    /// an override naming no layer is an error listing the layers, and so is a policy that
    /// prunes nothing anywhere. Returns the layers the policy leaves dense although it names a
    /// pruning for them (one line each, for a warning).
    pub fn check_layers(&self, layers: &[(usize, usize)]) -> Result<Vec<String>, PolicyError> {
        if self.is_off() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = layers.iter().map(|&(i, o)| Self::layer_key(i, o)).collect();
        let unknown: Vec<&str> = self
            .overrides
            .keys()
            .filter(|k| !keys.contains(k))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            return Err(PolicyError::UnknownLayer {
                unknown: unknown.join(", "),
                layers: keys.join(", "),
            });
        }
        let mut idle = Vec::new();
        let mut pruning_somewhere = false;
        for &(i, o) in layers {
            let Some(p) = self.for_layer(i, o) else {
                continue;
            };
            let (blocks, pruned) = p.pruned_blocks(i);
            if pruned == 0 {
                idle.push(format!(
                    "layer {}: {p} prunes nothing ({blocks} block{} of width {} per row, \
                     ⌊{}·{blocks}⌋ = 0 dropped)",
                    Self::layer_key(i, o),
                    if blocks == 1 { "" } else { "s" },
                    p.block,
                    p.sparsity
                ));
            } else {
                pruning_somewhere = true;
            }
        }
        if !pruning_somewhere {
            return Err(PolicyError::PrunesNothing {
                policy: self.to_string(),
                why: idle.join("; "),
            });
        }
        Ok(idle)
    }

    /// Sets the stochastic band (`0 < band < 1`).
    pub fn with_stochastic(mut self, band: f64) -> Result<Self, PolicyError> {
        if !(band > 0.0 && band < 1.0) {
            return Err(PolicyError::Band(band));
        }
        self.stochastic = Some(band);
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_sparsities_and_blocks_are_refused() {
        for s in [-0.1, 1.0, 1.5, f64::NAN, f64::INFINITY] {
            assert!(
                matches!(Pruning::new(s, 4), Err(PolicyError::Sparsity(_))),
                "{s}"
            );
        }
        assert_eq!(Pruning::new(0.5, 0), Err(PolicyError::ZeroBlock));
        assert!(Pruning::new(0.0, 1).is_ok());
        assert!(Pruning::new(0.999, 64).is_ok());
    }

    #[test]
    fn cli_form_parses_or_says_what_it_expects() {
        assert_eq!(Pruning::parse("0.8:64"), Pruning::new(0.8, 64));
        for bad in ["0.8", "0.8:", ":64", "a:64", "0.8:-1", "0.8:64:2"] {
            let err = Pruning::parse(bad).unwrap_err();
            assert!(matches!(err, PolicyError::Syntax(_)), "{bad}: {err}");
        }
        assert_eq!(Pruning::parse("1.0:64"), Err(PolicyError::Sparsity(1.0)));
    }

    #[test]
    fn overrides_win_and_bad_overrides_are_refused() {
        let mut p = Policy::uniform(Pruning::new(0.5, 64).unwrap());
        p.add_override("384x10=0.2:16").unwrap();
        assert_eq!(p.for_layer(384, 10), Pruning::new(0.2, 16).ok());
        assert_eq!(p.for_layer(384, 1536), Pruning::new(0.5, 64).ok());
        assert_eq!(Policy::default().for_layer(384, 10), None);
        for bad in ["384x10", "384=0.2:16", "ax10=0.2:16", "384x10=0.2"] {
            assert!(p.add_override(bad).is_err(), "{bad}");
        }
        assert_eq!(
            p.add_override("384x10=2:16"),
            Err(PolicyError::Sparsity(2.0))
        );
        for band in [0.0, 1.0, -0.5, f64::NAN] {
            assert!(p.clone().with_stochastic(band).is_err(), "{band}");
        }
        let p = p.with_stochastic(0.1).unwrap();
        assert_eq!(p.stochastic, Some(0.1));
        assert_eq!(p.to_string(), "0.5:64 384x10=0.2:16 stochastic=0.1");
        assert_eq!(Policy::default().to_string(), "off");
    }

    /// Every combination of the policy's parts.
    fn every_policy() -> Vec<Policy> {
        let mut all = Vec::new();
        for default in [
            None,
            Some(Pruning::new(0.8, 64).unwrap()),
            Some(Pruning::new(0.0, 1).unwrap()),
        ] {
            for overrides in [
                &[][..],
                &["384x10=0.25:16"][..],
                &["100x10=0:1", "784x300=0.5:3"][..],
            ] {
                for stochastic in [None, Some(0.1), Some(1e-3)] {
                    for scales in [false, true] {
                        let mut p = Policy {
                            default,
                            scales,
                            ..Policy::default()
                        };
                        for o in overrides {
                            p.add_override(o).unwrap();
                        }
                        if let Some(band) = stochastic {
                            p = p.with_stochastic(band).unwrap();
                        }
                        all.push(p);
                    }
                }
            }
        }
        all
    }

    #[test]
    fn every_printed_form_parses_back_to_an_equal_policy() {
        for p in every_policy() {
            let text = p.to_string();
            assert_eq!(text.parse::<Policy>().as_ref(), Ok(&p), "{text}");
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(serde_json::from_str::<Policy>(&json).unwrap(), p, "{json}");
        }
        for bad in [
            "",
            "0.8",
            "off stochastic=2",
            "0.8:64 +scale",
            "0.8:64 384x10",
            "2:4",
        ] {
            assert!(bad.parse::<Policy>().is_err(), "{bad:?}");
        }
        let out_of_range = r#"{"default":{"sparsity":1.5,"block":4}}"#;
        assert!(serde_json::from_str::<Policy>(out_of_range).is_err());
    }

    #[test]
    fn uniform_policies_are_told_apart_from_the_rest() {
        let p = Pruning::new(0.5, 16).unwrap();
        assert_eq!(Policy::uniform(p).as_uniform(), Ok(p));
        assert!(Policy::default().is_off() && Policy::default().as_uniform().is_err());
        for text in [
            "0.5:16 384x10=0:1",
            "0.5:16 stochastic=0.1",
            "0.5:16 +scales",
        ] {
            let policy: Policy = text.parse().unwrap();
            assert!(!policy.is_off());
            assert!(policy.as_uniform().is_err(), "{text}");
        }
    }

    #[test]
    fn huge_blocks_and_unicode_layer_keys() {
        assert_eq!(
            Pruning::parse("0.5:18446744073709551615"),
            Err(PolicyError::HugeBlock(usize::MAX))
        );
        assert!(Pruning::parse(&format!("0.5:{MAX_BLOCK}")).is_ok());
        let mut times = Policy::default();
        times.add_override("400×120=0.5:4").unwrap();
        let mut ascii = Policy::default();
        ascii.add_override("400x120=0.5:4").unwrap();
        assert_eq!(times, ascii);
    }

    #[test]
    fn layer_check_names_unknown_layers_and_idle_policies() {
        let lenet = [(400, 120), (120, 84), (84, 10)];
        let wide: Policy = "0.5:1000".parse().unwrap();
        let err = wide.check_layers(&lenet).unwrap_err();
        assert!(matches!(err, PolicyError::PrunesNothing { .. }), "{err}");
        assert!(err.to_string().contains("400x120"), "{err}");

        let mut stray: Policy = "0.5:4".parse().unwrap();
        stray.add_override("999x120=0.5:4").unwrap();
        let err = stray.check_layers(&lenet).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--sparse-act-layer 999x120 names no linear layer of the model \
             (its layers, IN×OUT: 400x120, 120x84, 84x10)"
        );

        // 0.5:200 drops ⌊0.5·2⌋ = 1 block of the 400-input layer; the 120- and 84-input
        // layers have one block each, and ⌊0.5·1⌋ = 0 of it is dropped.
        let idle = "0.5:200"
            .parse::<Policy>()
            .unwrap()
            .check_layers(&lenet)
            .unwrap();
        assert_eq!(idle.len(), 2, "{idle:?}");
        assert!(idle[0].starts_with("layer 120x84"), "{idle:?}");
        assert!(Policy::default().check_layers(&lenet).unwrap().is_empty());
    }
}
