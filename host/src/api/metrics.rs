//! The status as Prometheus metrics (OpenMetrics text), built with `prometheus-client` from
//! the status at each scrape. Per-version counters carry the version's sha256 as a label, so
//! each series only grows.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode as encode_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::status::{PolicyState, Status};

/// The content type of [`encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels = Vec<(String, String)>;

fn counter(registry: &mut Registry, name: &str, help: &str, value: u64) {
    let c: Counter = Counter::default();
    c.inc_by(value);
    registry.register(name, help, c);
}

/// The metrics text for `status`.
pub fn encode(status: &Status) -> String {
    let mut r = Registry::default();
    loop_metrics(&mut r, status);
    tenant_metrics(&mut r, status);
    backend_metrics(&mut r, status);
    policy_metrics(&mut r, status);
    experiment_metrics(&mut r, status);
    let mut out = String::new();
    encode_text(&mut out, &r).expect("writing to a String cannot fail");
    out
}

/// The loop's counters and gauges: ticks, decisions, swaps, disruptions, the watchdog, jobs, tick times.
fn loop_metrics(r: &mut Registry, status: &Status) {
    counter(r, "wasmsched_ticks", "Observations made", status.ticks);
    counter(r, "wasmsched_decisions", "Ticks on which the policies were asked", status.decisions);
    counter(r, "wasmsched_late_ticks", "Ticks started more than a tick late", status.late_ticks);
    counter(r, "wasmsched_swaps", "Policy versions swapped in, rollbacks included", status.swaps);
    counter(r, "wasmsched_reloads_refused", "Policy files refused", status.refused);
    counter(r, "wasmsched_disruptions", "Disruptive actions (stop, migrate, preempt) applied", status.disruptions);
    counter(r, "wasmsched_disruptions_refused", "Actions refused over the disruption budget", status.over_budget);
    counter(
        r,
        "wasmsched_watchdog_benchings",
        "Times the watchdog benched the active policy",
        status.watchdog_benchings,
    );
    counter(
        r,
        "wasmsched_stall_rescues",
        "Queued jobs the host started itself because the policy that places left them waiting",
        status.stall_rescues,
    );

    for (name, help, value) in [
        ("wasmsched_jobs_running", "Jobs running at the last observation", status.jobs_running),
        ("wasmsched_jobs_queued", "Jobs waiting to be placed at the last observation", status.jobs_queued),
        (
            "wasmsched_watchdog_engaged",
            "1 while the watchdog has the active policy benched",
            u64::from(status.watchdog.is_some()),
        ),
        (
            "wasmsched_tick_wall_p50_milliseconds",
            "Median time from one tick's end to the next's",
            status.tick_wall.p50_ms,
        ),
        (
            "wasmsched_tick_wall_p99_milliseconds",
            "99th percentile of the time from one tick's end to the next's (recent ticks)",
            status.tick_wall.p99_ms,
        ),
    ] {
        let g: Gauge = Gauge::default();
        g.set(i64::try_from(value).unwrap_or(i64::MAX));
        r.register(name, help, g);
    }
}

/// The `[experiment]`: which arm is active, how many groups are complete, and each arm's
/// estimated change against the baseline (a fraction: -0.2 is 20 % lower), with its interval.
fn experiment_metrics(r: &mut Registry, status: &Status) {
    let Some(e) = &status.experiment else { return };
    let experiment = ("experiment".to_string(), e.name.clone());
    let active = Family::<Labels, Gauge>::default();
    let split = e.design == wasmsched_loop::experiment::Design::Split && e.ended.is_none();
    for arm in &e.arms {
        let on = split || e.active.as_deref() == Some(arm.as_str());
        active.get_or_create(&vec![experiment.clone(), ("arm".into(), arm.clone())]).set(i64::from(on));
    }
    r.register(
        "wasmsched_experiment_arm_active",
        "1 for the experiment's arm active in this block (every arm, while a split runs)",
        active,
    );
    let groups = Family::<Labels, Gauge>::default();
    groups.get_or_create(&vec![experiment.clone()]).set(i64::try_from(e.groups).unwrap_or(i64::MAX));
    r.register("wasmsched_experiment_groups", "Groups in which every arm has run a block past burn-in", groups);
    let [change, low, high] = [(); 3].map(|_| Family::<Labels, Gauge<f64, AtomicU64>>::default());
    for v in e.versus.iter().filter(|v| v.change.is_finite()) {
        let estimate = serde_json::to_value(v.estimate).ok().and_then(|x| x.as_str().map(str::to_string));
        let labels =
            vec![experiment.clone(), ("arm".into(), v.arm.clone()), ("estimate".into(), estimate.unwrap_or_default())];
        change.get_or_create(&labels).set(v.change);
        if let Some([lo, hi]) = v.interval {
            low.get_or_create(&labels).set(lo);
            high.get_or_create(&labels).set(hi);
        }
    }
    r.register("wasmsched_experiment_change", "An arm's estimate against the baseline's, less 1", change);
    r.register("wasmsched_experiment_change_low", "The 95 % interval's lower end of that change", low);
    r.register("wasmsched_experiment_change_high", "The 95 % interval's upper end of that change", high);
}

