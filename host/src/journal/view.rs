//! The operator page's views of the journal and the status, as JSON: pure functions, so
//! that what the page costs is measured without a server (`cli/benches/page.rs`). Every list
//! is paged or bounded: a view's size does not grow with the cluster beyond one page of rows.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use wasmsched_core::declare::NAMESPACE_LABEL;
use wasmsched_core::world::{JobId, NodeId, World};

use super::{Decision, Entries, Journal, Outcome, tenant_name};
use crate::status::Status;

/// Rows a page of a list has unless asked otherwise, and at most.
pub const PAGE_ROWS: usize = 50;
/// The most rows a page of a list may have.
pub const MAX_ROWS: usize = 500;

/// A page of a list: `offset` and `limit` (at most [`MAX_ROWS`]).
#[derive(Debug, Default, Deserialize)]
pub struct Paging {
    /// Rows to skip.
    #[serde(default)]
    pub offset: usize,
    /// Rows to give ([`PAGE_ROWS`] unless said; [`MAX_ROWS`] at most).
    pub limit: Option<usize>,
}

impl Paging {
    fn take<T>(&self, rows: impl Iterator<Item = T>) -> Vec<T> {
        rows.skip(self.offset).take(self.limit.unwrap_or(PAGE_ROWS).min(MAX_ROWS)).collect()
    }
}

/// The journal's world, or an empty one before the first observation.
fn world_of(e: &Entries) -> Arc<World> {
    e.world.clone().unwrap_or_default()
}

/// `/api/overview`: the status, the nodes by GPU type and a page of them, the disruption
/// budget left, and whether actions are offered (the host has a token).
pub fn overview(status: &Status, journal: &Journal, paging: &Paging, actions: bool) -> Value {
    let (world, budget) = {
        let e = journal.read();
        (world_of(&e), e.budget)
    };
    let used = status.disruptions_in_window;
    let mut held = vec![0u32; world.nodes().len()];
    let mut jobs = vec![0u32; world.nodes().len()];
    for (_, state) in world.jobs() {
        let mut nodes: Vec<NodeId> = state.gpus.iter().map(|g| g.node).collect();
        for g in &state.gpus {
            if let Some(h) = held.get_mut(g.node.index()) {
                *h += 1;
            }
        }
        nodes.push(state.node);
        nodes.sort_unstable();
        nodes.dedup();
        for n in nodes {
            if let Some(j) = jobs.get_mut(n.index()) {
                *j += 1;
            }
        }
    }
    let mean =
        |xs: &[f32]| if xs.is_empty() { 0.0 } else { xs.iter().map(|&x| f64::from(x)).sum::<f64>() / xs.len() as f64 };
    // Every node counts in the summary; only the page's rows are built.
    let gpus_of = |n: &wasmsched_core::bindings::wit::Node| n.gpu_memory_bytes.len() as u32;
    let use_of: Vec<f64> = (0..world.nodes().len()).map(|i| mean(world.gpu_use(NodeId(i as u32)))).collect();
    let mut by_type: Vec<TypeRow> = Vec::new();
    for (i, n) in world.nodes().iter().enumerate().filter(|(_, n)| gpus_of(n) > 0) {
        let row = match by_type.iter_mut().position(|t| t.gpu_type == n.gpu_type) {
            Some(at) => &mut by_type[at],
            None => {
                by_type.push(TypeRow { gpu_type: n.gpu_type.clone(), ..TypeRow::default() });
                by_type.last_mut().expect("just pushed")
            }
        };
        row.nodes += 1;
        row.gpus += gpus_of(n);
        row.gpus_used += held[i];
        row.utilisation_percent += use_of[i] * f64::from(gpus_of(n));
    }
    for t in &mut by_type {
        t.utilisation_percent /= f64::from(t.gpus.max(1));
    }
    by_type.sort_by(|a, b| a.gpu_type.cmp(&b.gpu_type));
    let gpus: u32 = world.nodes().iter().map(gpus_of).sum();
    let total = world.nodes().len();
    let summary = json!({
        "total": total,
        "down": world.nodes_down().len(),
        "gpus": gpus,
        "gpus_used": held.iter().sum::<u32>(),
        "utilisation_percent": by_type.iter().map(|t| t.utilisation_percent * f64::from(t.gpus)).sum::<f64>() / f64::from(gpus.max(1)),
        "by_type": by_type,
    });
    let row = |i: usize| {
        let (n, id) = (&world.nodes()[i], NodeId(i as u32));
        NodeRow {
            id: i as u32,
            name: n.name.clone(),
            gpu_type: n.gpu_type.clone(),
            gpus: gpus_of(n),
            gpus_used: held[i],
            utilisation_percent: use_of[i],
            down: world.is_node_down(id),
            jobs: jobs[i],
        }
    };
    let ready = status.ready().err();
    let live = status.live(wasmsched_loop::record::wall_ms()).err();
    let node_list = json!({"total": total, "offset": paging.offset, "items": paging.take(0..total).into_iter().map(row).collect::<Vec<_>>()});
    let budget = json!({
        "enabled": budget.enabled,
        "window_s": budget.window.as_secs_f64(),
        "max_per_window": budget.max_per_window,
        "used_in_window": used,
        "left": u64::from(budget.max_per_window).saturating_sub(used),
    });
    json!({
        "status": status, "ready": ready, "live": live, "nodes": summary, "node_list": node_list,
        "budget": budget, "actions": actions,
    })
}

