//! The long-running host behind `wasmsched run`: the one loop ([`control::drive`]) over a
//! backend, with the configured policies (one active, any number of shadows), hot reload of
//! the policies directory ([`reload`]), the audit log and telemetry recording ([`record`]),
//! and a [`crate::status::StatusBoard`] for the control API ([`crate::api`]).
//!
//! Everything that changes which version serves happens at a tick boundary, on the loop's
//! thread, when no policy is in a call: a swap (the old version's `save-state` goes into the
//! new one's `init`; an `init` that refuses it keeps the old version serving), an unload, a
//! rollback. While the loop waits for the next tick it takes commands at once, so a reload
//! or a rollback does not wait for the tick.

mod audit;
mod experiment;
mod keep;
mod pacer;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::Instant;

use pacer::Pacer;

use wasmsched_core::world::World;
use wasmsched_loop::control::{self, Driver, LoopConfig, LoopSummary, Policies, Split, Tick};
use wasmsched_loop::experiment::ExperimentEvent;

use experiment::{LiveExperiment, serving_role};
use wasmsched_loop::record::{self, JsonLines, RecordError, TelemetryRecorder};
use wasmsched_loop::shadow::Agreement;
use wasmsched_runtime::Runtime;
use wasmsched_runtime::supervise::Supervised;
use wasmsched_sim::workload::Workload;

use crate::backend::{Backend, BackendError, Built, Checkpoint, Leadership};
use crate::config::{HostConfig, PolicyConfig, Role};
use crate::journal::Journal;
use crate::reload::{self, Candidate, Change, LatestWorld, Reloader, WatchError};
use crate::status::{
    PolicyState, PolicyStatus, ReloadOutcome, ReloadResult, Status, StatusBoard, TICKS_KEPT, TickWall, WhyPending,
};

/// Why the host could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The backend could not be built.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The audit log or the recording could not be opened.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The policies directory cannot be watched.
    #[error(transparent)]
    Watch(#[from] WatchError),
    /// The policies directory does not exist.
    #[error("the policies directory {0} does not exist: create it, or fix `policies-dir` in the config")]
    NoPoliciesDir(std::path::PathBuf),
}

/// What the host is told to do.
pub enum Command {
    /// A reload found a change.
    Change(Change),
    /// Bring back the previous version of a policy; the answer goes to `reply`.
    Rollback {
        /// The policy.
        policy: String,
        /// Where the answer goes.
        reply: Box<dyn FnOnce(Result<RolledBack, RollbackError>) + Send>,
    },
    /// Stop after the tick in progress.
    Stop,
    /// End the `[experiment]` at the next tick boundary (the configured roles serve again);
    /// `reply` hears whether one was running.
    StopExperiment {
        /// Where the answer goes: the experiment's name, or why there was none to stop.
        reply: Box<dyn FnOnce(Result<String, String>) + Send>,
    },
}

/// A rollback that happened.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RolledBack {
    /// The policy.
    pub policy: String,
    /// The sha256 now serving.
    pub sha256: String,
    /// The sha256 it replaced, if one served.
    pub replaced: Option<String>,
}

/// Why a rollback could not happen.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RollbackError {
    /// No such policy in the config.
    #[error("no policy named {0} in the config")]
    Unknown(String),
    /// Nothing to go back to.
    #[error("policy {0} has no previous version to go back to")]
    NoPrevious(String),
    /// The host stopped before it could.
    #[error("the host is stopping")]
    Stopping,
}

/// What the API and a Ctrl-C handler hold: a way to send commands and to read the status.
#[derive(Clone)]
pub struct HostHandle {
    commands: Sender<Command>,
    board: Arc<StatusBoard>,
    journal: Arc<Journal>,
}

impl HostHandle {
    /// The status board.
    pub fn board(&self) -> &Arc<StatusBoard> {
        &self.board
    }

