//! `checks.json`: small worlds, a decision on each, and what the host's validator
//! (`wasmsched::validate::check`) makes of every action: accepted, or refused with the
//! [`Problem`]'s text; or the whole decision refused for its size. Each case carries its world
//! twice: in a neutral form to read, and as the resync delta the host's encoder cuts from it,
//! which is what an SDK decodes before it checks.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use wasmsched::bindings::wit::{self, ActionKind};
use wasmsched::validate::{self, Problem};
use wasmsched::world::{Cursor, GpuSlot, JobId, NodeId, World, sample};
use wasmsched_rules::check::Checker;

const GIB: u64 = 1 << 30;

/// Every [`Problem`], by the name [`variant`] gives it.
pub const PROBLEMS: [&str; 28] = [
    "NoSuchJob",
    "AlreadyMoved",
    "Queued",
    "CpuBelowMinimum",
    "CpuAboveNode",
    "MemoryBelowMinimum",
    "MemoryAboveNode",
    "NoSuchNode",
    "AlreadyOn",
    "SpansNodes",
    "TooFewFreeGpus",
    "NodeFull",
    "NoSuchGpu",
    "ShareOutOfRange",
    "PlaceRunning",
    "NoNodeNamed",
    "TooManyNodes",
    "NodeTwice",
    "TooManyGpus",
    "NotWholeReplicas",
    "GpuTwice",
    "GpuHeld",
    "WrongGpuCount",
    "NodeDown",
    "CountNotAllowed",
    "BatchOutOfRange",
    "EmptyEntry",
    "OverTenantLimit",
];

/// A problem's variant; a new variant does not compile here until it is named (and then the
/// coverage test asks for a vector of it).
fn variant(p: &Problem) -> &'static str {
    use Problem::*;
    match p {
        NoSuchJob { .. } => "NoSuchJob",
        AlreadyMoved { .. } => "AlreadyMoved",
        Queued { .. } => "Queued",
        CpuBelowMinimum { .. } => "CpuBelowMinimum",
        CpuAboveNode { .. } => "CpuAboveNode",
        MemoryBelowMinimum { .. } => "MemoryBelowMinimum",
        MemoryAboveNode { .. } => "MemoryAboveNode",
        NoSuchNode { .. } => "NoSuchNode",
        AlreadyOn { .. } => "AlreadyOn",
        SpansNodes { .. } => "SpansNodes",
        TooFewFreeGpus { .. } => "TooFewFreeGpus",
        NodeFull { .. } => "NodeFull",
        NoSuchGpu { .. } => "NoSuchGpu",
        ShareOutOfRange { .. } => "ShareOutOfRange",
        PlaceRunning { .. } => "PlaceRunning",
        NoNodeNamed { .. } => "NoNodeNamed",
        TooManyNodes { .. } => "TooManyNodes",
        NodeTwice { .. } => "NodeTwice",
        TooManyGpus { .. } => "TooManyGpus",
        NotWholeReplicas { .. } => "NotWholeReplicas",
        GpuTwice { .. } => "GpuTwice",
        GpuHeld { .. } => "GpuHeld",
        WrongGpuCount { .. } => "WrongGpuCount",
        NodeDown { .. } => "NodeDown",
        CountNotAllowed { .. } => "CountNotAllowed",
        BatchOutOfRange { .. } => "BatchOutOfRange",
        EmptyEntry { .. } => "EmptyEntry",
        OverTenantLimit(_) => "OverTenantLimit",
    }
}

/// The vectors, and the problems they meet.
pub struct Generated {
    pub json: Value,
    pub problems: BTreeSet<&'static str>,
}

/// Every case.
pub fn generate() -> Generated {
    let mut problems = BTreeSet::new();
    let mut cases = Vec::new();
    let all = cases_on_the_cluster().into_iter().chain(elastic_cases()).chain(tenant_cases()).chain(size_cases());
    for (name, world, decision) in all {
        cases.push(case(name, &world, decision, &mut problems));
    }
    let json = json!({
        "about": "Decisions on small worlds and what the host's validator (wasmsched::validate::check) makes of \
                  each action. See README.md.",
        "cases": cases,
    });
    Generated { json, problems }
}

