//! What a per-layer policy hands down a backend stack for one layer.

use core::any::Any;
use core::fmt;
use std::sync::Arc;

/// The settings a per-layer policy assigns to one layer, handed down a decorated backend stack
/// ([`KernelBackend::float_for_layer`](super::KernelBackend::float_for_layer)): the layer's
/// path and one entry per configuration type. Each decorator takes the entry of its own type
/// ([`Decoration::for_layer`](super::Decoration::for_layer)) and ignores the others, so a stack
/// of decorators needs no knowledge of each other.
#[derive(Clone, Default)]
pub struct LayerSettings {
    path: Arc<str>,
    entries: Vec<Arc<dyn Any + Send + Sync>>,
}

impl LayerSettings {
    /// Settings for the layer at `path` (Burn's module path, e.g. `blocks.3.mlp.fc2`).
    pub fn new(path: &str) -> Self {
        Self {
            path: path.into(),
            entries: Vec::new(),
        }
    }

    /// Adds the entry `value` (replacing one of the same type).
    pub fn with<T: Any + Send + Sync>(mut self, value: T) -> Self {
        self.entries.retain(|e| !e.is::<T>());
        self.entries.push(Arc::new(value));
        self
    }

    /// The entry of type `T`, if the policy set one.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.entries.iter().find_map(|e| e.downcast_ref::<T>())
    }

    /// The layer's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The layer's path, shared.
    pub fn shared_path(&self) -> Arc<str> {
        self.path.clone()
    }
}

impl fmt::Debug for LayerSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LayerSettings({}, {} entries)",
            self.path,
            self.entries.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_found_by_type_and_replaced() {
        let s = LayerSettings::new("fc1").with(3u32).with("x").with(5u32);
        assert_eq!(s.get::<u32>(), Some(&5));
        assert_eq!(s.get::<&str>(), Some(&"x"));
        assert_eq!(s.get::<u64>(), None);
        assert_eq!(s.path(), "fc1");
    }
}
