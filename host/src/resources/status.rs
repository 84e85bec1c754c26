//! What a `SchedulingPolicy`'s status says: each replica's entry, and the leader's part
//! (conditions, what serves, its history), computed from what the leader knows. Pure: the
//! worker reads and writes, this decides.

use wasmsched_kubernetes::resource::{Condition, HISTORY, ReplicaStatus, SchedulingPolicyStatus, Served};

use super::{Progress, ServingRecord, Step};

/// What the leader knows of one resource.
pub struct View<'a> {
    /// The spec's generation now.
    pub generation: i64,
    /// What the leader made of it.
    pub progress: &'a Progress,
    /// What serves on the leader, as it last became ready.
    pub serving: Option<&'a ServingRecord>,
    /// The leader's version number of what serves.
    pub version: Option<u32>,
    /// Who changed the spec last.
    pub changed_by: Option<String>,
    /// How soon a failure is tried again, seconds.
    pub retry_s: u64,
    /// The replicas there are, by name; None where they cannot be listed (then the entries in
    /// the status are the replicas).
    pub replicas: Option<&'a [String]>,
}

/// Now, in RFC 3339.
pub fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

fn short(digest: &str) -> &str {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    hex.get(..12).unwrap_or(hex)
}

/// This replica's entry for generation `generation`, where it serves (or holds warm) `holds`.
pub fn entry(replica: &str, generation: i64, p: &Progress, holds: Option<String>) -> ReplicaStatus {
    let message = match (&p.failed, p.ready, &p.sha256) {
        (Some((step, why)), _, _) => format!("{}: {why}", step_words(*step)),
        (None, true, Some(sha)) => format!("sha256:{} compiled and swapped in", short(sha)),
        (None, false, Some(sha)) => format!("sha256:{} admitted; swapping it in", short(sha)),
        (None, _, None) => "fetching and compiling".into(),
    };
    ReplicaStatus {
        name: replica.into(),
        generation,
        sha256: p.sha256.clone(),
        ready: p.ready && p.failed.is_none(),
        holds,
        message,
        at: now(),
    }
}

/// Whether two entries say the same, whenever written.
pub fn same_entry(a: &ReplicaStatus, b: &ReplicaStatus) -> bool {
    (&a.name, a.generation, &a.sha256, a.ready, &a.holds, &a.message)
        == (&b.name, b.generation, &b.sha256, b.ready, &b.holds, &b.message)
}

fn step_words(step: Step) -> &'static str {
    match step {
        Step::Settings => "the spec is invalid",
        Step::Fetch => "cannot fetch the component",
        Step::Verify => "refused by verification",
        Step::Admit => "refused by admission",
        Step::Swap => "refused at the swap",
    }
}

fn reason(step: Step) -> &'static str {
    match step {
        Step::Settings => "InvalidSpec",
        Step::Fetch => "FetchFailed",
        Step::Verify => "VerificationFailed",
        Step::Admit => "AdmissionFailed",
        Step::Swap => "SwapRefused",
    }
}