/// A node: its name, CPU, memory and GPU count.
struct NodeDecl(&'static str, u64, u64, u32);

/// A job: the GPUs it asks for, in how many replicas, where it runs (None: queued), and for an
/// elastic job its other GPU counts and its batch sizes (min, max).
struct JobDecl {
    gpus: u32,
    replicas: u32,
    running: Option<Running>,
    scaling: Option<(Vec<u32>, u32, u32)>,
    tenant: &'static str,
}

/// Where a running job runs: its node, the GPUs it holds (node, index), the memory it uses.
struct Running(u32, Vec<(u32, u32)>, u64);

/// Nodes, jobs, and the nodes that cannot take work.
struct Cluster {
    nodes: Vec<NodeDecl>,
    jobs: Vec<JobDecl>,
    down: Vec<u32>,
    /// The declared tenants (name, quota, borrowing limit, cohort).
    tenants: Vec<(&'static str, Option<u32>, Option<u32>, &'static str)>,
}

fn queued(gpus: u32, replicas: u32) -> JobDecl {
    JobDecl { gpus, replicas, running: None, scaling: None, tenant: "default" }
}

fn running(gpus: u32, replicas: u32, node: u32, holds: &[(u32, u32)], memory_gib: u64) -> JobDecl {
    let running = Some(Running(node, holds.to_vec(), memory_gib * GIB));
    JobDecl { gpus, replicas, running, scaling: None, tenant: "default" }
}

impl JobDecl {
    /// The same job, elastic: it runs on any of `counts` GPUs (its own among them) at a batch
    /// size in `min..=max`.
    fn elastic(self, counts: &[u32], min: u32, max: u32) -> Self {
        JobDecl { scaling: Some((counts.to_vec(), min, max)), ..self }
    }

    /// The same job, of tenant `tenant`.
    fn of(self, tenant: &'static str) -> Self {
        JobDecl { tenant, ..self }
    }

    /// Its scaling as the host settles it: the counts ascending, its own among them.
    fn scaling(&self) -> wit::Scaling {
        let (counts, min, max) = self.scaling.clone().unwrap_or_default();
        let counts: BTreeSet<u32> = counts.into_iter().chain([self.gpus]).collect();
        wit::Scaling { gpu_counts: counts.into_iter().collect(), batch_size_min: min, batch_size_max: max }
    }
}

impl Cluster {
    /// The world as the host's telemetry: jobs take handles 0, 1, 2… in order.
    fn to_world(&self) -> World {
        let mut t = World::new();
        for &NodeDecl(name, cpu_millicores, memory_gib, gpus) in &self.nodes {
            t.add_node(wit::Node {
                gpu_type: String::new(),
                name: name.into(),
                cpu_millicores,
                memory_bytes: memory_gib * GIB,
                gpu_memory_bytes: vec![16 * GIB; gpus as usize],
                labels: Vec::new(),
                domains: Vec::new(),
            });
        }
        for &node in &self.down {
            assert!(t.set_node_down(NodeId(node), true), "node {node} is declared");
        }
        t.set_tenants(self.tenants.iter().map(tenant).collect());
        for (i, j) in self.jobs.iter().enumerate() {
            let (gpus, replicas, scaling, tenant) = (j.gpus, j.replicas, j.scaling(), j.tenant.to_string());
            let spec = wit::JobSpec { gpus, replicas, scaling, tenant, ..sample::job_spec(i) };
            let handle = t.enqueue_job(spec);
            if let Some(Running(node, holds, memory)) = &j.running {
                let gpus = holds.iter().map(|&(node, index)| GpuSlot { node: NodeId(node), index }).collect();
                assert!(t.start_job(handle, NodeId(*node), gpus));
                t.state_mut(handle).expect("just started").memory_used_bytes = *memory;
            }
        }
        t
    }

    /// The world in the vectors' neutral form.
    fn neutral(&self) -> Value {
        let nodes: Vec<Value> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, &NodeDecl(name, cpu, memory_gib, gpus))| {
                let down = self.down.contains(&(i as u32));
                json!({ "name": name, "cpu_millicores": cpu, "memory_bytes": memory_gib * GIB, "gpus": gpus, "down": down })
            })
            .collect();
        let jobs: Vec<Value> = self
            .jobs
            .iter()
            .enumerate()
            .map(|(handle, j)| {
                let (node, holds, memory) = match &j.running {
                    Some(Running(node, holds, memory)) => (json!(node), holds.clone(), *memory),
                    None => (Value::Null, Vec::new(), 0),
                };
                let holds: Vec<[u32; 2]> = holds.iter().map(|&(n, i)| [n, i]).collect();
                let scaling = j.scaling();
                json!({
                    "handle": handle,
                    "gpus": j.gpus,
                    "replicas": j.replicas,
                    "node": node,
                    "holds": holds,
                    "memory_used_bytes": memory,
                    "gpu_counts": scaling.gpu_counts,
                    "batch_sizes": [scaling.batch_size_min, scaling.batch_size_max],
                    "tenant": j.tenant,
                })
            })
            .collect();
        // Every tenant the world has: those declared, then those jobs name.
        let tenants: Vec<Value> = self
            .to_world()
            .tenants()
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "quota_gpus": t.quota_gpus,
                    "borrowing_limit_gpus": t.borrowing_limit_gpus,
                    "cohort": t.cohort,
                })
            })
            .collect();
        json!({ "nodes": nodes, "jobs": jobs, "tenants": tenants })
    }
}

