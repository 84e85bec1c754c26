//! The live backend: real containers on one or more Docker Engines, through bollard.
//!
//! - **Which containers.** Those carrying the selector label (`wasmsched.managed=true` by
//!   default), running or created. Each engine is a node, in the order configured; a
//!   container's labels declare its targets and the GPUs it asks for ([`wasmsched_core::declare`]).
//! - **Queued, placed, preempted.** A container that is *created* (not started) is a queued
//!   job: it arrived when it was created, and waits as never started, or as preempted when it
//!   carries `wasmsched.wait=preempted`. *Placing* it starts it: as it is when it stays on
//!   its engine without GPUs, otherwise as a copy made from its own config with a device
//!   request for exactly the chosen GPUs (Docker fixes devices at create time) on the chosen
//!   engine. *Preempting* a running container stops it (its last checkpoint is final) and
//!   leaves in its place a created copy labelled `wasmsched.wait=preempted`, holding its
//!   `wasmsched.checkpoint` folder and its attained service: the queue lives in Docker, so a
//!   preempted job is still queued after the host restarts, and resumes from its checkpoint
//!   when placed. A copy keeps the job's handle, name and log position (`docker/copy.rs`
//!   has the steps, and how a half-made copy is settled). Without a placing policy, the
//!   default placement starts queued containers first come, first served on their own engine
//!   (`docker/queue.rs`).
//! - **World.** CPU use from the stats API's cumulative CPU time, differenced between
//!   ticks; memory use from the same call; progress from the container's log stream, followed
//!   with Docker's timestamps so each record carries the time its line was written
//!   ([`progress`] has the line formats); GPUs through NVML on the local engine's node
//!   ([`crate::gpu`]), when there are any; the GPUs a job holds from its placement or its
//!   device requests; run and GPU time accrued while it runs.
//! - **Actions.** `set-cpu` and `set-memory` are `docker update` calls (a lifted limit is set
//!   to the engine's whole capacity, which is what Docker can express); `deliver` runs the
//!   container's declared delivery command; `stop` stops a running container and removes a
//!   queued one; `migrate` restarts it from its checkpoint folder on another engine (the image
//!   is carried along if that engine lacks it), on as many GPUs there as it held, the lowest
//!   free; `resize` does the same on the one engine it names (a spread resize is refused: a
//!   container runs on one engine), the copy with a device request for exactly its new GPUs
//!   and the batch size in force as `WASMSCHED_BATCH_SIZE` (kept in the
//!   `wasmsched.batch-size-in-force` label, which the world's batch size is read from);
//!   `place` and `preempt` as above. Placements and resizes start once the same decision's
//!   preemptions, stops and migrations are done.
//! - **Faults.** A request that cannot reach an engine marks it down: its jobs stay in the
//!   world as last seen (nothing the host owns is dropped), the cause is logged once, and the
//!   engine is retried with a growing backoff. When it answers again, its containers are
//!   matched by id, keep their handles, and their logs resume after the last line read. A
//!   container that vanished between observe and apply is an apply error, not a fault; a
//!   garbage log line is reported once per job and cause.

mod actions;
mod copy;
mod discover;
pub mod gpu;
mod queue;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bollard::Docker as Client;
use bollard::errors::Error as DockerError;
use bollard::query_parameters as q;
use futures_util::StreamExt;
use serde::Deserialize;

use wasmsched_core::backend::{
    ApplyError, Backend, Built, DefaultPlacement, Endpoint, Placer, Progress, Settings, Status, filled,
};
use wasmsched_core::bindings::wit;
use wasmsched_core::live::{self, Clock, Logged, progress, unix_ms};
use wasmsched_core::world::{JobId, NodeId, World};

pub use wasmsched_core::live::DEFAULT_SELECTOR;

