//! The host's audit log (`[record] audit`) and log, read after it stopped: Sia's `place`,
//! `resize` and `preempt` actions, which named several nodes, which changed a job's GPUs, and
//! which were refused or failed and why. Pure, tested against lines built in the host's format.
//!
//! The format (the harness does not link the host, so it reads the JSON by these paths):
//! - a line is `AuditLine` (`loop/src/record.rs`): `tick`, `time_ms`, `wall_ms`, `active` (null
//!   when no policy was active), `shadows`, `rescued` (handles of queued jobs the host started
//!   itself; absent when none). A line is written on a tick the active policy was asked or the
//!   host rescued jobs (`host/src/host.rs`, `record`); a killed host leaves at most a torn last
//!   line.
//! - `active` is `AuditDecision`: `actions` (what was handed to the backend, after validation
//!   and the disruption budget), `rejected` and `over_budget` (refused before it, each `{job,
//!   action, reason}`), `not_applied` (what the backend could not apply, `{job, reason}`, no
//!   action: this tick's failures and those of earlier ticks' actions that were still in flight,
//!   `loop/src/control.rs`, `settled` then `decide`), `failure` and `fallback`.
//! - an action is the contract's `action` record serialised by serde (`core/src/bindings.rs`:
//!   wasmtime's bindgen derives serde with the Rust names, variants externally tagged):
//!   `{"job": 3, "kind": {"Place": {"nodes": [{"node": 0, "gpus": [0, 1]}], "share": false}},
//!   "reason": "…"}`, `"kind": "Preempt"`, `"kind": {"Resize": {"placement": {"nodes": […],
//!   "share": false}, "batch_size": 640}}` (`batch_size` null: kept); node handles are indices
//!   of the host's node list.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

/// Where a place was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// By the host's validation (`rejected`).
    Rejected,
    /// Over the disruption budget, or invalid once what was over it was taken out (`over_budget`).
    OverBudget,
    /// By the backend (`not_applied`), at once or once it landed.
    NotApplied,
}

/// A `place` that did not take effect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RefusedPlace {
    /// The tick of the line that says so.
    pub tick: u64,
    /// The job's handle.
    pub job: u32,
    /// The nodes it named (names where the handle is known).
    pub nodes: Vec<String>,
    /// Where it was refused.
    pub stage: Stage,
    /// Why.
    pub reason: String,
}

/// What the audit log says of the run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AuditSummary {
    /// Lines read.
    pub lines: u64,
    /// Lines that are not JSON (a torn last line).
    pub torn: u64,
    /// Lines with the active policy's decision.
    pub decisions: u64,
    /// Of those, calls that failed (a trap, the deadline, its own error) or fell back.
    pub failed_calls: u64,
    /// The first failure's text.
    pub first_failure: Option<String>,
    /// `place` actions handed to the backend.
    pub places: u64,
    /// Of those, naming more than one node.
    pub places_multi_node: u64,
    /// Of those, not reported failed by the backend.
    pub places_multi_node_applied: u64,
    /// Every `place` refused (validation, budget) or failed (the backend), in order.
    pub refused_places: Vec<RefusedPlace>,
    /// `preempt` actions handed to the backend.
    pub preempts: u64,
    /// `preempt` actions refused or failed, at any stage.
    pub preempts_refused: u64,
    /// The first few reasons a preemption was refused or failed.
    pub preempt_reasons: Vec<String>,
    /// `resize` actions handed to the backend.
    pub resizes: u64,
    /// Of those, naming more than one node.
    pub resizes_multi_node: u64,
    /// `resize` actions refused or failed, at any stage.
    pub resizes_refused: u64,
    /// The first few reasons a resize was refused or failed.
    pub resize_reasons: Vec<String>,
    /// `place` actions handed to the backend for a job that ran before at another GPU total
    /// (its last place or resize in the log that did not fail): placed again at another size.
    pub places_other_total: u64,
    /// `resize` actions handed to the backend to a GPU total other than the job's last (as
    /// above; a resize of a job with no place in the log is not counted).
    pub resizes_other_total: u64,
    /// Queued jobs the host started itself (the watchdog's stall rule), not Sia.
    pub rescued: u64,
    /// Backend failures of a job with no earlier action in the log.
    pub not_applied_unmatched: u64,
}

impl AuditSummary {
    /// The places over several nodes that were refused or failed.
    pub fn refused_multi_node(&self) -> impl Iterator<Item = &RefusedPlace> {
        self.refused_places.iter().filter(|r| r.nodes.len() > 1)
    }

