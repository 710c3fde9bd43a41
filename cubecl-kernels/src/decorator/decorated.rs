//! The decorated backend type [`Decorated<B, D>`]: its primitives ([`Wrapped`]: the inner
//! backend's, with the decorator's configuration) and its `Backend` impl.

use super::{DecoratedDevice, DecoratorConfig, DecoratorOps, FloatPrimitive};
use burn_backend::backend::{Backend, BackendTypes, ExecutionError};
use burn_backend::quantization::{QuantPropagation, QuantScheme};
use burn_backend::{DType, DTypeUsageSet, QTensorPrimitive, Shape, TensorData, TensorMetadata};
use burn_std::quantization::QuantAcc;
use core::fmt::Debug;
use core::marker::PhantomData;

/// A backend `B` decorated by `D`.
#[derive(Clone, Copy, Default, Debug)]
pub struct Decorated<B, D>(PhantomData<(B, D)>);

/// A tensor primitive of the inner backend together with the decorator's configuration.
#[derive(Clone, Debug)]
pub struct Wrapped<T, C> {
    /// The inner backend's primitive.
    pub inner: T,
    /// The configuration it was created under.
    pub config: C,
}

impl<T, C> Wrapped<T, C> {
    /// Wraps `inner` with `config`.
    pub fn new(inner: T, config: C) -> Self {
        Self { inner, config }
    }
}

impl<T: TensorMetadata, C: DecoratorConfig> TensorMetadata for Wrapped<T, C> {
    fn dtype(&self) -> DType {
        self.inner.dtype()
    }
    fn shape(&self) -> Shape {
        self.inner.shape()
    }
    fn rank(&self) -> usize {
        self.inner.rank()
    }
}

impl<T: QTensorPrimitive, C> QTensorPrimitive for Wrapped<T, C> {
    fn scheme(&self) -> &QuantScheme {
        self.inner.scheme()
    }
    fn acc_precision(&self) -> QuantAcc {
        self.inner.acc_precision()
    }
    fn propagation(&self) -> QuantPropagation {
        self.inner.propagation()
    }
    fn default_scheme() -> QuantScheme {
        T::default_scheme()
    }
}

impl<B: Backend, D: FloatPrimitive<B>> BackendTypes for Decorated<B, D> {
    type Device = DecoratedDevice<B, D::Config>;
    type FloatTensorPrimitive = Wrapped<D::Float, D::Config>;
    type FloatElem = B::FloatElem;
    type IntTensorPrimitive = Wrapped<B::IntTensorPrimitive, D::Config>;
    type IntElem = B::IntElem;
    type BoolTensorPrimitive = Wrapped<B::BoolTensorPrimitive, D::Config>;
    type BoolElem = B::BoolElem;
    type QuantizedTensorPrimitive = Wrapped<B::QuantizedTensorPrimitive, D::Config>;
}

impl<B: Backend, D: DecoratorOps<B>> Backend for Decorated<B, D> {
    fn ad_enabled(device: &Self::Device) -> bool {
        B::ad_enabled(&device.inner)
    }

    fn memory_persistent_allocations<
        Output: Send,
        Input: Send,
        Func: Fn(Input) -> Output + Send,
    >(
        device: &Self::Device,
        input: Input,
        func: Func,
    ) -> Output {
        B::memory_persistent_allocations(&device.inner, input, func)
    }

    fn memory_cleanup(device: &Self::Device) {
        B::memory_cleanup(&device.inner)
    }

    fn name(device: &Self::Device) -> String {
        format!("{}<{}>", D::NAME, B::name(&device.inner))
    }

    fn seed(device: &Self::Device, seed: u64) {
        B::seed(&device.inner, seed)
    }

    fn sync(device: &Self::Device) -> Result<(), ExecutionError> {
        B::sync(&device.inner)
    }

    fn staging<'a, Iter>(data: Iter, device: &Self::Device)
    where
        Iter: Iterator<Item = &'a mut TensorData>,
    {
        B::staging(data, &device.inner)
    }

    fn supports_dtype(device: &Self::Device, dtype: DType) -> bool {
        B::supports_dtype(&device.inner, dtype)
    }

    fn dtype_usage(device: &Self::Device, dtype: DType) -> DTypeUsageSet {
        B::dtype_usage(&device.inner, dtype)
    }

    fn device_count(type_id: u16) -> usize {
        B::device_count(type_id)
    }
}
