//! A live A/B experiment on the host: a switchback of two configured policies, each active in
//! its own blocks, counted, shown in the status, the metrics and the audit log, and stopped;
//! and a split, each policy deciding for its own jobs side by side.

use std::time::Duration;

use wasmsched::config::Role;
use wasmsched::experiment_design::ExperimentConfig;
use wasmsched_tests::live::{Running, Setup, component, serving};

#[test]
fn a_switchback_makes_each_arm_active_in_its_blocks_and_can_be_stopped() {
    let setup = Setup::new();
    setup.land("fs", &component("fair-share"));
    setup.land("counter", &component("counter"));
    let tables = "[policy.fs]\nrole = \"active\"\ndeadline = \"2s\"\n\
                  [policy.counter]\nrole = \"shadow\"\ndeadline = \"2s\"\n\
                  [experiment]\nname = \"caps\"\narms = [\"fs\", \"counter\"]\nblock = \"10s\"\nburn-in = \"2s\"\nseed = 3\n";
    let running = Running::start(setup.config("1s", "100", tables));
    running.wait("both serving", |s| ["fs", "counter"].iter().all(|p| serving(s, p).is_some()));
    let s = running.wait("three complete groups", |s| s.experiment.as_ref().is_some_and(|e| e.groups >= 3));
    let e = s.experiment.clone().unwrap();
    assert_eq!(e.arms, ["fs", "counter"]);
    assert!(e.active.is_some() && e.ended.is_none(), "{e:?}");
    assert!(!e.versus.is_empty() && e.versus.iter().all(|v| v.arm == "counter"), "{:?}", e.versus);
    // The policies' roles in the status follow the block (both are written on every tick).
    let follows = |s: &wasmsched::status::Status| {
        let active = s.experiment.as_ref().and_then(|e| e.active.clone());
        let role = |name: &str| if Some(name) == active.as_deref() { Role::Active } else { Role::Shadow };
        active.is_some() && s.policies.iter().all(|p| p.role == role(&p.name))
    };
    running.wait("the roles to follow the block", follows);
    let text = s.render();
    assert!(text.contains("experiment caps: switchback of fs, counter in blocks of 10s (burn-in 2s)"), "{text}");
    let metrics = wasmsched::api::metrics::encode(&s);
    assert!(metrics.contains("wasmsched_experiment_arm_active{experiment=\"caps\",arm=\"fs\"}"), "{metrics}");
    assert!(metrics.contains("wasmsched_experiment_groups{experiment=\"caps\"}"), "{metrics}");

    let (tx, rx) = std::sync::mpsc::channel();
    running.handle.stop_experiment(move |r| tx.send(r).unwrap());
    assert_eq!(rx.recv_timeout(Duration::from_secs(60)).unwrap(), Ok("caps".to_string()));
    let stopped = running.wait("the experiment ended", |s| s.experiment.as_ref().is_some_and(|e| e.ended.is_some()));
    let at = stopped.backend_time_ms;
    running.wait("a few ticks more", |s| s.backend_time_ms >= at + 5_000);
    let (tx, rx) = std::sync::mpsc::channel();
    running.handle.stop_experiment(move |r| tx.send(r).unwrap());
    let again = rx.recv_timeout(Duration::from_secs(60)).unwrap().unwrap_err();
    assert!(again.contains("already ended"), "{again}");
    running.stop();

    // Every decision up to the stop came from the arm of its block, the other arm as a shadow;
    // every block's start is in the log; after the stop the configured active one decides.
    let arms = vec!["fs".into(), "counter".into()];
    let config = ExperimentConfig::switchback(arms, Duration::from_secs(10), Duration::from_secs(2), 3);
    let lines = setup.audit_lines();
    let stop_line = lines.iter().position(|l| l.experiment.as_ref().is_some_and(|e| e.event == "stopped")).unwrap();
    let mut arms_seen = std::collections::BTreeSet::new();
    for l in lines[..stop_line].iter().filter(|l| l.active.is_some()) {
        let active = l.active.as_ref().unwrap();
        let arm = &config.arms[config.block_at(l.time_ms).arm];
        assert_eq!(&active.policy, arm, "tick {} at {} ms", l.tick, l.time_ms);
        assert_eq!(l.shadows.len(), 1);
        arms_seen.insert(arm.clone());
    }
    assert_eq!(arms_seen.len(), 2, "both arms decided");
    let blocks: Vec<u64> =
        lines.iter().filter_map(|l| l.experiment.as_ref().filter(|e| e.event == "block").map(|e| e.block)).collect();
    assert!(blocks.len() >= 6 && blocks.windows(2).all(|w| w[1] == w[0] + 1), "{blocks:?}");
    for l in lines[stop_line + 1..].iter().filter(|l| l.active.is_some()) {
        assert_eq!(l.active.as_ref().unwrap().policy, "fs", "tick {}: the configured active after the stop", l.tick);
    }
}

