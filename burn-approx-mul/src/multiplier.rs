//! The multiplier a device carries: built-in catalogue, user functions and LUT files.

use crate::error::ApproxError;
pub use crate::error::BUILT_IN_HELP;
use crate::lut::{Lut, MAX_LUT_BITS};
use crate::model::{self, MantissaModel, apply};
use crate::ops::native::ConvRoute;
use cubecl_kernels::approx::{ApproxMultiply, LutTable};
use cubecl_kernels::decorator::MultiplyStrategy;
use cubecl_kernels::matmul::MatmulKernel;
use std::path::Path;
use std::sync::Arc;

/// Built-in names that are not `PREFIX` + `M`: `(name, family, m)`.
const NAMED: [(&str, Family, u32); 3] = [
    ("bf16", Family::Truncated, 7),
    ("bfloat16", Family::Truncated, 7),
    ("realm16", Family::Realm, 7),
];

/// Names by total format width (ApproxTrain's AFM16, MIT16, ...): `(prefix, family)`.
const FORMAT_PREFIXES: [(&str, Family); 2] = [("afm", Family::Mbm), ("mit", Family::Mitchell)];

/// Total format width (sign + 8 exponent bits + m) → mantissa bits `m`.
const FORMAT_WIDTHS: [(u32, u32); 5] = [(10, 1), (12, 3), (14, 5), (16, 7), (32, 23)];

/// A family of built-in functional models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Truncating exact multiplier (ApproxTrain's `ACC`; bfloat16 at m = 7).
    Truncated,
    /// Minimally biased multiplier (ApproxTrain's AFM).
    Mbm,
    /// Mitchell's logarithmic multiplier.
    Mitchell,
    /// REALM (see [`model::realm`]).
    Realm,
}

impl Family {
    /// Every family.
    pub const ALL: [Family; 4] = [Self::Truncated, Self::Mbm, Self::Mitchell, Self::Realm];

    /// ApproxTrain's table name (`ACC_7.bin`, `MBM_7.bin`, `MIT_7.bin`; `REALM` for REALM).
    pub fn table_name(self) -> &'static str {
        match self {
            Self::Truncated => "ACC",
            Self::Mbm => "MBM",
            Self::Mitchell => "MIT",
            Self::Realm => "REALM",
        }
    }

    /// Name prefix (`acc7`, `mbm7`, ...).
    pub fn prefix(self) -> &'static str {
        match self {
            Self::Truncated => "acc",
            Self::Mbm => "mbm",
            Self::Mitchell => "mitchell",
            Self::Realm => "realm",
        }
    }

    /// The mantissa model.
    pub fn model(self) -> MantissaModel {
        match self {
            Self::Truncated => model::truncated,
            Self::Mbm => model::mbm,
            Self::Mitchell => model::mitchell,
            Self::Realm => model::realm,
        }
    }

    /// The functional model at width `m`, under Ember's semantics.
    pub fn function(self, m: u32) -> impl Fn(f32, f32) -> f32 + Copy {
        let f = self.model();
        move |a, b| apply(f, m, a, b)
    }

    /// Whether `m` is supported: 1..=11 through a LUT; 23 in the kernel for MBM and Mitchell.
    pub fn supports(self, m: u32) -> bool {
        (1..=MAX_LUT_BITS).contains(&m) || (m == 23 && matches!(self, Self::Mbm | Self::Mitchell))
    }

    /// The families whose built-in table at `lut`'s width has exactly `lut`'s entries (names are
    /// not compared), in [`Family::ALL`] order.
    pub fn equal_to(lut: &Lut) -> Vec<Family> {
        let m = lut.bits();
        Self::ALL
            .into_iter()
            .filter(|family| {
                Lut::generate(family.table_name(), m, family.function(m))
                    .is_ok_and(|own| own.entries() == lut.entries())
            })
            .collect()
    }

    fn supported_text(self) -> &'static str {
        match self {
            Self::Mbm | Self::Mitchell => "1..=11 and 23",
            _ => "1..=11",
        }
    }
}

