//! ADMM for BCR pruning (GRIM Section 5.2), as host-side state per pruned layer.
//!
//! Problem: minimise the training loss `f(W)` subject to `W ∈ S` (the BCR set of the layer's
//! level). With an auxiliary `Z ∈ S` and a scaled dual `U`, ADMM alternates:
//! - `W`: the training steps minimise `f(W) + ρ/2·‖W − Z + U‖²_F` ([`Admm::penalty`] and its
//!   gradient [`Admm::penalty_grad`], added to the loss's);
//! - every `k` epochs ([`Admm::update`]): `Z = Π(W + U)` (the projection), `U += W − Z`.
//!
//! Initially `Z = Π(W)`, `U = 0`. The penalty weight `ρ` rises from `1e-4` to `1e-1`:
//! - **staged** (the default, as the group's code does it, e.g. YOLObile's `admm.py`): ×10 per
//!   stage, and at each new stage `Z` is re-projected from the current `W` and `U` reset to 0;
//! - **smooth**: ×`10^(1/steps)` at every update, `Z` and `U` carried on.
//!
//! After ADMM comes hard pruning (`W = Π(W)`, the mask fixed) and masked retraining. "ρ from
//! 1e-4 to 1e-1" in `docs/bcr.md` means the staged schedule unless `smooth` is named.

use crate::error::BcrError;
use crate::level::Level;
use crate::project::{BcrMask, View, project};

/// How `ρ` rises.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Schedule {
    /// ×10 per stage (`Z` re-projected, `U` reset at each), `updates_per_stage` updates each.
    Staged {
        /// Updates (`Z`, `U` steps) per stage.
        updates_per_stage: usize,
    },
    /// `ρ` multiplied by `10^(1/updates_per_decade)` at every update.
    Smooth {
        /// Updates for `ρ` to grow tenfold.
        updates_per_decade: usize,
    },
}

/// First and last `ρ`.
pub const RHO: (f64, f64) = (1e-4, 1e-1);

/// One pruned layer's ADMM state.
#[derive(Clone, Debug)]
pub struct Admm {
    level: Level,
    schedule: Schedule,
    /// The current penalty weight.
    pub rho: f64,
    /// `Z`, the projected copy (a point of the BCR set).
    pub z: View,
    /// `U`, the scaled dual.
    pub u: Vec<f32>,
    updates: usize,
}

impl Admm {
    /// `Z = Π(W)`, `U = 0`, `ρ = 1e-4`.
    pub fn new(w: &View, level: Level, schedule: Schedule) -> Result<Self, BcrError> {
        let steps = match schedule {
            Schedule::Staged {
                updates_per_stage: s,
            }
            | Schedule::Smooth {
                updates_per_decade: s,
            } => s,
        };
        if steps == 0 {
            return Err(BcrError::Level(
                "ADMM needs at least one update per stage (or per decade of ρ)".into(),
            ));
        }
        let z = project(w, level)?.apply(w);
        Ok(Self {
            level,
            schedule,
            rho: RHO.0,
            u: vec![0.0; w.data.len()],
            z,
            updates: 0,
        })
    }

    /// State saved by a run, back: the level and schedule it was made with, `ρ`, `Z`, `U` and
    /// the updates done. `Z` must be a point of the level's BCR set's shape and `U` as long.
    pub fn restore(
        level: Level,
        schedule: Schedule,
        rho: f64,
        z: View,
        u: Vec<f32>,
        updates: usize,
    ) -> Result<Self, BcrError> {
        if u.len() != z.data.len() || !(rho.is_finite() && rho > 0.0) {
            return Err(BcrError::Shape(format!(
                "ADMM state with {} duals for {} weights and ρ {rho}",
                u.len(),
                z.data.len()
            )));
        }
        Ok(Self {
            level,
            schedule,
            rho,
            z,
            u,
            updates,
        })
    }

    /// Updates done so far.
    pub fn updates(&self) -> usize {
        self.updates
    }

    fn check(&self, w: &View) -> Result<(), BcrError> {
        if (w.rows, w.cols) != (self.z.rows, self.z.cols) {
            return Err(BcrError::Shape(format!(
                "a {} × {} weight for ADMM state of {} × {}",
                w.rows, w.cols, self.z.rows, self.z.cols
            )));
        }
        Ok(())
    }

    /// `ρ/2·‖W − Z + U‖²_F`, in f64.
    pub fn penalty(&self, w: &View) -> Result<f64, BcrError> {
        self.check(w)?;
        let s: f64 = w
            .data
            .iter()
            .zip(&self.z.data)
            .zip(&self.u)
            .map(|((&w, &z), &u)| {
                let d = f64::from(w) - f64::from(z) + f64::from(u);
                d * d
            })
            .sum();
        Ok(self.rho / 2.0 * s)
    }

    /// The penalty's gradient with respect to `W`: `ρ·(W − Z + U)`.
    pub fn penalty_grad(&self, w: &View) -> Result<Vec<f32>, BcrError> {
        self.check(w)?;
        Ok(w.data
            .iter()
            .zip(&self.z.data)
            .zip(&self.u)
            .map(|((&w, &z), &u)| (self.rho * (f64::from(w) - f64::from(z) + f64::from(u))) as f32)
            .collect())
    }