    /// What the operator's page shows beyond the status.
    pub fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }

    /// Ask the host to stop after the tick in progress.
    pub fn stop(&self) {
        let _ = self.commands.send(Command::Stop);
    }

    /// End the `[experiment]`; `reply` gets the answer at the next tick boundary.
    pub fn stop_experiment(&self, reply: impl FnOnce(Result<String, String>) + Send + 'static) {
        let reply: Box<dyn FnOnce(Result<String, String>) + Send> = Box::new(reply);
        if let Err(mpsc::SendError(Command::StopExperiment { reply })) =
            self.commands.send(Command::StopExperiment { reply })
        {
            reply(Err("the host is stopping".into()));
        }
    }

    /// Ask for a rollback; `reply` gets the answer at the next tick boundary.
    pub fn rollback(&self, policy: &str, reply: impl FnOnce(Result<RolledBack, RollbackError>) + Send + 'static) {
        let reply: Box<dyn FnOnce(Result<RolledBack, RollbackError>) + Send> = Box::new(reply);
        if let Err(mpsc::SendError(Command::Rollback { reply, .. })) =
            self.commands.send(Command::Rollback { policy: policy.into(), reply })
        {
            reply(Err(RollbackError::Stopping));
        }
    }
}

/// Stop the host on Ctrl-C (SIGINT) or SIGTERM: the tick in progress finishes, the logs are
/// complete, and [`Host::run`] returns.
pub fn stop_on_signal(handle: HostHandle) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build()?;
    std::thread::Builder::new().name("wasmsched-signals".into()).spawn(move || {
        runtime.block_on(async {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let terminated = async {
                match term.as_mut() {
                    Some(t) => t.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminated => {}
            }
        });
        tracing::info!("stopping after the tick in progress");
        handle.stop();
    })?;
    Ok(())
}

/// The host, configured and ready to run.
pub struct Host {
    config: HostConfig,
    backend: Box<dyn Backend + Send>,
    commands: Receiver<Command>,
    handle: HostHandle,
}

impl Host {
    /// Check the config's files and build the backend; nothing runs yet. The simulator runs
    /// the workload `load_workload` reads from the configured path (`main` hands it the
    /// scenario parser): the host knows no backend and parses no workload.
    pub fn new<E>(
        config: HostConfig,
        load_workload: impl FnOnce(&Path) -> Result<Workload, E>,
    ) -> Result<Host, HostError>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        if config.resources.is_none() && !config.policies_dir.is_dir() {
            return Err(HostError::NoPoliciesDir(config.policies_dir.clone()));
        }
        let built = config.backend.build(load_workload)?;
        Host::with_backend(config, built)
    }

    /// The host of `config` on a backend the caller built (a backend of its own, or one
    /// wrapped: a test's replica that leads from a given tick).
    pub fn with_backend(config: HostConfig, built: Built) -> Result<Host, HostError> {
        if config.resources.is_none() && !config.policies_dir.is_dir() {
            return Err(HostError::NoPoliciesDir(config.policies_dir.clone()));
        }
        let Built { backend, name } = built;
        let status = Status {
            started_wall_ms: record::wall_ms(),
            backend: name,
            speed: config.backend.speed().to_string(),
            tick_ms: config.tick.as_millis() as u64,
            running: true,
            policies: config.policy.iter().map(|(name, p)| PolicyStatus::new(name, p.role)).collect(),
            ..Status::default()
        };
        let (tx, commands) = mpsc::channel();
        let journal = Arc::new(Journal::new(config.budget));
        let handle = HostHandle { commands: tx, board: Arc::new(StatusBoard::new(status)), journal };
        Ok(Host { config, backend, commands, handle })
    }

    /// A handle for the API and signal handlers.
    pub fn handle(&self) -> HostHandle {
        self.handle.clone()
    }

    /// Load the policies, watch their directory, and run the loop until the backend has
    /// nothing left or a stop is asked for.
    pub fn run(self, rt: &Runtime) -> Result<LoopSummary, HostError> {
        let Host { config, mut backend, commands, handle } = self;
        let latest = LatestWorld::default();
        let mut driver = HostDriver::new(&config, commands, handle.clone(), latest.clone())?;
        let loop_config = LoopConfig {
            tick: config.tick,
            horizon: None,
            budget: config.budget,
            watchdog: config.watchdog,
            tenants: config.declared_tenants(),
        };
        let stop = std::sync::atomic::AtomicBool::new(false);
        let summary = std::thread::scope(|scope| -> Result<LoopSummary, HostError> {
            let commands = handle.commands.clone();
            let send = move |change| {
                let _ = commands.send(Command::Change(change));
            };
            let watcher = if config.resources.is_some() {
                #[cfg(feature = "kubernetes")]
                {
                    let (config, board, stop) = (&config, handle.board.clone(), &stop);
                    scope.spawn(move || crate::resources::work(rt, config, latest, board, stop, send));
                }
                None
            } else {
                let reloader =
                    Reloader::new(rt, &config.policies_dir, config.policy.clone(), latest, handle.board.clone());
                serve_folder(scope, rt, &config, reloader, &mut driver, send)?
            };
            tracing::info!(dir = %config.policies_dir.display(), tick_ms = config.tick.as_millis() as u64, speed = %config.backend.speed(), "host running");
            let summary = control::drive(backend.as_mut(), &mut driver, rt, &loop_config);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            drop(watcher);
            Ok(summary)
        })?;
        driver.finish();
        Ok(summary)
    }
}

