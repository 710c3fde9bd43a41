//! `Hinm<B>`: the decorator whose pruned weights stay packed.
//!
//! Its float primitive is [`HinmFloat`]: the inner backend's tensor (`Dense`) or a weight in
//! HiNM's packed layout (`Packed`, [`cubecl_kernels::hinm::Packed`]). A weight becomes packed
//! when a per-layer setting carries its packed form ([`HinmLayer`], handed down the stack by
//! [`KernelBackend::float_for_layer`]); nothing else changes a model.
//!
//! - `linear`, `float_matmul` (a packed right operand, as Burn's `Gru` multiplies its gate
//!   weights) and `conv2d` (groups = 1, through `unfold4d`) with a packed weight run the HiNM
//!   sparse product: the CubeCL kernel on a CubeCL backend, the vectorised host implementation
//!   elsewhere (ndarray).
//! - Any other op on a packed weight densifies it first (the generated forwarding calls
//!   [`FloatPrimitive::float_inner`]) and the per-layer effects report names the op. So does a
//!   packed contraction over an *approximate* multiplier underneath (`Hinm<ApproxMul<B>>`): the
//!   sparse kernel multiplies exactly, so the dense masked weight goes to ApproxMul's op instead.

use crate::pack::Layout;
use burn_backend::ops::{ConvOptions, UnfoldOptions};
use burn_backend::tensor::FloatTensor;
use burn_backend::{Backend, DType, Shape, TensorData, TensorMetadata};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;
use cubecl_kernels::decorator::effects::{self, Pass};
use cubecl_kernels::decorator::{
    CubeVisitor, Decorated, DecoratedDevice, Decoration, DecoratorOps, FloatPrimitive,
    KernelBackend, LayerSettings, MultiplyStrategy, Wrapped, read_f32,
};
use cubecl_kernels::hinm::{Packed, PackedCube, launch_spmm, reference};
use std::any::Any;
use std::sync::{Arc, Mutex};

/// The HiNM decoration (no configuration: what is packed is carried by the weights).
#[derive(Clone, Copy, Debug, Default)]
pub struct HinmOps;

/// A backend `B` whose weights may be HiNM-packed.
pub type Hinm<B> = Decorated<B, HinmOps>;
/// The device of [`Hinm<B>`].
pub type HinmDevice<B> = DecoratedDevice<B, ()>;

impl Decoration for HinmOps {
    type Config = ();
    const NAME: &'static str = "hinm";
}

/// The packed form of one layer's weight, as a per-layer setting: [`HinmFloat::Packed`] for
/// the layer's weight when [`KernelBackend::float_for_layer`] hands it down.
#[derive(Clone, Debug)]
pub struct HinmLayer(pub Arc<Packed>);

/// A packed weight on a device.
pub struct PackedTensor<B: Backend> {
    host: Arc<Packed>,
    layout: Layout,
    layer: Option<Arc<str>>,
    /// The kept values `[out, nnz / 2]` on the device (what the kernel reads).
    values: B::FloatTensorPrimitive,
    /// The index arrays uploaded for a CubeCL runtime (its `PackedCube`), on first use.
    cube: Mutex<Option<Box<dyn Any + Send + Sync>>>,
}

impl<B: Backend> core::fmt::Debug for PackedTensor<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (out, k) = self.layout.view();
        write!(
            f,
            "PackedTensor({out}×{k}, V = {}, {} kept columns per tile, layer {:?})",
            self.host.v, self.host.nnz, self.layer
        )
    }
}

impl<B: Backend> PackedTensor<B> {
    /// The host form.
    pub fn packed(&self) -> &Arc<Packed> {
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
    fn dense(&self) -> B::FloatTensorPrimitive {
        let data = TensorData::new(
            self.layout.from_view(&self.host.dense()),
            self.layout.shape(),
        );
        B::float_from_data(data, &B::float_device(&self.values))
    }
}

/// Hinm's float primitive: a dense tensor of the inner backend, or a packed weight.
#[derive(Clone, Debug)]
pub enum HinmFloat<B: Backend> {
    /// The inner backend's tensor.
    Dense(B::FloatTensorPrimitive),
    /// A weight in HiNM's packed layout.
    Packed(Arc<PackedTensor<B>>),
}

impl<B: Backend> TensorMetadata for HinmFloat<B> {
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

impl<B: Backend> HinmFloat<B> {
    /// The packed weight, if this is one.
    pub fn as_packed(&self) -> Option<&Arc<PackedTensor<B>>> {
        match self {
            Self::Packed(p) => Some(p),
            Self::Dense(_) => None,
        }
    }
}

impl<B: Backend> FloatPrimitive<B> for HinmOps {
    type Float = HinmFloat<B>;

