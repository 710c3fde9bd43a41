//! Sums and means along one axis with a routine that suits the shape on a GPU.
//!
//! burn-cubecl 0.21 without its `autotune` feature reduces every axis with cubek's *unit*
//! routine: one unit (thread) per output value, looping over the whole axis. Batch norm's
//! statistics are the worst case for it: `mean_dim(1)` of `[C, B·H·W]` runs `C` units (64 for
//! ResNet's first stage), each over `B·H·W` values (131,072 at batch 128), so a GPU of a hundred
//! multiprocessors gets two warps. Burn's autotune would time the unit, plane and cube routines
//! and, by its own priorities, consider the cube routine only below 128 output vectors. Ember
//! builds without autotune (`docs/architecture.md`) and picks by shape instead ([`routine`]):
//! the **cube** routine (a whole cube of units shares one output's axis) where there are few
//! outputs and a long axis, the unit routine otherwise. A CPU running the kernels (lavapipe)
//! keeps the unit routine, which suits it.
//!
//! The cube routine adds the axis in another order than the unit routine, so its sums differ in
//! the last bits; Ember's GEMM routes use it (`--conv burn` keeps Burn's reductions, bit for
//! bit).

use crate::decorator::{CubeVisitor, KernelBackend};
use burn_backend::TensorMetadata;
use burn_backend::tensor::FloatTensor;
use burn_cubecl::CubeRuntime;
use burn_cubecl::kernel::reduce::{KernelReduceStrategy, reduce_dim};
use burn_cubecl::tensor::CubeTensor;
use cubek::reduce::ReduceStrategy;
use cubek::reduce::components::instructions::ReduceOperationConfig;
use cubek::reduce::launch::{RoutineStrategy, VectorizationStrategy};
use cubek::reduce::routines::{BlueprintStrategy, cube::CubeStrategy, unit::UnitStrategy};

/// Which of cubek's reduction routines runs a reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routine {
    /// One unit per output value, over the whole axis (burn-cubecl's choice without autotune).
    Unit,
    /// One cube per output value, its units sharing the axis.
    Cube,
}

/// Outputs up to which the cube routine is chosen: with one cube each, 4,096 outputs fill a
/// GPU of 132 multiprocessors many times over.
pub const CUBE_MAX_OUTPUTS: usize = 4096;

/// Axis length from which the cube routine is chosen: every unit of a 256-unit cube then adds at
/// least four values.
pub const CUBE_MIN_AXIS: usize = 1024;

/// The routine for reducing an axis of `axis` values into each of `outputs` values, on a GPU
/// (`gpu`) or a CPU running the kernels.
pub fn routine(outputs: usize, axis: usize, gpu: bool) -> Routine {
    if gpu && outputs <= CUBE_MAX_OUTPUTS && axis >= CUBE_MIN_AXIS {
        Routine::Cube
    } else {
        Routine::Unit
    }
}

/// A sum or a mean along one axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// `sum_dim`.
    Sum,
    /// `mean_dim`.
    Mean,
}

/// `t` reduced along `dim` by `routine` (the dimension kept, of size 1), as burn-cubecl's
/// `float_sum_dim` / `float_mean_dim` return it.
pub fn reduce_with<R: CubeRuntime>(
    t: CubeTensor<R>,
    dim: usize,
    reduction: Reduction,
    routine: Routine,
) -> Result<CubeTensor<R>, String> {
    let use_planes = crate::runtime::is_gpu(&t.client)
        && t.client
            .properties()
            .features
            .plane
            .contains(cubecl::features::Plane::Ops);
    let routine = match routine {
        Routine::Unit => RoutineStrategy::Unit(BlueprintStrategy::Inferred(UnitStrategy)),
        Routine::Cube => {
            RoutineStrategy::Cube(BlueprintStrategy::Inferred(CubeStrategy { use_planes }))
        }
    };
    let config = match reduction {
        Reduction::Sum => ReduceOperationConfig::Sum,
        Reduction::Mean => ReduceOperationConfig::Mean,
    };
    let strategy = ReduceStrategy {
        routine,
        vectorization: VectorizationStrategy {
            parallel_output_vectorization: false,
        },
    };
    reduce_dim(
        t,
        None,
        dim,
        KernelReduceStrategy::Specific(strategy),
        config,
    )
    .map_err(|e| format!("{e:?}"))
}

/// `t` reduced along `dim` on the routine [`routine`] picks for its shape, where `B` runs
/// CubeCL kernels on a GPU and the pick is not the unit routine; `Err(t)` otherwise (the caller
/// runs the backend's own op), and where cubek refuses the shape.
pub fn reduce_dim_routed<B: KernelBackend>(
    t: FloatTensor<B>,
    dim: usize,
    reduction: Reduction,
) -> Result<FloatTensor<B>, FloatTensor<B>> {
    if B::cube_runtime().is_none() {
        return Err(t);
    }
    B::visit(Routed { dim, reduction }, vec![t])
}

struct Routed {
    dim: usize,
    reduction: Reduction,
}

impl<B: KernelBackend> CubeVisitor<B> for Routed {
    type Output = Result<FloatTensor<B>, FloatTensor<B>>;

    fn cube<R: CubeRuntime>(
        self,
        inputs: Vec<CubeTensor<R>>,
        rewrap: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> Self::Output {
        let t = inputs.into_iter().next().expect("one operand");
        let shape = t.shape();
        let axis = shape[self.dim];
        let outputs = shape.num_elements() / axis.max(1);
        let gpu = crate::runtime::is_gpu(&t.client);
        let f32 = t.dtype == burn_backend::DType::F32;
        if !f32 || routine(outputs, axis, gpu) == Routine::Unit {
            return Err(rewrap(t));
        }
        reduce_with(t.clone(), self.dim, self.reduction, Routine::Cube)
            .map(rewrap)
            .map_err(|_| rewrap(t))
    }

    fn host(self, inputs: Vec<FloatTensor<B>>) -> Self::Output {
        Err(inputs.into_iter().next().expect("one operand"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_outputs_over_a_long_axis_take_the_cube_routine_on_a_gpu_only() {
        // batch norm's mean of ResNet's first stage at batch 128: 64 channels × 131,072
        assert_eq!(routine(64, 131_072, true), Routine::Cube);
        assert_eq!(routine(64, 131_072, false), Routine::Unit);
        // many outputs fill the GPU one unit each; short axes leave a cube's units idle
        assert_eq!(routine(65_536, 128, true), Routine::Unit);
        assert_eq!(routine(CUBE_MAX_OUTPUTS + 1, 4096, true), Routine::Unit);
        assert_eq!(routine(64, CUBE_MIN_AXIS - 1, true), Routine::Unit);
        assert_eq!(
            routine(CUBE_MAX_OUTPUTS, CUBE_MIN_AXIS, true),
            Routine::Cube
        );
    }
}