/// Serve the policies folder: watch it first, then look at every configured policy (a file
/// that lands in between is seen twice, never missed), then hand the watcher's changes to a
/// worker that sends what passes to `send`. The watch stops when the watcher is dropped.
fn serve_folder<'scope, 'env: 'scope>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    rt: &'env Runtime,
    config: &HostConfig,
    mut reloader: Reloader<'env>,
    driver: &mut HostDriver,
    send: impl FnMut(Change) + Send + 'scope,
) -> Result<Option<reload::Watcher>, HostError> {
    let (names_tx, names_rx) = mpsc::channel::<BTreeSet<String>>();
    let watcher = if config.reload.watch {
        Some(reload::watch(&config.policies_dir, config.reload.debounce, config.reload.poll, names_tx)?)
    } else {
        drop(names_tx);
        None
    };
    let started = Instant::now();
    for name in config.policy.keys() {
        match reloader.check(name, started) {
            Some(change) => driver.change(rt, change),
            None if driver.slot(name).is_some_and(|s| s.current.is_none()) => {
                tracing::warn!(policy = %name, dir = %config.policies_dir.display(), "no usable {name}.wasm yet; it will serve once one lands");
            }
            None => {}
        }
    }
    if config.active().is_none_or(|a| driver.slot(a).is_some_and(|s| s.current.is_none())) {
        tracing::warn!("no active policy serves: the limits in force stay as they are");
    }
    scope.spawn(move || reload::work(reloader, names_rx, send));
    Ok(watcher)
}

/// One version serving, and its number among the policy's versions.
struct Serving {
    sup: Supervised,
    version: u32,
    /// The versions its state was carried away from ([`Checkpoint::left`]).
    left: Vec<String>,
}

/// One configured policy: the version serving, and the one a rollback brings back.
struct Slot {
    name: String,
    config: PolicyConfig,
    current: Option<Serving>,
    previous: Option<Serving>,
    versions: u32,
    agreement: Agreement,
    /// Whether a resource's spec names the version to serve (then a state kept by another
    /// version is carried into this one, never the other way).
    from_resource: bool,
}

/// The host's side of the loop.
struct HostDriver {
    slots: Vec<Slot>,
    commands: Receiver<Command>,
    board: Arc<StatusBoard>,
    journal: Arc<Journal>,
    latest: LatestWorld,
    seen: Option<Arc<World>>,
    audit: Option<JsonLines>,
    recorder: Option<TelemetryRecorder>,
    pacer: Pacer,
    write_errors: u64,
    /// When the last tick ended, and how long the recent ones took (ms, oldest first).
    ticked: Option<Instant>,
    tick_walls: std::collections::VecDeque<u64>,
    /// Why queued jobs wait, as the audit log last wrote it (it writes them again on change).
    last_pending: Vec<wasmsched_core::bindings::wit::Pending>,
    /// What the backend held outside the queue at the last observation, as the status shows it.
    last_held: Vec<wasmsched_core::backend::Held>,
    /// States the last leader kept for policies this host did not serve yet when it took the
    /// lead (a resource still being fetched): each starts from its state when it swaps in.
    unrestored: Vec<Checkpoint>,
    /// The policy changes not yet in the audit log.
    changes: Vec<record::PolicyChange>,
    /// The `[experiment]`, when one is configured.
    experiment: Option<LiveExperiment>,
    /// What the experiment did that the audit log has not yet written.
    event: Option<ExperimentEvent>,
    /// Whether to keep the states for the next leader at this tick's end: a version swapped
    /// in or rolled back to, so that no kept state is another version's for long.
    keep_now: bool,
}

