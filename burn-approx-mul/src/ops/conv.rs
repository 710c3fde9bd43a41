//! Every convolution lowered onto a GEMM through im2col / col2im: the approximate GEMM, or
//! (the native im2col route, [`super::native`]) the inner backend's own matmul.
//!
//! All ranks are handled as 3-d (a 1-d convolution is `[1, 1, L]`, a 2-d one `[1, H, W]`).
//! With `G` groups, `K = C_in/G · kd·kh·kw` and `L` output positions per sample:
//!
//! - forward:         `y[g] = W[g] (C_out/G × K) · cols[g] (K × B·L)`
//! - weight gradient: `dW[g] = dy[g] (C_out/G × B·L) · cols[g]ᵀ`
//! - input gradient:  `dcols[g] = W[g]ᵀ · dy[g]`, scattered back by col2im (additions only).
//!
//! A transposed convolution is the input gradient of the convolution with the same geometry,
//! so `conv_transpose` = [`input_grad`], its input gradient = [`forward`] and its weight
//! gradient = [`weight_grad`] with the roles of input and output swapped.

use super::matmul::{gemm, gemm_nt, reshape};
use super::split_k::{self, Layout, Split};
use burn_backend::ops::{ConvOptions, ConvTransposeOptions, UnfoldOptions};
use burn_backend::tensor::FloatTensor;
use burn_backend::{Backend, TensorData, TensorMetadata};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;
use burn_std::Shape;
use cubecl_kernels::approx::ApproxMultiply;
use cubecl_kernels::approx::gemm as approx_gemm;
use cubecl_kernels::approx::im2col::{self as kernel, Window};
use cubecl_kernels::conv as host;
use cubecl_kernels::decorator::CubeVisitor;
use cubecl_kernels::decorator::KernelBackend;
use cubecl_kernels::decorator::with_f32;
use cubecl_kernels::matmul::MatmulKernel;

/// The GEMM a lowered convolution multiplies with.
#[derive(Clone, Copy, Debug)]
pub enum Product<'a> {
    /// The inner backend's own matmul on this kernel (exact: the native im2col route).
    Native(MatmulKernel),
    /// Ember's GEMM with every product through this multiply.
    Approx(&'a ApproxMultiply),
}

impl Product<'_> {
    /// `lhs: [G, m, k] · rhs: [G, k, n]`.
    fn gemm<B: KernelBackend>(self, lhs: FloatTensor<B>, rhs: FloatTensor<B>) -> FloatTensor<B> {
        match self {
            Self::Native(kernel) => cubecl_kernels::matmul::matmul::<B>(kernel, lhs, rhs).0,
            Self::Approx(mul) => gemm::<B>(lhs, rhs, mul),
        }
    }

    /// `lhs: [G, m, k] · rhs_tᵀ` for `rhs_t: [G, n, k]` (Ember's host GEMM reads `rhs_t` in
    /// place: the transposed copy it replaces took a tenth of ResNet-18-w16's AFM16 step).
    fn gemm_nt<B: KernelBackend>(
        self,
        lhs: FloatTensor<B>,
        rhs_t: FloatTensor<B>,
    ) -> FloatTensor<B> {
        match self {
            Self::Native(kernel) => {
                split_k::weight_product::<B>(Layout::Inner, lhs, rhs_t, Split::Auto, kernel)
            }
            Self::Approx(mul) => gemm_nt::<B>(lhs, rhs_t, mul),
        }
    }
}

/// Stride, padding, dilation and groups of a convolution, as 3-d.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Stride per spatial dimension.
    pub stride: [usize; 3],
    /// Zero padding on both sides.
    pub padding: [usize; 3],
    /// Dilation.
    pub dilation: [usize; 3],
    /// Groups.
    pub groups: usize,
}

/// A 1- to 3-d parameter as 3-d, leading dimensions set to `fill`.
fn lift(v: &[usize], fill: usize) -> [usize; 3] {
    let mut out = [fill; 3];
    out[3 - v.len()..].copy_from_slice(v);
    out
}

