//! Operands as the expansion reads them: a base, a batch stride, and the offsets of rows and
//! steps (strided, or gathered through a table).

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
