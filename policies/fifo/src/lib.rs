//! FIFO: first come, first served, first fit; the baseline that schedulers are measured against.
//!
//! Each tick the queue is walked in order of arrival and every job that fits now starts, by
//! first fit ([`sched::FreeGpus`]); strict FCFS stops at the first job that does not fit, and
//! with `backfill` later jobs that fit go ahead of it. Nothing is ever preempted. A job that
//! would not fit even on the empty cluster, or whose tenant is at its limit
//! ([`sched::TenantRoom`]), never holds back the ones behind it (as the host's default
//! placement). Backfill keeps no reservation: a large job may wait while small ones
//! pass it.
//!
//! Reads: the queue (arrival order, GPUs asked, replicas), each node's GPUs and cores, whether
//! it takes work, and which running jobs hold which GPUs on which node.
//!
//! Says why the first [`REASONS`] jobs it leaves in the queue wait: too large for the cluster,
//! not enough free GPUs now, or behind an earlier job (first come, first served).
//!
//! Config (kebab-case keys, all optional):
//! - `backfill` (false): later jobs that fit start while an earlier one waits.
//!
//! Paper: none of its own; it is the baseline the papers compare against, e.g. J. Gu et al.,
//! "Tiresias: A GPU Cluster Manager for Distributed Deep Learning", NSDI 2019.

use serde::Deserialize;
use wasmsched_sdk::prelude::*;

/// FIFO's one knob.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Let a later job that fits start while an earlier one waits (no reservation is kept for
    /// the earlier one).
    pub backfill: bool,
}

/// How many waiting jobs FIFO gives a reason for, in queue order.
pub const REASONS: usize = 64;

/// The FIFO policy.
pub struct Fifo {
    config: Config,
}

impl Policy for Fifo {
    type Config = Config;

    const PLACES: bool = true;

    fn new(config: Config) -> Result<Self, PolicyError> {
        Ok(Fifo { config })
    }

    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        let mut d = Decision::new();
        if s.queue_len() == 0 {
            return Ok(d);
        }
        let mut free = sched::FreeGpus::of(s);
        let mut room = sched::TenantRoom::of(s);
        // Made the first time a job does not fit now.
        let mut empty = None;
        let mut passed = false;
        let mut blocked: Option<Job> = None;
        let mut reasons = 0;
        for job in s.queue() {
            if let Some(ahead) = &blocked {
                if reasons == REASONS {
                    break;
                }
                d.pending(job.id(), format!("behind {} (first come, first served)", ahead.name()));
                reasons += 1;
            } else if let Err(over) = room.check(&job) {
                // The host would refuse it, and its default placement passes over it too.
                if reasons < REASONS {
                    d.pending(job.id(), over.to_string());
                    reasons += 1;
                }
            } else if let Some(p) = free.fit_job(&job) {
                let why = if passed { "fifo: backfilled past a job that waits" } else { "fifo: next in arrival order" };
                room.take(&job);
                d.push(p.action(job.id()).because(why));
            } else {
                let never = empty.get_or_insert_with(|| sched::FreeGpus::idle(s)).find_job(&job).is_none();
                if reasons < REASONS {
                    let why = if never {
                        format!("asks for {} GPUs, more than any placement on this cluster gives", job.gpus_asked())
                    } else {
                        let taking = s.nodes().filter(|n| n.takes_work()).count();
                        format!(
                            "{} GPUs asked, {} free on the {taking} nodes taking work",
                            job.gpus_asked(),
                            free.free_count()
                        )
                    };
                    d.pending(job.id(), why);
                    reasons += 1;
                }
                if never {
                    debug!(
                        "fifo: {} asks for {} GPUs, more than the cluster could give it",
                        job.id(),
                        job.gpus_asked()
                    );
                } else if self.config.backfill {
                    passed = true;
                } else {
                    blocked = Some(job);
                }
            }
        }
        Ok(d)
    }
}

