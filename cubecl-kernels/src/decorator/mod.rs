//! The backend-decorator plumbing shared by every Ember decorator.
//!
//! A Burn backend's ops are static functions, so a decorator's configuration cannot live in
//! `self`: it lives in the **device** ([`DecoratedDevice`]) and travels with every tensor
//! primitive ([`Wrapped`]). That is what lets `Autodiff` call a decorated backward op long after
//! the forward pass, with the configuration the forward tensors had.
//!
//! - [`Decorated<B, D>`] is the backend type. It implements every Burn backend trait by calling
//!   the hooks of [`DecoratorOps<B>`], whose default bodies forward to `B` (generated from the
//!   pinned burn-backend traits by `cargo xtask gen-decorator` into `forward.rs`).
//! - A decorator is a [`Decoration`] (its configuration type) that implements
//!   [`DecoratorOps<B>`] and overrides only the ops it changes.
//! - [`KernelBackend`] tells a decorator what it sits on: a CubeCL backend (client, handles) or a
//!   backend without CubeCL kernels.
//!
//! ```
//! use burn::backend::NdArray;
//! use burn::tensor::Tensor;
//! use cubecl_kernels::decorator::{Decorated, DecoratedDevice, Identity};
//!
//! type B = Decorated<NdArray, Identity>;
//! let device = DecoratedDevice::<NdArray, ()>::new(Default::default(), ());
//! let x = Tensor::<B, 2>::from_floats([[1.0, 2.0], [3.0, 4.0]], &device);
//! let y = x.clone().matmul(x);
//! assert_eq!(y.into_data().to_vec::<f32>().unwrap(), vec![7.0, 10.0, 15.0, 22.0]);
//! ```

#[rustfmt::skip]
mod forward;
mod kernel;
#[rustfmt::skip]
mod transparent;

pub use forward::DecoratorOps;
pub use kernel::{CubeVisitor, KernelBackend, MultiplyStrategy};
pub use transparent::TransparentOps;

use burn_backend::backend::{
    AutodiffBackend, Backend, BackendTypes, DeviceId, DeviceOps, ExecutionError,
};
use burn_backend::quantization::{QuantPropagation, QuantScheme};
use burn_backend::tensor::{BoolTensor, FloatTensor, IntTensor, QuantizedTensor};
use burn_backend::{DType, DTypeUsageSet, QTensorPrimitive, Shape, TensorData, TensorMetadata};
use burn_std::quantization::QuantAcc;
use core::any::{Any, TypeId};
use core::fmt::Debug;
use core::marker::PhantomData;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// What a decorator's device and tensors carry: cheap to clone, comparable, with an identity
/// value as `Default` (the configuration under which the decorator reproduces its inner backend).
pub trait DecoratorConfig: Clone + Default + Debug + PartialEq + Send + Sync + 'static {}
impl<T: Clone + Default + Debug + PartialEq + Send + Sync + 'static> DecoratorConfig for T {}

/// A decorator: a name and a configuration type. Its ops are the hooks of [`DecoratorOps`].
pub trait Decoration: Clone + Copy + Default + Debug + Send + Sync + 'static {
    /// Configuration carried by the device and every tensor.
    type Config: DecoratorConfig;
    /// Name shown by `Backend::name`, e.g. `approx-mul`.
    const NAME: &'static str;

    /// The multiply strategy this decorator imposes over its inner backend's (`inner`).
    fn multiply_strategy(config: &Self::Config, inner: MultiplyStrategy) -> MultiplyStrategy {
        let _ = config;
        inner
    }
}

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

