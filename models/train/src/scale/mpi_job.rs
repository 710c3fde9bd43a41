//! The MPI link of a `--ddp mpi` run (the `mpi` feature): rsmpi over the system's MPI (Open MPI
//! or MPICH), initialised once per process with `MPI_THREAD_MULTIPLE` so that the watchdog
//! thread can abort the job while the training thread waits in a collective operation.
//!
//! Every operation here is on `MPI_COMM_WORLD` and is entered by every rank in the same order:
//! the training loop of every rank makes the same calls.

use crate::error::{EmberError, Result};
use mpi::Threading;
use mpi::collective::{CommunicatorCollectives, SystemOperation};
use mpi::environment::Universe;
use mpi::topology::{Communicator, SimpleCommunicator};
use std::sync::Mutex;

use super::Job;

/// The initialised MPI environment (finalised by [`end`]).
static UNIVERSE: Mutex<Option<Universe>> = Mutex::new(None);

/// Initialises MPI and returns this process's place in the job.
pub(crate) fn join() -> Result<Job> {
    let mut universe = UNIVERSE.lock().unwrap_or_else(|e| e.into_inner());
    if universe.is_none() {
        let (u, threading) =
            mpi::initialize_with_threading(Threading::Multiple).ok_or_else(|| {
                EmberError::Collective("MPI was initialised before --ddp mpi joined it".into())
            })?;
        if threading != Threading::Multiple {
            // the watchdog's abort from its own thread is what a lower level would not allow
            eprintln!(
                "warning: --ddp mpi: this MPI library gives threading level {threading:?}, not \
                 Multiple: a --collective-timeout abort may not end the job"
            );
        }
        *universe = Some(u);
    }
    let world = SimpleCommunicator::world();
    let local = world.split_shared(world.rank());
    Ok(Job {
        rank: world.rank() as usize,
        world: world.size() as usize,
        local_rank: local.rank() as usize,
    })
}

/// The element-wise sum of `values` over all ranks.
pub(crate) fn sum_f32(values: &[f32]) -> Vec<f32> {
    let mut out = vec![0f32; values.len()];
    SimpleCommunicator::world().all_reduce_into(values, &mut out[..], SystemOperation::sum());
    out
}

/// Every rank's `value`, by rank.
pub(crate) fn gather_u64(value: u64) -> Vec<u64> {
    let world = SimpleCommunicator::world();
    let mut out = vec![0u64; world.size() as usize];
    world.all_gather_into(&value, &mut out[..]);
    out
}

/// Waits for every rank.
pub(crate) fn barrier() {
    SimpleCommunicator::world().barrier();
}

/// Ends this process's part in the job: `MPI_Finalize` after a success (`code` 0), `MPI_Abort`
/// of the whole job otherwise. Nothing when MPI was never initialised.
pub(crate) fn end(code: u8) {
    let universe = UNIVERSE.lock().unwrap_or_else(|e| e.into_inner()).take();
    let Some(universe) = universe else {
        return;
    };
    if code == 0 {
        drop(universe);
        return;
    }
    let world = SimpleCommunicator::world();
    if world.rank() != 0 {
        // rank 0 reaches most failures too and says why: give it the first word
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
    world.abort(i32::from(code));
}
