//! Per-thread scratch buffers of the host paths: a fresh allocation of a large buffer is fresh
//! pages, and their faults can cost a product as much as its arithmetic.

use std::cell::RefCell;
use std::thread::LocalKey;

/// A thread's scratch buffer, grown where short and otherwise kept between calls.
pub(crate) type Scratch = LocalKey<RefCell<Vec<f32>>>;

/// `f` of the first `len` values of this thread's `buffer` (contents unspecified: whatever a
/// former call left), grown where short; freed after use when it holds more than `keep` values.
pub(crate) fn with_scratch<R>(
    buffer: &'static Scratch,
    len: usize,
    keep: usize,
    f: impl FnOnce(&mut [f32]) -> R,
) -> R {
    buffer.with(|buffer| {
        let mut buffer = buffer.borrow_mut();
        if buffer.len() < len {
            buffer.resize(len, 0.0);
        }
        let out = f(&mut buffer[..len]);
        if buffer.len() > keep {
            *buffer = Vec::new();
        }
        out
    })
}
