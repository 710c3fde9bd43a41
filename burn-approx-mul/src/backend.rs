//! The `ApproxMul` decorator: which ops it overrides and how.
//!
//! **Which multiplier a contraction uses.** Every tensor carries a [`Multiplier`]: the device's,
//! or, for a weight a per-layer policy tagged, its layer's. A contraction multiplies with its
//! **weight's** multiplier: `linear`, `conv*` and `conv_transpose*` in the forward pass and in
//! both gradients (each of those ops is handed the weight), except `linear_weight_backward`,
//! which Autodiff hands only the layer's input and output gradient: there the input decides, and
//! a layer view above autodiff (`SparseAct`) gives the input its weight's multiplier first.
//! `float_matmul` has no weight: the operand a policy tagged decides (the right one if both),
//! else the left one. Results carry the activation side's multiplier (the input's in the
//! forward pass, the output gradient's for an input gradient) and a weight gradient its
//! weight's, so a layer's multiplier never leaks into the next layer's activations.

use crate::multiplier::Multiplier;
use crate::ops::conv::{self, Product};
use crate::ops::elementwise::{self, activation_backward, activation_forward};
use crate::ops::matmul;
use crate::ops::native::{self, ConvRoute, Linear};
use crate::ops::pool;
use burn_backend::ops::{
    ConvOptions, ConvTransposeOptions, MaxPool2dBackward, MaxPool2dWithIndices, UnfoldOptions,
};
use burn_backend::tensor::{FloatTensor, IntTensor};
use burn_backend::{FloatDType, Scalar, Shape, TensorData, TensorMetadata};
use cubecl_kernels::activation::Activation;
use cubecl_kernels::approx::ApproxMultiply;
use cubecl_kernels::decorator::effects::{self, Pass};
use cubecl_kernels::decorator::{
    Decorated, DecoratedDevice, Decoration, DecoratorOps, KernelBackend, LayerSettings,
    MultiplyStrategy, Wrapped,
};
use cubecl_kernels::elementwise::Binary;
use cubecl_kernels::pool::Pool2d;
use cubecl_kernels::reduce::Reduction;

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

    fn multiply_name(config: &Multiplier) -> Option<String> {
        config.approx().map(|_| config.name().to_string())
    }

    /// A policy's [`Multiplier`] entry for the layer, if it set one, else `config`; either
    /// way naming the layer and keeping `config`'s convolution route and matmul kernel.
    fn for_layer(config: &Multiplier, layer: &LayerSettings) -> Multiplier {
        layer
            .get::<Multiplier>()
            .unwrap_or(config)
            .clone()
            .with_conv(config.conv())
            .with_matmul(config.matmul())
            .at_layer(layer.shared_path())
    }
}

/// `B` with every contraction's multiplies simulated by the device's [`Multiplier`].
pub type ApproxMul<B> = Decorated<B, Approx>;

/// The device of [`ApproxMul<B>`]: `B`'s device and a [`Multiplier`].
pub type ApproxDevice<B> = DecoratedDevice<B, Multiplier>;

type T<B> = FloatTensor<ApproxMul<B>>;

/// How a contraction with multiplier `cfg` runs on `B`, in words (the effects report's route).
fn route<B: KernelBackend>(cfg: &Multiplier) -> String {
    let Some(mul) = cfg.approx() else {
        return native::BURN_ROUTE.into();
    };
    let Some(runtime) = B::cube_runtime() else {
        return "host reference: this backend has no CubeCL kernels".into();
    };
    let runtime = runtime.rsplit("::").next().unwrap_or(runtime);
    let how = match mul {
        ApproxMultiply::Lut(t) if t.bits() > MAX_SHARED_BITS => "table in global memory",
        ApproxMultiply::Lut(_) => "table in shared memory",
        ApproxMultiply::Plain => "IEEE products",
        ApproxMultiply::Mitchell | ApproxMultiply::Mbm => "multiply computed in the kernel",
    };
    format!("CubeCL kernel on {runtime}, {how}")
}