    /// One ADMM update after some training: `Z = Π(W + U)`, `U += W − Z`, then `ρ` per the
    /// schedule (a staged schedule's new stage re-projects `Z = Π(W)` and resets `U`). `ρ`
    /// stops at `1e-1`.
    pub fn update(&mut self, w: &View) -> Result<(), BcrError> {
        self.check(w)?;
        let shifted = View::new(
            w.rows,
            w.cols,
            w.data.iter().zip(&self.u).map(|(&w, &u)| w + u).collect(),
        )?;
        self.z = project(&shifted, self.level)?.apply(&shifted);
        for ((u, &w), &z) in self.u.iter_mut().zip(&w.data).zip(&self.z.data) {
            *u += w - z;
        }
        self.updates += 1;
        match self.schedule {
            Schedule::Staged { updates_per_stage } => {
                if self.updates.is_multiple_of(updates_per_stage) && self.rho < RHO.1 {
                    self.rho = (self.rho * 10.0).min(RHO.1);
                    self.z = project(w, self.level)?.apply(w);
                    self.u.fill(0.0);
                }
            }
            Schedule::Smooth { updates_per_decade } => {
                self.rho = (self.rho * 10f64.powf(1.0 / updates_per_decade as f64)).min(RHO.1);
            }
        }
        Ok(())
    }

    /// `‖W − Z‖_F`: how far the weights still are from the BCR set's point.
    pub fn distance(&self, w: &View) -> Result<f64, BcrError> {
        self.check(w)?;
        Ok(w.data
            .iter()
            .zip(&self.z.data)
            .map(|(&w, &z)| (f64::from(w) - f64::from(z)).powi(2))
            .sum::<f64>()
            .sqrt())
    }

    /// Hard pruning at the end of ADMM: the mask of `Π(W)`, to fix for masked retraining.
    pub fn hard_mask(&self, w: &View) -> Result<BcrMask, BcrError> {
        self.check(w)?;
        project(w, self.level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(seed: u32) -> View {
        let data = (0..16 * 32)
            .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        View::new(16, 32, data).unwrap()
    }

    fn level() -> Level {
        "8x:4x8".parse().unwrap()
    }

    fn staged(w: &View, updates_per_stage: usize) -> Admm {
        Admm::new(w, level(), Schedule::Staged { updates_per_stage }).unwrap()
    }

    #[test]
    fn the_penalty_gradient_is_the_penalty_s_derivative() {
        let w = view(1);
        let mut admm = staged(&w, 2);
        admm.rho = 0.3;
        admm.u
            .iter_mut()
            .enumerate()
            .for_each(|(i, u)| *u = (i % 5) as f32 * 0.01);
        let g = admm.penalty_grad(&w).unwrap();
        for at in [0, 17, 200, 511] {
            let h = 1e-2f32;
            let (mut up, mut down) = (w.clone(), w.clone());
            up.data[at] += h;
            down.data[at] -= h;
            let numeric =
                (admm.penalty(&up).unwrap() - admm.penalty(&down).unwrap()) / f64::from(2.0 * h);
            assert!(
                (numeric - f64::from(g[at])).abs() < 1e-4,
                "{at}: {numeric} vs {}",
                g[at]
            );
        }
    }

    #[test]
    fn w_approaches_the_bcr_set_over_a_small_run() {
        // a loss ε/2·‖W − W₀‖² that pulls towards the dense W₀, gradient steps on it plus the
        // penalty, an ADMM update every 10 steps: ‖W − Z‖ falls as ρ rises past ε
        let (eps, lr) = (0.01f32, 5.0f32);
        let w0 = view(7);
        let mut w = w0.clone();
        let mut admm = staged(&w, 3);
        let start = admm.distance(&w).unwrap();
        for _ in 0..15 {
            for _ in 0..10 {
                let g = admm.penalty_grad(&w).unwrap();
                for ((x, &x0), g) in w.data.iter_mut().zip(&w0.data).zip(g) {
                    *x -= lr * (eps * (*x - x0) + g);
                }
            }
            admm.update(&w).unwrap();
        }
        let end = admm.distance(&w).unwrap();
        assert!(
            (admm.rho - 1e-1).abs() < 1e-12,
            "ρ rose through the stages: {}",
            admm.rho
        );
        assert!(end < 0.2 * start, "‖W − Z‖ {start} → {end}");
        // hard pruning then keeps the budget
        assert_eq!(admm.hard_mask(&w).unwrap().nnz(), 16 * 32 / 8);
    }

    #[test]
    fn staged_rho_rises_tenfold_per_stage_and_resets_u() {
        let w = view(3);
        let mut admm = staged(&w, 2);
        admm.update(&w).unwrap();
        assert_eq!(admm.rho, 1e-4);
        assert!(admm.u.iter().any(|&u| u != 0.0) || admm.distance(&w).unwrap() == 0.0);
        admm.update(&w).unwrap();
        assert!((admm.rho - 1e-3).abs() < 1e-15);
        assert!(admm.u.iter().all(|&u| u == 0.0), "U reset at a new stage");
        for _ in 0..20 {
            admm.update(&w).unwrap();
        }
        assert!(
            (admm.rho - 1e-1).abs() < 1e-12,
            "ρ stops at 1e-1: {}",
            admm.rho
        );
        let mut smooth = Admm::new(
            &w,
            level(),
            Schedule::Smooth {
                updates_per_decade: 4,
            },
        )
        .unwrap();
        for _ in 0..4 {
            smooth.update(&w).unwrap();
        }
        assert!((smooth.rho - 1e-3).abs() < 1e-12, "{}", smooth.rho);
    }

    #[test]
    fn mismatched_shapes_and_empty_schedules_are_refused() {
        let w = view(1);
        assert!(
            Admm::new(
                &w,
                level(),
                Schedule::Staged {
                    updates_per_stage: 0
                }
            )
            .is_err()
        );
        let admm = Admm::new(
            &w,
            level(),
            Schedule::Smooth {
                updates_per_decade: 3,
            },
        )
        .unwrap();
        let other = View::new(4, 4, vec![0.0; 16]).unwrap();
        let e = admm.penalty(&other).unwrap_err().to_string();
        assert!(e.contains("4 × 4 weight for ADMM state of 16 × 32"), "{e}");
    }
}
