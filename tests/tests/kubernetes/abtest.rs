//! A live A/B test on a real cluster, checked against the simulator: FIFO against Tiresias as a
//! split, each arm on a node of its own with one GPU (advertised, accounting only), eight
//! checkpointing trainer pods (per arm a long one first, then three short ones), each arm's
//! policy deciding for its own pods through the loop the host runs. The same experiment, the
//! jobs' lengths and arrivals scaled to the simulator's epochs, runs on the simulator, with
//! each arm alone beside it: the live estimate must have the simulator's sign.

use std::collections::BTreeMap;
use std::time::Duration;

use wasmsched::control::{self, Driver, LoopConfig, Policies, Tick};
use wasmsched::experiment::abtest::{self, Arms};
use wasmsched::experiment::run::{PolicyChoice, RunOptions, simulate};
use wasmsched::experiment_design::{Assign, Estimate, ExperimentConfig};
use wasmsched::runtime::Runtime;
use wasmsched::world::World;

use crate::cluster::{TrainerPod, trainer_cluster_or_skip};
use crate::{backend, test_label};
use wasmsched_tests::common::runtime;

/// The jobs: name, long or not, arrival in seconds on the cluster.
const JOBS: [(&str, bool, u64); 8] = [
    ("long-0", true, 0),
    ("long-1", true, 0),
    ("short-0", false, 14),
    ("short-1", false, 15),
    ("short-2", false, 16),
    ("short-3", false, 17),
    ("short-4", false, 18),
    ("short-5", false, 19),
];

/// A long job: about 45 s alone here, its pod's start included; a short one about 6 s. Both
/// checkpoint every epoch, so a preempted one resumes.
const LONG: &[&str] = &["--epochs", "1000", "--samples", "2000", "--threads", "1", "--checkpoint", "/ckpt/model"];
const SHORT: &[&str] = &["--epochs", "40", "--samples", "2000", "--threads", "1", "--checkpoint", "/ckpt/model"];

/// The simulator's seconds per second of the cluster: a long job's 96 CIFAR-10 epochs take
/// about 3,900 s there against about 45 s here (a short one's 10 about 410 s against 6 s).
const SCALE: u64 = 87;

/// Tiresias drops a job to its second queue after this many GPU-seconds (on the cluster): past
/// a short job's length, well short of a long one's.
const THRESHOLD_S: f64 = 10.8;

/// The first seed whose split puts one long and three short jobs on each arm (a stratified
/// draw: with eight jobs a plain hash could leave an arm no short job).
fn balanced(config: &ExperimentConfig) -> ExperimentConfig {
    (0..10_000)
        .map(|seed| ExperimentConfig { seed, ..config.clone() })
        .find(|c| {
            (0..2).all(|arm| {
                let on =
                    |long: bool| JOBS.iter().filter(|(name, l, _)| *l == long && c.arm_of(&spec(name)) == arm).count();
                on(true) == 1 && on(false) == 3
            })
        })
        .expect("some seed balances eight jobs")
}

/// A job named `name`: all a split's assignment by name reads.
fn spec(name: &str) -> wasmsched::bindings::wit::JobSpec {
    wasmsched::bindings::wit::JobSpec { name: name.into(), ..wasmsched::world::sample::job_spec(0) }
}

/// FIFO, and Tiresias every call with its threshold at `threshold_s` GPU-seconds.
fn arms(rt: &Runtime, threshold_s: f64) -> Vec<PolicyChoice> {
    let fifo = PolicyChoice::resolve(rt, "fifo").unwrap();
    let tiresias = PolicyChoice {
        config_json: format!(r#"{{"interval-s": 0, "thresholds-gpu-h": [{}]}}"#, threshold_s / 3600.0),
        ..PolicyChoice::resolve(rt, "tiresias").unwrap()
    };
    vec![fifo, tiresias]
}

/// The same jobs on the simulator, on two one-GPU nodes named as the cluster's.
fn scenario() -> String {
    let mut toml = String::from("name = \"kit-ab\"\n");
    for node in ["vm", "vm2"] {
        toml +=
            &format!("[[node]]\nname = \"{node}\"\ncores = 8\nmemory = \"32GiB\"\ngpus = 1\ngpu-memory = \"16GiB\"\n");
    }
    for (name, long, at) in JOBS {
        let epochs = if long { 96 } else { 10 };
        toml += &format!(
            "[[job]]\nname = \"{name}\"\nmodel = \"cifar10\"\ngpus = 1\nmax-epochs = {epochs}\narrival = \"{}s\"\n",
            at * SCALE
        );
    }
    toml
}

/// The experiment on the cluster: pods made at their arrivals, until every job has ended.
struct Live<'a, A> {
    arms: Arms,
    arrive: A,
    /// Each job's arrival and end on the backend's clock, by name.
    seen: BTreeMap<String, (u64, Option<u64>)>,
    created: &'a std::cell::Cell<usize>,
    limit_ms: u64,
}

impl<A: FnMut(u64)> Driver for Live<'_, A> {
    fn boundary(&mut self, _rt: &Runtime, next_ms: u64) -> bool {
        (self.arrive)(next_ms);
        next_ms <= self.limit_ms
    }

    fn observed(
        &mut self,
        world: &World,
        _: Vec<wasmsched::backend::Endpoint>,
        _: Option<wasmsched::backend::Leadership>,
    ) {
        self.arms.observed(world);
    }

    fn policies(&mut self) -> Policies<'_> {
        self.arms.policies()
    }

    fn record(&mut self, tick: Tick<'_>) {
        let now = tick.world.time_ms();
        let live: Vec<String> = tick.world.all_jobs().map(|(s, _)| s.name.clone()).collect();
        for (spec, _) in tick.world.all_jobs() {
            self.seen.entry(spec.name.clone()).or_insert((spec.arrival_ms, None));
        }
        for (name, (_, end)) in self.seen.iter_mut() {
            if end.is_none() && !live.contains(name) {
                *end = Some(now);
            }
        }
        let all_ended = self.seen.len() == JOBS.len() && self.seen.values().all(|(_, end)| end.is_some());
        if self.created.get() == JOBS.len() && all_ended {
            self.limit_ms = 0;
        }
    }
}