/// One case: the host's verdict on each action (each action's reason is its index, so a
/// verdict finds its action), checked again with the rules' own checker for the variant.
fn case(name: &str, world: &Cluster, decision: Vec<Value>, problems: &mut BTreeSet<&'static str>) -> Value {
    let t = world.to_world();
    let actions: Vec<wit::Action> = decision
        .iter()
        .enumerate()
        .map(|(i, a)| wit::Action {
            job: JobId(a["job"].as_u64().expect("a job") as u32),
            kind: kind(a),
            reason: i.to_string(),
        })
        .collect();
    let checked =
        validate::check(wit::Decision { actions: actions.clone(), next_call_ms: None, pending: Vec::new() }, &t);
    let (outcomes, whole) = match checked {
        Err(oversized) => (Vec::new(), Value::String(oversized.to_string())),
        Ok(checked) => {
            let mut outcomes = vec![Value::Null; actions.len()];
            for a in &checked.accepted {
                outcomes[a.reason.parse::<usize>().expect("our index")] = json!("accepted");
            }
            for r in &checked.rejected {
                outcomes[r.action.reason.parse::<usize>().expect("our index")] = json!(r.reason);
            }
            let mut checker = Checker::new(t.gpu_book()).with_tenants(t.ledger());
            let seen = validate::Seen::new(&t);
            for (a, outcome) in actions.iter().zip(&outcomes) {
                match checker.check(&seen, a.job, &validate::act(&a.kind)) {
                    Ok(()) => assert_eq!(outcome, "accepted", "{name}: {a:?}"),
                    Err(p) => {
                        assert_eq!(outcome.as_str(), Some(p.to_string().as_str()), "{name}: {a:?}");
                        problems.insert(variant(&p));
                    }
                }
            }
            (outcomes, Value::Null)
        }
    };
    json!({
        "name": name,
        "world": world.neutral(),
        "snapshot": t.snapshot_for(&mut Cursor::fresh()),
        "decision": decision,
        "outcomes": outcomes,
        "refused_whole": whole,
    })
}

/// A declared tenant as the contract's.
fn tenant(&(name, quota, borrowing, cohort): &(&str, Option<u32>, Option<u32>, &str)) -> wit::Tenant {
    wit::Tenant {
        name: name.into(),
        weight: 1.0,
        quota_gpus: quota,
        borrowing_limit_gpus: borrowing,
        cohort: cohort.into(),
    }
}

/// A neutral action as the contract's.
fn kind(a: &Value) -> ActionKind {
    let u64_of = |key: &str| a[key].as_u64();
    let u32_of = |key: &str| a[key].as_u64().expect(key) as u32;
    match a["kind"].as_str().expect("a kind") {
        "set-cpu" => ActionKind::SetCpu(u64_of("millicores")),
        "set-memory" => ActionKind::SetMemory(u64_of("bytes")),
        "migrate" => ActionKind::Migrate(NodeId(u32_of("node"))),
        "deliver" => ActionKind::Deliver,
        "stop" => ActionKind::Stop,
        "set-gpu-share" => {
            ActionKind::SetGpuShare(wit::GpuShare { gpu: u32_of("gpu"), percent: u32_of("percent") as u8 })
        }
        "place" => ActionKind::Place(placement(a)),
        "preempt" => ActionKind::Preempt,
        "resize" => ActionKind::Resize(wit::Resize {
            placement: placement(a),
            batch_size: a["batch_size"].as_u64().map(|b| b as u32),
        }),
        other => panic!("no action kind {other}"),
    }
}

