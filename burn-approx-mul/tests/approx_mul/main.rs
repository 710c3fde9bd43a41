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
