//! What weight-sparsity decorators share: weights that stay packed.
//!
//! A weight-sparsity decorator (HiNM's `Hinm<B>`, BCR's `Bcr<B>`) keeps a pruned weight in its
//! packed form instead of a dense tensor with zeros. Everything but the format is the same for
//! all of them, and lives here, generic over the host format ([`PackedWeight`]):
//!
//! - [`PackedFloat`] is the decorator's float primitive ([`FloatPrimitive::Float`]): the inner
//!   backend's tensor (`Dense`) or a packed weight on a device (`Packed`, a [`PackedTensor`]).
//!   Its methods are the bodies of the decorator's [`FloatPrimitive`] implementation: a packed
//!   weight densifies for any op that does not know it ([`PackedFloat::into_inner`], recorded
//!   by the effects report), and becomes packed when a layer's settings carry its packed form
//!   ([`PackedFloat::for_layer`]).
//! - [`linear`], [`matmul`] (a rank-2 left operand times a packed Linear weight, as Burn's
//!   `Gru` multiplies its gate weights) and [`conv2d`] (groups = 1) run the format's sparse
//!   product on a packed weight: its CubeCL kernel on a CubeCL backend (the device arrays
//!   uploaded once per device and cached; a convolution's input unfolded by `unfold4d`, which
//!   ApproxMul's GEMM routes take through Ember's im2col kernel), its host implementation
//!   elsewhere (ndarray; a convolution's im2col columns are the transposed activations the host
//!   product reads without a transpose, [`PackedWeight::host_product_cols`]). Over an *approximate* multiplier underneath they go dense instead (the sparse
//!   products multiply exactly) and say so. They are the bodies of the decorator's
//!   [`DecoratorOps`] overrides.
//!
//! [`FloatPrimitive`]: super::FloatPrimitive
//! [`FloatPrimitive::Float`]: super::FloatPrimitive::Float

use super::effects::{self, Pass};
use super::layout::Layout;
use super::{
    CubeVisitor, Decorated, Decoration, DecoratorOps, FloatPrimitive, KernelBackend, LayerSettings,
    MultiplyStrategy, Wrapped, with_f32,
};
use crate::approx::im2col::Window;
use burn_backend::ops::{ConvOptions, UnfoldOptions};
use burn_backend::tensor::FloatTensor;
use burn_backend::{Backend, DType, Shape, TensorData, TensorMetadata};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;
use core::any::Any;
use core::fmt;
use core::marker::PhantomData;
use std::sync::{Arc, Mutex};

/// A packed weight format, host side: its `out × K` GEMM view and its sparse product
/// `y = x · Wᵀ` (`x: [m, K]` → `y: [m, out]`) on a CubeCL device and on the host.
pub trait PackedWeight: fmt::Debug + Send + Sync + 'static {
    /// The decorator's name (`Backend::name`): `hinm`, `bcr`.
    const NAME: &'static str;
    /// The effects report's route of a product through the CubeCL kernel (`hinm kernel`).
    const KERNEL_ROUTE: &'static str;
    /// The effects report's route of a product through the host implementation (`hinm host`).
    const HOST_ROUTE: &'static str;

    /// The weight's arrays on a CubeCL device, as the kernel reads them.
    type Cube<R: CubeRuntime>: Clone + Send + Sync + 'static;

    /// `(out, K)` of the GEMM view.
    fn view(&self) -> (usize, usize);
    /// The dense `out × K` view, row-major (pruned entries `0`).
    fn dense_view(&self) -> Vec<f32>;
    /// The kept values as the device tensor a packed weight holds (what a per-layer
    /// configuration of the levels underneath reaches, and what the kernel reads; a format may
    /// add unused elements, e.g. one where it keeps no value, since a kernel argument needs a
    /// buffer).
    fn device_values(&self) -> TensorData;
    /// Multiplies of the product with `m` activation rows.
    fn multiplies(&self, m: usize) -> u64;
    /// The device arrays, around `values` (the [`device_values`](Self::device_values) already
    /// on the device): only the index arrays are copied.
    fn upload<R: CubeRuntime>(&self, values: CubeTensor<R>) -> Self::Cube<R>;
    /// The kernel's product: `x: [m, K]` (f32, any strides) → `[m, out]`.
    fn launch<R: CubeRuntime>(x: &CubeTensor<R>, cube: &Self::Cube<R>) -> CubeTensor<R>;
    /// The host product: `x: [m, K]` row-major → `[m, out]` row-major.
    fn host_product(&self, x: &[f32], m: usize) -> Vec<f32>;
    /// The host product on transposed operands: `xᵀ: [K, m]` row-major → `yᵀ: [out, m]`
    /// row-major, written into `yt` (a convolution's im2col columns in, its output channels
    /// out, straight into a group's output buffer).
    fn host_product_cols(&self, xt: &[f32], m: usize, yt: &mut [f32]);
}

