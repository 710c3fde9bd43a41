//! Per-epoch metrics, written as `metrics.csv`, and the loss/accuracy curves as `curves.png`
//! (non-finite values, from a diverged run, are gaps in the curves). Runs of manifest version 2
//! kept their metrics in burn-train's logs, read by [`read_metrics`].

use crate::error::{EmberError, Result};
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::Path;

/// Aggregated metrics of one epoch. Serialised with non-finite values (a diverged run's
/// loss) as `null`, read back as NaN.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EpochMetrics {
    /// 1-based epoch.
    pub epoch: usize,
    /// Mean training loss.
    #[serde(with = "finite_or_null")]
    pub train_loss: f64,
    /// Training accuracy, percent.
    #[serde(with = "finite_or_null")]
    pub train_accuracy: f64,
    /// Mean validation loss.
    #[serde(with = "finite_or_null")]
    pub valid_loss: f64,
    /// Validation accuracy, percent.
    #[serde(with = "finite_or_null")]
    pub valid_accuracy: f64,
    /// Wall seconds of the epoch, if measured.
    pub seconds: Option<f64>,
}

/// JSON has no NaN or infinity: they are written as `null` and read back as NaN.
mod finite_or_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        match v.is_finite() {
            true => s.serialize_f64(*v),
            false => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

/// The epoch value of a burn-train metric log (`value,count` per batch): Σ value·count / Σ count,
/// which is how burn-train aggregates it.
fn epoch_mean(path: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(path).ok()?;
    let (mut num, mut den) = (0.0, 0.0);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut it = line.split(',');
        let v: f64 = it.next()?.trim().parse().ok()?;
        let n: f64 = it.next().and_then(|c| c.trim().parse().ok()).unwrap_or(1.0);
        num += v * n;
        den += n;
    }
    (den > 0.0).then(|| num / den)
}

/// Reads the metrics of epochs `1..=epochs` from a run directory.
pub fn read_metrics(dir: &Path, epochs: usize, seconds: &[f64]) -> Vec<EpochMetrics> {
    (1..=epochs)
        .filter_map(|e| {
            let get = |split: &str, name: &str| {
                epoch_mean(
                    &dir.join(split)
                        .join(format!("epoch-{e}"))
                        .join(format!("{name}.log")),
                )
            };
            Some(EpochMetrics {
                epoch: e,
                train_loss: get("train", "Loss")?,
                train_accuracy: get("train", "Accuracy")?,
                valid_loss: get("valid", "Loss")?,
                valid_accuracy: get("valid", "Accuracy")?,
                seconds: seconds.get(e - 1).copied(),
            })
        })
        .collect()
}

/// Writes `metrics.csv` (atomically; a non-finite value as `nan`/`inf`).
pub fn write_csv(path: &Path, rows: &[EpochMetrics]) -> Result<()> {
    let mut s = String::from("epoch,train_loss,train_accuracy,valid_loss,valid_accuracy,seconds\n");
    for r in rows {
        let secs = r.seconds.map(|s| format!("{s:.3}")).unwrap_or_default();
        writeln!(
            s,
            "{},{:.6},{:.4},{:.6},{:.4},{secs}",
            r.epoch, r.train_loss, r.train_accuracy, r.valid_loss, r.valid_accuracy
        )
        .expect("write to string");
    }
    crate::atomic::write(path, s.as_bytes())
}

/// Draws a `size` PNG with `draw` and writes it atomically: over an existing file when
/// `replace`, else only where none exists.
pub(crate) fn png(
    path: &Path,
    size: (u32, u32),
    replace: bool,
    draw: impl FnOnce(
        DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    ) -> std::result::Result<(), String>,
) -> Result<()> {
    font()?;
    if !replace && path.exists() {
        return Err(EmberError::Exists(path.to_path_buf()));
    }
    let mut pixels = vec![0u8; size.0 as usize * size.1 as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, size).into_drawing_area();
        draw(root).map_err(EmberError::Plot)?;
    }
    let image = image::RgbImage::from_raw(size.0, size.1, pixels).expect("buffer of the size");
    let mut bytes = std::io::Cursor::new(Vec::new());
    image
        .write_to(&mut bytes, image::ImageFormat::Png)
        .map_err(|e| EmberError::Plot(e.to_string()))?;
    match replace {
        true => crate::atomic::write(path, bytes.get_ref()),
        false => crate::atomic::write_new(path, bytes.get_ref()),
    }
}