    /// Of those, the ones refused for anything but the disruption budget (validation, or the
    /// backend): the ones that would say a placement over several nodes is not carried out.
    pub fn refused_multi_node_not_budget(&self) -> impl Iterator<Item = &RefusedPlace> {
        self.refused_multi_node().filter(|r| r.stage != Stage::OverBudget)
    }
}

/// A placement's nodes and GPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Placed {
    /// Node handles, each once, in order.
    nodes: Vec<u32>,
    /// GPUs named over all of them.
    gpus: u32,
}

/// What an action does, as far as the report cares.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Place(Placed),
    Resize(Placed),
    Preempt,
    Other,
}

/// The kind of an action's `kind` value.
fn kind(kind: &Value) -> Kind {
    if kind.as_str() == Some("Preempt") {
        return Kind::Preempt;
    }
    if let Some(place) = kind.get("Place") {
        return Kind::Place(placed(place));
    }
    match kind.get("Resize").and_then(|r| r.get("placement")) {
        Some(placement) => Kind::Resize(placed(placement)),
        None => Kind::Other,
    }
}

/// The nodes and GPUs of a `placement` value.
fn placed(placement: &Value) -> Placed {
    let mut p = Placed { nodes: Vec::new(), gpus: 0 };
    for entry in placement.get("nodes").and_then(Value::as_array).into_iter().flatten() {
        p.gpus += entry.get("gpus").and_then(Value::as_array).map_or(0, |g| g.len() as u32);
        if let Some(node) = entry.get("node").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok())
            && !p.nodes.contains(&node)
        {
            p.nodes.push(node);
        }
    }
    p
}

/// The last action of a job handed to the backend, to which a later failure belongs.
struct Handed {
    kind: Kind,
    failed: bool,
    /// The job's GPU total before it (its last place or resize), put back if it fails.
    total_before: Option<u32>,
}

/// Reads the audit log's `text`; `node_names` are the host's nodes in handle order (as it
/// numbered them at its first observation), to name the nodes of a place.
///
/// A `not_applied` entry carries no action: it is put on the job's last action handed to the
/// backend at or before its line (an action still in flight fails at a later tick). That is
/// exact for a job with one action in flight, as every placed group has (another action on it
/// while one is in flight is refused, `docs/kubernetes.md`, "How actions go out").
pub fn summarise(text: &str, node_names: &[String]) -> AuditSummary {
    let mut r = Reader { node_names, ..Reader::default() };
    for text in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(line) = serde_json::from_str::<Value>(text) else {
            r.s.torn += 1;
            continue;
        };
        r.line(&line);
    }
    let mut s = r.s;
    s.places_multi_node_applied = s.places_multi_node.saturating_sub(r.multi_failed);
    s
}

/// The audit log read so far.
#[derive(Default)]
struct Reader<'a> {
    node_names: &'a [String],
    s: AuditSummary,
    handed: HashMap<u32, Handed>,
    /// Each job's GPU total: its last place or resize that did not fail.
    total: HashMap<u32, u32>,
    /// Places over several nodes that failed in the backend.
    multi_failed: u64,
}

fn job_of(v: &Value) -> Option<u32> {
    v.get("job").and_then(Value::as_u64).and_then(|j| u32::try_from(j).ok())
}

/// The name of the node the host numbered `h`.
fn node_name(names: &[String], h: &u32) -> String {
    names.get(*h as usize).cloned().unwrap_or_else(|| format!("node {h}"))
}

fn reason_of(v: &Value) -> String {
    v.get("reason").and_then(Value::as_str).unwrap_or("").to_owned()
}

