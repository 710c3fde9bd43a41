//! Per-channel broadcast kernels after OneFlow's vectorized broadcast kernels:
//! PReLU with one α per channel, and the per-channel affine map `x · α + β` (ResMLP's `Affine`,
//! its layer-scales), forward and backward, each one fused kernel.
//!
//! # The operations
//!
//! `x` is viewed as `[outer, channels, inner]`, row-major and contiguous ([`Layout::of`] takes
//! the shape and the channel axis: NCHW has `inner = H · W`, channels-last `inner = 1`); `α` and
//! `β` have one value per channel. With `c` the channel of an element:
//!
//! - PReLU: `y = x · α[c]` where `x < 0`, else `y = x` (`x = ±0` and NaN pass unchanged: Burn's
//!   composite `mask_where(x, x < 0, x · α)`). Backward, given `dy`: `dx = dy · α[c]` where
//!   `x < 0`, else `dy`; `dα[c] = Σ dy · x` over the channel's elements with `x < 0` (the others
//!   add nothing, not even `0 · x`).
//! - Affine: `y = x · α[c] + β[c]`, a product rounded to f32, then an add (never a fused
//!   multiply-add); without `β`, `y = x · α[c]`. Backward: `dx = dy · α[c]`, `dα[c] = Σ dy · x`
//!   (when `x` is given), `dβ[c] = Σ dy`.
//!
//! # The vectorisation rule (OneFlow's pack)
//!
//! The element-wise passes (forwards, and `dx` in the backwards) work on packs of [`PACK`]
//! consecutive values (`Vector<f32, PACK>`) when the inner size divides the pack
//! ([`Layout::vectorised`]): a pack then never straddles two channels, so it needs one α (and one
//! β), found once for the pack with one division and one remainder: `c = (pack · PACK / inner)
//! mod channels`. Otherwise every value is its own pack of one. The choice is made at launch
//! from the layout (the kernels are generic over the vector size, so the hot loop has no branch
//! on it); it also decides how the reductions sum, below.
//!
//! # The reductions (`dα`, `dβ`)
//!
//! They read `x` and `dy` where the backward pass reads them to write `dx`: one kernel writes
//! `dx` and the channel sums' partials, a second adds the partials (only when there are several
//! segments). The summation order is fixed by the layout alone and documented in [`mod@reference`],
//! whose host implementation follows it exactly: kernels and host agree bit for bit.
//!
//! The kernels are `kernel.rs`, their launches [`launch_prelu`], [`launch_prelu_backward`],
//! [`launch_affine`] and [`launch_affine_backward`] (`launch.rs`); [`ops`] runs them on any
//! backend of an Ember stack (the host implementation where there are no CubeCL tensors).

pub(crate) mod kernel;
pub(crate) mod launch;
pub mod ops;
pub mod reference;

pub use launch::{launch_affine, launch_affine_backward, launch_prelu, launch_prelu_backward};

use thiserror::Error;

/// Lanes of a vectorised pack (`Vector<f32, PACK>`: 16 bytes).
pub const PACK: usize = 4;

/// Channels-last and other small inner sizes (`inner` below this): a cube of the reduction
/// serves at least [`CUBE_CHANNELS`] channels side by side (all when fewer), so that neighbouring
/// units read neighbouring values.
const SMALL_INNER: usize = 32;
/// Channels a cube of the reduction serves side by side when the inner size is small (at least).
const CUBE_CHANNELS: usize = 32;
/// Units of a cube of the reduction (all its channels together). Small cubes: each one ends
/// with a serial tail of `units − 1` adds, and on lavapipe 256-unit cubes were slower (4× on
/// the smallest OneFlow shape, whose 196 values a channel they spread one or two a unit).
const CUBE_UNITS: usize = 64;
/// Packs each unit of a channel sums in one segment (at most; about that many when the channel
/// is small, through fewer units).
const UNIT_PACKS: usize = 32;

/// A user-supplied shape, channel axis or α that does not fit together.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("{0}")]
pub struct BroadcastError(pub String);

/// `x` seen as `[outer, channels, inner]`, row-major and contiguous: the channel axis, what
/// comes before it and what comes after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Product of the sizes before the channel axis.
    pub outer: usize,
    /// Size of the channel axis (the length of α and β).
    pub channels: usize,
    /// Product of the sizes after the channel axis (1 for channels-last).
    pub inner: usize,
}

impl Layout {
    /// The layout of a tensor of `shape` with its channels on `axis` and an α of `alpha_len`
    /// values.
    ///
    /// # Errors
    /// When the shape is empty (rank 0), `axis` is not one of its axes, `alpha_len` is not
    /// `shape[axis]`, or the shape holds more values than `usize` counts.
    pub fn of(shape: &[usize], axis: usize, alpha_len: usize) -> Result<Layout, BroadcastError> {
        if shape.is_empty() {
            return Err(BroadcastError(
                "a rank-0 tensor has no channel axis".to_string(),
            ));
        }
        if axis >= shape.len() {
            return Err(BroadcastError(format!(
                "channel axis {axis} out of range for a rank-{} tensor",
                shape.len()
            )));
        }
        if alpha_len != shape[axis] {
            return Err(BroadcastError(format!(
                "α has {alpha_len} values for {} channels on axis {axis} of {shape:?}",
                shape[axis]
            )));
        }
        let product = |dims: &[usize]| {
            dims.iter()
                .try_fold(1usize, |n, &d| n.checked_mul(d))
                .ok_or_else(|| BroadcastError(format!("{shape:?} holds more values than usize")))
        };
        let l = Layout {
            outer: product(&shape[..axis])?,
            channels: shape[axis],
            inner: product(&shape[axis + 1..])?,
        };
        product(shape)?;
        Ok(l)
    }