    fn float_inner(tensor: HinmFloat<B>, op: &'static str) -> B::FloatTensorPrimitive {
        match tensor {
            HinmFloat::Dense(t) => t,
            HinmFloat::Packed(p) => {
                effects::record_densified(p.layer(), op);
                p.dense()
            }
        }
    }
    fn float_from_inner(tensor: B::FloatTensorPrimitive) -> HinmFloat<B> {
        HinmFloat::Dense(tensor)
    }
    fn float_peek(tensor: &HinmFloat<B>) -> &B::FloatTensorPrimitive {
        match tensor {
            HinmFloat::Dense(t) => t,
            HinmFloat::Packed(p) => &p.values,
        }
    }
    fn float_map(
        tensor: HinmFloat<B>,
        f: &dyn Fn(B::FloatTensorPrimitive) -> B::FloatTensorPrimitive,
    ) -> HinmFloat<B> {
        match tensor {
            HinmFloat::Dense(t) => HinmFloat::Dense(f(t)),
            HinmFloat::Packed(p) => HinmFloat::Packed(Arc::new(PackedTensor {
                host: p.host.clone(),
                layout: p.layout,
                layer: p.layer.clone(),
                values: f(p.values.clone()),
                cube: Mutex::new(None),
            })),
        }
    }
    fn float_layer(tensor: HinmFloat<B>, layer: &LayerSettings) -> HinmFloat<B> {
        let (HinmFloat::Dense(t), Some(HinmLayer(host))) = (&tensor, layer.get::<HinmLayer>())
        else {
            return tensor;
        };
        let Some(layout) = Layout::of(t.shape().as_slice()) else {
            return tensor;
        };
        // The caller checked the packed form against the model ([`check_fits`](crate::pack::check_fits)); a weight it
        // does not fit stays dense rather than be replaced by another layer's.
        if layout.view() != (host.out, host.k) {
            return tensor;
        }
        let device = B::float_device(t);
        let values = TensorData::new(host.values.clone(), [host.out, host.nnz / 2]);
        HinmFloat::Packed(Arc::new(PackedTensor {
            host: host.clone(),
            layout,
            layer: Some(layer.shared_path()),
            values: B::float_from_data(values, &device),
            cube: Mutex::new(None),
        }))
    }
}

/// The sparse product `x: [m, K] → [m, out]` through a packed weight.
struct Spmm<'a, B: Backend> {
    packed: &'a PackedTensor<B>,
}

impl<B: Backend> CubeVisitor<B> for Spmm<'_, B> {
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
            .and_then(|c| c.downcast_ref::<PackedCube<R>>())
        {
            Some(c) if c.values.device == x.device => c.clone(),
            _ => {
                let c = PackedCube::with_values(&self.packed.host, values);
                *cached = Some(Box::new(c.clone()));
                c
            }
        };
        rewrap(launch_spmm(&x, &cube))
    }

    fn host(self, inputs: Vec<FloatTensor<B>>) -> FloatTensor<B> {
        let x = inputs.into_iter().next().expect("x");
        let device = B::float_device(&x);
        let [m, _] = x.shape().dims::<2>();
        let x = read_f32::<B>(x);
        let y = reference::spmm(&x, m, &self.packed.host);
        B::float_from_data(TensorData::new(y, [m, self.packed.host.out]), &device)
    }
}

type T<B> = FloatTensor<Hinm<B>>;

/// `x: [..., K]` through the packed weight: `[..., out]`, or `None` when the product must run
/// dense (an approximate multiplier underneath: the kernel multiplies exactly).
fn packed_product<B: KernelBackend>(
    x: B::FloatTensorPrimitive,
    p: &PackedTensor<B>,
    pass: Pass,
) -> Result<B::FloatTensorPrimitive, B::FloatTensorPrimitive> {
    let device = B::float_device(&x);
    if B::multiply_strategy(&device) != MultiplyStrategy::Exact {
        return Err(x);
    }
    let dims = x.shape().as_slice().to_vec();
    let (out, k) = p.layout.view();
    let m: usize = dims[..dims.len() - 1].iter().product();
    let x2 = B::float_reshape(x, Shape::new([m, k]));
    let route = if B::cube_runtime().is_some() {
        "hinm kernel"
    } else {
        "hinm host"
    };
    effects::record_contraction(
        p.layer(),
        pass,
        &B::multiply_name(&device),
        false,
        (m * out * p.host.nnz / 2) as u64,
        route,
    );
    let y = B::visit(Spmm { packed: p }, vec![x2, p.values.clone()]);
    let mut out_dims = dims;
    *out_dims.last_mut().expect("rank ≥ 1") = out;
    Ok(B::float_reshape(y, Shape::from(out_dims)))
}

