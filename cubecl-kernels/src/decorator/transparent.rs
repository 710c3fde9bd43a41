//! [`Transparent<A, D>`]: a decorator whose primitives and device are its inner backend's
//! (what sits on an autodiff backend), and its identity.

use super::TransparentOps;
use burn_backend::backend::{AutodiffBackend, Backend, BackendTypes, ExecutionError};
use burn_backend::tensor::{BoolTensor, FloatTensor, IntTensor, QuantizedTensor};
use burn_backend::{DType, DTypeUsageSet, TensorData};
use core::fmt::Debug;
use core::marker::PhantomData;

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
/// cannot bring a device of its own; its configuration rides in a [`Decorated`](super::Decorated) backend under
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
