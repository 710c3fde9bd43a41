//! `ember compare RUN…`: several runs side by side — loss curves on one figure (the SparseAct
//! paper's Fig. 7 style), a heat map of test accuracy relative to the dense run over sparsity ×
//! block size (Fig. 8 style), and a Markdown table.

use crate::error::{EmberError, Result};
use crate::report::{EpochMetrics, Series, png, two_panels};
use crate::run::Manifest;
use burn_sparse_act::Pruning;
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One run read back from its directory.
#[derive(Clone, Debug)]
pub struct RunSummary {
    /// The run directory.
    pub dir: PathBuf,
    /// Its manifest.
    pub manifest: Manifest,
    /// Its per-epoch metrics.
    pub epochs: Vec<EpochMetrics>,
}

impl RunSummary {
    /// Reads a finished run (manifest with a test accuracy, metrics of every epoch). A run
    /// being extended by a resume (or whose extension was interrupted) reads with the result
    /// of the attempt that finished and the metrics of every epoch completed since.
    pub fn read(dir: &Path) -> Result<Self> {
        if !dir.is_dir() {
            return Err(EmberError::Invalid(format!(
                "{}: no such run directory",
                dir.display()
            )));
        }
        let manifest = Manifest::read(dir)?;
        if manifest.test_accuracy.is_none() {
            return Err(EmberError::Invalid(format!(
                "{} has no final test accuracy: the run did not finish",
                dir.display()
            )));
        }
        let epochs = manifest.history.clone();
        if epochs.is_empty() {
            return Err(EmberError::Invalid(format!(
                "{} has no per-epoch metrics",
                dir.display()
            )));
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            manifest,
            epochs,
        })
    }

    /// A short label: the SparseAct policy (`dense` when off), with the multiplier if not
    /// native.
    pub fn label(&self) -> String {
        let m = &self.manifest;
        let policy = if m.sparse_act.is_off() {
            "dense".to_string()
        } else {
            format!("s:b {}", m.sparse_act)
        };
        if m.multiplier == "native" {
            policy
        } else {
            format!("{policy}, {}", m.multiplier)
        }
    }

    fn accuracy(&self) -> f64 {
        self.manifest.test_accuracy.unwrap_or(f64::NAN)
    }

    fn mean_epoch(&self) -> Option<f64> {
        let s = &self.manifest.epoch_seconds;
        (!s.is_empty()).then(|| s.iter().sum::<f64>() / s.len() as f64)
    }
}

/// Test accuracy relative to dense over sparsity × block size.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    /// Sparsities, ascending (rows).
    pub sparsities: Vec<f64>,
    /// Block sizes, ascending (columns).
    pub blocks: Vec<usize>,
    /// `cells[s][b]`: accuracy minus the dense run's, percentage points (`None`: not run).
    pub cells: Vec<Vec<Option<f64>>>,
}

/// Where a run goes on the accuracy grid.
#[derive(Clone, Debug, PartialEq)]
pub enum Placement {
    /// The dense baseline (`--sparse-act` off).
    Dense,
    /// The cell of its uniform policy `S:B`.
    Cell(Pruning),
    /// Not on the grid, for this reason (listed in `summary.md`).
    Off(String),
}

/// The comparison of a set of runs.
#[derive(Clone, Debug)]
pub struct Comparison {
    /// The runs, in the order given.
    pub runs: Vec<RunSummary>,
}

impl Comparison {
    /// Reads every run; at least one is needed.
    pub fn read(dirs: &[PathBuf]) -> Result<Self> {
        if dirs.is_empty() {
            return Err(EmberError::Invalid(
                "give at least one run directory".into(),
            ));
        }
        let runs = dirs
            .iter()
            .map(|d| RunSummary::read(d))
            .collect::<Result<Vec<_>>>()?;
        let dense: Vec<String> = runs
            .iter()
            .filter(|r| r.manifest.sparse_act.is_off())
            .map(|r| r.dir.display().to_string())
            .collect();
        if dense.len() > 1 {
            return Err(EmberError::Invalid(format!(
                "at most one dense baseline (a run with --sparse-act off) can be compared, \
                 got {}: {}",
                dense.len(),
                dense.join(", ")
            )));
        }
        Ok(Self { runs })
    }

