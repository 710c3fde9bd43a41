//! How a decorator learns what it sits on.
//!
//! [`KernelBackend`] is implemented for every `CubeBackend<R, F, I, BT>` (CubeCL kernels can be
//! launched on its client with its tensor handles), for `NdArray` (no kernels: compose Burn
//! tensor ops or run the host reference), and for every [`Decorated`] backend, which delegates to
//! its inner backend and adds its own multiply strategy.

use super::{Decorated, Decoration, DecoratorOps, LayerSettings, Wrapped};
use burn_backend::Backend;
use burn_backend::tensor::{FloatTensor, IntTensor};
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};
use core::marker::PhantomData;

/// How the multiplies inside a contraction are done by the decorators of a backend stack.
///
/// Kernels take it as a comptime strategy; sparse kernels honour an approximate multiplier
/// that sits underneath them.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum MultiplyStrategy {
    /// The inner backend's own ops (IEEE FP32 `a * b`).
    #[default]
    Exact,
    /// Ember's kernels with this multiply.
    Approx(crate::approx::ApproxMultiply),
}

/// Receives a backend's float tensors either as CubeCL tensors of a concrete runtime or, on a
/// backend without CubeCL kernels, as they are.
pub trait CubeVisitor<B: Backend> {
    /// What the visit produces.
    type Output;

    /// The backend runs CubeCL kernels on runtime `R`: `inputs` are its tensors, and `rewrap`
    /// turns a CubeCL result back into a float tensor of `B`.
    fn cube<R: CubeRuntime>(
        self,
        inputs: Vec<CubeTensor<R>>,
        rewrap: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> Self::Output;

    /// The backend has no CubeCL kernels.
    fn host(self, inputs: Vec<FloatTensor<B>>) -> Self::Output;
}

/// What a decorator finds underneath it.
pub trait KernelBackend: Backend {
    /// The CubeCL runtime's name when float tensors live in CubeCL memory, `None` otherwise.
    fn cube_runtime() -> Option<&'static str>;

    /// The multiply strategy the decorators of this stack impose on `device`.
    fn multiply_strategy(device: &Self::Device) -> MultiplyStrategy {
        let _ = device;
        MultiplyStrategy::Exact
    }

    /// The name of the multiply of [`KernelBackend::multiply_strategy`] (`native` for the
    /// inner backend's own).
    fn multiply_name(device: &Self::Device) -> String {
        let _ = device;
        "native".into()
    }

    /// Hands `inputs` to `visitor`, as CubeCL tensors when the backend has them.
    fn visit<V: CubeVisitor<Self>>(visitor: V, inputs: Vec<FloatTensor<Self>>) -> V::Output;

    /// `t`'s f32 values, borrowed, where the backend holds them in host memory in row-major
    /// order (ndarray); `None` elsewhere. The host paths read their operands through it
    /// ([`with_f32`]) instead of copying them.
    fn float_host_slice(t: &FloatTensor<Self>) -> Option<&[f32]> {
        let _ = t;
        None
    }

    /// `t`'s values, borrowed, where the backend holds them in host memory in row-major order
    /// as `i64` (ndarray's default int element); `None` elsewhere. Max pooling's backward on the
    /// host reads the maxima's indices through it (burn-ndarray's `into_data` of an int tensor
    /// collects it value by value: a fifth of LeNet-5's training step).
    fn int_host_i64(t: &IntTensor<Self>) -> Option<&[i64]> {
        let _ = t;
        None
    }

    /// `t`'s f32 values as a strided host view where the backend holds them in host memory,
    /// row-major or a permutation of it (ndarray's `swap_dims`, `permute`); `None` elsewhere
    /// (CubeCL memory, other element types, views that skip memory, and decorated backends,
    /// whose float primitive may be a packed weight). The host element-wise ops of the bottom
    /// decorator read their operands through it ([`crate::elementwise`]).
    fn float_host_view(t: &FloatTensor<Self>) -> Option<crate::elementwise::HostView<'_>> {
        let _ = t;
        None
    }

