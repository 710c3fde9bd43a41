//! A step's gradients as one host buffer for an MPI all-reduce.

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;

/// A step's gradients taken out of a `GradientsParams` as one host buffer, in the module's
/// parameter order, for an all-reduce: every trained float parameter's gradient flattened (zeros
/// where a parameter has none), then one presence flag per parameter.
pub(super) struct FlatGrads<B: AutodiffBackend> {
    pub(super) values: Vec<f32>,
    /// Float parameters (the presence flags at the end of `values`).
    params: usize,
    device: Option<B::Device>,
}

impl<B: AutodiffBackend> FlatGrads<B> {
    pub(super) fn take<M: Module<B>>(model: &M, grads: &mut GradientsParams) -> Self {
        struct Take<'a, B: AutodiffBackend> {
            grads: &'a mut GradientsParams,
            parts: Vec<Tensor<B::InnerBackend, 1>>,
            present: Vec<f32>,
            device: Option<B::Device>,
        }
        impl<B: AutodiffBackend> ModuleVisitor<B> for Take<'_, B> {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
                let value = param.val();
                if !value.is_require_grad() {
                    // running statistics: averaged by `mean_state`
                    return;
                }
                let device = value.device();
                let n = value.shape().num_elements();
                let grad = self.grads.remove::<B::InnerBackend, D>(param.id);
                self.present.push(f32::from(u8::from(grad.is_some())));
                self.parts.push(match grad {
                    Some(g) => g.reshape([n]),
                    None => Tensor::zeros([n], &device),
                });
                self.device.get_or_insert(device);
            }
        }
        let mut take = Take::<B> {
            grads,
            parts: Vec::new(),
            present: Vec::new(),
            device: None,
        };
        model.visit(&mut take);
        let mut values = match take.parts.is_empty() {
            true => Vec::new(),
            false => Tensor::cat(take.parts, 0)
                .into_data()
                .convert::<f32>()
                .to_vec()
                .expect("f32 data"),
        };
        let params = take.present.len();
        values.extend(take.present);
        Self {
            values,
            params,
            device: take.device,
        }
    }

    /// Puts the mean of `summed` (this buffer summed over `count` replicas) back, parameter by
    /// parameter; a parameter no replica had a gradient for stays without one.
    pub(super) fn put_back<M: Module<B>>(
        self,
        model: &M,
        grads: &mut GradientsParams,
        summed: Vec<f32>,
        count: usize,
    ) {
        struct Put<'a, B: AutodiffBackend> {
            grads: &'a mut GradientsParams,
            all: Tensor<B::InnerBackend, 1>,
            present: &'a [f32],
            offset: usize,
            index: usize,
        }
        impl<B: AutodiffBackend> ModuleVisitor<B> for Put<'_, B> {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
                let value = param.val();
                if !value.is_require_grad() {
                    return;
                }
                let shape = value.shape();
                let n = shape.num_elements();
                if self.present[self.index] > 0.0 {
                    let grad = self
                        .all
                        .clone()
                        .slice(self.offset..self.offset + n)
                        .reshape(shape);
                    self.grads.register::<B::InnerBackend, D>(param.id, grad);
                }
                self.offset += n;
                self.index += 1;
            }
        }
        let Some(device) = self.device else { return };
        let (values, present) = summed.split_at(summed.len() - self.params);
        let scale = 1.0 / count as f32;
        let mean: Vec<f32> = values.iter().map(|v| v * scale).collect();
        let all =
            Tensor::<B::InnerBackend, 1>::from_data(TensorData::new(mean, [values.len()]), &device);
        model.visit(&mut Put::<B> {
            grads,
            all,
            present,
            offset: 0,
            index: 0,
        });
    }
}