/// `kind = "docker"`: how the backend reaches its engines. The `[backend]` table of
/// `wasmsched run`; every key is optional.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct DockerConfig {
    /// One endpoint per engine (`"unix:///var/run/docker.sock"`, `"tcp://10.0.0.2:2375"`);
    /// engine i is node i. Default, and in place of an empty list: `DOCKER_HOST`, else the
    /// system socket.
    #[serde(deserialize_with = "engines")]
    pub engines: Vec<String>,
    /// The label (`KEY=VALUE` or `KEY`) that marks the containers to manage (default
    /// `"wasmsched.managed=true"`).
    pub selector: String,
    /// How long one request may take before its engine counts as unreachable (5 s; not a key
    /// of the table).
    #[serde(skip)]
    pub timeout: Duration,
    /// Read GPUs through NVML on the first engine's node (default true; without a driver, or
    /// in a host built without the `nvml` feature, the host says once that it runs without).
    pub gpus: bool,
}

impl Default for DockerConfig {
    fn default() -> Self {
        DockerConfig {
            engines: vec![default_endpoint()],
            selector: DEFAULT_SELECTOR.into(),
            timeout: Duration::from_secs(5),
            gpus: true,
        }
    }
}

impl Settings for DockerConfig {
    const KIND: &'static str = "docker";
    const DOES: &'static str = "runs real containers in real time";

    fn check(&self) -> Result<(), String> {
        filled(&self.selector, "selector is a label, KEY=VALUE or KEY, e.g. \"wasmsched.managed=true\"")
    }
}

impl DockerConfig {
    /// The Docker backend on these engines ([`Docker::new`]).
    pub fn build(&self) -> Result<Built, DockerSetupError> {
        let docker = Docker::new(self.clone())?;
        Ok(Built { backend: Box::new(docker), name: format!("docker ({})", self.engines.join(", ")) })
    }
}

/// The engines as written; none written is the default one.
fn engines<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let engines = Vec::<String>::deserialize(d)?;
    Ok(if engines.is_empty() { vec![default_endpoint()] } else { engines })
}

/// `DOCKER_HOST` if set, else the system socket.
pub fn default_endpoint() -> String {
    std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "unix:///var/run/docker.sock".into())
}

