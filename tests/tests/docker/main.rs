//! The live backend against a real Docker Engine: real training containers, real limits.
//! Built without `WASMSCHED_DOCKER`, they are ignored (`tests/build.rs`); run anyway without an
//! engine, each says SKIPPED and returns. `.ci/run` starts one.
//! A binary of its own, so that no other test shares the machine while these measure CPU.

mod copies;
mod engine;
mod fidelity;
mod page;
mod proxy;
mod whatif;

use std::time::{Duration, Instant};

use wasmsched::backend::docker::{Docker, DockerConfig};
use wasmsched::backend::{Backend, DefaultPlacement as _, Placer, Status as _};
use wasmsched::bindings::wit;
use wasmsched::control::{self, Driver, LoopConfig, Policies, Tick};
use wasmsched::runtime::Runtime;
use wasmsched::runtime::supervise::{Fallback, Quarantine, Supervised};
use wasmsched::watchdog::WatchdogConfig;
use wasmsched::world::{JobId, World};

use engine::{Engine, engine_or_skip, eventually, serial, trainer_engine_or_skip};
use wasmsched_tests::common::{loaded, misbehaving, runtime};
use wasmsched_tests::live::{Running, Setup, assert_consecutive_epochs, component, serving, variant};

/// Epochs of about a quarter second of one core each: quick to show progress.
const QUICK: &[&str] = &["--epochs", "400", "--samples", "2000", "--threads", "1"];

/// A backend on `endpoint` that manages only the containers labelled `wasmsched.test=label`.
fn backend(endpoint: &str, label: &str) -> Docker {
    Docker::new(DockerConfig {
        engines: vec![endpoint.to_string()],
        selector: format!("wasmsched.test={label}"),
        timeout: Duration::from_secs(3),
        gpus: false,
    })
    .unwrap()
}

/// The `wasmsched.test` label of one test's containers, unique to this process.
fn test_label(test: &str) -> String {
    format!("{test}-{}", std::process::id())
}

/// Observe once more, `tick_ms` after the last observation.
fn step(docker: &mut Docker, world: &mut World, tick_ms: u64) {
    let next = world.time_ms() + tick_ms;
    docker.observe(world, next);
}

fn action(job: JobId, kind: wit::ActionKind) -> wit::Action {
    wit::Action { job, kind, reason: "test".into() }
}

#[test]
#[cfg_attr(
    not(live_docker),
    ignore = "needs a Docker Engine: `.ci/docker-engine start`, export WASMSCHED_DOCKER=<its endpoint>"
)]
fn labels_declare_the_job_and_its_progress_flows_from_the_log() {
    let (e, _serial) = trainer_engine_or_skip!();
    let label = test_label("declare");
    let c = e.start_trainer(
        "declare",
        &[
            ("test", &label),
            ("metric", "accuracy"),
            ("metrics", "loss:lower"),
            ("tiers", "0.6,0.8"),
            ("max-epochs", "400"),
            ("tenant", "vision"),
        ],
        QUICK,
        None,
    );
    let mut docker = backend(&e.endpoint, &label);
    let mut world = World::new();
    world.set_tenants(vec![wit::Tenant {
        name: "vision".into(),
        weight: 3.0,
        quota_gpus: Some(2),
        borrowing_limit_gpus: None,
        cohort: String::new(),
    }]);
    step(&mut docker, &mut world, 200);
    // Just started: managed, with no progress yet, and nothing fails for it.
    let (spec, _) = world.jobs().next().expect("the labelled container is managed");
    assert_eq!(spec.name, c.name);
    assert_eq!(spec.metrics.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["accuracy", "loss"]);
    assert_eq!(spec.tiers, Some(wit::Tiers { deliverable: 0.6, final_: 0.8 }));
    assert_eq!(spec.max_epochs, Some(400));
    assert_eq!(spec.tenant, "vision", "its tenant, from its label");
    let tenants = wasmsched::status::TenantStatus::of(&world);
    assert_eq!((tenants[0].name.as_str(), tenants[0].jobs_running, tenants[0].quota_gpus), ("vision", 1, Some(2)));
    let handle = spec.handle;
    let records = eventually("three epochs", Duration::from_secs(60), || {
        step(&mut docker, &mut world, 500);
        let r: Vec<_> = world.history(handle).cloned().collect();
        (r.len() >= 3).then_some(r)
    });
    assert_consecutive_epochs(&records, "from the log");
    assert!(records.windows(2).all(|w| w[1].time_ms >= w[0].time_ms), "times in order");
    assert!(records.iter().all(|r| r.values.len() == 2 && (0.0..=1.0).contains(&r.values[0])));
    let state = world.state(handle).unwrap();
    assert!(state.cpu_used_millicores > 100, "a training job uses CPU: {state:?}");
    assert!(state.memory_used_bytes > 0, "{state:?}");
    assert_eq!(world.nodes().len(), 1);
    assert!(world.nodes()[0].cpu_millicores >= 1000, "the engine's CPUs are the node's: {:?}", world.nodes());
}