/// One node on the overview.
#[derive(Debug, Serialize)]
struct NodeRow {
    id: u32,
    name: String,
    gpu_type: String,
    gpus: u32,
    gpus_used: u32,
    utilisation_percent: f64,
    down: bool,
    jobs: u32,
}

/// The nodes of one GPU type.
#[derive(Debug, Default, Serialize)]
struct TypeRow {
    gpu_type: String,
    nodes: u32,
    gpus: u32,
    gpus_used: u32,
    utilisation_percent: f64,
}

/// The queue's filters.
#[derive(Debug, Default, Deserialize)]
pub struct QueueQuery {
    /// Only this tenant's jobs.
    pub tenant: Option<String>,
    /// Only this namespace's jobs.
    pub namespace: Option<String>,
    // Not a flattened `Paging`: a query string flattened loses its numbers' types.
    /// Rows to skip.
    #[serde(default)]
    pub offset: usize,
    /// Rows to give.
    pub limit: Option<usize>,
}

/// One queued job.
#[derive(Debug, Serialize)]
struct Queued {
    position: usize,
    job: JobId,
    name: String,
    tenant: String,
    namespace: String,
    gpus: u32,
    since_ms: u64,
    wait_ms: u64,
    state: &'static str,
    reason: String,
    reason_by: &'static str,
}

/// `/api/queue`: a page of the queued jobs that pass the filters, longest waiting first,
/// each with why it waits (the active policy's words, or the host's).
pub fn queue(status: &Status, journal: &Journal, q: &QueueQuery) -> Value {
    let (world, pending) = {
        let e = journal.read();
        (world_of(&e), e.pending.clone())
    };
    let said: std::collections::HashMap<JobId, &str> = pending.iter().map(|p| (p.job, p.reason.as_str())).collect();
    let active = status.policies.iter().find(|p| p.role == crate::config::Role::Active);
    let active = active.map_or("the active policy", |p| p.name.as_str());
    let free = world.gpu_count().saturating_sub(world.jobs().map(|(_, s)| s.gpus.len()).sum());
    let mut queued: Vec<_> = world.queue().collect();
    queued.sort_by_key(|(spec, state)| (state.since_ms, spec.handle));
    // Every queued job's tenant and namespace, for the filters; a row only for the page's.
    let tenant_of = |index: u32| world.tenants().get(index as usize).map_or("", |t| t.name.as_str());
    let keys: Vec<(&str, &str)> =
        queued.iter().map(|(spec, state)| (tenant_of(state.tenant), namespace_of(spec))).collect();
    let tenants: BTreeSet<&str> = keys.iter().map(|k| k.0).collect();
    let namespaces: BTreeSet<&str> = keys.iter().map(|k| k.1).filter(|n| !n.is_empty()).collect();
    let wanted = |(tenant, namespace): (&str, &str)| {
        q.tenant.as_deref().is_none_or(|t| t.is_empty() || tenant == t)
            && q.namespace.as_deref().is_none_or(|n| n.is_empty() || namespace == n)
    };
    let shown: Vec<usize> = (0..queued.len()).filter(|&i| wanted(keys[i])).collect();
    let now = world.time_ms();
    let row = |i: usize| {
        let ((spec, state), (tenant, namespace)) = (queued[i], keys[i]);
        let waits = match state.queued {
            Some(wasmsched_core::bindings::wit::WaitReason::Preempted) => "preempted",
            _ => "never-started",
        };
        let asks = spec.gpus.saturating_mul(spec.replicas.max(1));
        let (reason, by) = match said.get(&spec.handle) {
            Some(reason) => (reason.to_string(), "policy"),
            None => (format!("{active} gave no reason; it asks {asks} GPUs and {free} are free"), "host"),
        };
        Queued {
            position: i + 1,
            job: spec.handle,
            name: spec.name.clone(),
            tenant: tenant.to_string(),
            namespace: namespace.to_string(),
            gpus: asks,
            since_ms: state.since_ms,
            wait_ms: now.saturating_sub(state.since_ms),
            state: waits,
            reason,
            reason_by: by,
        }
    };
    let paging = Paging { offset: q.offset, limit: q.limit };
    let items: Vec<Queued> = paging.take(shown.iter().copied()).into_iter().map(row).collect();
    json!({"total": shown.len(), "offset": q.offset, "tenants": tenants, "namespaces": namespaces, "items": items})
}

