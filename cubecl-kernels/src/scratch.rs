//! Per-thread scratch buffers of the host paths: a fresh allocation of a large buffer is fresh
//! pages, and their faults can cost a product as much as its arithmetic.

use std::cell::RefCell;
use std::thread::LocalKey;

/// A thread's scratch buffer, grown where short and otherwise kept between calls.
pub(crate) type Scratch<T = f32> = LocalKey<RefCell<Vec<T>>>;

/// `f` of the first `len` values of this thread's `buffer` (contents unspecified: whatever a
/// former call left), grown where short; freed after use when it holds more than `keep` values.
pub(crate) fn with_scratch<T: Clone + Default, R>(
    buffer: &'static Scratch<T>,
    len: usize,
    keep: usize,
    f: impl FnOnce(&mut [T]) -> R,
) -> R {
    buffer.with(|buffer| {
        let mut buffer = buffer.borrow_mut();
        if buffer.len() < len {
            buffer.resize(len, T::default());
        }
        let out = f(&mut buffer[..len]);
        if buffer.len() > keep {
            *buffer = Vec::new();
        }
        out
    })
}