/// Widest table the GEMM kernel stages in shared memory (`cubecl_kernels::approx::gemm`).
const MAX_SHARED_BITS: u32 = 7;

/// Records a contraction of `multiplies` products under `cfg` (when this thread records), on
/// `routed` where the op said how it ran, else on the route `cfg` implies.
fn record<B: KernelBackend>(
    cfg: &Multiplier,
    pass: Pass,
    multiplies: usize,
    routed: Option<String>,
) {
    if effects::recording() {
        let approximate = cfg.approx().is_some_and(ApproxMultiply::is_approximate);
        let route = routed.unwrap_or_else(|| route::<B>(cfg));
        effects::record_contraction(
            cfg.layer(),
            pass,
            cfg.name(),
            approximate,
            multiplies as u64,
            &route,
        );
    }
}

/// Products of a convolution-like op: `side` elements (the output of a convolution, the input
/// of a transposed one), each a dot product of `weight.numel / weight.dims[0]` terms; every
/// gradient of a convolution has the forward's products.
fn conv_products(side: &Shape, weight: &Shape) -> usize {
    side.num_elements() * weight.num_elements() / weight[0].max(1)
}

/// Runs a contraction under `$decide`'s multiplier: `$native` for [`Multiplier::native`],
/// `$approx` (with `$mul` bound to the kernels' multiply) otherwise. Records it as `$pass` with
/// the products `$count` gives for the result's shape, and gives the result `$carry`'s
/// configuration. After `routed`, `$native` gives the result and the route it ran on (`None`:
/// Burn's own op).
macro_rules! dispatch {
    ($decide:expr, $carry:expr, $pass:expr, |$shape:ident| $count:expr,
     $native:expr, |$mul:ident| $approx:expr $(,)?) => {
        dispatch!(routed $decide, $carry, $pass, |$shape| $count, ($native, None), |$mul| $approx)
    };
    (routed $decide:expr, $carry:expr, $pass:expr, |$shape:ident| $count:expr,
     $native:expr, |$mul:ident| $approx:expr $(,)?) => {{
        let cfg: Multiplier = $decide;
        let carry: Multiplier = $carry;
        let (out, routed): (_, Option<String>) = match cfg.approx() {
            None => $native,
            Some($mul) => ($approx, None),
        };
        let $shape = out.shape();
        record::<B>(&cfg, $pass, $count, routed);
        Wrapped::new(out, carry)
    }};
}

/// `$burn` on [`ConvRoute::Burn`], else `$routed` (which gives the result and its route) with
/// `$route` bound to the route.
macro_rules! on_route {
    ($route:expr, $burn:expr, |$r:ident| $routed:expr) => {
        match $route {
            ConvRoute::Burn => ($burn, None),
            $r => {
                let (out, how) = $routed;
                (out, Some(how))
            }
        }
    };
}

