//! Experiments above the loop: policies run on the simulator backend
//! ([`crate::backend::sim`]) over workloads and seeds, and compared.
//!
//! [`run`] runs one policy on one workload with one seed and compares several over seeds
//! (what `simulate`, `compare` and `demo` do), [`paper`] sets our figures beside a paper's,
//! [`report`] draws the comparison as an HTML page, and [`fidelity`] checks the simulator
//! against Pollux's own. [`sweep`] runs one policy over a grid of its config, and [`results`]
//! writes any of it as data (JSON of a versioned schema, CSV).

pub mod fidelity;
pub mod paper;
pub mod report;
pub mod results;
pub mod run;
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
pub const DEMO: [DemoScenario; 6] = [
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
        name: "gacer-throughput",
        text: include_str!("../../scenarios/gacer-throughput.toml"),
        policies: &["fifo", "gacer", "gacer:regulate=false"],
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    #[test]
    fn the_demo_shows_every_shipped_policy_with_its_own_objective() {
        for name in crate::shipped::names() {
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