/// The leader's part of the status for `view`, over the status as it stands (`old`): each
/// condition keeps its transition time while its status holds.
pub fn compute(view: &View<'_>, old: &SchedulingPolicyStatus, now: &str) -> SchedulingPolicyStatus {
    let (g, p) = (view.generation, view.progress);
    let failed = p.failed.as_ref();
    let failed_at = |step: Step| failed.filter(|(s, _)| *s == step).map(|(_, why)| why.clone());
    let retry = format!(" (tried again every {} s)", view.retry_s);
    let current = view.serving.filter(|r| r.generation == g && p.ready && failed.is_none());
    let keeps = match view.serving {
        Some(r) if current.is_none() => {
            format!("; sha256:{} (generation {}) keeps serving", short(&r.sha256), r.generation)
        }
        Some(_) => String::new(),
        None => "; no version of it serves".into(),
    };
    let condition = |type_: &str, ok: Option<bool>, reason: &str, message: String| {
        let mut c = Condition::new(type_, ok.unwrap_or(false), reason, message, g, now);
        if ok.is_none() {
            c.status = "Unknown".into();
        }
        if let Some(was) = old.conditions.iter().find(|o| o.type_ == type_ && o.status == c.status) {
            c.last_transition_time.clone_from(&was.last_transition_time);
        }
        c
    };
    let fetched = match (&p.fetched, failed_at(Step::Settings), failed_at(Step::Fetch)) {
        (Some((digest, from)), _, _) => {
            condition("Fetched", Some(true), "Fetched", format!("fetched {from}, {digest}"))
        }
        (None, Some(why), _) => condition("Fetched", Some(false), "InvalidSpec", why),
        (None, None, Some(why)) => condition("Fetched", Some(false), "FetchFailed", format!("{why}{retry}")),
        (None, None, None) => condition("Fetched", None, "Fetching", "being fetched".into()),
    };
    let verified = match (&p.verified, failed_at(Step::Verify)) {
        (Some(who), _) if who.starts_with("not required") => {
            condition("Verified", Some(true), "NotRequired", who.clone())
        }
        (Some(who), _) => condition("Verified", Some(true), "Verified", who.clone()),
        (None, Some(why)) => condition("Verified", Some(false), "VerificationFailed", format!("{why}{retry}{keeps}")),
        (None, None) => condition("Verified", None, "NotFetched", "not fetched yet".into()),
    };
    let Readiness { ready_n, total, failing, lagging, holding } = readiness(view, old);
    let sha = p.sha256.as_deref().map_or_else(|| "it".to_string(), |s| format!("sha256:{}", short(s)));
    let ready = if total > 0 && ready_n == total {
        condition("Ready", Some(true), "Ready", format!("{ready_n}/{total} replicas hold {sha} compiled and warm"))
    } else if total == 0 {
        condition("Ready", None, "Waiting", "no replica has reported yet".into())
    } else {
        let why = if failing { "ReplicaFailed" } else { "Waiting" };
        condition("Ready", Some(false), why, format!("{ready_n}/{total} replicas ready; {}", lagging.join("; ")))
    };
    let serving = match (current, failed) {
        (Some(_), _) => {
            let v = view.version.map(|v| format!("version {v}, ")).unwrap_or_default();
            // The DIGEST column's (the artifact's) beside the component's, which the host's
            // status and logs name: one version, two hashes, both said.
            let digest = view.serving.map(|r| format!("digest {} (", short(&r.digest))).unwrap_or_default();
            let close = if digest.is_empty() { "" } else { ")" };
            condition("Serving", Some(true), "Serving", format!("the leader serves {v}{digest}component {sha}{close}"))
        }
        (None, Some((step, why))) => condition("Serving", Some(false), reason(*step), format!("{why}{keeps}")),
        (None, None) => condition("Serving", Some(false), "Pending", format!("being fetched and compiled{keeps}")),
    };
    let mut status = SchedulingPolicyStatus {
        observed_generation: Some(g),
        conditions: vec![fetched, verified, ready, serving],
        // What serves, on how many replicas; before anything serves, the spec's generation.
        ready_replicas: Some(format!("{}/{}", if view.serving.is_some() { holding } else { ready_n }, total.max(1))),
        last_error: failed.map(|(step, why)| format!("generation {g}: {}: {why}", step_words(*step))),
        changed_by: view.changed_by.clone(),
        replicas: old.replicas.clone(),
        history: old.history.clone(),
        ..SchedulingPolicyStatus::default()
    };
    match view.serving {
        Some(r) => serving_from(&mut status, r, view.version, old, now),
        // A leader that does not know yet what serves (it has just taken the lead, its swap
        // still on its way) leaves what the last one wrote: dropping it would make the version
        // seem new once known, its servingSince the takeover's rather than its own.
        None => {
            status.digest.clone_from(&old.digest);
            status.short_digest.clone_from(&old.short_digest);
            status.sha256.clone_from(&old.sha256);
            status.version = old.version;
            status.serving_generation = old.serving_generation;
            status.serving_since.clone_from(&old.serving_since);
        }
    }
    status
}

/// The replicas' side of Ready: how many hold the spec's generation ready, of how many (those
/// the cluster runs that have not reported yet among them), whether one failed at it rather than
/// being on its way, and a line for each that is not ready.
struct Readiness {
    ready_n: usize,
    /// Replicas that hold the component the leader serves, whichever generation.
    holding: usize,
    total: usize,
    failing: bool,
    lagging: Vec<String>,
}

