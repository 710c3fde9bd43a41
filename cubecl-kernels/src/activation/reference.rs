//! The host implementation of the activation kernels, the oracle of their tests. ReLU's
//! backward at one value is the one Ember's host element-wise walk applies
//! ([`crate::elementwise::relu_backward_value`]), and so are sigmoid's
//! ([`crate::elementwise::sigmoid_value`], [`crate::elementwise::sigmoid_backward_value`]).
//!
//! ReLU's functions are the kernels' values bit for bit. GELU's follow Burn's formula in f32,
//! operation for operation, with the error function of CubeCL's polyfill (Abramowitz and
//! Stegun 7.1.26, as CubeCL computes it where a runtime has no `erf` of its own) and the host's
//! `exp`, `tanh` and `powf`: a runtime's own `exp`, `tanh`, `pow` (and CUDA's `erff`) round
//! differently, so the kernels meet these within a tolerance, and Burn's composite on the same
//! runtime bit for bit where the runtime does not contract multiply-adds.

/// ReLU of one value: `0` where `x ≤ 0`, else `x` (NaN stays NaN).
pub fn relu_value(x: f32) -> f32 {
    match x <= 0.0 {
        true => 0.0,
        false => x,
    }
}

pub use crate::elementwise::relu_backward_value;

/// ReLU of `x`.
pub fn relu(x: &[f32]) -> Vec<f32> {
    x.iter().map(|&v| relu_value(v)).collect()
}

/// ReLU's backward given the forward's output `y` and the gradient `g`.
///
/// # Panics
/// If `y` and `g` differ in length.
pub fn relu_backward(y: &[f32], g: &[f32]) -> Vec<f32> {
    assert_eq!(
        y.len(),
        g.len(),
        "ReLU backward: the output and the gradient"
    );
    y.iter()
        .zip(g)
        .map(|(&y, &g)| relu_backward_value(y, g))
        .collect()
}

/// The error function as CubeCL's polyfill computes it: `1 − t·(a₁ + t·(a₂ + …))·e^(−x²)`,
/// `t = 1 / (1 + p·|x|)`, odd.
fn erf(x: f32) -> f32 {
    let (p, a1, a2, a3, a4, a5) = (
        0.3275911f32,
        0.2548296f32,
        -0.28449674f32,
        1.4214137f32,
        -1.453152f32,
        1.0614054f32,
    );
    let a = x.abs();
    let t = 1.0 / (1.0 + p * a);
    let tmp = ((((a5 * t + a4) * t) + a3) * t + a2) * t + a1;
    let e = 1.0 - (tmp * t * (-a * a).exp());
    if x < 0.0 { -e } else { e }
}

/// Burn's GELU of one value: `x · (erf(x / √2) + 1) / 2`.
pub fn gelu_value(x: f32) -> f32 {
    let [sqrt_2, one, two] = GELU_FORWARD;
    (x * (erf(x / sqrt_2) + one)) / two
}

/// Burn's GELU backward at one value: with `i₁ = x³·k₁ + x·k₂`, `i₂ = x³·k₃ + x·k₄` and
/// `t = tanh(i₁)`, the gradient `g` times `t·½ + (i₂·(1 − t²) + ½)`.
pub fn gelu_backward_value(x: f32, g: f32) -> f32 {
    let [k1, k2, k3, k4, power] = GELU_BACKWARD;
    let x3 = x.powf(power);
    let (inner_1, inner_2) = (x3 * k1 + x * k2, x3 * k3 + x * k4);
    let t = inner_1.tanh();
    let sech = -(t * t) + 1.0; // Burn negates by multiplying by −1: the same value
    (t * 0.5 + (inner_2 * sech + 0.5)) * g
}

/// Burn's GELU of `x`.
pub fn gelu(x: &[f32]) -> Vec<f32> {
    x.iter().map(|&v| gelu_value(v)).collect()
}

/// Burn's GELU backward given the forward's input `x` and the gradient `g`.
///
/// # Panics
/// If `x` and `g` differ in length.
pub fn gelu_backward(x: &[f32], g: &[f32]) -> Vec<f32> {
    assert_eq!(
        x.len(),
        g.len(),
        "GELU backward: the input and the gradient"
    );
    x.iter()
        .zip(g)
        .map(|(&x, &g)| gelu_backward_value(x, g))
        .collect()
}

