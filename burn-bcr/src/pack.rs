//! A projected weight packed into BCRC (`cubecl_kernels::bcrc`), and what its index arrays cost
//! beside CSR's and a dense bitmask's for the same kept entries.

use crate::error::BcrError;
use crate::project::{BcrMask, View};
use cubecl_kernels::bcrc::{Bcrc, Csr, bitmask_bytes};
use cubecl_kernels::decorator::layout::Layout;

/// The GEMM view of a weight of shape `dims` in Burn's layout: a Linear `[d_in, d_out]`
/// ([`View::linear`]) or a convolution `[c_out, c_in, k…]` ([`View::conv`]).
pub fn view_of(weight: &[f32], dims: &[usize]) -> Result<View, BcrError> {
    match Layout::of(dims) {
        Some(Layout::Linear { d_in, d_out }) => View::linear(weight, d_in, d_out),
        Some(Layout::Conv { .. }) => View::conv(weight, dims),
        None => Err(BcrError::Shape(format!(
            "a weight of shape {dims:?} has no GEMM view"
        ))),
    }
}

/// The dense masked weight of a BCRC one, in Burn's layout for `dims` (pruned weights `0`).
pub fn masked(w: &Bcrc, dims: &[usize]) -> Result<Vec<f32>, BcrError> {
    let layout = Layout::of(dims)
        .filter(|l| l.view() == (w.out, w.k))
        .ok_or_else(|| {
            BcrError::Shape(format!(
                "a {} × {} BCRC weight for a weight of shape {dims:?}",
                w.out, w.k
            ))
        })?;
    w.validate().map_err(|e| BcrError::Corrupt(e.0))?;
    Ok(layout.from_view(&w.dense()))
}

/// The BCRC form of `view` under `mask` (pruned weights dropped; kept weights stored even where
/// their value is zero, so the pattern is the mask's).
pub fn pack(view: &View, mask: &BcrMask) -> Result<Bcrc, BcrError> {
    if (mask.rows, mask.cols) != (view.rows, view.cols) {
        return Err(BcrError::Shape(format!(
            "a {} × {} mask for a {} × {} view",
            mask.rows, mask.cols, view.rows, view.cols
        )));
    }
    Bcrc::from_dense(view.rows, view.cols, &view.data, &mask.dense())
        .map_err(|e| BcrError::Corrupt(e.to_string()))
}

/// Whether `bcrc` is a packed form of a weight of shape `dims` (Burn's layout): its `out × K`
/// view is the weight's ([`BcrError::Shape`] otherwise) and its arrays hold together
/// ([`Bcrc::validate`](cubecl_kernels::bcrc::Bcrc::validate); [`BcrError::Corrupt`] otherwise).
pub fn check_fits(bcrc: &Bcrc, dims: &[usize]) -> Result<(), BcrError> {
    let layout = Layout::of(dims)
        .ok_or_else(|| BcrError::Shape(format!("a weight of shape {dims:?} cannot be packed")))?;
    let (out, k) = layout.view();
    if (out, k) != (bcrc.out, bcrc.k) {
        return Err(BcrError::Shape(format!(
            "the BCRC weight is {} × {} (out × K), the model's weight {dims:?} is {out} × {k}",
            bcrc.out, bcrc.k
        )));
    }
    bcrc.validate().map_err(|e| BcrError::Corrupt(e.0))
}

/// Bytes of extra (index) data for one weight's kept entries, in three formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexBytes {
    /// BCRC: reorder, row offset, occurrence, column stride, compact column.
    pub bcrc: usize,
    /// CSR: row pointers and column indices.
    pub csr: usize,
    /// A dense bitmask, one bit per weight of the view.
    pub bitmask: usize,
    /// Kept weights (4 bytes each in every format).
    pub nnz: usize,
    /// Column patterns of the BCRC form.
    pub patterns: usize,
}

impl IndexBytes {
    /// The three sizes of a packed weight's index data.
    pub fn of(w: &Bcrc) -> Self {
        Self {
            bcrc: w.index_bytes(),
            csr: Csr::of(w).index_bytes(),
            bitmask: bitmask_bytes(w.out, w.k),
            nnz: w.weights.len(),
            patterns: w.groups(),
        }
    }

    /// BCRC's index data less than CSR's, as a fraction of CSR's (negative: more).
    pub fn saving_vs_csr(&self) -> f64 {
        1.0 - self.bcrc as f64 / self.csr as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::level::Level;
    use crate::project::project;

    fn view(rows: usize, cols: usize) -> View {
        let data = (0..rows * cols)
            .map(|i| ((i * 7919 % 1009) as f32 - 504.0) / 504.0)
            .collect();
        View::new(rows, cols, data).unwrap()
    }

    #[test]
    fn a_projected_weight_packs_and_comes_back() {
        let v = view(32, 96);
        let level: Level = "10x:4x16".parse().unwrap();
        let mask = project(&v, level).unwrap();
        let w = pack(&v, &mask).unwrap();
        assert_eq!(w.weights.len(), level.budget(32 * 96));
        assert_eq!(w.dense(), mask.apply(&v).data);
        let sizes = IndexBytes::of(&w);
        assert_eq!(sizes.nnz, w.weights.len());
        assert_eq!(sizes.bitmask, 32 * 96 / 8);
    }

    #[test]
    fn rows_sharing_a_block_pattern_share_their_columns() {
        // blocks as wide as the view: the kept rows of every strip keep the same columns, so
        // BCRC stores each strip's columns once where CSR stores them per row
        let v = view(64, 128);
        let mask = project(&v, "8x:8x128".parse().unwrap()).unwrap();
        let w = pack(&v, &mask).unwrap();
        let sizes = IndexBytes::of(&w);
        assert!(sizes.patterns <= 64 / 8 + 1, "{} patterns", sizes.patterns);
        assert!(sizes.bcrc < sizes.csr, "{sizes:?}");
    }

    #[test]
    fn burn_weights_go_to_their_view_and_back_masked() {
        // a Linear [d_in = 6, d_out = 4]: the view is its transpose
        let w: Vec<f32> = (0..24).map(|i| i as f32 + 1.0).collect();
        let v = view_of(&w, &[6, 4]).unwrap();
        assert_eq!((v.rows, v.cols), (4, 6));
        assert_eq!(v.data[..3], [1.0, 5.0, 9.0]);
        let mask = project(&v, "2x:2x3".parse().unwrap()).unwrap();
        let packed = pack(&v, &mask).unwrap();
        let back = masked(&packed, &[6, 4]).unwrap();
        assert_eq!(back, mask.apply(&v).to_linear());
        // a convolution's view is its layout
        let c = view_of(&w, &[2, 3, 2, 2]).unwrap();
        assert_eq!((c.rows, c.cols, &c.data), (2, 12, &w));
        assert!(view_of(&w, &[24]).is_err());
        assert!(masked(&packed, &[4, 6]).is_err());
    }

    #[test]
    fn a_mask_of_another_shape_is_refused() {
        let v = view(8, 16);
        let mask = project(&view(16, 8), "4x:4x4".parse().unwrap()).unwrap();
        let e = pack(&v, &mask).unwrap_err().to_string();
        assert!(e.contains("16 × 8 mask for a 8 × 16 view"), "{e}");
    }
}
