//! The table by the packed side's key, in the layouts the expansion's builds read.

/// The table by the packed side's key: `2^m` rows `stride` apart (`stride ≥ 16`, the padding
/// zero, for the AVX-512 build's whole-vector permutes), and, where the byte-permute build
/// runs ([`ByPacked::new`]'s `bytes`), the same rows as byte planes.
pub(in crate::approx::gemm) struct ByPacked {
    /// Entry `kb` of row `ma` at `ma · stride + kb`.
    pub(super) values: Vec<f32>,
    /// The rows' distance.
    pub(super) stride: usize,
    /// Row `ma`'s four planes of [`PLANE`] bytes at `4 · ma · PLANE`: byte `kb` of plane `p`
    /// is byte `p` (little-endian) of entry `kb`'s f32 bits, past the row's entries zero.
    /// Empty where the byte-permute build does not run.
    pub(super) planes: Vec<u8>,
}

/// Bytes of a row's plane: every key of up to 7 bits (two 64-byte vectors).
pub(super) const PLANE: usize = 128;

impl ByPacked {
    /// The table `by_expanded` (`t[kb · 2^m + ma]`, by the expanded side's key) by the packed
    /// side's key; with its byte planes when `bytes` and `m` is 6 or 7 (narrower rows take one
    /// or two permutes a vector, which the byte permutes do not beat).
    pub(super) fn new(by_expanded: &[f32], bits: u32, bytes: bool) -> Self {
        let width = 1usize << bits;
        let stride = width.max(16);
        let values = transposed(by_expanded, bits, stride);
        let mut planes = Vec::new();
        if bytes && (64..=PLANE).contains(&width) {
            planes = vec![0u8; width * 4 * PLANE];
            for (ma, row) in planes.chunks_exact_mut(4 * PLANE).enumerate() {
                for (kb, v) in values[ma * stride..ma * stride + width].iter().enumerate() {
                    for (p, byte) in v.to_bits().to_le_bytes().into_iter().enumerate() {
                        row[p * PLANE + kb] = byte;
                    }
                }
            }
        }
        Self {
            values,
            stride,
            planes,
        }
    }
}

/// A `2^bits × 2^bits` table `t[i · 2^m + j]` transposed, its rows `stride` apart
/// (`stride ≥ 2^m`, the padding zero): `out[j · stride + i] = t[i · 2^m + j]`. The table
/// by the rhs key (`stride = 2^m`) when the rhs is expanded, and the table by the packed
/// side's key, padded for the AVX-512 build's whole-vector permutes, from the table by the
/// expanded side's key.
pub(super) fn transposed(t: &[f32], bits: u32, stride: usize) -> Vec<f32> {
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
    use super::*;

    #[test]
    fn planes_hold_each_entrys_bytes() {
        let bits = 6;
        let width = 1usize << bits;
        let by_expanded: Vec<f32> = (0..width * width)
            .map(|i| 1.0 + i as f32 / 4096.0)
            .collect();
        let t = ByPacked::new(&by_expanded, bits, true);
        assert_eq!((t.stride, t.planes.len()), (64, 64 * 4 * PLANE));
        for ma in 0..width {
            for kb in 0..PLANE {
                let bytes: [u8; 4] = std::array::from_fn(|p| t.planes[(4 * ma + p) * PLANE + kb]);
                let want = if kb < width {
                    by_expanded[kb * width + ma].to_bits()
                } else {
                    0
                };
                assert_eq!(u32::from_le_bytes(bytes), want, "row {ma}, entry {kb}");
            }
        }
        assert!(ByPacked::new(&by_expanded, bits, false).planes.is_empty());
        let narrow: Vec<f32> = by_expanded[..32 * 32].to_vec();
        assert!(ByPacked::new(&narrow, 5, true).planes.is_empty());
    }
}