/// A job's namespace: its [`NAMESPACE_LABEL`], or none.
fn namespace_of(spec: &wasmsched_core::bindings::wit::JobSpec) -> &str {
    spec.labels.iter().find(|(k, _)| k == NAMESPACE_LABEL).map_or("", |(_, v)| v.as_str())
}

/// `/api/tenants`: each tenant now, the fairness index, and the tenants over time.
pub fn tenants(status: &Status, journal: &Journal) -> Value {
    let now = &status.tenants;
    let history = serde_json::to_value(&journal.read().tenants).unwrap_or_default();
    // Jain's index over each tenant's GPUs held against its entitlement, where it is entitled.
    let ratios: Vec<f64> =
        now.iter().filter(|t| t.gpus_entitled > 0.0).map(|t| t.gpus as f64 / t.gpus_entitled).collect();
    let fairness = (!ratios.is_empty()).then(|| wasmsched_core::tenants::jain(&ratios));
    let rows: Vec<_> = now
        .iter()
        .map(|t| {
            let mut v = serde_json::to_value(t).unwrap_or_default();
            v["borrowing"] = json!(t.gpus as f64 - t.gpus_entitled);
            v
        })
        .collect();
    json!({"fairness": fairness, "now": rows, "history": history})
}

/// The timeline's filters.
#[derive(Debug, Default, Deserialize)]
pub struct DecisionQuery {
    /// Only this job's (its handle or its name).
    pub job: Option<String>,
    /// Only this tenant's jobs'.
    pub tenant: Option<String>,
    /// Only this policy's.
    pub policy: Option<String>,
    /// Only this kind (`place`, `preempt`, …).
    pub kind: Option<String>,
    /// Only this outcome (`applied`, `refused`, …).
    pub outcome: Option<String>,
    /// Only those before this number (the next page back).
    pub before: Option<u64>,
    /// How many (100 unless said; [`MAX_ROWS`] at most).
    pub limit: Option<usize>,
}

impl DecisionQuery {
    fn wants(&self, d: &Decision) -> bool {
        let is = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w.is_empty() || w == have);
        let job = self.job.as_deref().map(str::trim).filter(|j| !j.is_empty());
        job.is_none_or(|j| d.job.map(|h| h.0) == j.parse().ok() || d.job_name == j)
            && is(&self.tenant, &d.tenant)
            && is(&self.policy, &d.policy)
            && is(&self.kind, d.kind)
            && is(&self.outcome, d.outcome.name())
            && self.before.is_none_or(|b| d.seq < b)
    }
}

