//! Progress display for training: burn-train's TUI in a terminal, one line per tenth of an
//! epoch otherwise (logs, CI, pipes), with the wall time of every epoch recorded.

use burn::train::metric::{MetricDefinition, MetricId};
use burn::train::renderer::{
    EvaluationName, EvaluationProgress, MetricState, MetricsRenderer, MetricsRendererEvaluation,
    MetricsRendererTraining, ProgressType, TrainingProgress,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Wall seconds of each epoch, shared with the trainer.
pub type EpochClock = Arc<Mutex<Vec<f64>>>;

/// Wraps an optional inner renderer (the TUI); without one, prints plain progress lines.
pub struct EpochRenderer {
    inner: Option<Box<dyn MetricsRenderer>>,
    names: HashMap<MetricId, String>,
    last: BTreeMap<String, String>,
    clock: EpochClock,
    epoch_start: Instant,
    last_tenth: Option<(usize, usize)>,
}

impl EpochRenderer {
    /// A renderer that records epoch times into `clock`, drawing through `inner` if given.
    pub fn new(inner: Option<Box<dyn MetricsRenderer>>, clock: EpochClock) -> Self {
        Self {
            inner,
            names: HashMap::new(),
            last: BTreeMap::new(),
            clock,
            epoch_start: Instant::now(),
            last_tenth: None,
        }
    }

    fn store(&mut self, split: &str, state: &MetricState) {
        let entry = match state {
            MetricState::Generic(e) | MetricState::Numeric(e, _) => e,
        };
        let name = self
            .names
            .get(&entry.metric_id)
            .cloned()
            .unwrap_or_default();
        self.last.insert(
            format!("{split} {name}"),
            entry.serialized_entry.formatted.clone(),
        );
    }

    fn summary(&self, split: &str) -> String {
        self.last
            .iter()
            .filter(|(k, _)| k.starts_with(split))
            .map(|(k, v)| format!("{}: {}", &k[split.len() + 1..], v))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl MetricsRendererTraining for EpochRenderer {
    fn update_train(&mut self, state: MetricState) {
        self.store("train", &state);
        if let Some(r) = &mut self.inner {
            r.update_train(state);
        }
    }

    fn update_valid(&mut self, state: MetricState) {
        self.store("valid", &state);
        if let Some(r) = &mut self.inner {
            r.update_valid(state);
        }
    }

    fn render_train(&mut self, item: TrainingProgress, indicators: Vec<ProgressType>) {
        if self.inner.is_none()
            && let Some(p) = &item.progress
            && p.items_total > 0
        {
            let tenth = p.items_processed * 10 / p.items_total;
            let key = (item.global_progress.items_processed, tenth);
            if self.last_tenth != Some(key) && tenth > 0 {
                self.last_tenth = Some(key);
                eprintln!(
                    "epoch {}/{} [{:>3}%] {}",
                    item.global_progress.items_processed,
                    item.global_progress.items_total,
                    tenth * 10,
                    self.summary("train")
                );
            }
        }
        if let Some(r) = &mut self.inner {
            r.render_train(item, indicators);
        }
    }

    fn render_valid(&mut self, item: TrainingProgress, indicators: Vec<ProgressType>) {
        let end_of_epoch = item
            .progress
            .as_ref()
            .is_some_and(|p| p.items_processed >= p.items_total);
        if end_of_epoch {
            let secs = self.epoch_start.elapsed().as_secs_f64();
            self.clock
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(secs);
            self.epoch_start = Instant::now();
            if self.inner.is_none() {
                eprintln!(
                    "epoch {}/{} done in {secs:.1} s: train {} | test {}",
                    item.global_progress.items_processed,
                    item.global_progress.items_total,
                    self.summary("train"),
                    self.summary("valid")
                );
            }
        }
        if let Some(r) = &mut self.inner {
            r.render_valid(item, indicators);
        }
    }

    fn on_train_end(
        &mut self,
        summary: Option<burn::train::LearnerSummary>,
    ) -> Result<(), Box<dyn core::error::Error>> {
        match &mut self.inner {
            Some(r) => r.on_train_end(summary),
            None => Ok(()),
        }
    }
}

impl MetricsRendererEvaluation for EpochRenderer {
    fn update_test(&mut self, name: EvaluationName, state: MetricState) {
        if let Some(r) = &mut self.inner {
            r.update_test(name, state);
        }
    }

    fn render_test(&mut self, item: EvaluationProgress, indicators: Vec<ProgressType>) {
        if let Some(r) = &mut self.inner {
            r.render_test(item, indicators);
        }
    }
}

impl MetricsRenderer for EpochRenderer {
    fn manual_close(&mut self) {
        if let Some(r) = &mut self.inner {
            r.manual_close();
        }
    }

    fn register_metric(&mut self, definition: MetricDefinition) {
        self.names
            .insert(definition.metric_id.clone(), definition.name.clone());
        if let Some(r) = &mut self.inner {
            r.register_metric(definition);
        }
    }
}

/// burn-train 0.21's file metric logger, with the epoch numbers of a resumed run corrected.
///
/// burn-train's event store numbers the first epoch after a resume `1` (it learns the real
/// number only from that epoch's end-of-epoch summary), so on `--resume` the first new epoch's
/// logs would overwrite `epoch-1`'s. Epochs the store reports at or below the checkpoint's are
/// the first resumed epoch, `start + 1`.
pub struct ResumedFileLogger {
    inner: burn::train::logger::FileMetricLogger,
    start: usize,
}

impl ResumedFileLogger {
    /// Logs into `dir` for a run resumed after epoch `start` (0: a new run).
    pub fn new(dir: &std::path::Path, start: usize) -> Self {
        Self {
            inner: burn::train::logger::FileMetricLogger::new(dir),
            start,
        }
    }

    fn epoch(&self, epoch: usize) -> usize {
        if epoch <= self.start {
            self.start + 1
        } else {
            epoch
        }
    }
}

impl burn::train::logger::MetricLogger for ResumedFileLogger {
    fn log(
        &mut self,
        update: burn::train::metric::store::MetricsUpdate,
        epoch: usize,
        split: &burn::train::metric::store::Split,
    ) {
        let epoch = self.epoch(epoch);
        self.inner.log(update, epoch, split)
    }

    fn read_numeric(
        &mut self,
        name: &str,
        epoch: usize,
        split: &burn::train::metric::store::Split,
    ) -> Result<Vec<burn::train::metric::NumericEntry>, String> {
        self.inner.read_numeric(name, epoch, split)
    }

    fn log_metric_definition(&mut self, definition: MetricDefinition) {
        self.inner.log_metric_definition(definition)
    }

    fn log_epoch_summary(&mut self, summary: burn::train::metric::store::EpochSummary) {
        self.inner.log_epoch_summary(summary)
    }
}
