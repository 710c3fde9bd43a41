//! The host implementation of the optimizer steps: the kernels' test oracle, and the steps
//! themselves on backends without CubeCL kernels (ndarray). Each value is rounded as the module
//! docs ([`super`]) list, in that order; chunks of the values run on rayon's threads.

use super::{AdamStep, SgdStep};
use rayon::prelude::*;

/// Values a thread steps at a time: the steps are element-wise, so the chunks change nothing but
/// which thread computes a value.
const CHUNK: usize = 1 << 14;

/// One Adam step: `(parameter, first moment, second moment)` after it. `moments` are the
/// moments before it (`None` at the first step: `s.first`). Multi-threaded (rayon).
///
/// # Panics
/// If the slices' lengths differ, or `moments` is given at a first step or missing at a later
/// one.
pub fn adam(
    param: &[f32],
    grad: &[f32],
    moments: Option<(&[f32], &[f32])>,
    s: &AdamStep,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let n = param.len();
    assert_eq!(grad.len(), n, "Adam: the gradient's length");
    assert_eq!(
        moments.is_none(),
        s.first,
        "Adam: moments exist after the first step only"
    );
    if let Some((m, v)) = moments {
        assert!(m.len() == n && v.len() == n, "Adam: the moments' lengths");
    }
    let (mut p_out, mut m_out, mut v_out) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    let chunk = |k: usize, (p_out, (m_out, v_out)): (&mut [f32], (&mut [f32], &mut [f32]))| {
        let r = k * CHUNK..k * CHUNK + p_out.len();
        let moments = moments.map(|(m, v)| (&m[r.clone()], &v[r.clone()]));
        for i in 0..p_out.len() {
            let p = param[r.start + i];
            let g = decayed(p, grad[r.start + i], s.weight_decay);
            let mut m = g * s.one_minus_beta_1;
            let mut v = (g * g) * s.one_minus_beta_2;
            if let Some((m0, v0)) = moments {
                m += m0[i] * s.beta_1;
                v += v0[i] * s.beta_2;
            }
            let update = (m * s.factor) / (v.sqrt() + s.epsilon);
            p_out[i] = p - update * s.lr;
            m_out[i] = m;
            v_out[i] = v;
        }
    };
    if n <= CHUNK {
        // one chunk: on the calling thread (handing it to the pool costs more than small steps)
        chunk(0, (&mut p_out, (&mut m_out, &mut v_out)));
    } else {
        p_out
            .par_chunks_mut(CHUNK)
            .zip(m_out.par_chunks_mut(CHUNK).zip(v_out.par_chunks_mut(CHUNK)))
            .enumerate()
            .for_each(|(k, outs)| chunk(k, outs));
    }
    (p_out, m_out, v_out)
}

/// One SGD step: `(parameter, velocity)` after it, the velocity `None` without momentum.
/// `velocity` is the velocity before it (`None` at a first step or without momentum).
/// Multi-threaded (rayon).
///
/// # Panics
/// If the slices' lengths differ, or `velocity` is given where the step reads none or missing
/// where it reads one.
pub fn sgd(
    param: &[f32],
    grad: &[f32],
    velocity: Option<&[f32]>,
    s: &SgdStep,
) -> (Vec<f32>, Option<Vec<f32>>) {
    let n = param.len();
    assert_eq!(grad.len(), n, "SGD: the gradient's length");
    let reads = s.momentum.is_some() && !s.first;
    assert_eq!(
        velocity.is_some(),
        reads,
        "SGD: a velocity exists after a first momentum step only"
    );
    if let Some(u) = velocity {
        assert_eq!(u.len(), n, "SGD: the velocity's length");
    }
    let mut p_out = vec![0.0; n];
    let mut u_out = vec![0.0; if s.momentum.is_some() { n } else { 0 }];
    let chunk = |k: usize, (p_out, u_out): (&mut [f32], &mut [f32])| {
        let at = k * CHUNK;
        for i in 0..p_out.len() {
            let p = param[at + i];
            let mut g = decayed(p, grad[at + i], s.weight_decay);
            if let Some((momentum, keep)) = s.momentum {
                if let Some(u) = velocity {
                    g = g * keep + u[at + i] * momentum;
                }
                u_out[i] = g;
            }
            p_out[i] = p - g * s.lr;
        }
    };
    if n <= CHUNK {
        chunk(0, (&mut p_out, &mut u_out));
    } else {
        // without momentum there is no velocity to write: empty chunks stand in
        let mut u_chunks: Vec<&mut [f32]> = u_out.chunks_mut(CHUNK).collect();
        u_chunks.resize_with(n.div_ceil(CHUNK), Default::default);
        p_out
            .par_chunks_mut(CHUNK)
            .zip(u_chunks.into_par_iter())
            .enumerate()
            .for_each(|(k, outs)| chunk(k, outs));
    }
    (p_out, s.momentum.map(|_| u_out))
}

