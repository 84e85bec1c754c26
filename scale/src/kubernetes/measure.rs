//! One run: the pods created as fast as the bounded concurrency allows, watched until every one
//! is bound, then a quiet window; the scheduler's process, the apiserver's and (for wasmsched)
//! the host's status sampled every second throughout.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures_util::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, PostParams};
use kube::runtime::watcher::{self, Event};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use super::dra::{self, DraReport};
use super::host::{self, HostProcess, LogCounts, StatusReading, TickWall};
use super::manifests::{self, NodeShape};
use super::{Options, ScaleError, Scheduler};
use crate::procfs::{self, Probe, Sample};
use crate::stats::{self, Latency};

/// A scheduler just started: its process, and the host's handle (stopped when the run ends).
#[derive(Debug)]
pub struct Started {
    /// The process measured.
    pub subject: Subject,
    /// The host, checked every second and stopped at the end (wasmsched only).
    pub host: Option<HostProcess>,
}

/// The scheduler under test, as a process.
#[derive(Debug)]
pub struct Subject {
    /// Which one.
    pub scheduler: Scheduler,
    /// Its pid.
    pub pid: u32,
    /// When it was started.
    pub started: Instant,
    /// Its log, and how much of it was there before this run.
    pub log: PathBuf,
    /// The log's length when it was started.
    pub log_offset: u64,
    /// The host's control API (wasmsched only).
    pub status_api: Option<SocketAddr>,
}

/// What one run measured. None where a figure could not be had ("n/a" in the table).
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// `wasmsched` or `kube-scheduler`.
    pub scheduler: String,
    /// The run's namespace.
    pub namespace: String,
    /// Pods created.
    pub pods_created: u64,
    /// Pods whose creation the apiserver refused.
    pub create_errors: u64,
    /// Pods seen bound.
    pub pods_bound: u64,
    /// Pods bound to a node that is not one of the harness's (a real kubelet's), despite
    /// their node selector.
    pub bound_off_scale_nodes: u64,
    /// The most pods bound to one node.
    pub max_pods_per_node: u32,
    /// Scale nodes given more pods than their pod capacity, cores or GPUs hold.
    pub overcommitted_nodes: u64,
    /// Whether the run gave up waiting before every pod was bound.
    pub timed_out: bool,
    /// From the first pod created to the last one created, seconds.
    pub create_s: f64,
    /// From the first pod created to the last bind seen, seconds.
    pub bind_span_s: f64,
    /// Pods bound / (last bind − first pod created).
    pub binds_per_s: Option<f64>,
    /// Pods bound / (last bind − the scheduler's start).
    pub binds_per_s_from_start: Option<f64>,
    /// Pods bound / (last bind − first bind): the binding itself, the scheduler's start-up and
    /// its first decision left out.
    pub binds_per_s_binding: Option<f64>,
    /// Pod created (the create call answered) to bound (seen by the watch).
    pub latency: Option<Latency>,
    /// The scheduler's largest resident memory, bytes.
    pub rss_peak_bytes: Option<u64>,
    /// Its mean resident memory in the quiet window after all were bound, bytes.
    pub rss_steady_bytes: Option<u64>,
    /// Its CPU while binding (first pod created to all bound), % of one core.
    pub cpu_binding_pct: Option<f64>,
    /// Its CPU in the quiet window, % of one core.
    pub cpu_steady_pct: Option<f64>,
    /// The apiserver's CPU while binding, % of one core (it shares the machine).
    pub apiserver_cpu_binding_pct: Option<f64>,
    /// The scheduler's log, counted from its start.
    pub log: Option<LogCounts>,
    /// Its log lines per second while binding.
    pub log_lines_per_s_binding: Option<f64>,
    /// Its log lines per second in the quiet window.
    pub log_lines_per_s_steady: Option<f64>,
    /// The host's apiserver requests per second while binding (`endpoints[].requests`).
    pub requests_per_s_binding: Option<f64>,
    /// The same in the quiet window.
    pub requests_per_s_steady: Option<f64>,
    /// The host's loop-tick durations at the end (`tick_wall`).
    pub tick_wall: Option<TickWall>,
    /// The host's ticks at the end.
    pub host_ticks: Option<u64>,
    /// With groups (`--group-size` above 1): how they were bound.
    pub groups: Option<GroupReport>,
    /// With `--dra`: what the scheduler wrote into the pods' claims, read after the quiet window.
    pub dra: Option<DraReport>,
}

