//! Hostile policies through the real loop: every number a decision carries at its extremes,
//! and every misbehaviour of the hostile fixtures, run through the simulator's loop (what
//! `simulate` runs) and through the live host with a hot swap in the middle. The host never
//! crashes, every tick is decided or fallen back, the disruption budget holds, and the audit
//! log says why. Then the watchdog: a policy that keeps failing is benched for the safe one
//! and given back its place by a new version or a rollback.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use wasmsched::bindings::wit::ActionKind;
use wasmsched::budget::{BudgetConfig, disruptive};
use wasmsched::control::{self, LoopConfig, LoopSummary, MAX_NEXT_CALL_MS};
use wasmsched::experiment::GPU_QUEUE_SCENARIO;
use wasmsched::experiment::run::{PolicyChoice, RunOptions, RunReport, simulate_watched};
use wasmsched::record::AuditLine;
use wasmsched::runtime::Limits;
use wasmsched::runtime::supervise::{Fallback, Quarantine, Supervised};
use wasmsched::scenario::Scenario;
use wasmsched::sim::{SimConfig, Simulator};
use wasmsched::status::PolicyState;
use wasmsched::watchdog::WatchdogConfig;
use wasmsched::world::JobId;

use wasmsched_tests::common::{counted_log, loaded, misbehaving, runtime};
use wasmsched_tests::live::{Running, Setup, assert_no_tick_missed, component, serving, sha256};

/// The nodes of both scenarios here: two of eight cores and two GPUs.
macro_rules! two_gpu_nodes {
    () => {
        r#"
[[node]]
name = "n0"
cores = 8
memory = "64GiB"
gpus = 2
gpu-memory = "32GiB"

[[node]]
name = "n1"
cores = 8
memory = "64GiB"
gpus = 2
gpu-memory = "32GiB"
"#
    };
}

/// Two nodes of two GPUs, more GPU jobs than GPUs (so the queue is never empty for long),
/// CPU jobs beside them, one job that opted out of disruption, and a service that outlives
/// them all and opted out too (so every tick is decided, and no policy ends the run early).
/// The budget is tight, to be reached.
const CLUSTER: &str = concat!(
    "name = \"hostile\"\n",
    two_gpu_nodes!(),
    r#"
[[job]]
name = "gpu"
model = "cifar10"
gpus = 1
max-epochs = 3
count = 6
every = "1m"

[[job]]
name = "cpu"
model = "ncf"
max-epochs = 4
count = 2
every = "2m"

[[job]]
name = "keep"
model = "ncf"
max-epochs = 4
disruptible = false

[[job]]
name = "svc"
model = "bert"
kind = "inference"
request-rate = 10
duration = "3h"
disruptible = false

[budget]
window = "10m"
max-per-window = 3
max-per-node = 2
job-min-interval = "5m"
"#
);

/// The simulated run's tick.
const TICK: Duration = Duration::from_secs(30);

/// One asked tick of a run, as the loop handed it over.
#[derive(Debug)]
struct Seen {
    time_ms: u64,
    /// The actions applied: (job's name, action, the policy's reason).
    applied: Vec<(String, ActionKind, String)>,
    /// The actions validation refused: (the policy's reason, why refused).
    rejected: Vec<(String, String)>,
    over_budget: Vec<String>,
    failure: Option<String>,
    fallback: Option<Fallback>,
    /// Why jobs wait, as kept: (the job, queued when the policy was asked, the reason).
    pending: Vec<(JobId, bool, String)>,
}

/// `policy` with `config` through the simulator's loop on [`CLUSTER`] for two hours.
fn simulate(policy: &str, config: &str) -> (LoopSummary, Vec<Seen>, BudgetConfig) {
    simulate_under(policy, config, WatchdogConfig::default())
}

/// [`simulate`] under `watchdog`.
fn simulate_under(policy: &str, config: &str, watchdog: WatchdogConfig) -> (LoopSummary, Vec<Seen>, BudgetConfig) {
    simulate_within(policy, config, watchdog, Duration::from_millis(200))
}