/// `/api/decisions`: the decisions that pass the filters, newest first, a page at a time.
pub fn decisions(journal: &Journal, q: &DecisionQuery) -> Value {
    let e = journal.read();
    let limit = q.limit.unwrap_or(100).clamp(1, MAX_ROWS);
    let mut total = 0;
    let mut items: Vec<&Decision> = Vec::with_capacity(limit);
    let (mut kinds, mut policies, mut tenants) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for d in e.decisions.iter().rev() {
        kinds.insert(d.kind);
        policies.insert(d.policy.as_str());
        if !d.tenant.is_empty() {
            tenants.insert(d.tenant.as_str());
        }
        if q.wants(d) {
            total += 1;
            if items.len() < limit {
                items.push(d);
            }
        }
    }
    let next_before = (total > items.len()).then(|| items.last().map(|d| d.seq)).flatten();
    let outcomes: Vec<&str> = Outcome::ALL.iter().map(|o| o.name()).collect();
    json!({
        "kept": e.decisions.len(), "total": total, "next_before": next_before,
        "kinds": kinds, "policies": policies, "tenants": tenants, "outcomes": outcomes, "items": items,
    })
}

/// Job `id`'s page, or why there is none.
pub fn job(journal: &Journal, id: u32) -> Result<Value, String> {
    let handle = JobId(id);
    let pending_reason;
    let e = journal.read();
    let world = world_of(&e);
    let (spec, facts, progress) = if let (Some(spec), Some(state)) = (world.spec(handle), world.state(handle)) {
        pending_reason = e.pending.iter().find(|p| p.job == handle).map(|p| p.reason.clone());
        let node = world.nodes().get(state.node.index()).filter(|_| state.is_running()).map(|n| n.name.clone());
        let facts = json!({
            "tenant": tenant_name(&world, state.tenant),
            "state": if state.is_running() { "running" } else { "queued" },
            "node": node,
            "since_ms": (!state.is_running()).then_some(state.since_ms),
            "run_ms": state.run_ms,
            "batch_size": state.batch_size,
            "reason": pending_reason,
        });
        (spec.clone(), facts, world.history(handle).cloned().collect::<Vec<_>>())
    } else if let Some(ended) = e.ended(handle) {
        let facts = json!({
            "tenant": ended.tenant, "state": "ended", "node": null, "since_ms": null,
            "run_ms": ended.run_ms, "batch_size": 0, "reason": null, "last_seen_ms": ended.last_seen_ms,
        });
        (ended.spec.clone(), facts, ended.progress.clone())
    } else {
        return Err(format!("no job {id}: the host has not seen it, or has forgotten it"));
    };
    let mut job = json!({
        "id": id, "name": spec.name, "model": spec.model, "namespace": namespace_of(&spec),
        "gpus": spec.gpus.saturating_mul(spec.replicas.max(1)), "arrival_ms": spec.arrival_ms,
    });
    if let (Some(job), Some(facts)) = (job.as_object_mut(), facts.as_object()) {
        job.extend(facts.clone());
    }
    let progress: Vec<_> =
        progress.iter().map(|r| json!({"time_ms": r.time_ms, "epoch": r.epoch, "values": r.values})).collect();
    let metrics: Vec<&str> = spec.metrics.iter().map(|m| m.name.as_str()).collect();
    let decisions: Vec<&Decision> = e.decisions.iter().rev().filter(|d| d.job == Some(handle)).take(200).collect();
    Ok(json!({"job": job, "progress": progress, "metrics": metrics, "decisions": decisions}))
}

/// `/api/shadows`: each shadow's agreement with the active policy over time, and where it
/// differed last.
pub fn shadows(status: &Status, journal: &Journal) -> Value {
    let active = status.policies.iter().find(|p| p.role == crate::config::Role::Active).map(|p| p.name.clone());
    let e = journal.read();
    let shadows: Vec<_> = e
        .shadows
        .iter()
        .map(|s| {
            let (compared, agreed) = s.series.points().last().map_or((0, 0), |p| (p.compared, p.agreed));
            let version = status.policy(&s.name).map_or(0, |p| p.version);
            json!({
                "name": s.name, "version": version, "compared": compared, "agreed": agreed,
                "rate": if compared == 0 { 1.0 } else { agreed as f64 / compared as f64 },
                "series": s.series, "differences": s.differences,
            })
        })
        .collect();
    json!({"active": active, "shadows": shadows})
}