/// Each arm's mean JCT, seconds, from arrivals and ends by name.
fn mean_jct(config: &ExperimentConfig, seen: &BTreeMap<String, (u64, Option<u64>)>) -> [f64; 2] {
    [0, 1].map(|arm| {
        let jcts: Vec<f64> = seen
            .iter()
            .filter(|(name, _)| config.arm_of(&spec(name)) == arm)
            .filter_map(|(_, (arrival, end))| Some(end.as_ref()?.saturating_sub(*arrival) as f64 / 1000.0))
            .collect();
        jcts.iter().sum::<f64>() / jcts.len() as f64
    })
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn a_split_of_fifo_and_tiresias_on_the_cluster_has_the_simulators_sign() {
    let (c, image, _serial) = trainer_cluster_or_skip!();
    let rt = runtime();
    let label = test_label("abtest");
    let _sweep = c.sweep(&label);
    let _gpus = (c.advertise_gpus("vm", 1), c.advertise_gpus("vm2", 1));
    let names = vec!["fifo".to_string(), "tiresias".to_string()];
    let mut config = ExperimentConfig::split(names, Assign::Name, Duration::from_secs(20), Duration::ZERO, 0);
    config.pools = vec![vec!["vm".into()], vec!["vm2".into()]];
    let config = balanced(&config);
    config.check().unwrap();

    // On the simulator first: the split, and each arm alone.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kit-ab.toml");
    std::fs::write(&path, scenario()).unwrap();
    let scenario = wasmsched::scenario::Scenario::load(&path, &Default::default()).unwrap();
    let simulated = arms(rt, THRESHOLD_S * SCALE as f64);
    let options = RunOptions { tick: Duration::from_secs(30), ..Default::default() };
    let ledger = abtest::experiment(rt, &simulated, &scenario, &options, &config);
    let naive = |versus: Vec<wasmsched::experiment_design::Versus>| {
        versus.into_iter().find(|v| v.estimate == Estimate::NaiveJct).expect("the naive JCT")
    };
    let sim = naive(ledger.versus());
    let alone = simulated.iter().map(|a| simulate(rt, a, &scenario, &options).mean_jct_s).collect::<Vec<_>>();
    let truth = alone[1] / alone[0] - 1.0;

    // Then on the cluster, through the loop the host runs.
    let dirs: Vec<tempfile::TempDir> = JOBS.iter().map(|_| tempfile::tempdir().unwrap()).collect();
    let created = std::cell::Cell::new(0);
    let arrive = |now_ms: u64| {
        while let Some(&(name, long, _)) = JOBS.get(created.get()).filter(|(_, _, at)| at * 1000 <= now_ms) {
            let annotations = [("checkpoint", "/ckpt"), ("job-name", name)];
            let args = if long { LONG } else { SHORT };
            let pod = TrainerPod { annotations: &annotations, gpus: 1, ..TrainerPod::new(name, &label, args) };
            c.trainer(&image, pod.with_checkpoint_dir(dirs[created.get()].path()));
            created.set(created.get() + 1);
        }
    };
    let mut live = Live {
        arms: Arms::new(&arms(rt, THRESHOLD_S), &config, Default::default()),
        arrive,
        seen: BTreeMap::new(),
        created: &created,
        limit_ms: 300_000,
    };
    let mut k = backend(c, &label);
    let summary = control::drive(&mut k, &mut live, rt, &LoopConfig::unbudgeted(Duration::from_millis(500)));
    let ended = live.seen.values().filter(|(_, end)| end.is_some()).count();
    assert_eq!(ended, JOBS.len(), "every pod ran to its end: {:?} {summary:?}\n{}", live.seen, c.describe(&label));
    for (name, (arrival, end)) in &live.seen {
        let jct = end.unwrap_or(0).saturating_sub(*arrival) as f64 / 1000.0;
        eprintln!(
            "{name}: arm {}, arrived {:.1} s, JCT {jct:.1} s",
            config.arms[config.arm_of(&spec(name))],
            *arrival as f64 / 1000.0
        );
    }
    let [fifo, tiresias] = mean_jct(&config, &live.seen);
    let measured = naive(live.arms.ledger().versus());
    eprintln!(
        "live split on the cluster: mean JCT fifo {fifo:.1} s, tiresias {tiresias:.1} s ({:+.1} %); ledger {}\n\
         the simulator's split: {}\nthe simulator's arms alone: fifo {:.0} s, tiresias {:.0} s ({:+.1} %)",
        100.0 * (tiresias / fifo - 1.0),
        measured.sentence(),
        sim.sentence(),
        alone[0],
        alone[1],
        100.0 * truth
    );
    assert!(truth < 0.0 && sim.change < 0.0, "on the simulator Tiresias shortens the mean JCT: {sim:?}, {alone:?}");
    assert!(
        (measured.change - (tiresias / fifo - 1.0)).abs() < 0.05,
        "the ledger counts what the ends say: {measured:?}"
    );
    assert!(measured.change < 0.0, "the live split has the simulator's sign: {measured:?} against {sim:?}");
}