/// The device of a decorated backend: the inner device and the decorator's configuration.
///
/// Burn rebuilds devices from a [`DeviceId`] (`{type_id: u16, index_id: u32}`). The inner
/// `index_id` is a `u16`: the inner device's own ids (`index_id < 2^15`) map to the inner
/// device with the identity configuration; any other (device, configuration) pair is interned in
/// a process-wide table and gets an `index_id` of `2^15 + ticket`, so `from_id(to_id(d)) == d` for every device.
pub struct DecoratedDevice<B: Backend, C> {
    /// The inner backend's device.
    pub inner: B::Device,
    /// The decorator's configuration.
    pub config: C,
}

/// First `index_id` of interned (device, configuration) pairs.
const TICKET_BASE: u16 = 1 << 15;

type Tickets = HashMap<TypeId, Vec<Box<dyn Any + Send + Sync>>>;

fn tickets() -> &'static Mutex<Tickets> {
    static TICKETS: OnceLock<Mutex<Tickets>> = OnceLock::new();
    TICKETS.get_or_init(Default::default)
}

impl<B: Backend, C: DecoratorConfig> DecoratedDevice<B, C> {
    /// A device of the decorated backend.
    pub fn new(inner: B::Device, config: C) -> Self {
        Self { inner, config }
    }
}

impl<B: Backend, C: Clone> Clone for DecoratedDevice<B, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            config: self.config.clone(),
        }
    }
}
impl<B: Backend, C: Default> Default for DecoratedDevice<B, C> {
    fn default() -> Self {
        Self {
            inner: Default::default(),
            config: C::default(),
        }
    }
}
impl<B: Backend, C: PartialEq> PartialEq for DecoratedDevice<B, C> {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner && self.config == other.config
    }
}
impl<B: Backend, C: Debug> Debug for DecoratedDevice<B, C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?} with {:?}", self.inner, self.config)
    }
}

impl<B: Backend, C: DecoratorConfig> burn_backend::backend::Device for DecoratedDevice<B, C> {
    fn from_id(id: DeviceId) -> Self {
        if id.index_id < TICKET_BASE {
            return Self::new(B::Device::from_id(id), C::default());
        }
        let table = tickets().lock().unwrap_or_else(|e| e.into_inner());
        let entry = table
            .get(&TypeId::of::<Self>())
            .and_then(|v| v.get((id.index_id - TICKET_BASE) as usize))
            .and_then(|e| e.downcast_ref::<Self>());
        match entry {
            Some(d) => d.clone(),
            // An id this process never issued: a broken invariant, not user input.
            None => panic!("unknown decorated device id {id}"),
        }
    }

    fn to_id(&self) -> DeviceId {
        let inner = self.inner.to_id();
        if self.config == C::default() && inner.index_id < TICKET_BASE {
            return inner;
        }
        let mut table = tickets().lock().unwrap_or_else(|e| e.into_inner());
        let list = table.entry(TypeId::of::<Self>()).or_default();
        let pos = list
            .iter()
            .position(|e| e.downcast_ref::<Self>() == Some(self));
        let ticket = pos.unwrap_or_else(|| {
            list.push(Box::new(self.clone()));
            list.len() - 1
        });
        // 2^15 distinct (device, configuration) pairs per process: far beyond any real use.
        let ticket = u16::try_from(ticket)
            .ok()
            .filter(|t| *t < TICKET_BASE)
            .expect("more than 32768 decorated device configurations in one process");
        DeviceId {
            type_id: inner.type_id,
            index_id: TICKET_BASE + ticket,
        }
    }
}

impl<B: Backend, C: DecoratorConfig> DeviceOps for DecoratedDevice<B, C> {}

impl<B: Backend, D: Decoration> BackendTypes for Decorated<B, D> {
    type Device = DecoratedDevice<B, D::Config>;
    type FloatTensorPrimitive = Wrapped<B::FloatTensorPrimitive, D::Config>;
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

/// A decorator without configuration of its own.
pub trait TransparentDecoration: Clone + Copy + Default + Debug + Send + Sync + 'static {
    /// Name shown by `Backend::name`, e.g. `sparse-act`.
    const NAME: &'static str;
}