impl Geometry {
    /// From Burn's convolution options.
    pub fn conv<const N: usize>(o: &ConvOptions<N>) -> Self {
        Self {
            stride: lift(&o.stride, 1),
            padding: lift(&o.padding, 0),
            dilation: lift(&o.dilation, 1),
            groups: o.groups,
        }
    }

    /// From Burn's transposed-convolution options (the geometry of the convolution it inverts).
    pub fn conv_transpose<const N: usize>(o: &ConvTransposeOptions<N>) -> Self {
        Self {
            stride: lift(&o.stride, 1),
            padding: lift(&o.padding, 0),
            dilation: lift(&o.dilation, 1),
            groups: o.groups,
        }
    }

    /// The window of this geometry over an input of spatial size `input`.
    fn window(&self, channels: usize, input: [usize; 3], kernel: [usize; 3]) -> Window {
        Window {
            channels,
            input,
            kernel,
            stride: self.stride,
            padding: self.padding,
            dilation: self.dilation,
            groups: self.groups,
        }
    }
}

/// The shape `[B, C, s...]` (rank 3..=5) as `[B, C, d, h, w]`.
fn dims_5d(s: &Shape) -> Shape {
    let mut dims = vec![s[0], s[1]];
    dims.extend(std::iter::repeat_n(1, 5 - s.num_dims()));
    dims.extend_from_slice(&s[2..]);
    Shape::from(dims)
}

/// `[B, C, s...]` (rank 3..=5) as `[B, C, d, h, w]`.
fn to_5d<B: Backend>(t: FloatTensor<B>) -> FloatTensor<B> {
    let dims = dims_5d(&t.shape());
    reshape::<B>(t, dims.as_slice())
}

/// The shape `[B, C, d, h, w]` at the caller's rank: `[B, C, last (rank - 2) dims]`.
fn dims_at_rank(s: &[usize], rank: usize) -> Vec<usize> {
    let mut dims = vec![s[0], s[1]];
    dims.extend_from_slice(&s[5 - (rank - 2)..]);
    dims
}

/// Back to the caller's rank: `[B, C, d, h, w]` → `[B, C, last (rank - 2) dims]`.
fn from_5d<B: Backend>(t: FloatTensor<B>, rank: usize) -> FloatTensor<B> {
    let dims = dims_at_rank(&t.shape(), rank);
    reshape::<B>(t, &dims)
}

fn spatial(s: &Shape) -> [usize; 3] {
    [s[2], s[3], s[4]]
}

/// im2col / col2im: a CubeCL kernel each on CubeCL backends, their host form elsewhere
/// ([`cubecl_kernels::conv::im2col_batch`], equal to the kernels' host references).
enum Lowering {
    Im2col(Window),
    Col2im(Window, usize),
}

impl<B: KernelBackend> CubeVisitor<B> for Lowering {
    type Output = FloatTensor<B>;

