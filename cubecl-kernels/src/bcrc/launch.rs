//! Launch of the BCRC sparse-product kernel.

use super::kernel::spmm_kernel;
use crate::grid::upload;
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;
use burn_std::DType;

/// A BCRC weight's arrays on the device (see [`Bcrc`](super::Bcrc)), with one derived array:
/// `row_cols[p]`, the start of reordered row `p`'s pattern in `compact_column` (so a unit needs
/// no search for its row's group).
#[derive(Clone, Debug)]
pub struct BcrcCube<R: CubeRuntime> {
    /// `[nnz]` f32.
    pub weights: CubeTensor<R>,
    /// `[out + 1]` u32.
    pub row_offset: CubeTensor<R>,
    /// `[out]` u32.
    pub row_cols: CubeTensor<R>,
    /// `[compact]` u32.
    pub compact_column: CubeTensor<R>,
    /// `[out]` u32.
    pub reorder: CubeTensor<R>,
    /// Rows and columns of the view.
    pub dims: [usize; 2],
}

/// Launches `spmm_kernel`: `x: [m, K]` (any strides) → `y: [m, out]` (contiguous).
///
/// # Panics
/// If `x` is not f32 or its columns are not the weight's.
pub fn launch_spmm<R: CubeRuntime>(x: &CubeTensor<R>, w: &BcrcCube<R>) -> CubeTensor<R> {
    let [out, wk] = w.dims;
    let (m, y, grid) = crate::grid::outputs(x, wk, out, "BCRC spmm");
    let Some((grid, dim)) = grid else {
        return y;
    };
    let (gx, gy, gt) = grid.args();
    spmm_kernel::launch::<R>(
        &x.client,
        grid.count,
        dim,
        x.clone().into_tensor_arg(),
        w.weights.clone().into_array_arg(),
        w.row_offset.clone().into_array_arg(),
        w.row_cols.clone().into_array_arg(),
        w.compact_column.clone().into_array_arg(),
        w.reorder.clone().into_array_arg(),
        y.clone().into_array_arg(),
        m as u32,
        out as u32,
        gx,
        gy,
        gt,
    );
    y
}

impl<R: CubeRuntime> BcrcCube<R> {
    /// Copies a BCRC weight to `device`.
    ///
    /// # Panics
    /// If the weight does not hold together ([`Bcrc::validate`](super::Bcrc::validate)): the
    /// kernel indexes through its arrays unchecked.
    pub fn upload(w: &super::Bcrc, device: &R::Device) -> Self {
        Self::with_weights(
            w,
            upload(device, &w.weights, &[w.weights.len()], DType::F32),
        )
    }

    /// A BCRC weight whose kept values are already on the device (`weights`: `[nnz]`, or one
    /// unused element when it keeps none): copies only its index arrays there. The kernel
    /// reads the weights as a flat array, so a pitched tensor is copied out contiguous.
    ///
    /// # Panics
    /// As [`BcrcCube::upload`], or if `weights` holds fewer values than the weight keeps.
    pub fn with_weights(w: &super::Bcrc, weights: CubeTensor<R>) -> Self {
        if let Err(e) = w.validate() {
            panic!("BCRC upload: {e}");
        }
        let held = weights.meta.shape().num_elements();
        assert!(
            held >= w.weights.len(),
            "BCRC upload: {held} weights on the device for {} kept",
            w.weights.len()
        );
        let weights = burn_cubecl::kernel::into_contiguous(weights);
        let device = weights.device.clone();
        let mut row_cols = vec![0u32; w.out];
        for g in 0..w.groups() {
            let rows = w.occurrence[g] as usize..w.occurrence[g + 1] as usize;
            row_cols[rows].fill(w.column_stride[g]);
        }
        let array = |values: &[u32]| upload(&device, values, &[values.len()], DType::U32);
        Self {
            weights,
            row_offset: array(&w.row_offset),
            row_cols: array(&row_cols),
            compact_column: array(&w.compact_column),
            reorder: array(&w.reorder),
            dims: [w.out, w.k],
        }
    }
}

/// A BCRC weight as `Bcr<B>` holds it: its kept values `[nnz]` are the device tensor (one
/// unused zero when it keeps none), the index arrays go up on first use.
impl crate::decorator::packed::PackedWeight for super::Bcrc {
    const NAME: &'static str = "bcr";
    const KERNEL_ROUTE: &'static str = "bcrc kernel";
    const HOST_ROUTE: &'static str = "bcrc host";
    type Cube<R: CubeRuntime> = BcrcCube<R>;

    fn view(&self) -> (usize, usize) {
        (self.out, self.k)
    }
    fn dense_view(&self) -> Vec<f32> {
        self.dense()
    }
    fn device_values(&self) -> burn_backend::TensorData {
        if self.weights.is_empty() {
            burn_backend::TensorData::new(vec![0f32], [1])
        } else {
            burn_backend::TensorData::new(self.weights.clone(), [self.weights.len()])
        }
    }
    fn multiplies(&self, m: usize) -> u64 {
        (m * self.weights.len()) as u64
    }
    fn upload<R: CubeRuntime>(&self, values: CubeTensor<R>) -> BcrcCube<R> {
        BcrcCube::with_weights(self, values)
    }
    fn launch<R: CubeRuntime>(x: &CubeTensor<R>, cube: &BcrcCube<R>) -> CubeTensor<R> {
        launch_spmm(x, cube)
    }
    fn host_product(&self, x: &[f32], m: usize) -> Vec<f32> {
        super::reference::spmm(x, m, self)
    }
    fn host_product_cols(&self, xt: &[f32], m: usize, yt: &mut [f32]) {
        super::reference::spmm_cols_into(xt, m, self, yt)
    }
}