    /// `t` with the shape `shape` (as many values) without a copy, where the backend holds it in
    /// host memory in row-major order (ndarray: burn-ndarray 0.21's `reshape` copies every
    /// tensor, contiguous or not); `t` back elsewhere, and where the counts differ. The result
    /// shares `t`'s memory copy-on-write, as burn-ndarray's own views do.
    fn float_reshape_view(
        t: FloatTensor<Self>,
        shape: &[usize],
    ) -> Result<FloatTensor<Self>, FloatTensor<Self>> {
        let _ = shape;
        Err(t)
    }

    /// Bytes of device memory held by live tensors on `device`, as the runtime's memory manager
    /// counts them (CubeCL: `bytes_in_use`, pool padding excluded); `None` where the backend
    /// allocates from the host heap (measure those with a counting global allocator).
    fn memory_in_use(device: &Self::Device) -> Option<u64> {
        let _ = device;
        None
    }

    /// `tensor` with the configuration every decorator of the stack gives a weight of the
    /// layer `layer` ([`Decoration::for_layer`]); the values are untouched. Undecorated
    /// backends return it as it is.
    fn float_for_layer(tensor: FloatTensor<Self>, layer: &LayerSettings) -> FloatTensor<Self> {
        let _ = layer;
        tensor
    }

    /// `tensor` with the configuration of `like` at every level of the stack (values
    /// untouched): how a layer's input takes its weight's configuration.
    fn float_adopt(tensor: FloatTensor<Self>, like: &FloatTensor<Self>) -> FloatTensor<Self> {
        let _ = like;
        tensor
    }
}

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> KernelBackend
    for CubeBackend<R, F, I, BT>
{
    fn cube_runtime() -> Option<&'static str> {
        Some(core::any::type_name::<R>())
    }

    fn visit<V: CubeVisitor<Self>>(visitor: V, inputs: Vec<FloatTensor<Self>>) -> V::Output {
        visitor.cube::<R>(inputs, &|t| t)
    }

    fn memory_in_use(device: &Self::Device) -> Option<u64> {
        let client = <R as cubecl::Runtime>::client(device);
        client.memory_usage().ok().map(|u| u.bytes_in_use)
    }
}

impl<E, I, Q> KernelBackend for burn_ndarray::NdArray<E, I, Q>
where
    E: burn_ndarray::FloatNdArrayElement,
    I: burn_ndarray::IntNdArrayElement,
    Q: burn_ndarray::QuantElement,
    burn_ndarray::NdArrayTensor: From<burn_ndarray::SharedArray<E>>,
    burn_ndarray::NdArrayTensor: From<burn_ndarray::SharedArray<I>>,
{
    fn cube_runtime() -> Option<&'static str> {
        None
    }

    fn visit<V: CubeVisitor<Self>>(visitor: V, inputs: Vec<FloatTensor<Self>>) -> V::Output {
        visitor.host(inputs.into_iter().map(in_order).collect())
    }

    fn float_host_slice(t: &FloatTensor<Self>) -> Option<&[f32]> {
        match t {
            burn_ndarray::NdArrayTensor::F32(storage) => storage.view().to_slice(),
            _ => None,
        }
    }

    fn int_host_i64(t: &IntTensor<Self>) -> Option<&[i64]> {
        match t {
            burn_ndarray::NdArrayTensor::I64(storage) => storage.view().to_slice(),
            _ => None,
        }
    }

    fn float_reshape_view(
        t: FloatTensor<Self>,
        shape: &[usize],
    ) -> Result<FloatTensor<Self>, FloatTensor<Self>> {
        let burn_ndarray::NdArrayTensor::F32(storage) = t else {
            return Err(t);
        };
        let view = storage.view();
        let takes = view.is_standard_layout() && view.len() == shape.iter().product::<usize>();
        if !takes {
            return Err(burn_ndarray::NdArrayTensor::F32(storage));
        }
        let array = storage.into_shared();
        let array = array
            .into_shape_with_order(ndarray::IxDyn(shape))
            .expect("a row-major array takes any shape of as many values");
        Ok(array.into())
    }

    fn float_host_view(t: &FloatTensor<Self>) -> Option<crate::elementwise::HostView<'_>> {
        let burn_ndarray::NdArrayTensor::F32(storage) = t else {
            return None;
        };
        let view = storage.view();
        let mut strides = Vec::with_capacity(view.ndim());
        for (&n, &s) in view.shape().iter().zip(view.strides()) {
            // a negative step reads memory backwards from the view's first value: not a view
            // whose memory starts at its first value
            strides.push(match (n, usize::try_from(s)) {
                (1, _) => 0,
                (_, Ok(s)) => s,
                (_, Err(_)) => return None,
            });
        }
        let shape = view.shape().to_vec();
        let values = view.to_slice_memory_order()?;
        Some(crate::elementwise::HostView {
            values,
            shape,
            strides,
        })
    }
}