/// How a run bound its pod groups.
#[derive(Clone, Debug, Serialize)]
pub struct GroupReport {
    /// Groups created (each with its `PodGroup`).
    pub created: u64,
    /// Groups every pod of which was bound.
    pub bound_whole: u64,
    /// Groups some pods of which, not all, were bound when the run ended.
    pub partly_bound: u64,
    /// Groups bound whole / (last bind − first pod created).
    pub per_s: Option<f64>,
    /// Per group: its last pod created (the create answered) to its last pod bound.
    pub latency: Option<Latency>,
}

/// A reading of everything at one moment.
#[derive(Clone, Copy, Debug)]
struct Mark {
    at: Instant,
    subject: Option<Sample>,
    apiserver: Option<Sample>,
    status: Option<StatusReading>,
    log_lines: Option<u64>,
}

/// The probes of one run.
struct Probes<'a> {
    subject: Probe,
    apiserver: Option<Probe>,
    status_api: Option<SocketAddr>,
    log: &'a PathBuf,
    log_offset: u64,
}

impl<'a> Probes<'a> {
    /// The probes of `subject`, and of the apiserver where its pid is known.
    fn of(subject: &'a Subject, apiserver_pid: Option<u32>) -> Self {
        let ticks = procfs::clock_ticks_per_second();
        Probes {
            subject: Probe::new(subject.pid, ticks),
            apiserver: apiserver_pid.map(|pid| Probe::new(pid, ticks)),
            status_api: subject.status_api,
            log: &subject.log,
            log_offset: subject.log_offset,
        }
    }

    async fn mark(&self, with_log: bool) -> Mark {
        let status = match self.status_api {
            Some(addr) => host::get_status(addr).await.ok().map(|v| host::status_reading(&v)),
            None => None,
        };
        Mark {
            at: Instant::now(),
            subject: self.subject.sample(),
            apiserver: self.apiserver.as_ref().and_then(Probe::sample),
            status,
            log_lines: if with_log { self.log_counts().map(|c| c.lines) } else { None },
        }
    }

    fn log_counts(&self) -> Option<LogCounts> {
        let bytes = std::fs::read(self.log).ok()?;
        let from = usize::try_from(self.log_offset).ok()?.min(bytes.len());
        Some(host::log_counts(&String::from_utf8_lossy(&bytes[from..])))
    }
}

/// What the binding phase saw: the pods created and bound (by name, when), the binds per node,
/// each pod's node and, once creation ended, how many creates the apiserver refused.
#[derive(Default)]
struct Tally {
    created: HashMap<String, Instant>,
    bound: HashMap<String, Instant>,
    per_node: HashMap<String, u32>,
    nodes: HashMap<String, String>,
    create_errors: Option<u64>,
}

impl Tally {
    /// Every pod created, each one bound or refused.
    fn done(&self, pods: u32) -> bool {
        self.create_errors.is_some_and(|errors| {
            self.bound.len() as u64 + errors >= u64::from(pods)
                && self.created.keys().all(|k| self.bound.contains_key(k))
        })
    }

    /// A pod's first bind (the watch may repeat one).
    fn bind(&mut self, name: String, node: String, at: Instant) {
        if let std::collections::hash_map::Entry::Vacant(e) = self.bound.entry(name.clone()) {
            e.insert(at);
            *self.per_node.entry(node.clone()).or_default() += 1;
            self.nodes.insert(name, node);
        }
    }

    /// The creates already answered.
    fn take_created(&mut self, rx: &mut mpsc::UnboundedReceiver<(String, Instant)>) {
        while let Ok((name, at)) = rx.try_recv() {
            self.created.insert(name, at);
        }
    }
}

/// The run's readings: at the start, when binding ended, and after the quiet window; the
/// subject's peak memory, and its memory each second of the quiet window.
struct Readings {
    start: Mark,
    all_bound: Mark,
    end: Mark,
    peak_rss: Option<u64>,
    steady_rss: Vec<u64>,
}