#[test]
#[cfg_attr(
    not(live_docker),
    ignore = "needs a Docker Engine: `.ci/docker-engine start`, export WASMSCHED_DOCKER=<its endpoint>"
)]
fn limits_are_in_force_as_docker_reports_them() {
    let (e, _serial) = trainer_engine_or_skip!();
    let label = test_label("limits");
    let c = e.start_trainer("limits", &[("test", &label)], QUICK, Some(1.5));
    let mut docker = backend(&e.endpoint, &label);
    let mut world = World::new();
    step(&mut docker, &mut world, 100);
    let handle = world.jobs().next().unwrap().0.handle;
    assert_eq!(world.state(handle).unwrap().cpu_limit_millicores, Some(1500), "a limit set at start is read");

    // From the decision handed to the backend to the limit in force: `docker update` returns
    // once the cgroup is written, and `docker inspect` agrees at once.
    let mut times = Vec::new();
    for m in [700, 600, 500, 400, 300, 800, 900, 500] {
        let started = Instant::now();
        let errors = docker.apply(&[action(handle, wit::ActionKind::SetCpu(Some(m)))], &mut world);
        times.push(started.elapsed());
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(e.cpus(&c.id), m as f64 / 1000.0);
    }
    assert_eq!(world.state(handle).unwrap().cpu_limit_millicores, Some(500));
    times.sort();
    eprintln!("decision to limit in force, 8 updates: median {:.1?}, max {:.1?}", times[4], times[7]);

    let errors = docker.apply(
        &[action(handle, wit::ActionKind::SetCpu(None)), action(handle, wit::ActionKind::SetMemory(Some(256 << 20)))],
        &mut world,
    );
    assert!(errors.is_empty(), "{errors:?}");
    let node_cores = world.nodes()[0].cpu_millicores as f64 / 1000.0;
    assert_eq!(e.cpus(&c.id), node_cores, "a lifted limit is the whole engine");
    assert_eq!(world.state(handle).unwrap().cpu_limit_millicores, None);
    assert_eq!(world.state(handle).unwrap().memory_limit_bytes, Some(256 << 20));

    // A limit Docker refuses is an apply error with Docker's reason; the host goes on.
    let errors = docker.apply(&[action(handle, wit::ActionKind::SetMemory(Some(1 << 20)))], &mut world);
    assert_eq!(errors.len(), 1);
    assert!(errors[0].reason.contains("Minimum memory limit"), "{errors:?}");

    // A GPU share needs a GPU: without one it is refused with the reason, and nothing moves.
    let share = wit::ActionKind::SetGpuShare(wit::GpuShare { gpu: 0, percent: 50 });
    let errors = docker.apply(&[action(handle, share)], &mut world);
    assert!(errors.len() == 1 && errors[0].reason.contains("holds no GPU to share"), "{errors:?}");
    let state = world.state(handle).unwrap();
    assert!(state.is_running() && state.gpu_share_percent.is_none(), "{state:?}");
}

