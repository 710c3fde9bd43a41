//! A GRU sequence classifier (the GRIM paper's RNN, at the scale of speech-digit and speaker
//! tasks): stacked stock `burn::nn::Gru` layers, the output at each sequence's **last valid
//! step**, and a linear head.
//!
//! `Gru::forward` takes no lengths, so variable length is handled outside it: a batch is
//! right-padded to its longest sequence, and each sequence's logits are read from the top
//! layer's output at its own last step. The GRU runs forwards in time, so its output at step `t`
//! depends only on steps `≤ t`: the padding after a sequence never reaches the output it is
//! classified from (tested: a padded batch gives each sequence the logits it has alone).
//!
//! Burn's `Gru` multiplies its gate weights with `float_matmul`, not `linear`, so a decorator
//! that replaces the GRU's products (ApproxMul, BCR's packed weights) must take that path.
//!
//! The forward pass first puts the parameters in one autodiff graph
//! ([`crate::graph::join_params`]): without it, burn-autodiff 0.21's graph merges make a
//! training step's cost grow with the square of the sequence length.

use burn::nn::gru::{Gru, GruConfig};
use burn::nn::{Linear, LinearConfig};
use burn::prelude::*;

/// A GRU classifier: `layers` GRUs of `hidden` units over `d_input` features, then
/// `hidden → classes`.
#[derive(Module, Debug)]
pub struct GruClassifier<B: Backend> {
    grus: Vec<Gru<B>>,
    head: Linear<B>,
}

impl<B: Backend> GruClassifier<B> {
    /// A freshly initialised classifier (Burn's GRU defaults: biases, the reset gate applied
    /// after the product as in PyTorch).
    ///
    /// # Panics
    /// If `layers`, `d_input`, `hidden` or `classes` is 0.
    pub fn init(
        d_input: usize,
        hidden: usize,
        layers: usize,
        classes: usize,
        device: &B::Device,
    ) -> Self {
        assert!(
            d_input > 0 && hidden > 0 && layers > 0 && classes > 0,
            "a GRU classifier needs inputs, hidden units, layers and classes"
        );
        let grus = (0..layers)
            .map(|l| {
                GruConfig::new(if l == 0 { d_input } else { hidden }, hidden, true).init(device)
            })
            .collect();
        Self {
            grus,
            head: LinearConfig::new(hidden, classes).init(device),
        }
    }

    /// Logits `[batch, classes]` for `x: [batch, steps, d_input]` right-padded, sequence `b`
    /// being `lengths[b]` steps long (1 ≤ length ≤ steps).
    ///
    /// # Panics
    /// If `lengths` does not give one valid length per sequence.
    pub fn forward(&self, x: Tensor<B, 3>, lengths: &[usize]) -> Tensor<B, 2> {
        let [batch, steps, _] = x.dims();
        assert!(
            lengths.len() == batch && lengths.iter().all(|&l| (1..=steps).contains(&l)),
            "one length in 1..={steps} per sequence of the batch, got {lengths:?}"
        );
        // each gate's parameters are used at every step: one graph for them first
        crate::graph::join_params(self);
        let mut h = x;
        for gru in &self.grus {
            h = gru.forward(h, None);
        }
        let hidden = h.dims()[2];
        let last: Vec<i64> = lengths.iter().map(|&l| (l - 1) as i64).collect();
        let index = Tensor::<B, 1, Int>::from_ints(last.as_slice(), &h.device())
            .reshape([batch, 1, 1])
            .expand([batch, 1, hidden]);
        let h = h.gather(1, index).reshape([batch, hidden]);
        self.head.forward(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::trainable_params;
    use burn::backend::NdArray;

    type B = NdArray;

    #[test]
    fn parameters_are_three_gates_of_input_and_hidden_products() {
        let (d, h, c) = (39, 256, 10);
        let m = GruClassifier::<B>::init(d, h, 2, c, &Default::default());
        // per layer and gate: input and hidden weights with a bias each (as PyTorch's GRU)
        let layer = |d_in: usize| 3 * (d_in * h + h + h * h + h);
        assert_eq!(
            trainable_params::<B, _>(&m),
            layer(d) + layer(h) + h * c + c
        );
    }

    #[test]
    fn padding_after_a_sequence_does_not_change_its_logits() {
        let device = Default::default();
        let m = GruClassifier::<B>::init(3, 8, 2, 4, &device);
        let seq = |len: usize, seed: f32| -> Vec<f32> {
            (0..len * 3)
                .map(|i| ((i as f32 + seed) * 0.37).sin())
                .collect()
        };
        let (a, b) = (seq(5, 0.0), seq(2, 1.0));
        // each alone
        let alone = |s: &Vec<f32>, len: usize| {
            m.forward(
                Tensor::<B, 3>::from_data(TensorData::new(s.clone(), [1, len, 3]), &device),
                &[len],
            )
            .into_data()
            .to_vec::<f32>()
            .unwrap()
        };
        let (la, lb) = (alone(&a, 5), alone(&b, 2));
        // together, b right-padded with large values to a's 5 steps
        let mut padded = a.clone();
        padded.extend(&b);
        padded.extend([9.0f32; 9]);
        let both = m
            .forward(
                Tensor::<B, 3>::from_data(TensorData::new(padded, [2, 5, 3]), &device),
                &[5, 2],
            )
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        for (got, want) in both.iter().zip(la.iter().chain(&lb)) {
            assert!((got - want).abs() < 1e-5, "{got} vs {want}");
        }
    }

    #[test]
    #[should_panic(expected = "one length in 1..=4")]
    fn a_length_past_the_batch_is_refused() {
        let device = Default::default();
        let m = GruClassifier::<B>::init(2, 4, 1, 3, &device);
        m.forward(Tensor::zeros([1, 4, 2], &device), &[5]);
    }

    #[test]
    #[should_panic(expected = "needs inputs, hidden units, layers and classes")]
    fn a_classifier_without_layers_is_refused() {
        GruClassifier::<B>::init(2, 4, 0, 3, &Default::default());
    }
}
