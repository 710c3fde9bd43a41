//! The activation of the zoo's convolutional models: ReLU (the default) or PReLU with one
//! slope per channel (`--act prelu`), a stock `burn::nn::PRelu` at every site, which Ember's
//! training stacks run as one fused autodiff node (`docs/broadcast.md`).

use burn::nn::{PRelu, PReluConfig, Relu};
use burn::prelude::*;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Which activation a model uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    /// ReLU everywhere (the published models).
    #[default]
    Relu,
    /// PReLU(channels) at every site, `α` initialised to 0.25 (He et al., 2015).
    Prelu,
}

impl fmt::Display for Activation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Relu => "relu",
            Self::Prelu => "prelu",
        })
    }
}

impl FromStr for Activation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "relu" => Ok(Self::Relu),
            "prelu" => Ok(Self::Prelu),
            other => Err(format!("unknown activation {other:?} (relu, prelu)")),
        }
    }
}

/// A model's activation sites: ReLU, or one PReLU(channels) per site.
#[derive(Module, Debug)]
pub struct Sites<B: Backend> {
    relu: Relu,
    /// One per site under PReLU; empty under ReLU.
    prelu: Vec<PRelu<B>>,
}

impl<B: Backend> Sites<B> {
    /// Sites with `channels[i]` channels (axis 1 of their input) each.
    pub fn new(act: Activation, channels: &[usize], device: &B::Device) -> Self {
        let prelu = match act {
            Activation::Relu => Vec::new(),
            Activation::Prelu => channels
                .iter()
                .map(|&c| PReluConfig::new().with_num_parameters(c).init(device))
                .collect(),
        };
        Self {
            relu: Relu::new(),
            prelu,
        }
    }

    /// The activation of site `site`.
    ///
    /// # Panics
    /// Under PReLU, if the model has no site `site` (a bug of the model's code).
    pub fn forward<const D: usize>(&self, site: usize, x: Tensor<B, D>) -> Tensor<B, D> {
        if self.prelu.is_empty() {
            self.relu.forward(x)
        } else {
            self.prelu[site].forward(x)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;

    #[test]
    fn names_round_trip_and_an_unknown_one_is_refused() {
        for act in [Activation::Relu, Activation::Prelu] {
            assert_eq!(act.to_string().parse::<Activation>().unwrap(), act);
        }
        let err = "tanh".parse::<Activation>().unwrap_err();
        assert_eq!(err, "unknown activation \"tanh\" (relu, prelu)");
    }

    #[test]
    fn prelu_sites_have_one_slope_per_channel() {
        let device = Default::default();
        let sites = Sites::<NdArray>::new(Activation::Prelu, &[3, 5], &device);
        assert_eq!(sites.num_params(), 8);
        let x = Tensor::<NdArray, 4>::from_floats([[[[-4.0]], [[2.0]], [[-1.0]]]], &device);
        let y = sites.forward(0, x).into_data().to_vec::<f32>().unwrap();
        assert_eq!(y, vec![-1.0, 2.0, -0.25]);
        let relu = Sites::<NdArray>::new(Activation::Relu, &[3, 5], &device);
        assert_eq!(relu.num_params(), 0);
    }
}
