//! What a CIFAR-10 experiment trains ([`Setup`]): the paper's scale on a GPU, a small
//! configuration on a CPU, each option given on the command line replacing its default.

use std::fmt::Write as _;

/// An experiment's defaults, `[GPU, CPU]` for each.
pub(crate) struct Defaults {
    pub(crate) model: [&'static str; 2],
    pub(crate) epochs: [usize; 2],
    pub(crate) batch: [usize; 2],
    pub(crate) lr: [f64; 2],
    pub(crate) warmup: [usize; 2],
    /// The CPU's training and test images (a GPU takes all of them).
    pub(crate) cpu_limits: [usize; 2],
}

/// One configuration of an experiment.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Setup {
    pub(crate) backend: String,
    pub(crate) model: String,
    pub(crate) epochs: usize,
    pub(crate) batch: usize,
    pub(crate) lr: f64,
    pub(crate) warmup: usize,
    pub(crate) train_limit: Option<usize>,
    pub(crate) test_limit: Option<usize>,
}

impl Setup {
    /// `d`'s configuration of `backend` (any but ndarray is a GPU), with the options given.
    pub(crate) fn new(
        d: &Defaults,
        backend: &str,
        model: Option<String>,
        epochs: Option<usize>,
        train_limit: Option<usize>,
        test_limit: Option<usize>,
    ) -> Self {
        let i = usize::from(backend == "ndarray");
        let cpu = i == 1;
        let epochs = epochs.unwrap_or(d.epochs[i]);
        Self {
            backend: backend.to_string(),
            model: model.unwrap_or_else(|| d.model[i].to_string()),
            epochs,
            batch: d.batch[i],
            lr: d.lr[i],
            // a warm-up leaves at least one epoch of the schedule
            warmup: d.warmup[i].min(epochs.saturating_sub(1)),
            train_limit: train_limit.or(cpu.then_some(d.cpu_limits[0])),
            test_limit: test_limit.or(cpu.then_some(d.cpu_limits[1])),
        }
    }

    /// The arguments every run of the configuration shares: `--model M --backend B --dataset
    /// cifar10 --data-dir DATA --batch-size N --keep-checkpoints 1` (one epoch's checkpoint is
    /// all a resume needs).
    pub(crate) fn base_args(&self, data: &str) -> Vec<String> {
        let batch = self.batch.to_string();
        [
            "--model",
            &self.model,
            "--backend",
            &self.backend,
            "--dataset",
            "cifar10",
            "--data-dir",
            data,
            "--batch-size",
            &batch,
            "--keep-checkpoints",
            "1",
        ]
        .map(str::to_string)
        .to_vec()
    }

    /// `--train-limit N --test-limit N`, those that are set.
    pub(crate) fn limit_args(&self) -> Vec<String> {
        let mut a = Vec::new();
        for (flag, limit) in [
            ("--train-limit", self.train_limit),
            ("--test-limit", self.test_limit),
        ] {
            if let Some(n) = limit {
                a.extend([flag.to_string(), n.to_string()]);
            }
        }
        a
    }

    /// The `cargo xtask reproduce` options that make this configuration, as a document quotes
    /// them.
    pub(crate) fn flags(&self) -> String {
        let mut f = format!(
            " --backend {} --model {} --epochs {}",
            self.backend, self.model, self.epochs
        );
        for pair in self.limit_args().chunks(2) {
            let _ = write!(f, " {} {}", pair[0], pair[1]);
        }
        f
    }

    /// The training and test images, as a document names them.
    pub(crate) fn images(&self) -> [String; 2] {
        let name = |limit: Option<usize>, all: &str| {
            limit.map_or(format!("all {all}"), |n| format!("the first {n}"))
        };
        [
            name(self.train_limit, "50,000"),
            name(self.test_limit, "10,000"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: Defaults = Defaults {
        model: ["big", "small"],
        epochs: [30, 3],
        batch: [128, 64],
        lr: [0.1, 0.05],
        warmup: [2, 1],
        cpu_limits: [5_000, 1_000],
    };

    #[test]
    fn a_gpu_takes_every_image_and_a_cpu_the_small_configuration() {
        let gpu = Setup::new(&D, "cuda", None, None, None, None);
        assert_eq!(
            (gpu.model.as_str(), gpu.epochs, gpu.batch, gpu.warmup),
            ("big", 30, 128, 2)
        );
        assert!(gpu.limit_args().is_empty());
        assert_eq!(gpu.flags(), " --backend cuda --model big --epochs 30");
        let cpu = Setup::new(&D, "ndarray", None, Some(1), None, Some(100));
        assert_eq!((cpu.model.as_str(), cpu.warmup), ("small", 0));
        assert_eq!(
            cpu.limit_args(),
            ["--train-limit", "5000", "--test-limit", "100"]
        );
        assert_eq!(cpu.images(), ["the first 5000", "the first 100"]);
        assert_eq!(gpu.images(), ["all 50,000", "all 10,000"]);
    }
}
