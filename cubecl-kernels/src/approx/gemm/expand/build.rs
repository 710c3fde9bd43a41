//! The builds of the expansion's loops ([`Build`]) and the CPU features each needs.

use super::LANES;
use crate::approx::gemm::reference::{avx2_available, avx512_available};

/// The build of the expansion's loops a product runs ([`Build::of`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(in crate::approx::gemm) enum Build {
    /// Expanded rows by two-source permutes of the packed key's table row (`avx512.rs`).
    Avx512,
    /// Expanded rows by 8 × 8 transposes of the expanded keys' table columns (`avx2.rs`;
    /// the CPU has AVX2 and FMA).
    Avx2,
    /// Expanded rows entry by entry (compiled for AVX2 where the CPU has it).
    Portable,
}

impl Build {
    /// The widest build the CPU runs, or the portable one where `simd` is off (the tests run
    /// every build to check one against the others).
    pub(super) fn of(simd: bool) -> Self {
        #[cfg(test)]
        let simd = simd && WIDEST.get() != Self::Portable;
        #[cfg(test)]
        let avx512_available = || WIDEST.get() == Self::Avx512 && avx512_available();
        if simd && avx512_available() {
            Self::Avx512
        } else if simd && avx2_available() && fma_available() {
            Self::Avx2
        } else {
            Self::Portable
        }
    }

    /// The values in a row of a task's sums for a panel of `live` columns: whole vectors of
    /// 8 with AVX2, else one vector of 16 for at most 16 live columns, two otherwise.
    pub(super) fn sum_cols(self, live: usize) -> usize {
        match self {
            Self::Avx2 => live.clamp(1, LANES).next_multiple_of(8),
            _ if live <= 16 => 16,
            _ => LANES,
        }
    }
}

/// Whether the CPU has FMA (every AVX2 CPU of Intel's and AMD's has; the AVX2 build fuses its
/// multiply-adds where every product is exact).
fn fma_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether plans made on this thread hold the table's bytes: the CPU has byte permutes
/// ([`byte_permutes`]; the AVX-512 build's direct tasks then pick the table's entries as
/// bytes, `avx512/direct.rs`).
pub(super) fn bytes_available() -> bool {
    #[cfg(test)]
    if !BYTES.get() {
        return false;
    }
    byte_permutes()
}

/// Whether the CPU has AVX-512 VBMI and BW (byte permutes).
pub(super) fn byte_permutes() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512vbmi") && std::is_x86_feature_detected!("avx512bw")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
thread_local! {
    /// The widest build [`Build::of`] may choose on this thread ([`with_widest`]).
    static WIDEST: std::cell::Cell<Build> = const { std::cell::Cell::new(Build::Avx512) };
    /// Whether a plan made on this thread may take the table's bytes ([`with_byte_tables`]).
    static BYTES: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// `f` run with plans made on this thread taking the table's bytes only where `bytes` (and
/// the CPU has byte permutes), so that the tests run the direct tasks both ways.
#[cfg(test)]
pub(in crate::approx::gemm) fn with_byte_tables<R>(bytes: bool, f: impl FnOnce() -> R) -> R {
    with_set(&BYTES, bytes, f)
}

/// `f` run with [`Build::of`] choosing at most `widest` on this thread (the plan chooses its
/// build on the calling thread), so that the tests run every build the CPU has.
#[cfg(test)]
pub(in crate::approx::gemm) fn with_widest<R>(widest: Build, f: impl FnOnce() -> R) -> R {
    with_set(&WIDEST, widest, f)
}

/// `f` run with this thread's `cell` set to `value`, then set back.
#[cfg(test)]
fn with_set<T: Copy, R>(
    cell: &'static std::thread::LocalKey<std::cell::Cell<T>>,
    value: T,
    f: impl FnOnce() -> R,
) -> R {
    let before = cell.replace(value);
    let out = f();
    cell.set(before);
    out
}

/// The builds this CPU runs, the portable one first.
#[cfg(test)]
pub(in crate::approx::gemm) fn builds_here() -> Vec<Build> {
    let mut builds = vec![Build::Portable];
    if avx2_available() && fma_available() {
        builds.push(Build::Avx2);
    }
    if avx512_available() {
        builds.push(Build::Avx512);
    }
    builds
}