/// A packed weight on a device: its host form, how it maps to Burn's layout, its layer, and
/// its values as a tensor of the inner backend.
pub struct PackedTensor<B: Backend, P: PackedWeight> {
    host: Arc<P>,
    layout: Layout,
    layer: Option<Arc<str>>,
    /// The kept values on the device ([`PackedWeight::device_values`]).
    values: B::FloatTensorPrimitive,
    /// `(device, P::Cube<R>)`: the arrays uploaded for a CubeCL runtime, on first use.
    cube: Mutex<Option<Box<dyn Any + Send + Sync>>>,
}

impl<B: Backend, P: PackedWeight> fmt::Debug for PackedTensor<B, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (out, k) = self.layout.view();
        write!(
            f,
            "PackedTensor({out}×{k} as {:?}, {}, layer {:?})",
            self.layout,
            core::any::type_name::<P>(),
            self.layer
        )
    }
}

impl<B: Backend, P: PackedWeight> PackedTensor<B, P> {
    /// `host` for a weight of `layout` of the layer `layer`, its values on `device`.
    ///
    /// # Panics
    /// If `host`'s view is not `layout`'s (a programmer error: [`PackedFloat::for_layer`]
    /// checks it).
    pub fn new(host: Arc<P>, layout: Layout, layer: Option<Arc<str>>, device: &B::Device) -> Self {
        assert_eq!(
            host.view(),
            layout.view(),
            "a packed weight for another layout"
        );
        let values = B::float_from_data(host.device_values(), device);
        Self {
            host,
            layout,
            layer,
            values,
            cube: Mutex::new(None),
        }
    }

    /// The host form.
    pub fn packed(&self) -> &Arc<P> {
        &self.host
    }

    /// How it maps to Burn's layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The layer it belongs to.
    pub fn layer(&self) -> Option<&str> {
        self.layer.as_deref()
    }

    /// Its values on the device.
    pub fn values(&self) -> &B::FloatTensorPrimitive {
        &self.values
    }

    /// The dense masked weight in Burn's layout, on the values' device (with their
    /// configuration).
    pub fn dense(&self) -> B::FloatTensorPrimitive {
        let data = TensorData::new(
            self.layout.from_view(&self.host.dense_view()),
            self.layout.shape(),
        );
        B::float_from_data(data, &B::float_device(&self.values))
    }
}

/// A weight-sparsity decorator's float primitive: a dense tensor of the inner backend, or a
/// packed weight.
pub enum PackedFloat<B: Backend, P: PackedWeight> {
    /// The inner backend's tensor.
    Dense(B::FloatTensorPrimitive),
    /// A packed weight.
    Packed(Arc<PackedTensor<B, P>>),
}

impl<B: Backend, P: PackedWeight> Clone for PackedFloat<B, P> {
    fn clone(&self) -> Self {
        match self {
            Self::Dense(t) => Self::Dense(t.clone()),
            Self::Packed(p) => Self::Packed(p.clone()),
        }
    }
}

impl<B: Backend, P: PackedWeight> fmt::Debug for PackedFloat<B, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Dense(t) => f.debug_tuple("Dense").field(t).finish(),
            Self::Packed(p) => f.debug_tuple("Packed").field(p).finish(),
        }
    }
}

impl<B: Backend, P: PackedWeight> TensorMetadata for PackedFloat<B, P> {
    fn dtype(&self) -> DType {
        match self {
            Self::Dense(t) => t.dtype(),
            Self::Packed(p) => p.values.dtype(),
        }
    }
    fn shape(&self) -> Shape {
        match self {
            Self::Dense(t) => t.shape(),
            Self::Packed(p) => Shape::from(p.layout.shape()),
        }
    }
}

