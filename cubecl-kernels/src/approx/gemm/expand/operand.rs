//! Operands as the expansion reads them: a base, a batch stride, and the offsets of rows and
//! steps (strided, or gathered through a table).

use super::Build;
use rayon::prelude::*;

/// Where an operand's rows (or steps) lie: the offset of row `i` from the operand's base.
#[derive(Clone, Copy)]
pub(in crate::approx::gemm) enum Index<'a> {
    /// `i · stride`.
    Stride(usize),
    /// `table[i]`, every entry at most the bound given with it (a gathered operand: the
    /// columns of a convolution's im2col read in place from its input).
    Table(&'a [usize], usize),
}

impl Index<'_> {
    /// The offset of row `i`.
    #[inline(always)]
    pub(in crate::approx::gemm) fn at(&self, i: usize) -> usize {
        match self {
            Self::Stride(s) => i * s,
            Self::Table(t, _) => t[i],
        }
    }

    /// An upper bound of the offsets of rows `0..end` (`end ≥ 1`).
    pub(in crate::approx::gemm) fn last(&self, end: usize) -> usize {
        match self {
            Self::Stride(s) => (end - 1) * s,
            Self::Table(t, max) => {
                assert!(end <= t.len(), "expansion index table too short");
                *max
            }
        }
    }

    /// The rows from `from` on: the shift of the base, and their index.
    fn skip(self, from: usize) -> (usize, Self) {
        match self {
            Self::Stride(s) => (from * s, self),
            Self::Table(t, max) => (0, Self::Table(&t[from..], max)),
        }
    }
}

/// One operand as the expansion reads it: `x[base + bt · batch + row(r) + step(kk)]` is its
/// value in row `r` (a row of the packed side, a lane of the expanded side) at step `kk` along
/// `k`.
#[derive(Clone, Copy)]
pub(in crate::approx::gemm) struct Operand<'a> {
    pub(in crate::approx::gemm) x: &'a [f32],
    pub(in crate::approx::gemm) base: usize,
    pub(in crate::approx::gemm) rows: usize,
    pub(in crate::approx::gemm) batch: usize,
    pub(in crate::approx::gemm) row: Index<'a>,
    pub(in crate::approx::gemm) step: Index<'a>,
}

impl Operand<'_> {
    /// Asserts that `batch` entries of `k` steps lie inside `x`.
    pub(super) fn check(&self, batch: usize, k: usize) {
        if batch > 0 && self.rows > 0 && k > 0 {
            let last =
                self.base + (batch - 1) * self.batch + self.row.last(self.rows) + self.step.last(k);
            assert!(last < self.x.len(), "expansion operand too short");
        }
    }

    pub(super) fn at(&self, bt: usize, r: usize, kk: usize) -> f32 {
        self.x[self.base + bt * self.batch + self.row.at(r) + self.step.at(kk)]
    }

    /// The expanded side's keys and scales, `[batch][k][lanes]` row-major (its rows are lanes),
    /// split by the vector instructions of `build`.
    pub(super) fn pack_lanes(
        self,
        [batch, k]: [usize; 2],
        bits: u32,
        build: Build,
    ) -> (Vec<u32>, Vec<f32>) {
        // steps a task: one step's lanes alone made a weight gradient's 65,536 steps of 16 lanes
        // as many tasks
        const RUN: usize = 256;
        let wide = build == Build::Avx512;
        let n = self.rows;
        let (mut keys, mut scales) = (vec![0u32; batch * k * n], vec![0f32; batch * k * n]);
        // runs of lanes that lie one after another (a stride-1 convolution's output positions
        // along a row), each read as one slice, which the compiler splits a vector at a time;
        // lanes one by one where runs are short (a strided operand)
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for l in 0..n {
            match runs.last_mut() {
                Some((l0, len)) if self.row.at(l) == self.row.at(*l0) + *len => *len += 1,
                _ => runs.push((l, 1)),
            }
        }
        // runs too short to split a run at a time, where the lanes' steps lie one after another
        // (a convolution's output gradient, its channels `L` apart; a 3 × 3 kernel's im2col
        // columns): 16 steps at a time with AVX-512, 8 with AVX2, transposed in registers
        // (value by value, a weight gradient's lanes took about 4 % of ResNet-18-w16's AFM16
        // step on one thread; LeNet-5's 5 × 5 taps, runs of 5, split as fast a run at a time)
        let short = runs.len() * 4 > n;
        if short {
            runs = (0..n).map(|l| (l, 1)).collect();
        }
        let group = match build {
            Build::Avx512 if short => 16,
            Build::Avx2 if short => 8,
            _ => 0,
        };
        let transposed = group > 0;
        keys.par_chunks_mut(n * RUN)
            .zip(scales.par_chunks_mut(n * RUN))
            .enumerate()
            .for_each(|(c, (keys, scales))| {
                let steps = keys.len() / n;
                let mut i = 0;
                while i < steps {
                    let t = c * RUN + i;
                    let (bt, kk) = (t / k, t % k);
                    let at = self.base + bt * self.batch + self.step.at(kk);
                    #[cfg(target_arch = "x86_64")]
                    if transposed
                        && i + group <= steps
                        && kk + group <= k
                        && (1..group).all(|j| self.step.at(kk + j) == self.step.at(kk) + j)
                    {
                        let (keys, scales) = (
                            &mut keys[i * n..][..group * n],
                            &mut scales[i * n..][..group * n],
                        );
                        let lane = |l: usize| at + self.row.at(l);
                        let x = self.x;
                        match build {
                            // SAFETY: `Build::of` chose this build: the CPU supports AVX-512F.
                            Build::Avx512 => unsafe {
                                super::avx512::split_steps(x, lane, keys, scales, bits)
                            },
                            // SAFETY: `Build::of` chose this build: the CPU supports AVX2.
                            _ => unsafe { super::avx2::split_steps(x, lane, keys, scales, bits) },
                        }
                        i += group;
                        continue;
                    }
                    #[cfg(not(target_arch = "x86_64"))]
                    let _ = (transposed, group, wide);
                    let (keys, scales) = (&mut keys[i * n..][..n], &mut scales[i * n..][..n]);
                    i += 1;
                    for &(l0, len) in &runs {
                        let x = &self.x[at + self.row.at(l0)..][..len];
                        let (keys, scales) = (&mut keys[l0..l0 + len], &mut scales[l0..l0 + len]);
                        #[cfg(target_arch = "x86_64")]
                        if wide && len > 1 {
                            // SAFETY: the caller checked that the CPU supports AVX-512F.
                            unsafe { super::avx512::split_run(x, keys, scales, bits) };
                            continue;
                        }
                        super::split_each(x, keys, scales, bits);
                    }
                }
            });
        (keys, scales)
    }

    /// The steps from `k0` on.
    pub(in crate::approx::gemm) fn steps_from(self, k0: usize) -> Self {
        let (shift, step) = self.step.skip(k0);
        Self {
            base: self.base + shift,
            step,
            ..self
        }
    }
}

