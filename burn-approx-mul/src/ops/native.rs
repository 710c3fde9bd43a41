//! The native (exact) convolution routes: what `conv1d/2d/3d` and their two gradients run
//! under [`Multiplier::native`](crate::Multiplier::native), chosen by its [`ConvRoute`].
//!
//! Burn 0.21 convolves slowly where Ember runs: burn-ndarray with a direct multiply-add loop,
//! burn-cubecl (built without its `autotune` feature) with its `Direct` kernel, and both take
//! the weight gradient as a convolution whose kernel is the size of the feature map. The
//! [`ConvRoute::Gemm`] route makes every dense convolution a GEMM:
//!
//! | backend | forward, input gradient, weight gradient |
//! |---|---|
//! | no CubeCL kernels (ndarray) | host im2col per sample + the `gemm` crate, multithreaded ([`cubecl_kernels::conv`]) |
//! | CubeCL with CMMA (tensor cores) | burn-cubecl's implicit GEMM (`ConvStrategy::ImplicitGemm`), where it accepts the shape |
//! | CubeCL otherwise, or where implicit GEMM does not apply | Ember's im2col / col2im kernels + the backend's own matmul |
//!
//! Implicit GEMM does not apply to grouped convolutions, nor to the input gradient of a strided
//! one (burn-cubecl would fall back to a direct transposed convolution); where it refuses a
//! shape, the im2col route runs, and the effects report says why. On a GPU the weight
//! gradients (convolutions and linear layers over tokens), whose outputs are small and whose
//! sums are long, split their sum across the device ([`super::split_k`]). [`ConvRoute::Im2col`] skips
//! implicit GEMM, [`ConvRoute::Burn`] keeps Burn's own kernels (the inner backend bit for bit).
//! Transposed convolutions always run Burn's kernels on the native route.
//!
//! The GEMM routes also take a linear layer's products over inputs with leading dimensions
//! (`[batch, tokens, d]`: ResMLP, DeiT) as one GEMM over all rows. Burn 0.21's
//! default `linear_weight_backward` multiplies batch by batch into a `[batch, d_in, d_out]`
//! tensor and sums it over the batch; its forward and input gradient broadcast the weight over
//! the batch.

use super::conv::{self as lowered, Geometry, Product};
use super::split_k::{self, Layout, Split};
use burn_backend::ops::ConvOptions;
use burn_backend::tensor::FloatTensor;
use burn_backend::{Backend, TensorData, TensorMetadata};
use burn_cubecl::CubeRuntime;
use burn_cubecl::kernel::conv::{self as cube_conv, ConvStrategy};
use burn_cubecl::tensor::CubeTensor;
use burn_std::Shape;
use cubecl_kernels::approx::im2col::Window;
use cubecl_kernels::conv::{self as host, DenseConv};
use cubecl_kernels::decorator::{CubeVisitor, KernelBackend, with_f32};
use cubecl_kernels::matmul::{MatmulKernel, Ran};

/// How a native convolution runs (`--conv`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ConvRoute {
    /// The inner backend's own convolution kernels, bit for bit (burn-ndarray's direct loop,
    /// burn-cubecl's `Direct` kernel without autotune).
    #[default]
    Burn,
    /// A GEMM: implicit GEMM on CubeCL runtimes with CMMA where it applies, im2col + the
    /// backend's matmul elsewhere on CubeCL, host im2col + `gemm` without CubeCL.
    Gemm,
    /// As [`ConvRoute::Gemm`] but never implicit GEMM: im2col + the backend's matmul on CubeCL.
    Im2col,
}

impl ConvRoute {
    /// Every route, in the order `--conv` lists them.
    pub const ALL: [ConvRoute; 3] = [Self::Gemm, Self::Im2col, Self::Burn];

    /// The name `--conv` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Burn => "burn",
            Self::Gemm => "gemm",
            Self::Im2col => "im2col",
        }
    }

    /// Parses a name of [`ConvRoute::ALL`] (any case).
    pub fn parse(name: &str) -> Result<Self, crate::ApproxError> {
        Self::ALL
            .into_iter()
            .find(|r| r.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| crate::ApproxError::UnknownConvRoute(name.to_string()))
    }
}

/// [`ConvRoute::parse`].
impl std::str::FromStr for ConvRoute {
    type Err = crate::ApproxError;
    fn from_str(name: &str) -> Result<Self, crate::ApproxError> {
        Self::parse(name)
    }
}

impl std::fmt::Display for ConvRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The route Burn's own kernel is reported under.
pub(crate) const BURN_ROUTE: &str = "native: the inner backend's own op";
const HOST: &str = "native, host im2col + GEMM";
const IMPLICIT: &str = "native, implicit GEMM";
const IM2COL: &str = "native, im2col + matmul";
const ROWS: &str = "native, rows as one GEMM";

