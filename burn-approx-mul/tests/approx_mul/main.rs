//! The ApproxMul suite: the decorator against the host simulator, exhaustive multiplier checks,
//! and stock `burn::nn` modules under approximate multipliers. One test binary, so Burn's
//! backends are monomorphised once for all of them.

mod decorator;
mod elementwise;
mod exhaustive;
mod modules;
mod pool;
mod split_k;
mod transpose;

use std::sync::{Mutex, MutexGuard};

/// burn-ndarray draws its random numbers from one generator per process, and the tests of this
/// binary run on several threads: a run that seeds it and then draws (a tensor, a module's
/// initial weights) holds this lock meanwhile, so that no test beside it takes its draws.
static RNG: Mutex<()> = Mutex::new(());

/// The lock on burn-ndarray's generator ([`RNG`]), also after a test that held it failed.
fn seeded_rng() -> MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