/// The multiplier of an [`ApproxMul`](crate::ApproxMul) device: a name and how the kernels
/// multiply. `Default` is [`Multiplier::native`], under which the decorator is the inner backend.
/// Its `Debug` form is its name (devices are printed in logs; tables are not).
///
/// A multiplier a per-layer policy gave a layer's weight also names that layer
/// ([`Multiplier::layer`]): the contractions report what they ran under that path
/// (`cubecl_kernels::decorator::effects`).
///
/// It also carries the route of the native convolutions ([`ConvRoute`], default
/// [`ConvRoute::Burn`]: the inner backend's own kernels), set with [`Multiplier::with_conv`],
/// and the kernel of the native matmuls on a CubeCL runtime ([`MatmulKernel`], default
/// [`MatmulKernel::Burn`]), set with [`Multiplier::with_matmul`].
#[derive(Clone, PartialEq)]
pub struct Multiplier {
    name: Arc<str>,
    strategy: MultiplyStrategy,
    lut: Option<Arc<Lut>>,
    layer: Option<Arc<str>>,
    conv: ConvRoute,
    matmul: MatmulKernel,
}

impl Default for Multiplier {
    fn default() -> Self {
        Self::native()
    }
}

impl std::fmt::Debug for Multiplier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.layer {
            None => write!(f, "Multiplier({})", self.name),
            Some(layer) => write!(f, "Multiplier({} at {layer})", self.name),
        }
    }
}

impl std::fmt::Display for Multiplier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

/// [`Multiplier::parse`]: a CLI name or a LUT file.
impl std::str::FromStr for Multiplier {
    type Err = ApproxError;
    fn from_str(spec: &str) -> Result<Self, ApproxError> {
        Self::parse(spec)
    }
}

impl Multiplier {
    /// The inner backend's own ops, bit for bit.
    pub fn native() -> Self {
        Self {
            name: "native".into(),
            strategy: MultiplyStrategy::Exact,
            lut: None,
            layer: None,
            conv: ConvRoute::Burn,
            matmul: MatmulKernel::Burn,
        }
    }

    /// IEEE FP32 products inside Ember's kernels (the kernels' own baseline).
    pub fn fp32() -> Self {
        Self::kernel("fp32", ApproxMultiply::Plain)
    }

    fn kernel(name: &str, mul: ApproxMultiply) -> Self {
        Self {
            name: name.into(),
            strategy: MultiplyStrategy::Approx(mul),
            lut: None,
            layer: None,
            conv: ConvRoute::Burn,
            matmul: MatmulKernel::Burn,
        }
    }

    /// A built-in multiplier: `family` at `m` mantissa bits.
    pub fn built_in(family: Family, m: u32) -> Result<Self, ApproxError> {
        if !family.supports(m) {
            return Err(ApproxError::UnsupportedBits {
                name: family.prefix().into(),
                m,
                supported: family.supported_text(),
            });
        }
        let name = format!("{}{m}", family.prefix());
        match (family, m) {
            (Family::Mbm, 23) => Ok(Self::kernel(&name, ApproxMultiply::Mbm)),
            (Family::Mitchell, 23) => Ok(Self::kernel(&name, ApproxMultiply::Mitchell)),
            _ => Ok(
                Self::from_lut(Lut::generate(family.table_name(), m, family.function(m))?)
                    .renamed(&name),
            ),
        }
    }

    /// A user-defined multiplier `f`, tabulated at `m` bits (Algorithm 1).
    pub fn from_fn(name: &str, m: u32, f: impl Fn(f32, f32) -> f32) -> Result<Self, ApproxError> {
        Ok(Self::from_lut(Lut::generate(name, m, f)?))
    }

    /// A multiplier from a table, named `NAME_M` after it.
    pub fn from_lut(lut: Lut) -> Self {
        let table = LutTable::new(lut.bits(), lut.significands());
        Self {
            name: format!("{}_{}", lut.name(), lut.bits()).into(),
            strategy: MultiplyStrategy::Approx(ApproxMultiply::Lut(table)),
            lut: Some(Arc::new(lut)),
            layer: None,
            conv: ConvRoute::Burn,
            matmul: MatmulKernel::Burn,
        }
    }