macro_rules! conv_ops {
    ($n:literal, $conv:ident, $x_bw:ident, $w_bw:ident, $tr:ident, $tr_x_bw:ident, $tr_w_bw:ident) => {
        fn $conv(x: T<B>, weight: T<B>, bias: Option<T<B>>, options: ConvOptions<$n>) -> T<B> {
            let w_shape = weight.inner.shape();
            let bias = bias.map(|b| b.inner);
            let (route, kernel) = (weight.config.conv(), weight.config.matmul());
            dispatch!(
                routed weight.config,
                x.config,
                Pass::Forward,
                |y| conv_products(&y, &w_shape),
                on_route!(
                    route,
                    B::$conv(x.inner, weight.inner, bias, options),
                    |r| native::forward::<B, $n>(x.inner, weight.inner, bias, options, r, kernel)
                ),
                |mul| conv::forward::<B>(
                    x.inner,
                    weight.inner,
                    bias,
                    &conv::Geometry::conv(&options),
                    Product::Approx(mul)
                ),
            )
        }

        fn $x_bw(x: T<B>, weight: T<B>, output_grad: T<B>, options: ConvOptions<$n>) -> T<B> {
            let x_shape = x.inner.shape();
            let size = x_shape[2..].to_vec();
            let (w_shape, y_shape) = (weight.inner.shape(), output_grad.inner.shape());
            let (route, kernel) = (weight.config.conv(), weight.config.matmul());
            dispatch!(
                routed weight.config,
                output_grad.config,
                Pass::InputGrad,
                |_dx| conv_products(&y_shape, &w_shape),
                on_route!(
                    route,
                    B::$x_bw(x.inner, weight.inner, output_grad.inner, options),
                    |r| native::input_grad::<B, $n>(
                        x_shape,
                        weight.inner,
                        output_grad.inner,
                        options,
                        r,
                        kernel
                    )
                ),
                |mul| conv::input_grad::<B>(
                    output_grad.inner,
                    weight.inner,
                    &conv::Geometry::conv(&options),
                    &size,
                    Product::Approx(mul)
                ),
            )
        }

        fn $w_bw(x: T<B>, weight: T<B>, output_grad: T<B>, options: ConvOptions<$n>) -> T<B> {
            let shape = weight.inner.shape();
            let y_shape = output_grad.inner.shape();
            let (route, kernel) = (weight.config.conv(), weight.config.matmul());
            dispatch!(
                routed weight.config.clone(),
                weight.config,
                Pass::WeightGrad,
                |_dw| conv_products(&y_shape, &shape),
                on_route!(
                    route,
                    B::$w_bw(x.inner, weight.inner, output_grad.inner, options),
                    |r| native::weight_grad::<B, $n>(
                        x.inner,
                        shape.clone(),
                        output_grad.inner,
                        options,
                        r,
                        kernel
                    )
                ),
                |mul| conv::weight_grad::<B>(
                    x.inner,
                    output_grad.inner,
                    &conv::Geometry::conv(&options),
                    &shape,
                    Product::Approx(mul)
                ),
            )
        }

        fn $tr(
            x: T<B>,
            weight: T<B>,
            bias: Option<T<B>>,
            options: ConvTransposeOptions<$n>,
        ) -> T<B> {
            let products = conv_products(&x.inner.shape(), &weight.inner.shape());
            let bias = bias.map(|b| b.inner);
            dispatch!(
                weight.config,
                x.config,
                Pass::Forward,
                |_y| products,
                B::$tr(x.inner, weight.inner, bias, options),
                |mul| conv::transpose::<B, $n>(
                    x.inner,
                    weight.inner,
                    bias,
                    &options,
                    Product::Approx(mul)
                ),
            )
        }

        fn $tr_x_bw(weight: T<B>, output_grad: T<B>, options: ConvTransposeOptions<$n>) -> T<B> {
            let w_shape = weight.inner.shape();
            dispatch!(
                weight.config,
                output_grad.config,
                Pass::InputGrad,
                |dx| conv_products(&dx, &w_shape),
                B::$tr_x_bw(weight.inner, output_grad.inner, options),
                |mul| conv::transpose_input_grad::<B, $n>(
                    weight.inner,
                    output_grad.inner,
                    &options,
                    Product::Approx(mul)
                ),
            )
        }

        fn $tr_w_bw(
            x: T<B>,
            weight: T<B>,
            output_grad: T<B>,
            options: ConvTransposeOptions<$n>,
        ) -> T<B> {
            let shape = weight.inner.shape();
            let products = conv_products(&x.inner.shape(), &shape);
            dispatch!(
                weight.config.clone(),
                weight.config,
                Pass::WeightGrad,
                |_dw| products,
                B::$tr_w_bw(x.inner, weight.inner, output_grad.inner, options),
                |mul| conv::transpose_weight_grad::<B, $n>(
                    x.inner,
                    output_grad.inner,
                    &options,
                    &shape,
                    Product::Approx(mul)
                ),
            )
        }
    };
}