/// Which of a convolution's three products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Forward,
    InputGrad,
    WeightGrad,
}

/// One native convolution product: its operands' geometry and Burn's options.
struct Native<const N: usize> {
    op: Op,
    options: ConvOptions<N>,
    route: ConvRoute,
    /// The kernel of the im2col route's matmul.
    matmul: MatmulKernel,
    /// `[B, C_in, in...]` of the convolution's input.
    input: Shape,
    /// `[C_out, C_in/G, k...]`.
    weight: Shape,
    has_bias: bool,
}

impl<const N: usize> Native<N> {
    fn geometry(&self) -> Geometry {
        Geometry::conv(&self.options)
    }

    fn dense(&self) -> DenseConv {
        let lift = |v: &[usize], fill: usize| {
            let mut out = [fill; 3];
            out[3 - v.len()..].copy_from_slice(v);
            out
        };
        let g = self.geometry();
        DenseConv {
            batch: self.input[0],
            window: Window {
                channels: self.input[1],
                input: lift(&self.input[2..], 1),
                kernel: lift(&self.weight[2..], 1),
                stride: g.stride,
                padding: g.padding,
                dilation: g.dilation,
                groups: g.groups,
            },
            out_channels: self.weight[0],
        }
    }

    /// The output's shape: `[B, C_out, o...]` for the forward pass, the input's or the weight's
    /// for a gradient.
    fn output_shape(&self) -> Shape {
        match self.op {
            Op::Forward => {
                let w = self.dense().window;
                let out = w.out();
                let mut dims = vec![self.input[0], self.weight[0]];
                dims.extend_from_slice(&out[3 - N..]);
                Shape::from(dims)
            }
            Op::InputGrad => self.input.clone(),
            Op::WeightGrad => self.weight.clone(),
        }
    }

    /// Why implicit GEMM does not apply on this runtime and shape, `None` when it does.
    fn implicit_refusal<R: CubeRuntime>(&self, t: &CubeTensor<R>) -> Option<String> {
        if t.client.properties().features.matmul.cmma.is_empty() {
            return Some("the runtime has no CMMA (cooperative matrix) support".into());
        }
        if self.options.groups != 1 {
            return Some(format!("{} groups", self.options.groups));
        }
        if self.op == Op::InputGrad && self.options.stride.iter().any(|&s| s != 1) {
            return Some("the input gradient of a strided convolution".into());
        }
        if self.op == Op::WeightGrad {
            // burn-cubecl 0.21's implicit-GEMM weight gradient (cubek's SimpleSyncCyclic on
            // CMMA) returned zeros on an H200 for a 3-channel 3 × 3 convolution, where Burn's
            // direct kernel and Ember's im2col route agree with ndarray
            return Some("the weight gradient (implicit GEMM's was wrong on CUDA)".into());
        }
        None
    }

    /// burn-cubecl's implicit GEMM on `inputs` (cloned handles), or why it refused.
    fn implicit<R: CubeRuntime>(&self, inputs: &[CubeTensor<R>]) -> Result<CubeTensor<R>, String> {
        let o = self.options.clone();
        let result = match self.op {
            Op::Forward => cube_conv::conv_forward::<R, N>(
                inputs[0].clone(),
                inputs[1].clone(),
                inputs.get(2).cloned(),
                o,
                ConvStrategy::ImplicitGemm,
            ),
            Op::InputGrad => cube_conv::conv_data_backward::<R, N>(
                inputs[0].clone(),
                inputs[1].clone(),
                self.input.clone(),
                o,
                ConvStrategy::ImplicitGemm,
            ),
            Op::WeightGrad => cube_conv::conv_weight_backward::<R, N>(
                inputs[0].clone(),
                inputs[1].clone(),
                self.weight.clone(),
                o,
                ConvStrategy::ImplicitGemm,
            ),
        };
        result.map_err(|e| format!("implicit GEMM refused the shape: {e:?}"))
    }

    /// The im2col route over the backend's own matmul (operands as [`convolve`] takes them).
    fn lowered<B: KernelBackend>(&self, mut inputs: Vec<FloatTensor<B>>) -> FloatTensor<B> {
        let g = self.geometry();
        let bias = self.has_bias.then(|| inputs.pop().expect("bias"));
        let mut it = inputs.into_iter();
        let (a, b) = (it.next().expect("lhs"), it.next().expect("rhs"));
        let product = Product::Native(self.matmul);
        match self.op {
            Op::Forward => lowered::forward::<B>(a, b, bias, &g, product),
            Op::InputGrad => lowered::input_grad::<B>(a, b, &g, &self.input[2..], product),
            Op::WeightGrad => lowered::weight_grad::<B>(a, b, &g, &self.weight, product),
        }
    }
}