/// `y + bias` with `bias: [out]` broadcast over `y`'s leading dimensions (at `axis`).
fn add_bias<B: Backend>(
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

impl<B: KernelBackend> DecoratorOps<B> for HinmOps {
    fn linear(x: T<B>, weight: T<B>, bias: Option<T<B>>) -> T<B> {
        let xin = Self::float_inner(x.inner, "linear");
        let bias = bias.map(|b| Self::float_inner(b.inner, "linear"));
        let out = match weight.inner {
            HinmFloat::Packed(p) if matches!(p.layout, Layout::Linear { .. }) => {
                match packed_product::<B>(xin, &p, Pass::Forward) {
                    Ok(y) => {
                        let axis = y.shape().num_dims() - 1;
                        add_bias::<B>(y, bias, axis)
                    }
                    Err(xin) => {
                        effects::record_densified(p.layer(), "linear (approximate multiply)");
                        B::linear(xin, p.dense(), bias)
                    }
                }
            }
            w => B::linear(xin, Self::float_inner(w, "linear"), bias),
        };
        Wrapped::new(HinmFloat::Dense(out), ())
    }

    fn float_matmul(lhs: T<B>, rhs: T<B>) -> T<B> {
        let l = Self::float_inner(lhs.inner, "float_matmul");
        let out = match rhs.inner {
            HinmFloat::Packed(p)
                if matches!(p.layout, Layout::Linear { .. }) && l.shape().num_dims() == 2 =>
            {
                match packed_product::<B>(l, &p, Pass::Matmul) {
                    Ok(y) => y,
                    Err(l) => {
                        effects::record_densified(p.layer(), "float_matmul (approximate multiply)");
                        B::float_matmul(l, p.dense())
                    }
                }
            }
            r => B::float_matmul(l, Self::float_inner(r, "float_matmul")),
        };
        Wrapped::new(HinmFloat::Dense(out), ())
    }

    fn conv2d(x: T<B>, weight: T<B>, bias: Option<T<B>>, options: ConvOptions<2>) -> T<B> {
        let xin = Self::float_inner(x.inner, "conv2d");
        let bias = bias.map(|b| Self::float_inner(b.inner, "conv2d"));
        let out = match weight.inner {
            HinmFloat::Packed(p)
                if options.groups == 1 && matches!(p.layout, Layout::Conv { rank: 4, .. }) =>
            {
                let Layout::Conv { dims, .. } = p.layout else {
                    unreachable!("matched above")
                };
                let [batch, _, h, w] = xin.shape().dims::<4>();
                let kernel = [dims[2], dims[3]];
                let out_hw: [usize; 2] = core::array::from_fn(|i| {
                    let size = [h, w][i] + 2 * options.padding[i];
                    let span = options.dilation[i] * (kernel[i] - 1) + 1;
                    (size - span) / options.stride[i] + 1
                });
                let unfold = UnfoldOptions::new(options.stride, options.padding, options.dilation);
                // [batch, K, L] → [batch·L, K]
                let cols = B::unfold4d(xin.clone(), kernel, unfold);
                let k = cols.shape()[1];
                let cols = B::float_swap_dims(cols, 1, 2);
                let cols = B::float_reshape(cols, Shape::new([batch, out_hw[0] * out_hw[1], k]));
                match packed_product::<B>(cols, &p, Pass::Forward) {
                    Ok(y) => {
                        // [batch, L, out] → [batch, out, oh, ow]
                        let out_c = p.layout.view().0;
                        let y = B::float_swap_dims(y, 1, 2);
                        let y =
                            B::float_reshape(y, Shape::new([batch, out_c, out_hw[0], out_hw[1]]));
                        add_bias::<B>(y, bias, 1)
                    }
                    Err(_) => {
                        effects::record_densified(p.layer(), "conv2d (approximate multiply)");
                        B::conv2d(xin, p.dense(), bias, options)
                    }
                }
            }
            w => B::conv2d(xin, Self::float_inner(w, "conv2d"), bias, options),
        };
        Wrapped::new(HinmFloat::Dense(out), ())
    }
}
