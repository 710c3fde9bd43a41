//! The device of a decorated backend ([`DecoratedDevice`]): the inner device and the
//! configuration, with device ids that round-trip through Burn's.

use super::DecoratorConfig;
use burn_backend::backend::{Backend, DeviceId, DeviceOps};
use core::any::{Any, TypeId};
use core::fmt::Debug;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// The device of a decorated backend: the inner device and the decorator's configuration.
///
/// Two devices are **equal when their inner devices are**: the configuration is what tensors
/// created on the device carry, not a place. A per-layer policy gives each weight its layer's
/// configuration ([`KernelBackend::float_for_layer`](super::KernelBackend::float_for_layer)), and Burn checks that the operands of an
/// element-wise op share a device, so a weight and an activation with different
/// configurations must still be on one device. (Device ids still tell configurations apart.)
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
pub(super) const TICKET_BASE: u16 = 1 << 15;

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
impl<B: Backend, C> PartialEq for DecoratedDevice<B, C> {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner
    }
}

impl<B: Backend, C: PartialEq> DecoratedDevice<B, C> {
    /// The same inner device and the same configuration (what a device id stands for).
    pub fn same(&self, other: &Self) -> bool {
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
            .position(|e| e.downcast_ref::<Self>().is_some_and(|d| d.same(self)));
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
