//! Launch grids within the runtime's limits, and what the sparse products (HiNM's and BCRC's
//! kernels) share on the device.
//!
//! **Grids.** A runtime bounds the cubes of a launch per dimension: 65,535 in `y` and `z` on
//! CUDA (2³¹ − 1 in `x`), 65,535 in every dimension on wgpu. A kernel's natural grid (columns ×
//! rows × batch) outgrows that at large batches: im2col's rows are channels × kernel offsets,
//! col2im's are batch × channels (ResNet-18's last stage at batch 128: 65,536). Every kernel
//! here therefore launches on a **virtual grid** (`[x, y, z]` cubes, any sizes): [`Grid`] lays
//! its cubes in order onto a runtime grid that fits the limits ([`spread`]), and the kernel
//! finds its virtual position from its linear `CUBE_POS` ([`cube_at`]); cubes past the end stop
//! at once. Integer divisions once per cube, nothing per unit.
//!
//! **Sparse products.** Their weights' arrays uploaded, and the output and launch grid — one
//! unit per output of `y: [m, out]`, units along `x` over the outputs' columns (consecutive
//! weight rows, which share their loads) and along `y` over the activation rows.

use burn_cubecl::CubeRuntime;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_std::{DType, Shape};
use cubecl::prelude::*;

/// Units of a cube along each axis.
const UNITS: u32 = 16;

/// A virtual grid of `[x, y, z]` cubes laid onto a runtime's grid: the launch's cube count and
/// the arguments its kernel passes to [`cube_at`].
#[derive(Clone, Debug)]
pub struct Grid {
    /// The runtime grid (every dimension within the runtime's limits).
    pub count: CubeCount,
    /// Virtual cubes along `x`.
    pub x: u32,
    /// Virtual cubes along `y`.
    pub y: u32,
    /// Virtual cubes in all.
    pub total: u32,
}

impl Grid {
    /// `cubes = [x, y, z]` virtual cubes on `client`'s runtime.
    ///
    /// # Panics
    /// If the grid holds more than `u32::MAX` cubes, or more than the runtime's grid holds.
    pub fn new<R: Runtime>(client: &ComputeClient<R>, cubes: [usize; 3]) -> Self {
        Self::within(client.properties().hardware.max_cube_count, cubes)
    }

    /// [`Grid::new`] under the per-dimension limits `max`.
    pub fn within(max: (u32, u32, u32), cubes: [usize; 3]) -> Self {
        let total = cubes.iter().try_fold(1u32, |t, &c| {
            u32::try_from(c).ok().and_then(|c| t.checked_mul(c))
        });
        let total = total.unwrap_or_else(|| panic!("a launch of {cubes:?} cubes: over 2^32"));
        let [x, y, _] = cubes.map(|c| c as u32);
        let count = if x <= max.0 && y <= max.1 && cubes[2] as u32 <= max.2 {
            CubeCount::Static(x, y, cubes[2] as u32)
        } else {
            let [hx, hy, hz] = spread(max, total);
            CubeCount::Static(hx, hy, hz)
        };
        Self { count, x, y, total }
    }

    /// The kernel arguments of [`cube_at`]: `x`, `y`, `total`.
    pub fn args(&self) -> (u32, u32, u32) {
        (self.x, self.y, self.total)
    }
}

/// `total` cubes laid onto a grid within `max` per dimension: `x` as wide as it may be, then
/// `y`, then `z`; the product is at least `total`.
///
/// # Panics
/// If `max` cannot hold `total` cubes.
pub fn spread(max: (u32, u32, u32), total: u32) -> [u32; 3] {
    let total = u64::from(total.max(1));
    let x = total.min(u64::from(max.0));
    let y = total.div_ceil(x).min(u64::from(max.1));
    let z = total.div_ceil(x * y);
    assert!(
        z <= u64::from(max.2),
        "a launch of {total} cubes does not fit a grid of {max:?}"
    );
    [x as u32, y as u32, z as u32]
}

/// A cube's position on its launch's virtual grid ([`Grid`]).
#[derive(CubeType, Clone, Copy)]
pub struct CubeAt {
    /// Along `x`.
    pub x: usize,
    /// Along `y`.
    pub y: usize,
    /// Along `z`.
    pub z: usize,
}

/// This cube's position on the virtual grid of `x × y × …` cubes, `total` in all ([`Grid::args`]);
/// a cube past the last one ends here (the whole cube: call it before any barrier).
#[cube]
pub fn cube_at(x: u32, y: u32, total: u32) -> CubeAt {
    if CUBE_POS >= total as usize {
        terminate!();
    }
    let (x, y) = (x as usize, y as usize);
    CubeAt {
        x: CUBE_POS % x,
        y: CUBE_POS / x % y,
        z: CUBE_POS / (x * y),
    }
}

/// For `x: [m, K]` times a weight `out × K`: `m`, a contiguous f32 `[m, out]` output on `x`'s
/// device (contiguous even where the runtime pads the rows of the tensors it creates: the
/// kernels write it as a flat array), and the (virtual) grid of one unit per output, `None`
/// when there is no output to compute.
///
/// # Panics
/// If `x` is not f32 or its columns are not the weight's `k` (`what` names the product).
pub(crate) fn outputs<R: CubeRuntime>(
    x: &CubeTensor<R>,
    k: usize,
    out: usize,
    what: &str,
) -> (usize, CubeTensor<R>, Option<(Grid, CubeDim)>) {
    let [m, xk] = x.meta.shape().dims::<2>();
    assert_eq!(xk, k, "{what}: x has {xk} columns, the weight {k}");
    assert_eq!(x.dtype, DType::F32, "{what} works on f32 tensors");
    let y = f32_output(x, Shape::new([m, out]));
    let grid = (m * out > 0).then(|| {
        let cubes = [out.div_ceil(UNITS as usize), m.div_ceil(UNITS as usize), 1];
        (Grid::new(&x.client, cubes), CubeDim::new_2d(UNITS, UNITS))
    });
    (m, y, grid)
}

