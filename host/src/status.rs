//! What the running host shows an operator: the status behind `GET /status`, `GET /metrics`
//! and `wasmsched status`, kept on a [`StatusBoard`] that the loop and the reload worker write
//! and anyone may read or wait on.

use std::fmt::Write as _;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use wasmsched_core::world::JobId;
use wasmsched_loop::shadow::Agreement;
use wasmsched_loop::watchdog::Benched;
use wasmsched_runtime::supervise::Counters;

use crate::config::Role;

pub use wasmsched_loop::record::ReloadOutcome;

/// The host as a whole.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// When the host started, milliseconds since the Unix epoch.
    pub started_wall_ms: u64,
    /// The backend, in words.
    pub backend: String,
    /// How fast the backend's clock runs.
    pub speed: String,
    /// The loop's tick, milliseconds.
    pub tick_ms: u64,
    /// Whether the loop is still running.
    pub running: bool,
    /// Observations made.
    pub ticks: u64,
    /// Ticks on which the policies were asked.
    pub decisions: u64,
    /// Ticks that started more than a tick late (the loop fell behind the wall clock).
    pub late_ticks: u64,
    /// The backend's clock, milliseconds.
    pub backend_time_ms: u64,
    /// Versions swapped in (rollbacks included).
    pub swaps: u64,
    /// Files refused.
    pub refused: u64,
    /// Every configured policy, in name order.
    pub policies: Vec<PolicyStatus>,
    /// The places the backend reaches (Docker Engines) and whether they answer.
    #[serde(default)]
    pub endpoints: Vec<wasmsched_core::backend::Endpoint>,
    /// Jobs running at the last observation.
    #[serde(default)]
    pub jobs_running: u64,
    /// Jobs waiting in the queue at the last observation.
    #[serde(default)]
    pub jobs_queued: u64,
    /// Each tenant's GPUs against its quota and its fair entitlement now, when jobs belong to
    /// more than one tenant or any is declared.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<TenantStatus>,
    /// Why queued jobs wait, as the active policy last said ([`PENDING_SHOWN`] at most, in
    /// handle order); a job leaves the list when it starts or ends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<WhyPending>,
    /// What the backend holds outside the queue, and why: pod groups not yet whole
    /// ([`PENDING_SHOWN`] at most).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<wasmsched_core::backend::Held>,
    /// Disruptive actions (stop, migrate, preempt) handed to the backend.
    #[serde(default)]
    pub disruptions: u64,
    /// Actions refused over the disruption budget.
    #[serde(default)]
    pub over_budget: u64,
    /// Disruptions the budget counts within its window now (`[budget] max-per-window` is what
    /// it admits there).
    #[serde(default)]
    pub disruptions_in_window: u64,
    /// The version the watchdog benched, while it is benched.
    #[serde(default)]
    pub watchdog: Option<Benched>,
    /// Times the watchdog benched a version.
    #[serde(default)]
    pub watchdog_benchings: u64,
    /// Queued jobs the host started itself because the policy that places left them waiting
    /// although they fit (the watchdog's stall rule).
    #[serde(default)]
    pub stall_rescues: u64,
    /// How long the recent ticks took, from one tick's end to the next's.
    #[serde(default)]
    pub tick_wall: TickWall,
    /// When the last tick ended, milliseconds since the Unix epoch (0: none yet).
    #[serde(default)]
    pub ticked_wall_ms: u64,
    /// Where this host stands among its replicas; None when it runs none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leadership: Option<wasmsched_core::replicas::Leadership>,
    /// The `[experiment]`, while one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experiment: Option<ExperimentStatus>,
}

/// How many reasons why jobs wait the status holds (the audit log keeps every one).
pub const PENDING_SHOWN: usize = 50;

/// One tenant at the last observation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TenantStatus {
    /// Its name.
    pub name: String,
    /// Its weight.
    pub weight: f64,
    /// Its quota, GPUs.
    pub quota_gpus: Option<u32>,
    /// GPUs its running jobs hold.
    pub gpus: u64,
    /// GPUs its queued jobs ask for.
    pub gpus_queued: u64,
    /// Its jobs running.
    pub jobs_running: u64,
    /// Its jobs waiting.
    pub jobs_queued: u64,
    /// Its weighted max-min fair share of the GPUs of the nodes taking work, given what every
    /// tenant holds and could use of what it asks for now (`docs/tenants.md`).
    pub gpus_entitled: f64,
}