    fn cube<R: CubeRuntime>(
        self,
        inputs: Vec<CubeTensor<R>>,
        rewrap: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> FloatTensor<B> {
        let t = inputs.into_iter().next().expect("one input");
        rewrap(match self {
            Self::Im2col(w) => kernel::launch_im2col(t, &w),
            Self::Col2im(w, batch) => kernel::launch_col2im(t, batch, &w),
        })
    }

    fn host(self, inputs: Vec<FloatTensor<B>>) -> FloatTensor<B> {
        let t = inputs.into_iter().next().expect("one input");
        let device = B::float_device(&t);
        let (out, shape) = match self {
            Self::Im2col(w) => {
                let batch = t.shape()[0];
                let cols = with_f32::<B, _>(t, |x| host::im2col_batch(x, batch, &w));
                (cols, w.cols_shape(batch).to_vec())
            }
            Self::Col2im(w, batch) => {
                let x = with_f32::<B, _>(t, |cols| host::col2im_batch(cols, batch, &w));
                (x, w.input_shape(batch).to_vec())
            }
        };
        B::float_from_data(TensorData::new(out, shape), &device)
    }
}

/// `x: [B, C, d, h, w]` → columns `[G, C/G · kvol, B · L]` and the output size.
fn im2col<B: KernelBackend>(
    x: FloatTensor<B>,
    g: &Geometry,
    kernel: [usize; 3],
) -> (FloatTensor<B>, [usize; 3]) {
    let s = x.shape();
    let w = g.window(s[1], spatial(&s), kernel);
    (B::visit(Lowering::Im2col(w), vec![x]), w.out())
}

/// Columns `[G, C/G · kvol, B · L]` scattered (added) back into `[B, C, d, h, w]`.
fn col2im<B: KernelBackend>(cols: FloatTensor<B>, w: Window, batch: usize) -> FloatTensor<B> {
    B::visit(Lowering::Col2im(w, batch), vec![cols])
}

/// `[C_out, C_in/G, k...]` → `[G, C_out/G, C_in/G · kvol]`.
fn weight_matrix<B: Backend>(w: FloatTensor<B>, groups: usize) -> FloatTensor<B> {
    let s = w.shape();
    let per_row = s.num_elements() / s[0];
    reshape::<B>(w, &[groups, s[0] / groups, per_row])
}

fn kernel_size(w: &Shape) -> [usize; 3] {
    let k = &w[2..];
    lift(k, 1)
}

/// `[G, C_out/G, B·L]` → `[B, C_out, out...]` at the caller's rank.
fn unfold_output<B: Backend>(
    y: FloatTensor<B>,
    batch: usize,
    out: [usize; 3],
    rank: usize,
) -> FloatTensor<B> {
    let s = y.shape();
    let (groups, per_group) = (s[0], s[1]);
    let l: usize = out.iter().product();
    let y = reshape::<B>(y, &[groups, per_group, batch, l]);
    let y = B::float_permute(y, &[2, 0, 1, 3]);
    from_5d::<B>(
        reshape::<B>(y, &[batch, groups * per_group, out[0], out[1], out[2]]),
        rank,
    )
}

/// `[B, C, out...]` → `[G, C/G, B·L]`.
fn fold_output_grad<B: Backend>(dy: FloatTensor<B>, groups: usize) -> FloatTensor<B> {
    let dy = to_5d::<B>(dy);
    let s = dy.shape();
    let (batch, channels) = (s[0], s[1]);
    let l: usize = spatial(&s).iter().product();
    let dy = reshape::<B>(dy, &[batch, groups, channels / groups, l]);
    let dy = B::float_permute(dy, &[1, 2, 0, 3]);
    reshape::<B>(dy, &[groups, channels / groups, batch * l])
}

/// `y + bias[c]` along `y`'s channel axis (1). On the host, one pass of Ember's per-channel
/// affine with `α = 1` (`y · 1` is exact, so the same bits as the add): ndarray's broadcast
/// add walked the output a value at a time, a twentieth of LeNet-5's AFM16 step. On CubeCL,
/// the backend's broadcast add.
fn add_bias<B: KernelBackend>(y: FloatTensor<B>, bias: Option<FloatTensor<B>>) -> FloatTensor<B> {
    match bias {
        Some(b) if B::cube_runtime().is_none() => {
            let ones = B::float_ones(
                Shape::from([b.shape()[0]]),
                &B::float_device(&y),
                b.dtype().into(),
            );
            cubecl_kernels::broadcast::ops::affine_on_axis::<B>(y, ones, Some(b), 1)
        }
        bias => cubecl_kernels::decorator::packed::add_bias::<B>(y, bias, 1),
    }
}

/// Convolution `x: [B, C_in, s...]`, `weight: [C_out, C_in/G, k...]` → `[B, C_out, o...]`.
pub fn forward<B: KernelBackend>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
    g: &Geometry,
    product: Product<'_>,
) -> FloatTensor<B> {
    let rank = x.shape().num_dims();
    let batch = x.shape()[0];
    let kernel = kernel_size(&weight.shape());
    let s = dims_5d(&x.shape());
    let w = g.window(s[1], spatial(&s), kernel);
    if let Some(y) = implicit::<B>(Implicit::Forward, [&x, &weight], &w, product, rank) {
        return add_bias::<B>(y, bias);
    }
    let (cols, out) = im2col::<B>(to_5d::<B>(x), g, kernel);
    let y = product.gemm::<B>(weight_matrix::<B>(weight, g.groups), cols);
    add_bias::<B>(unfold_output::<B>(y, batch, out, rank), bias)
}