#[test]
#[cfg_attr(
    not(live_docker),
    ignore = "needs a Docker Engine: `.ci/docker-engine start`, export WASMSCHED_DOCKER=<its endpoint>"
)]
fn deliver_runs_the_declared_command_in_the_container() {
    let (e, _serial) = trainer_engine_or_skip!();
    let label = test_label("deliver");
    // Epochs of seconds, not a fraction of one: the first delivery is asked for before the first
    // checkpoint is written (the world hears of an epoch only at the next observation, so the
    // check below cannot see one that is written but not yet read).
    let args = ["--epochs", "400", "--samples", "200000", "--threads", "1", "--checkpoint", "/ckpt/model"];
    let deliver = "/wasmsched-trainer,export,/ckpt/model,/ckpt/delivered";
    let _c = e.start_trainer("deliver", &[("test", &label), ("deliver", deliver)], &args, None);
    let mut docker = backend(&e.endpoint, &label);
    let mut world = World::new();
    step(&mut docker, &mut world, 100);
    let handle = world.jobs().next().unwrap().0.handle;
    // Before the first epoch there is no model: the command fails, and says why.
    let errors = docker.apply(&[action(handle, wit::ActionKind::Deliver)], &mut world);
    if world.history(handle).count() == 0 {
        assert!(errors.iter().any(|e| e.reason.contains("no checkpoint yet")), "{errors:?}");
    }
    eventually("an epoch", Duration::from_secs(60), || {
        step(&mut docker, &mut world, 500);
        (world.history(handle).count() > 0).then_some(())
    });
    let errors = docker.apply(&[action(handle, wit::ActionKind::Deliver)], &mut world);
    assert!(errors.is_empty(), "{errors:?}");
    // A stop ends the container, and the job leaves at the next observation.
    let errors = docker.apply(&[action(handle, wit::ActionKind::Stop)], &mut world);
    assert!(errors.is_empty(), "{errors:?}");
    step(&mut docker, &mut world, 100);
    assert_eq!(world.job_count(), 0, "the stopped job left");
}

#[test]
#[cfg_attr(
    not(live_docker),
    ignore = "needs a Docker Engine: `.ci/docker-engine start`, export WASMSCHED_DOCKER=<its endpoint>"
)]
fn a_container_removed_between_observe_and_apply_is_an_apply_error_and_leaves() {
    let (e, _serial) = trainer_engine_or_skip!();
    let label = test_label("vanish");
    let c = e.start_trainer("vanish", &[("test", &label)], QUICK, None);
    let mut docker = backend(&e.endpoint, &label);
    let mut world = World::new();
    step(&mut docker, &mut world, 100);
    let handle = world.jobs().next().unwrap().0.handle;
    c.remove();
    let errors = docker.apply(&[action(handle, wit::ActionKind::SetCpu(Some(700)))], &mut world);
    assert_eq!(errors.len(), 1);
    assert!(errors[0].reason.contains("gone") || errors[0].reason.contains("No such container"), "{errors:?}");
    assert!(docker.engine_up(0), "a vanished container is not a fault of the engine");
    step(&mut docker, &mut world, 100);
    assert_eq!(world.job_count(), 0, "the job left with its container");
}

#[test]
#[cfg_attr(
    not(live_docker),
    ignore = "needs a Docker Engine: `.ci/docker-engine start`, export WASMSCHED_DOCKER=<its endpoint>"
)]
fn flowcon_format_lines_are_progress_and_a_bad_label_is_dropped() {
    let (e, _serial) = trainer_engine_or_skip!();
    let label = test_label("flowcon-format");
    let _c = e.start_trainer(
        "flowcon-format",
        &[("test", &label), ("metric", "loss"), ("direction", "lower-is-better"), ("tiers", "oops")],
        &["--epochs", "400", "--samples", "2000", "--threads", "1", "--format", "flowcon"],
        None,
    );
    let mut docker = backend(&e.endpoint, &label);
    let mut world = World::new();
    step(&mut docker, &mut world, 100);
    let (spec, _) = world.jobs().next().unwrap();
    assert_eq!(spec.tiers, None, "a bad label is dropped, the job kept");
    let handle = spec.handle;
    let records = eventually("three epochs", Duration::from_secs(60), || {
        step(&mut docker, &mut world, 500);
        let r: Vec<_> = world.history(handle).cloned().collect();
        (r.len() >= 3).then_some(r)
    });
    assert_eq!(records.iter().map(|r| r.epoch).take(3).collect::<Vec<_>>(), [1, 2, 3], "epochs counted");
    assert!(records.iter().all(|r| r.values.len() == 1 && r.values[0] > 0.0));
}