/// Binary element-wise ops on Ember's host loops on the GEMM routes (where the host can view
/// both operands), the inner backend's otherwise; the result carries the left operand's
/// configuration, as the forwarded op's does.
macro_rules! elementwise_ops {
    ($($name:ident => $op:ident),* $(,)?) => {$(
        fn $name(lhs: T<B>, rhs: T<B>) -> T<B> {
            let cfg = lhs.config;
            let out = match cfg.conv() {
                ConvRoute::Burn => B::$name(lhs.inner, rhs.inner),
                _ => elementwise::binary::<B>(Binary::$op, lhs.inner, rhs.inner)
                    .unwrap_or_else(|(l, r)| B::$name(l, r)),
            };
            Wrapped::new(out, cfg)
        }
    )*};
}

/// `t` summed or averaged along `dim`: [`cubecl_kernels::reduce::reduce_dim_routed`] on the GEMM
/// routes, the inner backend's op where that declines and on `--conv burn`.
fn reduce_dim<B: KernelBackend>(t: T<B>, dim: usize, reduction: Reduction) -> T<B> {
    let cfg = t.config;
    let routed = match cfg.conv() {
        ConvRoute::Burn => Err(t.inner),
        _ => cubecl_kernels::reduce::reduce_dim_routed::<B>(t.inner, dim, reduction),
    };
    let out = routed.unwrap_or_else(|t| match reduction {
        Reduction::Sum => B::float_sum_dim(t, dim),
        Reduction::Mean => B::float_mean_dim(t, dim),
    });
    Wrapped::new(out, cfg)
}

/// An f32 zero tensor of `shape` as one zeroed allocation on the GEMM routes of a backend
/// without CubeCL; `inner` (the inner backend's op) elsewhere.
fn host_zeros<B: KernelBackend>(
    shape: Shape,
    device: &DecoratedDevice<B, Multiplier>,
    dtype: FloatDType,
    inner: fn(Shape, &B::Device, FloatDType) -> FloatTensor<B>,
) -> T<B> {
    let cfg = device.config.clone();
    let out = match (cfg.conv(), B::cube_runtime(), dtype) {
        (ConvRoute::Gemm | ConvRoute::Im2col, None, FloatDType::F32) => {
            let zeros = vec![0f32; shape.num_elements()];
            B::float_from_data(TensorData::new(zeros, shape), &device.inner)
        }
        _ => inner(shape, &device.inner, dtype),
    };
    Wrapped::new(out, cfg)
}

/// A max pooling's window from Burn's arguments.
fn window(
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    ceil_mode: bool,
) -> Pool2d {
    Pool2d {
        kernel,
        stride,
        padding,
        dilation,
        ceil_mode,
    }
}

impl cubecl_kernels::decorator::PlainFloat for Approx {}

impl<B: KernelBackend> DecoratorOps<B> for Approx {
    fn float_to_device(tensor: T<B>, device: &DecoratedDevice<B, Multiplier>) -> T<B> {
        // The bottom decorator of every Ember stack: moves between two wgpu devices go
        // through the host (CubeCL 0.10 has no peer-to-peer copy but CUDA's).
        let out = cubecl_kernels::decorator::float_to_device::<B>(tensor.inner, &device.inner);
        Wrapped::new(out, tensor.config)
    }

    fn float_matmul(lhs: T<B>, rhs: T<B>) -> T<B> {
        // The operand a policy tagged decides (the right one first: `x · W`); the result
        // carries the other's configuration.
        let (decide, carry) = match (lhs.config.layer(), rhs.config.layer()) {
            (_, Some(_)) => (rhs.config.clone(), lhs.config.clone()),
            (Some(_), None) => (lhs.config.clone(), rhs.config.clone()),
            (None, None) => (lhs.config.clone(), lhs.config.clone()),
        };
        let ls = lhs.inner.shape();
        let k = ls[ls.num_dims() - 1];
        let kernel = decide.matmul();
        dispatch!(
            routed decide,
            carry,
            Pass::Matmul,
            |out| out.num_elements() * k,
            native::matmul::<B>(kernel, lhs.inner, rhs.inner),
            |mul| matmul::matmul::<B>(lhs.inner, rhs.inner, mul),
        )
    }