/// Each value's scale and key at `S` steps of `n` lanes, lane `l`'s `S` values one after
/// another from `x[lane(l)]` (steps contiguous, lanes anywhere), into `keys` and `scales` as
/// `[S][n]`: 16 lanes at a time, `transpose` turning 16 lanes' runs (at the offsets given) into
/// `S` runs of 16 lanes, `split` splitting a run's live lanes (the last group's missing lanes
/// read the last lane again and are not stored). The builds' `split_steps` (`avx2.rs`,
/// `avx512.rs`) give it their transpose and split.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn split_transposed<const S: usize>(
    x: &[f32],
    lane: impl Fn(usize) -> usize,
    (keys, scales): (&mut [u32], &mut [f32]),
    transpose: impl Fn(&[f32], [usize; 16]) -> [[f32; 16]; S],
    split: impl Fn(&[f32], &mut [u32], &mut [f32]),
) {
    let n = keys.len() / S;
    assert!(
        n > 0 && keys.len() == S * n && scales.len() == keys.len(),
        "split steps"
    );
    for l0 in (0..n).step_by(16) {
        let live = (n - l0).min(16);
        // lanes l0..l0 + live (the transposes assert that their runs lie in `x`)
        let at = std::array::from_fn(|i| lane(l0 + i.min(live - 1)));
        for (j, t) in transpose(x, at).iter().enumerate() {
            let at = j * n + l0;
            split(
                &t[..live],
                &mut keys[at..at + live],
                &mut scales[at..at + live],
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Build, Index, Operand};

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn lanes_in_short_runs_pack_as_value_by_value() {
        let avx512 = std::is_x86_feature_detected!("avx512f");
        let avx2 = std::is_x86_feature_detected!("avx2");
        // a weight gradient's output gradient (19 channel lanes `L` apart) and its im2col
        // columns (27 tap lanes in runs of 3, like a 3 × 3 kernel's over 3 channels); steps the
        // positions of 3 samples (runs of 45, so some 16 steps cross a sample), 2 batch
        // entries: 270 steps, past one task's 256
        let (l, samples) = (45, 3);
        let (channels, taps) = (19, 27);
        let per_sample = channels * l;
        let steps: Vec<usize> = (0..samples)
            .flat_map(|s| (0..l).map(move |p| s * per_sample + p))
            .collect();
        let tap_at: Vec<usize> = (0..taps).map(|t| t / 3 * 9 + t % 3).collect();
        let mut s = 3u64;
        let x: Vec<f32> = (0..2 * samples * per_sample)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                f32::from_bits((s >> 32) as u32)
            })
            .collect();
        let lanes = [
            (channels, Index::Stride(l)),
            (taps, Index::Table(&tap_at, tap_at[taps - 1])),
        ];
        let k = samples * l;
        for (rows, row) in lanes {
            let op = Operand {
                x: &x,
                base: 0,
                rows,
                batch: samples * per_sample,
                row,
                step: Index::Table(&steps, steps[steps.len() - 1]),
            };
            op.check(2, k);
            for (build, present) in [(Build::Avx512, avx512), (Build::Avx2, avx2)] {
                for bits in [4, 7] {
                    if !present {
                        continue;
                    }
                    let wide = op.pack_lanes([2, k], bits, build);
                    let one_by_one = op.pack_lanes([2, k], bits, Build::Portable);
                    let what = format!("{rows} lanes at {bits} bits, {build:?}");
                    assert_eq!(wide.0, one_by_one.0, "keys of {what}");
                    let bits_of = |v: &[f32]| v.iter().map(|s| s.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits_of(&wide.1), bits_of(&one_by_one.1), "scales of {what}");
                }
            }
        }
    }
}