impl TenantStatus {
    /// Every tenant of `world`, as it stands; empty when there is only the default one.
    pub fn of(world: &wasmsched_core::world::World) -> Vec<TenantStatus> {
        let tenants = world.tenants();
        if tenants.len() <= 1 && tenants.iter().all(|t| t.quota_gpus.is_none()) {
            return Vec::new();
        }
        let loads = world.tenant_loads();
        let entitled = world.entitlements(&loads);
        tenants
            .iter()
            .zip(loads)
            .zip(entitled)
            .map(|((t, l), gpus_entitled)| TenantStatus {
                name: t.name.clone(),
                weight: t.weight,
                quota_gpus: t.quota_gpus,
                gpus: l.gpus,
                gpus_queued: l.gpus_queued,
                jobs_running: l.jobs_running,
                jobs_queued: l.jobs_queued,
                gpus_entitled,
            })
            .collect()
    }
}

/// Why one queued job waits, as the active policy said.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WhyPending {
    /// The job's handle.
    pub job: JobId,
    /// Its name.
    pub name: String,
    /// The policy's words (120 bytes at most).
    pub reason: String,
}

/// How long the loop's recent ticks took from one tick's end to the next's ([`TICKS_KEPT`] at
/// most): at the configured tick while the loop keeps its cadence, longer when a tick's work
/// overruns it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TickWall {
    /// Ticks counted.
    pub count: u64,
    /// The median, milliseconds.
    pub p50_ms: u64,
    /// The 99th percentile, milliseconds.
    pub p99_ms: u64,
    /// The longest, milliseconds.
    pub max_ms: u64,
}

/// How many recent ticks [`TickWall`] covers.
pub const TICKS_KEPT: usize = 1024;

impl TickWall {
    /// Over `recent` tick durations in milliseconds, in any order.
    pub fn of(recent: impl IntoIterator<Item = u64>) -> TickWall {
        let mut ms: Vec<u64> = recent.into_iter().collect();
        ms.sort_unstable();
        let at = |q: f64| wasmsched_core::units::nearest_rank(&ms, q).unwrap_or(0);
        TickWall { count: ms.len() as u64, p50_ms: at(0.5), p99_ms: at(0.99), max_ms: ms.last().copied().unwrap_or(0) }
    }
}

/// One configured policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyStatus {
    /// Its name.
    pub name: String,
    /// Active or shadow.
    pub role: Role,
    /// Serving, quarantined, or absent (no good file yet, or unloaded).
    pub state: PolicyState,
    /// How many versions it has served; the current one's number.
    pub version: u32,
    /// The sha256 of the version serving.
    pub sha256: Option<String>,
    /// The sha256 of the version a rollback would bring back.
    pub previous_sha256: Option<String>,
    /// The serving version's counters.
    pub counters: Counters,
    /// The last reload of this policy, successful or not.
    pub last_reload: Option<ReloadResult>,
    /// For a shadow: its agreement with the active policy.
    pub shadow: Option<Agreement>,
}

impl PolicyStatus {
    /// A policy with nothing loaded yet.
    pub fn new(name: &str, role: Role) -> Self {
        PolicyStatus {
            name: name.into(),
            role,
            state: PolicyState::Absent,
            version: 0,
            sha256: None,
            previous_sha256: None,
            counters: Counters::default(),
            last_reload: None,
            shadow: (role == Role::Shadow).then(Agreement::default),
        }
    }
}

/// Whether a policy serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyState {
    /// A version is loaded and called.
    Serving,
    /// A version is loaded but failed too often; it is not called until its backoff ends.
    Quarantined,
    /// The watchdog benched the version: a safe policy runs until a new version is admitted
    /// or an operator rolls back.
    Benched,
    /// No version is loaded.
    Absent,
}