    fn linear(x: T<B>, weight: T<B>, bias: Option<T<B>>) -> T<B> {
        let bias = bias.map(|b| b.inner);
        let d_in = weight.inner.shape()[0];
        let kernel = weight.config.matmul();
        let rows = native::flattens::<B>(&weight.config, &x.inner);
        dispatch!(
            routed weight.config,
            x.config,
            Pass::Forward,
            |y| y.num_elements() * d_in,
            match rows {
                true => native::linear::<B>(Linear::Forward, x.inner, weight.inner, bias, kernel),
                false => (B::linear(x.inner, weight.inner, bias), None),
            },
            |mul| matmul::linear::<B>(x.inner, weight.inner, bias, mul),
        )
    }

    fn linear_x_backward(weight: T<B>, output_grad: T<B>) -> T<B> {
        let d_out = weight.inner.shape()[1];
        let kernel = weight.config.matmul();
        let rows = native::flattens::<B>(&weight.config, &output_grad.inner);
        dispatch!(
            routed weight.config,
            output_grad.config,
            Pass::InputGrad,
            |dx| dx.num_elements() * d_out,
            match rows {
                true => native::linear::<B>(
                    Linear::InputGrad,
                    weight.inner,
                    output_grad.inner,
                    None,
                    kernel
                ),
                false => (B::linear_x_backward(weight.inner, output_grad.inner), None),
            },
            |mul| matmul::linear_x_backward::<B>(weight.inner, output_grad.inner, mul),
        )
    }

    fn linear_weight_backward(x: T<B>, output_grad: T<B>) -> T<B> {
        // Autodiff hands over no weight here: the input decides. Under a layer view
        // (`SparseAct`) the input already carries its weight's configuration.
        let rows = x.inner.shape().num_elements();
        let flat = native::flattens::<B>(&x.config, &x.inner);
        let kernel = x.config.matmul();
        dispatch!(
            routed x.config.clone(),
            x.config,
            Pass::WeightGrad,
            |dw| rows * dw[1],
            match flat {
                true => native::linear::<B>(
                    Linear::WeightGrad,
                    x.inner,
                    output_grad.inner,
                    None,
                    kernel
                ),
                false => (B::linear_weight_backward(x.inner, output_grad.inner), None),
            },
            |mul| matmul::linear_weight_backward::<B>(x.inner, output_grad.inner, mul),
        )
    }

    /// On the GEMM routes of a backend without CubeCL (ndarray), an f32 zero tensor is one
    /// zeroed allocation; Burn's default fills its data value by value. Autodiff's backward of a
    /// slice makes one the size of the sliced tensor: every step of an unrolled `burn::nn::Gru`.
    fn float_zeros(
        shape: Shape,
        device: &DecoratedDevice<B, Multiplier>,
        dtype: FloatDType,
    ) -> T<B> {
        host_zeros::<B>(shape, device, dtype, B::float_zeros)
    }

    /// As [`Self::float_zeros`] where the host would zero the tensor anyway (burn-ndarray's
    /// empty tensor is its zero tensor); the inner backend's op elsewhere.
    fn float_empty(
        shape: Shape,
        device: &DecoratedDevice<B, Multiplier>,
        dtype: FloatDType,
    ) -> T<B> {
        host_zeros::<B>(shape, device, dtype, B::float_empty)
    }

    elementwise_ops!(
        float_add => Add,
        float_sub => Sub,
        float_mul => Mul,
        float_div => Div,
    );