/// A neutral place's or resize's `nodes` and `share` as the contract's placement.
fn placement(a: &Value) -> wit::Placement {
    wit::Placement {
        nodes: a["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .map(|n| wit::NodePlacement {
                node: NodeId(n["node"].as_u64().expect("node") as u32),
                gpus: n["gpus"].as_array().expect("gpus").iter().map(|g| g.as_u64().expect("a GPU") as u32).collect(),
            })
            .collect(),
        share: a["share"].as_bool().expect("share"),
    }
}

fn set_cpu(job: u32, millicores: Option<u64>) -> Value {
    json!({ "job": job, "kind": "set-cpu", "millicores": millicores })
}

fn set_memory(job: u32, bytes: Option<u64>) -> Value {
    json!({ "job": job, "kind": "set-memory", "bytes": bytes })
}

fn migrate(job: u32, node: u32) -> Value {
    json!({ "job": job, "kind": "migrate", "node": node })
}

fn deliver(job: u32) -> Value {
    json!({ "job": job, "kind": "deliver" })
}

fn stop(job: u32) -> Value {
    json!({ "job": job, "kind": "stop" })
}

fn preempt(job: u32) -> Value {
    json!({ "job": job, "kind": "preempt" })
}

fn share(job: u32, gpu: u32, percent: u32) -> Value {
    json!({ "job": job, "kind": "set-gpu-share", "gpu": gpu, "percent": percent })
}

fn place(job: u32, nodes: &[(u32, &[u32])], share: bool) -> Value {
    let nodes: Vec<Value> = nodes.iter().map(|(node, gpus)| json!({ "node": node, "gpus": gpus })).collect();
    json!({ "job": job, "kind": "place", "nodes": nodes, "share": share })
}

/// A resize, as the SDKs' builders make it (not shared).
fn resize(job: u32, nodes: &[(u32, &[u32])], batch_size: Option<u32>) -> Value {
    let nodes: Vec<Value> = nodes.iter().map(|(node, gpus)| json!({ "node": node, "gpus": gpus })).collect();
    json!({ "job": job, "kind": "resize", "nodes": nodes, "share": false, "batch_size": batch_size })
}

/// Three nodes (n0: 8 GPUs, n1: 6 GPUs, n2: no GPU and little memory) and eleven jobs:
///
/// | job | asks | state |
/// |---|---|---|
/// | 0 | 1 GPU | runs on n0, holds n0's GPU 0 (shared with job 9), 8 GiB |
/// | 1 | 2 GPUs in 2 replicas | queued |
/// | 2 | 1 GPU | queued |
/// | 3 | 4 GPUs in 2 replicas | runs over n0 (GPUs 1, 2) and n1 (GPUs 0, 1), 4 GiB |
/// | 4 | no GPU | runs on n2, 6 GiB |
/// | 5 | 3 GPUs in 0 replicas (read as 1) | queued |
/// | 6 | 2 GPUs | runs on n1, holds GPUs 2 and 3, 20 GiB |
/// | 7 | no GPU | runs on n0, 4 GiB |
/// | 8 | 4 GPUs in 2 replicas | queued |
/// | 9 | 1 GPU | runs on n0, holds GPU 0 with job 0, 1 GiB |
/// | 10 | no GPU | queued |
///
/// Free: n0's GPUs 3 to 7, n1's GPUs 4 and 5.
fn cluster() -> Cluster {
    Cluster {
        nodes: vec![NodeDecl("n0", 16_000, 64, 8), NodeDecl("n1", 8_000, 32, 6), NodeDecl("n2", 4_000, 8, 0)],
        jobs: vec![
            running(1, 1, 0, &[(0, 0)], 8),
            queued(2, 2),
            queued(1, 1),
            running(4, 2, 0, &[(0, 1), (0, 2), (1, 0), (1, 1)], 4),
            running(0, 1, 2, &[], 6),
            queued(3, 0),
            running(2, 1, 1, &[(1, 2), (1, 3)], 20),
            running(0, 1, 0, &[], 4),
            queued(4, 2),
            running(1, 1, 0, &[(0, 0)], 1),
            queued(0, 1),
        ],
        down: Vec::new(),
        tenants: Vec::new(),
    }
}

