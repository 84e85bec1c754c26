//! Experiments above the loop: policies run on the simulator backend
//! ([`wasmsched_sim`]) over workloads and seeds, and compared.
//!
//! [`run`] runs one policy on one workload with one seed and compares several over seeds
//! (what `simulate`, `compare` and `demo` do), [`paper`] sets our figures beside a paper's,
//! [`crate::report`] draws the comparison as an HTML page, and [`fidelity`] checks the simulator
//! against Pollux's own. [`sweep`] runs one policy over a grid of its config, and [`crate::results`]
//! writes any of it as data (JSON of a versioned schema, CSV).

use std::fmt::Write as _;

use run::Comparison;

use crate::scenario::Scenario;
use crate::scenario::claim::objective;

pub mod abtest;
pub mod batch;
pub mod fairness;
pub mod fidelity;
pub mod paper;
pub mod run;
pub mod sia_tables;
pub mod sweep;

/// The built-in scenario `wasmsched demo` runs (`scenarios/demo.toml`).
pub const DEMO_SCENARIO: &str = include_str!("../../scenarios/demo.toml");

/// The GPU queue the demo runs the schedulers on (`scenarios/gpu-queue.toml`).
pub const GPU_QUEUE_SCENARIO: &str = include_str!("../../scenarios/gpu-queue.toml");

/// A scenario the demo runs, and the policies it shows there.
#[derive(Clone, Copy, Debug)]
pub struct DemoScenario {
    /// The scenario's name (its file in `scenarios/`, without `.toml`).
    pub name: &'static str,
    /// Its text.
    pub text: &'static str,
    /// The policies run on it; the first is the baseline.
    pub policies: &'static [&'static str],
}

/// What `wasmsched demo` runs: every shipped policy on the scenario that shows its own
/// objective (its paper's set-up, or the GPU queue for the schedulers), beside fair-share (or,
/// for GPU co-location, one job per GPU).
pub const DEMO: [DemoScenario; 8] = [
    DemoScenario {
        name: "flowcon-paper",
        text: include_str!("../../scenarios/flowcon-paper.toml"),
        policies: &["fair-share", "flowcon"],
    },
    DemoScenario {
        name: "specon-paper",
        text: include_str!("../../scenarios/specon-paper.toml"),
        policies: &["fair-share", "specon"],
    },
    DemoScenario {
        name: "tradl-paper",
        text: include_str!("../../scenarios/tradl-paper.toml"),
        policies: &["fair-share", "tradl"],
    },
    DemoScenario {
        name: "dqoes-paper",
        text: include_str!("../../scenarios/dqoes-paper.toml"),
        policies: &["fair-share", "dqoes"],
    },
    DemoScenario { name: "gpu-queue", text: GPU_QUEUE_SCENARIO, policies: &["fair-share", "fifo", "tiresias"] },
    DemoScenario {
        name: "sia-mixed",
        text: include_str!("../../scenarios/sia-mixed.toml"),
        policies: &["fifo", "tiresias", "sia", "pollux", "gavel", "themis"],
    },
    DemoScenario {
        name: "tenants",
        text: include_str!("../../scenarios/tenants.toml"),
        policies: &["fifo", "quota", "fair-share-decay", "drf"],
    },
    DemoScenario {
        name: "gacer-throughput",
        text: include_str!("../../scenarios/gacer-throughput.toml"),
        policies: &["fifo", "gacer", "gacer:regulate=false"],
    },
];

/// The demo's table: for every policy but each scenario's baseline, its own objective for the
/// baseline, for it and in the paper, and the change with its 95 % interval and the paired
/// test's p over `seeds` seeds.
pub fn demo_table(done: &[(Scenario, Comparison)], seeds: u64) -> String {
    let mut out = format!(
        "each policy on the scenario that shows its own objective, against its baseline on the same seeds; \
         mean over {seeds} seed(s), 95 % bootstrap interval, paired permutation test\n"
    );
    let w = done.iter().flat_map(|(_, c)| c.policies()).map(str::len).max().unwrap_or(0).max(6);
    let _ = writeln!(
        out,
        "{:<w$} {:<16} {:<24} {:>12} {:>12} {:>12} {:>9} {:>22} {:>9} {:>10}",
        "policy", "scenario", "objective", "baseline", "theirs", "ours", "change", "95 % CI", "p", "paper"
    );
    for (scenario, comparison) in done {
        for policy in comparison.policies().into_iter().filter(|p| *p != comparison.baseline()) {
            let Some(claim) = objective(&scenario.claims, policy) else { continue };
            let row = match comparison.measure(claim) {
                Some(m) => [
                    m.figure.format_value(m.baseline_value),
                    m.figure.format_value(m.value),
                    m.figure.format(m.mean),
                    m.interval(),
                    m.paired
                        .p
                        .map_or_else(String::new, |p| crate::stats::show_p(p).replace("p = ", "").replace("p ", "")),
                ],
                None => ["—".into(), "—".into(), "not measured".into(), String::new(), String::new()],
            };
            let paper = claim.value.map_or_else(|| "—".to_string(), |v| claim.figure.format(v));
            let _ = writeln!(
                out,
                "{policy:<w$} {:<16} {:<24} {:>12} {:>12} {:>12} {:>9} {:>22} {:>9} {paper:>10}",
                scenario.name(),
                claim.figure.name(),
                comparison.baseline_of(claim),
                row[0],
                row[1],
                row[2],
                row[3],
                row[4]
            );
        }
    }
    if (seeds as usize) < crate::stats::SEEDS_TO_FIND {
        let _ = writeln!(
            out,
            "at {seeds} seed(s) the paired test cannot find a difference at 5 % (it needs {}): \
             `wasmsched demo --seeds 10` gives p-values a reviewer accepts",
            crate::stats::SEEDS_TO_FIND
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    #[test]
    fn the_demo_shows_every_shipped_policy_with_its_own_objective() {
        for name in wasmsched_shipped::names() {
            let shown: Vec<&DemoScenario> = DEMO.iter().filter(|d| d.policies.contains(&name)).collect();
            assert!(!shown.is_empty(), "{name} is not in the demo");
            // A scenario's baseline (its first policy) is measured against, not judged.
            for demo in shown.into_iter().filter(|d| d.policies[0] != name) {
                let scenario = Scenario::from_toml_str(demo.name, demo.text).unwrap();
                assert!(
                    paper::objective(&scenario.claims, name).is_some(),
                    "{} gives {name} no objective: add a [[paper]] figure for it",
                    demo.name
                );
            }
        }
    }
}