impl<B: Backend, P: PackedWeight> PackedFloat<B, P> {
    /// The packed weight, if this is one.
    pub fn as_packed(&self) -> Option<&Arc<PackedTensor<B, P>>> {
        match self {
            Self::Packed(p) => Some(p),
            Self::Dense(_) => None,
        }
    }

    /// The inner backend's tensor with the same values, for the op `op`: a packed weight
    /// densifies, and the effects report records that `op` made it
    /// ([`FloatPrimitive::float_inner`]).
    pub fn into_inner(self, op: &'static str) -> B::FloatTensorPrimitive {
        match self {
            Self::Dense(t) => t,
            Self::Packed(p) => {
                effects::record_densified(p.layer(), op);
                p.dense()
            }
        }
    }

    /// An inner tensor on the same device, for device queries
    /// ([`FloatPrimitive::float_peek`]).
    pub fn peek(&self) -> &B::FloatTensorPrimitive {
        match self {
            Self::Dense(t) => t,
            Self::Packed(p) => &p.values,
        }
    }

    /// `f` applied to the inner tensor(s), the kind unchanged: a packed weight's values
    /// ([`FloatPrimitive::float_map`]).
    pub fn map(self, f: &dyn Fn(B::FloatTensorPrimitive) -> B::FloatTensorPrimitive) -> Self {
        match self {
            Self::Dense(t) => Self::Dense(f(t)),
            Self::Packed(p) => Self::Packed(Arc::new(PackedTensor {
                host: p.host.clone(),
                layout: p.layout,
                layer: p.layer.clone(),
                values: f(p.values.clone()),
                cube: Mutex::new(None),
            })),
        }
    }

    /// A dense weight of the layer `layer` packed as `host` when the layer's settings carry a
    /// packed form (`host`, the decorator's own settings entry) that fits its shape
    /// ([`FloatPrimitive::float_layer`]). A weight the
    /// packed form does not fit stays dense rather than be replaced by another layer's: check
    /// packed forms against the model before handing them down.
    pub fn for_layer(self, layer: &LayerSettings, host: Option<&Arc<P>>) -> Self {
        let (Self::Dense(t), Some(host)) = (&self, host) else {
            return self;
        };
        let Some(layout) = Layout::of(t.shape().as_slice()) else {
            return self;
        };
        if layout.view() != host.view() {
            return self;
        }
        let device = B::float_device(t);
        Self::Packed(Arc::new(PackedTensor::new(
            host.clone(),
            layout,
            Some(layer.shared_path()),
            &device,
        )))
    }
}

/// The sparse product `x: [m, K] → [m, out]` through a packed weight.
struct Spmm<'a, B: Backend, P: PackedWeight> {
    packed: &'a PackedTensor<B, P>,
}

impl<B: KernelBackend, P: PackedWeight> CubeVisitor<B> for Spmm<'_, B, P> {
    type Output = FloatTensor<B>;

    fn cube<R: CubeRuntime>(
        self,
        inputs: Vec<CubeTensor<R>>,
        rewrap: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> FloatTensor<B> {
        let mut it = inputs.into_iter();
        let (x, values) = (it.next().expect("x"), it.next().expect("values"));
        let mut cached = self.packed.cube.lock().unwrap_or_else(|e| e.into_inner());
        let cube = match cached
            .as_ref()
            .and_then(|c| c.downcast_ref::<(R::Device, P::Cube<R>)>())
        {
            Some((device, c)) if *device == x.device => c.clone(),
            _ => {
                let c = self.packed.host.upload::<R>(values);
                *cached = Some(Box::new((x.device.clone(), c.clone())));
                c
            }
        };
        rewrap(P::launch(&x, &cube))
    }

    fn host(self, inputs: Vec<FloatTensor<B>>) -> FloatTensor<B> {
        let x = inputs.into_iter().next().expect("x");
        let device = B::float_device(&x);
        let [m, _] = x.shape().dims::<2>();
        let y = with_f32::<B, _>(x, |x| self.packed.host.host_product(x, m));
        let (out, _) = self.packed.layout.view();
        B::float_from_data(TensorData::new(y, [m, out]), &device)
    }
}

/// Whether the sparse product may run for the packed weight `p`: not over an approximate
/// multiplier underneath (the sparse products multiply exactly; the dense op of the level
/// underneath honours it). The weight's configuration decides, as in every contraction of a
/// per-layer policy.
fn exact<B: KernelBackend, P: PackedWeight>(p: &PackedTensor<B, P>) -> bool {
    B::multiply_strategy(&B::float_device(&p.values)) == MultiplyStrategy::Exact
}