    /// On the GEMM routes a division by one is `lhs` itself, with no launch (IEEE division by
    /// one is exact): Burn's `RunningState` divides each running statistic by its count of
    /// threads, one, every step. The inner backend's op otherwise and on `--conv burn`.
    fn float_div_scalar(lhs: T<B>, rhs: Scalar) -> T<B> {
        let cfg = lhs.config;
        let out = match (cfg.conv(), rhs) {
            (ConvRoute::Burn, _) => B::float_div_scalar(lhs.inner, rhs),
            (_, Scalar::Float(1.0) | Scalar::Int(1) | Scalar::UInt(1)) => lhs.inner,
            _ => B::float_div_scalar(lhs.inner, rhs),
        };
        Wrapped::new(out, cfg)
    }

    /// One kernel on a CubeCL runtime on the GEMM routes ([`cubecl_kernels::activation`]) in
    /// place of Burn's comparison and masked fill; the inner backend's ReLU elsewhere (ndarray's
    /// is one pass).
    fn relu(x: T<B>) -> T<B> {
        activation_forward::<B>(Activation::Relu, x, B::relu)
    }

    /// As [`Self::sigmoid`], in place of Burn's five element-wise passes.
    fn gelu(x: T<B>) -> T<B> {
        activation_forward::<B>(Activation::Gelu, x, B::gelu)
    }

    /// As [`Self::sigmoid`] (the host pass over both operands), in place of Burn's fourteen
    /// element-wise passes.
    fn gelu_backward(x: T<B>, grad: T<B>) -> T<B> {
        activation_backward::<B>(Activation::Gelu, x, grad, B::gelu_backward)
    }

    /// On the GEMM routes, Ember's host loop where the host views both operands, one kernel on
    /// a CubeCL runtime; the inner backend's op elsewhere and on `--conv burn`.
    fn relu_backward(output: T<B>, grad: T<B>) -> T<B> {
        activation_backward::<B>(Activation::Relu, output, grad, B::relu_backward)
    }

    /// On the GEMM routes, Ember's one host pass where the host views the tensor (bit for bit
    /// Burn's composite), one kernel on a CubeCL runtime (within the rounding of its `exp` and
    /// `ln`), in place of Burn's six element-wise passes; the inner backend's op elsewhere and
    /// on `--conv burn`.
    fn sigmoid(x: T<B>) -> T<B> {
        activation_forward::<B>(Activation::Sigmoid, x, B::sigmoid)
    }

    /// On the GEMM routes, Ember's host pass where the host views the tensor (burn-ndarray's
    /// values, over rayon's threads on long tensors); the inner backend's op elsewhere and on
    /// `--conv burn`.
    fn float_tanh(x: T<B>) -> T<B> {
        elementwise::tanh::<B>(x)
    }

    /// As [`Self::relu_backward`], in place of Burn's four element-wise passes.
    fn sigmoid_backward(output: T<B>, grad: T<B>) -> T<B> {
        activation_backward::<B>(Activation::Sigmoid, output, grad, B::sigmoid_backward)
    }

    /// On the GEMM routes over a GPU, cubek's cube routine where few outputs each reduce a long
    /// axis (batch norm's statistics), burn-cubecl's unit routine otherwise
    /// ([`cubecl_kernels::reduce`]).
    fn float_sum_dim(tensor: T<B>, dim: usize) -> T<B> {
        reduce_dim::<B>(tensor, dim, Reduction::Sum)
    }

    /// As [`Self::float_sum_dim`].
    fn float_mean_dim(tensor: T<B>, dim: usize) -> T<B> {
        reduce_dim::<B>(tensor, dim, Reduction::Mean)
    }

    /// A strided view (batch norm's `swap_dims(0, 1)`) is copied on the host on the GEMM
    /// routes; burn-ndarray walks it value by value.
    fn float_reshape(tensor: T<B>, shape: Shape) -> T<B> {
        let cfg = tensor.config;
        let out = match cfg.conv() {
            ConvRoute::Burn => B::float_reshape(tensor.inner, shape),
            _ => elementwise::reshape::<B>(tensor.inner, shape),
        };
        Wrapped::new(out, cfg)
    }