/// What a reload did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReloadResult {
    /// When, milliseconds since the Unix epoch.
    pub wall_ms: u64,
    /// What happened.
    pub outcome: ReloadOutcome,
    /// The sha256 of the file concerned, when there was one.
    pub sha256: Option<String>,
    /// Why, in words, for a refusal; what, otherwise.
    pub detail: String,
    /// From the file change being noticed to the version serving (or being refused), ms.
    pub took_ms: f64,
}

/// A live `[experiment]`: where it is, and each arm against the baseline so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExperimentStatus {
    /// Its name.
    pub name: String,
    /// The arms; the first is the baseline.
    pub arms: Vec<String>,
    /// How they share the cluster: in turn, or side by side.
    #[serde(default)]
    pub design: wasmsched_loop::experiment::Design,
    /// In a split, what a job's arm is drawn from.
    #[serde(default)]
    pub assign: wasmsched_loop::experiment::Assign,
    /// In a split, each arm's own nodes, in the order of the arms; empty: all share every node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<Vec<String>>,
    /// The arm active now in a switchback; None before the first observation, and once it has ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<String>,
    /// The block now, from the backend's time 0.
    pub block: u64,
    /// Whether the block is past its burn-in.
    pub warm: bool,
    /// Each block's length and burn-in, seconds.
    pub block_s: f64,
    /// Each block's burn-in, seconds.
    pub burn_in_s: f64,
    /// Groups in which every arm has run a block past its burn-in.
    pub groups: u64,
    /// Each arm but the baseline against it, as of the last block's end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versus: Vec<wasmsched_loop::experiment::Versus>,
    /// Why it ended (concluded by its rule, or stopped); the configured roles serve again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
}

impl Status {
    /// Whether the host is ready: it has observed once, and every place its backend reaches
    /// answered then (its world is warm). Why not, otherwise.
    pub fn ready(&self) -> Result<(), String> {
        if self.ticks == 0 {
            return Err("no observation yet".into());
        }
        match self.endpoints.iter().find(|e| !e.up) {
            Some(e) => Err(format!("{} {} does not answer", e.kind, e.name)),
            None => Ok(()),
        }
    }

    /// Whether the host is alive at `now_ms` (Unix ms): its loop is running and has ended a
    /// tick within ten ticks or a minute, whichever is longer. Why not, otherwise.
    pub fn live(&self, now_ms: u64) -> Result<(), String> {
        if !self.running {
            return Err("the loop has stopped".into());
        }
        let since = if self.ticked_wall_ms == 0 { self.started_wall_ms } else { self.ticked_wall_ms };
        let limit = (self.tick_ms.saturating_mul(10)).max(60_000);
        let quiet = now_ms.saturating_sub(since);
        if quiet > limit {
            return Err(format!("no tick has ended for {} s", quiet / 1000));
        }
        Ok(())
    }

    /// The named policy's entry.
    pub fn policy(&self, name: &str) -> Option<&PolicyStatus> {
        self.policies.iter().find(|p| p.name == name)
    }

    /// The named policy's entry, to change.
    pub fn policy_mut(&mut self, name: &str) -> Option<&mut PolicyStatus> {
        self.policies.iter_mut().find(|p| p.name == name)
    }