/// Records a product of `m` activation rows through `p` as a contraction of `pass`.
fn record<B: KernelBackend, P: PackedWeight>(p: &PackedTensor<B, P>, pass: Pass, m: usize) {
    let route = if B::cube_runtime().is_some() {
        P::KERNEL_ROUTE
    } else {
        P::HOST_ROUTE
    };
    let device = B::float_device(&p.values);
    effects::record_contraction(
        p.layer(),
        pass,
        &B::multiply_name(&device),
        false,
        p.host.multiplies(m),
        route,
    );
}

/// `x: [..., K]` through the packed weight: `[..., out]`, recorded as a contraction of `pass`.
fn packed_product<B: KernelBackend, P: PackedWeight>(
    x: B::FloatTensorPrimitive,
    p: &PackedTensor<B, P>,
    pass: Pass,
) -> B::FloatTensorPrimitive {
    let dims = x.shape().as_slice().to_vec();
    let (out, k) = p.layout.view();
    let m: usize = dims[..dims.len() - 1].iter().product();
    let x2 = B::float_reshape(x, Shape::new([m, k]));
    record::<B, P>(p, pass, m);
    let y = B::visit(Spmm { packed: p }, vec![x2, p.values.clone()]);
    let mut out_dims = dims;
    *out_dims.last_mut().expect("rank ≥ 1") = out;
    B::float_reshape(y, Shape::from(out_dims))
}

/// `y + bias` with `bias: [out]` broadcast over `y`'s other dimensions (along `axis`).
pub fn add_bias<B: Backend>(
    y: B::FloatTensorPrimitive,
    bias: Option<B::FloatTensorPrimitive>,
    axis: usize,
) -> B::FloatTensorPrimitive {
    let Some(bias) = bias else { return y };
    let rank = y.shape().num_dims();
    let mut dims = vec![1; rank];
    dims[axis] = bias.shape()[0];
    B::float_add(y, B::float_reshape(bias, Shape::from(dims)))
}

/// A 2-D convolution (`groups = 1`) of `x: [batch, c_in, h, w]` with a `kernel`-sized weight
/// as a product of its unfolded input (`unfold4d`): `product` takes `[batch, L, c_in·kh·kw]`
/// (`L` output positions) to `[batch, L, c_out]`, which becomes `[batch, c_out, oh, ow]` with
/// `bias: [c_out]` added.
pub fn conv2d_unfolded<B: Backend>(
    x: B::FloatTensorPrimitive,
    kernel: [usize; 2],
    bias: Option<B::FloatTensorPrimitive>,
    options: &ConvOptions<2>,
    product: impl FnOnce(B::FloatTensorPrimitive) -> B::FloatTensorPrimitive,
) -> B::FloatTensorPrimitive {
    let [batch, _, h, w] = x.shape().dims::<4>();
    let out_hw: [usize; 2] = core::array::from_fn(|i| {
        let size = [h, w][i] + 2 * options.padding[i];
        let span = options.dilation[i] * (kernel[i] - 1) + 1;
        (size - span) / options.stride[i] + 1
    });
    let unfold = UnfoldOptions::new(options.stride, options.padding, options.dilation);
    // [batch, K, L] → [batch, L, K]
    let cols = B::unfold4d(x, kernel, unfold);
    let k = cols.shape()[1];
    let cols = B::float_swap_dims(cols, 1, 2);
    let cols = B::float_reshape(cols, Shape::new([batch, out_hw[0] * out_hw[1], k]));
    let y = product(cols);
    // [batch, L, out] → [batch, out, oh, ow]
    let out_c = y.shape()[2];
    let y = B::float_swap_dims(y, 1, 2);
    let y = B::float_reshape(y, Shape::new([batch, out_c, out_hw[0], out_hw[1]]));
    add_bias::<B>(y, bias, 1)
}

