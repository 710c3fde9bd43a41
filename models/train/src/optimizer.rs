//! The optimizer settings of a run ([`OptimizerSettings`]: Adam or SGD with momentum, L2 weight
//! decay) and its learning-rate schedule (constant, or cosine after a linear warm-up), applied
//! per step; what a run's manifest records of them. The optimizer itself is in
//! [`crate::train`].
//!
//! The learning rate of a step is a pure function of the epoch, the batch and the run's length,
//! so a resumed run steps at exactly the rates an uninterrupted one would.

use crate::error::{EmberError, Result};
use serde::{Deserialize, Serialize};

/// Which optimizer a run steps with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    /// Adam (β = 0.9, 0.999; ε = 1e-5, Burn's defaults).
    #[default]
    Adam,
    /// Stochastic gradient descent with heavy-ball momentum (no dampening, PyTorch's form).
    Sgd,
}

ember_models::choices!(OptimizerKind {
    Adam => "adam",
    Sgd => "sgd",
});

/// How the learning rate moves over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    /// `--lr` at every step (after the warm-up).
    #[default]
    Constant,
    /// Cosine annealing from `--lr` to 0 over the steps after the warm-up, updated every step.
    Cosine,
}

ember_models::choices!(Schedule {
    Constant => "constant",
    Cosine => "cosine",
});

/// The optimizer of a run and its learning rate's schedule (`--optimizer`, `--momentum`,
/// `--weight-decay`, `--schedule`, `--warmup-epochs`). The default is what every run did
/// before these options: Adam at a constant rate, no weight decay.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct OptimizerSettings {
    /// Adam or SGD.
    pub kind: OptimizerKind,
    /// SGD's momentum, in `[0, 1)` (Adam ignores it).
    pub momentum: f64,
    /// The L2 penalty added to every parameter's gradient (`penalty · w`), 0 for none.
    pub weight_decay: f64,
    /// The learning rate's schedule.
    pub schedule: Schedule,
    /// Epochs over which the rate rises linearly from `lr / steps` to `lr`, step by step.
    pub warmup_epochs: usize,
}

impl Default for OptimizerSettings {
    fn default() -> Self {
        Self {
            kind: OptimizerKind::Adam,
            momentum: 0.9,
            weight_decay: 0.0,
            schedule: Schedule::Constant,
            warmup_epochs: 0,
        }
    }
}

impl std::fmt::Display for OptimizerSettings {
    /// `adam`, `sgd (momentum 0.9), weight decay 0.0005, cosine after 2 warm-up epochs`, …
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.kind)?;
        if self.kind == OptimizerKind::Sgd {
            write!(f, " (momentum {})", self.momentum)?;
        }
        if self.weight_decay > 0.0 {
            write!(f, ", weight decay {}", self.weight_decay)?;
        }
        if self.schedule != Schedule::Constant || self.warmup_epochs > 0 {
            write!(f, ", {}", self.schedule)?;
        }
        match self.warmup_epochs {
            0 => Ok(()),
            1 => write!(f, " after 1 warm-up epoch"),
            n => write!(f, " after {n} warm-up epochs"),
        }
    }
}

impl OptimizerSettings {
    /// Refuses settings that cannot train: a momentum outside `[0, 1)`, a negative or
    /// non-finite weight decay, a warm-up that leaves no epoch of the schedule.
    pub fn validate(&self, epochs: usize) -> Result<()> {
        if !(0.0..1.0).contains(&self.momentum) {
            return Err(EmberError::Invalid(format!(
                "--momentum must be in [0, 1), got {}",
                self.momentum
            )));
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return Err(EmberError::Invalid(format!(
                "--weight-decay must be a number ≥ 0, got {}",
                self.weight_decay
            )));
        }
        if self.warmup_epochs >= epochs.max(1) {
            return Err(EmberError::Invalid(format!(
                "--warmup-epochs {} leaves none of the {epochs} epoch{} to train at the \
                 schedule's rate: give fewer warm-up epochs or more --epochs",
                self.warmup_epochs,
                if epochs == 1 { "" } else { "s" }
            )));
        }
        Ok(())
    }

