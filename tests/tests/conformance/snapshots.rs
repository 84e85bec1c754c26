//! `snapshots.json`: scripted worlds, each tick's delta as the host's encoder cuts it for one
//! instance (a fresh cursor, replaced by another fresh one where a case resyncs), and after
//! each delta the table a decoder must hold, read off the world itself. The host's own
//! decoder, the replay backend, reads every delta back from its JSON as a recording holds it
//! and must end up with the same table. Malformed deltas (a good delta, broken) carry the
//! host's reason for refusing them.

use serde_json::{Value, json};
use wasmsched::bindings::wit;
use wasmsched::playback::apply_delta;
use wasmsched::recording::{RecordedTick, check_snapshot};
use wasmsched::world::{Cursor, GpuSlot, JobId, NodeId, World, sample};

const GIB: u64 = 1 << 30;

/// Every case, as the committed file holds them.
pub fn vectors() -> Value {
    let cases = vec![
        jobs_come_run_report_and_go(),
        a_fresh_instance_resyncs(),
        a_node_whose_capacity_becomes_known(),
        records_with_several_metrics_and_missing_values(),
    ];
    let malformed = malformed();
    json!({
        "about": "Per-tick deltas exactly as the host's encoder (World::snapshot_for) produces them for \
                  one policy instance, and the table a decoder holds after each. See README.md.",
        "cases": cases.into_iter().chain(malformed).collect::<Vec<_>>(),
    })
}

/// A world being scripted, and the ticks cut from it so far.
struct Script {
    name: &'static str,
    world: World,
    cursor: Cursor,
    ticks: Vec<Value>,
    /// The host's replay backend, folding the same deltas while they are a recording's: one
    /// instance's, whose only resync is the first (a recorder's cursor is never replaced).
    replayed: Option<World>,
}

impl Script {
    fn new(name: &'static str, world: World) -> Self {
        Script { name, world, cursor: Cursor::fresh(), ticks: Vec::new(), replayed: Some(World::new()) }
    }

    /// The instance is called: the delta, and the table it leaves.
    fn tick(&mut self) {
        let delta = self.world.snapshot_for(&mut self.cursor);
        let expected = table(&self.world, &delta);
        let recorded = serde_json::to_value(&delta).expect("snapshots serialize");
        let read =
            read_back(&recorded).unwrap_or_else(|e| panic!("{}: the host cannot read its own delta: {e}", self.name));
        if let Some(replayed) = &mut self.replayed {
            apply_delta(replayed, &read);
            assert_eq!(
                table(replayed, &delta),
                expected,
                "{}, tick {}: the host's replay decodes the delta into another table",
                self.name,
                self.ticks.len() + 1
            );
        }
        self.ticks.push(json!({ "delta": recorded, "expect": { "table": expected } }));
    }

    /// The instance is replaced by a fresh one: its next delta is a resync.
    fn fresh_instance(&mut self) {
        self.cursor = Cursor::fresh();
        self.replayed = None;
    }

    fn done(self) -> Value {
        json!({ "name": self.name, "ticks": self.ticks })
    }
}

/// A delta read back as the replay backend reads a recording's line.
fn read_back(recorded: &Value) -> Result<wit::Snapshot, serde_json::Error> {
    let line = json!({ "tick": 1, "snapshot": recorded, "decision": null }).to_string();
    serde_json::from_str::<RecordedTick>(&line).map(|t| t.snapshot)
}

/// The table a decoder holds after `delta`: the world's nodes with their GPUs' use, and every
/// live job in handle order, running or queued, with its history.
fn table(world: &World, delta: &wit::Snapshot) -> Value {
    let gpus = world.snapshot_for(&mut Cursor::fresh()).gpus;
    let mut k = 0;
    let nodes: Vec<Value> = world
        .nodes()
        .iter()
        .map(|n| {
            let node_gpus: Vec<Value> = n
                .gpu_memory_bytes
                .iter()
                .map(|&memory| {
                    let g = json!({
                        "memory_bytes": memory,
                        "utilisation_percent": f64::from(gpus.utilisation_percent[k]),
                        "memory_used_bytes": gpus.memory_used_bytes[k],
                    });
                    k += 1;
                    g
                })
                .collect();
            json!({
                "name": n.name,
                "cpu_millicores": n.cpu_millicores,
                "memory_bytes": n.memory_bytes,
                "gpus": node_gpus,
            })
        })
        .collect();
    let jobs: Vec<Value> = world.all_jobs().map(|(spec, state)| job(world, spec, state, delta)).collect();
    json!({ "time_ms": world.time_ms(), "interval_ms": delta.interval_ms, "nodes": nodes, "jobs": jobs })
}