/// Per tenant: GPUs held, queued and entitled, jobs queued, the quota.
fn tenant_metrics(r: &mut Registry, status: &Status) {
    let tenant_gauges = [
        ("wasmsched_tenant_gpus", "GPUs the tenant's running jobs hold"),
        ("wasmsched_tenant_gpus_queued", "GPUs the tenant's queued jobs ask for"),
        ("wasmsched_tenant_jobs_queued", "The tenant's jobs waiting to be placed"),
        ("wasmsched_tenant_quota_gpus", "The tenant's quota of guaranteed GPUs (absent: none)"),
    ];
    let entitled = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    let families: Vec<Family<Labels, Gauge>> = tenant_gauges.iter().map(|_| Family::default()).collect();
    for t in &status.tenants {
        let labels = vec![("tenant".to_string(), t.name.clone())];
        let values = [Some(t.gpus), Some(t.gpus_queued), Some(t.jobs_queued), t.quota_gpus.map(u64::from)];
        for (family, value) in families.iter().zip(values) {
            if let Some(v) = value {
                family.get_or_create(&labels).set(i64::try_from(v).unwrap_or(i64::MAX));
            }
        }
        entitled.get_or_create(&labels).set(t.gpus_entitled);
    }
    if !status.tenants.is_empty() {
        for ((name, help), family) in tenant_gauges.into_iter().zip(families) {
            r.register(name, help, family);
        }
        r.register(
            "wasmsched_tenant_gpus_entitled",
            "The tenant's weighted max-min fair share of the GPUs now",
            entitled,
        );
    }
}

