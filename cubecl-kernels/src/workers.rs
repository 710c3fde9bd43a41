//! A training step run on one of rayon's workers, for backends whose ops run on the host.
//!
//! Every parallel host op (a `par_iter`, a `join`, the `gemm` crate's rayon split) that a thread
//! outside rayon's pool calls hands its whole work to the pool and sleeps until it ends: a job
//! queued, a worker woken, the caller parked and woken again, and the caller's core idle all
//! along. A training step on the host calls hundreds of such ops, many of them small. Called
//! from a worker, the same ops start in place on that worker and share out their work by
//! stealing. [`run`] moves a closure (a step's forward and backward, an optimizer step) onto a
//! worker and waits for it once; LeNet-5's training step at batch 64 on ndarray took 2.39 ms
//! there instead of 4.45 ms on the calling thread with two threads, 3.80 instead of 4.04 ms with
//! one (medians; `docs/architecture.md`, "Where a host step runs").
//!
//! CubeCL runtimes keep one stream per thread (`cubecl_common::stream_id::StreamId`): a step
//! moved between workers would move between streams. [`run_for`] runs there on the calling
//! thread.
//!
//! What the decorators record ([`crate::decorator::effects`]) is per thread: [`run`] carries the
//! calling thread's recording to the worker and back.
//!
//! Rayon's workers get 2 MiB stacks unless the pool says otherwise, where a process's main
//! thread has 8 MiB on Linux; [`build_global`] builds the global pool with [`STACK_BYTES`].

use crate::decorator::{KernelBackend, effects};

/// The stack of each of the global pool's workers that [`build_global`] builds: twice a Linux
/// main thread's, since the steps that ran there now run on workers.
pub const STACK_BYTES: usize = 16 << 20;

/// Builds rayon's global pool with `threads` workers (rayon's default when `None`: the
/// `RAYON_NUM_THREADS` variable, or one per core) and [`STACK_BYTES`] stacks. Call it before
/// anything uses rayon; it fails when the global pool already exists.
pub fn build_global(threads: Option<usize>) -> Result<(), rayon::ThreadPoolBuildError> {
    let builder = rayon::ThreadPoolBuilder::new().stack_size(STACK_BYTES);
    match threads {
        Some(n) => builder.num_threads(n),
        None => builder,
    }
    .build_global()
}

/// Runs `f` on a worker of the current rayon pool (the global one from outside any pool) and
/// returns what it returns; on the calling thread when that is already a worker. The calling
/// thread's effects recording is `f`'s while it runs, and comes back with what `f` recorded. A
/// panic in `f` reaches the caller as a panic.
pub fn run<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if rayon::current_thread_index().is_some() {
        return f();
    }
    /// Leaves the worker not recording, even when `f` unwinds.
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            effects::suspend();
        }
    }
    let recording = effects::suspend();
    let (out, recording) = rayon::scope(move |_| {
        let _clear = Clear;
        effects::resume(recording);
        let out = f();
        (out, effects::suspend())
    });
    effects::resume(recording);
    out
}

/// [`run`] where `K`'s float tensors live in host memory ([`KernelBackend::cube_runtime`] is
/// `None`); `f` on the calling thread on CubeCL runtimes.
pub fn run_for<K: KernelBackend, R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if K::cube_runtime().is_none() {
        run(f)
    } else {
        f()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decorator::effects::Pass;
    use std::sync::Mutex;

    /// The tests that look at the global pool's workers' recording, one at a time.
    static GLOBAL_POOL: Mutex<()> = Mutex::new(());

    #[test]
    fn the_closure_runs_on_a_worker_and_its_recording_comes_back() {
        let _one = GLOBAL_POOL.lock().unwrap_or_else(|e| e.into_inner());
        assert!(rayon::current_thread_index().is_none());
        effects::start();
        effects::record_contraction(Some("a"), Pass::Forward, "fp32", true, 5, "kernel");
        let (on_worker, recorded_there) = run(|| {
            effects::record_contraction(Some("a"), Pass::Forward, "fp32", true, 7, "kernel");
            (
                rayon::current_thread_index().is_some(),
                effects::recording(),
            )
        });
        assert!(on_worker && recorded_there);
        let a = &effects::finish().layers["a"].passes[Pass::Forward.index()];
        assert_eq!((a[0].multiplies, a[0].calls), (12, 2));
        // not recording here: not recording there, and nothing left behind on the worker
        assert!(!run(effects::recording));
        assert!(!rayon::broadcast(|_| effects::recording()).contains(&true));
    }

    #[test]
    fn on_a_worker_it_runs_in_place() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let (outer, inner) = pool.install(|| {
            let outer = std::thread::current().id();
            (outer, run(|| std::thread::current().id()))
        });
        assert_eq!(outer, inner);
    }

    #[test]
    fn a_panic_reaches_the_caller_and_leaves_no_worker_recording() {
        let _one = GLOBAL_POOL.lock().unwrap_or_else(|e| e.into_inner());
        effects::start();
        let caught = std::panic::catch_unwind(|| run(|| panic!("inside the step")));
        assert!(caught.is_err());
        assert!(!rayon::broadcast(|_| effects::recording()).contains(&true));
        effects::resume(None);
    }

    #[test]
    fn a_second_global_pool_is_an_error_not_a_panic() {
        // the global pool exists once anything has used it
        assert!(rayon::current_num_threads() >= 1);
        assert!(build_global(Some(2)).is_err());
        assert!(build_global(None).is_err());
    }

    #[test]
    fn cube_runtimes_stay_on_the_calling_thread() {
        let here = std::thread::current().id();
        let wgpu = run_for::<burn::backend::Wgpu, _>(|| std::thread::current().id());
        assert_eq!(wgpu, here);
        let ndarray = run_for::<burn::backend::NdArray, _>(|| std::thread::current().id());
        assert_ne!(ndarray, here);
    }
}
