//! The `ApproxMul` decorator: which ops it overrides and how.

use crate::multiplier::Multiplier;
use crate::ops::{conv, matmul};
use burn_backend::TensorMetadata;
use burn_backend::ops::{ConvOptions, ConvTransposeOptions};
use burn_backend::tensor::FloatTensor;
use cubecl_kernels::decorator::{
    Decorated, DecoratedDevice, Decoration, DecoratorOps, KernelBackend, MultiplyStrategy, Wrapped,
};

/// The decoration: its configuration is the device's [`Multiplier`].
#[derive(Clone, Copy, Default, Debug)]
pub struct Approx;

impl Decoration for Approx {
    type Config = Multiplier;
    const NAME: &'static str = "approx-mul";

    fn multiply_strategy(config: &Multiplier, inner: MultiplyStrategy) -> MultiplyStrategy {
        match config.strategy() {
            MultiplyStrategy::Exact => inner,
            own => own.clone(),
        }
    }
}

/// `B` with every contraction's multiplies simulated by the device's [`Multiplier`].
pub type ApproxMul<B> = Decorated<B, Approx>;

/// The device of [`ApproxMul<B>`]: `B`'s device and a [`Multiplier`].
pub type ApproxDevice<B> = DecoratedDevice<B, Multiplier>;

type T<B> = FloatTensor<ApproxMul<B>>;

/// Evaluates `$native` when the multiplier is [`Multiplier::native`], `$approx` (with `$mul`
/// bound to the kernels' multiply) otherwise, and wraps the result with the multiplier.
macro_rules! dispatch {
    ($cfg:expr, $native:expr, |$mul:ident| $approx:expr $(,)?) => {{
        let cfg: Multiplier = $cfg;
        let out = match cfg.approx() {
            None => $native,
            Some($mul) => $approx,
        };
        Wrapped::new(out, cfg)
    }};
}

macro_rules! conv_ops {
    ($n:literal, $conv:ident, $x_bw:ident, $w_bw:ident, $tr:ident, $tr_x_bw:ident, $tr_w_bw:ident) => {
        fn $conv(x: T<B>, weight: T<B>, bias: Option<T<B>>, options: ConvOptions<$n>) -> T<B> {
            let cfg = x.config;
            let bias = bias.map(|b| b.inner);
            dispatch!(cfg, B::$conv(x.inner, weight.inner, bias, options), |mul| {
                conv::forward::<B>(
                    x.inner,
                    weight.inner,
                    bias,
                    &conv::Geometry::conv(&options),
                    mul,
                )
            },)
        }

        fn $x_bw(x: T<B>, weight: T<B>, output_grad: T<B>, options: ConvOptions<$n>) -> T<B> {
            let cfg = x.config;
            let size = x.inner.shape()[2..].to_vec();
            dispatch!(
                cfg,
                B::$x_bw(x.inner, weight.inner, output_grad.inner, options),
                |mul| conv::input_grad::<B>(
                    output_grad.inner,
                    weight.inner,
                    &conv::Geometry::conv(&options),
                    &size,
                    mul
                ),
            )
        }

        fn $w_bw(x: T<B>, weight: T<B>, output_grad: T<B>, options: ConvOptions<$n>) -> T<B> {
            let cfg = x.config;
            let shape = weight.inner.shape();
            dispatch!(
                cfg,
                B::$w_bw(x.inner, weight.inner, output_grad.inner, options),
                |mul| conv::weight_grad::<B>(
                    x.inner,
                    output_grad.inner,
                    &conv::Geometry::conv(&options),
                    &shape,
                    mul
                ),
            )
        }

        fn $tr(
            x: T<B>,
            weight: T<B>,
            bias: Option<T<B>>,
            options: ConvTransposeOptions<$n>,
        ) -> T<B> {
            let cfg = x.config;
            let bias = bias.map(|b| b.inner);
            dispatch!(cfg, B::$tr(x.inner, weight.inner, bias, options), |mul| {
                conv::transpose::<B, $n>(x.inner, weight.inner, bias, &options, mul)
            },)
        }

        fn $tr_x_bw(weight: T<B>, output_grad: T<B>, options: ConvTransposeOptions<$n>) -> T<B> {
            let cfg = weight.config;
            dispatch!(
                cfg,
                B::$tr_x_bw(weight.inner, output_grad.inner, options),
                |mul| conv::transpose_input_grad::<B, $n>(
                    weight.inner,
                    output_grad.inner,
                    &options,
                    mul
                ),
            )
        }

        fn $tr_w_bw(
            x: T<B>,
            weight: T<B>,
            output_grad: T<B>,
            options: ConvTransposeOptions<$n>,
        ) -> T<B> {
            let cfg = x.config;
            let shape = weight.inner.shape();
            dispatch!(
                cfg,
                B::$tr_w_bw(x.inner, weight.inner, output_grad.inner, options),
                |mul| conv::transpose_weight_grad::<B, $n>(
                    x.inner,
                    output_grad.inner,
                    &options,
                    &shape,
                    mul
                ),
            )
        }
    };
}

impl<B: KernelBackend> DecoratorOps<B> for Approx {
    fn float_matmul(lhs: T<B>, rhs: T<B>) -> T<B> {
        let cfg = lhs.config;
        dispatch!(cfg, B::float_matmul(lhs.inner, rhs.inner), |mul| {
            matmul::matmul::<B>(lhs.inner, rhs.inner, mul)
        },)
    }

    fn linear(x: T<B>, weight: T<B>, bias: Option<T<B>>) -> T<B> {
        let cfg = x.config;
        let bias = bias.map(|b| b.inner);
        dispatch!(cfg, B::linear(x.inner, weight.inner, bias), |mul| {
            matmul::linear::<B>(x.inner, weight.inner, bias, mul)
        },)
    }

    fn linear_x_backward(weight: T<B>, output_grad: T<B>) -> T<B> {
        let cfg = weight.config;
        dispatch!(
            cfg,
            B::linear_x_backward(weight.inner, output_grad.inner),
            |mul| matmul::linear_x_backward::<B>(weight.inner, output_grad.inner, mul),
        )
    }

    fn linear_weight_backward(x: T<B>, output_grad: T<B>) -> T<B> {
        let cfg = x.config;
        dispatch!(
            cfg,
            B::linear_weight_backward(x.inner, output_grad.inner),
            |mul| matmul::linear_weight_backward::<B>(x.inner, output_grad.inner, mul),
        )
    }

    conv_ops!(
        1,
        conv1d,
        conv1d_x_backward,
        conv1d_weight_backward,
        conv_transpose1d,
        conv_transpose1d_x_backward,
        conv_transpose1d_weight_backward
    );
    conv_ops!(
        2,
        conv2d,
        conv2d_x_backward,
        conv2d_weight_backward,
        conv_transpose2d,
        conv_transpose2d_x_backward,
        conv_transpose2d_weight_backward
    );
    conv_ops!(
        3,
        conv3d,
        conv3d_x_backward,
        conv3d_weight_backward,
        conv_transpose3d,
        conv_transpose3d_x_backward,
        conv_transpose3d_weight_backward
    );
}