impl HostDriver {
    fn new(
        config: &HostConfig,
        commands: Receiver<Command>,
        handle: HostHandle,
        latest: LatestWorld,
    ) -> Result<Self, HostError> {
        let audit = config.record.audit.as_deref().map(JsonLines::append).transpose()?;
        let tick_ms = config.tick.as_millis() as u64;
        let recorder = config
            .record
            .telemetry
            .as_deref()
            .map(|p| TelemetryRecorder::create(p, tick_ms, config.budget))
            .transpose()?;
        let slots = config
            .policy
            .iter()
            .map(|(name, p)| Slot {
                name: name.clone(),
                config: p.clone(),
                current: None,
                previous: None,
                versions: 0,
                agreement: Agreement::default(),
                from_resource: false,
            })
            .collect();
        Ok(HostDriver {
            slots,
            commands,
            board: handle.board,
            journal: handle.journal,
            latest,
            seen: None,
            audit,
            recorder,
            pacer: Pacer { speed: config.backend.speed(), tick: config.tick, anchor: None },
            write_errors: 0,
            ticked: None,
            last_pending: Vec::new(),
            last_held: Vec::new(),
            unrestored: Vec::new(),
            changes: Vec::new(),
            tick_walls: std::collections::VecDeque::with_capacity(TICKS_KEPT),
            experiment: config.experiment.clone().map(LiveExperiment::new),
            event: None,
            keep_now: false,
        })
    }

    fn slot(&self, name: &str) -> Option<&Slot> {
        self.slots.iter().find(|s| s.name == name)
    }

    /// Handle one command at a tick boundary; false means stop.
    fn command(&mut self, rt: &Runtime, command: Command) -> bool {
        match command {
            Command::Change(change) => self.change(rt, change),
            Command::Rollback { policy, reply } => reply(self.rollback(&policy)),
            Command::Stop => return false,
            Command::StopExperiment { reply } => reply(self.stop_experiment()),
        }
        true
    }

    fn change(&mut self, rt: &Runtime, change: Change) {
        match change {
            Change::Admitted(candidate) => self.swap(rt, *candidate),
            Change::Deleted { name, noticed, origin } => {
                let Some(slot) = self.slots.iter_mut().find(|s| s.name == name) else { return };
                let Some(gone) = slot.current.take() else { return };
                let digest = gone.sup.policy().digest().to_string();
                let what = if origin.is_some() { "resource deleted" } else { "file deleted" };
                tracing::info!(policy = %name, sha256 = %digest, origin = origin.as_deref().unwrap_or("file"), "{what}; policy unloaded (a rollback brings it back)");
                slot.previous = Some(gone);
                self.report(&name, ReloadOutcome::Unloaded, Some(digest), what.into(), noticed, origin);
            }
        }
    }