/// `t` with its f32 values in row-major order in memory: strided tensors are copied (a
/// fixed-rank walk), the others pass unchanged, shared or not, and the host paths borrow their
/// values ([`with_f32`]). burn-ndarray's `into_data` would read a strided or shared tensor value
/// by value through a dynamic-rank iterator (a profiled ResMLP step on ndarray spent a quarter of
/// its time there, `docs/broadcast.md`), and a copy of every shared operand cost the small
/// approximate GEMMs up to half their time in page faults (`docs/approx-mul.md`). Other element
/// types pass unchanged.
fn in_order(t: burn_ndarray::NdArrayTensor) -> burn_ndarray::NdArrayTensor {
    use burn_ndarray::NdArrayTensor;
    use ndarray::{ArrayView, Dimension, Ix1, Ix2, Ix3, Ix4, Ix5, Ix6, IxDyn};

    fn walk<D: Dimension>(view: ArrayView<'_, f32, IxDyn>) -> Vec<f32> {
        let view = view.into_dimensionality::<D>().expect("the view's rank");
        view.iter().copied().collect()
    }

    let NdArrayTensor::F32(storage) = &t else {
        return t;
    };
    let view = storage.view();
    // (`as_slice` takes a tensor with a length-1 axis of any stride as in order: ndarray's
    // reshape gives a new length-1 axis stride 1, which burn-ndarray's `into_data` does not)
    if view.is_empty() || view.as_slice().is_some() {
        return t;
    }
    let values = match view.ndim() {
        1 => walk::<Ix1>(view.view()),
        2 => walk::<Ix2>(view.view()),
        3 => walk::<Ix3>(view.view()),
        4 => walk::<Ix4>(view.view()),
        5 => walk::<Ix5>(view.view()),
        6 => walk::<Ix6>(view.view()),
        _ => view.iter().copied().collect(),
    };
    let array = ndarray::ArcArray::from_shape_vec(IxDyn(view.shape()), values)
        .expect("as many values as the shape holds");
    NdArrayTensor::from(array)
}

/// Passes a visit through a decorator: unwraps on the way in, re-wraps on the way out.
struct Through<V, D: Decoration> {
    visitor: V,
    config: D::Config,
    _decoration: PhantomData<D>,
}

impl<B, D, V> CubeVisitor<B> for Through<V, D>
where
    B: Backend,
    D: DecoratorOps<B>,
    V: CubeVisitor<Decorated<B, D>>,
{
    type Output = V::Output;

    fn cube<R: CubeRuntime>(
        self,
        inputs: Vec<CubeTensor<R>>,
        rewrap: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> Self::Output {
        let config = self.config;
        self.visitor.cube::<R>(inputs, &|t| {
            Wrapped::new(D::float_from_inner(rewrap(t)), config.clone())
        })
    }

    fn host(self, inputs: Vec<FloatTensor<B>>) -> Self::Output {
        let config = self.config;
        self.visitor.host(
            inputs
                .into_iter()
                .map(|t| Wrapped::new(D::float_from_inner(t), config.clone()))
                .collect(),
        )
    }
}

impl<B: KernelBackend, D: DecoratorOps<B>> KernelBackend for Decorated<B, D> {
    fn cube_runtime() -> Option<&'static str> {
        B::cube_runtime()
    }

    fn multiply_strategy(device: &Self::Device) -> MultiplyStrategy {
        D::multiply_strategy(&device.config, B::multiply_strategy(&device.inner))
    }

    fn memory_in_use(device: &Self::Device) -> Option<u64> {
        B::memory_in_use(&device.inner)
    }

    fn multiply_name(device: &Self::Device) -> String {
        D::multiply_name(&device.config).unwrap_or_else(|| B::multiply_name(&device.inner))
    }

    fn float_for_layer(tensor: FloatTensor<Self>, layer: &LayerSettings) -> FloatTensor<Self> {
        let config = D::for_layer(&tensor.config, layer);
        let inner = D::float_map(tensor.inner, &|t| B::float_for_layer(t, layer));
        Wrapped::new(D::float_layer(inner, layer), config)
    }

    fn float_adopt(tensor: FloatTensor<Self>, like: &FloatTensor<Self>) -> FloatTensor<Self> {
        let like_inner = D::float_peek(&like.inner);
        Wrapped::new(
            D::float_map(tensor.inner, &|t| B::float_adopt(t, like_inner)),
            like.config.clone(),
        )
    }

    fn float_host_slice(t: &FloatTensor<Self>) -> Option<&[f32]> {
        B::float_host_slice(D::float_peek(&t.inner))
    }

    fn int_host_i64(t: &IntTensor<Self>) -> Option<&[i64]> {
        B::int_host_i64(&t.inner)
    }

    fn visit<V: CubeVisitor<Self>>(visitor: V, inputs: Vec<FloatTensor<Self>>) -> V::Output {
        let config = inputs.first().map(|t| t.config.clone()).unwrap_or_default();
        let inner = inputs
            .into_iter()
            .map(|t| D::float_inner(t.inner, "kernel visit"))
            .collect();
        B::visit::<Through<V, D>>(
            Through {
                visitor,
                config,
                _decoration: PhantomData,
            },
            inner,
        )
    }
}