#[test]
#[cfg_attr(
    not(live_docker),
    ignore = "needs a Docker Engine: `.ci/docker-engine start`, export WASMSCHED_DOCKER=<its endpoint>"
)]
fn garbage_log_lines_are_skipped_and_the_progress_around_them_kept() {
    let e = engine_or_skip!();
    let _serial = serial();
    if e.busybox_image().is_none() {
        return;
    }
    let label = test_label("garbage");
    let script = r#"echo '{"epoch":1,"accuracy":0.5}'; echo '{"epoch":2,"accuracy":'; echo 'Loss: 1.0';
        echo '{"epoch":"three","accuracy":0.6}'; echo 'just talking'; echo '{"epoch":2,"accuracy":0.7,"loss":1}';
        exec sleep 600"#;
    let _c = e.start_shell("garbage", &[("test", &label), ("metric", "accuracy")], script);
    let mut docker = backend(&e.endpoint, &label);
    let mut world = World::new();
    let handle = eventually("two records", Duration::from_secs(30), || {
        step(&mut docker, &mut world, 300);
        let (spec, _) = world.jobs().next()?;
        (world.history(spec.handle).count() >= 2).then_some(spec.handle)
    });
    for _ in 0..3 {
        step(&mut docker, &mut world, 300);
    }
    let records: Vec<_> = world.history(handle).map(|r| (r.epoch, r.values.clone())).collect();
    assert_eq!(records, [(1, vec![0.5]), (2, vec![0.7])], "the garbage between them is skipped");
}

#[test]
#[cfg_attr(
    not(live_docker),
    ignore = "needs a Docker Engine: `.ci/docker-engine start`, export WASMSCHED_DOCKER=<its endpoint>"
)]
fn the_default_placement_starts_created_containers_and_a_placing_policy_leaves_them_queued() {
    let (e, _serial) = trainer_engine_or_skip!();
    let label = test_label("default-placement");
    let _sweep = e.sweep(&label);
    // The older one asks for a GPU, which this engine's node does not have: it can never
    // start there, and must not hold up the younger one.
    let gpu = e.create_trainer("wants-gpu", &[("test", &label), ("gpus", "1")], QUICK);
    std::thread::sleep(Duration::from_millis(20));
    let cpu = e.create_trainer("cpu-only", &[("test", &label)], QUICK);
    let mut docker = backend(&e.endpoint, &label);
    docker.set_placer(Placer::Policy);
    let mut world = World::new();
    for _ in 0..3 {
        step(&mut docker, &mut world, 300);
    }
    assert_eq!((world.queue_len(), world.job_count()), (2, 0), "a placing policy starts them, or nothing does");
    assert!(e.labelled(&label).iter().all(|c| c.state == "created"));
    // What the default placement would start now (the watchdog's stall rule asks): the CPU job
    // alone, nothing started by asking.
    let cpu_handle = world.queue().find(|(s, _)| s.name == cpu.name).map(|(s, _)| s.handle).unwrap();
    assert_eq!(docker.startable(&world), [cpu_handle]);
    assert!(e.labelled(&label).iter().all(|c| c.state == "created"));

    docker.set_placer(Placer::Backend);
    step(&mut docker, &mut world, 300);
    let running: Vec<&str> = world.jobs().map(|(s, _)| s.name.as_str()).collect();
    let queued: Vec<&str> = world.queue().map(|(s, _)| s.name.as_str()).collect();
    assert_eq!(running, [cpu.name.as_str()], "the CPU job starts by itself");
    assert_eq!(queued, [gpu.name.as_str()], "the GPU job waits");
    let state = |id: &str| e.labelled(&label).into_iter().find(|c| c.id == id).map(|c| c.state);
    assert_eq!((state(&cpu.id).as_deref(), state(&gpu.id).as_deref()), (Some("running"), Some("created")));
    let handle = world.jobs().next().unwrap().0.handle;
    eventually("progress from the started job", Duration::from_secs(60), || {
        step(&mut docker, &mut world, 300);
        (world.history(handle).count() > 0).then_some(())
    });
    // It declares no checkpoint folder: preempting it would lose its progress.
    let errors = docker.apply(&[action(handle, wit::ActionKind::Preempt)], &mut world);
    assert!(errors.len() == 1 && errors[0].reason.contains("wasmsched.checkpoint"), "{errors:?}");
    assert!(world.state(handle).unwrap().is_running());
    assert_eq!(state(&cpu.id).as_deref(), Some("running"));
}