/// A backend `A` decorated by `D` whose primitives and device **are** `A`'s: nothing is
/// wrapped, `D` overrides ops ([`TransparentOps`]) and reads whatever configuration it needs from
/// the primitives themselves.
///
/// It exists for decorators that sit *on* an autodiff backend (SparseAct): Burn's
/// `AutodiffBackend` requires `Device = InnerBackend::Device`, so the layer above autodiff
/// cannot bring a device of its own; its configuration rides in a [`Decorated`] backend under
/// the autodiff layer instead.
#[derive(Clone, Copy, Default, Debug)]
pub struct Transparent<A, D>(PhantomData<(A, D)>);

impl<A: Backend, D: TransparentDecoration> BackendTypes for Transparent<A, D> {
    type Device = A::Device;
    type FloatTensorPrimitive = A::FloatTensorPrimitive;
    type FloatElem = A::FloatElem;
    type IntTensorPrimitive = A::IntTensorPrimitive;
    type IntElem = A::IntElem;
    type BoolTensorPrimitive = A::BoolTensorPrimitive;
    type BoolElem = A::BoolElem;
    type QuantizedTensorPrimitive = A::QuantizedTensorPrimitive;
}

impl<A: Backend, D: TransparentOps<A>> Backend for Transparent<A, D> {
    fn ad_enabled(device: &Self::Device) -> bool {
        A::ad_enabled(device)
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
        A::memory_persistent_allocations(device, input, func)
    }

    fn memory_cleanup(device: &Self::Device) {
        A::memory_cleanup(device)
    }

    fn name(device: &Self::Device) -> String {
        format!("{}<{}>", D::NAME, A::name(device))
    }

    fn seed(device: &Self::Device, seed: u64) {
        A::seed(device, seed)
    }

    fn sync(device: &Self::Device) -> Result<(), ExecutionError> {
        A::sync(device)
    }

    fn staging<'a, Iter>(data: Iter, device: &Self::Device)
    where
        Iter: Iterator<Item = &'a mut TensorData>,
    {
        A::staging(data, device)
    }

    fn supports_dtype(device: &Self::Device, dtype: DType) -> bool {
        A::supports_dtype(device, dtype)
    }

    fn dtype_usage(device: &Self::Device, dtype: DType) -> DTypeUsageSet {
        A::dtype_usage(device, dtype)
    }

    fn device_count(type_id: u16) -> usize {
        A::device_count(type_id)
    }
}

/// Over an autodiff backend, [`Transparent`] is one too, with the same inner backend and
/// gradients: Burn's `Learner` uses it unchanged.
impl<A: AutodiffBackend, D: TransparentOps<A>> AutodiffBackend for Transparent<A, D> {
    type InnerBackend = A::InnerBackend;
    type Gradients = A::Gradients;

    fn backward(tensor: FloatTensor<Self>) -> Self::Gradients {
        A::backward(tensor)
    }
    fn grad(
        tensor: &FloatTensor<Self>,
        grads: &Self::Gradients,
    ) -> Option<FloatTensor<Self::InnerBackend>> {
        A::grad(tensor, grads)
    }
    fn grad_remove(
        tensor: &FloatTensor<Self>,
        grads: &mut Self::Gradients,
    ) -> Option<FloatTensor<Self::InnerBackend>> {
        A::grad_remove(tensor, grads)
    }
    fn grad_replace(
        tensor: &FloatTensor<Self>,
        grads: &mut Self::Gradients,
        grad: FloatTensor<Self::InnerBackend>,
    ) {
        A::grad_replace(tensor, grads, grad)
    }
    fn inner(tensor: FloatTensor<Self>) -> FloatTensor<Self::InnerBackend> {
        A::inner(tensor)
    }
    fn int_inner(tensor: IntTensor<Self>) -> IntTensor<Self::InnerBackend> {
        A::int_inner(tensor)
    }
    fn bool_inner(tensor: BoolTensor<Self>) -> BoolTensor<Self::InnerBackend> {
        A::bool_inner(tensor)
    }
    fn q_inner(tensor: QuantizedTensor<Self>) -> QuantizedTensor<Self::InnerBackend> {
        A::q_inner(tensor)
    }
    fn from_inner(tensor: FloatTensor<Self::InnerBackend>) -> FloatTensor<Self> {
        A::from_inner(tensor)
    }
    fn int_from_inner(tensor: IntTensor<Self::InnerBackend>) -> IntTensor<Self> {
        A::int_from_inner(tensor)
    }
    fn bool_from_inner(tensor: BoolTensor<Self::InnerBackend>) -> BoolTensor<Self> {
        A::bool_from_inner(tensor)
    }
    fn q_from_inner(tensor: QuantizedTensor<Self::InnerBackend>) -> QuantizedTensor<Self> {
        A::q_from_inner(tensor)
    }
}