fn job(world: &World, spec: &wit::JobSpec, s: &wasmsched::world::JobState, delta: &wit::Snapshot) -> Value {
    let direction = |d: wit::Direction| match d {
        wit::Direction::HigherIsBetter => "higher-is-better",
        wit::Direction::LowerIsBetter => "lower-is-better",
    };
    let running = s.queued.is_none().then(|| {
        json!({
            "node": s.node,
            "gpus": s.gpus.iter().map(|g| [g.node, NodeId(g.index)]).collect::<Vec<_>>(),
            "cpu_limit_millicores": s.cpu_limit_millicores,
            "memory_limit_bytes": s.memory_limit_bytes,
            "cpu_used_millicores": s.cpu_used_millicores,
            "memory_used_bytes": s.memory_used_bytes,
            "gpu_share_percent": s.gpu_share_percent,
            "gpu_used_percent": f64::from(s.gpu_used_percent),
            "run_ms": s.run_ms,
            "gpu_ms": s.gpu_ms,
        })
    });
    let queued = s.queued.map(|reason| {
        json!({
            "reason": match reason {
                wit::WaitReason::NeverStarted => "never-started",
                wit::WaitReason::Preempted => "preempted",
            },
            "since_ms": s.since_ms,
            "run_ms": s.run_ms,
            "gpu_ms": s.gpu_ms,
        })
    });
    let history: Vec<_> = world.history(spec.handle).collect();
    let last = history.last().map(|r| json!({ "time_ms": r.time_ms, "epoch": r.epoch, "values": r.values }));
    json!({
        "handle": spec.handle,
        "name": spec.name,
        "model": spec.model,
        "kind": match spec.kind {
            wit::JobKind::Training => "training",
            wit::JobKind::Inference => "inference",
        },
        "metrics": spec.metrics.iter().map(|m| json!({ "name": m.name, "direction": direction(m.direction) })).collect::<Vec<_>>(),
        "gpus_asked": spec.gpus,
        "replicas": spec.replicas,
        "arrival_ms": spec.arrival_ms,
        "running": running,
        "queued": queued,
        "history": {
            "length": history.len(),
            "new": delta.progress.job.iter().filter(|&&j| j == spec.handle).count(),
            "epochs": history.iter().map(|r| r.epoch).collect::<Vec<_>>(),
            "last": last,
        },
    })
}

fn node(name: &str, cpu_millicores: u64, memory_gib: u64, gpus: usize) -> wit::Node {
    wit::Node {
        gpu_type: String::new(),
        name: name.into(),
        cpu_millicores,
        memory_bytes: memory_gib * GIB,
        gpu_memory_bytes: vec![16 * GIB; gpus],
        labels: Vec::new(),
        domains: Vec::new(),
    }
}

/// The `i`-th sample declaration (six models, both directions, tiers and targets on some),
/// asking for `gpus` GPUs in `replicas` pieces, arrived at `arrival_ms`.
fn spec(i: usize, gpus: u32, replicas: u32, arrival_ms: u64) -> wit::JobSpec {
    wit::JobSpec { gpus, replicas, arrival_ms, ..sample::job_spec(i) }
}

fn slots(gpus: &[(u32, u32)]) -> Vec<GpuSlot> {
    gpus.iter().map(|&(node, index)| GpuSlot { node: NodeId(node), index }).collect()
}

/// Run time and GPU time accrue, the clock moves on.
fn advance(t: &mut World, ms: u64) {
    t.set_time_ms(t.time_ms() + ms);
    t.accrue_service(ms);
}