fn readiness(view: &View<'_>, old: &SchedulingPolicyStatus) -> Readiness {
    let g = view.generation;
    let (entries, missing): (Vec<&ReplicaStatus>, Vec<String>) = match view.replicas {
        Some(pods) => (
            old.replicas.iter().filter(|r| pods.contains(&r.name)).collect(),
            pods.iter().filter(|p| !old.replicas.iter().any(|r| r.name == **p)).cloned().collect(),
        ),
        None => (old.replicas.iter().collect(), Vec::new()),
    };
    let ready_n = entries.iter().filter(|r| r.generation == g && r.ready).count();
    let lagging: Vec<String> = entries
        .iter()
        .filter(|r| !(r.generation == g && r.ready))
        .map(|r| {
            if r.generation == g {
                format!("{}: {}", r.name, r.message)
            } else {
                format!("{}: at generation {}", r.name, r.generation)
            }
        })
        .chain(missing.iter().map(|m| format!("{m}: not reported yet")))
        .collect();
    let on_its_way = |m: &str| m.contains("swapping it in") || m.contains("fetching and compiling");
    let failing = entries.iter().any(|r| r.generation == g && !r.ready && !on_its_way(&r.message));
    // An entry a host before `holds` wrote counts when it is ready at the generation serving.
    let serves = |r: &ReplicaStatus| match (&r.holds, view.serving) {
        (Some(held), Some(s)) => *held == s.sha256,
        (None, Some(s)) => r.generation == s.generation && r.ready,
        (_, None) => false,
    };
    let holding = entries.iter().filter(|r| serves(r)).count();
    Readiness { ready_n, total: entries.len() + missing.len(), failing, lagging, holding }
}

/// The serving version `r` in `status`: its digest, version and since when it serves (kept from
/// `old` while the same version serves), and at the head of the history when it is new there.
fn serving_from(
    status: &mut SchedulingPolicyStatus,
    r: &ServingRecord,
    version: Option<u32>,
    old: &SchedulingPolicyStatus,
    now: &str,
) {
    let same = old.serving_generation == Some(r.generation) && old.sha256.as_deref() == Some(r.sha256.as_str());
    let since = if same { old.serving_since.clone().unwrap_or_else(|| now.into()) } else { now.into() };
    if status.history.first().is_none_or(|h| h.generation != r.generation) {
        let served =
            Served { generation: r.generation, digest: r.digest.clone(), since: since.clone(), spec: r.spec.clone() };
        status.history.insert(0, served);
        status.history.truncate(HISTORY + 1);
    }
    status.digest = Some(r.digest.clone());
    status.short_digest = Some(short(&r.digest).to_string());
    status.sha256 = Some(r.sha256.clone());
    status.version = version.map(i64::from);
    status.serving_generation = Some(r.generation);
    status.serving_since = Some(since);
}