    /// The learning rate of batch `batch` (0-based) of epoch `epoch` (1-based), of `batches`
    /// a epoch over `epochs` epochs, at base rate `lr`. The warm-up rises linearly to `lr` at its
    /// last step; the cosine falls from `lr` at the first step after it towards 0 (its last
    /// step is `lr · (1 − cos(π / n)) / 2` for `n` steps, never 0).
    pub fn lr_at(&self, lr: f64, epoch: usize, batch: usize, batches: usize, epochs: usize) -> f64 {
        let step = (epoch.saturating_sub(1) * batches + batch) as f64;
        let warmup = (self.warmup_epochs * batches) as f64;
        if step < warmup {
            return lr * (step + 1.0) / warmup;
        }
        match self.schedule {
            Schedule::Constant => lr,
            Schedule::Cosine => {
                let total = (epochs * batches) as f64 - warmup;
                let done = (step - warmup) / total.max(1.0);
                lr * 0.5 * (1.0 + (std::f64::consts::PI * done).cos())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(schedule: Schedule, warmup_epochs: usize) -> OptimizerSettings {
        OptimizerSettings {
            schedule,
            warmup_epochs,
            ..OptimizerSettings::default()
        }
    }

    #[test]
    fn the_constant_schedule_is_the_rate_after_its_linear_warmup() {
        let s = settings(Schedule::Constant, 0);
        assert_eq!(s.lr_at(0.1, 1, 0, 10, 3), 0.1);
        assert_eq!(s.lr_at(0.1, 3, 9, 10, 3), 0.1);
        let s = settings(Schedule::Constant, 1);
        // 4 steps of warm-up: 1/4, 2/4, 3/4, 4/4 of the rate, then the rate
        let rates: Vec<f64> = (0..4).map(|b| s.lr_at(1.0, 1, b, 4, 3)).collect();
        assert_eq!(rates, [0.25, 0.5, 0.75, 1.0]);
        assert_eq!(s.lr_at(1.0, 2, 0, 4, 3), 1.0);
    }

    #[test]
    fn the_cosine_falls_from_the_rate_towards_zero_after_the_warmup() {
        let s = settings(Schedule::Cosine, 1);
        let (batches, epochs) = (5, 3);
        let rates: Vec<f64> = (1..=epochs)
            .flat_map(|e| (0..batches).map(move |b| (e, b)))
            .map(|(e, b)| s.lr_at(2.0, e, b, batches, epochs))
            .collect();
        assert_eq!(rates[4], 2.0, "the warm-up's last step is the rate");
        assert_eq!(rates[5], 2.0, "the cosine's first step is the rate");
        // halfway through the 10 cosine steps: half the rate
        assert!((rates[10] - 1.0).abs() < 1e-12, "{}", rates[10]);
        for w in rates[5..].windows(2) {
            assert!(w[1] < w[0], "falls at every step: {rates:?}");
        }
        let last = rates[14];
        let expected = 2.0 * 0.5 * (1.0 + (std::f64::consts::PI * 9.0 / 10.0).cos());
        assert!((last - expected).abs() < 1e-12 && last > 0.0, "{last}");
    }

    #[test]
    fn settings_that_cannot_train_are_refused_with_the_flag_named() {
        let ok = OptimizerSettings::default();
        ok.validate(1).unwrap();
        for (bad, flag) in [
            (
                OptimizerSettings {
                    momentum: 1.0,
                    ..ok
                },
                "--momentum",
            ),
            (
                OptimizerSettings {
                    momentum: -0.1,
                    ..ok
                },
                "--momentum",
            ),
            (
                OptimizerSettings {
                    weight_decay: -1e-4,
                    ..ok
                },
                "--weight-decay",
            ),
            (
                OptimizerSettings {
                    weight_decay: f64::NAN,
                    ..ok
                },
                "--weight-decay",
            ),
            (
                OptimizerSettings {
                    warmup_epochs: 3,
                    ..ok
                },
                "--warmup-epochs",
            ),
        ] {
            let err = bad.validate(3).unwrap_err().to_string();
            assert!(err.contains(flag), "{bad:?}: {err}");
        }
    }

    #[test]
    fn the_settings_read_as_the_flags_give_them() {
        assert_eq!(OptimizerSettings::default().to_string(), "adam");
        let s = OptimizerSettings {
            kind: OptimizerKind::Sgd,
            weight_decay: 5e-4,
            schedule: Schedule::Cosine,
            warmup_epochs: 2,
            ..OptimizerSettings::default()
        };
        assert_eq!(
            s.to_string(),
            "sgd (momentum 0.9), weight decay 0.0005, cosine after 2 warm-up epochs"
        );
    }
}
