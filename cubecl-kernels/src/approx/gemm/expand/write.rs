//! The tasks' write-back: each task writes its own rectangle of the output, row by row, or
//! transposed (the transposed product's lanes are output rows) through blocks transposed in
//! registers.

use super::Build;

/// The output the tasks share, each writing its own rectangle of it.
#[derive(Clone, Copy)]
pub(super) struct Dst {
    /// The output's first value.
    pub(super) ptr: *mut f32,
    /// The output's values.
    pub(super) len: usize,
}

// SAFETY: `Dst` is only used while the output it points into is alive and not otherwise
// borrowed, and the tasks write disjoint elements of it (see `Dst::write`'s callers).
unsafe impl Send for Dst {}
// SAFETY: as above.
unsafe impl Sync for Dst {}

impl Dst {
    /// Writes `values` from element `at`.
    ///
    /// # Safety
    /// No other thread reads or writes these elements meanwhile.
    pub(super) unsafe fn write(&self, at: usize, values: &[f32]) {
        assert!(
            at + values.len() <= self.len,
            "expansion write-back out of bounds"
        );
        // SAFETY: in bounds (just checked); exclusive by the caller's contract. A run of 16 or
        // 32 values is one fixed-size copy (vector moves, no call to `memmove`).
        unsafe {
            let to = self.ptr.add(at);
            match values.len() {
                16 => to
                    .cast::<[f32; 16]>()
                    .write(*values.as_ptr().cast::<[f32; 16]>()),
                32 => to
                    .cast::<[f32; 32]>()
                    .write(*values.as_ptr().cast::<[f32; 32]>()),
                len => std::ptr::copy_nonoverlapping(values.as_ptr(), to, len),
            }
        }
    }
}

/// Writes a task's sums transposed: `sums` holds rows of `cols` values, the first `live` of
/// each the row's lanes; lane `l`'s values of rows `r..r + 16` (the last run shorter) go to
/// `at(l, r)` on, one contiguous run. With AVX-512, blocks of 16 rows and 16 lanes are
/// transposed in registers; with AVX2, of 16 rows and 8 lanes; else value by value.
///
/// # Safety
/// No other thread reads or writes these elements meanwhile.
pub(super) unsafe fn transposed(
    dst: Dst,
    sums: &[f32],
    [cols, live]: [usize; 2],
    build: Build,
    at: impl Fn(usize, usize) -> usize,
) {
    assert!(live <= cols && cols > 0, "expansion write-back lanes");
    let mut run = [0f32; 16];
    for (j, rows16) in sums.chunks(16 * cols).enumerate() {
        let len = rows16.len() / cols;
        #[cfg(target_arch = "x86_64")]
        if len == 16 && build != Build::Portable {
            // vectors of 16 lanes (AVX-512) or 8 (AVX2): the sums' rows are whole vectors
            let width = if build == Build::Avx512 { 16 } else { 8 };
            assert!(cols.is_multiple_of(width), "expansion write-back vectors");
            for v in 0..live.div_ceil(width) {
                let block = &rows16[width * v..];
                let write = |jj: usize, run: &[f32; 16]| {
                    // SAFETY: exclusive by the caller's contract.
                    unsafe { dst.write(at(width * v + jj, 16 * j), run) }
                };
                if build == Build::Avx512 {
                    // SAFETY: `Build::of` chose this build: the CPU supports AVX-512F.
                    let t = unsafe { super::avx512::transpose16(block, cols) };
                    t.iter()
                        .enumerate()
                        .take(live - 16 * v)
                        .for_each(|(jj, r)| write(jj, r));
                } else {
                    // SAFETY: `Build::of` chose this build: the CPU supports AVX2.
                    let t = unsafe { super::avx2::transpose16x8(block, cols) };
                    t.iter()
                        .enumerate()
                        .take(live - 8 * v)
                        .for_each(|(jj, r)| write(jj, r));
                }
            }
            continue;
        }
        for l in 0..live {
            for (v, row) in run.iter_mut().zip(rows16.chunks_exact(cols)) {
                *v = row[l];
            }
            // SAFETY: exclusive by the caller's contract.
            unsafe { dst.write(at(l, 16 * j), &run[..len]) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = build;
}
