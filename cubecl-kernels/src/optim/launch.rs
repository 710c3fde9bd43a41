//! Launch of the optimizer kernels: inputs checked and made contiguous (the kernels read flat
//! arrays), new contiguous outputs of the parameter's shape, packs of 4 values where the length
//! allows, and the grid ([`crate::grid::packs`] lays it within the runtime's limits).

use super::kernel::{adam_kernel, sgd_kernel};
use super::{AdamStep, SgdStep};
use crate::grid::{PACK, f32_output as output, packs as grid};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;
use burn_std::Shape;

/// Adam's step on the device: `(parameter, first moment, second moment)` after it, each a new
/// contiguous tensor of `param`'s shape. `moments` are the moments before it, `None` at a first
/// step (`s.first`).
///
/// # Panics
/// If a tensor is not f32, holds another number of values than `param`, or more than
/// `u32::MAX`; or if `moments` is given at a first step or missing at a later one.
pub fn launch_adam<R: CubeRuntime>(
    param: &CubeTensor<R>,
    grad: &CubeTensor<R>,
    moments: Option<(&CubeTensor<R>, &CubeTensor<R>)>,
    s: &AdamStep,
) -> (CubeTensor<R>, CubeTensor<R>, CubeTensor<R>) {
    assert_eq!(
        moments.is_none(),
        s.first,
        "Adam: moments exist after the first step only"
    );
    let n = param.meta.num_elements();
    let p = input(param, n, "Adam", "the parameter");
    let g = input(grad, n, "Adam", "the gradient");
    let (m, v) = match moments {
        Some((m, v)) => (
            input(m, n, "Adam", "the first moment"),
            input(v, n, "Adam", "the second moment"),
        ),
        None => (p.clone(), p.clone()), // not read at a first step
    };
    let shape = param.meta.shape().clone();
    let (p_out, m_out, v_out) = (
        output(&p, shape.clone()),
        output(&p, shape.clone()),
        output(&p, shape),
    );
    if n == 0 {
        return (p_out, m_out, v_out);
    }
    let (client, vector, packs, count, dim) = grid(&p, n);
    // SAFETY: every unit checks its pack against `packs`, the length in packs of every array
    // it reads or writes (the moments' inputs are read only after a first step, when they are
    // the moments checked above).
    unsafe {
        adam_kernel::launch_unchecked::<R>(
            &client,
            count,
            dim,
            vector,
            p.into_array_arg(),
            g.into_array_arg(),
            m.into_array_arg(),
            v.into_array_arg(),
            p_out.clone().into_array_arg(),
            m_out.clone().into_array_arg(),
            v_out.clone().into_array_arg(),
            packs,
            s.beta_1,
            s.one_minus_beta_1,
            s.beta_2,
            s.one_minus_beta_2,
            s.factor,
            s.epsilon,
            s.lr,
            s.weight_decay.unwrap_or(0.0),
            s.first,
            s.weight_decay.is_some(),
        )
    };
    (p_out, m_out, v_out)
}

/// SGD's step on the device: `(parameter, velocity)` after it, new contiguous tensors of
/// `param`'s shape (no velocity without momentum). `velocity` is the velocity before it, given
/// only with momentum after a first step.
///
/// # Panics
/// If a tensor is not f32, holds another number of values than `param`, or more than
/// `u32::MAX`; or if `velocity` is given where the step reads none or missing where it reads
/// one.
pub fn launch_sgd<R: CubeRuntime>(
    param: &CubeTensor<R>,
    grad: &CubeTensor<R>,
    velocity: Option<&CubeTensor<R>>,
    s: &SgdStep,
) -> (CubeTensor<R>, Option<CubeTensor<R>>) {
    let reads = s.momentum.is_some() && !s.first;
    assert_eq!(
        velocity.is_some(),
        reads,
        "SGD: a velocity exists after a first momentum step only"
    );
    let n = param.meta.num_elements();
    let p = input(param, n, "SGD", "the parameter");
    let g = input(grad, n, "SGD", "the gradient");
    let u = match velocity {
        Some(u) => input(u, n, "SGD", "the velocity"),
        None => p.clone(), // not read
    };
    let shape = param.meta.shape().clone();
    let p_out = output(&p, shape.clone());
    // without momentum the kernel writes no velocity: a pack's worth of memory stands in
    let u_out = match s.momentum {
        Some(_) => output(&p, shape),
        None => output(&p, Shape::new([PACK])),
    };
    let keeps = s.momentum.is_some();
    if n == 0 {
        return (p_out, keeps.then_some(u_out));
    }
    let (client, vector, packs, count, dim) = grid(&p, n);
    let (mu, keep) = s.momentum.unwrap_or((0.0, 1.0));
    // SAFETY: every unit checks its pack against `packs`, the length in packs of every array
    // it reads or writes; the velocity's arrays are touched only with momentum, when they hold
    // `n` values (checked above).
    unsafe {
        sgd_kernel::launch_unchecked::<R>(
            &client,
            count,
            dim,
            vector,
            p.into_array_arg(),
            g.into_array_arg(),
            u.into_array_arg(),
            p_out.clone().into_array_arg(),
            u_out.clone().into_array_arg(),
            packs,
            mu,
            keep,
            s.lr,
            s.weight_decay.unwrap_or(0.0),
            s.first,
            keeps,
            s.weight_decay.is_some(),
        )
    };
    (p_out, keeps.then_some(u_out))
}

/// `t` checked to hold the parameter's `n` f32 values, within 32-bit indices, contiguous.
fn input<R: CubeRuntime>(t: &CubeTensor<R>, n: usize, what: &str, name: &str) -> CubeTensor<R> {
    crate::grid::f32_input(t, n, 1 << 32, [what, name, "the parameter"])
}
