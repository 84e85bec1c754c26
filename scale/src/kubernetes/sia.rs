//! `wasmsched-scale sia`: a live Sia run on the kit. Object nodes shaped like the simulator's
//! `heterogeneous-64` (GPU types, GPU memory and racks as labels: [`objects`]); Sia's workload
//! CSV ([`workload`]) submitted as upstream `PodGroup`s of one-GPU pods at its arrival times,
//! sped up, rigid or elastic (`--elastic`: [`objects::Elastic`]); the host running Sia alone,
//! kube-scheduler stopped; and the question the run answers: is every placement Sia makes over
//! several nodes bound whole, none refused?
//!
//! It is measured twice over: from one pod watch on the run's namespace ([`groups`]: bound
//! whole, ever partly bound and for how long) and from the host's audit log and log after it
//! stopped ([`audit`]: Sia's places and resizes, which named several nodes, which were refused
//! and why).
//! No kubelet runs the pods, so a bound group stays bound: the cluster fills and the rest wait.
//! The cluster is taken over and put back as by [`super::run`] (`Cluster`).

pub mod audit;
pub mod groups;
pub mod objects;
pub mod table;
pub mod workload;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use futures_util::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::runtime::watcher::{self, Event};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::host::{self, HostConfig, HostError, HostProcess, LogCounts};
use super::{Cluster, ScaleError, Scheduler, api_error, manifests};
use audit::{AuditSummary, LogExcerpt};
use groups::{GroupSummary, Groups};
pub use workload::{SiaJob, WorkloadError};

/// The policy's name in the host's config; its component is copied in as `sia.wasm`.
const POLICY: &str = "sia";
/// Sia's round in the workload's time (its `interval-s` default), sped up like the arrivals.
const ROUND_S: f64 = 60.0;

/// The run's settings.
#[derive(Clone, Debug, Serialize)]
pub struct SiaOptions {
    /// The workload CSV (`name,time,application,num_replicas,batch_size`).
    pub workload: PathBuf,
    /// Arrival times (and Sia's round) are divided by this.
    pub speedup: f64,
    /// Only the first this many jobs in arrival order; None: all.
    pub jobs: Option<usize>,
    /// How long the run goes on after the last job was submitted.
    pub tail: Duration,
    /// The host's tick.
    pub tick: Duration,
    /// Sia's deadline per call.
    pub deadline: Duration,
    /// The `wasmsched` binary.
    pub host_bin: PathBuf,
    /// The Sia component (`policy_sia.wasm`).
    pub policy: PathBuf,
    /// The cluster's kubeconfig.
    pub kubeconfig: PathBuf,
    /// The kit's state folder (`$K8S_RUN`).
    pub k8s_run: PathBuf,
    /// Create requests in flight.
    pub concurrency: usize,
    /// Whether jobs are elastic: their pods declare the GPU counts and batch sizes their model
    /// runs at ([`objects::Elastic`]), so that Sia may place and resize them at other counts.
    pub elastic: bool,
}

impl SiaOptions {
    /// The defaults of `wasmsched-scale sia`, with no files named: for tests.
    #[cfg(test)]
    pub(crate) fn sample() -> SiaOptions {
        SiaOptions {
            workload: PathBuf::from(workload::DEFAULT_WORKLOAD),
            speedup: 120.0,
            jobs: None,
            tail: Duration::from_secs(60),
            tick: Duration::from_secs(1),
            deadline: Duration::from_secs(1),
            host_bin: PathBuf::new(),
            policy: PathBuf::new(),
            kubeconfig: PathBuf::new(),
            k8s_run: PathBuf::new(),
            concurrency: 32,
            elastic: false,
        }
    }

    /// What `job`'s pods declare: its scaling when the run is elastic and its model is known.
    pub fn elastic_of(&self, job: &SiaJob) -> Option<objects::Elastic> {
        self.elastic.then(|| objects::Elastic::of(&job.application)).flatten()
    }
}

/// The host's `GET /status` when the run ended (`host/src/status.rs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EndStatus {
    /// Ticks.
    pub ticks: u64,
    /// Ticks the active policy was asked on.
    pub decisions: u64,
    /// Jobs running (groups bound) as the host sees them.
    pub jobs_running: u64,
    /// Jobs queued.
    pub jobs_queued: u64,
    /// Groups held outside the queue (not whole yet, or their `PodGroup` missing).
    pub held: u64,
    /// Queued jobs the host started itself (the watchdog's stall rule).
    pub stall_rescues: u64,
    /// Times the watchdog benched the active policy.
    pub watchdog_benchings: u64,
    /// Disruptions applied (preemptions among them).
    pub disruptions: u64,
    /// Actions refused over the disruption budget.
    pub over_budget: u64,
}