    /// The dense (`--sparse-act` off) run's test accuracy, if there is exactly one such run.
    pub fn dense_accuracy(&self) -> Option<f64> {
        let mut dense = self.runs.iter().filter(|r| r.manifest.sparse_act.is_off());
        match (dense.next(), dense.next()) {
            (Some(r), None) => Some(r.accuracy()),
            _ => None,
        }
    }

    /// Where each run goes on the accuracy grid, in the order of [`Comparison::runs`].
    pub fn placements(&self) -> Vec<Placement> {
        let mut placed: Vec<(Pruning, &Path)> = Vec::new();
        self.runs
            .iter()
            .map(|r| {
                let policy = &r.manifest.sparse_act;
                if policy.is_off() {
                    return Placement::Dense;
                }
                match policy.as_uniform() {
                    Err(why) => Placement::Off(format!("policy `{policy}`: {why}")),
                    Ok(p) => match placed.iter().find(|(q, _)| *q == p) {
                        Some((_, first)) => Placement::Off(format!(
                            "S:B {p} is already on the grid from `{}`",
                            first.display()
                        )),
                        None => {
                            placed.push((p, &r.dir));
                            Placement::Cell(p)
                        }
                    },
                }
            })
            .collect()
    }

    /// Accuracy relative to dense on the grid of uniform `S:B` policies (needs one dense run).
    pub fn grid(&self) -> Option<Grid> {
        let dense = self.dense_accuracy()?;
        let cells: Vec<(Pruning, f64)> = self
            .runs
            .iter()
            .zip(self.placements())
            .filter_map(|(r, place)| match place {
                Placement::Cell(p) => Some((p, r.accuracy() - dense)),
                _ => None,
            })
            .collect();
        if cells.is_empty() {
            return None;
        }
        let mut sparsities: Vec<f64> = cells.iter().map(|c| c.0.sparsity).collect();
        sparsities.sort_by(f64::total_cmp);
        sparsities.dedup();
        let mut blocks: Vec<usize> = cells.iter().map(|c| c.0.block).collect();
        blocks.sort_unstable();
        blocks.dedup();
        let cells = sparsities
            .iter()
            .map(|&s| {
                blocks
                    .iter()
                    .map(|&b| {
                        cells
                            .iter()
                            .find(|c| c.0.sparsity == s && c.0.block == b)
                            .map(|c| c.1)
                    })
                    .collect()
            })
            .collect();
        Some(Grid {
            sparsities,
            blocks,
            cells,
        })
    }

    /// The runs as a Markdown table.
    pub fn markdown(&self) -> String {
        let dense = self.dense_accuracy();
        let mut md = String::from(
            "| run | model | dataset | multiplier | sparse-act | epochs | test accuracy | Δ vs dense (pp) | mean epoch (s) |\n|---|---|---|---|---|---:|---:|---:|---:|\n",
        );
        for r in &self.runs {
            let m = &r.manifest;
            let delta = dense.map_or("–".into(), |d| format!("{:+.2}", r.accuracy() - d));
            let secs = r.mean_epoch().map_or("–".into(), |s| format!("{s:.1}"));
            writeln!(
                md,
                "| `{}` | {} | {} | {} | {} | {} | {:.2} % | {delta} | {secs} |",
                r.dir.file_name().unwrap_or_default().to_string_lossy(),
                m.model,
                m.dataset,
                m.multiplier,
                m.sparse_act,
                m.completed_epochs,
                r.accuracy()
            )
            .expect("write to string");
        }
        let dense_runs = self
            .runs
            .iter()
            .filter(|r| r.manifest.sparse_act.is_off())
            .count();
        if dense_runs != 1 {
            writeln!(
                md,
                "\nNo accuracy heat map: it needs exactly one dense (`--sparse-act` off) run, \
                 found {dense_runs}."
            )
            .expect("write to string");
        }
        let off: Vec<(&RunSummary, String)> = self
            .runs
            .iter()
            .zip(self.placements())
            .filter_map(|(r, place)| match place {
                Placement::Off(why) => Some((r, why)),
                _ => None,
            })
            .collect();
        if !off.is_empty() {
            md.push_str("\nNot on the accuracy heat map (listed above):\n\n");
            for (r, why) in off {
                writeln!(md, "- `{}`: {why}", r.dir.display()).expect("write to string");
            }
        }
        md
    }

