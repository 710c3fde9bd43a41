//! A weight's HiNM mask turned into the packed layout the kernel runs
//! ([`cubecl_kernels::hinm::Packed`]), and back to a dense masked weight.

use crate::error::HinmError;
use crate::mask::{HinmMask, Saliency, Scores};
use cubecl_kernels::hinm::Packed;

/// How a weight of Burn's layout maps to the `out × K` view of its packed form (shared with
/// every weight-sparsity decorator).
pub use cubecl_kernels::decorator::layout::Layout;

/// The saliency scores of a weight of shape `dims` (Burn's layout) on its GEMM view.
pub fn scores(weight: &[f32], dims: &[usize], s: Saliency) -> Result<Scores, HinmError> {
    match Layout::of(dims) {
        Some(Layout::Linear { d_in, d_out }) => Scores::linear(weight, d_in, d_out, s),
        Some(Layout::Conv { .. }) => Scores::conv(weight, dims, s),
        None => Err(HinmError::Shape(format!(
            "a weight of shape {dims:?} has no GEMM view"
        ))),
    }
}

/// The packed form of `weight` (shape `dims`, Burn's layout) under `mask`.
pub fn pack(weight: &[f32], dims: &[usize], mask: &HinmMask) -> Result<Packed, HinmError> {
    let layout = Layout::of(dims)
        .ok_or_else(|| HinmError::Shape(format!("a weight of shape {dims:?} cannot be packed")))?;
    let (out, k) = layout.view();
    if (out, k) != (mask.out_perm.len(), mask.k) || weight.len() != out * k {
        return Err(HinmError::Shape(format!(
            "a mask of {}×{} for a weight {dims:?} ({out}×{k})",
            mask.out_perm.len(),
            mask.k
        )));
    }
    let at = |row: usize, col: usize| match layout {
        Layout::Linear { d_out, .. } => weight[col * d_out + row],
        Layout::Conv { .. } => weight[row * k + col],
    };
    let nnz = mask.columns.first().map_or(0, Vec::len);
    let mut values = Vec::with_capacity(out * nnz / 2);
    let mut meta = Vec::new();
    for (r, &row) in mask.out_perm.iter().enumerate() {
        let tile = &mask.columns[r / mask.v];
        let mut positions = Vec::with_capacity(nnz / 4);
        for (g, &bits) in mask.keep[r].iter().enumerate() {
            let kept: Vec<usize> = (0..4).filter(|b| bits >> b & 1 == 1).collect();
            let [p0, p1] = kept[..] else {
                return Err(HinmError::Shape(format!(
                    "row {r}, group {g} keeps {} values, not 2",
                    kept.len()
                )));
            };
            values.push(at(row as usize, tile[g * 4 + p0] as usize));
            values.push(at(row as usize, tile[g * 4 + p1] as usize));
            positions.push([p0, p1]);
        }
        meta.extend(Packed::encode_meta(&positions));
    }
    let packed = Packed {
        out,
        k,
        v: mask.v,
        nnz,
        out_perm: mask.out_perm.clone(),
        cols: mask.columns.concat(),
        values,
        meta,
    };
    packed
        .validate()
        .map_err(|e| HinmError::Shape(e.to_string()))?;
    Ok(packed)
}

/// The dense masked weight of a packed one, in Burn's layout for `dims`.
pub fn masked(packed: &Packed, dims: &[usize]) -> Result<Vec<f32>, HinmError> {
    check_fits(packed, dims)?;
    let layout = Layout::of(dims).expect("checked by check_fits");
    Ok(layout.from_view(&packed.dense()))
}

/// Whether `packed` fits a weight of shape `dims` (Burn's layout).
pub fn check_fits(packed: &Packed, dims: &[usize]) -> Result<(), HinmError> {
    let layout = Layout::of(dims)
        .ok_or_else(|| HinmError::Shape(format!("a weight of shape {dims:?} cannot be packed")))?;
    let (out, k) = layout.view();
    if (out, k) != (packed.out, packed.k) {
        return Err(HinmError::Shape(format!(
            "the packed weight is {}×{} (out × K), the model's weight {dims:?} is {out}×{k}",
            packed.out, packed.k
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gyro::{Method, search};

    #[test]
    fn packing_keeps_exactly_the_masked_values_in_both_layouts() {
        let w: Vec<f32> = (0..16 * 24)
            .map(|i| ((i * 53 % 97) as f32 - 48.0) / 9.0)
            .collect();
        for dims in [vec![24, 16], vec![16, 6, 2, 2]] {
            let s = scores(&w, &dims, Saliency::Magnitude).unwrap();
            let (mask, _) = search(&s, 8, 0.5, Method::Gyro, 3).unwrap();
            let packed = pack(&w, &dims, &mask).unwrap();
            let dense = masked(&packed, &dims).unwrap();
            let keep = mask.dense(); // view order
            let layout = Layout::of(&dims).unwrap();
            let kept_view: Vec<f32> = keep.iter().map(|&k| if k { 1.0 } else { 0.0 }).collect();
            let kept = layout.from_view(&kept_view);
            for i in 0..w.len() {
                let want = if kept[i] == 1.0 { w[i] } else { 0.0 };
                assert_eq!(dense[i], want, "{dims:?} at {i}");
            }
            assert_eq!(dense.iter().filter(|&&x| x != 0.0).count(), w.len() / 4);
        }
    }

    #[test]
    fn a_packed_weight_of_another_shape_is_refused() {
        let w = vec![1.0f32; 8 * 16];
        let s = scores(&w, &[16, 8], Saliency::Magnitude).unwrap();
        let (mask, _) = search(&s, 4, 0.5, Method::None, 1).unwrap();
        let packed = pack(&w, &[16, 8], &mask).unwrap();
        assert!(
            check_fits(&packed, &[8, 16])
                .unwrap_err()
                .to_string()
                .contains("8×16")
        );
        assert!(pack(&w, &[8, 16], &mask).is_err());
        assert!(check_fits(&packed, &[128]).is_err());
    }
}