/// Reads the fields of [`EndStatus`] from the status JSON; a missing one is 0.
pub fn end_status(status: &Value) -> EndStatus {
    let u = |key: &str| status.get(key).and_then(Value::as_u64).unwrap_or(0);
    let r = host::status_reading(status);
    EndStatus {
        ticks: r.ticks,
        decisions: u("decisions"),
        jobs_running: r.jobs_running,
        jobs_queued: r.jobs_queued,
        held: status.get("held").and_then(Value::as_array).map_or(0, |h| h.len() as u64),
        stall_rescues: u("stall_rescues"),
        watchdog_benchings: u("watchdog_benchings"),
        disruptions: u("disruptions"),
        over_budget: u("over_budget"),
    }
}

/// What the run saw.
#[derive(Clone, Debug, Serialize)]
pub struct SiaReport {
    /// When it began (Unix seconds).
    pub started_unix_s: u64,
    /// The settings.
    pub options: SiaOptions,
    /// The run's folder: `host.toml`, `policies.d/`, `host.log`, `audit.jsonl`.
    pub run_dir: PathBuf,
    /// The run's namespace.
    pub namespace: String,
    /// Object nodes created, and their GPUs.
    pub nodes: u32,
    /// Their GPUs together.
    pub gpus: u32,
    /// Jobs in the run.
    pub jobs: u64,
    /// Of those, elastic (with `--elastic`, those whose model is known).
    pub elastic_jobs: u64,
    /// The last job's arrival, sped up, seconds from the host ready.
    pub last_arrival_s: f64,
    /// From the host ready to its stop, seconds.
    pub run_s: f64,
    /// Jobs whose `PodGroup` and pods were all created.
    pub jobs_created: u64,
    /// `PodGroup`s and pods the apiserver refused.
    pub create_errors: u64,
    /// How late the latest job was submitted after its sped-up arrival, seconds.
    pub submit_late_max_s: f64,
    /// The groups as the pod watch saw them.
    pub groups: GroupSummary,
    /// The audit log; None when the host wrote none.
    pub audit: Option<AuditSummary>,
    /// The host's "actions could not be applied" warnings.
    pub not_applied_warnings: LogExcerpt,
    /// The host's "actions of earlier ticks failed" warnings (actions in flight that failed).
    pub earlier_failed_warnings: LogExcerpt,
    /// The host's log, counted.
    pub log: Option<LogCounts>,
    /// The host's status at the end.
    pub status: Option<EndStatus>,
    /// The host's nodes in handle order, as the audit log's node numbers are read.
    pub node_handles: Vec<String>,
}

/// Runs it on the cluster of `options.kubeconfig`, then deletes what it made and restores the
/// control plane as it found it, also when a step fails or Ctrl-C arrives.
pub async fn run(options: &SiaOptions) -> Result<SiaReport, ScaleError> {
    let jobs = check(options)?;
    let client = super::client(&options.kubeconfig).await?;
    let mut cluster = Cluster::find(client, &options.k8s_run)?;
    let outcome = tokio::select! {
        r = experiment(options, &jobs, &mut cluster) => r,
        _ = tokio::signal::ctrl_c() => Err(ScaleError::Interrupted),
    };
    cluster.clean_up().await;
    outcome
}

/// The settings checked and the workload read: the jobs of the run.
fn check(options: &SiaOptions) -> Result<Vec<SiaJob>, ScaleError> {
    let fail = |s: String| Err(ScaleError::Options(s));
    if !(options.speedup.is_finite() && options.speedup > 0.0) {
        return fail(format!(
            "--speedup {} must be a positive number (120: two minutes of the workload a second)",
            options.speedup
        ));
    }
    for (path, what) in [
        (&options.host_bin, "build it with `cargo build --release -p wasmsched`"),
        (&options.policy, "build it with `cargo build --release -p wasmsched` (it builds the shipped policies)"),
    ] {
        if !path.is_file() {
            return fail(format!("{} is missing: {what}", path.display()));
        }
    }
    let mut jobs = workload::read(&options.workload)?;
    if let Some(n) = options.jobs {
        if n == 0 {
            return fail("--jobs must be at least 1".into());
        }
        jobs.truncate(n);
    }
    if options.elastic {
        let mut unknown: Vec<&str> =
            jobs.iter().filter(|j| options.elastic_of(j).is_none()).map(|j| j.application.as_str()).collect();
        unknown.sort_unstable();
        unknown.dedup();
        if !unknown.is_empty() {
            tracing::warn!(models = ?unknown, "no measurements of these models: their jobs stay rigid");
        }
    }
    Ok(jobs)
}