    /// Parses a CLI name (see [`BUILT_IN_HELP`]) or reads a LUT file (`NAME_M.bin` or `.lut`).
    pub fn parse(spec: &str) -> Result<Self, ApproxError> {
        let lower = spec.to_ascii_lowercase();
        match lower.as_str() {
            "native" => return Ok(Self::native()),
            "fp32" => return Ok(Self::fp32()),
            _ => {}
        }
        if let Some(&(_, family, m)) = NAMED.iter().find(|(name, ..)| *name == lower) {
            return Self::built_in(family, m).map(|m| m.renamed(&lower));
        }
        if let Some(result) = Self::parse_format_width(&lower) {
            return result;
        }
        for family in Family::ALL {
            if let Some(Ok(m)) = lower.strip_prefix(family.prefix()).map(str::parse::<u32>) {
                return Self::built_in(family, m);
            }
        }
        let path = Path::new(spec);
        if spec.contains(['/', '\\']) || path.extension().is_some_and(|e| e == "bin" || e == "lut")
        {
            return Ok(Self::from_lut(crate::file::read(path)?));
        }
        Err(ApproxError::UnknownMultiplier(spec.to_string()))
    }

    /// `afmW` / `mitW` (lower case), `None` if `lower` is not of that form.
    fn parse_format_width(lower: &str) -> Option<Result<Self, ApproxError>> {
        FORMAT_PREFIXES.iter().find_map(|&(prefix, family)| {
            let bits = lower.strip_prefix(prefix)?.parse::<u32>().ok()?;
            let Some(&(_, m)) = FORMAT_WIDTHS.iter().find(|(w, _)| *w == bits) else {
                return Some(Err(ApproxError::UnsupportedBits {
                    name: prefix.into(),
                    m: bits,
                    supported: "10, 12, 14, 16, 32 (format widths)",
                }));
            };
            Some(Self::built_in(family, m).map(|m| m.renamed(lower)))
        })
    }

    fn renamed(mut self, name: &str) -> Self {
        self.name = name.into();
        self
    }

    /// The name (`mbm7`, `bf16`, `native`, or the table's `NAME` + `M`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the kernels do.
    pub fn strategy(&self) -> &MultiplyStrategy {
        &self.strategy
    }

    /// The kernels' multiply, `None` for [`Multiplier::native`].
    pub fn approx(&self) -> Option<&ApproxMultiply> {
        match &self.strategy {
            MultiplyStrategy::Exact => None,
            MultiplyStrategy::Approx(mul) => Some(mul),
        }
    }

    /// The table, for LUT multipliers.
    pub fn lut(&self) -> Option<&Lut> {
        self.lut.as_deref()
    }

    /// The layer whose weight carries this multiplier (set by a per-layer policy).
    pub fn layer(&self) -> Option<&str> {
        self.layer.as_deref()
    }

    /// This multiplier, naming the layer `path`.
    pub fn at_layer(mut self, path: Arc<str>) -> Self {
        self.layer = Some(path);
        self
    }

    /// How native convolutions run under this multiplier (approximate ones always run Ember's
    /// im2col + GEMM).
    pub fn conv(&self) -> ConvRoute {
        self.conv
    }

    /// This multiplier, with native convolutions on `route`.
    pub fn with_conv(mut self, route: ConvRoute) -> Self {
        self.conv = route;
        self
    }

    /// Which of cubek's matmul kernels the native products run on a CubeCL runtime (the
    /// matmuls, the linear layers and the GEMMs of the native convolution routes; approximate
    /// products always run Ember's GEMM).
    pub fn matmul(&self) -> MatmulKernel {
        self.matmul
    }

    /// This multiplier, with native products on `kernel`.
    pub fn with_matmul(mut self, kernel: MatmulKernel) -> Self {
        self.matmul = kernel;
        self
    }