/// `t` moved to `device`. CubeCL 0.10 moves a tensor between two devices of one runtime with
/// the servers' peer-to-peer `send`/`recv`, which only its CUDA runtime implements (wgpu's
/// panics "not implemented"): elsewhere a move between two distinct devices goes through the
/// host. Data-parallel training needs it (replicas forked to their devices, Burn's collective
/// all-reduce moving gradients between them); the decorators route their `float_to_device`
/// here.
pub fn float_to_device<B: KernelBackend>(t: FloatTensor<B>, device: &B::Device) -> FloatTensor<B> {
    let native = B::cube_runtime().is_none_or(|r| r.ends_with("CudaRuntime"));
    if native || B::float_device(&t) == *device {
        return B::float_to_device(t, device);
    }
    let data = burn_std::reader::try_read_sync(B::float_into_data(t))
        .expect("tensor data readable synchronously")
        .expect("tensor data");
    B::float_from_data(data, device)
}

/// `f` of `t`'s values in row-major order, as f32: borrowed where the backend holds them so
/// ([`KernelBackend::float_host_slice`]), read ([`read_f32`]) otherwise.
pub fn with_f32<B: KernelBackend, R>(t: FloatTensor<B>, f: impl FnOnce(&[f32]) -> R) -> R {
    match B::float_host_slice(&t) {
        Some(values) => f(values),
        None => f(&read_f32::<B>(t)),
    }
}

/// `f` of every tensor's values of `ts` in row-major order, as f32: borrowed where the backend
/// holds them all so ([`KernelBackend::float_host_slice`]), read ([`read_f32`]) otherwise.
pub fn with_f32s<B: KernelBackend, R>(
    ts: Vec<FloatTensor<B>>,
    f: impl FnOnce(&[&[f32]]) -> R,
) -> R {
    let borrowed: Option<Vec<&[f32]>> = ts.iter().map(B::float_host_slice).collect();
    match borrowed {
        Some(values) => f(&values),
        None => {
            let read: Vec<Vec<f32>> = ts.into_iter().map(read_f32::<B>).collect();
            f(&read.iter().map(Vec::as_slice).collect::<Vec<_>>())
        }
    }
}

/// The values of `t` in row-major order, as f32 (host paths only: backends without CubeCL
/// read synchronously). A shared ndarray tensor is read value by value: read those through
/// [`with_f32`].
pub fn read_f32<B: Backend>(t: FloatTensor<B>) -> Vec<f32> {
    burn_std::reader::try_read_sync(B::float_into_data(t))
        .expect("tensor data readable synchronously")
        .expect("tensor data")
        .convert::<f32>()
        .into_vec::<f32>()
        .expect("f32 data")
}

#[cfg(test)]
mod tests {
    use super::{KernelBackend, in_order, read_f32, with_f32};
    use burn_backend::TensorData;
    use burn_backend::ops::{FloatTensorOps, IntTensorOps};

    type B = burn_ndarray::NdArray<f32>;