impl Reader<'_> {
    /// One entry of the log: its tick's decision, what was refused and what failed.
    fn line(&mut self, line: &Value) {
        self.s.lines += 1;
        let tick = line.get("tick").and_then(Value::as_u64).unwrap_or(0);
        self.s.rescued += line.get("rescued").and_then(Value::as_array).map_or(0, |r| r.len() as u64);
        let Some(active) = line.get("active").filter(|a| a.is_object()) else { return };
        self.s.decisions += 1;
        let failure = active.get("failure").and_then(Value::as_str);
        if failure.is_some() || active.get("fallback").is_some_and(|f| !f.is_null()) {
            self.s.failed_calls += 1;
            if self.s.first_failure.is_none() {
                self.s.first_failure = failure.map(str::to_owned);
            }
        }
        let list = |key: &str| active.get(key).and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        for action in list("actions") {
            self.handed(action);
        }
        for (key, stage) in [("rejected", Stage::Rejected), ("over_budget", Stage::OverBudget)] {
            for refused in list(key) {
                self.refused(tick, refused, stage);
            }
        }
        for failed in list("not_applied") {
            self.not_applied(tick, failed);
        }
    }

    /// An action handed to the backend.
    fn handed(&mut self, action: &Value) {
        let Some(job) = job_of(action) else { return };
        let s = &mut self.s;
        let kind = kind(action.get("kind").unwrap_or(&Value::Null));
        let total_before = self.total.get(&job).copied();
        match &kind {
            Kind::Place(p) => {
                s.places += 1;
                s.places_multi_node += u64::from(p.nodes.len() > 1);
                s.places_other_total += u64::from(total_before.is_some_and(|t| t != p.gpus));
                self.total.insert(job, p.gpus);
            }
            Kind::Resize(p) => {
                s.resizes += 1;
                s.resizes_multi_node += u64::from(p.nodes.len() > 1);
                s.resizes_other_total += u64::from(total_before.is_some_and(|t| t != p.gpus));
                self.total.insert(job, p.gpus);
            }
            Kind::Preempt => s.preempts += 1,
            Kind::Other => {}
        }
        self.handed.insert(job, Handed { kind, failed: false, total_before });
    }

    /// An action the host refused at `stage`.
    fn refused(&mut self, tick: u64, refused: &Value, stage: Stage) {
        let Some(job) = job_of(refused) else { return };
        let reason = reason_of(refused);
        match kind(refused.get("action").and_then(|a| a.get("kind")).unwrap_or(&Value::Null)) {
            Kind::Place(p) => {
                let nodes = p.nodes.iter().map(|h| node_name(self.node_names, h)).collect();
                self.s.refused_places.push(RefusedPlace { tick, job, nodes, stage, reason });
            }
            Kind::Resize(_) => self.s.resize_refused(reason),
            Kind::Preempt => self.s.preempt_refused(reason),
            Kind::Other => {}
        }
    }

    /// A failure in the backend, put on the job's last action handed (its GPU total put back).
    fn not_applied(&mut self, tick: u64, failed: &Value) {
        let Some(job) = job_of(failed) else { return };
        let names = self.node_names;
        let Some(h) = self.handed.get_mut(&job).filter(|h| !h.failed) else {
            self.s.not_applied_unmatched += 1;
            return;
        };
        h.failed = true;
        let reason = reason_of(failed);
        if matches!(h.kind, Kind::Place(_) | Kind::Resize(_)) {
            match h.total_before {
                Some(t) => self.total.insert(job, t),
                None => self.total.remove(&job),
            };
        }
        match &h.kind {
            Kind::Place(p) => {
                self.multi_failed += u64::from(p.nodes.len() > 1);
                let nodes = p.nodes.iter().map(|h| node_name(names, h)).collect();
                self.s.refused_places.push(RefusedPlace { tick, job, nodes, stage: Stage::NotApplied, reason });
            }
            Kind::Resize(_) => self.s.resize_refused(reason),
            Kind::Preempt => self.s.preempt_refused(reason),
            Kind::Other => {}
        }
    }
}

impl AuditSummary {
    fn preempt_refused(&mut self, reason: String) {
        self.preempts_refused += 1;
        first_few(&mut self.preempt_reasons, reason);
    }

    fn resize_refused(&mut self, reason: String) {
        self.resizes_refused += 1;
        first_few(&mut self.resize_reasons, reason);
    }
}

/// Keeps `reason` among the first three distinct ones.
fn first_few(reasons: &mut Vec<String>, reason: String) {
    if reasons.len() < 3 && !reasons.contains(&reason) {
        reasons.push(reason);
    }
}

/// Warnings of a log that say one thing: how many, and the first few lines.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LogExcerpt {
    /// Warnings saying it: a line each, and N for a line `N more "…" warnings about …` (the
    /// host holds repeats of one kind back to one line a minute).
    pub count: u64,
    /// The first [`EXCERPT_LINES`], each cut to 300 bytes.
    pub first: Vec<String>,
}

/// Lines an excerpt keeps.
pub const EXCERPT_LINES: usize = 3;