/// FIFO and Tiresias side by side on the GPU-queue scenario (two nodes of four GPUs, two long
/// runs, then short jobs), each job on an arm by a hash of its name.
#[test]
fn a_split_lets_each_arm_decide_for_its_own_jobs_only() {
    use wasmsched::experiment_design::{Assign, Design};
    let setup = Setup::new();
    let scenario = include_str!("../../scenarios/gpu-queue.toml");
    std::fs::write(setup.dir.path().join("workload.toml"), scenario).unwrap();
    setup.land("fifo", &component("fifo"));
    setup.land("tiresias", &component("tiresias"));
    let tables = "[policy.fifo]\nrole = \"active\"\n[policy.tiresias]\nrole = \"shadow\"\n\
                  [experiment]\nname = \"queue\"\narms = [\"fifo\", \"tiresias\"]\ndesign = \"split\"\n\
                  block = \"30m\"\nburn-in = \"10m\"\nseed = 1\n";
    let running = Running::start(setup.config("60s", "20000", tables));
    let s = running.wait("the workload to run out", |s| !s.running);
    running.stop();
    let e = s.experiment.clone().unwrap();
    assert_eq!((e.design, e.assign, e.active.as_deref()), (Design::Split, Assign::Name, None), "{e:?}");
    assert!(e.groups >= 10 && e.versus.iter().any(|v| v.change.is_finite()), "{e:?}");
    assert!(s.policies.iter().all(|p| p.role == Role::Active), "both arms decide: {:?}", s.policies);
    let text = s.render();
    assert!(text.contains("experiment queue: split of fifo, tiresias by a hash of each job's name"), "{text}");
    let metrics = wasmsched::api::metrics::encode(&s);
    for arm in ["fifo", "tiresias"] {
        let line = format!("wasmsched_experiment_arm_active{{experiment=\"queue\",arm=\"{arm}\"}} 1");
        assert!(metrics.contains(&line), "{metrics}");
    }

    // Every decision came from both arms, none active; each applied action is on a job of
    // the arm that took it; an action on the other arm's job is refused, saying why.
    let arms = vec!["fifo".into(), "tiresias".into()];
    let config = ExperimentConfig::split(arms, Assign::Name, Duration::from_secs(1800), Duration::from_secs(600), 1);
    let names = |l: &wasmsched::record::AuditLine| -> Vec<String> { l.arms.iter().map(|d| d.policy.clone()).collect() };
    let lines = setup.audit_lines();
    let decided: Vec<_> = lines.iter().filter(|l| !l.arms.is_empty()).collect();
    assert!(decided.len() > 100 && decided.iter().all(|l| l.active.is_none() && names(l) == ["fifo", "tiresias"]));
    let (_, ticks) = wasmsched::record::read_recording(&setup.recording()).unwrap();
    let specs: std::collections::BTreeMap<_, _> =
        ticks.iter().flat_map(|t| &t.snapshot.added).map(|spec| (spec.handle, spec.clone())).collect();
    let spec = |job| specs.get(&job).unwrap_or_else(|| panic!("job {job:?} in the recording"));
    // The recording keeps each arm's decision, for a replay to tell who decided what.
    let recorded = ticks.iter().filter(|t| t.arms.iter().map(|d| d.policy.as_str()).eq(["fifo", "tiresias"]));
    assert!(recorded.count() > 100 && ticks.iter().all(|t| t.decision.is_none()), "the arms' decisions recorded");
    let mut per_arm = [0usize; 2];
    for l in &decided {
        for (k, d) in l.arms.iter().enumerate() {
            for a in &d.actions {
                let spec = spec(a.job);
                assert_eq!(config.arm_of(spec), k, "tick {}: {} acted on {}", l.tick, d.policy, spec.name);
                per_arm[k] += 1;
            }
            for r in d.rejected.iter().filter(|r| r.reason.contains("belongs to arm")) {
                assert_ne!(config.arm_of(spec(r.job)), k, "{r:?}");
            }
        }
    }
    assert!(per_arm.iter().all(|&n| n > 0), "both arms placed jobs: {per_arm:?}");
}

