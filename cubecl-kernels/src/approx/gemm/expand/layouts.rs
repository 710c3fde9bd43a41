//! The table in the layouts the expansion reads, and its range, made once per table.

use std::sync::Arc;

/// Bytes a row of the table as bytes (`2^m ≤ 128` entries, padded): two 512-bit vectors, the
/// two sources of a byte permute.
pub(super) const BYTE_ROW: usize = 128;

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
    /// `packed_lhs` and `packed_rhs` as bytes `(carry << m) | mantissa`, rows of
    /// [`BYTE_ROW`] bytes (the padding zero), where `m ≤ 7` and every entry is
    /// `(1 + carry)(1 + mantissa · 2^-m)` (every table Algorithm 1 builds; the entry's bits
    /// are `0x3f80_0000 + (byte << (23 - m))`).
    pub(super) bytes_lhs: Option<Arc<[u8]>>,
    pub(super) bytes_rhs: Option<Arc<[u8]>>,
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
        let packed_lhs: Arc<[f32]> = transposed(&by_rhs, bits, stride).into();
        let packed_rhs: Arc<[f32]> = transposed(table, bits, stride).into();
        Self {
            bytes_lhs: bytes(&packed_lhs, bits, stride),
            bytes_rhs: bytes(&packed_rhs, bits, stride),
            packed_lhs,
            packed_rhs,
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

/// Rows of a table by the packed side's key (`stride` entries apart) as bytes
/// `(carry << m) | mantissa`, [`BYTE_ROW`] a row, or `None` where `m > 7` or an entry is not
/// `(1 + carry)(1 + mantissa · 2^-m)`.
fn bytes(rows: &[f32], bits: u32, stride: usize) -> Option<Arc<[u8]>> {
    let width = 1usize << bits;
    if bits > 7 {
        return None;
    }
    let mut out = vec![0u8; width * BYTE_ROW];
    for (row, bytes) in rows.chunks(stride).zip(out.chunks_mut(BYTE_ROW)) {
        for (entry, byte) in row[..width].iter().zip(bytes.iter_mut()) {
            let offset = entry.to_bits().checked_sub(0x3f80_0000)?;
            let b = offset >> (23 - bits);
            (b << (23 - bits) == offset && b < 1 << (bits + 1)).then_some(())?;
            *byte = b as u8;
        }
    }
    Some(out.into())
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
    use super::{BYTE_ROW, Layouts};
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
    fn tables_of_m_bit_entries_pack_into_bytes_by_each_key() {
        for bits in [3u32, 7] {
            let crate::approx::ApproxMultiply::Lut(t) = crate::approx::host::mitchell_table(bits)
            else {
                unreachable!("a table")
            };
            let l = t.expansion_layouts();
            for (rows, bytes) in [(&l.packed_lhs, &l.bytes_lhs), (&l.packed_rhs, &l.bytes_rhs)] {
                let bytes = bytes.as_ref().expect("m-bit entries pack");
                let w = 1usize << bits;
                for key in 0..w {
                    for lane in 0..BYTE_ROW {
                        let byte = u32::from(bytes[key * BYTE_ROW + lane]);
                        match lane < w {
                            true => assert_eq!(
                                0x3f80_0000 + (byte << (23 - bits)),
                                rows[key * l.stride + lane].to_bits(),
                                "m = {bits}, key {key}, lane {lane}"
                            ),
                            false => assert_eq!(byte, 0, "padding"),
                        }
                    }
                }
            }
        }
        // a table of 2-bit entries (carries and not); an entry with a bit below the table's
        // width, an entry below 1, a table past 7 bits
        let carry = |i: usize| (1 + (i >> 2 & 1)) as f32;
        let mut t: Vec<f32> = (0..16)
            .map(|i| carry(i) * (1.0 + (i % 4) as f32 / 4.0))
            .collect();
        assert!(Layouts::new(&t.clone().into(), 2).bytes_lhs.is_some());
        t[5] = 1.0 + 2f32.powi(-20);
        assert!(Layouts::new(&t.clone().into(), 2).bytes_lhs.is_none());
        t[5] = 0.5;
        assert!(Layouts::new(&t.into(), 2).bytes_rhs.is_none());
        let wide: Arc<[f32]> = vec![1.0; 1 << 16].into();
        assert!(Layouts::new(&wide, 8).bytes_lhs.is_none());
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
