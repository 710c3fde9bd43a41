//! What the decorators of a stack really did, per layer: recorded by the ops as they run.
//!
//! Users of pruning and approximation tools need to know which layer silently ran exact or
//! dense math. The decorators' ops report here what they actually did — every contraction with
//! its pass, multiplier, number of multiplies and route, every stored activation with its kept
//! and dense bytes — keyed by the layer path their operands carry (a per-layer policy tags the
//! weights, [`super::LayerSettings`]). Nothing is derived from a policy.
//!
//! Recording is per thread (Burn runs a model's forward and backward on the calling thread) and
//! off until [`start`]: ops pay one thread-local check when nobody listens.
//!
//! ```
//! use cubecl_kernels::decorator::effects::{self, Pass};
//! effects::start();
//! effects::record_contraction(Some("fc1"), Pass::Forward, "mbm7", true, 6, "host reference");
//! effects::record_contraction(Some("fc1"), Pass::Forward, "mbm7", true, 6, "host reference");
//! let seen = effects::finish();
//! let fc1 = &seen.layers["fc1"];
//! assert_eq!(fc1.passes[Pass::Forward.index()][0].multiplies, 12);
//! assert_eq!(fc1.passes[Pass::Forward.index()][0].calls, 2);
//! ```

use std::cell::RefCell;
use std::collections::BTreeMap;

/// Which contraction of a layer ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pass {
    /// The forward product (`x · W`, the convolution).
    Forward,
    /// The gradient with respect to the layer's input.
    InputGrad,
    /// The gradient with respect to the layer's weight.
    WeightGrad,
    /// A `matmul` (Autodiff's backward of a matmul calls matmul too: the passes are not told
    /// apart).
    Matmul,
}

impl Pass {
    /// The three passes in order.
    pub const ALL: [Pass; 4] = [
        Pass::Forward,
        Pass::InputGrad,
        Pass::WeightGrad,
        Pass::Matmul,
    ];

    /// Position in [`Pass::ALL`] (and in [`LayerEffects::passes`]).
    pub fn index(self) -> usize {
        self as usize
    }

    /// `forward`, `input grad`, `weight grad`.
    pub fn label(self) -> &'static str {
        match self {
            Pass::Forward => "forward",
            Pass::InputGrad => "input grad",
            Pass::WeightGrad => "weight grad",
            Pass::Matmul => "matmul",
        }
    }
}

/// Contractions of one pass of one layer that ran the same way.
#[derive(Clone, Debug, PartialEq)]
pub struct Contraction {
    /// The multiplier's name (`native` for the inner backend's own multiply).
    pub multiplier: String,
    /// Whether the products went through a simulated approximate multiplier.
    pub approximate: bool,
    /// Products computed (every term of every dot product, padding included where it ran).
    pub multiplies: u64,
    /// Ops that ran.
    pub calls: u64,
    /// How it ran: the kernel and where its table lived, the host path and why, or native.
    pub route: String,
}

/// Activations a layer kept for its weight gradient.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stored {
    /// Bytes kept (values and block indices).
    pub kept_bytes: u64,
    /// Bytes the dense activation would have taken.
    pub dense_bytes: u64,
    /// Activations stored.
    pub calls: u64,
    /// How they were kept (e.g. `block-sparse 0.5:4`, `dense (layer not pruned)`).
    pub how: String,
}

/// Everything recorded for one layer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LayerEffects {
    /// Per pass ([`Pass::index`]), one entry per distinct (multiplier, route).
    pub passes: [Vec<Contraction>; 4],
    /// Per way of storing, what the layer kept for backward.
    pub stored: Vec<Stored>,
    /// Ops that had to densify the layer's packed weight, with how often each did.
    pub densified: BTreeMap<String, u64>,
}

/// What ran between [`start`] and [`finish`], by layer path (`""`: operands no policy tagged).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Effects {
    /// Per layer path.
    pub layers: BTreeMap<String, LayerEffects>,
}

thread_local! {
    static RECORDING: RefCell<Option<Effects>> = const { RefCell::new(None) };
}

/// Starts recording on this thread, dropping anything recorded before.
pub fn start() {
    RECORDING.with(|r| *r.borrow_mut() = Some(Effects::default()));
}

/// Stops recording on this thread and returns what was recorded (empty when nothing was started).
pub fn finish() -> Effects {
    RECORDING
        .with(|r| r.borrow_mut().take())
        .unwrap_or_default()
}