/// Drives the loop until `done` says so (or `limit` of backend time passes).
struct Until<'a, F> {
    policy: &'a mut Supervised,
    done: F,
    limit_ms: u64,
    ticks: u64,
}

impl<F: FnMut(&World) -> bool> Driver for Until<'_, F> {
    fn boundary(&mut self, _rt: &Runtime, next_ms: u64) -> bool {
        next_ms <= self.limit_ms
    }

    fn policies(&mut self) -> Policies<'_> {
        Policies { active: Some(&mut *self.policy), shadows: Vec::new(), split: None }
    }

    fn record(&mut self, tick: Tick<'_>) {
        self.ticks += 1;
        if (self.done)(tick.world) {
            self.limit_ms = 0;
        }
    }
}

#[test]
#[cfg_attr(
    not(live_docker),
    ignore = "needs a Docker Engine: `.ci/docker-engine start`, export WASMSCHED_DOCKER=<its endpoint>"
)]
fn flowcon_moves_real_cpu_between_two_real_training_containers() {
    let (e, _serial) = trainer_engine_or_skip!();
    // Two jobs with the same work per epoch: one learning, one that has learnt all it will
    // (a learning rate of zero: its accuracy is flat). FlowCon finds the flat one slow twice
    // in a row and caps it at its completing floor, 1/(n+1) of the node.
    let label = test_label("flowcon");
    let args = |lr: &'static str| ["--epochs", "1000", "--samples", "4000", "--threads", "2", "--lr", lr];
    let learning = e.start_trainer("learning", &[("test", &label)], &args("0.05"), None);
    let flat = e.start_trainer("flat", &[("test", &label)], &args("0"), None);
    let mut docker = backend(&e.endpoint, &label);
    let config = r#"{"interval-s": 3}"#.to_string();
    let mut policy =
        Supervised::new(loaded("flowcon"), config, Default::default(), Fallback::KeepLimits, Quarantine::default());
    let flat_id = flat.id.clone();
    let capped = |_: &World| e.cpus(&flat_id) > 0.0;
    let mut driver = Until { policy: &mut policy, done: capped, limit_ms: 120_000, ticks: 0 };
    let summary = control::drive(&mut docker, &mut driver, runtime(), &LoopConfig::unbudgeted(Duration::from_secs(1)));
    assert!(summary.applied > 0, "FlowCon set limits: {summary:?}");
    let (flat_cpus, learning_cpus) = (e.cpus(&flat.id), e.cpus(&learning.id));
    let node_cores = docker_node_cores(e);
    assert!(
        flat_cpus > 0.0 && flat_cpus < node_cores / 2.0,
        "the flat job is capped below its fair share: {flat_cpus}"
    );
    assert!(learning_cpus == 0.0 || learning_cpus > flat_cpus, "the learning job keeps more: {learning_cpus}");

    // Before the cap the two ran at the same pace; after it the learning job's epochs are
    // faster than the flat job's. A ratio within one run, so the machine's load cancels out.
    let before = (learning.epoch_times().len(), flat.epoch_times().len());
    std::thread::sleep(Duration::from_secs(12));
    let pace = |times: Vec<f64>, from: usize| {
        let after: Vec<f64> = times.into_iter().skip(from).collect();
        after.iter().sum::<f64>() / after.len().max(1) as f64
    };
    let (l_after, f_after) = (pace(learning.epoch_times(), before.0), pace(flat.epoch_times(), before.1));
    let (l_before, f_before) =
        (pace(learning.epoch_times()[..before.0].to_vec(), 0), pace(flat.epoch_times()[..before.1].to_vec(), 0));
    eprintln!(
        "epoch time, learning / flat: before the cap {l_before:.2}s / {f_before:.2}s, after {l_after:.2}s / {f_after:.2}s (flat capped at {flat_cpus} cores)"
    );
    assert!(
        l_after / f_after < 0.8 * (l_before / f_before),
        "the learning job's epochs got faster relative to the capped one"
    );
}