/// A task aborted when its handle is dropped: the run's watch and submitter end with it, also
/// when it fails or is interrupted.
struct Aborting<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for Aborting<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// An error saying how to start the cluster, unless it serves `PodGroup`s
/// (`scheduling.k8s.io/v1alpha2`); before anything is changed.
async fn check_pod_groups(client: &kube::Client) -> Result<(), ScaleError> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &manifests::pod_group_api());
    match api.list_metadata(&ListParams::default().limit(1)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Err(ScaleError::Options(
            "the cluster does not serve PodGroups (scheduling.k8s.io/v1alpha2): start it with the Workload API's \
             gates and runtime config, as scale/README.md (\"Pod groups\") shows"
                .into(),
        )),
        Err(e) => Err(api_error("list PodGroups")(e)),
    }
}

fn unix_now_s() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

async fn experiment(options: &SiaOptions, jobs: &[SiaJob], cluster: &mut Cluster) -> Result<SiaReport, ScaleError> {
    let started_unix_s = unix_now_s();
    let client = cluster.client.clone();
    check_pod_groups(&client).await?;
    let (node_count, node_handles) = heterogeneous_64(options, cluster).await?;

    cluster.scheduler.stop();
    let ns = super::fresh_namespace(cluster, format!("scale-sia-{started_unix_s}")).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let (listed_tx, listed_rx) = oneshot::channel();
    let watch = Aborting(tokio::spawn(watch_pods(pods.clone(), events_tx, listed_tx)));
    let _ = tokio::time::timeout(Duration::from_secs(30), listed_rx).await;

    let dir = std::env::temp_dir().join(format!("wasmsched-sia-{started_unix_s}"));
    let (mut host_process, listen, audit_path) = start_sia(options, &dir, &ns).await?;
    let t0 = Instant::now();

    let mut groups = Groups::new(jobs.iter().map(|j| (j.name.as_str(), j.replicas)));
    let (submitted_tx, mut submitted) = mpsc::unbounded_channel();
    let submitter = Aborting(tokio::spawn(submit(pods, ns.clone(), jobs.to_vec(), options.clone(), t0, submitted_tx)));
    let last_arrival_s = jobs.iter().map(|j| j.arrival_s).fold(0.0, f64::max) / options.speedup;
    let due = t0 + Duration::from_secs_f64(last_arrival_s) + options.tail;
    let Submissions { jobs_created, create_errors, late_max } = {
        let mut channels = Channels { events: &mut events, submitted: &mut submitted, submitter: &submitter };
        follow(options, jobs.len(), &mut groups, &mut channels, &mut host_process, due).await?
    };
    let status = host::get_status(listen).await.ok().map(|v| end_status(&v));
    host_process.stop();
    let run_s = t0.elapsed().as_secs_f64();
    // Events the watch had on their way when the host stopped.
    let drain_until = tokio::time::Instant::now() + Duration::from_secs(1);
    while let Ok(Some(event)) = tokio::time::timeout_at(drain_until, events.recv()).await {
        take(&mut groups, event);
    }
    drop(watch);
    let groups = groups.summary(Instant::now());

    let audit = std::fs::read_to_string(&audit_path).ok().map(|text| audit::summarise(&text, &node_handles));
    let log_text =
        std::fs::read(&host_process.log).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    super::delete_namespace(&client, &ns).await;
    cluster.namespaces.retain(|n| *n != ns);
    Ok(SiaReport {
        started_unix_s,
        options: options.clone(),
        run_dir: dir,
        namespace: ns,
        nodes: node_count,
        gpus: objects::total_gpus(&objects::HETEROGENEOUS_64),
        jobs: jobs.len() as u64,
        elastic_jobs: jobs.iter().filter(|j| options.elastic_of(j).is_some()).count() as u64,
        last_arrival_s,
        run_s,
        jobs_created,
        create_errors,
        submit_late_max_s: late_max.as_secs_f64(),
        groups,
        audit,
        not_applied_warnings: audit::excerpt(&log_text, "could not be applied"),
        earlier_failed_warnings: audit::excerpt(&log_text, "actions of earlier ticks failed"),
        log: (!log_text.is_empty()).then(|| host::log_counts(&log_text)),
        status,
        node_handles,
    })
}