    /// `a · b` under this multiplier (scalar; the kernels compute the same products).
    pub fn multiply(&self, a: f32, b: f32) -> f32 {
        match self.approx() {
            None => a * b,
            Some(mul) => cubecl_kernels::approx::host::multiply(a, b, mul),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_to_the_paper_formats() {
        assert_eq!(Multiplier::parse("native").unwrap(), Multiplier::native());
        assert_eq!(Multiplier::parse("afm16").unwrap().lut().unwrap().bits(), 7);
        assert_eq!(Multiplier::parse("MIT12").unwrap().lut().unwrap().bits(), 3);
        assert_eq!(
            Multiplier::parse("afm32").unwrap().approx(),
            Some(&ApproxMultiply::Mbm)
        );
        assert_eq!(
            Multiplier::parse("mitchell23").unwrap().approx(),
            Some(&ApproxMultiply::Mitchell)
        );
        assert_eq!(
            Multiplier::parse("bf16").unwrap().lut().unwrap(),
            Multiplier::parse("acc7").unwrap().lut().unwrap()
        );
        assert_eq!(Multiplier::parse("realm16").unwrap().name(), "realm16");
        assert_eq!(
            Multiplier::parse("fp32").unwrap().approx(),
            Some(&ApproxMultiply::Plain)
        );
    }

    #[test]
    fn bad_names_and_widths_are_clear_errors() {
        let msg = |s: &str| Multiplier::parse(s).unwrap_err().to_string();
        assert!(msg("wallace7").contains("unknown multiplier `wallace7`"));
        assert!(msg("mbm12").contains("m = 12"));
        assert!(msg("mbm0").contains("m = 0"));
        assert!(msg("acc23").contains("1..=11"));
        assert!(msg("realm23").contains("1..=11"));
        assert!(msg("afm8").contains("10, 12, 14, 16, 32"));
        assert!(msg("no/such/MBM_7.bin").contains("no/such/MBM_7.bin"));
    }

    /// [`BUILT_IN_HELP`] rebuilt from the tables [`Multiplier::parse`] reads: it lists exactly
    /// the names that parse, and every name it lists parses.
    #[test]
    fn built_in_help_lists_exactly_what_parses() {
        let families: Vec<String> = Family::ALL
            .iter()
            .map(|f| format!("{}M", f.prefix()))
            .collect();
        let wide: Vec<&str> = Family::ALL
            .iter()
            .filter(|f| f.supports(23))
            .map(|f| f.prefix())
            .collect();
        let widths: Vec<String> = FORMAT_WIDTHS.iter().map(|(w, _)| w.to_string()).collect();
        let formats: Vec<String> = FORMAT_PREFIXES
            .iter()
            .map(|(p, _)| format!("{p}{}", widths.join("/")))
            .collect();
        let named: Vec<&str> = NAMED.iter().map(|n| n.0).collect();
        let expected = format!(
            "native, fp32, {} (M = 1..={MAX_LUT_BITS}; {} also 23), {}, {}",
            families.join(", "),
            wide.join("/"),
            formats.join(", "),
            named.join(", ")
        );
        assert_eq!(BUILT_IN_HELP, expected);

        let mut listed: Vec<String> = ["native", "fp32"].map(String::from).to_vec();
        listed.extend(named.iter().map(|n| n.to_string()));
        for (prefix, _) in FORMAT_PREFIXES {
            listed.extend(widths.iter().map(|w| format!("{prefix}{w}")));
        }
        for family in Family::ALL {
            listed.extend((1..=MAX_LUT_BITS).map(|m| format!("{}{m}", family.prefix())));
        }
        listed.extend(wide.iter().map(|p| format!("{p}23")));
        for name in &listed {
            assert!(
                Multiplier::parse(name).is_ok(),
                "{name} is listed but does not parse"
            );
        }
        for unlisted in [
            "acc23", "realm23", "afm8", "mit7", "bf32", "bfloat", "exact",
        ] {
            assert!(Multiplier::parse(unlisted).is_err(), "{unlisted} parses");
        }
    }

    #[test]
    fn bf16_multiplier_is_bfloat16_truncation() {
        let bf16 = Multiplier::parse("bf16").unwrap();
        let mask = |x: f32| f32::from_bits(x.to_bits() & 0xffff_0000);
        for (a, b) in [(3.3f32, -2.9f32), (1e-3, 7e4), (0.1, 0.2)] {
            assert_eq!(bf16.multiply(a, b), mask(mask(a) * mask(b)), "{a}·{b}");
        }
    }
}