/// The warnings of `log` that contain `needle`.
pub fn excerpt(log: &str, needle: &str) -> LogExcerpt {
    let mut e = LogExcerpt::default();
    for line in log.lines().filter(|l| l.contains(needle)) {
        let held = line.split_once(" more \"").and_then(|(before, _)| before.rsplit(' ').next()?.parse::<u64>().ok());
        e.count += held.unwrap_or(1);
        if e.first.len() < EXCERPT_LINES {
            let mut cut = 300.min(line.len());
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            e.first.push(line[..cut].to_owned());
        }
    }
    e
}

/// The host's node names in handle order: the nodes it found at its first observation, in
/// name order (`kubernetes/src/nodes.rs`); nodes created later would follow, none are here.
pub fn handle_order(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn place(job: u32, nodes: &[(u32, &[u32])]) -> Value {
        let nodes: Vec<Value> = nodes.iter().map(|(n, g)| json!({ "node": n, "gpus": g })).collect();
        json!({ "job": job, "kind": { "Place": { "nodes": nodes, "share": false } }, "reason": "sia: round" })
    }

    fn resize(job: u32, nodes: &[(u32, &[u32])], batch_size: Option<u32>) -> Value {
        let nodes: Vec<Value> = nodes.iter().map(|(n, g)| json!({ "node": n, "gpus": g })).collect();
        let placement = json!({ "nodes": nodes, "share": false });
        json!({ "job": job, "kind": { "Resize": { "placement": placement, "batch_size": batch_size } }, "reason": "sia: round" })
    }

    /// A line as `loop/src/record.rs` writes it (`AuditLine`, `AuditDecision`).
    fn line(tick: u64, actions: Vec<Value>, extra: Value) -> String {
        let mut active = json!({
            "policy": "sia", "sha256": "ab12", "actions": actions, "rejected": [],
            "latency_us": 812, "fallback": null,
        });
        for (k, v) in extra.as_object().cloned().unwrap_or_default() {
            active[k] = v;
        }
        json!({ "tick": tick, "time_ms": tick * 1000, "wall_ms": 1_767_225_600_000u64 + tick, "active": active })
            .to_string()
    }

    fn names() -> Vec<String> {
        handle_order(["scale-node-t4-1", "vm", "scale-node-a100-0", "scale-node-t4-0"].map(String::from).to_vec())
    }

    #[test]
    fn multi_node_places_are_counted_and_a_later_failure_is_put_on_its_place() {
        let log = [
            line(1, vec![place(0, &[(1, &[0, 1, 2, 3]), (2, &[0, 1])]), place(1, &[(0, &[0, 1])])], json!({})),
            line(2, vec![place(2, &[(1, &[0]), (1, &[1]), (2, &[2])])], json!({})),
            // Job 2's binds failed once they landed, reported at tick 3.
            line(3, vec![], json!({ "not_applied": [{ "job": 2, "reason": "pod b-1 could not be bound (409)" }] })),
        ]
        .join("\n");
        let s = summarise(&log, &names());
        assert_eq!((s.lines, s.decisions, s.places, s.places_multi_node, s.places_multi_node_applied), (3, 3, 3, 2, 1));
        assert_eq!(
            s.refused_places,
            [RefusedPlace {
                tick: 3,
                job: 2,
                nodes: vec!["scale-node-t4-0".into(), "scale-node-t4-1".into()],
                stage: Stage::NotApplied,
                reason: "pod b-1 could not be bound (409)".into(),
            }]
        );
        assert_eq!(s.refused_multi_node().count(), 1);
    }

    #[test]
    fn refusals_before_the_backend_carry_their_action_and_preemptions_their_reasons() {
        let rejected =
            json!({ "job": 4, "action": place(4, &[(0, &[0]), (9, &[0])]), "reason": "node 9 does not exist" });
        let preempt = json!({ "job": 5, "kind": "Preempt", "reason": "sia: no GPUs this round" });
        let log = line(
            7,
            vec![preempt.clone()],
            json!({
                "rejected": [rejected],
                "over_budget": [{ "job": 6, "action": preempt, "reason": "disruption budget: 5 disruptions in the last 10m" }],
                "not_applied": [
                    { "job": 5, "reason": "the group's pods declare no wasmsched.checkpoint folder" },
                    { "job": 8, "reason": "the pod is gone" },
                ],
            }),
        );
        let s = summarise(&log, &names());
        assert_eq!((s.places, s.preempts, s.preempts_refused, s.not_applied_unmatched), (0, 1, 2, 1));
        assert_eq!(s.refused_places[0].stage, Stage::Rejected);
        assert_eq!(s.refused_places[0].nodes, ["scale-node-a100-0", "node 9"]);
        assert_eq!(s.preempt_reasons.len(), 2);
        assert!(s.preempt_reasons[1].contains("checkpoint"), "{:?}", s.preempt_reasons);
    }

    #[test]
    fn resizes_are_counted_with_their_refusals_and_changes_of_gpu_total() {
        // As the host serialises `wit::Action` (serde's derive on the bindgen types).
        let verbatim = r#"{"job":0,"kind":{"Resize":{"placement":{"nodes":[{"node":1,"gpus":[0,1]},{"node":2,"gpus":[0,1,2,3]}],"share":false},"batch_size":640}},"reason":"sia: round"}"#;
        let verbatim: Value = serde_json::from_str(verbatim).unwrap();
        assert_eq!(verbatim, resize(0, &[(1, &[0, 1]), (2, &[0, 1, 2, 3])], Some(640)));
        let rejected = json!({ "job": 3, "action": resize(3, &[(0, &[0])], None), "reason": "job 3 is not elastic" });
        let log = [
            line(1, vec![place(0, &[(1, &[0, 1, 2, 3])]), place(1, &[(0, &[0])])], json!({})),
            // Job 0 grows from 4 to 6 GPUs over two nodes; job 1 moves at 1 GPU; job 9 was never
            // placed in the log.
            line(2, vec![verbatim, resize(1, &[(3, &[5])], None), resize(9, &[(0, &[1])], None)], json!({})),
            // Job 0's copies could not be bound: it stays at 4 as far as the log says.
            line(3, vec![], json!({ "not_applied": [{ "job": 0, "reason": "pod a-3 could not be bound" }] })),
            line(
                4,
                vec![resize(0, &[(1, &[0, 1, 2, 3])], None), json!({ "job": 1, "kind": "Preempt", "reason": "x" })],
                json!({ "rejected": [rejected] }),
            ),
            // Job 1 placed again, at 2 GPUs where it had 1.
            line(5, vec![place(1, &[(2, &[0, 1])])], json!({})),
        ]
        .join("\n");
        let s = summarise(&log, &names());
        assert_eq!((s.resizes, s.resizes_multi_node, s.resizes_refused), (4, 1, 2));
        assert_eq!(s.resize_reasons, ["pod a-3 could not be bound", "job 3 is not elastic"]);
        assert_eq!((s.resizes_other_total, s.places_other_total), (1, 1), "job 0's grow, job 1's place again");
        assert_eq!((s.places, s.preempts, s.not_applied_unmatched), (3, 1, 0));
        assert!(s.refused_places.is_empty(), "a refused resize is not a refused place");
    }

    #[test]
    fn a_torn_line_failures_and_rescues_are_counted() {
        let failed =
            line(2, vec![], json!({ "failure": "ran past its deadline of 1000 ms", "fallback": "keep-limits" }));
        let rescued =
            json!({ "tick": 3, "time_ms": 3000, "wall_ms": 3, "active": null, "rescued": [4, 7] }).to_string();
        let log = format!("{}\n{failed}\n{rescued}\n{{\"tick\":4,\"ti", line(1, vec![], json!({})));
        let s = summarise(&log, &[]);
        assert_eq!((s.lines, s.torn, s.decisions, s.failed_calls, s.rescued), (3, 1, 2, 1, 2));
        assert_eq!(s.first_failure.as_deref(), Some("ran past its deadline of 1000 ms"));
    }

    #[test]
    fn a_log_excerpt_counts_every_line_and_keeps_the_first_few() {
        let log = "a\nWARN actions could not be applied policy=sia failed=1 (place: job 3: x)\nb\n\
                   WARN actions could not be applied y\nWARN actions could not be applied z\n\
                   3 more \"actions could not be applied\" warnings about policy sia in the last 1m, not logged one by one\n";
        let e = excerpt(log, "could not be applied");
        assert_eq!(e.count, 6, "three lines, and three held back");
        assert_eq!(e.first.len(), EXCERPT_LINES);
        assert!(e.first[0].contains("job 3"));
    }

    #[test]
    fn handles_follow_name_order() {
        assert_eq!(names(), ["scale-node-a100-0", "scale-node-t4-0", "scale-node-t4-1", "vm"]);
    }
}