    #[test]
    fn strided_and_shared_host_inputs_keep_their_values() {
        let values: Vec<f32> = (0..24).map(|v| v as f32 - 7.5).collect();
        let t = B::float_from_data(
            TensorData::new(values.clone(), [2, 3, 4]),
            &Default::default(),
        );
        // shared (a clone holds the buffer) and in order: borrowed as it is, not copied
        let shared = t.clone();
        let kept = in_order(shared.clone());
        let (a, b) = (B::float_host_slice(&kept), B::float_host_slice(&shared));
        assert_eq!(a.map(<[f32]>::as_ptr), b.map(<[f32]>::as_ptr));
        assert_eq!(with_f32::<B, _>(kept, <[f32]>::to_vec), values);
        // a strided view: the values in the view's row-major order
        let swapped = B::float_swap_dims(t, 0, 2);
        assert!(B::float_host_slice(&swapped).is_none());
        let want: Vec<f32> = (0..4)
            .flat_map(|k| (0..3).flat_map(move |j| (0..2).map(move |i| i * 12 + j * 4 + k)))
            .map(|n| values[n])
            .collect();
        let got = in_order(swapped);
        assert_eq!(
            burn_backend::TensorMetadata::shape(&got).to_vec(),
            [4, 3, 2]
        );
        assert_eq!(with_f32::<B, _>(got, <[f32]>::to_vec), want);
        // the original is untouched
        assert_eq!(read_f32::<B>(shared), values);
    }

    #[test]
    fn a_row_major_tensor_takes_a_shape_in_place_and_keeps_its_values() {
        let values: Vec<f32> = (0..24).map(|v| v as f32 - 3.0).collect();
        let t = B::float_from_data(
            TensorData::new(values.clone(), [2, 3, 4]),
            &Default::default(),
        );
        let at = B::float_host_slice(&t).map(<[f32]>::as_ptr);
        let kept = t.clone();
        let rows = B::float_reshape_view(t, &[6, 4]).expect("row-major");
        assert_eq!(burn_backend::TensorMetadata::shape(&rows).to_vec(), [6, 4]);
        assert_eq!(
            B::float_host_slice(&rows).map(<[f32]>::as_ptr),
            at,
            "no copy"
        );
        // an op in place on the view copies first: the original keeps its values
        let doubled = B::float_mul_scalar(rows, 2.0.into());
        let want: Vec<f32> = values.iter().map(|v| v * 2.0).collect();
        assert_eq!(read_f32::<B>(doubled), want);
        assert_eq!(read_f32::<B>(kept.clone()), values);
        // another count of values, a strided view and an int tensor are handed back
        let kept = B::float_reshape_view(kept, &[5, 5]).expect_err("25 values");
        let swapped = B::float_swap_dims(kept, 0, 2);
        let swapped = B::float_reshape_view(swapped, &[24]).expect_err("strided");
        assert_eq!(
            burn_backend::TensorMetadata::shape(&swapped).to_vec(),
            [4, 3, 2]
        );
        let ints = B::int_from_data(TensorData::new(vec![1i64, 2], [2]), &Default::default());
        assert!(B::float_reshape_view(ints, &[2, 1]).is_err(), "not f32");
    }

    #[test]
    fn a_new_unit_axis_is_read_in_place() {
        // ndarray gives the new length-1 axis stride 1: in order, yet not the row-major strides
        // burn-ndarray's `into_data` checks (it would read the values one by one); the host
        // paths borrow them as they are
        let values: Vec<f32> = (0..12).map(|v| v as f32 * 0.5).collect();
        let t = B::float_from_data(TensorData::new(values.clone(), [3, 4]), &Default::default());
        let t = B::float_reshape(B::float_add_scalar(t, 0.0.into()), [1, 3, 4].into());
        let strides = |t: &burn_ndarray::NdArrayTensor| match t {
            burn_ndarray::NdArrayTensor::F32(s) => s.view().strides().to_vec(),
            _ => unreachable!("an f32 tensor"),
        };
        assert_ne!(strides(&t), [12, 4, 1], "the case this test is about");
        let got = in_order(t);
        assert!(B::float_host_slice(&got).is_some());
        assert_eq!(with_f32::<B, _>(got, <[f32]>::to_vec), values);
    }
}