fn jobs_come_run_report_and_go() -> Value {
    let mut t = World::new();
    t.add_node(node("n0", 16_000, 64, 2));
    t.add_node(node("n1", 8_000, 32, 4));
    t.set_gpu_use(NodeId(0), 0, 40.0, 4 * GIB);
    let a = t.add_job(spec(0, 1, 1, 0), NodeId(0));
    let b = t.enqueue_job(spec(1, 2, 1, 0));
    let c = t.add_job(spec(5, 0, 1, 0), NodeId(1));
    {
        let s = t.state_mut(a).unwrap();
        s.gpus = slots(&[(0, 0)]);
        (s.cpu_used_millicores, s.memory_used_bytes, s.gpu_used_percent) = (1500, 2 * GIB, 40.0);
        let s = t.state_mut(c).unwrap();
        (s.cpu_used_millicores, s.memory_used_bytes) = (500, GIB);
    }
    t.record(a, 1, vec![0.25]);
    let mut script = Script::new("jobs arrive, start, report, change limits, are preempted and leave", t);
    script.tick();

    let t = &mut script.world;
    advance(t, 30_000);
    assert!(t.start_job(b, NodeId(1), slots(&[(1, 0), (1, 1)])));
    {
        let s = t.state_mut(a).unwrap();
        (s.cpu_limit_millicores, s.memory_limit_bytes, s.gpu_share_percent) = (Some(4000), Some(8 * GIB), Some(50));
        (s.cpu_used_millicores, s.gpu_used_percent) = (3900, 62.5);
        let s = t.state_mut(b).unwrap();
        (s.cpu_used_millicores, s.memory_used_bytes, s.gpu_used_percent) = (2000, 6 * GIB, 87.5);
    }
    t.record_at(a, 20_000, 2, vec![0.5]);
    t.record(a, 3, vec![0.625]);
    t.record(c, 1, vec![12.5]);
    t.set_gpu_use(NodeId(1), 0, 62.5, 8 * GIB);
    t.set_gpu_use(NodeId(1), 1, 87.5, 8 * GIB);
    script.tick();

    let t = &mut script.world;
    advance(t, 30_000);
    assert!(t.requeue_job(a, wit::WaitReason::Preempted));
    assert!(t.remove_job(c));
    let d = t.enqueue_job(spec(2, 2, 2, t.time_ms()));
    assert!(t.start_job(d, NodeId(0), slots(&[(0, 0), (1, 2)])));
    let e = t.add_job(spec(3, 0, 1, t.time_ms()), NodeId(0));
    assert!(t.remove_job(e), "a job that came and went between two calls");
    t.state_mut(b).unwrap().cpu_limit_millicores = Some(2000);
    t.record(b, 1, vec![]);
    t.set_gpu_use(NodeId(0), 0, 12.25, 2 * GIB);
    script.tick();

    let t = &mut script.world;
    advance(t, 30_000);
    t.add_node(node("n2", 4_000, 8, 0));
    assert!(t.start_job(a, NodeId(2), Vec::new()));
    t.state_mut(b).unwrap().cpu_limit_millicores = None;
    t.record(d, 1, vec![0.75]);
    script.tick();

    advance(&mut script.world, 30_000);
    script.tick();
    script.done()
}

fn a_fresh_instance_resyncs() -> Value {
    let mut t = World::new();
    t.add_node(node("n0", 16_000, 64, 1));
    let jobs: Vec<JobId> = (0..3).map(|i| t.add_job(spec(i, 0, 1, 0), NodeId(0))).collect();
    for (i, &j) in jobs.iter().enumerate() {
        t.record(j, 1, vec![0.125 * (i + 1) as f64]);
    }
    let mut script = Script::new("a fresh instance gets a resync: every live job, its kept history, the nodes", t);
    script.tick();

    let t = &mut script.world;
    advance(t, 30_000);
    assert!(t.remove_job(jobs[1]));
    let late = t.enqueue_job(spec(3, 1, 1, t.time_ms()));
    t.record(jobs[0], 2, vec![0.5]);
    script.fresh_instance();
    script.tick();

    let t = &mut script.world;
    advance(t, 30_000);
    t.record(jobs[2], 2, vec![0.875]);
    assert!(t.start_job(late, NodeId(0), slots(&[(0, 0)])));
    script.tick();
    script.done()
}