/// Contract 0.3.0's world: three nodes (n0: 8 GPUs, n1: 4 GPUs, n2: 4 GPUs and cannot take
/// work) and six jobs:
///
/// | job | asks | scaling | state |
/// |---|---|---|---|
/// | 0 | 2 GPUs | elastic: 1, 2 or 4 GPUs, batch 128–1024 | runs on n0, holds GPUs 0 and 1, 4 GiB |
/// | 1 | 1 GPU | rigid | runs on n0, holds GPU 2, 2 GiB |
/// | 2 | 2 GPUs | elastic: 2, 4 or 8 GPUs, batch 32–512 | queued |
/// | 3 | 1 GPU | rigid | queued |
/// | 4 | no GPU | rigid | runs on n1, 1 GiB |
/// | 5 | 1 GPU | rigid | runs on n2 (down: its jobs still run), holds GPU 0, 1 GiB |
///
/// Free: n0's GPUs 3 to 7, n1's GPUs 0 to 3, n2's GPUs 1 to 3 (but n2 takes no work).
fn elastic_cluster() -> Cluster {
    Cluster {
        nodes: vec![NodeDecl("n0", 16_000, 64, 8), NodeDecl("n1", 8_000, 32, 4), NodeDecl("n2", 8_000, 32, 4)],
        jobs: vec![
            running(2, 1, 0, &[(0, 0), (0, 1)], 4).elastic(&[1, 2, 4], 128, 1024),
            running(1, 1, 0, &[(0, 2)], 2),
            queued(2, 1).elastic(&[2, 4, 8], 32, 512),
            queued(1, 1),
            running(0, 1, 1, &[], 1),
            running(1, 1, 2, &[(2, 0)], 1),
        ],
        down: vec![2],
        tenants: Vec::new(),
    }
}

fn elastic_cases() -> Vec<(&'static str, Cluster, Vec<Value>)> {
    vec![
        (
            "a node that cannot take work gets no placement, migration or resize; its jobs still run",
            elastic_cluster(),
            vec![
                place(3, &[(2, &[1])], false),
                migrate(4, 2),
                resize(0, &[(2, &[1, 2])], None),
                set_cpu(5, Some(1000)),
                place(3, &[(1, &[0])], false),
            ],
        ),
        (
            "a resize stays within the job's GPU counts and batch sizes, and names no node without a GPU",
            elastic_cluster(),
            vec![
                resize(0, &[(0, &[0, 1, 2])], None),
                resize(0, &[(0, &[0, 1])], Some(64)),
                resize(0, &[(0, &[0, 1])], Some(2048)),
                resize(1, &[(0, &[2])], Some(32)),
                resize(1, &[(0, &[2, 3])], None),
                resize(0, &[(0, &[0, 1]), (1, &[])], Some(256)),
                resize(0, &[(0, &[0, 1, 3, 4])], Some(256)),
                resize(0, &[(0, &[0])], None),
            ],
        ),
        (
            "a resize gives up its GPUs and takes new ones: a later placement gets the first, not the second",
            elastic_cluster(),
            vec![
                resize(0, &[(1, &[0, 1])], Some(512)),
                place(3, &[(0, &[0])], false),
                place(2, &[(1, &[0]), (0, &[1, 3, 4])], false),
            ],
        ),
        (
            "a queued elastic job starts on one of its counts, spread with a GPU on every node named",
            elastic_cluster(),
            vec![place(2, &[(0, &[3, 4, 5])], false), place(2, &[(0, &[3, 4, 5, 6]), (1, &[])], false)],
        ),
    ]
}

