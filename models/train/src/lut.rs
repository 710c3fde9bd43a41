//! `ember lut`: generate, inspect and convert mantissa-product lookup tables.

use crate::error::{EmberError, Result};
use burn_approx_mul::file;
use burn_approx_mul::{Family, Lut, Multiplier};
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// The table of a multiplier name or LUT file (`fp32`, `native` and the FP32-width models have
/// none).
pub fn table(spec: &str) -> Result<Lut> {
    let mul = Multiplier::parse(spec)?;
    mul.lut().cloned().ok_or_else(|| {
        EmberError::Invalid(format!(
            "multiplier `{spec}` has no lookup table (it is evaluated directly in the kernels); \
             tables exist for m = 1..=11"
        ))
    })
}

/// Writes the table of `spec` to `out` (default: ApproxTrain's `NAME_M.bin` for m ≤ 7, else
/// `NAME_M.lut`), never over an existing file. Returns the path written.
pub fn generate(spec: &str, out: Option<PathBuf>) -> Result<PathBuf> {
    let lut = table(spec)?;
    let path = out.unwrap_or_else(|| {
        let ext = if lut.bits() <= file::RAW_MAX_BITS {
            "bin"
        } else {
            "lut"
        };
        PathBuf::from(format!("{}_{}.{ext}", lut.name(), lut.bits()))
    });
    file::write_new(&lut, &path)?;
    Ok(path)
}

/// Converts a table file to another path; the format follows the extension (`.lut`: Ember's,
/// otherwise ApproxTrain's raw `NAME_M.bin`).
pub fn convert(input: &Path, output: &Path) -> Result<()> {
    let lut = file::read(input)?;
    file::write_new(&lut, output)?;
    Ok(())
}

/// A human-readable summary of the table of `spec`.
pub fn inspect(spec: &str) -> Result<String> {
    let lut = table(spec)?;
    let stats = lut.error_stats();
    let m = lut.bits();
    let carries = lut.entries().iter().filter(|e| (**e >> m) & 1 == 1).count();
    let n = 1usize << m;
    let sig = lut.significands();
    let mut text = format!(
        "table {name}: m = {m}, {entries} entries ({n} × {n})\n\
         relative error of the significand product (operands at interval centres):\n  \
         mean {mean:+.3e}   mean |.| {mabs:.3e}   max |.| {max:.3e}\n\
         entries with carry: {carries} ({pct:.1}%)\n",
        name = lut.name(),
        entries = lut.entries().len(),
        mean = stats.mean,
        mabs = stats.mean_abs,
        max = stats.max_abs,
        pct = 100.0 * carries as f64 / lut.entries().len() as f64,
    );
    text.push_str(&built_in_match(&lut));
    if m <= 3 {
        text.push_str("significands (row: 1.a, column: 1.b):\n");
        for a in 0..n {
            let row: Vec<String> = (0..n).map(|b| format!("{:.4}", sig[a * n + b])).collect();
            text.push_str(&format!("  {}\n", row.join(" ")));
        }
    }
    Ok(text)
}

/// The line saying which built-in multipliers (`mbm7`, ...) have exactly this table, if any.
fn built_in_match(lut: &Lut) -> String {
    let m = lut.bits();
    let names: Vec<String> = Family::equal_to(lut)
        .iter()
        .map(|family| format!("{}{m}", family.prefix()))
        .collect();
    match names.as_slice() {
        [] => "equals no built-in multiplier\n".to_string(),
        [one] => format!("equals built-in {one}\n"),
        all => format!("equals built-ins {}\n", all.join(", ")),
    }
}

/// Size of the heat map of [`plot`] in pixels.
const PLOT_SIZE: (u32, u32) = (720, 640);

/// Draws the relative error of every table entry as a heat map (rows: `1.a`, columns: `1.b`)
/// into a new PNG file at `path`, written atomically and never over an existing file.
pub fn plot(spec: &str, path: &Path) -> Result<()> {
    let lut = table(spec)?;
    crate::report::png(path, PLOT_SIZE, false, |root| draw_heat_map(&lut, root))
}

/// Relative error of each entry's significand against the exact product of the interval
/// centres, in entry order.
fn relative_errors(lut: &Lut) -> Vec<f64> {
    let n = 1usize << lut.bits();
    let centre = |k: usize| 1.0 + (k as f64 + 0.5) / n as f64;
    lut.significands()
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let exact = centre(i / n) * centre(i % n);
            (f64::from(s) - exact) / exact
        })
        .collect()
}

/// Draws the heat map of [`plot`] on `root`.
fn draw_heat_map(
    lut: &Lut,
    root: DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
) -> std::result::Result<(), String> {
    let m = lut.bits();
    let n = 1usize << m;
    let err = relative_errors(lut);
    let limit = err.iter().fold(1e-12f64, |l, e| l.max(e.abs()));
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let title = format!(
        "{}: relative error of 1.a × 1.b (m = {m}, ±{:.2}%)",
        lut.name(),
        100.0 * limit
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(1.0f64..2.0, 1.0f64..2.0)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("1.b")
        .y_desc("1.a")
        .disable_mesh()
        .draw()
        .map_err(|e| e.to_string())?;
    let step = 1.0 / n as f64;
    chart
        .draw_series((0..n * n).map(|i| {
            let (a, b) = (i / n, i % n);
            let t = err[i] / limit; // -1 (blue) .. 0 (white) .. +1 (red)
            let c = |x: f64| (255.0 * (1.0 - x.abs())) as u8;
            let color = if t >= 0.0 {
                RGBColor(255, c(t), c(t))
            } else {
                RGBColor(c(t), c(t), 255)
            };
            let (x0, y0) = (1.0 + b as f64 * step, 1.0 + a as f64 * step);
            Rectangle::new([(x0, y0), (x0 + step, y0 + step)], color.filled())
        }))
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}