#[test]
fn an_experiment_naming_no_policy_is_refused_with_what_to_add() {
    let setup = Setup::new();
    let path = setup.dir.path().join("host.toml");
    std::fs::write(
        &path,
        "tick = \"1s\"\npolicies-dir = \"policies\"\n[backend]\nkind = \"sim\"\nworkload = \"workload.toml\"\n\
         [policy.fs]\nrole = \"active\"\n[experiment]\narms = [\"fs\", \"tiresias\"]\n",
    )
    .unwrap();
    let err = wasmsched::config::HostConfig::load(&path).unwrap_err().to_string();
    assert!(err.contains("[experiment] arm \"tiresias\" is not a policy: add a [policy.tiresias] table"), "{err}");
}

#[test]
fn abtest_on_the_simulator_checks_each_estimator_against_every_arm_alone() {
    use wasmsched::experiment::abtest;
    use wasmsched::experiment::run::{PolicyChoice, RunOptions, simulate};
    use wasmsched::experiment_design::Estimate;
    let rt = wasmsched_tests::common::runtime();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/workloads/workload-1.csv");
    let scenario = wasmsched::scenario::Scenario::load(std::path::Path::new(path), &Default::default()).unwrap();
    let arms = ["fifo", "tiresias"].map(|p| PolicyChoice::resolve(rt, p).unwrap());
    let names = vec!["fifo".to_string(), "tiresias".to_string()];
    let config = ExperimentConfig::switchback(names, Duration::from_secs(7200), Duration::from_secs(1800), 0);
    let options = RunOptions { tick: Duration::from_secs(60), ..Default::default() };
    let runs = abtest::replicate(rt, &arms, &scenario, &options, &config, 0..3, true, 2, &|_| {});
    assert_eq!(runs.iter().map(|r| r.seed).collect::<Vec<_>>(), [0, 1, 2]);
    // The truth is each arm alone, as `simulate` runs it on that seed.
    let seed1 = RunOptions { sim: wasmsched::sim::SimConfig { seed: 1, ..Default::default() }, ..options };
    let alone = simulate(rt, &arms[1], &scenario, &seed1);
    assert_eq!(runs[1].alone[1].mean_jct_s, alone.mean_jct_s);
    let checks = abtest::check(&runs);
    let kinds: Vec<Estimate> = checks.iter().map(|c| c.estimate).collect();
    assert_eq!(kinds, [Estimate::LittleJct, Estimate::NaiveJct, Estimate::LittleWait]);
    for c in &checks {
        assert_eq!(c.replications, 3, "{c:?}");
        assert!(c.truth < 0.0, "Tiresias alone shortens Pollux's first workload's mean JCT: {c:?}");
        assert!((0.0..=1.0).contains(&c.coverage) && c.rmse >= c.bias.abs() - 1e-12, "{c:?}");
    }
    let again = abtest::replicate(rt, &arms, &scenario, &options, &config, 0..3, true, 1, &|_| {});
    assert_eq!(
        again.iter().map(|r| r.estimates.clone()).collect::<Vec<_>>(),
        runs.iter().map(|r| r.estimates.clone()).collect::<Vec<_>>(),
        "a replication is a function of its seed, however many run at once"
    );
    assert!(abtest::check_table(&checks).contains("mean JCT (Little's law)"));
}

/// Tenants' fairness per arm: on the tenants scenario fair-share-decay shares the GPUs by
/// weight and FIFO does not; a split (each arm over its own jobs and the GPUs the other does
/// not hold) estimates each arm's Jain's index, and finds fair-share-decay the fairer, as each
/// alone is.
#[test]
fn a_split_estimates_each_arms_fairness_among_tenants() {
    use wasmsched::experiment::abtest;
    use wasmsched::experiment::run::{PolicyChoice, RunOptions};
    use wasmsched::experiment_design::{Assign, Estimate};
    let rt = wasmsched_tests::common::runtime();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/tenants.toml");
    let scenario = wasmsched::scenario::Scenario::load(std::path::Path::new(path), &Default::default()).unwrap();
    let arms = ["fifo", "fair-share-decay"].map(|p| PolicyChoice::resolve(rt, p).unwrap());
    let names = vec!["fifo".to_string(), "fair-share-decay".to_string()];
    let config = ExperimentConfig::split(names, Assign::Name, Duration::from_secs(3600), Duration::from_secs(600), 0);
    let runs = abtest::replicate(rt, &arms, &scenario, &RunOptions::default(), &config, 0..4, true, 2, &|_| {});
    let checks = abtest::check(&runs);
    let fairness = checks.iter().find(|c| c.estimate == Estimate::TenantFairness).expect("a fairness check");
    assert_eq!(fairness.replications, 4, "{fairness:?}");
    assert!(fairness.truth > 0.5, "alone, fair-share-decay is the fairer by far: {fairness:?}");
    assert!(fairness.estimated > 0.0 && fairness.sign_agrees == 1.0, "{fairness:?}");
}