pub use crate::elementwise::{
    GELU_BACKWARD, GELU_FORWARD, SIGMOID, sigmoid_backward_value, sigmoid_value,
};

/// Burn's sigmoid of `x`.
pub fn sigmoid(x: &[f32]) -> Vec<f32> {
    x.iter().map(|&v| sigmoid_value(v)).collect()
}

/// Burn's sigmoid backward given the forward's output `y` and the gradient `g`.
///
/// # Panics
/// If `y` and `g` differ in length.
pub fn sigmoid_backward(y: &[f32], g: &[f32]) -> Vec<f32> {
    assert_eq!(
        y.len(),
        g.len(),
        "sigmoid backward: the output and the gradient"
    );
    y.iter()
        .zip(g)
        .map(|(&y, &g)| sigmoid_backward_value(y, g))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relu_zeroes_what_is_not_positive_and_keeps_nan() {
        let x = [
            -2.0,
            -0.0,
            0.0,
            1e-30,
            3.5,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ];
        let y = relu(&x);
        assert_eq!(y, [0.0, 0.0, 0.0, 1e-30, 3.5, f32::INFINITY, 0.0]);
        // a positive zero for −0, as Burn's masked fill writes
        assert!(y[..3].iter().all(|v| v.to_bits() == 0));
        assert!(relu(&[f32::NAN])[0].is_nan());
    }

    #[test]
    fn the_backward_passes_the_gradient_where_the_output_is_positive_or_nan() {
        let y = [0.0, -0.0, 2.0, f32::NAN, -1.0];
        let g = [5.0, 6.0, 7.0, 8.0, f32::NAN];
        assert_eq!(relu_backward(&y, &g), [0.0, 0.0, 7.0, 8.0, 0.0]);
    }

    #[test]
    #[should_panic(expected = "the output and the gradient")]
    fn the_backward_refuses_inputs_of_other_lengths() {
        relu_backward(&[1.0], &[1.0, 2.0]);
    }

    #[test]
    fn gelu_is_the_error_function_form_within_the_polyfills_error() {
        // erf(1) = 0.8427007929497149, erf(−0.5) = −0.5204998778130465
        for (x, erf_x) in [
            (2f64.sqrt(), 0.8427007929497149),
            (-0.5 * 2f64.sqrt(), -0.5204998778130465),
        ] {
            let want = x * (1.0 + erf_x) / 2.0;
            assert!((f64::from(gelu_value(x as f32)) - want).abs() < 1e-6, "{x}");
        }
        assert_eq!(gelu_value(0.0), 0.0);
        assert!((gelu_value(10.0) - 10.0).abs() < 1e-5 && gelu_value(-10.0).abs() < 1e-5);
    }

    #[test]
    fn sigmoid_is_the_logistic_function_and_its_backward_its_derivative() {
        for x in [-20.0f64, -3.0, -0.5, 0.0, 0.25, 4.0, 30.0] {
            let want = 1.0 / (1.0 + (-x).exp());
            let y = sigmoid_value(x as f32);
            assert!((f64::from(y) - want).abs() < 1e-6, "{x}: {y} vs {want}");
            let d = want * (1.0 - want) * 1.5;
            let got = f64::from(sigmoid_backward_value(y, 1.5));
            assert!((got - d).abs() < 1e-6, "{x}: {got} vs {d}");
        }
        // the limits, and NaN through
        assert_eq!(sigmoid(&[f32::NEG_INFINITY, f32::INFINITY]), [0.0, 1.0]);
        assert!(sigmoid_value(f32::NAN).is_nan());
    }

    #[test]
    #[should_panic(expected = "sigmoid backward: the output and the gradient")]
    fn sigmoids_backward_refuses_inputs_of_other_lengths() {
        sigmoid_backward(&[0.5], &[1.0, 2.0]);
    }

    #[test]
    fn gelus_backward_is_the_tanh_approximations_derivative() {
        // d/dx of x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))/2, by central differences in f64
        let approx = |x: f64| {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh()) / 2.0
        };
        for x in [-3.0f64, -1.0, -0.2, 0.0, 0.7, 2.5] {
            let h = 1e-5;
            let want = (approx(x + h) - approx(x - h)) / (2.0 * h) * 1.5;
            let got = f64::from(gelu_backward_value(x as f32, 1.5));
            assert!((got - want).abs() < 1e-4, "{x}: {got} vs {want}");
        }
    }
}