/// The submitter's and the watch's news, in one place while the run lasts.
struct Channels<'a> {
    events: &'a mut mpsc::UnboundedReceiver<PodEvent>,
    submitted: &'a mut mpsc::UnboundedReceiver<Submitted>,
    submitter: &'a Aborting<()>,
}

/// What the submitter did: jobs created, objects refused, and how late it got.
#[derive(Default)]
struct Submissions {
    jobs_created: u64,
    create_errors: u64,
    late_max: Duration,
}

/// Follows the run until every job of `jobs` is submitted and `due` (and the tail after the
/// last submission) has passed: the pods' events into `groups`, the host checked each second.
async fn follow(
    options: &SiaOptions,
    jobs: usize,
    groups: &mut Groups,
    ch: &mut Channels<'_>,
    host_process: &mut HostProcess,
    due: Instant,
) -> Result<Submissions, ScaleError> {
    let mut seen = Submissions::default();
    let mut submitted_until: Option<Instant> = None;
    let mut every_second = tokio::time::interval(Duration::from_secs(1));
    let mut said = Instant::now();
    loop {
        tokio::select! {
            Some(event) = ch.events.recv() => take(groups, event),
            Some(s) = ch.submitted.recv() => {
                seen.create_errors += s.errors;
                seen.late_max = seen.late_max.max(s.late);
                if let Some(at) = s.created {
                    seen.jobs_created += 1;
                    groups.created(&s.job, at);
                }
            }
            _ = every_second.tick() => {
                host_process.check()?;
                if submitted_until.is_none() && ch.submitter.0.is_finished() {
                    submitted_until = Some(Instant::now());
                }
                let now = Instant::now();
                if submitted_until.is_some_and(|f| now >= due.max(f + options.tail)) && ch.submitted.is_empty() {
                    return Ok(seen);
                }
                if now > said + Duration::from_secs(30) {
                    said = now;
                    let s = groups.summary(now);
                    tracing::info!(created = seen.jobs_created, of = jobs, bound_whole = s.whole_at_end, partly = s.partly_at_end, "running");
                }
            }
        }
    }
}

/// Takes the cluster over and creates the heterogeneous-64 nodes: their count, and their
/// names in the order the host numbers them (name order, at its first observation).
async fn heterogeneous_64(options: &SiaOptions, cluster: &mut Cluster) -> Result<(u32, Vec<String>), ScaleError> {
    let client = cluster.client.clone();
    cluster.take_over().await?;
    let now = serde_json::to_value(Time(k8s_openapi::jiff::Timestamp::now())).unwrap_or_default();
    let nodes = objects::nodes(&objects::HETEROGENEOUS_64, now.as_str().unwrap_or_default());
    let node_count = nodes.len() as u32;
    super::create_nodes(&client, nodes, options.concurrency).await?;
    tracing::info!(nodes = node_count, "heterogeneous-64 nodes created and Ready");
    // The host numbers the nodes it finds at its first observation in name order.
    let all: Api<Node> = Api::all(client.clone());
    let listed = all.list_metadata(&ListParams::default()).await.map_err(api_error("list nodes"))?;
    let node_handles = audit::handle_order(listed.items.into_iter().filter_map(|n| n.metadata.name).collect());
    Ok((node_count, node_handles))
}