    /// Burn's `unfold4d` is a convolution with a one-hot kernel (direct on ndarray and on
    /// burn-cubecl without autotune): the native GEMM routes take it through Ember's im2col
    /// instead (the packed HiNM and BCR convolutions unfold their input with it).
    fn unfold4d(x: T<B>, kernel_size: [usize; 2], options: UnfoldOptions) -> T<B> {
        let out = match x.config.conv() {
            ConvRoute::Burn => B::unfold4d(x.inner, kernel_size, options),
            ConvRoute::Gemm | ConvRoute::Im2col => {
                conv::unfold4d::<B>(x.inner, kernel_size, &options)
            }
        };
        Wrapped::new(out, x.config)
    }

    /// On the GEMM routes, Ember's host loops where the host views the input
    /// ([`cubecl_kernels::pool`], bit-identical to burn-ndarray's); the inner backend's op on
    /// CubeCL runtimes and on `--conv burn`.
    fn max_pool2d(
        x: T<B>,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        ceil_mode: bool,
    ) -> T<B> {
        let w = window(kernel, stride, padding, dilation, ceil_mode);
        let route = x.config.conv();
        Wrapped::new(pool::max_pool2d::<B>(x.inner, w, route), x.config)
    }

    /// As [`Self::max_pool2d`], with the index of each window's maximum in its input plane
    /// (autodiff's forward pass).
    fn max_pool2d_with_indices(
        x: T<B>,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        ceil_mode: bool,
    ) -> MaxPool2dWithIndices<ApproxMul<B>> {
        let w = window(kernel, stride, padding, dilation, ceil_mode);
        let out = pool::max_pool2d_with_indices::<B>(x.inner, w, x.config.conv());
        MaxPool2dWithIndices {
            output: Wrapped::new(out.output, x.config.clone()),
            indices: Wrapped::new(out.indices, x.config),
        }
    }

    /// As [`Self::max_pool2d`]: each output gradient added at its maximum's index.
    fn max_pool2d_with_indices_backward(
        x: T<B>,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        ceil_mode: bool,
        output_grad: T<B>,
        indices: IntTensor<ApproxMul<B>>,
    ) -> MaxPool2dBackward<ApproxMul<B>> {
        let w = window(kernel, stride, padding, dilation, ceil_mode);
        let route = x.config.conv();
        let dx =
            pool::max_pool2d_backward::<B>(x.inner, w, output_grad.inner, indices.inner, route);
        MaxPool2dBackward {
            x_grad: Wrapped::new(dx, x.config),
        }
    }

    /// burn-backend's default (the output gradient's `swap_dims(0, 1)`, a reshape to
    /// `[channels, batch·h·w]`, a sum along the last axis) through this decorator's ops: on the
    /// GEMM routes the reshape of the swapped view is copied on the host (burn-ndarray walks it
    /// value by value; the same values, summed alike) and the sum takes the routed reduction.
    /// The inner backend's op on `--conv burn`.
    fn conv2d_bias_backward(x: T<B>, bias: T<B>, output_grad: T<B>) -> T<B> {
        if x.config.conv() == ConvRoute::Burn {
            let dbias = B::conv2d_bias_backward(x.inner, bias.inner, output_grad.inner);
            return Wrapped::new(dbias, x.config);
        }
        let batch = x.inner.shape()[0];
        let [_, channels, h, w] = output_grad.inner.shape().dims();
        let grad = <Self as DecoratorOps<B>>::float_swap_dims(output_grad, 0, 1);
        let grad = <Self as DecoratorOps<B>>::float_reshape(grad, [channels, batch * h * w].into());
        let grad = <Self as DecoratorOps<B>>::float_sum_dim(grad, 1);
        <Self as DecoratorOps<B>>::float_reshape(grad, bias.inner.shape())
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