/// [`simulate_under`] with a per-call `deadline`.
fn simulate_within(
    policy: &str,
    config: &str,
    watchdog: WatchdogConfig,
    deadline: Duration,
) -> (LoopSummary, Vec<Seen>, BudgetConfig) {
    let workload = Scenario::from_toml_str("hostile", CLUSTER).expect("the scenario parses");
    let budget = workload.budget;
    let mut sim = Simulator::new(&workload.workload, SimConfig { noise: 0.0, ..SimConfig::default() });
    // Instantiation gets the same budget as a call: init-spin is retried on every tick that
    // quarantine allows, and a second each would make this test minutes long.
    let limits = Limits { deadline, instantiate: deadline, ..Limits::default() };
    let mut sup = Supervised::new(loaded(policy), config.into(), limits, Fallback::FairShare, Quarantine::default());
    let loop_config = LoopConfig {
        tick: TICK,
        horizon: Some(Duration::from_secs(2 * 3600)),
        budget,
        watchdog,
        ..LoopConfig::default()
    };
    let mut seen = Vec::new();
    let summary = control::run(&mut sim, &mut sup, runtime(), &loop_config, |world, o| {
        let name = |job: JobId| world.spec(job).map_or_else(|| format!("#{job}"), |s| s.name.clone());
        let placed = |job: JobId| o.actions.iter().any(|a| a.job == job && matches!(a.kind, ActionKind::Place(_)));
        let queued = |job: JobId| world.state(job).is_some_and(|s| !s.is_running()) || placed(job);
        seen.push(Seen {
            time_ms: world.time_ms(),
            applied: o.actions.iter().map(|a| (name(a.job), a.kind.clone(), a.reason.clone())).collect(),
            rejected: o.rejected.iter().map(|r| (r.action.reason.clone(), r.reason.clone())).collect(),
            over_budget: o.over_budget.iter().map(|r| r.reason.clone()).collect(),
            failure: o.failure.as_ref().map(|f| wasmsched::error_chain(f)),
            fallback: o.fallback,
            pending: o.pending.iter().map(|p| (p.job, queued(p.job), p.reason.clone())).collect(),
        });
    });
    (summary, seen, budget)
}

/// Every asked tick was decided or fell back with a reason, and no applied disruption broke
/// the budget: per window, per job, or on the job that opted out.
fn assert_contained(what: &str, summary: &LoopSummary, seen: &[Seen], budget: &BudgetConfig) {
    assert_eq!(seen.len() as u64, summary.decisions, "{what}: every asked tick reaches the record");
    assert!(summary.ticks > 0 && summary.end_ms > 0, "{what}: the loop ran: {summary:?}");
    let mut disruptions: Vec<(u64, &str)> = Vec::new();
    for s in seen {
        match (&s.failure, s.fallback) {
            (None, None) => {}
            (Some(why), Some(_)) => assert!(!why.is_empty(), "{what}: a failure says why"),
            other => panic!("{what}: at {} ms a tick neither decided nor fell back: {other:?}", s.time_ms),
        }
        let why = s.rejected.iter().map(|r| &r.1).chain(&s.over_budget);
        assert!(why.into_iter().all(|r| !r.is_empty()), "{what}: every refusal says why");
        disruptions.extend(s.applied.iter().filter(|a| disruptive(&a.1)).map(|a| (s.time_ms, a.0.as_str())));
    }
    let window_ms = budget.window.as_millis() as u64;
    for (i, &(at, job)) in disruptions.iter().enumerate() {
        let in_window = disruptions[..=i].iter().filter(|(t, _)| at - t < window_ms).count();
        assert!(in_window <= budget.max_per_window as usize, "{what}: {in_window} disruptions in a window at {at} ms");
        assert!(job != "keep" && job != "svc", "{what}: a job that opted out was disrupted at {at} ms");
        let last = disruptions[..i].iter().rev().find(|(_, j)| *j == job);
        if let Some(&(before, _)) = last {
            let gap = at - before;
            assert!(gap >= budget.job_min_interval.as_millis() as u64, "{what}: {job} disrupted twice in {gap} ms");
        }
    }
    assert_eq!(
        summary.disruptions,
        disruptions.len() as u64,
        "{what}: the summary counts the disruptions that were applied"
    );
}

/// The extreme a number is taken to, by the `misbehave` fixture's `numbers` behaviour.
const EXTREMES: [&str; 2] = ["zero", "max"];