/// The products of a convolution the host computes with its columns read in place.
#[derive(Clone, Copy)]
enum Implicit {
    /// `W · cols` as the output `[B, C_out, od, oh, ow]`; the second operand the weight.
    Forward,
    /// `dy · colsᵀ`, `[1, C_out, K]`; the second operand the output gradient
    /// `[B, C_out, o...]`.
    WeightGrad,
    /// `col2im(Wᵀ · dy)`, `[B, C, d, h, w]`; the first operand the output gradient
    /// `[B, C_out, o...]`, the second the weight.
    InputGrad,
}

/// `kind`'s product of the columns of `x` (for the input gradient, of the output gradient)
/// under `w` on a backend without CubeCL kernels, with the columns read where they lie in `x`
/// ([`cubecl_kernels::approx::gemm::conv_forward`]) or, for the input gradient, added back a
/// few samples at a time ([`cubecl_kernels::approx::gemm::conv_input_grad`]): `None` where
/// that does not apply (a CubeCL backend, the native product, groups, a product the table
/// expansion does not take), and the caller lowers through the columns. `x` and `other` keep
/// the caller's rank (`rank`, 3 to 5: their values in order are those of `[B, C, d, h, w]`,
/// read in place with no reshaped copy), and so does the output of the forward product and of
/// the input gradient.
fn implicit<B: KernelBackend>(
    kind: Implicit,
    [x, other]: [&FloatTensor<B>; 2],
    w: &Window,
    product: Product<'_>,
    rank: usize,
) -> Option<FloatTensor<B>> {
    let Product::Approx(mul) = product else {
        return None;
    };
    if B::cube_runtime().is_some() || w.groups != 1 {
        return None;
    }
    let batch = x.shape()[0];
    let out = with_f32::<B, _>(x.clone(), |xs| {
        with_f32::<B, _>(other.clone(), |o| match kind {
            Implicit::Forward => approx_gemm::conv_forward(xs, o, batch, w, mul),
            Implicit::WeightGrad => approx_gemm::conv_weight_grad(xs, o, batch, w, mul),
            Implicit::InputGrad => approx_gemm::conv_input_grad(xs, o, batch, w, mul),
        })
    })?;
    let shape = match kind {
        Implicit::Forward => {
            let [d, h, wd] = w.out();
            dims_at_rank(&[batch, other.shape()[0], d, h, wd], rank)
        }
        Implicit::WeightGrad => vec![1, other.shape()[1], w.channels * w.kvol()],
        Implicit::InputGrad => dims_at_rank(&w.input_shape(batch), rank),
    };
    Some(B::float_from_data(
        TensorData::new(out, shape),
        &B::float_device(x),
    ))
}

/// Burn's `unfold4d` through the im2col lowering: `x: [B, C, h, w]` → `[B, C·kh·kw, L]`, the
/// patches of every output position in the order a `[C_out, C, kh, kw]` weight flattens to.
/// The values are copies of `x` or zeros (padding), as Burn's own, which multiplies by a one-hot
/// kernel in a convolution (a direct convolution on ndarray and on burn-cubecl without
/// autotune, with `C·kh·kw` output channels; and `inf · 0` is NaN there, not here).
pub fn unfold4d<B: KernelBackend>(
    x: FloatTensor<B>,
    kernel: [usize; 2],
    options: &UnfoldOptions,
) -> FloatTensor<B> {
    let g = Geometry {
        stride: lift(&options.stride, 1),
        padding: lift(&options.padding, 0),
        dilation: lift(&options.dilation, 1),
        groups: 1,
    };
    let batch = x.shape()[0];
    let (cols, out) = im2col::<B>(to_5d::<B>(x), &g, lift(&kernel, 1));
    // [1, K, B·L] → [B, K, L]
    let k = cols.shape()[1];
    let l: usize = out.iter().product();
    let cols = reshape::<B>(cols, &[k, batch, l]);
    B::float_permute(cols, &[1, 0, 2])
}

