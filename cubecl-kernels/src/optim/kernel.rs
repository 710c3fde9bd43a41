//! The optimizer kernels, generic over the vector size `N` of a pack (4 or 1, chosen at launch)
//! and, at comptime, over what the step reads: a first step reads no state, weight decay reads
//! the penalty, plain SGD keeps no velocity.

use cubecl::prelude::*;

/// One unit per pack: Adam's step of [`super`]'s docs. At a first step (`first`) `m_in` and
/// `v_in` are not read (the launch passes any array).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub(super) fn adam_kernel<N: Size>(
    param: &Array<Vector<f32, N>>,
    grad: &Array<Vector<f32, N>>,
    m_in: &Array<Vector<f32, N>>,
    v_in: &Array<Vector<f32, N>>,
    param_out: &mut Array<Vector<f32, N>>,
    m_out: &mut Array<Vector<f32, N>>,
    v_out: &mut Array<Vector<f32, N>>,
    packs: u32,
    beta_1: f32,
    one_minus_beta_1: f32,
    beta_2: f32,
    one_minus_beta_2: f32,
    factor: f32,
    epsilon: f32,
    lr: f32,
    penalty: f32,
    #[comptime] first: bool,
    #[comptime] decay: bool,
) {
    let pos = ABSOLUTE_POS;
    if pos < packs as usize {
        let p = param[pos];
        let mut g = grad[pos];
        if decay {
            g = p * Vector::new(penalty) + g;
        }
        let mut m = g * Vector::new(one_minus_beta_1);
        let mut v = (g * g) * Vector::new(one_minus_beta_2);
        if !first {
            m = m_in[pos] * Vector::new(beta_1) + m;
            v = v_in[pos] * Vector::new(beta_2) + v;
        }
        let update = (m * Vector::new(factor)) / (v.sqrt() + Vector::new(epsilon));
        param_out[pos] = p - update * Vector::new(lr);
        m_out[pos] = m;
        v_out[pos] = v;
    }
}

/// One unit per pack: SGD's step of [`super`]'s docs. `u_in` is read only with `momentum` after
/// a first step, `u_out` written only with `momentum` (the launch passes any array otherwise).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub(super) fn sgd_kernel<N: Size>(
    param: &Array<Vector<f32, N>>,
    grad: &Array<Vector<f32, N>>,
    u_in: &Array<Vector<f32, N>>,
    param_out: &mut Array<Vector<f32, N>>,
    u_out: &mut Array<Vector<f32, N>>,
    packs: u32,
    mu: f32,
    keep: f32,
    lr: f32,
    penalty: f32,
    #[comptime] first: bool,
    #[comptime] momentum: bool,
    #[comptime] decay: bool,
) {
    let pos = ABSOLUTE_POS;
    if pos < packs as usize {
        let p = param[pos];
        let mut g = grad[pos];
        if decay {
            g = p * Vector::new(penalty) + g;
        }
        if momentum {
            if !first {
                g = g * Vector::new(keep) + u_in[pos] * Vector::new(mu);
            }
            u_out[pos] = g;
        }
        param_out[pos] = p - g * Vector::new(lr);
    }
}