fn cases_on_the_cluster() -> Vec<(&'static str, Cluster, Vec<Value>)> {
    let mib6 = 6 << 20;
    vec![
        (
            "limits within the node pass, below the minimum or above the node are refused",
            cluster(),
            vec![
                set_cpu(0, Some(1500)),
                set_cpu(0, None),
                set_cpu(0, Some(9)),
                set_cpu(0, Some(10)),
                set_cpu(0, Some(16_000)),
                set_cpu(0, Some(16_001)),
                set_memory(0, Some(mib6 - 1)),
                set_memory(0, Some(mib6)),
                set_memory(0, Some(64 * GIB + 1)),
                set_memory(0, None),
                set_cpu(7, Some(500)),
                deliver(0),
                set_cpu(99, Some(1000)),
                deliver(11),
            ],
        ),
        (
            "a queued job takes only a place or a stop, and is not acted on again once stopped",
            cluster(),
            vec![
                set_cpu(2, Some(1000)),
                set_memory(2, None),
                migrate(2, 1),
                deliver(2),
                share(2, 0, 50),
                preempt(2),
                stop(2),
                place(2, &[(0, &[3])], false),
                stop(2),
            ],
        ),
        (
            "a migration needs another existing node, one node held, free GPUs and memory",
            cluster(),
            vec![
                migrate(0, 7),
                migrate(0, 0),
                migrate(3, 2),
                migrate(6, 2),
                migrate(7, 2),
                migrate(4, 1),
                migrate(4, 0),
                migrate(0, 1),
                migrate(6, 0),
            ],
        ),
        (
            "a GPU share names a GPU of the job's node and 1 to 100 percent",
            cluster(),
            vec![share(0, 0, 50), share(0, 8, 50), share(0, 0, 0), share(0, 0, 101), share(0, 7, 100), share(4, 0, 10)],
        ),
        (
            "every way a placement is refused: no node, too many nodes, spread pieces",
            cluster(),
            vec![
                place(1, &[], false),
                place(2, &[(0, &[3]), (2, &[])], false),
                place(5, &[(0, &[3, 4]), (1, &[4])], false),
                place(1, &[(5, &[0, 1])], false),
                place(1, &[(0, &[3]), (0, &[4])], false),
            ],
        ),
        (
            "every way a placement is refused: GPUs too many, twice, held, missing or miscounted",
            cluster(),
            vec![
                place(8, &[(1, &[0, 1, 2, 3, 4, 5, 0])], false),
                place(8, &[(0, &[3, 4, 5]), (1, &[4])], false),
                place(1, &[(0, &[3]), (2, &[])], false),
                place(2, &[(0, &[3, 3])], false),
                place(2, &[(0, &[1])], false),
            ],
        ),
        (
            "every way a placement is refused: a missing GPU, the wrong count, a running or unknown job",
            cluster(),
            vec![
                place(2, &[(0, &[8])], false),
                place(2, &[(0, &[3, 4])], false),
                place(0, &[(0, &[3])], false),
                place(4, &[(2, &[])], false),
                place(99, &[(0, &[3])], false),
            ],
        ),
        (
            "placements that pass take their GPUs: a later placement on them is refused",
            cluster(),
            vec![
                place(8, &[(0, &[3, 4]), (1, &[4, 5])], false),
                place(1, &[(0, &[5]), (1, &[4])], false),
                place(1, &[(0, &[5, 6])], false),
                place(5, &[(0, &[5, 6, 7])], false),
                place(5, &[(0, &[5, 6, 7])], true),
            ],
        ),
        (
            "a placement with share takes a GPU another placement of the decision holds",
            cluster(),
            vec![
                place(10, &[(2, &[])], false),
                place(2, &[(0, &[7])], false),
                place(2, &[(0, &[7])], true),
                place(2, &[(0, &[7])], true),
            ],
        ),
        (
            "a preemption frees GPUs for a later placement, and the preempted job is not acted on again",
            cluster(),
            vec![
                place(2, &[(1, &[2])], false),
                preempt(6),
                place(2, &[(1, &[2])], false),
                place(8, &[(1, &[3, 4]), (0, &[3, 4])], false),
                place(6, &[(1, &[5])], false),
                set_cpu(6, Some(1000)),
                preempt(6),
                stop(6),
                preempt(10),
            ],
        ),
        (
            "a shared GPU is free only when every holder let go; a placement with share takes a held GPU",
            cluster(),
            vec![
                place(2, &[(0, &[0])], false),
                place(2, &[(0, &[0])], true),
                preempt(0),
                place(1, &[(0, &[0]), (1, &[4])], false),
                stop(9),
                place(1, &[(0, &[0]), (1, &[4])], false),
                place(1, &[(0, &[0]), (1, &[4])], true),
            ],
        ),
        (
            "a stop frees GPUs, and a stopped job is not acted on again",
            cluster(),
            vec![
                stop(0),
                stop(9),
                place(2, &[(0, &[0])], false),
                deliver(0),
                set_memory(9, Some(GIB)),
                migrate(0, 1),
                place(0, &[(0, &[0])], false),
            ],
        ),
    ]
}