/// Creates the run's pods in `namespace` for `scheduler` and measures until all are bound (or
/// `options.timeout`), then for `options.steady`. `start_scheduler` starts it: before the pods
/// are created, or after with `options.precreate`. The host is checked every second (a host that
/// exits ends the run with an error) and stopped at the end.
pub async fn run<S>(
    client: &kube::Client,
    namespace: &str,
    scheduler: Scheduler,
    start_scheduler: S,
    apiserver_pid: Option<u32>,
    options: &Options,
) -> Result<RunReport, ScaleError>
where
    S: Future<Output = Result<Started, ScaleError>>,
{
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);

    // The watch first, listed and empty, so no bind can be missed.
    let (bound_tx, mut bound_rx) = mpsc::unbounded_channel::<(String, String, Instant)>();
    let (listed_tx, listed_rx) = oneshot::channel();
    let watch = tokio::spawn(watch_binds(pods.clone(), bound_tx, listed_tx));
    let _ = tokio::time::timeout(Duration::from_secs(30), listed_rx).await;

    let (created_tx, mut created_rx) = mpsc::unbounded_channel::<(String, Instant)>();
    let mut create = Some(create_pods(pods.clone(), namespace.to_owned(), scheduler, options.clone(), created_tx));
    let mut tally = Tally::default();
    if options.precreate {
        if let Some(create) = create.take() {
            tally.create_errors = Some(create.await);
        }
        tally.take_created(&mut created_rx);
        let created = tally.created.len();
        tracing::info!(scheduler = scheduler.name(), created, "pods created; starting the scheduler");
    }
    let Started { subject, mut host } = start_scheduler.await?;
    let mut creator = create.map(tokio::spawn);

    let probes = Probes::of(&subject, apiserver_pid);
    let start = probes.mark(true).await;
    let mut peak_rss = start.subject.map(|s| s.rss_bytes);
    let mut every_second = tokio::time::interval(Duration::from_secs(1));
    let deadline = Instant::now() + options.timeout;
    let mut last_progress = Instant::now();
    let timed_out = loop {
        if tally.done(options.pods) {
            break false;
        }
        tokio::select! {
            Some((name, at)) = created_rx.recv() => { tally.created.insert(name, at); }
            Some((name, node, at)) = bound_rx.recv() => tally.bind(name, node, at),
            done = async { creator.as_mut().expect("polled only while running").await }, if creator.is_some() => {
                creator = None;
                // Whatever is still in the channel was sent before the creator ended.
                tally.take_created(&mut created_rx);
                tally.create_errors = Some(done.unwrap_or(u64::from(options.pods)));
            }
            _ = every_second.tick() => {
                let m = probes.mark(false).await;
                peak_rss = peak_rss.max(m.subject.map(|s| s.rss_bytes));
                if let Some(h) = host.as_mut() { h.check()?; }
                if Instant::now() > deadline { break true; }
                if Instant::now() > last_progress + Duration::from_secs(10) {
                    last_progress = Instant::now();
                    let (created, bound) = (tally.created.len(), tally.bound.len());
                    tracing::info!(scheduler = subject.scheduler.name(), created, bound, "waiting for binds");
                }
            }
        }
    };
    let all_bound = probes.mark(true).await;
    if let Some(c) = creator {
        c.abort();
    }
    let bound = tally.bound.len();
    tracing::info!(scheduler = subject.scheduler.name(), bound, timed_out, "binding done; quiet window");

    let steady_rss = quiet_window(&probes, host.as_mut(), options.steady, &mut peak_rss).await?;
    let end = probes.mark(true).await;
    watch.abort();
    drop(host); // stopped: what follows is arithmetic and reading the claims
    let readings = Readings { start, all_bound, end, peak_rss, steady_rss };
    let claims = if options.dra { dra::check(client, namespace, &tally.nodes, options.pod_gpus).await } else { None };
    Ok(RunReport { dra: claims, ..report(&subject, namespace, options, &tally, &readings, &probes, timed_out) })
}

/// The quiet window after binding: the subject's memory each second for `steady` (the peak
/// kept up), the host checked alike.
async fn quiet_window(
    probes: &Probes<'_>,
    mut host: Option<&mut HostProcess>,
    steady: Duration,
    peak_rss: &mut Option<u64>,
) -> Result<Vec<u64>, ScaleError> {
    let mut steady_rss = Vec::new();
    let steady_until = Instant::now() + steady;
    while Instant::now() < steady_until {
        tokio::time::sleep(Duration::from_secs(1).min(steady_until.saturating_duration_since(Instant::now()))).await;
        let m = probes.mark(false).await;
        if let Some(s) = m.subject {
            steady_rss.push(s.rss_bytes);
            *peak_rss = (*peak_rss).max(Some(s.rss_bytes));
        }
        if let Some(h) = host.as_mut() {
            h.check()?;
        }
    }
    Ok(steady_rss)
}