    fn swap(&mut self, rt: &Runtime, c: Candidate) {
        if let Some(settings) = &c.settings {
            let active = |s: &&Slot| s.name != c.name && s.config.role == Role::Active && s.current.is_some();
            if settings.role == Role::Active
                && let Some(other) = self.slots.iter().find(active).map(|s| s.name.clone())
            {
                let detail = format!(
                    "policy {other} is the active one, and one active policy serves at a time: make {other} a shadow \
                     (or delete it) first; {} keeps what it serves",
                    c.name
                );
                tracing::warn!(policy = %c.name, reason = %detail, "policy version refused at the swap");
                let digest = c.policy.digest().to_string();
                self.report(&c.name, ReloadOutcome::Refused, Some(digest), detail, c.noticed, c.origin);
                return;
            }
            if self.slot(&c.name).is_none() {
                self.slots.push(Slot {
                    name: c.name.clone(),
                    config: settings.clone(),
                    current: None,
                    previous: None,
                    versions: 0,
                    agreement: Agreement::default(),
                    from_resource: true,
                });
                self.board.update(|s| s.policies.push(PolicyStatus::new(&c.name, settings.role)));
            }
        }
        let Some(slot) = self.slots.iter_mut().find(|s| s.name == c.name) else { return };
        let state = slot.current.as_mut().and_then(|s| s.sup.save_state());
        let carried = state.as_ref().map_or(0, Vec::len);
        let left = match (&slot.current, &state) {
            (Some(old), Some(_)) => keep::line(&old.left, old.sup.policy().digest()),
            _ => Vec::new(),
        };
        let cfg = c.settings.as_ref().unwrap_or(&slot.config);
        let mut sup = Supervised::new(c.policy, c.config_json, cfg.limits(), cfg.fallback, cfg.quarantine());
        let digest = sup.policy().digest().to_string();
        match sup.start(rt, state) {
            Ok(()) => {
                if let Some(settings) = c.settings {
                    slot.config = settings;
                }
                slot.versions += 1;
                let version = slot.versions;
                let old = slot.current.replace(Serving { sup, version, left });
                self.keep_now = true;
                let detail = match &old {
                    Some(o) => format!(
                        "version {version} replaces {} with {carried} bytes of its state",
                        short(o.sup.policy().digest())
                    ),
                    None => format!("version {version} serving"),
                };
                let first = old.is_none();
                if old.is_some() {
                    slot.previous = old;
                }
                tracing::info!(policy = %c.name, sha256 = %digest, version, state_bytes = carried, origin = c.origin.as_deref().unwrap_or("file"), "policy version swapped in");
                self.report(&c.name, ReloadOutcome::Swapped, Some(digest), detail, c.noticed, c.origin);
                if first && let Some(at) = self.unrestored.iter().position(|k| k.policy == c.name) {
                    let kept = self.unrestored.swap_remove(at);
                    self.restore_one(rt, kept);
                }
            }
            Err(e) => {
                let detail = format!(
                    "init with the serving version's state failed: {}; the serving version keeps serving",
                    wasmsched_core::error_chain(&e)
                );
                tracing::warn!(policy = %c.name, sha256 = %digest, reason = %detail, "policy version refused at the swap");
                self.report(&c.name, ReloadOutcome::Refused, Some(digest), detail, c.noticed, c.origin);
            }
        }
    }

    fn rollback(&mut self, name: &str) -> Result<RolledBack, RollbackError> {
        let slot = self.slots.iter_mut().find(|s| s.name == name).ok_or_else(|| RollbackError::Unknown(name.into()))?;
        let mut back = slot.previous.take().ok_or_else(|| RollbackError::NoPrevious(name.into()))?;
        back.sup.unbench();
        let sha256 = back.sup.policy().digest().to_string();
        let replaced = slot.current.replace(back);
        let replaced_sha = replaced.as_ref().map(|r| r.sup.policy().digest().to_string());
        slot.previous = replaced;
        tracing::info!(policy = name, sha256 = %sha256, "rolled back to the previous version");
        self.keep_now = true;
        let detail = format!("version {} serves again", slot.current.as_ref().map_or(0, |s| s.version));
        self.report(name, ReloadOutcome::RolledBack, Some(sha256.clone()), detail, Instant::now(), None);
        Ok(RolledBack { policy: name.into(), sha256, replaced: replaced_sha })
    }

    fn report(
        &mut self,
        name: &str,
        outcome: ReloadOutcome,
        sha256: Option<String>,
        detail: String,
        noticed: Instant,
        origin: Option<String>,
    ) {
        self.changes.push(record::PolicyChange {
            policy: name.into(),
            outcome,
            sha256: sha256.clone(),
            detail: detail.clone(),
            origin,
        });
        let result = ReloadResult {
            wall_ms: record::wall_ms(),
            outcome,
            sha256,
            detail,
            took_ms: noticed.elapsed().as_secs_f64() * 1e3,
        };
        let slot = self.slot(name);
        let now_ms = self.seen.as_ref().map_or(0, |w| w.time_ms());
        let experiment = self.experiment.as_ref();
        // Another version of the active policy: the loop's watchdog lets go of the benched one
        // on the next tick.
        let released = slot.is_some_and(|s| s.config.role == Role::Active)
            && !matches!(outcome, ReloadOutcome::Refused | ReloadOutcome::Restored);
        self.board.update(|s| {
            if released {
                s.watchdog = None;
            }
            match outcome {
                ReloadOutcome::Refused => s.refused += 1,
                ReloadOutcome::Restored => {}
                _ => s.swaps += 1,
            }
            if let (Some(p), Some(slot)) = (s.policy_mut(name), slot) {
                if p.role != slot.config.role {
                    p.role = slot.config.role;
                    p.shadow = (p.role == Role::Shadow).then(Agreement::default);
                }
                show(p, slot, serving_role(experiment, slot), now_ms);
                p.last_reload = Some(result);
            }
        });
    }