fn a_node_whose_capacity_becomes_known() -> Value {
    let mut t = World::new();
    t.add_node(node("n0", 0, 0, 0));
    t.add_node(node("n1", 8_000, 32, 1));
    t.set_gpu_use(NodeId(1), 0, 25.0, GIB);
    let a = t.add_job(spec(4, 0, 1, 0), NodeId(0));
    let mut script = Script::new("a node whose capacity becomes known is sent again, other GPUs keep their use", t);
    script.tick();

    let t = &mut script.world;
    advance(t, 30_000);
    assert!(t.set_node(NodeId(0), node("n0", 16_000, 64, 2)));
    t.set_gpu_use(NodeId(0), 1, 87.5, 3 * GIB);
    t.state_mut(a).unwrap().memory_limit_bytes = Some(4 * GIB);
    script.tick();

    let t = &mut script.world;
    advance(t, 30_000);
    let same = t.nodes()[0].clone();
    assert!(t.set_node(NodeId(0), same), "the same node again: not sent");
    t.state_mut(a).unwrap().memory_limit_bytes = None;
    script.tick();
    script.done()
}

fn records_with_several_metrics_and_missing_values() -> Value {
    let mut t = World::new();
    t.add_node(node("n0", 16_000, 64, 0));
    let metric = |name: &str, direction| wit::MetricSpec { name: name.into(), direction };
    let mut many = spec(0, 0, 1, 0);
    many.metrics = vec![
        metric("accuracy", wit::Direction::HigherIsBetter),
        metric("loss", wit::Direction::LowerIsBetter),
        metric("top5", wit::Direction::HigherIsBetter),
        metric("latency-ms", wit::Direction::LowerIsBetter),
    ];
    let a = t.add_job(many, NodeId(0));
    let b = t.add_job(spec(1, 0, 1, 0), NodeId(0));
    t.record(a, 1, vec![0.5, f64::NAN, 0.75, 12.0]);
    t.record(b, 1, vec![0.375]);
    let mut script = Script::new("records carry their values in the order of the job's metrics, NaN where missing", t);
    script.tick();

    let t = &mut script.world;
    advance(t, 30_000);
    t.record(a, 2, vec![f64::NAN, 0.125]);
    t.record(b, 2, vec![0.25]);
    t.record(a, 3, vec![0.625, 0.0625, 0.875, 11.5]);
    script.tick();
    script.done()
}

/// How a good delta is broken.
type Break = fn(&mut wit::Snapshot);

/// One malformed delta per way a host bug could show, each a fresh instance's first delta of
/// a small world, broken; the host's reader refuses each (its reason is kept).
fn malformed() -> Vec<Value> {
    let world = || {
        let mut t = World::new();
        t.add_node(node("n0", 16_000, 64, 2));
        let a = t.add_job(spec(0, 1, 1, 0), NodeId(0));
        t.state_mut(a).unwrap().gpus = slots(&[(0, 1)]);
        t.enqueue_job(spec(1, 1, 1, 0));
        t.record(a, 1, vec![0.5]);
        t
    };
    let breaks: [(&str, Break); 7] = [
        ("job-state columns of unequal lengths", |s| {
            s.jobs.cpu_used_millicores.pop();
        }),
        ("queue columns of unequal lengths", |s| {
            s.queue.since_ms.pop();
        }),
        ("progress columns of unequal lengths", |s| {
            s.progress.epoch.pop();
        }),
        ("held GPUs that do not add up to the jobs' GPU counts", |s| {
            s.jobs.gpu_count[0] = 2;
        }),
        ("progress values that do not add up to the value counts", |s| {
            s.progress.values.push(0.5);
        }),
        ("GPU columns that do not match the nodes' GPUs", |s| {
            s.gpus.utilisation_percent.pop();
            s.gpus.memory_used_bytes.pop();
        }),
        ("a job handle past the last one a host gives", |s| {
            let last = s.added.last_mut().expect("the world has jobs");
            let old = std::mem::replace(&mut last.handle, JobId(u32::MAX));
            for h in s.queue.handle.iter_mut().chain(s.jobs.handle.iter_mut()).filter(|h| **h == old) {
                *h = JobId(u32::MAX);
            }
        }),
    ];
    breaks
        .into_iter()
        .map(|(name, break_it)| {
            let mut delta = world().snapshot_for(&mut Cursor::fresh());
            check_snapshot(&delta).expect("the delta is good before it is broken");
            break_it(&mut delta);
            let reason = check_snapshot(&delta).expect_err(name);
            let tick = json!({ "delta": delta, "expect": { "refused": reason } });
            json!({ "name": format!("malformed: {name}"), "ticks": [tick] })
        })
        .collect()
}