export_policy!(Fifo);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_sdk::testing::{Harness, TestWorld, churn, job, placed, tenant};

    fn fifo(backfill: bool, world: TestWorld) -> Harness<Fifo> {
        Harness::new(Fifo::new(Config { backfill }).unwrap(), world)
    }

    #[test]
    fn jobs_start_in_order_of_arrival_on_the_first_node_that_fits() {
        let mut w = TestWorld::gpu_cluster(&[2, 4]);
        let a = w.queue_job(job("a", "cifar10").gpus(4));
        let b = w.queue_job(job("b", "cifar10").gpus(1));
        w.queue_job(job("c", "cifar10").gpus(2));
        let mut h = fifo(false, w);
        let d = h.tick(Seconds(30.0)).unwrap();
        // c, third, waits: one GPU is left on n0 and none on n1.
        assert_eq!(placed(&d), [(a, vec![(1, vec![0, 1, 2, 3])]), (b, vec![(0, vec![0])])]);
        assert_eq!(sched::check(&h.runner().view(), &d), Ok(()));
    }

    #[test]
    fn a_job_that_does_not_fit_holds_back_the_jobs_behind_it() {
        let mut w = TestWorld::gpu_cluster(&[4]);
        let a = w.queue_job(job("a", "cifar10").gpus(3));
        let b = w.queue_job(job("b", "cifar10").gpus(2));
        let c = w.queue_job(job("c", "cifar10").gpus(1));
        let mut h = fifo(false, w);
        assert_eq!(placed(&h.tick(Seconds(30.0)).unwrap()), [(a, vec![(0, vec![0, 1, 2])])]);
        let d = h.tick(Seconds(30.0)).unwrap();
        assert!(d.is_empty(), "b waits for two GPUs and c waits behind it");
        let why: Vec<(JobId, &str)> = d.pending_reasons().iter().map(|(j, r)| (*j, r.as_str())).collect();
        assert_eq!(
            why,
            [(b, "2 GPUs asked, 1 free on the 1 nodes taking work"), (c, "behind b (first come, first served)")]
        );
        h.world.remove_job(a);
        let d = h.tick(Seconds(30.0)).unwrap();
        assert_eq!(placed(&d), [(b, vec![(0, vec![0, 1])]), (c, vec![(0, vec![2])])]);
    }

    #[test]
    fn with_backfill_a_later_job_that_fits_goes_ahead() {
        let mut w = TestWorld::gpu_cluster(&[4]);
        let a = w.queue_job(job("a", "cifar10").gpus(3));
        let b = w.queue_job(job("b", "cifar10").gpus(2));
        let c = w.queue_job(job("c", "cifar10").gpus(1));
        let mut h = fifo(true, w);
        h.tick(Seconds(30.0)).unwrap();
        let d = h.tick(Seconds(0.0)).unwrap();
        assert!(placed(&d).is_empty(), "all of it went in the first tick");
        let view = h.runner().view();
        assert!(!view.job(a).unwrap().is_queued() && !view.job(c).unwrap().is_queued());
        assert!(view.job(b).unwrap().is_queued());
    }

    #[test]
    fn a_job_too_big_for_the_whole_cluster_does_not_block_the_queue() {
        let mut w = TestWorld::gpu_cluster(&[2, 2]);
        w.queue_job(job("huge", "imagenet").gpus(4));
        w.queue_job(job("spread-too-big", "imagenet").gpus(6).replicas(3));
        let c = w.queue_job(job("c", "cifar10").gpus(2));
        let mut h = fifo(false, w);
        assert_eq!(placed(&h.tick(Seconds(30.0)).unwrap()), [(c, vec![(0, vec![0, 1])])]);
    }

    #[test]
    fn a_job_that_may_be_split_spreads_in_whole_replicas_when_no_node_holds_it() {
        let mut w = TestWorld::gpu_cluster(&[2, 1, 2]);
        let a = w.queue_job(job("a", "imagenet").gpus(4).replicas(2));
        let mut h = fifo(false, w);
        let d = h.tick(Seconds(30.0)).unwrap();
        assert_eq!(placed(&d), [(a, vec![(0, vec![0, 1]), (2, vec![0, 1])])]);
        assert_eq!(sched::check(&h.runner().view(), &d), Ok(()));
    }

    #[test]
    fn cpu_jobs_start_on_the_node_with_the_fewest_jobs_per_core() {
        let mut w = TestWorld::new();
        let small = w.node("small", Millicores(2000), Bytes::gib(8));
        let big = w.node("big", Millicores(8000), Bytes::gib(8));
        w.add_job_on(job("running", "ncf"), small);
        let a = w.queue_job(job("a", "ncf"));
        let b = w.queue_job(job("b", "ncf"));
        let mut h = fifo(false, w);
        let d = h.tick(Seconds(30.0)).unwrap();
        assert_eq!(placed(&d), [(a, vec![(big.0, vec![])]), (b, vec![(big.0, vec![])])]);
    }

    #[test]
    fn a_config_with_keys_it_does_not_know_is_refused() {
        assert!(Harness::<Fifo>::from_config(r#"{"backfill": true}"#, TestWorld::new()).is_ok());
        let err = Harness::<Fifo>::from_config(r#"{"preempt": true}"#, TestWorld::new()).err().unwrap();
        assert!(matches!(err, PolicyError::InvalidConfig(m) if m.contains("preempt")));
    }

    /// A deterministic die (xorshift), so the busy world is the same on every run.
    /// Jobs of every shape arrive and end on four GPU nodes and a CPU node for 300 ticks;
    /// returns how many placements the policy made, after checking every decision as the host
    /// would.
    fn run_busy_world(backfill: bool) -> usize {
        let mut w = TestWorld::gpu_cluster(&[4, 4, 2, 8]);
        w.node("cpu", Millicores(16000), Bytes::gib(64));
        let mut h = fifo(backfill, w);
        let mut placements = 0;
        churn(&mut h, 300, 0x9e37_79b9_7f4a_7c15, 8, |d| {
            assert!(d.actions().iter().all(|a| matches!(a.kind(), ActionKind::Place(_))), "fifo only places");
            placements += d.actions().len();
        });
        placements
    }

    #[test]
    fn every_decision_on_a_busy_world_passes_the_hosts_rules_and_nothing_is_preempted() {
        let strict = run_busy_world(false);
        let backfill = run_busy_world(true);
        assert!(strict > 50, "{strict} placements");
        assert!(backfill > strict, "backfill places more ({backfill} against {strict})");
    }

    #[test]
    fn a_job_whose_tenant_is_at_its_limit_is_passed_over_not_waited_for() {
        let mut w = TestWorld::gpu_cluster(&[4]);
        w.declare(tenant("a").quota(1));
        let a0 = w.queue_job(job("a0", "cifar10").gpus(1).tenant("a"));
        let a1 = w.queue_job(job("a1", "cifar10").gpus(1).tenant("a"));
        let b0 = w.queue_job(job("b0", "cifar10").gpus(1).tenant("b"));
        let mut h = fifo(false, w);
        let d = h.tick(Seconds(30.0)).unwrap();
        assert_eq!(sched::check(&h.runner().view(), &d), Ok(()));
        let started: Vec<JobId> = placed(&d).into_iter().map(|(j, _)| j).collect();
        assert_eq!(started, [a0, b0], "strict FCFS, yet a1 holds nobody back");
        let why = d.pending_reasons().iter().find(|(j, _)| *j == a1).map(|(_, w)| w.as_str());
        assert_eq!(why, Some("tenant a holds 1 GPUs of its limit of 1 (its quota); 1 more would pass it"));
    }
}
