//! {{name}}: a wasmsched scheduling policy.
//!
//! It starts as an equal share: each node's CPU is split evenly among the training jobs
//! running there, never below `min-millicores`. Make `decide` yours; `cargo test` runs the
//! tests below natively, without building a component.
//!
//! Config (kebab-case keys, all optional): `min-millicores` (100), the smallest cap set.

use serde::Deserialize;
use wasmsched_sdk::prelude::*;

/// The policy's constants, from its config table.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// No job is capped below this.
    pub min_millicores: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config { min_millicores: 100 }
    }
}

/// The policy.
pub struct {{type}} {
    config: Config,
}

impl Policy for {{type}} {
    type Config = Config;

    fn new(config: Config) -> Result<Self, PolicyError> {
        Ok({{type}} { config })
    }

    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        let mut d = Decision::new();
        for node in s.nodes() {
            let jobs: Vec<Job> = s.jobs_on(node.id()).filter(|j| j.kind() == JobKind::Training).collect();
            if jobs.is_empty() {
                continue;
            }
            let share = Millicores((node.cpu().0 / jobs.len() as u64).max(self.config.min_millicores));
            for job in jobs {
                if job.cpu_limit() != Some(share) {
                    d.push(Action::set_cpu(job.id(), share).because(format!("an equal share of {}", node.name())));
                }
            }
        }
        Ok(d)
    }
}

export_policy!({{type}});

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_sdk::testing::{Harness, TestWorld, job};

    #[test]
    fn two_jobs_share_their_node_equally_and_are_then_left_alone() {
        let mut world = TestWorld::new();
        world.node("n0", Millicores(8000), Bytes::gib(16));
        let a = world.add_job(job("a", "cifar10"));
        let b = world.add_job(job("b", "ncf"));
        let mut h = Harness::new({{type}}::new(Config::default()).unwrap(), world);
        let d = h.tick(Seconds(30.0)).unwrap();
        assert_eq!(d.cpu_limit_for(a), Some(Some(Millicores(4000))));
        assert_eq!(d.cpu_limit_for(b), Some(Some(Millicores(4000))));
        // The harness puts the limits into force, as the host would: nothing more to do.
        assert!(h.tick(Seconds(30.0)).unwrap().is_empty());
    }

    #[test]
    fn a_config_key_it_does_not_know_is_refused_by_name() {
        let err = Harness::<{{type}}>::from_config(r#"{"min-milicores": 5}"#, TestWorld::new()).err().unwrap();
        assert!(matches!(err, PolicyError::InvalidConfig(m) if m.contains("min-milicores")));
    }
}
