//! The table in the layouts the expansion reads, and its range, made once per table.

use std::sync::Arc;

/// The table in the layouts a [`super::Plan`] reads and the range of its entries, made once
/// per table ([`crate::approx::LutTable::expansion_layouts`]) rather than for each product.
pub(in crate::approx) struct Layouts {
    /// By the rhs key (the lhs packed): `transposed(table, 2^m)`.
    pub(super) by_rhs: Arc<[f32]>,
    /// The table itself (by the lhs key, the rhs packed).
    pub(super) by_lhs: Arc<[f32]>,
    /// By the lhs key with rows `stride` apart, for a packed lhs (the AVX-512 build's
    /// whole-vector permutes).
    pub(super) packed_lhs: Arc<[f32]>,
    /// By the rhs key with rows `stride` apart, for a packed rhs.
    pub(super) packed_rhs: Arc<[f32]>,
    pub(super) stride: usize,
    /// The smallest and the largest non-zero magnitude among the entries (`(∞, 0)` for an
    /// all-zero table): the band [`super::expands`] checks the operands' scales against.
    pub(super) range: (f64, f64),
}

impl Layouts {
    /// The layouts of `table`.
    pub(in crate::approx) fn new(table: &Arc<[f32]>, bits: u32) -> Self {
        let width = 1usize << bits;
        let stride = width.max(16);
        let by_rhs: Arc<[f32]> = transposed(table, bits, width).into();
        Self {
            packed_lhs: transposed(&by_rhs, bits, stride).into(),
            packed_rhs: transposed(table, bits, stride).into(),
            by_rhs,
            by_lhs: table.clone(),
            stride,
            range: table
                .iter()
                .map(|s| s.abs())
                .filter(|&s| s != 0.0)
                .fold((f64::INFINITY, 0f64), |(lo, hi), s| {
                    (lo.min(f64::from(s)), hi.max(f64::from(s)))
                }),
        }
    }
}

/// A `2^bits × 2^bits` table `t[i · 2^m + j]` transposed, its rows `stride` apart
/// (`stride ≥ 2^m`, the padding zero): `out[j · stride + i] = t[i · 2^m + j]`. The table
/// by the rhs key (`stride = 2^m`) when the rhs is expanded, and the table by the packed
/// side's key, padded for the AVX-512 build's whole-vector permutes, from the table by the
/// expanded side's key.
fn transposed(t: &[f32], bits: u32, stride: usize) -> Vec<f32> {
    let width = 1usize << bits;
    let mut out = vec![0f32; width * stride];
    for (j, row) in out.chunks_mut(stride).enumerate() {
        for (i, entry) in row[..width].iter_mut().enumerate() {
            *entry = t[i * width + j];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::Layouts;
    use crate::approx::LutTable;
    use std::sync::Arc;

    #[test]
    fn the_layouts_hold_the_table_by_each_key() {
        for bits in [3u32, 5] {
            let (w, stride) = (1usize << bits, (1usize << bits).max(16));
            let t: Arc<[f32]> = (0..w * w).map(|i| 1.0 + i as f32).collect();
            let l = Layouts::new(&t, bits);
            assert_eq!(l.stride, stride);
            assert_eq!(&l.by_lhs[..], &t[..]);
            assert_eq!(l.range, (1.0, (w * w) as f64));
            for a in 0..w {
                for b in 0..stride {
                    let entry = if b < w { t[a * w + b] } else { 0.0 };
                    assert_eq!(l.packed_lhs[a * stride + b], entry, "lhs key {a}, rhs {b}");
                    // row `a` of the table by the rhs key: rhs key a, lhs key b
                    let by_rhs = if b < w { t[b * w + a] } else { 0.0 };
                    assert_eq!(l.packed_rhs[a * stride + b], by_rhs, "rhs key {a}, lhs {b}");
                }
                for b in 0..w {
                    assert_eq!(l.by_rhs[b * w + a], t[a * w + b], "rhs key {b}, lhs {a}");
                }
            }
        }
    }

    #[test]
    fn the_range_skips_zeros_and_signs() {
        let t: Arc<[f32]> = vec![0.0, -3.0, 0.5, -0.0].into();
        assert_eq!(Layouts::new(&t, 1).range, (0.5, 3.0));
        let zeros: Arc<[f32]> = vec![0.0; 4].into();
        assert_eq!(Layouts::new(&zeros, 1).range, (f64::INFINITY, 0.0));
    }

    #[test]
    fn a_table_and_its_clones_share_one_set_of_layouts() {
        let t = LutTable::new(2, (0..16).map(|i| 1.0 + i as f32 / 16.0).collect());
        let c = t.clone();
        assert!(std::ptr::eq(t.expansion_layouts(), c.expansion_layouts()));
        assert!(Arc::ptr_eq(
            &t.expansion_layouts().by_rhs,
            &c.expansion_layouts().by_rhs
        ));
    }
}