/// [`conv2d`] through a packed weight on the host, a group of samples at a time
/// ([`crate::conv::forward_with`], the dense host convolution's loop): a group's im2col
/// columns (`[K, S·L]`, in a per-thread buffer) are the transposed activations the host
/// product takes without a transpose ([`PackedWeight::host_product_cols`]), and its
/// `[c_out, S·L]` result is the group's output channels. The columns of the whole batch are
/// never held at once: at ResNet-18-w16's first stage (b64) they were 38 MB, and building
/// them, with their page faults, cost more than the sparse product.
fn conv2d_host<B: KernelBackend, P: PackedWeight>(
    x: B::FloatTensorPrimitive,
    p: &PackedTensor<B, P>,
    kernel: [usize; 2],
    bias: Option<B::FloatTensorPrimitive>,
    options: &ConvOptions<2>,
) -> B::FloatTensorPrimitive {
    let [batch, channels, h, w] = x.shape().dims::<4>();
    let window = Window {
        channels,
        input: [1, h, w],
        kernel: [1, kernel[0], kernel[1]],
        stride: [1, options.stride[0], options.stride[1]],
        padding: [0, options.padding[0], options.padding[1]],
        dilation: [1, options.dilation[0], options.dilation[1]],
        groups: 1,
    };
    let [_, oh, ow] = window.out();
    let m = batch * oh * ow;
    record::<B, P>(p, Pass::Forward, m);
    let device = B::float_device(&x);
    let (out, _) = p.layout.view();
    let conv = crate::conv::DenseConv {
        batch,
        window,
        out_channels: out,
    };
    let y = with_f32::<B, _>(x, |x| {
        crate::conv::forward_with(x, &conv, |y, cols, ld| {
            p.host.host_product_cols(cols, ld, y)
        })
    });
    let y = B::float_from_data(TensorData::new(y, [batch, out, oh, ow]), &device);
    add_bias::<B>(y, bias, 1)
}

/// Burn's `linear` (`x · weight + bias`) with a weight that may be packed: a packed Linear
/// weight runs the sparse product, anything else the inner backend's op (a packed weight of
/// another layout densified first, and recorded).
pub fn linear<B: KernelBackend, P: PackedWeight>(
    x: B::FloatTensorPrimitive,
    weight: PackedFloat<B, P>,
    bias: Option<B::FloatTensorPrimitive>,
) -> B::FloatTensorPrimitive {
    match weight {
        PackedFloat::Packed(p) if matches!(p.layout, Layout::Linear { .. }) => {
            if exact(&p) {
                let y = packed_product::<B, P>(x, &p, Pass::Forward);
                let axis = y.shape().num_dims() - 1;
                add_bias::<B>(y, bias, axis)
            } else {
                effects::record_densified(p.layer(), "linear (approximate multiply)");
                B::linear(x, p.dense(), bias)
            }
        }
        w => B::linear(x, w.into_inner("linear"), bias),
    }
}

/// Burn's `float_matmul` with a right operand that may be packed: a rank-2 `lhs` times a packed
/// Linear weight (`[d_in, d_out]`) runs the sparse product, anything else the inner backend's
/// op.
pub fn matmul<B: KernelBackend, P: PackedWeight>(
    lhs: B::FloatTensorPrimitive,
    rhs: PackedFloat<B, P>,
) -> B::FloatTensorPrimitive {
    match rhs {
        PackedFloat::Packed(p)
            if matches!(p.layout, Layout::Linear { .. }) && lhs.shape().num_dims() == 2 =>
        {
            if exact(&p) {
                packed_product::<B, P>(lhs, &p, Pass::Matmul)
            } else {
                effects::record_densified(p.layer(), "float_matmul (approximate multiply)");
                B::float_matmul(lhs, p.dense())
            }
        }
        r => B::float_matmul(lhs, r.into_inner("float_matmul")),
    }
}

/// Burn's `conv2d` with a weight that may be packed: a packed `[c_out, c_in, kh, kw]` weight
/// with `groups = 1` runs the sparse product on the unfolded input ([`conv2d_unfolded`]),
/// anything else the inner backend's op.
pub fn conv2d<B: KernelBackend, P: PackedWeight>(
    x: B::FloatTensorPrimitive,
    weight: PackedFloat<B, P>,
    bias: Option<B::FloatTensorPrimitive>,
    options: ConvOptions<2>,
) -> B::FloatTensorPrimitive {
    match weight {
        PackedFloat::Packed(p)
            if options.groups == 1 && matches!(p.layout, Layout::Conv { rank: 4, .. }) =>
        {
            let Layout::Conv { dims, .. } = p.layout else {
                unreachable!("matched above")
            };
            if exact(&p) && B::cube_runtime().is_none() {
                conv2d_host::<B, P>(x, &p, [dims[2], dims[3]], bias, &options)
            } else if exact(&p) {
                conv2d_unfolded::<B>(x, [dims[2], dims[3]], bias, &options, |cols| {
                    packed_product::<B, P>(cols, &p, Pass::Forward)
                })
            } else {
                effects::record_densified(p.layer(), "conv2d (approximate multiply)");
                B::conv2d(x, p.dense(), bias, options)
            }
        }
        w => B::conv2d(x, w.into_inner("conv2d"), bias, options),
    }
}