/// Takes this thread's recording, leaving it not recording: `None` when it was not. With
/// [`resume`] on another thread, a recording follows work that moves there
/// ([`crate::workers::run`]).
pub fn suspend() -> Option<Effects> {
    RECORDING.with(|r| r.borrow_mut().take())
}

/// Makes `recording` this thread's (what [`suspend`] took, here or on another thread), dropping
/// what this thread recorded before; `None` stops recording.
pub fn resume(recording: Option<Effects>) {
    RECORDING.with(|r| *r.borrow_mut() = recording);
}

/// Whether this thread records (ops may skip computing what they would record).
pub fn recording() -> bool {
    RECORDING.with(|r| r.borrow().is_some())
}

fn with_layer(layer: Option<&str>, f: impl FnOnce(&mut LayerEffects)) {
    RECORDING.with(|r| {
        if let Some(effects) = r.borrow_mut().as_mut() {
            f(effects
                .layers
                .entry(layer.unwrap_or_default().to_string())
                .or_default())
        }
    })
}

/// Records one contraction of `layer` (when this thread records).
pub fn record_contraction(
    layer: Option<&str>,
    pass: Pass,
    multiplier: &str,
    approximate: bool,
    multiplies: u64,
    route: &str,
) {
    with_layer(layer, |l| {
        let list = &mut l.passes[pass.index()];
        match list
            .iter_mut()
            .find(|c| c.multiplier == multiplier && c.route == route)
        {
            Some(c) => {
                c.multiplies += multiplies;
                c.calls += 1;
            }
            None => list.push(Contraction {
                multiplier: multiplier.to_string(),
                approximate,
                multiplies,
                calls: 1,
                route: route.to_string(),
            }),
        }
    })
}

/// Records one activation `layer` kept for its weight gradient (when this thread records).
pub fn record_stored(layer: Option<&str>, kept_bytes: u64, dense_bytes: u64, how: &str) {
    with_layer(layer, |l| {
        match l.stored.iter_mut().find(|s| s.how == how) {
            Some(s) => {
                s.kept_bytes += kept_bytes;
                s.dense_bytes += dense_bytes;
                s.calls += 1;
            }
            None => l.stored.push(Stored {
                kept_bytes,
                dense_bytes,
                calls: 1,
                how: how.to_string(),
            }),
        }
    })
}

/// Records that `op` densified the packed weight of `layer` (when this thread records).
pub fn record_densified(layer: Option<&str>, op: &str) {
    with_layer(layer, |l| {
        *l.densified.entry(op.to_string()).or_default() += 1
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_kept_unless_started_and_routes_stay_apart() {
        record_contraction(Some("a"), Pass::Forward, "fp32", true, 5, "kernel");
        assert!(!recording());
        assert_eq!(finish(), Effects::default());
        start();
        record_contraction(Some("a"), Pass::WeightGrad, "fp32", true, 5, "kernel");
        record_contraction(Some("a"), Pass::WeightGrad, "fp32", true, 7, "host");
        record_stored(None, 10, 40, "block-sparse 0.75:4");
        record_stored(None, 10, 40, "block-sparse 0.75:4");
        let e = finish();
        assert!(!recording());
        let a = &e.layers["a"].passes[Pass::WeightGrad.index()];
        assert_eq!(a.len(), 2);
        assert_eq!((a[0].multiplies, a[1].multiplies), (5, 7));
        start();
        record_densified(Some("a"), "float_add");
        record_densified(Some("a"), "float_add");
        assert_eq!(finish().layers["a"].densified["float_add"], 2);
        let s = &e.layers[""].stored[0];
        assert_eq!((s.kept_bytes, s.dense_bytes, s.calls), (20, 80, 2));
    }

    #[test]
    fn a_suspended_recording_resumes_on_another_thread_with_its_counts() {
        start();
        record_contraction(Some("a"), Pass::Forward, "fp32", true, 5, "kernel");
        let taken = suspend();
        assert!(!recording());
        record_contraction(Some("a"), Pass::Forward, "fp32", true, 100, "kernel");
        let back = std::thread::spawn(move || {
            assert!(!recording());
            resume(taken);
            record_contraction(Some("a"), Pass::Forward, "fp32", true, 7, "kernel");
            suspend()
        })
        .join()
        .unwrap();
        resume(back);
        let a = &finish().layers["a"].passes[Pass::Forward.index()];
        assert_eq!((a[0].multiplies, a[0].calls), (12, 2));
        resume(None);
        assert!(!recording());
    }
}