/// The transparent identity: every op forwards to `A` unchanged (the plumbing's own test).
#[derive(Clone, Copy, Default, Debug)]
pub struct TransparentIdentity;

impl TransparentDecoration for TransparentIdentity {
    const NAME: &'static str = "transparent";
}

impl<A: Backend> TransparentOps<A> for TransparentIdentity {}

/// The identity decoration: every op forwards to the inner backend unchanged.
///
/// It is the plumbing's own test (`Autodiff<Decorated<B, Identity>>` must be bit-identical to
/// `Autodiff<B>`) and the smallest example of a decorator.
#[derive(Clone, Copy, Default, Debug)]
pub struct Identity;

impl Decoration for Identity {
    type Config = ();
    const NAME: &'static str = "identity";
}

impl<B: Backend> DecoratorOps<B> for Identity {}

#[cfg(test)]
mod tests {
    use super::*;
    use burn_backend::backend::Device;
    use burn_ndarray::NdArray;

    #[derive(Clone, Copy, Default, Debug)]
    struct Tagged;
    impl Decoration for Tagged {
        type Config = u32;
        const NAME: &'static str = "tagged";
    }
    impl<B: Backend> DecoratorOps<B> for Tagged {}

    #[test]
    fn device_ids_round_trip_with_configuration() {
        type D = DecoratedDevice<NdArray, u32>;
        let identity = D::new(Default::default(), 0);
        assert!(
            identity.to_id().index_id < TICKET_BASE,
            "identity keeps the inner id"
        );
        assert_eq!(D::from_id(identity.to_id()), identity);
        for config in [7, 9, 7] {
            let d = D::new(Default::default(), config);
            let id = d.to_id();
            assert!(id.index_id >= TICKET_BASE);
            assert_eq!(D::from_id(id), d);
        }
        assert_eq!(
            D::new(Default::default(), 7).to_id(),
            D::new(Default::default(), 7).to_id(),
            "equal devices share a ticket"
        );
        assert_ne!(
            D::new(Default::default(), 7).to_id(),
            D::new(Default::default(), 9).to_id()
        );
    }

    #[test]
    fn results_carry_the_configuration_of_their_first_decorated_argument() {
        use burn::tensor::{Int, Tensor};
        type T = Decorated<NdArray, Tagged>;
        let device = DecoratedDevice::<NdArray, u32>::new(Default::default(), 42);
        let x = Tensor::<T, 2>::ones([2, 3], &device);
        let y = x.clone().matmul(x.transpose()).exp();
        assert_eq!(y.device().config, 42);
        let idx = Tensor::<T, 1, Int>::arange(0..3, &device);
        assert_eq!(
            idx.clone().float().device().config,
            42,
            "int -> float keeps it"
        );
        assert_eq!(
            idx.equal_elem(1).float().device().config,
            42,
            "bool -> float keeps it"
        );
        assert_eq!(T::name(&device), "tagged<ndarray>");
    }
}