    /// Writes `loss.png`, `accuracy-heatmap.png` (when there is a dense run and uniform
    /// policies) and `summary.md` into `out`, which must not hold any of them. Returns the
    /// files written.
    pub fn write(&self, out: &Path, title: &str) -> Result<Vec<PathBuf>> {
        // a run directory is Ember's: the figures go next to the runs, not into one
        let resolved = resolve(out);
        if let Some(run) = self
            .runs
            .iter()
            .find(|r| resolved.starts_with(resolve(&r.dir)))
        {
            return Err(EmberError::Invalid(format!(
                "--out {} is inside the compared run {}: choose a directory outside the runs; \
                 nothing was written",
                out.display(),
                run.dir.display()
            )));
        }
        let files = ["loss.png", "accuracy-heatmap.png", "summary.md"].map(|f| out.join(f));
        if let Some(f) = files.iter().find(|f| f.exists()) {
            return Err(EmberError::Invalid(format!(
                "{} exists: ember never overwrites, choose another --out",
                f.display()
            )));
        }
        let created = !out.exists();
        std::fs::create_dir_all(out).map_err(|e| EmberError::write(out, e))?;
        let mut written = Vec::new();
        let result = self.write_files(&files, title, &mut written);
        if result.is_err() {
            // Leave nothing half-done: the files this call wrote, and the directory it made.
            for f in &written {
                let _ = std::fs::remove_file(f);
            }
            if created {
                let _ = std::fs::remove_dir(out);
            }
        }
        result.map(|()| written)
    }

    fn write_files(
        &self,
        files: &[PathBuf; 3],
        title: &str,
        written: &mut Vec<PathBuf>,
    ) -> Result<()> {
        self.plot_losses(&files[0], title)?;
        written.push(files[0].clone());
        if let Some(grid) = self.grid() {
            plot_heatmap(&files[1], title, &grid)?;
            written.push(files[1].clone());
        }
        crate::atomic::write_new(&files[2], self.markdown().as_bytes())?;
        written.push(files[2].clone());
        Ok(())
    }

    fn plot_losses(&self, path: &Path, title: &str) -> Result<()> {
        let labels: Vec<String> = self.runs.iter().map(RunSummary::label).collect();
        let series = |f: fn(&EpochMetrics) -> f64| -> Vec<Series<'_>> {
            self.runs
                .iter()
                .zip(&labels)
                .enumerate()
                .map(|(i, (r, l))| {
                    (
                        l.as_str(),
                        palette(i),
                        r.epochs.iter().map(|e| (e.epoch as f64, f(e))).collect(),
                    )
                })
                .collect()
        };
        two_panels(
            path,
            title,
            [
                ("training loss", "cross-entropy", &series(|e| e.train_loss)),
                ("test loss", "cross-entropy", &series(|e| e.valid_loss)),
            ],
        )
    }
}