impl<B: KernelBackend, const N: usize> CubeVisitor<B> for Native<N> {
    type Output = (FloatTensor<B>, String);

    fn cube<R: CubeRuntime>(
        self,
        inputs: Vec<CubeTensor<R>>,
        rewrap: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> Self::Output {
        let reason = match self.route {
            ConvRoute::Gemm => match self.implicit_refusal(&inputs[0]) {
                None => match self.implicit(&inputs) {
                    Ok(out) => return (rewrap(out), IMPLICIT.into()),
                    Err(why) => Some(why),
                },
                Some(why) => Some(why),
            },
            _ => None,
        };
        let matmul = self.matmul;
        let out = self.lowered::<B>(inputs.into_iter().map(rewrap).collect());
        let im2col = on_kernel(IM2COL, matmul);
        let route = match reason {
            None => im2col,
            Some(why) => format!("{im2col}; in place of implicit GEMM: {why}"),
        };
        (out, route)
    }

    fn host(self, inputs: Vec<FloatTensor<B>>) -> Self::Output {
        let conv = self.dense();
        let device = B::float_device(&inputs[0]);
        let mut it = inputs.into_iter();
        let (a, b) = (it.next().expect("lhs"), it.next().expect("rhs"));
        let values = match self.op {
            Op::Forward => {
                let bias = it.next();
                with_f32::<B, _>(a, |x| {
                    with_f32::<B, _>(b, |w| match bias {
                        Some(bias) => {
                            with_f32::<B, _>(bias, |bias| host::forward(x, w, Some(bias), &conv))
                        }
                        None => host::forward(x, w, None, &conv),
                    })
                })
            }
            Op::InputGrad => with_f32::<B, _>(a, |dy| {
                with_f32::<B, _>(b, |w| host::input_grad(dy, w, &conv))
            }),
            Op::WeightGrad => with_f32::<B, _>(a, |x| {
                with_f32::<B, _>(b, |dy| host::weight_grad(x, dy, &conv))
            }),
        };
        let out = B::float_from_data(TensorData::new(values, self.output_shape()), &device);
        (out, HOST.into())
    }
}

/// A native convolution on `route` other than [`ConvRoute::Burn`] (the caller runs Burn's op
/// for that): the result and the route it ran, in words.
fn convolve<B: KernelBackend, const N: usize>(
    native: Native<N>,
    inputs: Vec<FloatTensor<B>>,
) -> (FloatTensor<B>, String) {
    debug_assert_ne!(native.route, ConvRoute::Burn);
    B::visit(native, inputs)
}

/// The forward convolution on `route` (not [`ConvRoute::Burn`]), its im2col route's matmul on
/// `matmul`.
pub(crate) fn forward<B: KernelBackend, const N: usize>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
    options: ConvOptions<N>,
    route: ConvRoute,
    matmul: MatmulKernel,
) -> (FloatTensor<B>, String) {
    let native = Native {
        op: Op::Forward,
        options,
        route,
        matmul,
        input: x.shape(),
        weight: weight.shape(),
        has_bias: bias.is_some(),
    };
    let mut inputs = vec![x, weight];
    inputs.extend(bias);
    convolve::<B, N>(native, inputs)
}

/// The input gradient on `route` (not [`ConvRoute::Burn`]), for an input of shape `input`; the
/// im2col route's matmul on `matmul`.
pub(crate) fn input_grad<B: KernelBackend, const N: usize>(
    input: Shape,
    weight: FloatTensor<B>,
    output_grad: FloatTensor<B>,
    options: ConvOptions<N>,
    route: ConvRoute,
    matmul: MatmulKernel,
) -> (FloatTensor<B>, String) {
    let native = Native {
        op: Op::InputGrad,
        options,
        route,
        matmul,
        input,
        weight: weight.shape(),
        has_bias: false,
    };
    convolve::<B, N>(native, vec![output_grad, weight])
}

/// The weight gradient on `route` (not [`ConvRoute::Burn`]), for a weight of shape `weight`;
/// the im2col route's matmul on `matmul`.
pub(crate) fn weight_grad<B: KernelBackend, const N: usize>(
    x: FloatTensor<B>,
    weight: Shape,
    output_grad: FloatTensor<B>,
    options: ConvOptions<N>,
    route: ConvRoute,
    matmul: MatmulKernel,
) -> (FloatTensor<B>, String) {
    let native = Native {
        op: Op::WeightGrad,
        options,
        route,
        matmul,
        input: x.shape(),
        weight,
        has_bias: false,
    };
    convolve::<B, N>(native, vec![x, output_grad])
}