/// Whether the leader's part of two statuses is the same (the replicas' entries aside).
pub fn same_leader_part(a: &SchedulingPolicyStatus, b: &SchedulingPolicyStatus) -> bool {
    let strip = |s: &SchedulingPolicyStatus| SchedulingPolicyStatus { replicas: Vec::new(), ..s.clone() };
    strip(a) == strip(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_kubernetes::resource::SchedulingPolicySpec;

    fn spec(oci: &str) -> SchedulingPolicySpec {
        serde_json::from_value(serde_json::json!({"source": {"oci": oci}})).unwrap()
    }

    fn progress(sha: &str, ready: bool) -> Progress {
        Progress {
            fetched: Some((format!("sha256:{}", "d".repeat(64)), "r@sha256:…".into())),
            verified: Some("signed by release".into()),
            sha256: Some(sha.into()),
            ready,
            ..Progress::default()
        }
    }

    /// What the leader knows at `generation`, serving `record` as `version`; nothing else said.
    fn view<'a>(generation: i64, p: &'a Progress, record: &'a ServingRecord, version: u32) -> View<'a> {
        View {
            generation,
            progress: p,
            serving: Some(record),
            version: Some(version),
            changed_by: None,
            retry_s: 10,
            replicas: None,
        }
    }

    fn entry_of(name: &str, generation: i64, ready: bool) -> ReplicaStatus {
        ReplicaStatus { name: name.into(), generation, ready, message: "m".into(), ..ReplicaStatus::default() }
    }

    fn condition<'a>(s: &'a SchedulingPolicyStatus, type_: &str) -> &'a Condition {
        s.conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    #[test]
    fn a_generation_every_replica_holds_is_ready_and_serving_with_its_history() {
        let record = ServingRecord {
            generation: 1,
            digest: "sha256:abcdef0123456789".into(),
            sha256: "a1".repeat(32),
            spec: spec("x"),
        };
        let p = progress(&record.sha256, true);
        let view = view(1, &p, &record, 1);
        let old = SchedulingPolicyStatus {
            replicas: vec![entry_of("a", 1, true), entry_of("b", 1, true)],
            ..Default::default()
        };
        let s = compute(&view, &old, "T1");
        for c in &s.conditions {
            assert_eq!(c.status, "True", "{c:?}");
        }
        assert_eq!(s.ready_replicas.as_deref(), Some("2/2"));
        assert_eq!(s.short_digest.as_deref(), Some("abcdef012345"));
        assert_eq!(s.history.len(), 1);
        assert_eq!(s.serving_since.as_deref(), Some("T1"));
        // Looked at again later: nothing moves, so nothing is written.
        let again = compute(&view, &SchedulingPolicyStatus { replicas: old.replicas.clone(), ..s.clone() }, "T2");
        assert!(same_leader_part(&again, &s));
    }

    #[test]
    fn a_new_leader_that_does_not_know_yet_what_serves_keeps_its_serving_since() {
        let record =
            ServingRecord { generation: 3, digest: "sha256:33".into(), sha256: "c3".repeat(32), spec: spec("x") };
        let p = progress(&record.sha256, true);
        let last_leader = compute(&view(3, &p, &record, 1), &SchedulingPolicyStatus::default(), "T-rollback");
        assert_eq!(last_leader.serving_since.as_deref(), Some("T-rollback"));
        // The next leader, before its swap of generation 3 has landed: nothing serving known.
        let pending = Progress { ready: false, ..p.clone() };
        let unknown = View { serving: None, ..view(3, &pending, &record, 1) };
        let taking = compute(&unknown, &last_leader, "T-takeover");
        assert_eq!(taking.serving_since.as_deref(), Some("T-rollback"));
        assert_eq!((taking.serving_generation, taking.sha256.as_deref()), (Some(3), Some(&*record.sha256)));
        // Once it knows, the same version: the same servingSince.
        let known = compute(&view(3, &p, &record, 1), &taking, "T-later");
        assert_eq!(known.serving_since.as_deref(), Some("T-rollback"));
    }

    #[test]
    fn a_refused_generation_says_why_and_what_keeps_serving() {
        let record =
            ServingRecord { generation: 2, digest: "sha256:22".into(), sha256: "b2".repeat(32), spec: spec("x") };
        let p = Progress {
            fetched: Some(("sha256:33".into(), "r".into())),
            failed: Some((Step::Verify, "signed by another key".into())),
            ..Progress::default()
        };
        let view = View { changed_by: Some("kubectl".into()), ..view(3, &p, &record, 2) };
        // Replica a failed generation 3 and still holds generation 2's component, which serves.
        let holding = ReplicaStatus { holds: Some(record.sha256.clone()), ..entry_of("a", 3, false) };
        let old = SchedulingPolicyStatus { replicas: vec![holding], ..Default::default() };
        let s = compute(&view, &old, "T");
        assert_eq!(s.ready_replicas.as_deref(), Some("1/1"), "READY counts what serves, as a Deployment's does");
        let verified = condition(&s, "Verified");
        assert_eq!((verified.status.as_str(), verified.reason.as_str()), ("False", "VerificationFailed"));
        assert!(
            verified.message.contains("keeps serving") && verified.message.contains("generation 2"),
            "{}",
            verified.message
        );
        assert_eq!(condition(&s, "Serving").status, "False");
        assert_eq!(condition(&s, "Ready").reason, "ReplicaFailed");
        assert_eq!(s.serving_generation, Some(2));
        assert!(s.last_error.unwrap().contains("generation 3"));
    }

    #[test]
    fn a_replica_that_has_not_reported_keeps_the_resource_from_ready_and_a_gone_one_does_not_count() {
        let record =
            ServingRecord { generation: 1, digest: "sha256:11".into(), sha256: "e5".repeat(32), spec: spec("x") };
        let p = progress(&record.sha256, true);
        let pods = ["a".to_string(), "b".to_string()];
        let view = View { replicas: Some(&pods), ..view(1, &p, &record, 1) };
        let old = SchedulingPolicyStatus {
            replicas: vec![entry_of("a", 1, true), entry_of("gone", 1, false)],
            ..Default::default()
        };
        let s = compute(&view, &old, "T");
        let ready = condition(&s, "Ready");
        assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "Waiting"), "{ready:?}");
        assert!(ready.message.contains("b: not reported yet") && !ready.message.contains("gone"), "{}", ready.message);
        assert_eq!(s.ready_replicas.as_deref(), Some("1/2"));
    }

    #[test]
    fn a_replica_behind_keeps_the_resource_from_ready() {
        let record =
            ServingRecord { generation: 4, digest: "sha256:44".into(), sha256: "c3".repeat(32), spec: spec("x") };
        let p = progress(&record.sha256, true);
        let view = view(4, &p, &record, 3);
        let old = SchedulingPolicyStatus {
            replicas: vec![entry_of("a", 4, true), entry_of("b", 3, true)],
            ..Default::default()
        };
        let s = compute(&view, &old, "T");
        let ready = condition(&s, "Ready");
        assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "Waiting"));
        assert!(ready.message.contains("b: at generation 3"), "{}", ready.message);
        assert_eq!(condition(&s, "Serving").status, "True");
    }
}