/// Each number a decision carries, and at the maximum (and at zero where zero cannot be
/// right) what the validation must say.
const FIELDS: [(&str, Option<&str>, Option<&str>); 8] = [
    ("job", None, Some("does not exist or has ended")),
    ("set-cpu", Some("below the minimum"), Some("more than node")),
    ("set-memory", Some("below the minimum"), Some("more than node")),
    ("migrate-node", None, Some("does not exist")),
    ("gpu-share-gpu", None, Some("has no GPU")),
    ("gpu-share-percent", Some("outside 1–100"), Some("outside 1–100")),
    ("place-node", None, Some("does not exist")),
    ("place-gpu", None, Some("has no GPU")),
];

#[test]
fn every_number_a_policy_returns_is_checked_at_zero_and_at_its_maximum() {
    for (field, at_zero, at_max) in FIELDS {
        for (value, must_say) in EXTREMES.into_iter().zip([at_zero, at_max]) {
            let what = format!("{field} = {value}");
            let config = format!(r#"{{"behaviour": "numbers", "field": "{field}", "value": "{value}"}}"#);
            let (summary, seen, budget) = simulate("misbehave", &config);
            assert_contained(&what, &summary, &seen, &budget);
            // Refused, not a failure; a policy that leaves a job it misplaced waiting may be
            // benched for it by the watchdog's stall rule.
            let benched = |f: &String| f.contains("benched by the watchdog");
            assert!(seen.iter().all(|s| s.failure.as_ref().is_none_or(benched)), "{what}: a bad number failed");
            // The fixture also starts the queue; its own action says `numbers`.
            let own = |reason: &String| reason.contains("misbehave numbers");
            if let Some(says) = must_say {
                let refusals: Vec<&String> =
                    seen.iter().flat_map(|s| &s.rejected).filter(|r| own(&r.0)).map(|r| &r.1).collect();
                assert!(!refusals.is_empty(), "{what}: never refused");
                assert!(refusals.iter().all(|r| r.contains(says)), "{what}: {says:?} in every refusal: {refusals:?}");
                let applied = seen.iter().flat_map(|s| &s.applied).filter(|a| own(&a.2)).count();
                assert_eq!(applied, 0, "{what}: nothing of it applies");
            }
        }
    }
}

#[test]
fn a_next_call_of_zero_asks_every_tick_and_of_u64_max_at_most_an_hour_later() {
    let config = |v: &str| format!(r#"{{"behaviour": "numbers", "field": "next-call-ms", "value": "{v}"}}"#);
    let (summary, seen, budget) = simulate("misbehave", &config("zero"));
    assert_contained("next-call-ms = 0", &summary, &seen, &budget);
    assert_eq!(summary.decisions, summary.ticks, "asked on every tick");
    // Left alone for an hour, it leaves arriving jobs waiting: the watchdog starts them and
    // benches it (then the safe policy runs every tick).
    let (summary, seen, budget) = simulate("misbehave", &config("max"));
    assert_contained("next-call-ms = max", &summary, &seen, &budget);
    assert!(summary.rescues > 0 && summary.benchings == 1, "{summary:?}");
    // With no stall rule within the run, it is asked an hour apart.
    let patient = WatchdogConfig { stall_after: Duration::from_secs(3 * 3600), ..WatchdogConfig::default() };
    let (summary, seen, budget) = simulate_under("misbehave", &config("max"), patient);
    assert_contained("next-call-ms = max", &summary, &seen, &budget);
    let gaps: Vec<u64> = seen.windows(2).map(|w| w[1].time_ms - w[0].time_ms).collect();
    let hour_and_tick = MAX_NEXT_CALL_MS + TICK.as_millis() as u64;
    assert!(!gaps.is_empty() && gaps.iter().all(|&g| g <= hour_and_tick), "gaps {gaps:?}");
    assert!(gaps.iter().all(|&g| g >= MAX_NEXT_CALL_MS), "it asked to be left alone: gaps {gaps:?}");
}

/// Every hostile behaviour: the fixture and its config (JSON).
const HOSTILE: [(&str, &str); 23] = [
    ("spin", "{}"),
    ("hog", "{}"),
    ("panic", "{}"),
    ("recursion", "{}"),
    ("garbage", "{}"),
    ("flood", "{}"),
    ("init-fails", "{}"),
    ("misbehave", r#"{"behaviour": "log-flood"}"#),
    ("misbehave", r#"{"behaviour": "leak", "leak-mib": 6}"#),
    ("misbehave", r#"{"behaviour": "trap-every-other"}"#),
    ("misbehave", r#"{"behaviour": "save-state-spin"}"#),
    ("misbehave", r#"{"behaviour": "save-state-trap"}"#),
    ("misbehave", r#"{"behaviour": "save-state-huge"}"#),
    ("misbehave", r#"{"behaviour": "init-spin"}"#),
    ("misbehave", r#"{"behaviour": "init-alloc"}"#),
    ("misbehave", r#"{"behaviour": "duplicate"}"#),
    ("misbehave", r#"{"behaviour": "contradictory"}"#),
    ("misbehave", r#"{"behaviour": "stop-everything"}"#),
    ("misbehave", r#"{"behaviour": "migrate-churn"}"#),
    ("misbehave", r#"{"behaviour": "preempt-churn"}"#),
    ("misbehave", r#"{"behaviour": "fail-after"}"#),
    ("misbehave", r#"{"behaviour": "resize-churn"}"#),
    ("misbehave", r#"{"behaviour": "pending-flood"}"#),
];

#[test]
fn every_hostile_behaviour_is_contained_by_the_simulators_loop_and_the_budget_holds() {
    let mut table = String::new();
    for (fixture, config) in HOSTILE {
        let what = format!("{fixture} {config}");
        let (summary, seen, budget) = simulate(fixture, config);
        assert_contained(&what, &summary, &seen, &budget);
        let count = |f: fn(&Seen) -> usize| seen.iter().map(f).sum::<usize>();
        let failed = count(|s| usize::from(s.failure.is_some()));
        let (rejected, over) = (count(|s| s.rejected.len()), count(|s| s.over_budget.len()));
        table.push_str(&format!(
            "{what:<52} {:>4} asked {failed:>4} fell back {rejected:>4} rejected {over:>4} over budget {:>3} disruptions\n",
            summary.decisions, summary.disruptions
        ));
    }
    println!("hostile behaviours in the simulator (2 h, 30 s tick):\n{table}");
}

#[test]
fn resizes_are_checked_and_budgeted_and_a_flood_of_reasons_is_cut_to_one_short_line_per_queued_job() {
    let (summary, seen, budget) = simulate("misbehave", r#"{"behaviour": "resize-churn"}"#);
    assert_contained("resize-churn", &summary, &seen, &budget);
    let rejected: Vec<&String> = seen.iter().flat_map(|s| s.rejected.iter().map(|r| &r.1)).collect();
    assert!(rejected.iter().any(|r| r.contains("has no batch size the host sets")), "{rejected:?}");
    let resized = seen.iter().flat_map(|s| &s.applied).filter(|a| matches!(a.1, ActionKind::Resize(_))).count();
    let over = seen.iter().map(|s| s.over_budget.len()).sum::<usize>();
    assert!(resized > 0 && over > 0, "valid resizes apply, within the budget: {resized} applied, {over} over it");

    // Making 200,000 reasons (13 MB of them) is the policy's own work: a loaded test machine
    // takes it past 200 ms, which would test the deadline instead of the trimming.
    let flood = r#"{"behaviour": "pending-flood"}"#;
    let (summary, seen, budget) =
        simulate_within("misbehave", flood, WatchdogConfig::default(), Duration::from_secs(2));
    assert_contained("pending-flood", &summary, &seen, &budget);
    let failures: Vec<&String> = seen.iter().filter_map(|s| s.failure.as_ref()).take(3).collect();
    assert!(failures.is_empty(), "the flood is trimmed, not a failure: {failures:?}");
    assert!(seen.iter().any(|s| !s.pending.is_empty()), "queued jobs keep a reason");
    for s in &seen {
        let mut jobs: Vec<JobId> = s.pending.iter().map(|p| p.0).collect();
        jobs.dedup();
        assert_eq!(jobs.len(), s.pending.len(), "one reason per job");
        for (job, queued, reason) in &s.pending {
            assert!(queued, "job {job} was not queued");
            assert!(reason.len() <= 120 && !reason.chars().any(char::is_control), "{reason:?}");
        }
    }
}

#[test]
fn the_budget_refuses_what_stop_everything_asks_beyond_it_and_says_why() {
    let (summary, seen, budget) = simulate("misbehave", r#"{"behaviour": "stop-everything"}"#);
    assert_contained("stop-everything", &summary, &seen, &budget);
    let over: Vec<&String> = seen.iter().flat_map(|s| &s.over_budget).collect();
    assert!(summary.disruptions > 0, "what is under budget applies");
    assert!(over.iter().any(|r| r.contains("budget.max-per-window")), "{over:?}");
    assert!(over.iter().any(|r| r.contains("opted out")), "the job that opted out is refused: {over:?}");
    // On the first tick: the two jobs there that may be disrupted (the service and `keep`
    // opted out), within the window's three.
    let first_tick = &seen[0];
    assert_eq!(first_tick.applied.iter().filter(|a| disruptive(&a.1)).count(), 2);
    // Off, the same policy stops whatever arrives at once, but never what opted out.
    let mut off = Scenario::from_toml_str("hostile", CLUSTER).unwrap();
    off.budget = BudgetConfig::off();
    let mut sim = Simulator::new(&off.workload, SimConfig { noise: 0.0, ..SimConfig::default() });
    let mut sup = misbehaving("stop-everything");
    let mut refused = Vec::new();
    let unbudgeted = LoopConfig { horizon: Some(Duration::from_secs(2 * 3600)), ..LoopConfig::unbudgeted(TICK) };
    let off_summary = control::run(&mut sim, &mut sup, runtime(), &unbudgeted, |_, o| {
        refused.extend(o.over_budget.iter().map(|r| r.reason.clone()));
    });
    assert!(off_summary.disruptions > summary.disruptions, "{off_summary:?} against {summary:?}");
    assert!(!refused.is_empty() && refused.iter().all(|r| r.contains("opted out")), "{refused:?}");
}

/// A host's config tables: a tight budget and a watchdog that benches after 20 s of failing.
const GUARDS: &str = "[budget]\nwindow = \"60s\"\nmax-per-window = 3\nmax-per-node = 2\njob-min-interval = \"20s\"\n\
                      [watchdog]\nafter = \"20s\"\n";

/// The policy slot `p`, whose config comes from `p.toml` beside the component.
const SLOT: &str = "[policy.p]\ndeadline = \"200ms\"\n";

/// A host on [`CLUSTER`] at a 1 s tick, as fast as it goes, with [`GUARDS`].
fn host(setup: &Setup) -> Running {
    std::fs::write(setup.dir.path().join("workload.toml"), CLUSTER).unwrap();
    Running::start(setup.config("1s", "\"max\"", &format!("{GUARDS}{SLOT}")))
}

/// Land `fixture` as `p` with `config` (a TOML table's body) in `p.toml`.
fn land(setup: &Setup, fixture: &str, config: &str) {
    std::fs::write(setup.policies().join("p.toml"), config).unwrap();
    setup.land("p", &component(fixture));
}

/// The disruptions the audit log shows applied, per window of `window_s`, stay within `max`.
fn assert_budget_held(lines: &[AuditLine], window_s: u64, max: usize) {
    let times: Vec<u64> = lines
        .iter()
        .filter_map(|l| l.active.as_ref().map(|a| (l.time_ms, a)))
        .flat_map(|(t, a)| a.actions.iter().filter(|x| disruptive(&x.kind)).map(move |_| t))
        .collect();
    for (i, &t) in times.iter().enumerate() {
        let n = times[..=i].iter().filter(|&&u| t - u < window_s * 1000).count();
        assert!(n <= max, "{n} disruptions within {window_s} s at {t} ms");
    }
}

#[test]
fn every_hostile_behaviour_meets_the_live_host_with_a_hot_swap_in_the_middle() {
    let good = component("fair-share");
    let mut outcomes = String::new();
    let alien = [("alien", "{}")];
    for (fixture, config) in HOSTILE.iter().chain(&alien) {
        let what = format!("{fixture} {config}");
        let setup = Setup::new();
        // The fixture's JSON config as the TOML of `p.toml`.
        let table: HashMap<String, serde_json::Value> = serde_json::from_str(config).unwrap();
        let toml_body: String = table.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
        land(&setup, fixture, &toml_body);
        let running = host(&setup);
        running.wait(&format!("{what}: 40 ticks"), |s| s.ticks >= 40);
        let before = running.handle.board().get();
        // The hot swap: a good version with no config of its own.
        std::fs::remove_file(setup.policies().join("p.toml")).unwrap();
        setup.land("p", &good);
        let swapped = running.wait(&format!("{what}: the swap"), |s| serving(s, "p") == Some(sha256(&good)));
        running.wait(&format!("{what}: 20 ticks after the swap"), |s| s.ticks >= swapped.ticks + 20);
        let after = running.handle.board().get();
        let summary = running.stop();
        let lines = setup.audit_lines();
        assert_no_tick_missed(&lines, 1000);
        assert_eq!(lines.len() as u64, summary.ticks, "{what}: every tick is in the audit log");
        for l in &lines {
            let Some(a) = &l.active else { continue };
            match (&a.failure, a.fallback) {
                (None, None) => {}
                (Some(why), Some(_)) => assert!(!why.is_empty(), "{what}: tick {} failed without a reason", l.tick),
                other => panic!("{what}: tick {} neither decided nor fell back: {other:?}", l.tick),
            }
            for r in a.rejected.iter().chain(&a.over_budget).chain(&a.not_applied) {
                assert!(!r.reason.is_empty(), "{what}: tick {}: a refusal without a reason", l.tick);
            }
        }
        assert_budget_held(&lines, 60, 3);
        let p = after.policy("p").unwrap();
        assert_eq!(p.state, PolicyState::Serving, "{what}: the good version serves after the swap");
        let tail = lines.iter().filter(|l| l.active.as_ref().is_some_and(|a| a.sha256 == sha256(&good)));
        assert!(tail.clone().count() >= 10, "{what}: the good version decided");
        assert!(tail.clone().all(|l| l.active.as_ref().unwrap().failure.is_none()), "{what}: and never failed");
        let hostile_state = before.policy("p").map(|p| p.state);
        let failed = lines.iter().filter(|l| l.active.as_ref().is_some_and(|a| a.failure.is_some())).count();
        outcomes.push_str(&format!(
            "{what:<52} before the swap: {:<11} {:>3} versions refused, {failed:>3} ticks fell back, {} over budget\n",
            format!("{hostile_state:?}"),
            after.refused,
            after.over_budget,
        ));
    }
    println!("hostile behaviours in the live host (sim backend, 1 s tick, swap after 40 ticks):\n{outcomes}");
}

#[test]
fn the_watchdog_benches_a_policy_that_keeps_failing_and_hands_back_on_a_new_version_or_a_rollback() {
    let setup = Setup::new();
    land(&setup, "misbehave", "behaviour = \"fail-after\"\n");
    let running = host(&setup);
    let benched = running.wait("the watchdog", |s| s.watchdog.is_some());
    let b = benched.watchdog.clone().unwrap();
    assert_eq!(b.policy, "p");
    assert!(b.benched_at_ms - b.failing_since_ms >= 20_000, "{b:?}");
    assert_eq!(benched.policy("p").unwrap().state, PolicyState::Benched);
    assert_eq!(benched.watchdog_benchings, 1);
    // Benched, it is not called.
    let calls = benched.policy("p").unwrap().counters.calls;
    let later = running.wait("ten more ticks", |s| s.ticks >= benched.ticks + 10);
    assert_eq!(later.policy("p").unwrap().counters.calls, calls, "a benched version is not called");
    assert_eq!(later.watchdog_benchings, 1, "benched once");
    let metrics = wasmsched::api::metrics::encode(&later);
    assert!(metrics.contains("wasmsched_watchdog_engaged 1"), "{metrics}");
    // A new version takes control back.
    std::fs::remove_file(setup.policies().join("p.toml")).unwrap();
    let good = component("fair-share");
    setup.land("p", &good);
    let back = running.wait("the new version", |s| serving(s, "p") == Some(sha256(&good)));
    assert!(back.watchdog.is_none() && back.policy("p").unwrap().state == PolicyState::Serving, "{back:#?}");
    // A failing version again, benched again; a rollback brings the good one back.
    land(&setup, "misbehave", "behaviour = \"fail-after\"\n");
    running.wait("the second benching", |s| s.watchdog_benchings == 2 && s.watchdog.is_some());
    let (tx, rx) = std::sync::mpsc::channel();
    running.handle.rollback("p", move |r| tx.send(r).unwrap());
    let rolled = rx.recv_timeout(Duration::from_secs(30)).unwrap().expect("a previous version");
    assert_eq!(rolled.sha256, sha256(&good));
    let after = running.wait("control back", |s| s.watchdog.is_none() && s.ticks > back.ticks + 5);
    assert_eq!(after.policy("p").unwrap().state, PolicyState::Serving);
    running.stop();
    let lines = setup.audit_lines();
    let benched_lines: Vec<&AuditLine> = lines
        .iter()
        .filter(|l| {
            l.active.as_ref().and_then(|a| a.failure.as_deref()).is_some_and(|f| f.contains("benched by the watchdog"))
        })
        .collect();
    assert!(!benched_lines.is_empty(), "the audit log says the watchdog benched it");
    assert!(benched_lines.iter().all(|l| l.active.as_ref().unwrap().fallback == Some(Fallback::KeepLimits)));
}

/// The `misbehave` fixture's abusers of the queue: it says it places, and places wrongly.
const ABUSERS: [&str; 14] = [
    "never-place",
    "place-missing-node",
    "place-missing-gpu",
    "place-no-nodes",
    "place-gpu-repeated",
    "place-wrong-count",
    "place-running",
    "pile-on",
    "place-twice",
    "preempt-for-head",
    "preempt-replace-all",
    "huge-placement",
    "preempt-protected",
    "place-preempted",
];

/// The most the host may log on one tick, whatever the policy does: a few warnings of one
/// bounded line each (a summary of what was refused, a rescue, a benching).
const LOG_BYTES_PER_TICK: usize = 4096;

/// `behaviour` through the simulator's loop on the GPU queue of `scenarios/gpu-queue.toml` (no
/// disruption budget, the default watchdog), as `simulate` runs it: the run, and the most
/// bytes the host logged on one tick.
fn on_the_gpu_queue(behaviour: &str) -> (RunReport, usize) {
    on_the_gpu_queue_under(behaviour, |_| {})
}

/// [`on_the_gpu_queue`] with the scenario's watchdog changed by `watchdog`.
fn on_the_gpu_queue_under(behaviour: &str, watchdog: impl FnOnce(&mut WatchdogConfig)) -> (RunReport, usize) {
    let mut scenario = Scenario::from_toml_str("gpu-queue", GPU_QUEUE_SCENARIO).expect("the scenario parses");
    watchdog(&mut scenario.watchdog);
    let choice = PolicyChoice {
        label: format!("misbehave {behaviour}"),
        policy: loaded("misbehave"),
        config_json: format!(r#"{{"behaviour": "{behaviour}"}}"#),
    };
    let (log, bytes) = counted_log();
    let (mut last, mut most) = (0, 0);
    let report = tracing::dispatcher::with_default(&log, || {
        simulate_watched(runtime(), &choice, &scenario, &RunOptions::default(), |_| {
            let now = bytes.load(Ordering::Relaxed);
            most = most.max(now - last);
            last = now;
        })
    });
    (report, most.max(bytes.load(Ordering::Relaxed) - last))
}

#[test]
fn every_queue_abuser_lets_every_job_of_the_gpu_queue_finish_with_a_bounded_log() {
    let mut table = String::new();
    for behaviour in ABUSERS {
        let (report, log_most) = on_the_gpu_queue(behaviour);
        let finished = report.jobs.iter().filter(|j| j.finish_s.is_some()).count();
        table.push_str(&format!(
            "{behaviour:<20} {finished:>2}/{} finished  {:>4} calls {:>3} fell back {:>4} rejected {:>2} rescued  \
             {:>5} B logged at most on a tick  benched: {}\n",
            report.jobs.len(),
            report.policy_calls,
            report.fallbacks,
            report.rejected_actions,
            report.rescues,
            log_most,
            report.benched.as_deref().unwrap_or("no"),
        ));
        assert_eq!(report.unfinished, None, "{behaviour}");
        assert_eq!(finished, report.jobs.len(), "{behaviour}: every job finishes");
        assert!(log_most <= LOG_BYTES_PER_TICK, "{behaviour}: {log_most} bytes logged on one tick");
    }
    println!("the queue's abusers on scenarios/gpu-queue.toml:\n{table}");
}

#[test]
fn a_policy_that_never_places_has_its_jobs_rescued_after_stall_after_then_is_benched() {
    let (report, _) = on_the_gpu_queue("never-place");
    assert_eq!(report.benched.as_deref(), Some("the host started 3 jobs it left waiting in the last 10m"));
    assert!(report.rescues >= 2, "{report:?}");
    // The first job waits a minute and a tick at most (the stall rule), not the hour of the
    // simulator's idle limit.
    let first = report.jobs[0].waited_s.expect("it started");
    assert!((60.0..=90.0).contains(&first), "the first job waited {first} s");
}

#[test]
fn a_policy_that_restarts_every_job_before_its_first_step_is_benched_for_churn_or_for_no_progress() {
    for behaviour in ["preempt-replace-all", "preempt-for-head"] {
        let (report, _) = on_the_gpu_queue(behaviour);
        let why = report.benched.clone().unwrap_or_default();
        assert!(why.starts_with("it disrupted job resnet50-0 5 times in a row"), "{behaviour}: {why:?}");
        // Without the livelock rule, the progress rule catches them, later.
        let (report, _) = on_the_gpu_queue_under(behaviour, |w| w.churn_after = u32::MAX);
        let why = report.benched.clone().unwrap_or_default();
        assert!(why.starts_with("no job made progress for"), "{behaviour}: {why:?}");
    }
}

#[test]
fn a_million_node_entries_are_refused_by_their_count_and_the_policy_benched() {
    let (report, _) = on_the_gpu_queue("huge-placement");
    assert!(report.benched.as_deref().is_some_and(|w| w.starts_with("it failed on every call")), "{report:?}");
}

/// Two nodes of two GPUs and short one- and two-GPU jobs: a queue the live host empties in a
/// few hundred ticks.
const SMALL_QUEUE: &str = concat!(
    "name = \"small-queue\"\n",
    two_gpu_nodes!(),
    r#"
[[job]]
name = "one"
model = "cifar10"
gpus = 1
max-epochs = 2
count = 4
every = "2m"

[[job]]
name = "two"
model = "cifar10"
gpus = 2
replicas = 2
max-epochs = 2
count = 2
every = "5m"

[[job]]
name = "keep"
model = "cifar10"
gpus = 1
max-epochs = 2
disruptible = false

[budget]
enabled = false
"#
);

#[test]
fn every_queue_abuser_meets_the_live_host_and_every_job_finishes() {
    let mut table = String::new();
    for behaviour in ABUSERS {
        let setup = Setup::new();
        std::fs::write(setup.dir.path().join("workload.toml"), SMALL_QUEUE).unwrap();
        land(&setup, "misbehave", &format!("behaviour = \"{behaviour}\"\n"));
        let (log, bytes) = counted_log();
        let running = Running::start_logging(setup.config("30s", "\"max\"", SLOT), log);
        let done = running.wait(&format!("{behaviour}: the run ends"), |s| !s.running);
        let summary = running.stop();
        let lines = setup.audit_lines();
        assert_eq!(done.jobs_running + done.jobs_queued, 0, "{behaviour}: every job finished: {done:#?}");
        let per_tick = bytes.load(Ordering::Relaxed) / summary.ticks.max(1) as usize;
        assert!(per_tick <= LOG_BYTES_PER_TICK, "{behaviour}: {per_tick} bytes logged a tick");
        let rescued: usize = lines.iter().map(|l| l.rescued.len()).sum();
        assert_eq!(rescued as u64, done.stall_rescues, "{behaviour}: the audit log names every rescued job");
        // A policy whose dry run already misplaces is refused at admission: the default
        // placement serves instead.
        let admitted = if done.refused > 0 { "refused at admission" } else { "admitted" };
        table.push_str(&format!(
            "{behaviour:<20} {admitted:<20} {:>4} ticks {:>2} rescued {} benched {:>6} B logged ({per_tick} a tick)\n",
            summary.ticks,
            done.stall_rescues,
            done.watchdog_benchings,
            bytes.load(Ordering::Relaxed),
        ));
    }
    println!("the queue's abusers in the live host (sim backend, 30 s tick, as fast as it goes):\n{table}");
}