/// The run's figures from what it saw.
fn report(
    subject: &Subject,
    namespace: &str,
    options: &Options,
    tally: &Tally,
    readings: &Readings,
    probes: &Probes<'_>,
    timed_out: bool,
) -> RunReport {
    let Tally { created, bound, per_node, create_errors, .. } = tally;
    let Readings { start, all_bound, end, peak_rss, steady_rss } = readings;
    let shape = NodeShape::for_load(options.nodes, options.pods, options.gpus_per_node);
    let fits = |pods: u32| pods <= shape.pods && pods <= shape.cores && pods * options.pod_gpus <= shape.gpus;

    let first_created = created.values().min().copied();
    let last_created = created.values().max().copied();
    let (first_bind, last_bind) = (bound.values().min().copied(), bound.values().max().copied());
    let latencies: Vec<Duration> =
        bound.iter().filter_map(|(name, at)| Some(at.saturating_duration_since(*created.get(name)?))).collect();
    let span = |from: Option<Instant>, to: Option<Instant>| match (from, to) {
        (Some(a), Some(b)) => b.saturating_duration_since(a),
        _ => Duration::ZERO,
    };
    let n_bound = bound.len() as f64;
    let binding = all_bound.at.saturating_duration_since(start.at);
    let steady = end.at.saturating_duration_since(all_bound.at);
    let cpu = |a: Option<Sample>, b: Option<Sample>, over| procfs::core_percent(a?, b?, over);
    let diff = |a: Option<u64>, b: Option<u64>, over| stats::per_second(b?.checked_sub(a?)? as f64, over);
    let requests = |m: &Mark| m.status.and_then(|s| s.requests);

    RunReport {
        scheduler: subject.scheduler.name().to_owned(),
        namespace: namespace.to_owned(),
        pods_created: created.len() as u64,
        create_errors: create_errors.unwrap_or(0),
        pods_bound: bound.len() as u64,
        bound_off_scale_nodes: per_node
            .iter()
            .filter(|(node, _)| !node.starts_with(manifests::NODE_PREFIX))
            .map(|(_, n)| u64::from(*n))
            .sum(),
        max_pods_per_node: per_node.values().copied().max().unwrap_or(0),
        overcommitted_nodes: per_node
            .iter()
            .filter(|(node, n)| node.starts_with(manifests::NODE_PREFIX) && !fits(**n))
            .count() as u64,
        timed_out,
        create_s: span(first_created, last_created).as_secs_f64(),
        bind_span_s: span(first_created, last_bind).as_secs_f64(),
        binds_per_s: stats::per_second(n_bound, span(first_created, last_bind)),
        binds_per_s_from_start: stats::per_second(n_bound, span(Some(subject.started), last_bind)),
        binds_per_s_binding: stats::per_second(n_bound, span(first_bind, last_bind)),
        latency: stats::latency(latencies),
        rss_peak_bytes: *peak_rss,
        rss_steady_bytes: (!steady_rss.is_empty()).then(|| steady_rss.iter().sum::<u64>() / steady_rss.len() as u64),
        cpu_binding_pct: cpu(start.subject, all_bound.subject, binding),
        cpu_steady_pct: cpu(all_bound.subject, end.subject, steady),
        apiserver_cpu_binding_pct: cpu(start.apiserver, all_bound.apiserver, binding),
        log: probes.log_counts(),
        log_lines_per_s_binding: diff(start.log_lines, all_bound.log_lines, binding),
        log_lines_per_s_steady: diff(all_bound.log_lines, end.log_lines, steady),
        requests_per_s_binding: diff(requests(start), requests(all_bound), binding),
        requests_per_s_steady: diff(requests(all_bound), requests(end), steady),
        tick_wall: end.status.and_then(|s| s.tick_wall),
        host_ticks: end.status.map(|s| s.ticks),
        groups: (options.group_size > 1).then(|| groups(created, bound, options.group_size, first_created, last_bind)),
        dra: None,
    }
}

/// How the pods `created` and `bound` (by name) went as groups of `size`.
fn groups(
    created: &HashMap<String, Instant>,
    bound: &HashMap<String, Instant>,
    size: u32,
    first_created: Option<Instant>,
    last_bind: Option<Instant>,
) -> GroupReport {
    // Per group: its pods created, bound, the last create and the last bind.
    let mut of: HashMap<u32, (u32, u32, Option<Instant>, Option<Instant>)> = HashMap::new();
    for (name, at) in created {
        let Some(i) = manifests::pod_index(name) else { continue };
        let g = of.entry(manifests::group_of(i, size)).or_default();
        g.0 += 1;
        g.2 = g.2.max(Some(*at));
        if let Some(b) = bound.get(name) {
            g.1 += 1;
            g.3 = g.3.max(Some(*b));
        }
    }
    let whole: Vec<_> = of.values().filter(|g| g.1 == size).collect();
    let latencies = whole.iter().filter_map(|g| Some(g.3?.saturating_duration_since(g.2?))).collect();
    let span = match (first_created, last_bind) {
        (Some(a), Some(b)) => b.saturating_duration_since(a),
        _ => Duration::ZERO,
    };
    GroupReport {
        created: of.len() as u64,
        bound_whole: whole.len() as u64,
        partly_bound: of.values().filter(|g| g.1 > 0 && g.1 < size).count() as u64,
        per_s: stats::per_second(whole.len() as f64, span),
        latency: stats::latency(latencies),
    }
}