/// `t` checked to be f32 and to hold `n` values (`against` names what `n` counts, in the
/// message), fewer than `limit`, then made contiguous: the element-wise kernels read their
/// inputs as flat arrays.
///
/// # Panics
/// If `t` is not f32, holds another number of values, or `n ≥ limit` (`what` names the op,
/// `name` the input).
pub(crate) fn f32_input<R: CubeRuntime>(
    t: &CubeTensor<R>,
    n: usize,
    limit: u64,
    [what, name, against]: [&str; 3],
) -> CubeTensor<R> {
    assert_eq!(t.dtype, DType::F32, "{what}: {name} must be f32");
    let held = t.meta.num_elements();
    assert_eq!(held, n, "{what}: {name} holds {held} values, {against} {n}");
    assert!(
        (n as u64) < limit,
        "{what}: {n} values do not fit the kernels' {}-bit indices",
        limit.ilog2()
    );
    burn_cubecl::kernel::into_contiguous(t.clone())
}

/// A new contiguous f32 tensor of `shape` on `like`'s device (what the element-wise kernels
/// write as a flat array).
pub(crate) fn f32_output<R: CubeRuntime>(like: &CubeTensor<R>, shape: Shape) -> CubeTensor<R> {
    empty_device_contiguous_dtype(like.client.clone(), like.device.clone(), shape, DType::F32)
}

/// Values in a pack of the flat element-wise kernels where the length divides it.
pub(crate) const PACK: usize = 4;

/// `(client, vector size, packs, cube count, cube dim)` of a flat element-wise launch over `n`
/// values on `like`'s device: packs of [`PACK`] values where `n` divides into them, single
/// values otherwise, one unit per pack, 256 units a cube, laid within the runtime's limits by
/// [`calculate_cube_count_elemwise`](cubecl::calculate_cube_count_elemwise).
pub(crate) fn packs<R: CubeRuntime>(
    like: &CubeTensor<R>,
    n: usize,
) -> (ComputeClient<R>, usize, u32, CubeCount, CubeDim) {
    let client = like.client.clone();
    let vector = if n.is_multiple_of(PACK) { PACK } else { 1 };
    let packs = n / vector;
    let dim = CubeDim::new_1d(256);
    let count = cubecl::calculate_cube_count_elemwise(&client, packs, dim);
    (client, vector, packs as u32, count, dim)
}

/// `values` as a contiguous tensor of `shape` on `device`. An empty array becomes one unused
/// element: a kernel argument needs a buffer.
pub(crate) fn upload<R: CubeRuntime, T: bytemuck::Pod + Default>(
    device: &R::Device,
    values: &[T],
    shape: &[usize],
    dtype: DType,
) -> CubeTensor<R> {
    let client = R::client(device);
    let one = [T::default()];
    let (values, shape) = if values.is_empty() {
        (&one[..], vec![1])
    } else {
        (values, shape.to_vec())
    };
    CubeTensor::new_contiguous(
        client.clone(),
        device.clone(),
        Shape::from(shape),
        client.create_from_slice(bytemuck::cast_slice(values)),
        dtype,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_within_the_limits_launch_as_they_are() {
        let g = Grid::within((65_535, 65_535, 65_535), [3, 700, 5]);
        assert!(
            matches!(g.count, CubeCount::Static(3, 700, 5)),
            "{:?}",
            g.count
        );
        assert_eq!((g.x, g.y, g.total), (3, 700, 10_500));
    }

    #[test]
    fn grids_past_a_limit_are_spread_over_every_dimension() {
        // CUDA: 65,535 in y; wgpu: 65,535 in x too
        for (max, cubes) in [
            ((i32::MAX as u32, 65_535, 65_535), [2usize, 65_536, 1]),
            ((65_535, 65_535, 65_535), [70_000, 1, 1]),
            ((65_535, 65_535, 65_535), [4, 3, 70_000]),
            ((7, 5, 9), [4, 6, 11]),
        ] {
            let g = Grid::within(max, cubes);
            let CubeCount::Static(x, y, z) = g.count else {
                unreachable!("static grids")
            };
            assert!(x <= max.0 && y <= max.1 && z <= max.2, "{max:?} {cubes:?}");
            let total: usize = cubes.iter().product();
            assert!((x * y * z) as usize >= total, "every cube is launched");
            assert_eq!(g.total as usize, total);
            // the positions cube_at gives to the launched cubes cover the virtual grid once
            let mut seen = vec![false; total];
            for pos in 0..(x * y * z) as usize {
                if pos < total {
                    let (vx, vy, vz) = (
                        pos % cubes[0],
                        pos / cubes[0] % cubes[1],
                        pos / (cubes[0] * cubes[1]),
                    );
                    assert!(vz < cubes[2]);
                    let at = (vz * cubes[1] + vy) * cubes[0] + vx;
                    assert!(!seen[at]);
                    seen[at] = true;
                }
            }
            assert!(seen.into_iter().all(|s| s));
        }
    }

    #[test]
    #[should_panic(expected = "does not fit a grid")]
    fn a_grid_no_runtime_holds_is_refused() {
        spread((2, 2, 2), 9);
    }
}