fn docker_node_cores(e: &Engine) -> f64 {
    let info = e.rt.block_on(e.client.info()).unwrap();
    info.ncpu.unwrap_or(1) as f64
}

/// Drives the loop for `limit_ms`, or until the watchdog benches the policy, and keeps every
/// job the watchdog rescued.
struct Rescues<'a> {
    policy: &'a mut Supervised,
    limit_ms: u64,
    rescued: Vec<(u64, JobId)>,
    benched: Option<String>,
}

impl Driver for Rescues<'_> {
    fn boundary(&mut self, _rt: &Runtime, next_ms: u64) -> bool {
        next_ms <= self.limit_ms && self.benched.is_none()
    }

    fn policies(&mut self) -> Policies<'_> {
        Policies { active: Some(&mut *self.policy), shadows: Vec::new(), split: None }
    }

    fn record(&mut self, tick: Tick<'_>) {
        let now = tick.world.time_ms();
        self.rescued.extend(tick.rescued.iter().map(|&job| (now, job)));
        if let Some(b) = tick.benched {
            self.benched.get_or_insert_with(|| b.why.clone());
        }
    }
}

#[test]
#[cfg_attr(
    not(live_docker),
    ignore = "needs a Docker Engine: `.ci/docker-engine start`, export WASMSCHED_DOCKER=<its endpoint>"
)]
fn a_placing_policy_that_never_places_has_real_containers_started_by_the_watchdog() {
    let (e, _serial) = trainer_engine_or_skip!();
    let label = test_label("stall");
    let _sweep = e.sweep(&label);
    let a = e.create_trainer("stall-a", &[("test", &label)], QUICK);
    std::thread::sleep(Duration::from_millis(20));
    let b = e.create_trainer("stall-b", &[("test", &label)], QUICK);
    let mut docker = backend(&e.endpoint, &label);
    let mut sup = misbehaving("never-place");
    let watchdog =
        WatchdogConfig { stall_after: Duration::from_secs(2), stall_bench_after: 2, ..WatchdogConfig::default() };
    let config = LoopConfig { tick: Duration::from_millis(500), watchdog, ..LoopConfig::default() };
    let mut driver = Rescues { policy: &mut sup, limit_ms: 8_000, rescued: Vec::new(), benched: None };
    let summary = control::drive(&mut docker, &mut driver, runtime(), &config);
    // Both are left waiting by the policy for two seconds, then started in arrival order.
    let (rescued, benched) = (driver.rescued, driver.benched);
    assert_eq!(rescued.len(), 2, "{rescued:?}");
    assert!(rescued.iter().all(|&(at, _)| at >= 2_000), "not before stall-after: {rescued:?}");
    assert_eq!(summary.rescues, 2);
    assert_eq!(benched.as_deref(), Some("the host started 2 jobs it left waiting in the last 10m"));
    // Started for real: running, or already done with their short run.
    for c in [&a, &b] {
        let state = e.labelled(&label).into_iter().find(|x| x.id == c.id).map(|x| x.state);
        assert!(matches!(state.as_deref(), Some("running" | "exited")), "{}: {state:?}", c.name);
    }
}