/// One node and one job: a decision may hold `64 + 8 × jobs` actions, 72 here. On the
/// cluster (five queued jobs, three nodes, at most eight GPUs on one): no more placements than
/// queued jobs, node entries than nodes, GPUs on one entry than any node has.
/// Tenants' limits: two nodes of four GPUs; tenant a has a quota of 2 and no cohort; b (quota
/// 2, borrowing at most 1) and c (quota 2) lend each other in cohort "lab"; jobs of no declared
/// tenant are default's (no quota):
///
/// | job | tenant | asks | state |
/// |---|---|---|---|
/// | 0 | a | 1 GPU | runs on n0, holds GPU 0 |
/// | 1 | a | 2 GPUs | queued |
/// | 2 | b | 1 GPU | runs on n0, holds GPU 1 |
/// | 3 | b | 3 GPUs | queued |
/// | 4 | c | 2 GPUs | queued |
/// | 5 | c | 2 GPUs | queued |
/// | 6 | default | 4 GPUs | queued |
fn tenant_cluster() -> Cluster {
    Cluster {
        nodes: vec![NodeDecl("n0", 16_000, 64, 4), NodeDecl("n1", 16_000, 64, 4)],
        jobs: vec![
            running(1, 1, 0, &[(0, 0)], 1).of("a"),
            queued(2, 1).of("a"),
            running(1, 1, 0, &[(0, 1)], 1).of("b"),
            queued(3, 1).of("b"),
            queued(2, 1).of("c"),
            queued(2, 1).of("c"),
            queued(4, 1),
        ],
        down: Vec::new(),
        tenants: vec![("a", Some(2), None, ""), ("b", Some(2), Some(1), "lab"), ("c", Some(2), None, "lab")],
    }
}

fn tenant_cases() -> Vec<(&'static str, Cluster, Vec<Value>)> {
    vec![
        (
            "a placement past its tenant's quota is refused, and one of the tenant's own preemptions makes room",
            tenant_cluster(),
            vec![place(1, &[(1, &[0, 1])], false), preempt(0), place(1, &[(1, &[0, 1])], false)],
        ),
        (
            "a tenant borrows within its cohort up to its borrowing limit and the cohort's idle quota",
            tenant_cluster(),
            vec![
                place(3, &[(1, &[0, 1, 2])], false),
                place(4, &[(0, &[2, 3])], false),
                place(5, &[(1, &[0, 1])], false),
                place(6, &[(1, &[0, 1, 2, 3])], true),
            ],
        ),
    ]
}

fn size_cases() -> Vec<(&'static str, Cluster, Vec<Value>)> {
    let small = || Cluster {
        nodes: vec![NodeDecl("n0", 4_000, 16, 1)],
        jobs: vec![running(1, 1, 0, &[(0, 0)], 1)],
        down: Vec::new(),
        tenants: Vec::new(),
    };
    let queued = [1, 2, 5, 8, 10];
    vec![
        ("a decision of as many actions as the limit is checked action by action", small(), vec![deliver(0); 72]),
        ("a decision of more actions than the limit is refused whole", small(), vec![deliver(0); 73]),
        (
            "a decision placing more jobs than are queued is refused whole",
            cluster(),
            queued.iter().chain(&[2]).map(|&j| place(j, &[(0, &[3])], false)).collect(),
        ),
        (
            "a placement naming more node entries than there are nodes is refused whole",
            cluster(),
            vec![stop(7), place(1, &[(0, &[3]), (1, &[4]), (2, &[]), (0, &[5])], false)],
        ),
        (
            "a node entry naming more GPUs than any node has is refused whole",
            cluster(),
            vec![place(8, &[(0, &[3, 4, 5, 6, 7, 0, 1, 2, 3])], false)],
        ),
        (
            "a resize naming more node entries than there are nodes is refused whole",
            elastic_cluster(),
            vec![resize(0, &[(0, &[3]), (1, &[0]), (0, &[4]), (1, &[1])], None)],
        ),
    ]
}