/// Gradient of a convolution with respect to its input of spatial size `input` (1 to 3 dims),
/// given `output_grad: [B, C_out, o...]`.
pub fn input_grad<B: KernelBackend>(
    output_grad: FloatTensor<B>,
    weight: FloatTensor<B>,
    g: &Geometry,
    input: &[usize],
    product: Product<'_>,
) -> FloatTensor<B> {
    let rank = output_grad.shape().num_dims();
    let ws = weight.shape();
    let kernel = kernel_size(&ws);
    let batch = output_grad.shape()[0];
    let out = spatial(&dims_5d(&output_grad.shape()));
    let w = g.window(g.groups * ws[1], lift(input, 1), kernel);
    debug_assert_eq!(w.out(), out);
    let operands = [&output_grad, &weight];
    if let Some(dx) = implicit::<B>(Implicit::InputGrad, operands, &w, product, rank) {
        return dx;
    }
    let dy = fold_output_grad::<B>(output_grad, g.groups);
    let wt = B::float_swap_dims(weight_matrix::<B>(weight, g.groups), 1, 2);
    let dcols = product.gemm::<B>(wt, dy); // [G, C_in/G·kvol, B·L]
    from_5d::<B>(col2im::<B>(dcols, w, batch), rank)
}

/// Gradient of a convolution with respect to its weight of shape `weight_shape`.
pub fn weight_grad<B: KernelBackend>(
    x: FloatTensor<B>,
    output_grad: FloatTensor<B>,
    g: &Geometry,
    weight_shape: &Shape,
    product: Product<'_>,
) -> FloatTensor<B> {
    let kernel = kernel_size(weight_shape);
    let rank = x.shape().num_dims();
    let s = dims_5d(&x.shape());
    let w = g.window(s[1], spatial(&s), kernel);
    let operands = [&x, &output_grad];
    if let Some(dw) = implicit::<B>(Implicit::WeightGrad, operands, &w, product, rank) {
        return reshape::<B>(dw, weight_shape.as_slice());
    }
    let (x, dy5) = (to_5d::<B>(x), to_5d::<B>(output_grad));
    if let Product::Native(kernel) = product {
        return native_weight_grad::<B>(x, dy5, g, weight_shape, Split::Auto, kernel);
    }
    columns_weight_grad::<B>(x, dy5, g, weight_shape, product)
}

/// The exact (native) weight gradient of the convolution of `x: [B, C_in, s...]` with output
/// gradient `output_grad: [B, C_out, o...]`, its sum over the batch split as `split` says: by
/// the device ([`Split::Auto`], what [`weight_grad`] runs), or into exactly `n` runs of whole
/// samples ([`Split::Chunks`]`(n)`, on a CubeCL runtime; the host ignores it); its matmul on
/// `kernel`.
///
/// # Panics
/// If [`Split::Chunks`] asks a CubeCL runtime for runs that do not divide the batch, or for more
/// than one run of a grouped convolution.
pub fn native_weight_grad<B: KernelBackend>(
    x: FloatTensor<B>,
    output_grad: FloatTensor<B>,
    g: &Geometry,
    weight_shape: &Shape,
    split: Split,
    kernel: MatmulKernel,
) -> FloatTensor<B> {
    let visitor = SampleSplit {
        g: *g,
        weight: weight_shape.clone(),
        split,
        kernel,
    };
    B::visit(visitor, vec![to_5d::<B>(x), to_5d::<B>(output_grad)])
}

