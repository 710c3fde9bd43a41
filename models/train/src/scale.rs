//! Data parallelism: `--devices N` replicas in one process on Burn's own collective operations
//! (`burn-collective`, reached as `burn::collective`), and `--ddp mpi` across the processes of
//! an MPI job, one device each (docs/scaling.md).
//!
//! Every replica holds the whole model, trains on its share of each batch and averages its
//! gradients with the others' before its own optimizer step, so the replicas stay equal
//! without ever sending weights. In one process the average is Burn's all-reduce
//! (`GradientsParams::all_reduce`); across processes it is one MPI all-reduce of every
//! gradient of the step as one contiguous host buffer, parameters in the module's order
//! (behind the `mpi` feature). Ember adds what a long run needs around it: shards that
//! keep the global batch order of a single-device run, one exchange per step of the batch's loss
//! and of the stop decision (a NaN or SIGINT on one replica stops all at the same batch), a check
//! at the start that every replica trains the same run from the same weights, an optional
//! bit-for-bit check of the replicas after every step (`--verify-replicas`), and a watchdog that
//! ends the run with a clear error when a peer does not answer (a lost process must not leave the
//! others hanging).

use crate::error::{EmberError, Result};
use burn::collective::{AllReduceStrategy, CollectiveConfig};
use burn::module::Module;
use burn::prelude::*;
use std::time::Duration;

#[cfg(feature = "mpi")]
mod flat;
#[cfg(feature = "mpi")]
mod mpi_job;
mod replica;

pub(crate) use replica::Replica;

/// How many replicas train a run, and where (`--devices`, `--ddp mpi`).
#[derive(Clone, Debug, PartialEq)]
pub struct Scale {
    /// Replicas in this process, one per device of the backend (`--devices`, at least 1; 1
    /// under `--ddp mpi`).
    pub devices: usize,
    /// Train across the processes of an MPI job (`--ddp mpi`, under `mpirun` or `srun`).
    pub mpi: bool,
    /// This process's place in the MPI job: filled in by [`connect`].
    pub job: Option<Job>,
    /// After every step, check that all replicas hold bit-identical parameters
    /// (`--verify-replicas`; one read of the parameters per step).
    pub verify: bool,
    /// How long a replica waits in a collective operation before the run is ended as lost
    /// (`--collective-timeout`).
    pub timeout: Duration,
}

impl Default for Scale {
    fn default() -> Self {
        Self {
            devices: 1,
            mpi: false,
            job: None,
            verify: false,
            timeout: Duration::from_secs(300),
        }
    }
}

/// A process's place in an MPI job (`--ddp mpi`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Job {
    /// This process's rank (MPI_COMM_WORLD); rank 0 writes the run directory.
    pub rank: usize,
    /// Processes in the job.
    pub world: usize,
    /// Rank among the processes on this machine: the CUDA device this process trains on.
    pub local_rank: usize,
}

/// The error for `--ddp mpi` in a build without MPI.
pub const NO_MPI: &str = "--ddp mpi needs an ember built with the `mpi` feature (`cargo build \
    --release --features mpi`, with Debian's openmpi-bin libopenmpi-dev libclang-dev installed; \
    docs/scaling.md)";

impl Scale {
    /// Replicas of the run in all its processes.
    pub fn replicas(&self) -> usize {
        self.devices * self.job.map_or(1, |j| j.world)
    }

    /// Whether more than one replica trains (then gradients are exchanged).
    pub fn is_parallel(&self) -> bool {
        self.replicas() > 1
    }

    /// Whether this process writes the run directory (rank 0, or no MPI job).
    pub fn writes(&self) -> bool {
        self.job.is_none_or(|j| j.rank == 0)
    }