    /// Values of `x`: `outer · channels · inner`.
    pub fn len(&self) -> usize {
        self.outer * self.channels * self.inner
    }

    /// Whether `x` holds no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the element-wise passes work on packs of [`PACK`] values: the inner size divides
    /// the pack, so no pack straddles two channels (OneFlow's rule; the launch-time choice).
    pub fn vectorised(&self) -> bool {
        self.inner.is_multiple_of(PACK)
    }

    /// The values of one channel: `outer · inner`.
    fn per_channel(&self) -> usize {
        self.outer * self.inner
    }
}

/// How a layout's channel sums are split and summed: a function of the layout alone, shared by
/// the kernels' launch and the host reference so that both sum in one order.
///
/// A channel's `outer · inner` values, in row-major order, are `packs` packs of `vector` values;
/// its packs are cut into `segments` runs of `segment` packs (the last one shorter). One cube
/// sums one segment of `channels_per_cube` channels with `units` units per channel: unit `u` sums
/// packs `u`, `u + units`, `u + 2 · units`, … of the segment, lane by lane. `units` is at most
/// 64 (at most 2 when the inner size is below 32 and there are 32 channels or more), and about
/// `packs / 32` when that is fewer; `segment = 32 · units`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Values in a pack: [`PACK`] when the layout is vectorised, else 1.
    pub(crate) vector: usize,
    /// Packs of one channel.
    pub(crate) packs: usize,
    /// Units per channel in a cube (a power of two: the tree over them halves).
    pub(crate) units: usize,
    /// Channels a cube serves side by side (no effect on the order of any sum).
    pub(crate) channels_per_cube: usize,
    /// Packs of a segment.
    pub(crate) segment: usize,
    /// Segments of a channel (0 when it has no values).
    pub(crate) segments: usize,
}

impl Plan {
    pub(crate) fn of(l: Layout) -> Plan {
        let vector = if l.vectorised() { PACK } else { 1 };
        let packs = l.per_channel() / vector;
        // small inner sizes keep room for CUBE_CHANNELS channels side by side
        let side_by_side = if l.inner < SMALL_INNER {
            l.channels.clamp(1, CUBE_CHANNELS).next_power_of_two()
        } else {
            1
        };
        // about UNIT_PACKS packs a unit: small channels get fewer units, and share their cube
        let units =
            (CUBE_UNITS / side_by_side).min(packs.div_ceil(UNIT_PACKS).max(1).next_power_of_two());
        let segment = units * UNIT_PACKS;
        Plan {
            vector,
            packs,
            units,
            channels_per_cube: l.channels.clamp(1, CUBE_UNITS / units),
            segment,
            segments: packs.div_ceil(segment),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nchw_and_channels_last_layouts() {
        let l = Layout::of(&[2, 3, 4, 5], 1, 3).unwrap();
        assert_eq!(
            l,
            Layout {
                outer: 2,
                channels: 3,
                inner: 20
            }
        );
        assert_eq!(l.len(), 120);
        assert!(l.vectorised());
        let l = Layout::of(&[2, 7, 3], 2, 3).unwrap();
        assert_eq!((l.outer, l.channels, l.inner), (14, 3, 1));
        assert!(!l.vectorised());
        let l = Layout::of(&[5], 0, 5).unwrap();
        assert_eq!((l.outer, l.channels, l.inner), (1, 5, 1));
        let l = Layout::of(&[3, 0, 4], 2, 4).unwrap();
        assert!(l.is_empty());
    }

    #[test]
    fn alpha_of_the_wrong_length_is_an_error() {
        let e = Layout::of(&[2, 3, 4], 1, 5).unwrap_err();
        assert_eq!(
            e.to_string(),
            "α has 5 values for 3 channels on axis 1 of [2, 3, 4]"
        );
        // one α for all channels is not this layout's business: the caller broadcasts it
        assert!(Layout::of(&[2, 3, 4], 1, 1).is_err());
    }

    #[test]
    fn a_channel_axis_out_of_range_is_an_error() {
        let e = Layout::of(&[2, 3], 4, 3).unwrap_err();
        assert_eq!(
            e.to_string(),
            "channel axis 4 out of range for a rank-2 tensor"
        );
        assert!(Layout::of(&[2, 3], 2, 3).is_err());
    }

    #[test]
    fn a_rank_0_tensor_is_an_error() {
        let e = Layout::of(&[], 0, 1).unwrap_err();
        assert_eq!(e.to_string(), "a rank-0 tensor has no channel axis");
    }

    #[test]
    fn a_shape_too_large_to_count_is_an_error() {
        let e = Layout::of(&[usize::MAX, 2, 2], 1, 2).unwrap_err();
        assert!(e.to_string().contains("more values than usize"), "{e}");
    }

    #[test]
    fn plans_keep_the_tree_a_power_of_two_and_cubes_within_64_units() {
        for (outer, channels, inner) in [
            (1, 1, 1),
            (2, 3, 7),
            (4, 64, 3136),
            (96, 512, 49),
            (3, 1000, 1),
            (1, 1, 12544),
            (300, 40, 3),
        ] {
            let l = Layout {
                outer,
                channels,
                inner,
            };
            let p = Plan::of(l);
            assert!(p.units.is_power_of_two());
            assert!(p.units * p.channels_per_cube <= CUBE_UNITS);
            assert_eq!(p.packs * p.vector, outer * inner);
            assert!(p.segments * p.segment >= p.packs);
            assert!((p.segments - 1) * p.segment < p.packs);
            if inner < SMALL_INNER {
                assert!(p.channels_per_cube >= channels.min(CUBE_CHANNELS));
            }
        }
    }
}
