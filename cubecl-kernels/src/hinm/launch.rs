//! Launch of the HiNM sparse-product kernel.

use super::kernel::spmm_kernel;
use crate::grid::upload;
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;
use burn_std::DType;

/// A packed weight's arrays on the device (see [`Packed`](super::Packed)).
#[derive(Clone, Debug)]
pub struct PackedCube<R: CubeRuntime> {
    /// `[out, nnz / 2]` f32.
    pub values: CubeTensor<R>,
    /// `[out, meta_words]` u32.
    pub meta: CubeTensor<R>,
    /// `[tiles, nnz]` u32.
    pub cols: CubeTensor<R>,
    /// `[out]` u32.
    pub out_perm: CubeTensor<R>,
    /// Rows, columns, tile height and kept columns per tile of the view.
    pub dims: [usize; 4],
}

/// Launches `spmm_kernel`: `x: [m, K]` (any strides) → `y: [m, out]` (contiguous).
///
/// # Panics
/// If `x` is not f32 or its columns are not the weight's.
pub fn launch_spmm<R: CubeRuntime>(x: &CubeTensor<R>, w: &PackedCube<R>) -> CubeTensor<R> {
    let [out, wk, v, nnz] = w.dims;
    let (m, y, grid) = crate::grid::outputs(x, wk, out, "HiNM spmm");
    let Some((grid, dim)) = grid else {
        return y;
    };
    let (gx, gy, gt) = grid.args();
    spmm_kernel::launch::<R>(
        &x.client,
        grid.count,
        dim,
        x.clone().into_tensor_arg(),
        w.values.clone().into_array_arg(),
        w.meta.clone().into_array_arg(),
        w.cols.clone().into_array_arg(),
        w.out_perm.clone().into_array_arg(),
        y.clone().into_array_arg(),
        m as u32,
        out as u32,
        v as u32,
        nnz as u32,
        gx,
        gy,
        gt,
    );
    y
}

impl<R: CubeRuntime> PackedCube<R> {
    /// Copies a (validated) packed weight to `device`.
    pub fn upload(w: &super::Packed, device: &R::Device) -> Self {
        let values = upload(device, &w.values, &[w.out, w.nnz / 2], DType::F32);
        Self::with_values(w, values)
    }

    /// A packed weight whose kept values `[out, nnz / 2]` are already on the device: copies
    /// only its index arrays there. The kernel reads the values as a flat array, so a pitched
    /// tensor (burn-cuda pads the rows of the tensors it creates) is copied out contiguous.
    pub fn with_values(w: &super::Packed, values: CubeTensor<R>) -> Self {
        let values = burn_cubecl::kernel::into_contiguous(values);
        let device = values.device.clone();
        let words = super::meta_words(w.groups());
        Self {
            values,
            meta: upload(&device, &w.meta, &[w.out, words], DType::U32),
            cols: upload(&device, &w.cols, &[w.out / w.v, w.nnz], DType::U32),
            out_perm: upload(&device, &w.out_perm, &[w.out], DType::U32),
            dims: [w.out, w.k, w.v, w.nnz],
        }
    }
}

/// A HiNM-packed weight as `Hinm<B>` holds it: its kept values `[out, nnz / 2]` are the device
/// tensor, the index arrays go up on first use.
impl crate::decorator::packed::PackedWeight for super::Packed {
    const NAME: &'static str = "hinm";
    const KERNEL_ROUTE: &'static str = "hinm kernel";
    const HOST_ROUTE: &'static str = "hinm host";
    type Cube<R: CubeRuntime> = PackedCube<R>;

    fn view(&self) -> (usize, usize) {
        (self.out, self.k)
    }
    fn dense_view(&self) -> Vec<f32> {
        self.dense()
    }
    fn device_values(&self) -> burn_backend::TensorData {
        burn_backend::TensorData::new(self.values.clone(), [self.out, self.nnz / 2])
    }
    fn multiplies(&self, m: usize) -> u64 {
        (m * self.out * self.nnz / 2) as u64
    }
    fn upload<R: CubeRuntime>(&self, values: CubeTensor<R>) -> PackedCube<R> {
        PackedCube::with_values(self, values)
    }
    fn launch<R: CubeRuntime>(x: &CubeTensor<R>, cube: &PackedCube<R>) -> CubeTensor<R> {
        launch_spmm(x, cube)
    }
    fn host_product(&self, x: &[f32], m: usize) -> Vec<f32> {
        super::reference::spmm(x, m, self)
    }
    fn host_product_cols(&self, xt: &[f32], m: usize, yt: &mut [f32]) {
        super::reference::spmm_cols_into(xt, m, self, yt)
    }
}