/// Writes the host's config in `dir` (Sia active with its round sped up, the audit log on),
/// starts it on `namespace` and waits until it has ticked: the process, its control API and
/// the audit log's path.
async fn start_sia(
    options: &SiaOptions,
    dir: &Path,
    namespace: &str,
) -> Result<(host::HostProcess, std::net::SocketAddr, PathBuf), ScaleError> {
    let prepare_error = |path: &Path| {
        let path = path.to_owned();
        move |source| HostError::Prepare { path, source }
    };
    let listen = host::free_loopback_addr().map_err(prepare_error(dir))?;
    let audit = dir.join("audit.jsonl");
    let config = HostConfig {
        deadline: Some(options.deadline),
        audit: Some(audit.clone()),
        speedup: Some(options.speedup),
        ..HostConfig::kept_in(dir, POLICY, options.tick, &options.kubeconfig, namespace, listen)
    };
    let config_path = host::prepare(dir, &config, &options.policy)?;
    // Sia's own table (`NAME.toml` beside the component): its round, sped up as the arrivals are.
    let table = config.policies_dir.join(format!("{POLICY}.toml"));
    std::fs::write(&table, sia_table(options.speedup)).map_err(prepare_error(&table))?;
    let started = super::start_host(&options.host_bin, config_path, dir.join("host.log"), listen).await?;
    let process = started.host.expect("start_host hands over the host it started");
    Ok((process, listen, audit))
}

/// Sia's table: `interval-s`, its 60 s round divided by `speedup`.
fn sia_table(speedup: f64) -> String {
    format!(
        "# Written by wasmsched-scale sia: Sia's 60 s round at the run's speed-up.\ninterval-s = {:?}\n",
        ROUND_S / speedup
    )
}

/// A change the pod watch saw.
#[derive(Debug)]
enum PodEvent {
    /// A pod, its group, its node (when bound) and its group's size (when the host re-created it).
    Seen { name: String, group: Option<String>, node: Option<String>, size: Option<u32>, at: Instant },
    /// A pod deleted.
    Gone { name: String, at: Instant },
    /// A fresh list begins.
    Relist,
    /// It is done.
    Relisted { at: Instant },
}

fn take(groups: &mut Groups, event: PodEvent) {
    match event {
        PodEvent::Seen { name, group, node, size, at } => {
            groups.seen(&name, group.as_deref(), node.as_deref(), size, at)
        }
        PodEvent::Gone { name, at } => groups.gone(&name, at),
        PodEvent::Relist => groups.relist(),
        PodEvent::Relisted { at } => groups.relisted(at),
    }
}

/// Sends every change of the namespace's pods; says when the first list is done.
async fn watch_pods(pods: Api<Pod>, events: mpsc::UnboundedSender<PodEvent>, listed: oneshot::Sender<()>) {
    let mut listed = Some(listed);
    let mut stream = watcher::watcher(pods, watcher::Config::default()).boxed();
    loop {
        let event = match stream.try_next().await {
            Ok(Some(Event::Init)) => PodEvent::Relist,
            Ok(Some(Event::InitDone)) => {
                if let Some(l) = listed.take() {
                    let _ = l.send(());
                }
                PodEvent::Relisted { at: Instant::now() }
            }
            Ok(Some(Event::Apply(pod) | Event::InitApply(pod))) => {
                let name = pod.metadata.name.clone().unwrap_or_default();
                if pod.metadata.deletion_timestamp.is_some() {
                    PodEvent::Gone { name, at: Instant::now() }
                } else {
                    let spec = pod.spec.as_ref();
                    let group = spec.and_then(|s| s.scheduling_group.as_ref()).and_then(|g| g.pod_group_name.clone());
                    let node = spec.and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty());
                    let size = pod.metadata.annotations.as_ref().and_then(|a| a.get(groups::GROUP_SIZE_ANNOTATION));
                    let size = size.and_then(|s| s.parse().ok());
                    PodEvent::Seen { name, group, node, size, at: Instant::now() }
                }
            }
            Ok(Some(Event::Delete(pod))) => {
                PodEvent::Gone { name: pod.metadata.name.unwrap_or_default(), at: Instant::now() }
            }
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "the pod watch broke; it lists again");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        if events.send(event).is_err() {
            return;
        }
    }
}

/// One job submitted.
#[derive(Debug)]
struct Submitted {
    job: String,
    /// When its last pod's create was answered; None if any of its objects was refused.
    created: Option<Instant>,
    /// Its objects refused: its pods (all of them, when its `PodGroup` was refused, as a pod
    /// without its group is never bound).
    errors: u64,
    /// How late it was submitted.
    late: Duration,
}

