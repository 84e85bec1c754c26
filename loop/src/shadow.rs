//! Live A/B: a shadow policy's decision compared with the active one's on the same world.
//! Two numbers an operator reads: how often the two agree (the same actions, reasons aside),
//! and how far apart they put each job's CPU limit.

use serde::{Deserialize, Serialize};

use wasmsched_core::bindings::wit::{self, ActionKind};
use wasmsched_core::world::World;

/// One tick's comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct TickDiff {
    /// The same actions, in any order, reasons aside.
    pub agree: bool,
    /// Per live job, |active − shadow| CPU limit in millicores (an unlimited job counts as its
    /// node's capacity), in handle order.
    pub cpu_diff_millicores: Vec<u64>,
}

/// Compare the actions of the active policy and of a shadow on the world both saw.
pub fn compare(active: &[wit::Action], shadow: &[wit::Action], world: &World) -> TickDiff {
    let key = |a: &wit::Action| (a.job, format!("{:?}", a.kind));
    let mut a: Vec<_> = active.iter().map(key).collect();
    let mut s: Vec<_> = shadow.iter().map(key).collect();
    a.sort();
    s.sort();
    let cpu_diff_millicores = world
        .jobs()
        .map(|(_, state)| {
            let capacity = world.nodes().get(state.node.index()).map_or(0, |n| n.cpu_millicores);
            let after = |actions: &[wit::Action]| {
                let limit = actions.iter().rev().find_map(|x| match x.kind {
                    ActionKind::SetCpu(limit) if x.job == state.handle => Some(limit),
                    _ => None,
                });
                limit.unwrap_or(state.cpu_limit_millicores).unwrap_or(capacity)
            };
            after(active).abs_diff(after(shadow))
        })
        .collect();
    TickDiff { agree: a == s, cpu_diff_millicores }
}

/// A shadow's comparison with the active policy so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Agreement {
    /// Ticks compared.
    pub compared: u64,
    /// Ticks on which both decided the same.
    pub agreed: u64,
    /// Per-job CPU differences summed, millicores (for the mean).
    pub cpu_diff_sum_millicores: u64,
    /// Per-job CPU differences counted.
    pub cpu_diff_samples: u64,
    /// The largest per-job CPU difference seen, millicores.
    pub cpu_diff_max_millicores: u64,
}

impl Agreement {
    /// Fold one tick in.
    pub fn add(&mut self, diff: &TickDiff) {
        self.compared += 1;
        self.agreed += u64::from(diff.agree);
        self.cpu_diff_sum_millicores += diff.cpu_diff_millicores.iter().sum::<u64>();
        self.cpu_diff_samples += diff.cpu_diff_millicores.len() as u64;
        self.cpu_diff_max_millicores =
            self.cpu_diff_max_millicores.max(diff.cpu_diff_millicores.iter().copied().max().unwrap_or(0));
    }

    /// Agreed over compared; 1 before any comparison.
    pub fn rate(&self) -> f64 {
        if self.compared == 0 { 1.0 } else { self.agreed as f64 / self.compared as f64 }
    }

    /// Mean per-job CPU difference, millicores.
    pub fn mean_cpu_diff_millicores(&self) -> f64 {
        if self.cpu_diff_samples == 0 {
            0.0
        } else {
            self.cpu_diff_sum_millicores as f64 / self.cpu_diff_samples as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_core::world::{JobId, sample};

    fn cpu(job: JobId, m: Option<u64>, reason: &str) -> wit::Action {
        wit::Action { job, kind: ActionKind::SetCpu(m), reason: reason.into() }
    }

    #[test]
    fn the_same_actions_in_another_order_with_other_reasons_agree() {
        let world = sample::world(1, 2, 0);
        let a = [cpu(JobId(0), Some(1000), "x"), cpu(JobId(1), Some(2000), "y")];
        let s = [cpu(JobId(1), Some(2000), "other"), cpu(JobId(0), Some(1000), "words")];
        let d = compare(&a, &s, &world);
        assert!(d.agree);
        assert_eq!(d.cpu_diff_millicores, [0, 0]);
    }

    #[test]
    fn different_limits_disagree_by_their_difference_and_unlimited_counts_as_the_node() {
        let mut world = sample::world(1, 3, 0);
        world.state_mut(JobId(2)).unwrap().cpu_limit_millicores = Some(4000);
        let a = [cpu(JobId(0), Some(1000), ""), cpu(JobId(1), None, "")];
        let s = [cpu(JobId(0), Some(1500), "")];
        let d = compare(&a, &s, &world);
        assert!(!d.agree);
        // Job 0: 1000 against 1500; job 1: unlimited (16 000) against its current (unlimited);
        // job 2: untouched by both.
        assert_eq!(d.cpu_diff_millicores, [500, 0, 0]);
        let mut total = Agreement::default();
        total.add(&d);
        total.add(&compare(&a, &a, &world));
        assert_eq!((total.compared, total.agreed), (2, 1));
        assert!((total.rate() - 0.5).abs() < 1e-12);
        assert_eq!(total.cpu_diff_max_millicores, 500);
        assert!((total.mean_cpu_diff_millicores() - 500.0 / 6.0).abs() < 1e-9);
    }
}