/// The weight gradient through the columns `[G, K, B·L]` of `x: [B, C, d, h, w]` and the output
/// gradient `dy5: [B, C_out, od, oh, ow]` folded to `[G, C_out/G, B·L]`.
fn columns_weight_grad<B: KernelBackend>(
    x: FloatTensor<B>,
    dy5: FloatTensor<B>,
    g: &Geometry,
    weight_shape: &Shape,
    product: Product<'_>,
) -> FloatTensor<B> {
    let (cols, _) = im2col::<B>(x, g, kernel_size(weight_shape));
    let dy = fold_output_grad::<B>(dy5, g.groups);
    let dw = product.gemm_nt::<B>(dy, cols); // [G, C_out/G, K]
    reshape::<B>(dw, weight_shape.as_slice())
}

/// The native weight gradient of an ungrouped convolution on a GPU, split into runs of whole
/// samples ([`split_k::sample_chunks`]): im2col stores each run's columns together
/// ([`kernel::launch_im2col_chunked`]), the output gradient is permuted once into the same runs
/// (the copy the unsplit product makes to fold it), and one batched matmul multiplies every run
/// with no further copy (the columns are read transposed in place); the runs' products are then
/// summed. Where no split applies (a CPU, grouped convolutions, outputs that fill the device, a
/// batch without a fitting divisor), the columns route of [`columns_weight_grad`].
struct SampleSplit {
    g: Geometry,
    weight: Shape,
    split: Split,
    kernel: MatmulKernel,
}

impl<B: KernelBackend> CubeVisitor<B> for SampleSplit {
    type Output = FloatTensor<B>;

    fn cube<R: CubeRuntime>(
        self,
        inputs: Vec<CubeTensor<R>>,
        rewrap: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> FloatTensor<B> {
        let units = cubecl_kernels::runtime::gpu_units(&inputs[0].client);
        let mut it = inputs.into_iter();
        let (x, dy) = (it.next().expect("x"), it.next().expect("dy"));
        let xs = x.meta.shape().dims::<5>();
        let w = self
            .g
            .window(xs[1], [xs[2], xs[3], xs[4]], kernel_size(&self.weight));
        let (batch, c_out, l) = (xs[0], self.weight[0], w.positions());
        let k = w.channels / w.groups * w.kvol();
        let s = match (self.split, self.g.groups) {
            (Split::Auto, 1) => split_k::sample_chunks(1, c_out, k, batch, l, units),
            (Split::Auto, _) => 1,
            (Split::Chunks(s), groups) => {
                assert!(
                    s == 1 || groups == 1,
                    "a grouped convolution's weight gradient in {s} runs of samples"
                );
                s
            }
        };
        if s == 1 {
            return columns_weight_grad::<B>(
                rewrap(x),
                rewrap(dy),
                &self.g,
                &self.weight,
                Product::Native(self.kernel),
            );
        }
        let run = batch / s * l;
        // [S, 1, K, run] → [S, run, K], a transposed view
        let cols = rewrap(kernel::launch_im2col_chunked(x, &w, s));
        let cols = B::float_swap_dims(reshape::<B>(cols, &[s, k, run]), 1, 2);
        // [B, C_out, L] → [S, C_out, run]: one copy
        let dy = reshape::<B>(rewrap(dy), &[s, batch / s, c_out, l]);
        let dy = reshape::<B>(B::float_permute(dy, &[0, 2, 1, 3]), &[s, c_out, run]);
        let (dw, _) = cubecl_kernels::matmul::matmul::<B>(self.kernel, dy, cols);
        let dw = B::float_sum_dim(dw, 0); // [1, C_out, K]
        reshape::<B>(dw, self.weight.as_slice())
    }

    fn host(self, inputs: Vec<FloatTensor<B>>) -> FloatTensor<B> {
        let mut it = inputs.into_iter();
        let (x, dy) = (it.next().expect("x"), it.next().expect("dy"));
        columns_weight_grad::<B>(x, dy, &self.g, &self.weight, Product::Native(self.kernel))
    }
}

/// Spatial output size of a transposed convolution.
pub fn transpose_output<const N: usize>(
    x: &Shape,
    weight: &Shape,
    o: &ConvTransposeOptions<N>,
) -> [usize; N] {
    std::array::from_fn(|i| {
        (x[2 + i] - 1) * o.stride[i] + o.dilation[i] * (weight[2 + i] - 1) + o.padding_out[i] + 1
            - 2 * o.padding[i]
    })
}

/// Positions a transposed convolution's output has beyond the ones its input reaches, per
/// spatial dim, as seen by the convolution it inverts: over the output (`padding_out`
/// included) that convolution's window has `x + ⌊padding_out / stride⌋` positions where the
/// transposed convolution's input has `x`.
fn surplus<const N: usize>(o: &ConvTransposeOptions<N>) -> [usize; N] {
    std::array::from_fn(|i| o.padding_out[i] / o.stride[i])
}

/// `t: [B, C, s...]` with `extra[i]` zeros appended along spatial dim `i`: the positions
/// `surplus` counts, which contribute nothing to any product.
fn pad_end<B: Backend, const N: usize>(t: FloatTensor<B>, extra: [usize; N]) -> FloatTensor<B> {
    let mut t = t;
    for (i, &n) in extra.iter().enumerate().filter(|(_, n)| **n > 0) {
        let mut dims = t.shape().as_slice().to_vec();
        dims[2 + i] = n;
        let zeros = B::float_zeros(Shape::from(dims), &B::float_device(&t), t.dtype().into());
        t = B::float_cat(vec![t, zeros], 2 + i);
    }
    t
}

/// `t: [B, C, s...]` cut to its first `size[i]` positions along spatial dim `i`.
fn narrow_to<B: Backend, const N: usize>(t: FloatTensor<B>, size: [usize; N]) -> FloatTensor<B> {
    let shape = t.shape();
    let slices: Vec<burn_std::Slice> = (0..shape.num_dims())
        .map(|d| {
            let end = if d >= 2 { size[d - 2] } else { shape[d] };
            burn_std::Slice::new(0, Some(end as isize), 1)
        })
        .collect();
    B::float_slice(t, &slices)
}

/// Transposed convolution `x: [B, C_in, s...]`, `weight: [C_in, C_out/G, k...]`: the input
/// gradient of the convolution it inverts, over an input with `surplus` zero positions
/// appended (so `padding_out ≥ stride` has as many columns as that convolution's window).
pub fn transpose<B: KernelBackend, const N: usize>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
    o: &ConvTransposeOptions<N>,
    product: Product<'_>,
) -> FloatTensor<B> {
    let size = transpose_output(&x.shape(), &weight.shape(), o);
    let x = pad_end::<B, N>(x, surplus(o));
    let y = input_grad::<B>(x, weight, &Geometry::conv_transpose(o), &size, product);
    add_bias::<B>(y, bias)
}

