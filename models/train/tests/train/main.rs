//! ember-train's tests, as one integration-test binary: unit tests inside the crate would compile
//! the whole library a second time in test mode (its training loops monomorphised over every
//! backend: minutes of CI per build), while this binary links the library as it is.

mod bcr;
mod compare;
mod conv;
mod fused_optim;
mod memory;
mod norm;
mod optim;
mod policy;
mod report;
mod run;
mod scale;
mod technique;

/// Burn's backends seed one RNG per process: a test that seeds it and builds a model from what
/// it draws (`conv`) and a test that trains (training seeds it) must not run at once. Each holds
/// this while it does.
pub(crate) fn seeded() -> std::sync::MutexGuard<'static, ()> {
    static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());
    RNG.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