/// Sends each pod's name and node whenever it is seen bound; says when the first list is done.
async fn watch_binds(
    pods: Api<Pod>,
    bound: mpsc::UnboundedSender<(String, String, Instant)>,
    listed: oneshot::Sender<()>,
) {
    let mut listed = Some(listed);
    let mut events = watcher::watcher(pods, watcher::Config::default()).boxed();
    loop {
        match events.try_next().await {
            Ok(Some(Event::InitDone)) => {
                if let Some(l) = listed.take() {
                    let _ = l.send(());
                }
            }
            Ok(Some(Event::Apply(pod) | Event::InitApply(pod))) => {
                if let Some(node) = pod.spec.and_then(|s| s.node_name)
                    && let Some(name) = pod.metadata.name
                {
                    let _ = bound.send((name, node, Instant::now()));
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "the pod watch broke; it lists again");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// Creates the run's pods (with `options.dra`, each one's claim before it) with
/// `options.concurrency` in flight, sending each one's name when the apiserver has accepted it;
/// the number refused (a pod whose claim was refused is not created, and counts).
async fn create_pods(
    pods: Api<Pod>,
    namespace: String,
    scheduler: Scheduler,
    options: Options,
    created: mpsc::UnboundedSender<(String, Instant)>,
) -> u64 {
    let post = PostParams::default();
    let mut errors = 0;
    if options.group_size > 1 {
        errors += create_pod_groups(&pods, &namespace, &options).await;
    }
    let claims: Api<ResourceClaim> = Api::namespaced(pods.clone().into_client(), &namespace);
    let results = stream::iter(1..=options.pods)
        .map(|i| {
            let pod = manifests::pod(i, &namespace, scheduler.scheduler_name(), options.pod_gpus, options.group_size);
            let (pods, claims, post, namespace, options) = (&pods, &claims, &post, &namespace, &options);
            // With DRA the pod's claim first, so that no scheduler sees the pod without it.
            async move {
                let made = async {
                    if !options.dra {
                        return pods.create(post, &pod).await;
                    }
                    claims.create(post, &dra::claim(i, namespace, options.pod_gpus)).await?;
                    pods.create(post, &dra::with_claim(pod)).await
                };
                (i, made.await.map(|_| Instant::now()))
            }
        })
        .buffer_unordered(options.concurrency.max(1));
    let mut results = std::pin::pin!(results);
    while let Some((i, result)) = results.next().await {
        match result {
            Ok(at) => {
                let _ = created.send((manifests::pod_name(i), at));
            }
            Err(e) => {
                errors += 1;
                if errors <= 5 {
                    tracing::warn!(pod = i, error = %e, "the apiserver refused a pod");
                }
            }
        }
    }
    errors
}

/// Creates the run's `PodGroup`s (before their pods, as a job controller does); the number
/// refused, counted as their pods' (a pod without its group is never bound).
async fn create_pod_groups(pods: &Api<Pod>, namespace: &str, options: &Options) -> u64 {
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(pods.clone().into_client(), namespace, &manifests::pod_group_api());
    let post = PostParams::default();
    let count = options.pods / options.group_size;
    let results: Vec<bool> = stream::iter(1..=count)
        .map(|g| {
            let (api, post) = (&api, &post);
            async move {
                let group = serde_json::from_value(manifests::pod_group(g, namespace, options.group_size));
                match group.map(|group| async move { api.create(post, &group).await }) {
                    Ok(create) => match create.await {
                        Ok(_) => true,
                        Err(e) => {
                            tracing::warn!(group = g, error = %e, "the apiserver refused a PodGroup (does it serve scheduling.k8s.io/v1alpha2? shared/k8s/README.md)");
                            false
                        }
                    },
                    Err(_) => false,
                }
            }
        })
        .buffer_unordered(options.concurrency.max(1))
        .collect()
        .await;
    results.iter().filter(|ok| !**ok).count() as u64 * u64::from(options.group_size)
}