/// `path` made absolute with its links resolved, as far as it exists (the rest appended as
/// given): where it is, whether or not it exists yet.
fn resolve(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = at.canonicalize() {
            return missing.iter().rev().fold(real, |p, part| p.join(part));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_os_string());
                at = if parent.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    parent
                };
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Distinct line colours (Tableau 10).
fn palette(i: usize) -> RGBColor {
    const C: [(u8, u8, u8); 10] = [
        (31, 119, 180),
        (255, 127, 14),
        (44, 160, 44),
        (214, 39, 40),
        (148, 103, 189),
        (140, 86, 75),
        (227, 119, 194),
        (127, 127, 127),
        (188, 189, 34),
        (23, 190, 207),
    ];
    let (r, g, b) = C[i % C.len()];
    RGBColor(r, g, b)
}

/// A diverging colour for `delta` percentage points: red below zero, white at zero, green
/// above, saturating at ±`span`.
pub fn diverging(delta: f64, span: f64) -> RGBColor {
    let t = (delta / span).clamp(-1.0, 1.0);
    let mix = |a: u8, b: u8, t: f64| (a as f64 + (b as f64 - a as f64) * t).round() as u8;
    if t < 0.0 {
        RGBColor(mix(255, 214, -t), mix(255, 39, -t), mix(255, 40, -t))
    } else {
        RGBColor(mix(255, 44, t), mix(255, 160, t), mix(255, 44, t))
    }
}

/// Draws accuracy relative to dense over sparsity (rows) × block size (columns).
pub fn plot_heatmap(path: &Path, title: &str, grid: &Grid) -> Result<()> {
    let (sparsities, blocks, grid) = (&grid.sparsities, &grid.blocks, &grid.cells);
    let span = grid
        .iter()
        .flatten()
        .flatten()
        .fold(1.0f64, |m, v| m.max(v.abs()));
    let (w, h) = (
        160 + 140 * blocks.len() as u32,
        140 + 90 * sparsities.len() as u32,
    );
    png(path, (w.max(520), h), false, |root| {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("{title}: test accuracy − dense (pp)"),
                ("sans-serif", 20),
            )
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(130)
            .build_cartesian_2d(0.0..blocks.len() as f64, 0.0..sparsities.len() as f64)
            .map_err(|e| e.to_string())?;
        // Axis titles only; the tick labels go at the cell centres, drawn below.
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(0)
            .y_labels(0)
            .x_desc("block size")
            .y_desc("sparsity")
            .label_style(("sans-serif", 15))
            .draw()
            .map_err(|e| e.to_string())?;
        for (si, row) in grid.iter().enumerate() {
            for (bi, cell) in row.iter().enumerate() {
                let (x, y) = (bi as f64, si as f64);
                let color = cell.map_or(RGBColor(220, 220, 220), |d| diverging(d, span));
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x, y), (x + 1.0, y + 1.0)],
                        color.filled(),
                    )))
                    .map_err(|e| e.to_string())?;
            }
        }
        let font = ("sans-serif", 18).into_font().color(&BLACK);
        let label = |text: String, at: (f64, f64), dx: i32, dy: i32| {
            let (x, y) = chart.backend_coord(&at);
            root.draw(&Text::new(text, (x + dx, y + dy), font.clone()))
                .map_err(|e| e.to_string())
        };
        for (bi, b) in blocks.iter().enumerate() {
            label(format!("b = {b}"), (bi as f64 + 0.5, 0.0), -28, 8)?;
        }
        for (si, s) in sparsities.iter().enumerate() {
            label(
                format!("s = {:.0} %", s * 100.0),
                (0.0, si as f64 + 0.5),
                -100,
                -9,
            )?;
        }
        for (si, row) in grid.iter().enumerate() {
            for (bi, cell) in row.iter().enumerate() {
                let text = cell.map_or("–".to_string(), |d| format!("{d:+.2}"));
                label(text, (bi as f64 + 0.5, si as f64 + 0.5), -26, -9)?;
            }
        }
        root.present().map_err(|e| e.to_string())
    })
}