/// The backend's endpoints (up, requests, in flight) and this replica's lead.
fn backend_metrics(r: &mut Registry, status: &Status) {
    let endpoint_up = Family::<Labels, Gauge>::default();
    for e in &status.endpoints {
        endpoint_up.get_or_create(&vec![("endpoint".to_string(), e.name.clone())]).set(i64::from(e.up));
    }
    r.register(
        "wasmsched_backend_endpoint_up",
        "Whether the backend's engine or apiserver answered at the last tick",
        endpoint_up,
    );
    let (requests, in_flight) = (Family::<Labels, Counter>::default(), Family::<Labels, Gauge>::default());
    for e in &status.endpoints {
        let labels = vec![("endpoint".to_string(), e.name.clone())];
        if let Some(n) = e.requests {
            requests.get_or_create(&labels).inc_by(n);
        }
        if let Some(n) = e.in_flight {
            in_flight.get_or_create(&labels).set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
    if let Some(l) = &status.leadership {
        let leader = Family::<Labels, Gauge>::default();
        let labels = vec![("identity".to_string(), l.identity.clone()), ("lease".to_string(), l.lease.clone())];
        leader.get_or_create(&labels).set(i64::from(l.leading));
        r.register("wasmsched_leader", "1 while this replica holds the lead and acts, 0 while it stands by", leader);
        counter(r, "wasmsched_leader_acquired", "Times this replica took the lead", l.acquired);
    }
    r.register("wasmsched_backend_requests", "Requests the host made to the backend's endpoint", requests);
    r.register("wasmsched_backend_in_flight", "Actions sent to the backend's endpoint and not yet answered", in_flight);
}

/// Per policy: serving, version, shadow agreement; per version: its call counters.
fn policy_metrics(r: &mut Registry, status: &Status) {
    let per_version = |name: &str| (name.to_string(), Family::<Labels, Counter>::default());
    let mut families = [
        per_version("wasmsched_policy_calls"),
        per_version("wasmsched_policy_traps"),
        per_version("wasmsched_policy_timeouts"),
        per_version("wasmsched_policy_errors"),
        per_version("wasmsched_policy_fallbacks"),
        per_version("wasmsched_policy_rejected_actions"),
        per_version("wasmsched_policy_call_microseconds"),
    ];
    let serving = Family::<Labels, Gauge>::default();
    let version = Family::<Labels, Gauge>::default();
    let agreement = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    let cpu_diff = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    for p in &status.policies {
        let base = vec![("policy".to_string(), p.name.clone()), ("role".to_string(), p.role.to_string())];
        serving.get_or_create(&base).set(i64::from(p.state == PolicyState::Serving));
        version.get_or_create(&base).set(i64::from(p.version));
        if let Some(a) = p.shadow {
            agreement.get_or_create(&base).set(a.rate());
            cpu_diff.get_or_create(&base).set(a.mean_cpu_diff_millicores());
        }
        let Some(sha) = &p.sha256 else { continue };
        let mut labels = base.clone();
        labels.push(("sha256".into(), sha.clone()));
        let c = &p.counters;
        let values = [c.calls, c.traps, c.timeouts, c.policy_errors, c.fallbacks, c.rejected_actions, c.call_micros];
        for ((_, family), value) in families.iter().zip(values) {
            family.get_or_create(&labels).inc_by(value);
        }
    }
    let helps = [
        "Calls into the policy version",
        "Calls that trapped, deadlines included",
        "Calls that ran past their deadline",
        "Calls the policy answered with its own error",
        "Ticks that fell back",
        "Actions refused by validation",
        "Time spent in calls, microseconds",
    ];
    for ((name, family), help) in families.iter_mut().zip(helps) {
        r.register(name.as_str(), help, std::mem::take(family));
    }
    r.register("wasmsched_policy_serving", "1 when a version of the policy serves", serving);
    r.register("wasmsched_policy_version", "The number of the version serving", version);
    r.register("wasmsched_shadow_agreement_ratio", "Ticks on which the shadow decided as the active did", agreement);
    r.register(
        "wasmsched_shadow_cpu_diff_millicores",
        "Mean per-job CPU limit difference, shadow against active",
        cpu_diff,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Role;
    use crate::status::PolicyStatus;

    #[test]
    fn counters_of_each_version_and_the_shadow_agreement_are_exported() {
        let mut p = PolicyStatus::new("flowcon", Role::Shadow);
        p.state = PolicyState::Serving;
        p.sha256 = Some("ab12".into());
        p.counters.calls = 7;
        p.counters.timeouts = 2;
        let status = Status { ticks: 9, policies: vec![p], jobs_running: 3, jobs_queued: 2, ..Status::default() };
        let text = encode(&status);
        assert!(text.contains("wasmsched_ticks_total 9"), "{text}");
        assert!(text.contains("wasmsched_jobs_running 3") && text.contains("wasmsched_jobs_queued 2"), "{text}");
        assert!(
            text.contains(r#"wasmsched_policy_calls_total{policy="flowcon",role="shadow",sha256="ab12"} 7"#),
            "{text}"
        );
        assert!(text.contains(r#"wasmsched_policy_timeouts_total{policy="flowcon",role="shadow",sha256="ab12"} 2"#));
        assert!(text.contains(r#"wasmsched_shadow_agreement_ratio{policy="flowcon",role="shadow"} 1.0"#), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn the_disruption_budget_and_the_watchdog_are_counted() {
        let benched = wasmsched_loop::watchdog::Benched {
            policy: "flowcon".into(),
            sha256: "ab12".into(),
            failing_since_ms: 0,
            benched_at_ms: 30_000,
            safe: wasmsched_runtime::supervise::Fallback::KeepLimits,
            why: "it failed on every call for 30 s".into(),
        };
        let status = Status {
            disruptions: 4,
            over_budget: 3,
            watchdog: Some(benched),
            watchdog_benchings: 1,
            stall_rescues: 2,
            ..Status::default()
        };
        let text = encode(&status);
        for line in [
            "wasmsched_disruptions_total 4",
            "wasmsched_disruptions_refused_total 3",
            "wasmsched_watchdog_engaged 1",
            "wasmsched_watchdog_benchings_total 1",
            "wasmsched_stall_rescues_total 2",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert!(encode(&Status::default()).contains("wasmsched_watchdog_engaged 0"));
    }

    #[test]
    fn each_engine_is_up_or_not() {
        let engine = |name: &str, up| wasmsched_core::backend::Endpoint { name: name.into(), up, ..Default::default() };
        let status = Status {
            endpoints: vec![engine("unix:///a.sock", true), engine("tcp://b:2375", false)],
            ..Status::default()
        };
        let text = encode(&status);
        assert!(text.contains(r#"wasmsched_backend_endpoint_up{endpoint="unix:///a.sock"} 1"#), "{text}");
        assert!(text.contains(r#"wasmsched_backend_endpoint_up{endpoint="tcp://b:2375"} 0"#), "{text}");
    }

    #[test]
    fn a_replica_says_whether_it_leads_and_a_lone_host_says_nothing_of_it() {
        let lead = |leading| wasmsched_core::replicas::Leadership {
            identity: "host-0_1a2b".into(),
            leading,
            holder: Some("host-0_1a2b".into()),
            lease: "wasmsched-system/wasmsched".into(),
            transitions: 2,
            acquired: 1,
        };
        let status = Status { leadership: Some(lead(true)), ..Status::default() };
        let text = encode(&status);
        assert!(
            text.contains(r#"wasmsched_leader{identity="host-0_1a2b",lease="wasmsched-system/wasmsched"} 1"#),
            "{text}"
        );
        assert!(text.contains("wasmsched_leader_acquired_total 1"), "{text}");
        assert!(status.render().contains("replica host-0_1a2b: LEADER, acting"), "{}", status.render());
        let standby = Status { leadership: Some(lead(false)), ..Status::default() };
        assert!(encode(&standby).contains(r#"lease="wasmsched-system/wasmsched"} 0"#));
        assert!(standby.render().contains("standby: observing, not acting"));
        assert!(!encode(&Status::default()).contains("wasmsched_leader"));
    }

    #[test]
    fn ready_once_observed_with_every_endpoint_up_and_live_while_ticks_end() {
        let up = |up| wasmsched_core::backend::Endpoint {
            name: "https://api:6443".into(),
            kind: "apiserver".into(),
            up,
            ..Default::default()
        };
        let mut s = Status { running: true, tick_ms: 1000, started_wall_ms: 1_000_000, ..Status::default() };
        assert_eq!(s.ready(), Err("no observation yet".into()));
        (s.ticks, s.endpoints, s.ticked_wall_ms) = (1, vec![up(false)], 1_000_500);
        assert!(s.ready().unwrap_err().contains("apiserver https://api:6443 does not answer"));
        s.endpoints = vec![up(true)];
        assert_eq!(s.ready(), Ok(()));
        assert_eq!(s.live(1_060_500), Ok(()), "a minute since the last tick is still alive");
        assert!(s.live(1_060_501).unwrap_err().contains("no tick has ended for 60 s"));
        s.running = false;
        assert_eq!(s.live(1_000_600), Err("the loop has stopped".into()));
    }

    #[test]
    fn each_tenants_gpus_queue_quota_and_fair_share_are_exported() {
        use crate::status::TenantStatus;
        use wasmsched_core::bindings::wit;
        use wasmsched_core::world::{GpuSlot, NodeId, World, sample, undeclared};
        let mut w = World::new();
        w.add_node(wit::Node {
            name: "n0".into(),
            cpu_millicores: 8000,
            memory_bytes: 64 << 30,
            gpu_memory_bytes: vec![1 << 30; 8],
            gpu_type: String::new(),
            labels: Vec::new(),
            domains: Vec::new(),
        });
        w.set_tenants(vec![wit::Tenant { weight: 3.0, quota_gpus: Some(6), ..undeclared("vision") }]);
        let h = w.enqueue_job(wit::JobSpec { gpus: 2, tenant: "vision".into(), ..sample::job_spec(0) });
        assert!(w.start_job(
            h,
            NodeId(0),
            vec![GpuSlot { node: NodeId(0), index: 0 }, GpuSlot { node: NodeId(0), index: 1 }]
        ));
        w.enqueue_job(wit::JobSpec { gpus: 8, tenant: "speech".into(), ..sample::job_spec(1) });
        let tenants = TenantStatus::of(&w);
        assert_eq!(tenants.len(), 2);
        assert_eq!((tenants[0].gpus_entitled, tenants[1].gpus_entitled), (2.0, 6.0), "vision asks for no more than 2");
        let text = encode(&Status { tenants, ..Status::default() });
        for line in [
            r#"wasmsched_tenant_gpus{tenant="vision"} 2"#,
            r#"wasmsched_tenant_gpus_queued{tenant="speech"} 8"#,
            r#"wasmsched_tenant_jobs_queued{tenant="speech"} 1"#,
            r#"wasmsched_tenant_quota_gpus{tenant="vision"} 6"#,
            r#"wasmsched_tenant_gpus_entitled{tenant="speech"} 6.0"#,
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        assert!(!text.contains(r#"wasmsched_tenant_quota_gpus{tenant="speech"}"#), "no quota, no line");
        assert!(!encode(&Status::default()).contains("wasmsched_tenant"), "no tenants, no family");
    }
}
