//! Per-epoch metrics from burn-train's logs, written as `metrics.csv`, and the loss/accuracy
//! curves as `curves.png`.

use crate::error::{EmberError, Result};
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::Path;

/// Aggregated metrics of one epoch.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochMetrics {
    /// 1-based epoch.
    pub epoch: usize,
    /// Mean training loss.
    pub train_loss: f64,
    /// Training accuracy, percent.
    pub train_accuracy: f64,
    /// Mean validation loss.
    pub valid_loss: f64,
    /// Validation accuracy, percent.
    pub valid_accuracy: f64,
    /// Wall seconds of the epoch, if measured.
    pub seconds: Option<f64>,
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

/// Writes `metrics.csv`.
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
    std::fs::write(path, s).map_err(|e| EmberError::io(path, e))
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
    let xs = series.iter().flat_map(|s| s.2.iter().map(|p| p.0));
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.2.iter().map(|p| p.1))
        .collect();
    let x_max = xs.fold(1.0f64, f64::max);
    let (y_min, y_max) = ys
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &y| {
            (a.min(y), b.max(y))
        });
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
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(*name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
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
    font()?;
    let draw = || -> std::result::Result<(), String> {
        let root = BitMapBackend::new(path, (1200, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let root = root
            .titled(title, ("sans-serif", 24))
            .map_err(|e| e.to_string())?;
        let (left, right) = root.split_horizontally(600);
        for (area, (name, y_label, series)) in [left, right].iter().zip(panels) {
            panel(area, name, y_label, series)?;
        }
        root.present().map_err(|e| e.to_string())
    };
    draw().map_err(|e| EmberError::io(path, std::io::Error::other(e)))
}