    fn write_failed(&mut self, e: &RecordError) {
        self.write_errors += 1;
        if self.write_errors.is_power_of_two() {
            tracing::error!(error = %wasmsched_core::error_chain(e), failures = self.write_errors, "cannot write the record; going on without it");
        }
    }

    fn finish(&mut self) {
        self.board.update(|s| s.running = false);
        self.journal.finished();
    }
}

/// A short form of a sha256, for log lines and status tables.
fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

/// Put a slot's state into its status entry; `now_ms` is the backend's clock.
fn show(p: &mut PolicyStatus, slot: &Slot, role: Role, now_ms: u64) {
    p.role = role;
    p.version = slot.current.as_ref().map_or(0, |s| s.version);
    p.sha256 = slot.current.as_ref().map(|s| s.sup.policy().digest().to_string());
    p.previous_sha256 = slot.previous.as_ref().map(|s| s.sup.policy().digest().to_string());
    p.counters = slot.current.as_ref().map(|s| s.sup.counters()).unwrap_or_default();
    p.state = match &slot.current {
        None => PolicyState::Absent,
        Some(s) if s.sup.is_benched() => PolicyState::Benched,
        Some(s) if s.sup.is_quarantined(now_ms) => PolicyState::Quarantined,
        Some(_) => PolicyState::Serving,
    };
    if p.role == Role::Shadow {
        p.shadow = Some(slot.agreement);
    }
}

impl Driver for HostDriver {
    fn boundary(&mut self, rt: &Runtime, next_ms: u64) -> bool {
        let due = self.pacer.due(next_ms);
        loop {
            let next = match due {
                None => self.commands.try_recv().map_err(|e| match e {
                    mpsc::TryRecvError::Empty => RecvTimeoutError::Timeout,
                    mpsc::TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
                }),
                Some(due) => self.commands.recv_timeout(due.saturating_duration_since(Instant::now())),
            };
            match next {
                Ok(command) => {
                    if !self.command(rt, command) {
                        return false;
                    }
                }
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => {
                    if let Some(due) = due {
                        std::thread::sleep(due.saturating_duration_since(Instant::now()));
                    }
                    break;
                }
            }
        }
        if self.pacer.late(next_ms, due) {
            self.board.update(|s| s.late_ticks += 1);
        }
        true
    }

    fn held(&mut self, mut held: Vec<wasmsched_core::backend::Held>) {
        held.truncate(crate::status::PENDING_SHOWN);
        if held != self.last_held {
            self.last_held.clone_from(&held);
            self.board.update(|s| s.held = held);
        }
    }

    fn observed(&mut self, world: &World, endpoints: Vec<wasmsched_core::backend::Endpoint>, lead: Option<Leadership>) {
        let (running, queued) = (world.job_count() as u64, world.queue_len() as u64);
        let tenants = crate::status::TenantStatus::of(world);
        self.board.update(|s| {
            (s.jobs_running, s.jobs_queued) = (running, queued);
            s.tenants.clone_from(&tenants);
            s.pending.retain(|p| world.state(p.job).is_some_and(|j| !j.is_running()));
            s.leadership = lead;
            if !endpoints.is_empty() {
                s.endpoints = endpoints;
            }
        });
        self.observe_experiment(world);
        let seen = Arc::new(world.clone());
        self.latest.publish(seen.clone());
        self.journal.observed(seen.clone(), &tenants);
        self.seen = Some(seen);
        if let Some(r) = &mut self.recorder {
            r.observed(world);
        }
    }