    /// Checks the options alone, before any device or network is touched: one error naming
    /// the option.
    pub fn validate(&self) -> Result<()> {
        if self.devices == 0 {
            return Err(EmberError::Invalid("--devices must be at least 1".into()));
        }
        if self.timeout.is_zero() {
            return Err(EmberError::Invalid(
                "--collective-timeout must be at least 1 second".into(),
            ));
        }
        if self.mpi && !cfg!(feature = "mpi") {
            return Err(EmberError::Invalid(NO_MPI.into()));
        }
        if self.mpi && self.devices > 1 {
            return Err(EmberError::Invalid(format!(
                "--devices {} with --ddp mpi: an MPI job trains one device per process; start \
                 {} times as many ranks instead (mpirun -np N)",
                self.devices, self.devices
            )));
        }
        Ok(())
    }

    /// The global index of local replica `local`: processes in rank order, devices in order.
    fn peer(&self, local: usize) -> usize {
        self.job.map_or(0, |j| j.rank) * self.devices + local
    }

    /// Burn's collective configuration of this process (its devices).
    fn config(&self) -> CollectiveConfig {
        CollectiveConfig::default()
            .with_num_devices(self.devices)
            .with_local_all_reduce_strategy(AllReduceStrategy::Tree(2))
    }
}

/// Joins the MPI job of a `--ddp mpi` run (nothing otherwise), before the run directory is
/// touched: fills in [`Scale::job`].
pub fn connect(scale: &mut Scale) -> Result<()> {
    if !scale.mpi {
        return Ok(());
    }
    #[cfg(feature = "mpi")]
    {
        scale.job = Some(mpi_job::join()?);
        Ok(())
    }
    #[cfg(not(feature = "mpi"))]
    Err(EmberError::Invalid(NO_MPI.into()))
}

/// Waits for every process of the MPI job (nothing outside one).
pub(crate) fn barrier(scale: &Scale) {
    #[cfg(feature = "mpi")]
    if scale.job.is_some() {
        mpi_job::barrier();
    }
    #[cfg(not(feature = "mpi"))]
    let _ = scale;
}

/// Ends this process's part in an MPI job with `code`: MPI is finalized after a success, and the
/// whole job is aborted after a failure (the others may wait in a collective operation that this
/// process will never enter). Nothing outside an MPI job.
pub fn end_process(code: u8) {
    #[cfg(feature = "mpi")]
    mpi_job::end(code);
    #[cfg(not(feature = "mpi"))]
    let _ = code;
}

/// Replica `index`'s share of `order` among `count` replicas: the order padded (from its start)
/// to a multiple of `count`, then every `count`-th item from `index`. All replicas get the same
/// number of items, and step k of all of them together is items k·count.. of the padded order.
pub fn shard(order: Vec<usize>, index: usize, count: usize) -> Vec<usize> {
    if count == 1 || order.is_empty() {
        return order;
    }
    let padded = order.len().div_ceil(count) * count;
    (index..padded)
        .step_by(count)
        .map(|i| order[i % order.len()])
        .collect()
}

/// Brings every `RunningState` of `model` (batch norm's statistics) up to date. Burn keeps a
/// forward pass's update of such a state aside, per thread, and folds it in at the next update
/// or when a record is taken, so a visitor reads the value of one step before. Taking a record
/// of a clone (which shares the states) folds it in now.
fn sync_running_state<B: Backend, M: Module<B>>(model: &M) {
    let _ = model.clone().into_record();
}

/// A 64-bit FNV-1a digest of a model's parameters and running statistics: every one's module
/// path, shape and value bits, in the module's order.
pub fn param_digest<B: Backend, M: Module<B>>(model: &M) -> u64 {
    sync_running_state(model);
    let mut h = Fnv::default();
    for (path, (shape, values)) in cubecl_kernels::decorator::module::params(model) {
        h.write(path.as_bytes());
        for d in shape {
            h.write(&(d as u64).to_le_bytes());
        }
        for v in values {
            h.write(&v.to_bits().to_le_bytes());
        }
    }
    h.0
}

/// A digest of `text` (the settings every process of a run must share).
pub(crate) fn text_digest(text: &str) -> u64 {
    let mut h = Fnv::default();
    h.write(text.as_bytes());
    h.0
}

struct Fnv(u64);
impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}
impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
}