/// The decoration of a weight-sparsity decorator whose packed weights are `P`: HiNM's
/// `Hinm<B> = Decorated<B, PackedOps<Packed>>`, BCR's `Bcr<B> = Decorated<B, PackedOps<Bcrc>>`.
/// No configuration (what is packed is carried by the weights, [`PackedLayer`]); `linear`,
/// `float_matmul` and `conv2d` through a packed weight run its sparse product ([`linear`],
/// [`matmul`], [`conv2d`]); any other op densifies a packed weight and the effects report
/// names the op.
pub struct PackedOps<P>(PhantomData<fn() -> P>);

impl<P> Clone for PackedOps<P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for PackedOps<P> {}

impl<P> Default for PackedOps<P> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<P: PackedWeight> fmt::Debug for PackedOps<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PackedOps({})", P::NAME)
    }
}

impl<P: PackedWeight> Decoration for PackedOps<P> {
    type Config = ();
    const NAME: &'static str = P::NAME;
}

/// The packed form of one layer's weight, as a per-layer setting: [`PackedFloat::Packed`] for
/// the layer's weight when [`KernelBackend::float_for_layer`] hands it down (when its `out × K`
/// view is the weight's: check the packed form against the model first).
#[derive(Debug)]
pub struct PackedLayer<P>(pub Arc<P>);

impl<P> Clone for PackedLayer<P> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<B: Backend, P: PackedWeight> FloatPrimitive<B> for PackedOps<P> {
    type Float = PackedFloat<B, P>;

    fn float_inner(tensor: PackedFloat<B, P>, op: &'static str) -> B::FloatTensorPrimitive {
        tensor.into_inner(op)
    }
    fn float_from_inner(tensor: B::FloatTensorPrimitive) -> PackedFloat<B, P> {
        PackedFloat::Dense(tensor)
    }
    fn float_peek(tensor: &PackedFloat<B, P>) -> &B::FloatTensorPrimitive {
        tensor.peek()
    }
    fn float_map(
        tensor: PackedFloat<B, P>,
        f: &dyn Fn(B::FloatTensorPrimitive) -> B::FloatTensorPrimitive,
    ) -> PackedFloat<B, P> {
        tensor.map(f)
    }
    fn float_layer(tensor: PackedFloat<B, P>, layer: &LayerSettings) -> PackedFloat<B, P> {
        let host = layer.get::<PackedLayer<P>>().map(|l| &l.0);
        tensor.for_layer(layer, host)
    }
}

type Packed<B, P> = FloatTensor<Decorated<B, PackedOps<P>>>;

impl<B: KernelBackend, P: PackedWeight> DecoratorOps<B> for PackedOps<P> {
    fn linear(x: Packed<B, P>, weight: Packed<B, P>, bias: Option<Packed<B, P>>) -> Packed<B, P> {
        let x = Self::float_inner(x.inner, "linear");
        let bias = bias.map(|b| Self::float_inner(b.inner, "linear"));
        let y = linear::<B, P>(x, weight.inner, bias);
        Wrapped::new(PackedFloat::Dense(y), ())
    }

    fn float_matmul(lhs: Packed<B, P>, rhs: Packed<B, P>) -> Packed<B, P> {
        let lhs = Self::float_inner(lhs.inner, "float_matmul");
        let y = matmul::<B, P>(lhs, rhs.inner);
        Wrapped::new(PackedFloat::Dense(y), ())
    }

    fn conv2d(
        x: Packed<B, P>,
        weight: Packed<B, P>,
        bias: Option<Packed<B, P>>,
        options: ConvOptions<2>,
    ) -> Packed<B, P> {
        let x = Self::float_inner(x.inner, "conv2d");
        let bias = bias.map(|b| Self::float_inner(b.inner, "conv2d"));
        let y = conv2d::<B, P>(x, weight.inner, bias, options);
        Wrapped::new(PackedFloat::Dense(y), ())
    }
}