/// Submits each job at `t0` + its arrival / `options.speedup`: its `PodGroup`, then its pods
/// (`options.concurrency` in flight); a job that is due already goes at once.
async fn submit(
    pods: Api<Pod>,
    namespace: String,
    jobs: Vec<SiaJob>,
    options: SiaOptions,
    t0: Instant,
    tx: mpsc::UnboundedSender<Submitted>,
) {
    let client = pods.clone().into_client();
    let groups: Api<DynamicObject> = Api::namespaced_with(client, &namespace, &manifests::pod_group_api());
    let post = PostParams::default();
    let mut refused = 0;
    for job in jobs {
        let due = t0 + Duration::from_secs_f64(job.arrival_s / options.speedup);
        tokio::time::sleep_until(due.into()).await;
        let late = Instant::now().saturating_duration_since(due);
        let group = serde_json::from_value::<DynamicObject>(objects::pod_group(&job, &namespace));
        let made = match group {
            Ok(group) => groups.create(&post, &group).await.map(drop).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = made {
            refused += 1;
            if refused <= 5 {
                tracing::warn!(job = %job.name, error = %e, "the apiserver refused a PodGroup (does it serve scheduling.k8s.io/v1alpha2? shared/k8s/README.md)");
            }
            let _ = tx.send(Submitted { job: job.name, created: None, errors: u64::from(job.replicas), late });
            continue;
        }
        let job_pods = objects::pods(&job, &namespace, Scheduler::Wasmsched.scheduler_name(), options.elastic_of(&job));
        let results: Vec<bool> = stream::iter(job_pods)
            .map(|pod| {
                let (pods, post) = (&pods, &post);
                async move {
                    let made = pods.create(post, &pod).await;
                    if let Err(e) = &made {
                        tracing::warn!(pod = ?pod.metadata.name, error = %e, "the apiserver refused a pod");
                    }
                    made.is_ok()
                }
            })
            .buffer_unordered(options.concurrency.max(1))
            .collect()
            .await;
        let errors = results.iter().filter(|ok| !**ok).count() as u64;
        let created = (errors == 0).then(Instant::now);
        if tx.send(Submitted { job: job.name, created, errors, late }).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_end_status_reads_the_hosts_counters() {
        let status = json!({
            "ticks": 250, "decisions": 248, "jobs_running": 9, "jobs_queued": 140,
            "held": [{"name": "bert-9", "reason": "2 of 16 pods exist"}],
            "stall_rescues": 1, "watchdog_benchings": 0, "disruptions": 0, "over_budget": 2,
        });
        assert_eq!(
            end_status(&status),
            EndStatus {
                ticks: 250,
                decisions: 248,
                jobs_running: 9,
                jobs_queued: 140,
                held: 1,
                stall_rescues: 1,
                watchdog_benchings: 0,
                disruptions: 0,
                over_budget: 2
            }
        );
        assert_eq!(end_status(&json!({})), EndStatus::default());
    }

    #[test]
    fn sias_round_is_sped_up_like_the_arrivals() {
        let t: toml::Table = sia_table(120.0).parse().unwrap();
        assert_eq!(t["interval-s"].as_float(), Some(0.5));
        let t: toml::Table = sia_table(1.0).parse().unwrap();
        assert_eq!(t["interval-s"].as_float(), Some(60.0), "a float, as Sia's config reads it");
    }

    #[test]
    fn with_elastic_every_job_of_the_shipped_workload_is_elastic_and_without_none() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(workload::DEFAULT_WORKLOAD);
        let jobs = workload::read(&path).unwrap();
        let elastic = SiaOptions { elastic: true, ..SiaOptions::sample() };
        assert!(jobs.iter().all(|j| elastic.elastic_of(j).is_some()), "Sia's model names are the goodput crate's");
        assert!(jobs.iter().all(|j| SiaOptions::sample().elastic_of(j).is_none()));
        let unknown = SiaJob { application: "gpt2".into(), ..jobs[0].clone() };
        assert_eq!(elastic.elastic_of(&unknown), None, "stays rigid");
    }

    #[test]
    fn a_missing_policy_says_how_to_build_it() {
        let options = SiaOptions {
            host_bin: std::env::current_exe().unwrap(),
            policy: PathBuf::from("/nonexistent/policy_sia.wasm"),
            ..SiaOptions::sample()
        };
        let e = check(&options).unwrap_err().to_string();
        assert!(e.contains("policy_sia.wasm is missing") && e.contains("cargo build --release -p wasmsched"), "{e}");
        let e = check(&SiaOptions { speedup: 0.0, ..options }).unwrap_err().to_string();
        assert!(e.contains("--speedup"), "{e}");
    }
}