/// Registers the plots' font once; an error when it cannot be registered (a figure without
/// text is not drawn silently).
pub fn font() -> Result<()> {
    use std::sync::OnceLock;
    static FONT: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    // Hack (MIT/Bitstream Vera licence), shipped as bytes by egui's font crate.
    FONT.get_or_init(|| register_font("sans-serif", epaint_default_fonts::HACK_REGULAR))
        .clone()
        .map_err(EmberError::Plot)
}

/// Registers `bytes` as the font `name` for plotters; the reason when they are not a font.
pub fn register_font(name: &str, bytes: &'static [u8]) -> std::result::Result<(), String> {
    plotters::style::register_font(name, FontStyle::Normal, bytes).map_err(|_| {
        format!(
            "cannot register the plot font \"{name}\" ({} bytes are not a TrueType/OpenType \
             font): figures would have no text",
            bytes.len()
        )
    })
}

/// A named, coloured line of `(epoch, value)` points.
pub(crate) type Series<'a> = (&'a str, RGBColor, Vec<(f64, f64)>);

/// One chart of `series` against epochs.
pub(crate) fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    y_label: &str,
    series: &[Series<'_>],
) -> std::result::Result<(), String> {
    // Bounds of the finite points only: a diverged run's NaN or infinite loss is a gap (and
    // NaN bounds would send plotters' key-point search into an endless loop).
    let finite = || {
        series
            .iter()
            .flat_map(|s| s.2.iter())
            .filter(|p| p.0.is_finite() && p.1.is_finite())
    };
    let x_max = finite().map(|p| p.0).fold(1.0f64, f64::max);
    let (y_min, y_max) = finite()
        .map(|p| p.1)
        .fold(None, |acc, y| match acc {
            None => Some((y, y)),
            Some((a, b)) => Some((f64::min(a, y), f64::max(b, y))),
        })
        .unwrap_or((0.0, 1.0));
    let pad = ((y_max - y_min) * 0.08).max(1e-3);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(1.0f64..x_max.max(1.0 + 1e-9), (y_min - pad)..(y_max + pad))
        .map_err(|e| e.to_string())?;
    let epochs = x_max.round() as usize;
    chart
        .configure_mesh()
        .x_labels(epochs.clamp(2, 21))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .x_desc("epoch")
        .y_desc(y_label)
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(|e| e.to_string())?;
    for (name, color, points) in series {
        let color = *color;
        let is_finite = |p: &&(f64, f64)| p.0.is_finite() && p.1.is_finite();
        // One line per run of finite points: a non-finite value breaks the curve.
        let runs = points.split(|p| !is_finite(&p));
        chart
            .draw_series(
                runs.filter(|run| !run.is_empty())
                    .map(|run| PathElement::new(run.to_vec(), color.stroke_width(2))),
            )
            .map_err(|e| e.to_string())?
            .label(*name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                points
                    .iter()
                    .filter(is_finite)
                    .map(|&p| Circle::new(p, 3, color.filled())),
            )
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Draws the loss and accuracy curves of `rows` into a PNG.
pub fn plot_curves(path: &Path, title: &str, rows: &[EpochMetrics]) -> Result<()> {
    let pts = |f: fn(&EpochMetrics) -> f64| {
        rows.iter()
            .map(|r| (r.epoch as f64, f(r)))
            .collect::<Vec<_>>()
    };
    two_panels(
        path,
        title,
        [
            (
                "loss",
                "cross-entropy",
                &[
                    ("train", BLUE, pts(|r| r.train_loss)),
                    ("test", RED, pts(|r| r.valid_loss)),
                ],
            ),
            (
                "accuracy",
                "accuracy (%)",
                &[
                    ("train", BLUE, pts(|r| r.train_accuracy)),
                    ("test", RED, pts(|r| r.valid_accuracy)),
                ],
            ),
        ],
    )
}

/// A titled 1200 × 480 PNG of two [`panel`]s side by side: (panel title, y label, series).
pub(crate) fn two_panels(
    path: &Path,
    title: &str,
    panels: [(&str, &str, &[Series<'_>]); 2],
) -> Result<()> {
    png(path, (1200, 480), true, |root| {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let root = root
            .titled(title, ("sans-serif", 24))
            .map_err(|e| e.to_string())?;
        let (left, right) = root.split_horizontally(600);
        for (area, (name, y_label, series)) in [left, right].iter().zip(panels) {
            panel(area, name, y_label, series)?;
        }
        root.present().map_err(|e| e.to_string())
    })
}
