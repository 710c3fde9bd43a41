//! Errors of training, evaluation and the tools around them: one line each, meant for a user at
//! a terminal.

use std::path::PathBuf;

/// Everything the data loaders, training and evaluation can report to a user.
#[derive(Debug, thiserror::Error)]
pub enum EmberError {
    /// A file could not be read or written.
    #[error("cannot read {path}: {source}", path = .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file could not be written (nothing was left half-written: see `atomic`).
    #[error("cannot write {path}: {source}", path = .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// An output file that is never overwritten already exists.
    #[error("{path} already exists: choose another name; nothing was changed", path = .0.display())]
    Exists(PathBuf),
    /// Training produced a non-finite loss and `--on-nan stop` ended it.
    #[error(
        "the training loss became {loss} in epoch {epoch}, batch {batch}: training stopped (--on-nan stop); {kept}"
    )]
    NonFinite {
        /// The epoch (1-based).
        epoch: usize,
        /// The batch within the epoch (1-based).
        batch: usize,
        /// The loss value.
        loss: f64,
        /// What the run directory keeps.
        kept: String,
    },
    /// SIGINT or SIGTERM ended training between two batches.
    #[error("interrupted in epoch {epoch}: {kept}")]
    Interrupted {
        /// The epoch that was abandoned (1-based).
        epoch: usize,
        /// What the run directory keeps.
        kept: String,
    },
    /// `--time-limit` ended training before an epoch that would have ended past it.
    #[error(
        "stopped before epoch {next} of {epochs}: it would end past --time-limit {limit} s \
         ({used:.0} s used, the longest epoch took {epoch_seconds:.0} s); {kept}"
    )]
    TimeLimit {
        /// The epoch that was not started (1-based).
        next: usize,
        /// The run's epochs.
        epochs: usize,
        /// The limit, in seconds.
        limit: f64,
        /// Seconds this invocation had run.
        used: f64,
        /// The longest epoch's seconds (what the next one was expected to take).
        epoch_seconds: f64,
        /// What the run directory keeps.
        kept: String,
    },
    /// A file (dataset or run manifest) is not what it claims to be.
    #[error("malformed file {path}: {reason}", path = .path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Another process is writing the run directory ([`crate::run::lock`]).
    #[error(
        "{path} is in use by another ember run (it holds the directory's lock): wait for it to \
         end or choose another --out; nothing was changed",
        path = .0.display()
    )]
    InUse(PathBuf),
    /// The output directory already holds a run.
    #[error("{path} already holds a run: pass --resume to continue it or --overwrite to replace it", path = .0.display())]
    RunExists(PathBuf),
    /// The output directory holds files that are not an Ember run.
    #[error("{path} exists and is not an Ember run (no ember-run.json): choose another --out; nothing was changed", path = .0.display())]
    NotARun(PathBuf),
    /// `--resume` on a directory without a checkpoint.
    #[error("cannot resume {path}: {reason}", path = .path.display())]
    CannotResume {
        /// The run directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A checkpoint that does not fit the requested model, or cannot be read.
    #[error("bad checkpoint {path}: {reason}", path = .path.display())]
    BadCheckpoint {
        /// The checkpoint path.
        path: PathBuf,
        /// Why it cannot be used.
        reason: String,
    },
    /// A backend that is not available in this build or on this machine.
    #[error("backend unavailable: {0}")]
    Backend(String),
    /// The device had no memory left for a training step at this batch size (the runtime's
    /// allocation failed; see [`EmberError::device_failure`]).
    #[error(
        "the device ran out of memory in a training step at --batch-size {batch} ({reason}); \
         a smaller --batch-size may fit"
    )]
    DeviceMemory {
        /// The batch size of the run.
        batch: usize,
        /// The runtime's message, first line.
        reason: String,
    },
    /// The backend failed in a training step: a panic of Burn's or CubeCL's runtime, caught
    /// around the training loop.
    #[error("the backend failed in a training step at --batch-size {batch}: {reason}")]
    DeviceFailed {
        /// The batch size of the run.
        batch: usize,
        /// The runtime's message, first line.
        reason: String,
    },
    /// A figure that cannot be drawn.
    #[error("cannot draw the figure: {0}")]
    Plot(String),
    /// Data-parallel training could not start or lost a replica (`--devices`, `--ddp mpi`).
    #[error("data parallel: {0}")]
    Collective(String),
    /// A verdict every rank of an MPI job reached together, which rank 0 reports: the other
    /// ranks end with it unprinted ([`EmberError::is_reported_elsewhere`]).
    #[error("data parallel: {0} (reported by rank 0)")]
    Reported(String),
    /// An invalid option value.
    #[error("invalid option: {0}")]
    Invalid(String),
    /// A per-layer policy that cannot apply (bad file, unknown path, multiplier or `S:B`).
    #[error("--policy {origin}: {reason}")]
    Policy {
        /// The file or preset.
        origin: String,
        /// What is wrong, with what would be accepted.
        reason: String,
    },
    /// A multiplier or lookup-table problem.
    #[error(transparent)]
    Approx(#[from] burn_approx_mul::ApproxError),
    /// A dataset or model problem.
    #[error(transparent)]
    Models(#[from] ember_models::Error),
}

/// Result with [`EmberError`].
pub type Result<T> = std::result::Result<T, EmberError>;

impl EmberError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
    pub(crate) fn write(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Write {
            path: path.into(),
            source,
        }
    }
    /// The exit status for this error: 130 for an interruption (as a shell reports SIGINT), 75
    /// for a stop at `--time-limit` (sysexits' `EX_TEMPFAIL`: the run is whole and continues
    /// with `--resume`), 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Interrupted { .. } => 130,
            Self::TimeLimit { .. } => 75,
            _ => 1,
        }
    }
    /// Whether another process of an MPI job prints this error: a command line prints nothing
    /// for it and only ends with [`Self::exit_code`].
    pub fn is_reported_elsewhere(&self) -> bool {
        matches!(self, Self::Reported(_))
    }
    /// The error a panic caught around the training loop stands for (its message, and where it
    /// was raised): [`Self::DeviceMemory`] where its message says an allocation failed
    /// (CubeCL's `can't allocate buffer`, CUDA's `CUDA_ERROR_OUT_OF_MEMORY`),
    /// [`Self::DeviceFailed`] otherwise. Only the message's first line is kept (CubeCL appends
    /// a backtrace), without `unwrap`'s preamble, and the location beside it. A number too
    /// large for a kernel's 32-bit argument (CubeCL's `from_int`) says so.
    pub fn device_failure(batch: usize, panic: &str, location: Option<&str>) -> Self {
        const MEMORY: [&str; 5] = [
            "can't allocate buffer",
            "out of memory",
            "out-of-memory",
            "outofmemory",
            "out_of_memory",
        ];
        let lower = panic.to_lowercase();
        let reason = panic
            .trim_start_matches("called `Result::unwrap()` on an `Err` value: ")
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("no message")
            .to_string();
        let memory = MEMORY.iter().any(|m| lower.contains(m));
        let reason = match location {
            Some(at) if at.starts_with("cubecl-core-") && at.contains("numeric.rs") => format!(
                "{reason} ({at}: a size at this batch is past a kernel's 32-bit integers; a \
                 smaller --batch-size may run)"
            ),
            Some(at) => format!("{reason} ({at})"),
            None => reason,
        };
        match memory {
            true => Self::DeviceMemory { batch, reason },
            false => Self::DeviceFailed { batch, reason },
        }
    }
    pub(crate) fn malformed(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Self::Malformed {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::EmberError;

    #[test]
    fn a_runtime_panic_in_training_names_the_batch_and_says_whether_memory_ran_out() {
        let cubecl = "called `Result::unwrap()` on an `Err` value: can't allocate buffer of \
                      size: 19327352832\n   0: cubecl_runtime::memory_management::alloc";
        let e = EmberError::device_failure(50_000, cubecl, None);
        assert!(
            matches!(e, EmberError::DeviceMemory { batch: 50_000, .. }),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(text.contains("--batch-size 50000"), "{text}");
        assert!(
            text.contains("can't allocate buffer of size: 19327352832"),
            "{text}"
        );
        assert!(
            !text.contains("cubecl_runtime") && !text.contains("unwrap"),
            "{text}"
        );
        let cuda = r#"DriverError(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")"#;
        assert!(matches!(
            EmberError::device_failure(64, cuda, None),
            EmberError::DeviceMemory { batch: 64, .. }
        ));
        let launch = r#"DriverError(CUDA_ERROR_INVALID_VALUE, "invalid argument")"#;
        let e =
            EmberError::device_failure(128, launch, Some("cudarc-0.19.0/src/driver/result.rs:42"));
        assert!(
            matches!(e, EmberError::DeviceFailed { batch: 128, .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains("CUDA_ERROR_INVALID_VALUE"), "{e}");
        assert!(
            e.to_string()
                .contains("(cudarc-0.19.0/src/driver/result.rs:42)"),
            "{e}"
        );
        // a size past 32 bits panics in CubeCL's integer conversion: named as such
        let e = EmberError::device_failure(
            20_000,
            "called `Option::unwrap()` on a `None` value",
            Some("cubecl-core-0.10.0/src/frontend/element/numeric.rs:66"),
        );
        assert!(
            matches!(e, EmberError::DeviceFailed { batch: 20_000, .. }),
            "{e:?}"
        );
        assert!(
            e.to_string().contains("past a kernel's 32-bit integers"),
            "{e}"
        );
        assert!(
            EmberError::device_failure(8, "", None)
                .to_string()
                .contains("no message")
        );
    }
}
