//! The host implementation of the activation kernels: the oracle of their tests, and the
//! value functions Ember's host element-wise walk applies ([`crate::elementwise`]).

/// ReLU of one value: `0` where `x ≤ 0`, else `x` (NaN stays NaN).
pub fn relu_value(x: f32) -> f32 {
    match x <= 0.0 {
        true => 0.0,
        false => x,
    }
}

/// ReLU's backward at one value: `0` where the forward's output `y ≤ 0`, else the gradient
/// `g` (a NaN output passes it).
pub fn relu_backward_value(y: f32, g: f32) -> f32 {
    match y <= 0.0 {
        true => 0.0,
        false => g,
    }
}

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
}