/// Why the backend could not start.
#[derive(Debug, thiserror::Error)]
pub enum DockerSetupError {
    /// The async runtime could not start.
    #[error("cannot start the Docker client's runtime")]
    Runtime(#[source] std::io::Error),
    /// No engine is configured.
    #[error("no Docker engine configured: list at least one in [backend] engines")]
    NoEngine,
    /// An endpoint is not a URL bollard can use.
    #[error("engine {endpoint}: {reason}; write unix:///path/to/docker.sock or tcp://HOST:PORT")]
    Endpoint {
        /// The endpoint as written.
        endpoint: String,
        /// Why it cannot be used.
        reason: String,
    },
}

/// A configured engine: its client, and whether it answers.
struct Engine {
    endpoint: String,
    /// Made when the engine is first reached, and again after it was down.
    client: Option<Client>,
    /// Capacity, once the engine has answered `info`.
    capacity: Option<(u64, u64)>,
    /// Set while the engine does not answer.
    down: Option<Down>,
}

struct Down {
    since: Instant,
    retry_at: Instant,
    backoff: Duration,
}

const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// One managed container.
struct Managed {
    /// What every live backend keeps of its jobs.
    job: live::Job,
    engine: usize,
    /// Cumulative CPU time (ns) at the last stats read, and when.
    last_cpu: Option<(u64, Instant)>,
    follower: Option<tokio::task::JoinHandle<()>>,
}

/// Real containers on Docker Engines; see the module docs.
pub struct Docker {
    rt: tokio::runtime::Runtime,
    config: DockerConfig,
    engines: Vec<Engine>,
    jobs: BTreeMap<Arc<str>, Managed>,
    inbox: progress::Inbox,
    clock: Clock,
    /// Causes already logged, so each is logged once.
    logged: Logged,
    gpus: Option<crate::gpu::GpuProbe>,
    /// Who starts queued containers.
    placer: Placer,
    /// Which engines answered at the last observation.
    up: Vec<bool>,
}

impl Docker {
    /// Set up clients for the configured engines. Nothing is contacted yet: an engine that is
    /// not up is retried from the first observe on.
    pub fn new(config: DockerConfig) -> Result<Docker, DockerSetupError> {
        if config.engines.is_empty() {
            return Err(DockerSetupError::NoEngine);
        }
        let rt =
            tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(DockerSetupError::Runtime)?;
        let engines = config
            .engines
            .iter()
            .map(|endpoint| {
                check_scheme(endpoint)
                    .map_err(|reason| DockerSetupError::Endpoint { endpoint: endpoint.clone(), reason })?;
                Ok(Engine { endpoint: endpoint.clone(), client: None, capacity: None, down: None })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let gpus = if config.gpus {
            match crate::gpu::GpuProbe::open() {
                Ok(probe) => Some(probe),
                Err(why) => {
                    tracing::info!("running without GPUs: {why}");
                    None
                }
            }
        } else {
            None
        };
        Ok(Docker {
            rt,
            config,
            engines,
            jobs: BTreeMap::new(),
            inbox: progress::Inbox::default(),
            clock: Clock::default(),
            logged: Logged::default(),
            gpus,
            placer: Placer::Backend,
            up: Vec::new(),
        })
    }

    /// Whether engine `i` answered its last request.
    pub fn engine_up(&self, i: usize) -> bool {
        self.engines.get(i).is_some_and(|e| e.down.is_none() && e.capacity.is_some())
    }

    /// Mark engine `i` unreachable after `error`; its jobs stay as they were.
    fn engine_failed(&mut self, i: usize, error: &DockerError) {
        let now = Instant::now();
        let engine = &mut self.engines[i];
        let backoff = engine.down.as_ref().map_or(FIRST_BACKOFF, |d| (d.backoff * 2).min(MAX_BACKOFF));
        let since = engine.down.as_ref().map_or(now, |d| d.since);
        engine.down = Some(Down { since, retry_at: now + backoff, backoff });
        let endpoint = engine.endpoint.clone();
        self.logged.once(format!("down:{i}"), || {
            format!("Docker engine {endpoint} is unreachable ({error}); its jobs keep their last state, retrying with backoff")
        });
        for m in self.jobs.values_mut().filter(|m| m.engine == i) {
            if let Some(f) = m.follower.take() {
                f.abort();
            }
            m.last_cpu = None;
        }
    }

    /// Contact engine `i` if it is due; true when it is up.
    fn reach(&mut self, i: usize, world: &mut World) -> bool {
        let now = Instant::now();
        if self.engines[i].down.as_ref().is_some_and(|d| now < d.retry_at) {
            return false;
        }
        if self.engines[i].capacity.is_some() && self.engines[i].down.is_none() {
            return true;
        }
        let timeout = self.config.timeout;
        // A fresh client each time: the socket may not have existed before, and an old
        // client's pooled connections died with the engine.
        let client = match connect(&self.engines[i].endpoint, timeout) {
            Ok(c) => c,
            Err(e) => {
                self.engine_failed(i, &e);
                return false;
            }
        };
        let answer = self.rt.block_on(async move {
            let client = within(timeout, client.negotiate_version()).await?;
            let info = within(timeout, client.info()).await?;
            Ok::<_, DockerError>((client, info))
        });
        match answer {
            Ok((client, info)) => {
                let cpu = info.ncpu.unwrap_or(1).max(1) as u64 * 1000;
                let memory = info.mem_total.unwrap_or(0).max(0) as u64;
                let engine = &mut self.engines[i];
                engine.client = Some(client);
                if let Some(down) = engine.down.take() {
                    tracing::info!(engine = %engine.endpoint, "Docker engine answers again after {:.1?}", down.since.elapsed());
                    self.logged.clear(&format!("down:{i}"));
                }
                let node = wit::Node {
                    name: info.name.unwrap_or_else(|| engine.endpoint.clone()),
                    cpu_millicores: cpu,
                    memory_bytes: memory,
                    gpu_memory_bytes: match (&self.gpus, i) {
                        (Some(probe), 0) => probe.gpus().iter().map(|g| g.memory_total_bytes).collect(),
                        _ => Vec::new(),
                    },
                    gpu_type: match (&self.gpus, i) {
                        (Some(probe), 0) => probe.gpus().first().map(|g| g.name.clone()).unwrap_or_default(),
                        _ => String::new(),
                    },
                    labels: Vec::new(),
                    domains: Vec::new(),
                };
                if engine.capacity.is_none() {
                    engine.capacity = Some((cpu, memory));
                    world.set_node(NodeId(i as u32), node);
                }
                true
            }
            Err(e) => {
                self.engine_failed(i, &e);
                false
            }
        }
    }

    /// Follow a container's log from after the last line read.
    fn follow(&self, engine: usize, id: &str, m: &Managed) -> Option<tokio::task::JoinHandle<()>> {
        let client = self.engines[engine].client.clone()?;
        let (id, metrics, inbox, last) =
            (Arc::<str>::from(id), m.job.metrics.clone(), self.inbox.clone(), m.job.last_line_ns.clone());
        Some(self.rt.spawn(async move {
            let after = last.load(std::sync::atomic::Ordering::Relaxed);
            let options = q::LogsOptions {
                follow: true,
                stdout: true,
                stderr: true,
                timestamps: true,
                since: i32::try_from(after / 1_000_000_000).unwrap_or(0),
                ..Default::default()
            };
            let mut stream = client.logs(&id, Some(options));
            let mut reader = progress::Reader::new(metrics, after);
            while let Some(Ok(chunk)) = stream.next().await {
                inbox.feed(&id, &mut reader, &chunk.into_bytes(), &last);
            }
        }))
    }

    /// Read every managed container's CPU and memory use on the engines that are up.
    fn measure(&mut self, up: &[bool], world: &mut World) {
        let timeout = self.config.timeout;
        let asks: Vec<_> = self
            .jobs
            .iter()
            .filter(|(_, m)| up[m.engine] && m.follower.is_some())
            .filter_map(|(id, m)| {
                let (client, id) = (self.engines[m.engine].client.clone()?, id.clone());
                Some(async move {
                    let options = q::StatsOptions { stream: false, one_shot: true };
                    let mut stream = client.stats(&id, Some(options));
                    let stats = tokio::time::timeout(timeout, stream.next()).await.ok().flatten();
                    (id, stats, Instant::now())
                })
            })
            .collect();
        for (id, stats, at) in self.rt.block_on(futures_util::future::join_all(asks)) {
            let Some(Ok(stats)) = stats else { continue };
            let Some(m) = self.jobs.get_mut(&id) else { continue };
            let Some(state) = world.state_mut(m.job.handle) else { continue };
            let cpu_ns = stats.cpu_stats.and_then(|c| c.cpu_usage).and_then(|u| u.total_usage);
            if let Some(now_ns) = cpu_ns {
                if let Some((then_ns, then)) = m.last_cpu {
                    let wall = at.duration_since(then).as_nanos().max(1) as f64;
                    state.cpu_used_millicores = (now_ns.saturating_sub(then_ns) as f64 / wall * 1000.0).round() as u64;
                }
                m.last_cpu = Some((now_ns, at));
            }
            if let Some(used) = stats.memory_stats.and_then(|s| s.usage) {
                state.memory_used_bytes = used;
            }
        }
    }

    /// Put the GPUs' use and each container's share of them into the world.
    fn measure_gpus(&mut self, world: &mut World) {
        let Some(probe) = &mut self.gpus else { return };
        let sample = match probe.sample() {
            Ok(s) => s,
            Err(e) => {
                let message = format!("cannot read the GPUs through NVML ({e}); GPU use stays as last read");
                self.logged.once("nvml-sample".into(), || message);
                return;
            }
        };
        for g in &sample.gpus {
            world.set_gpu_use(NodeId(0), g.index, g.utilisation_percent as f32, g.memory_used_bytes);
        }
        let cgroups = crate::gpu::ProcCgroups::default();
        let attributed = crate::gpu::attribute(&sample, |pid| cgroups.container(pid));
        for (id, m) in &self.jobs {
            let Some(state) = world.state_mut(m.job.handle) else { continue };
            match attributed.containers.get(id.as_ref()).filter(|_| m.engine == 0) {
                Some(use_) => {
                    let slot = wasmsched_core::world::GpuSlot { node: NodeId(0), index: use_.gpu };
                    if !state.gpus.contains(&slot) {
                        state.gpus.push(slot);
                    }
                    state.gpu_used_percent = use_.utilisation_percent;
                }
                None => state.gpu_used_percent = 0.0,
            }
        }
    }

    /// Hand the lines the followers read to the world, in order.
    fn deliver_progress(&mut self, world: &mut World, until_ms: u64) {
        let origin = self.clock.origin_unix_ms();
        for incoming in self.inbox.take() {
            let Some(m) = self.jobs.get_mut(&incoming.key) else { continue };
            let id = incoming.key.clone();
            let fallback = || short(&id).to_string();
            if let Some((key, message)) =
                progress::hand(world, m.job.handle, &mut m.job.epochs, incoming, (origin, until_ms), fallback)
            {
                self.logged.once(key, || message);
            }
        }
    }
}

impl Backend for Docker {
    fn set_placer(&mut self, by: Placer) {
        self.placer = by;
    }

    fn observe(&mut self, world: &mut World, until_ms: u64) -> bool {
        self.clock.wait_for(until_ms);
        // Every job that ran since the last observation ran all of it: placements and
        // preemptions happen right after an observation, at its time.
        world.accrue_service(until_ms.saturating_sub(world.time_ms()));
        while world.nodes().len() < self.engines.len() {
            let e = &self.engines[world.nodes().len()];
            world.add_node(wit::Node {
                name: e.endpoint.clone(),
                cpu_millicores: 0,
                memory_bytes: 0,
                gpu_memory_bytes: vec![],
                gpu_type: String::new(),
                labels: Vec::new(),
                domains: Vec::new(),
            });
        }
        let mut up = vec![false; self.engines.len()];
        let mut gone = Vec::new();
        for (i, is_up) in up.iter_mut().enumerate() {
            if !self.reach(i, world) {
                continue;
            }
            match self.discover(i, world) {
                Ok(g) => {
                    *is_up = true;
                    gone.extend(g);
                }
                Err(e) => self.engine_failed(i, &e),
            }
        }
        // A container that ended may still have its last lines in flight: let its follower
        // read to the end of the stream (briefly) before its last records are handed over.
        let followers: Vec<_> = gone.iter().filter_map(|id| self.jobs.get_mut(id)?.follower.take()).collect();
        self.rt.block_on(async {
            for f in followers {
                let _ = tokio::time::timeout(Duration::from_millis(300), f).await;
            }
        });
        for (i, &is_up) in up.iter().enumerate() {
            world.set_node_down(NodeId(i as u32), !is_up);
        }
        self.up.clone_from(&up);
        self.measure(&up, world);
        self.measure_gpus(world);
        self.deliver_progress(world, until_ms);
        for id in gone {
            if let Some(m) = self.jobs.remove(&id) {
                tracing::info!(job = %m.job.handle, container = %short(&id), "container ended");
                world.remove_job(m.job.handle);
            }
        }
        world.set_time_ms(until_ms);
        if self.placer == Placer::Backend {
            self.place_queued(world, None);
        }
        true
    }

    fn placement(&mut self) -> Option<&mut dyn DefaultPlacement> {
        Some(self)
    }

    fn progress(&self) -> Option<&dyn Progress> {
        Some(self)
    }

    fn status(&self) -> Option<&dyn Status> {
        Some(self)
    }

    fn apply(&mut self, actions: &[wit::Action], world: &mut World) -> Vec<ApplyError> {
        // Preemptions, stops and migrations go first: a placement or a resize in the same
        // decision may take the GPUs they free, and must not start before they are free.
        let (places, rest): (Vec<&wit::Action>, Vec<&wit::Action>) =
            actions.iter().partition(|a| matches!(a.kind, wit::ActionKind::Place(_) | wit::ActionKind::Resize(_)));
        let mut errors = self.apply_some(&rest, world);
        errors.extend(self.apply_some(&places, world));
        errors
    }
}

impl DefaultPlacement for Docker {
    fn startable(&self, world: &World) -> Vec<JobId> {
        Docker::startable(self, world)
    }

    fn rescue(&mut self, jobs: &[JobId], world: &mut World) -> Vec<JobId> {
        self.place_queued(world, Some(jobs))
    }
}

/// Its jobs' progress is what they report; a new GPU share is a new container.
impl Progress for Docker {
    fn gpu_share_restarts(&self) -> bool {
        true
    }
}

impl Status for Docker {
    fn endpoints(&self) -> Vec<Endpoint> {
        self.engines
            .iter()
            .enumerate()
            .map(|(i, e)| Endpoint {
                kind: "engine".into(),
                name: e.endpoint.clone(),
                up: self.engine_up(i),
                jobs: self.jobs.values().filter(|m| m.engine == i).count() as u32,
                down_for_ms: e.down.as_ref().map(|d| d.since.elapsed().as_millis() as u64),
                ..Endpoint::default()
            })
            .collect()
    }
}

impl Docker {
    /// Put `actions` into force at once (concurrently); the ones that failed.
    fn apply_some(&mut self, actions: &[&wit::Action], world: &mut World) -> Vec<ApplyError> {
        let by_handle: HashMap<JobId, Arc<str>> = self.jobs.iter().map(|(id, m)| (m.job.handle, id.clone())).collect();
        let mut errors = Vec::new();
        let mut asks = Vec::new();
        for action in actions {
            let (Some(id), Some(state)) = (by_handle.get(&action.job), world.state(action.job)) else {
                errors.push(ApplyError { job: action.job, reason: "the container is no longer managed".into() });
                continue;
            };
            let m = &self.jobs[id];
            let Some(client) = self.engines[m.engine].client.clone().filter(|_| self.engine_up(m.engine)) else {
                let reason = format!("engine {} is unreachable", self.engines[m.engine].endpoint);
                errors.push(ApplyError { job: action.job, reason });
                continue;
            };
            let there = match action.kind {
                wit::ActionKind::Migrate(to) => world.gpus_after_migration(action.job, to),
                _ => Vec::new(),
            };
            asks.push(self.act(client, id.clone(), m, action, state, there));
        }
        let done = self.rt.block_on(futures_util::future::join_all(asks.into_iter().map(|ask| async move {
            let result = within(ask.limit, ask.fut).await;
            (ask.id, ask.job, ask.places, result)
        })));
        for (id, job, places, result) in done {
            match result {
                Ok(effect) => self.took_effect(&id, job, effect, world),
                Err(e) => {
                    let engine = self.jobs.get(&id).map(|m| m.engine);
                    let reason = match &e {
                        DockerError::DockerResponseServerError { status_code: 404, .. } => {
                            format!("container {} is gone", short(&id))
                        }
                        DockerError::DockerResponseServerError { message, .. } => {
                            if let Some(m) = self.jobs.get_mut(&id).filter(|_| places) {
                                m.job.refused = Some(message.clone());
                            }
                            message.clone()
                        }
                        other => {
                            if let Some(i) = engine {
                                self.engine_failed(i, other);
                            }
                            format!("engine unreachable: {other}")
                        }
                    };
                    errors.push(ApplyError { job, reason });
                }
            }
        }
        errors
    }
}

/// A container's CPU limit in millicores, from its host config; None when unlimited.
fn cpu_limit(hc: &bollard::models::HostConfig) -> Option<u64> {
    if let Some(nano) = hc.nano_cpus.filter(|&n| n > 0) {
        return Some(nano as u64 / 1_000_000);
    }
    match (hc.cpu_quota, hc.cpu_period) {
        (Some(quota), period) if quota > 0 => {
            Some(quota as u64 * 1000 / period.filter(|&p| p > 0).unwrap_or(100_000) as u64)
        }
        _ => None,
    }
}

/// Whether bollard can use `endpoint`; says why not.
fn check_scheme(endpoint: &str) -> Result<(), String> {
    let known = ["unix://", "tcp://", "http://"].iter().any(|s| endpoint.starts_with(s));
    if known { Ok(()) } else { Err("unknown scheme".into()) }
}

/// A client for `endpoint` (whose scheme was checked); nothing is contacted, but a Unix
/// socket must exist.
pub fn connect(endpoint: &str, timeout: Duration) -> Result<Client, DockerError> {
    let secs = timeout.as_secs().max(1);
    if endpoint.starts_with("unix://") {
        Client::connect_with_unix(endpoint, secs, bollard::API_DEFAULT_VERSION)
    } else {
        Client::connect_with_http(endpoint, secs, bollard::API_DEFAULT_VERSION)
    }
}

/// `fut`, failing as unreachable after `limit`.
async fn within<T>(limit: Duration, fut: impl Future<Output = Result<T, DockerError>>) -> Result<T, DockerError> {
    live::within(limit, fut, || DockerError::RequestTimeoutError).await
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

#[cfg(test)]
mod tests;