/// Gradient of a transposed convolution with respect to its input `[B, C_in, x...]`: the
/// convolution it inverts applied to `output_grad`, cut to the input's size (the `surplus`
/// positions are dropped).
pub fn transpose_input_grad<B: KernelBackend, const N: usize>(
    weight: FloatTensor<B>,
    output_grad: FloatTensor<B>,
    o: &ConvTransposeOptions<N>,
    product: Product<'_>,
) -> FloatTensor<B> {
    let extra = surplus(o);
    let dx = forward::<B>(
        output_grad,
        weight,
        None,
        &Geometry::conv_transpose(o),
        product,
    );
    let s = dx.shape();
    let size: [usize; N] = std::array::from_fn(|i| s[2 + i] - extra[i]);
    narrow_to::<B, N>(dx, size)
}

/// Gradient of a transposed convolution with respect to its weight: the convolution's weight
/// gradient with the input in the output-gradient role, padded with the `surplus` zeros.
pub fn transpose_weight_grad<B: KernelBackend, const N: usize>(
    x: FloatTensor<B>,
    output_grad: FloatTensor<B>,
    o: &ConvTransposeOptions<N>,
    weight_shape: &Shape,
    product: Product<'_>,
) -> FloatTensor<B> {
    let x = pad_end::<B, N>(x, surplus(o));
    weight_grad::<B>(
        output_grad,
        x,
        &Geometry::conv_transpose(o),
        weight_shape,
        product,
    )
}
