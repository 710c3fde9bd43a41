//! Progress of training: a progress bar per epoch in a terminal, one line per tenth of an epoch
//! otherwise (logs, CI, pipes), and a summary line at the end of every epoch.

use crate::report::EpochMetrics;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// What an epoch's running figures look like to [`Progress`].
pub trait Running {
    /// Mean loss so far.
    fn loss(&self) -> f64;
    /// Accuracy so far, percent.
    fn accuracy(&self) -> f64;
}

/// The progress display of one training run.
pub struct Progress {
    bar: Option<ProgressBar>,
    plain: bool,
    epochs: usize,
    epoch: usize,
    batches: usize,
    last_tenth: usize,
}

impl Progress {
    /// A display for a run of `epochs` epochs: a bar when stderr is a terminal and `plain` is
    /// not asked for.
    pub fn new(plain: bool, epochs: usize) -> Self {
        Self {
            bar: None,
            plain: plain || !std::io::stderr().is_terminal(),
            epochs,
            epoch: 0,
            batches: 0,
            last_tenth: 0,
        }
    }

    /// Starts `epoch`, of `batches` batches.
    pub fn start(&mut self, epoch: usize, batches: usize) {
        (self.epoch, self.batches, self.last_tenth) = (epoch, batches, 0);
        if !self.plain {
            let bar = ProgressBar::new(batches as u64);
            bar.set_style(
                ProgressStyle::with_template(
                    "epoch {prefix} {bar:30} {pos}/{len} batches [{elapsed} < {eta}] {msg}",
                )
                .expect("a valid template"),
            );
            bar.set_prefix(format!("{epoch}/{}", self.epochs));
            self.bar = Some(bar);
        }
    }

    /// Batch `done` (1-based) finished, with the epoch's running figures.
    pub fn batch(&mut self, done: usize, running: &impl Running) {
        let figures = format!(
            "loss {:.4}, accuracy {:.2}%",
            running.loss(),
            running.accuracy()
        );
        match &self.bar {
            Some(bar) => {
                bar.set_position(done as u64);
                bar.set_message(figures);
            }
            None => {
                let tenth = done * 10 / self.batches.max(1);
                if tenth > self.last_tenth {
                    self.last_tenth = tenth;
                    eprintln!(
                        "epoch {}/{} [{:>3}%] {figures}",
                        self.epoch,
                        self.epochs,
                        tenth * 10
                    );
                }
            }
        }
    }

    /// The epoch ended with `row`.
    pub fn end(&mut self, row: &EpochMetrics) {
        self.finish();
        eprintln!(
            "epoch {}/{} done in {:.1} s: train loss {:.4}, accuracy {:.2}% | test loss {:.4}, \
             accuracy {:.2}%",
            row.epoch,
            self.epochs,
            row.seconds.unwrap_or(f64::NAN),
            row.train_loss,
            row.train_accuracy,
            row.valid_loss,
            row.valid_accuracy
        );
    }

    /// Removes the bar, if one is shown.
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