    fn policies(&mut self) -> Policies<'_> {
        let mut policies = Policies::default();
        // While an experiment runs, its block's arm is the active policy (in a split, every arm
        // decides for its own jobs) and every other policy a shadow.
        let experiment = self.experiment.as_ref();
        let split = experiment.and_then(|e| e.split());
        let mut arms: Vec<Option<&mut Supervised>> = (0..split.map_or(0, |c| c.arms.len())).map(|_| None).collect();
        for slot in &mut self.slots {
            let role = serving_role(experiment, slot);
            let at = split.and_then(|c| c.arms.iter().position(|a| **a == *slot.name));
            let Some(serving) = slot.current.as_mut() else { continue };
            match (at, role) {
                (Some(k), _) => arms[k] = Some(&mut serving.sup),
                (None, Role::Active) => policies.active = Some(&mut serving.sup),
                (None, Role::Shadow) => policies.shadows.push(&mut serving.sup),
            }
        }
        policies.split = split.map(|experiment| Split { arms, experiment });
        policies
    }

    fn checkpoints(&mut self, tick: u64) -> Vec<Checkpoint> {
        let saved_unix_ms = record::wall_ms();
        self.slots
            .iter_mut()
            .filter_map(|slot| {
                let serving = slot.current.as_mut()?;
                let state = serving.sup.save_state()?;
                Some(Checkpoint {
                    policy: slot.name.clone(),
                    sha256: serving.sup.policy().digest().to_string(),
                    version: serving.version,
                    tick,
                    saved_unix_ms,
                    state,
                    left: serving.left.clone(),
                })
            })
            .collect()
    }

    fn keep_now(&mut self) -> bool {
        std::mem::take(&mut self.keep_now)
    }

    fn restore(&mut self, rt: &Runtime, kept: Vec<Checkpoint>) {
        for c in kept {
            self.restore_one(rt, c);
        }
    }

    fn record(&mut self, tick: Tick<'_>) {
        let time_ms = tick.world.time_ms();
        let shadows = self.write_audit(&tick);
        let version = |name: &str| self.slot(name).and_then(|s| s.current.as_ref()).map_or(0, |c| c.version);
        self.journal.record(&tick, version, &shadows);
        if let Some(r) = &mut self.recorder
            && let Err(e) = r.record(&tick)
        {
            self.write_failed(&e);
        }
        let over_budget = tick.applied().map(|a| a.outcome.over_budget.len() as u64).sum::<u64>();
        let pending: Option<Vec<WhyPending>> = tick.applied().next().is_some().then(|| {
            let said = tick.applied().flat_map(|a| &a.outcome.pending).take(crate::status::PENDING_SHOWN);
            said.filter_map(|p| {
                let name = tick.world.spec(p.job)?.name.clone();
                Some(WhyPending { job: p.job, name, reason: p.reason.clone() })
            })
            .collect()
        });
        let (disruptions, rescued, benched) = (tick.disruptions, tick.rescued.len() as u64, tick.benched_now);
        let budget_spent = tick.budget_spent;
        let now = Instant::now();
        if let Some(then) = self.ticked.replace(now) {
            if self.tick_walls.len() == TICKS_KEPT {
                self.tick_walls.pop_front();
            }
            self.tick_walls.push_back(now.duration_since(then).as_millis() as u64);
        }
        let tick_wall = TickWall::of(self.tick_walls.iter().copied());
        let slots = &self.slots;
        let experiment = self.experiment.as_ref();
        let watchdog = tick.benched.cloned();
        self.board.update(|s| {
            s.tick_wall = tick_wall;
            s.ticked_wall_ms = record::wall_ms();
            s.stall_rescues += rescued;
            s.ticks = tick.number;
            s.decisions += u64::from(tick.asked);
            s.backend_time_ms = time_ms;
            s.disruptions += disruptions;
            s.disruptions_in_window = budget_spent;
            s.over_budget += over_budget;
            if let Some(pending) = pending {
                s.pending = pending;
            }
            s.watchdog_benchings += u64::from(benched);
            s.watchdog = watchdog;
            for slot in slots {
                if let Some(p) = s.policy_mut(&slot.name) {
                    show(p, slot, serving_role(experiment, slot), time_ms);
                }
            }
        });
    }
}