#[test]
#[cfg_attr(
    not(live_docker),
    ignore = "needs a Docker Engine: `.ci/docker-engine start`, export WASMSCHED_DOCKER=<its endpoint>"
)]
fn a_policy_that_preempts_real_containers_before_their_first_epoch_is_benched_for_churn() {
    let (e, _serial) = trainer_engine_or_skip!();
    let label = test_label("churn");
    let _sweep = e.sweep(&label);
    // Epochs of ten seconds: the job reports none between two preemptions.
    let slow =
        &["--epochs", "5", "--samples", "200000", "--hidden", "2048", "--threads", "1", "--checkpoint", "/ckpt/model"];
    let _a = e.create_trainer("churn-a", &[("test", &label), ("checkpoint", "/ckpt")], slow);
    let mut docker = backend(&e.endpoint, &label);
    let mut sup = misbehaving("preempt-churn");
    // No disruption budget: only the livelock rule stands between the job and a restart a tick.
    // A real preemption takes seconds (the step finished, the checkpoint copied out), and a
    // restart as long: two in a row keep the test short.
    let watchdog = WatchdogConfig { churn_after: 2, ..WatchdogConfig::default() };
    let config = LoopConfig { watchdog, ..LoopConfig::unbudgeted(Duration::from_millis(500)) };
    let mut driver = Rescues { policy: &mut sup, limit_ms: 150_000, rescued: Vec::new(), benched: None };
    let summary = control::drive(&mut docker, &mut driver, runtime(), &config);
    let why = driver.benched.unwrap_or_default();
    assert!(why.starts_with("it disrupted job ") && why.contains(" 2 times in a row"), "{why:?} after {summary:?}");
    assert_eq!(summary.benchings, 1);
}

#[test]
#[cfg_attr(
    not(live_docker),
    ignore = "needs a Docker Engine: `.ci/docker-engine start`, export WASMSCHED_DOCKER=<its endpoint>"
)]
fn the_engine_going_away_and_coming_back_is_survived() {
    let (e, _serial) = trainer_engine_or_skip!();
    let dir = tempfile::tempdir().unwrap();
    let upstream = e.endpoint.trim_start_matches("unix://");
    let proxy = proxy::Proxy::start(dir.path().join("proxy.sock"), upstream.into());
    let label = test_label("outage");
    let _c = e.start_trainer("outage", &[("test", &label)], QUICK, None);
    let mut docker = backend(&proxy.endpoint(), &label);
    let mut world = World::new();
    let handle = eventually("the job and two epochs", Duration::from_secs(60), || {
        step(&mut docker, &mut world, 500);
        let (spec, _) = world.jobs().next()?;
        (world.history(spec.handle).count() >= 2).then_some(spec.handle)
    });

    proxy.cut();
    let epochs_before = world.history(handle).count();
    for _ in 0..6 {
        step(&mut docker, &mut world, 500);
    }
    assert!(!docker.engine_up(0));
    let status = &docker.endpoints()[0];
    assert!(!status.up && status.down_for_ms.is_some() && status.jobs == 1, "the status shows it: {status:?}");
    assert_eq!(
        world.jobs().map(|(s, _)| s.handle).collect::<Vec<_>>(),
        [handle],
        "the job is kept while the engine is away"
    );
    let errors = docker.apply(&[action(handle, wit::ActionKind::SetCpu(Some(800)))], &mut world);
    assert!(errors[0].reason.contains("unreachable"), "{errors:?}");

    proxy.restore();
    eventually("the engine back", Duration::from_secs(60), || {
        step(&mut docker, &mut world, 500);
        docker.engine_up(0).then_some(())
    });
    let records = eventually("progress again", Duration::from_secs(60), || {
        step(&mut docker, &mut world, 500);
        let r: Vec<_> = world.history(handle).cloned().collect();
        (r.len() >= epochs_before + 3).then_some(r)
    });
    assert_eq!(world.jobs().map(|(s, _)| s.handle).collect::<Vec<_>>(), [handle], "the same job, the same handle");
    assert_consecutive_epochs(&records, "across the outage");
    let errors = docker.apply(&[action(handle, wit::ActionKind::SetCpu(Some(800)))], &mut world);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(docker.endpoints()[0].down_for_ms, None);
}