    /// The status as a person reads it.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_loop(&mut out);
        self.render_reach(&mut out);
        self.render_policies(&mut out);
        self.render_experiment(&mut out);
        self.render_reloads(&mut out);
        out
    }

    /// The experiment, if one is configured: where it is and each arm against the baseline.
    fn render_experiment(&self, out: &mut String) {
        let Some(e) = &self.experiment else { return };
        use wasmsched_loop::experiment::{Assign, Design};
        let counted = if e.warm { "counted" } else { "burn-in" };
        let now = match (&e.ended, &e.active, e.design) {
            (Some(why), _, _) => format!("ended: {why}"),
            (None, _, Design::Split) => format!("block {} ({counted}), every arm deciding for its own jobs", e.block),
            (None, Some(arm), Design::Switchback) => format!("block {} ({counted}), {arm} active", e.block),
            (None, None, Design::Switchback) => "not started".into(),
        };
        let (block, burn_in) = (
            humantime::format_duration(Duration::from_secs_f64(e.block_s.max(0.0))),
            humantime::format_duration(Duration::from_secs_f64(e.burn_in_s.max(0.0))),
        );
        let design = match (e.design, e.assign) {
            (Design::Switchback, _) => {
                format!("switchback of {} in blocks of {block} (burn-in {burn_in})", e.arms.join(", "))
            }
            (Design::Split, assign) => format!(
                "split of {} by a hash of each job's {}{}, counted in blocks of {block} after a burn-in of {burn_in}",
                e.arms.join(", "),
                if assign == Assign::Tenant { "tenant" } else { "name" },
                match e.pools.is_empty() {
                    true => String::new(),
                    false => format!(
                        ", each on its own nodes ({})",
                        e.arms
                            .iter()
                            .zip(&e.pools)
                            .map(|(a, p)| format!("{a}: {}", p.join(" ")))
                            .collect::<Vec<_>>()
                            .join("; ")
                    ),
                },
            ),
        };
        let _ = writeln!(out, "\nexperiment {}: {design}; {now}; {} complete groups", e.name, e.groups);
        for v in e.versus.iter().filter(|v| v.change.is_finite()) {
            let _ = writeln!(out, "  {}", v.sentence());
        }
    }

    /// The loop: its clock and ticks, the jobs and tenants, what it refused and rescued, the watchdog.
    fn render_loop(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "backend {} at {} speed, tick {} ms — {}; {} ticks ({} late), {} decided, backend clock {:.1} s",
            self.backend,
            self.speed,
            self.tick_ms,
            if self.running { "running" } else { "stopped" },
            self.ticks,
            self.late_ticks,
            self.decisions,
            self.backend_time_ms as f64 / 1000.0
        );
        let _ = writeln!(out, "{} jobs running, {} queued", self.jobs_running, self.jobs_queued);
        for t in &self.tenants {
            let quota = t.quota_gpus.map_or_else(|| "no quota".to_string(), |q| format!("quota {q}"));
            let _ = writeln!(
                out,
                "  tenant {}: {} GPUs ({quota}, fair share now {:.1}), {} jobs running, {} queued asking {} GPUs",
                t.name, t.gpus, t.gpus_entitled, t.jobs_running, t.jobs_queued, t.gpus_queued
            );
        }
        for p in &self.pending {
            let _ = writeln!(out, "  pending {} (job {}): {}", p.name, p.job, p.reason);
        }
        for h in &self.held {
            let _ = writeln!(out, "  held outside the queue {}: {}", h.name, h.reason);
        }
        let w = &self.tick_wall;
        if w.count > 0 {
            let _ = writeln!(
                out,
                "the last {} ticks took {} ms (median), {} ms (p99), {} ms at most",
                w.count, w.p50_ms, w.p99_ms, w.max_ms
            );
        }
        let _ = writeln!(out, "{} swaps, {} files refused", self.swaps, self.refused);
        let _ = writeln!(
            out,
            "{} disruptions (stop, migrate, preempt), {} refused over the disruption budget",
            self.disruptions, self.over_budget
        );
        if self.stall_rescues > 0 {
            let _ = writeln!(
                out,
                "{} queued jobs started by the host: the policy that places left them",
                self.stall_rescues
            );
        }
        if let Some(b) = &self.watchdog {
            let _ = writeln!(
                out,
                "WATCHDOG: {} ({}) is benched at {:.1} s ({}, from {:.1} s); {} runs until a new version is \
                 admitted or `wasmsched rollback {}`",
                b.policy,
                b.sha256.chars().take(12).collect::<String>(),
                b.benched_at_ms as f64 / 1000.0,
                b.why,
                b.failing_since_ms as f64 / 1000.0,
                b.safe,
                b.policy
            );
        }
    }

    /// What the backend reaches, and this replica's lead.
    fn render_reach(&self, out: &mut String) {
        for e in &self.endpoints {
            let state = match e.down_for_ms {
                None if e.up => "up".to_string(),
                None => "not reached yet".to_string(),
                Some(ms) => format!("DOWN for {:.1} s", ms as f64 / 1000.0),
            };
            let kind = if e.kind.is_empty() { "engine" } else { e.kind.as_str() };
            let requests = e.requests.map_or(String::new(), |n| format!(", {n} requests made"));
            let in_flight = e.in_flight.map_or(String::new(), |n| format!(", {n} actions in flight"));
            let _ = writeln!(out, "{kind} {}: {state}, {} jobs{requests}{in_flight}", e.name, e.jobs);
        }
        if let Some(l) = &self.leadership {
            let holder = l.holder.as_deref().unwrap_or("nobody");
            let role = if l.leading { "LEADER, acting" } else { "standby: observing, not acting" };
            let _ = writeln!(
                out,
                "replica {}: {role}; lease {} held by {holder}, {} transitions, led {} times",
                l.identity, l.lease, l.transitions, l.acquired
            );
        }
    }

    /// One line per policy: its role, state, version and counters, its shadow agreement.
    fn render_policies(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "\n{:<16} {:<7} {:<12} {:>4} {:<14} {:>8} {:>6} {:>8} {:>9}  shadow agreement",
            "policy", "role", "state", "ver", "sha256", "calls", "traps", "timeouts", "fallbacks"
        );
        for p in &self.policies {
            let sha = p.sha256.as_deref().map_or("-".to_string(), |s| s.chars().take(12).collect());
            let state = match p.state {
                PolicyState::Serving => "serving",
                PolicyState::Quarantined => "quarantined",
                PolicyState::Benched => "BENCHED",
                PolicyState::Absent => "absent",
            };
            let agreement = p.shadow.map_or(String::new(), |a| {
                format!(
                    "{:.1} % of {} ticks, CPU differs by {:.0} m on average ({} max)",
                    100.0 * a.rate(),
                    a.compared,
                    a.mean_cpu_diff_millicores(),
                    a.cpu_diff_max_millicores
                )
            });
            let c = &p.counters;
            let _ = writeln!(
                out,
                "{:<16} {:<7} {:<12} {:>4} {:<14} {:>8} {:>6} {:>8} {:>9}  {agreement}",
                p.name,
                p.role.to_string(),
                state,
                p.version,
                sha,
                c.calls,
                c.traps,
                c.timeouts,
                c.fallbacks
            );
        }
    }

    /// The last reload of each policy that had one.
    fn render_reloads(&self, out: &mut String) {
        let reloads: Vec<&PolicyStatus> = self.policies.iter().filter(|p| p.last_reload.is_some()).collect();
        if !reloads.is_empty() {
            let _ = writeln!(out, "\nlast reloads:");
            for p in reloads {
                let r = p.last_reload.as_ref().expect("filtered");
                let outcome = match r.outcome {
                    ReloadOutcome::Swapped => "swapped in",
                    ReloadOutcome::Refused => "REFUSED",
                    ReloadOutcome::Unloaded => "unloaded",
                    ReloadOutcome::RolledBack => "rolled back",
                    ReloadOutcome::Restored => "restored",
                };
                let _ = writeln!(out, "  {:<16} {outcome} ({:.1} ms): {}", p.name, r.took_ms, r.detail);
            }
        }
    }
}

/// The status, shared: written by the loop and the reload worker, read by the API and tests.
#[derive(Debug, Default)]
pub struct StatusBoard {
    status: Mutex<Status>,
    changed: Condvar,
}

impl StatusBoard {
    /// A board showing `status`.
    pub fn new(status: Status) -> Self {
        StatusBoard { status: Mutex::new(status), changed: Condvar::new() }
    }

    /// A copy of the status now.
    pub fn get(&self) -> Status {
        self.status.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Change the status and wake whoever waits on it.
    pub fn update<R>(&self, f: impl FnOnce(&mut Status) -> R) -> R {
        let r = f(&mut self.status.lock().unwrap_or_else(PoisonError::into_inner));
        self.changed.notify_all();
        r
    }

    /// Wait until `ready` holds (returning the status then), or `timeout` passes (None).
    pub fn wait_until(&self, timeout: Duration, mut ready: impl FnMut(&Status) -> bool) -> Option<Status> {
        let deadline = Instant::now() + timeout;
        let mut status = self.status.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if ready(&status) {
                return Some(status.clone());
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            status = self.changed.wait_timeout(status, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    }
}