/// Which of a linear layer's three products ([`linear`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Linear {
    /// `y = x · W (+ b)`: operands `x`, `W`.
    Forward,
    /// `dx = dy · Wᵀ`: operands `W`, `dy`.
    InputGrad,
    /// `dW = xᵀ · dy`: operands `x`, `dy`.
    WeightGrad,
}

/// Whether a linear product under `cfg` with activations `acts` runs as [`linear`]: on the
/// GEMM routes, for activations with leading dimensions (without, Burn's op is that one
/// matmul already), and wherever the matmul's kernel is chosen (Burn's op would run its own).
pub(crate) fn flattens<B: Backend>(cfg: &crate::Multiplier, acts: &FloatTensor<B>) -> bool {
    let rows = cfg.conv() != ConvRoute::Burn && acts.shape().num_dims() > 2;
    rows || cfg.matmul() != MatmulKernel::Burn
}

/// `route` with the matmul kernel it runs named, where one was chosen.
fn on_kernel(route: &str, kernel: MatmulKernel) -> String {
    match kernel {
        MatmulKernel::Burn => route.to_string(),
        k => format!("{route} ({k})"),
    }
}

/// A native `lhs · rhs` on `kernel` and the route it ran (`None`: the inner backend's own op,
/// no kernel chosen or no CubeCL runtime); a kernel that refused is named with its reason.
pub(crate) fn matmul<B: KernelBackend>(
    kernel: MatmulKernel,
    lhs: FloatTensor<B>,
    rhs: FloatTensor<B>,
) -> (FloatTensor<B>, Option<String>) {
    let (out, ran) = cubecl_kernels::matmul::matmul::<B>(kernel, lhs, rhs);
    let route = match ran {
        Ran::Own => None,
        Ran::Chosen => Some(format!("native, matmul on {kernel}")),
        Ran::Refused(why) => Some(format!("{BURN_ROUTE}; {why}")),
    };
    (out, route)
}

/// A linear layer's product with every leading dimension of the activations flattened into
/// rows: one 2-d matmul of the inner backend (on `kernel`), reshapes around it (views where the
/// activations are contiguous); operands as [`Linear`] lists them. The result and its route.
pub(crate) fn linear<B: KernelBackend>(
    op: Linear,
    a: FloatTensor<B>,
    b: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
    kernel: MatmulKernel,
) -> (FloatTensor<B>, Option<String>) {
    let product = |l, r| cubecl_kernels::matmul::matmul::<B>(kernel, l, r).0;
    // the GEMM routes' reshape (`ApproxMul::float_reshape`): in place or copied on the host
    use super::elementwise::reshape;
    fn rows<B: KernelBackend>(t: FloatTensor<B>) -> (FloatTensor<B>, Shape) {
        let s = t.shape();
        let d = s[s.num_dims() - 1];
        let rows = s.num_elements() / d.max(1);
        (reshape::<B>(t, Shape::from([rows, d])), s)
    }
    fn back<B: KernelBackend>(t: FloatTensor<B>, like: Shape, last: usize) -> FloatTensor<B> {
        let mut dims = like.to_vec();
        *dims.last_mut().expect("rank > 2") = last;
        reshape::<B>(t, Shape::from(dims))
    }
    let out = match op {
        Linear::Forward => {
            let d_out = b.shape()[1];
            let (x, shape) = rows::<B>(a);
            let y = product(x, b);
            let y = match bias {
                Some(bias) => B::float_add(y, B::float_reshape(bias, Shape::from([1, d_out]))),
                None => y,
            };
            back::<B>(y, shape, d_out)
        }
        Linear::InputGrad => {
            let d_in = a.shape()[0];
            let (dy, shape) = rows::<B>(b);
            back::<B>(product(dy, B::float_swap_dims(a, 0, 1)), shape, d_in)
        }
        Linear::WeightGrad => {
            let (x, _) = rows::<B>(a);
            let (dy, _) = rows::<B>(b);
            split_k::weight_product::<B>(Layout::Outer, x, dy, Split::Auto, kernel)
        }
    };
    (out, Some(on_kernel(ROWS, kernel)))
}

#[cfg(test)]
mod tests {
    use super::ConvRoute;

    #[test]
    fn routes_parse_by_name_in_any_case_and_unknown_names_are_errors() {
        for route in ConvRoute::ALL {
            assert_eq!(ConvRoute::parse(route.name()).unwrap(), route);
            assert_eq!(
                ConvRoute::parse(&route.name().to_uppercase()).unwrap(),
                route
            );
        }
        let err = ConvRoute::parse("winograd").unwrap_err().to_string();
        assert!(
            err.contains("winograd") && err.contains("gemm, im2col, burn"),
            "{err}"
        );
    }
}