/// `g` with the L2 penalty of `p` added (`p · λ + g`), or `g`.
fn decayed(p: f32, g: f32, weight_decay: Option<f32>) -> f32 {
    match weight_decay {
        Some(l) => p * l + g,
        None => g,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adam_first_step_equals_zero_moments() {
        let (p, g) = (vec![0.5f32, -1.0, 2.0], vec![0.1f32, -0.3, 0.0]);
        let zeros = vec![0.0f32; 3];
        let first = AdamStep::new(0.9, 0.999, 1e-5, Some(0.01), 1, 0.1);
        let later = AdamStep {
            first: false,
            ..first
        };
        assert_eq!(
            adam(&p, &g, None, &first),
            adam(&p, &g, Some((&zeros, &zeros)), &later)
        );
    }

    #[test]
    fn adam_moves_against_the_gradient_by_about_lr() {
        // the first step of Adam moves each value by lr · sign(g) (up to ε)
        let s = AdamStep::new(0.9, 0.999, 1e-8, None, 1, 0.01);
        let (p, m, v) = adam(&[1.0, 1.0], &[0.5, -2.0], None, &s);
        assert!(
            (p[0] - 0.99).abs() < 1e-6 && (p[1] - 1.01).abs() < 1e-6,
            "{p:?}"
        );
        assert_eq!(m, vec![0.5 * s.one_minus_beta_1, -2.0 * s.one_minus_beta_1]);
        assert_eq!(v, vec![0.25 * s.one_minus_beta_2, 4.0 * s.one_minus_beta_2]);
    }

    #[test]
    fn sgd_with_momentum_accumulates_the_velocity() {
        let first = SgdStep::new(Some((0.9, 0.0)), None, 0.1, true);
        let (p, u) = sgd(&[1.0], &[2.0], None, &first);
        assert_eq!((p, u.clone()), (vec![1.0 - 0.2], Some(vec![2.0])));
        let later = SgdStep {
            first: false,
            ..first
        };
        let (p, u) = sgd(&[1.0], &[2.0], u.as_deref(), &later);
        assert_eq!(u, Some(vec![2.0 + 2.0 * 0.9f32]));
        assert_eq!(p, vec![1.0 - (2.0 + 2.0 * 0.9f32) * 0.1f32]);
    }

    #[test]
    fn sgd_without_momentum_keeps_no_velocity_and_decays() {
        let s = SgdStep::new(None, Some(0.5), 0.1, false);
        let (p, u) = sgd(&[2.0], &[1.0], None, &s);
        assert_eq!(u, None);
        assert_eq!(p, vec![2.0 - (2.0f32 * 0.5 + 1.0) * 0.1f32]);
    }

    #[test]
    #[should_panic(expected = "moments exist after the first step only")]
    fn adam_refuses_moments_at_a_first_step() {
        let s = AdamStep::new(0.9, 0.999, 1e-5, None, 1, 0.1);
        adam(&[1.0], &[1.0], Some((&[0.0], &[0.0])), &s);
    }
}