#[test]
#[cfg_attr(
    not(live_docker),
    ignore = "needs a Docker Engine: `.ci/docker-engine start`, export WASMSCHED_DOCKER=<its endpoint>"
)]
fn a_policy_hot_swapped_while_containers_run() {
    let (e, _serial) = trainer_engine_or_skip!();
    let label = test_label("swap");
    // One container starts limited; fair-share lifts every limit.
    let a = e.start_trainer("swap-a", &[("test", &label)], QUICK, Some(0.5));
    let _b = e.start_trainer("swap-b", &[("test", &label)], QUICK, None);
    let setup = Setup::new();
    setup.land("p", &component("fair-share"));
    let text = format!(
        "tick = \"500ms\"\npolicies-dir = \"policies\"\n[backend]\nkind = \"docker\"\nengines = [\"{}\"]\n\
         selector = \"wasmsched.test={label}\"\ngpus = false\n[reload]\ndebounce = \"20ms\"\n[api]\nenabled = false\n\
         [record]\naudit = \"audit.jsonl\"\n[policy.p]\nrole = \"active\"\n",
        e.endpoint
    );
    let path = setup.dir.path().join("host.toml");
    std::fs::write(&path, text).unwrap();
    let host = Running::start(wasmsched::config::HostConfig::load(&path).unwrap());
    let status = host.wait("fair-share serving", |s| s.ticks > 2 && serving(s, "p").is_some());
    assert_eq!(status.endpoints.len(), 1);
    assert!(status.endpoints[0].up, "{:?}", status.endpoints);
    assert!(status.render().contains(": up, 2 jobs"), "{}", status.render());
    eventually("fair-share lifting the limit", Duration::from_secs(30), || (e.cpus(&a.id) >= 1.0).then_some(()));
    let swapped = variant("fair-share", 1);
    setup.land("p", &swapped);
    let sha = wasmsched_tests::live::sha256(&swapped);
    host.wait("the new version serving", |s| serving(s, "p").as_deref() == Some(sha.as_str()));
    let at_swap = host.handle.board().get().ticks;
    host.wait("ticks after the swap", |s| s.ticks > at_swap + 3);
    host.stop();
    let lines = setup.audit_lines();
    wasmsched_tests::live::assert_no_tick_missed(&lines, 500);
    assert!(lines.iter().any(|l| l.active.as_ref().is_some_and(|d| d.sha256 == sha)), "the new version decided");
    assert!(lines.iter().all(|l| l.active.as_ref().is_none_or(|d| d.fallback.is_none())), "no tick fell back");
}

/// This thread's CPU time so far (user + system), from /proc: the loop, the policy calls and
/// the Docker client all run on the calling thread.
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<u64> = after_name.split(' ').filter_map(|f| f.parse().ok()).collect();
    // Fields 14 and 15 of the whole line (utime, stime) are 12 and 13 after the name, minus
    // the state letter that does not parse.
    let ticks = fields[10] + fields[11];
    Duration::from_millis(ticks * 10)
}

/// The figures for the note, not a timed test: `cargo test -p wasmsched-tests --test docker
/// -- --ignored --nocapture overhead`.
#[test]
#[ignore = "takes a minute; prints the host's CPU use with 20 containers"]
fn overhead_of_twenty_containers_at_a_one_second_tick() {
    let (e, _serial) = trainer_engine_or_skip!();
    let label = test_label("overhead");
    let names: Vec<String> = (0..20).map(|i| format!("overhead-{i}")).collect();
    let _containers: Vec<_> = names
        .iter()
        .map(|n| {
            e.start_trainer(
                n,
                &[("test", &label)],
                &["--epochs", "100000", "--samples", "500", "--threads", "1"],
                Some(0.05),
            )
        })
        .collect();
    let mut docker = backend(&e.endpoint, &label);
    let config = r#"{"interval-s": 5}"#.to_string();
    let mut policy =
        Supervised::new(loaded("flowcon"), config, Default::default(), Fallback::KeepLimits, Quarantine::default());
    let mut jobs = 0;
    let count = |w: &World| {
        jobs = w.job_count();
        false
    };
    let mut driver = Until { policy: &mut policy, done: count, limit_ms: 60_000, ticks: 0 };
    let (cpu0, wall0) = (thread_cpu(), Instant::now());
    let summary = control::drive(&mut docker, &mut driver, runtime(), &LoopConfig::unbudgeted(Duration::from_secs(1)));
    let (cpu, wall) = (thread_cpu() - cpu0, wall0.elapsed());
    assert_eq!(jobs, 20);
    eprintln!(
        "20 containers, 1 s tick, {} ticks, {} decisions, {} actions applied: host CPU {cpu:.2?} in {wall:.1?} = {:.2} % of one core",
        summary.ticks,
        summary.decisions,
        summary.applied,
        100.0 * cpu.as_secs_f64() / wall.as_secs_f64(),
    );
}
