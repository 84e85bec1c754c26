//! The Kubernetes experiment, scheduler_perf style: N nodes as API objects, then M pods bound
//! by wasmsched (run A) and by the bundled kube-scheduler (run B), each in a fresh namespace,
//! measured the same way ([`measure`]), and the cluster put back as it was.
//!
//! The controller manager is stopped for the whole experiment (and started again at the end):
//! nodes without a kubelet stay Ready only while nothing checks their heartbeats, and keeping
//! a thousand Leases fresh instead would put a hundred writes a second on the apiserver that
//! both schedulers share, on a 2-core machine. With it stopped nothing makes a namespace's
//! `default` ServiceAccount, so the harness does, and a deleted namespace stays `Terminating`
//! until it is back (its pods are deleted here, at once).
//!
//! [`sia`] is a second experiment on the same footing: a live Sia run of pod groups.

pub mod control_plane;
pub mod dra;
pub mod host;
pub mod manifests;
pub mod measure;
pub mod sia;
pub mod table;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use futures_util::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde::Serialize;

use control_plane::{ControlPlaneError, Daemon};
use host::{HostConfig, HostError, HostProcess};
use manifests::NodeShape;
pub use measure::RunReport;

/// Which schedulers run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Only {
    /// wasmsched alone.
    Wasmsched,
    /// kube-scheduler alone.
    KubeScheduler,
    /// Both, wasmsched first.
    Both,
}

/// A scheduler under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduler {
    /// The wasmsched host with FIFO.
    Wasmsched,
    /// The cluster's kube-scheduler.
    KubeScheduler,
}

impl Scheduler {
    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Scheduler::Wasmsched => "wasmsched",
            Scheduler::KubeScheduler => "kube-scheduler",
        }
    }

    /// The `schedulerName` its pods carry.
    pub fn scheduler_name(self) -> &'static str {
        match self {
            Scheduler::Wasmsched => "wasmsched",
            Scheduler::KubeScheduler => "default-scheduler",
        }
    }
}

/// The experiment's settings.
#[derive(Clone, Debug, Serialize)]
pub struct Options {
    /// Nodes created as API objects.
    pub nodes: u32,
    /// Pods per run.
    pub pods: u32,
    /// `nvidia.com/gpu` per node (with `dra`, devices in its ResourceSlice).
    pub gpus_per_node: u32,
    /// `nvidia.com/gpu` per pod (0 or 1; with `dra`, devices its claim asks for).
    pub pod_gpus: u32,
    /// Pods per group (1: pods of their own). Groups are declared by upstream `PodGroup`s
    /// (`scheduling.k8s.io/v1alpha2`, gang with `minCount` this), bound whole or not at all.
    pub group_size: u32,
    /// The host's tick.
    pub tick: Duration,
    /// The `wasmsched` binary.
    pub host_bin: PathBuf,
    /// The FIFO component (`policy_fifo.wasm`).
    pub fifo: PathBuf,
    /// Which schedulers run.
    pub only: Only,
    /// The cluster's kubeconfig.
    pub kubeconfig: PathBuf,
    /// The kit's state folder (`$K8S_RUN`): pid files and logs of the control plane.
    pub k8s_run: PathBuf,
    /// Create requests in flight.
    pub concurrency: usize,
    /// How long a run waits for its pods to be bound.
    pub timeout: Duration,
    /// The quiet window measured after all are bound.
    pub steady: Duration,
    /// kube-scheduler's `--kube-api-qps` and `--kube-api-burst` for run B; 0 keeps the flags it
    /// runs with (its client's default, 50 and 100).
    pub scheduler_qps: u32,
    /// Create all pods before the scheduler starts, so that binds per second from its start is
    /// its own pace, not the pace of pod creation.
    pub precreate: bool,
    /// GPUs through DRA ([`dra`]): a ResourceSlice per node, a ResourceClaim per pod, made
    /// before it; the host told the slices' driver in `gpu-drivers`.
    pub dra: bool,
    /// The host's compile cache, kept across runs; None: a new one in each run's folder.
    pub cache_dir: Option<PathBuf>,
}

/// The whole experiment's result.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// When it began (Unix seconds).
    pub started_unix_s: u64,
    /// The settings.
    pub options: Options,
    /// Each fake node.
    pub node_cores: u32,
    /// Time to create and mark Ready all nodes (with `dra`, their slices too), seconds.
    pub nodes_create_s: f64,
    /// The runs, wasmsched first.
    pub runs: Vec<RunReport>,
    /// wasmsched's binds per second over kube-scheduler's, when both ran.
    pub ratio: Option<f64>,
    /// Where the host's config and log were kept.
    pub host_dir: Option<PathBuf>,
}

/// Why the experiment failed.
#[derive(Debug, thiserror::Error)]
pub enum ScaleError {
    /// The settings cannot work.
    #[error("{0}")]
    Options(String),
    /// The kubeconfig could not be read.
    #[error("cannot use the kubeconfig {path}: {detail}; start the cluster with `cluster up 2` or pass --kubeconfig")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// A request the harness needs was refused.
    #[error("the apiserver refused to {what}")]
    Api {
        /// What the harness was doing.
        what: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// A control-plane process.
    #[error(transparent)]
    ControlPlane(#[from] ControlPlaneError),
    /// The host.
    #[error(transparent)]
    Host(#[from] HostError),
    /// A scheduler did not get ready.
    #[error("{scheduler} was not ready within {secs} s{hint}")]
    NotReady {
        /// Which.
        scheduler: &'static str,
        /// How long the harness waited.
        secs: u64,
        /// Where to look.
        hint: String,
    },
    /// The workload of a `sia` run.
    #[error(transparent)]
    Workload(#[from] sia::WorkloadError),
    /// Ctrl-C.
    #[error("interrupted (Ctrl-C); the nodes and namespaces were deleted and the control plane restored")]
    Interrupted,
}

/// Start `command` in a process group of its own (a Ctrl-C to the harness is not its), stdin
/// closed, stdout and stderr both to `log`.
fn spawn_logged(command: &mut std::process::Command, log: std::fs::File) -> std::io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let err = log.try_clone()?;
    command.stdin(Stdio::null()).stdout(log).stderr(err).process_group(0).spawn()
}

pub(crate) fn api_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ScaleError {
    let what = what.into();
    move |source| ScaleError::Api { what, source }
}

/// Runs the experiment on the cluster of `options.kubeconfig`: creates the nodes, runs the
/// schedulers that `options.only` names, and deletes what it made and restores the control
/// plane as it found it, also when a step fails or Ctrl-C arrives.
pub async fn run(options: &Options) -> Result<Report, ScaleError> {
    check(options)?;
    let client = client(&options.kubeconfig).await?;
    let mut cluster = Cluster::find(client, &options.k8s_run)?;
    let outcome = tokio::select! {
        r = experiment(options, &mut cluster) => r,
        _ = tokio::signal::ctrl_c() => Err(ScaleError::Interrupted),
    };
    cluster.clean_up().await;
    outcome
}

fn check(options: &Options) -> Result<(), ScaleError> {
    let fail = |s: String| Err(ScaleError::Options(s));
    if options.nodes == 0 || options.pods == 0 {
        return fail("--nodes and --pods must be at least 1".into());
    }
    if options.nodes > 99_999 || options.pods > 99_999 {
        return fail("at most 99,999 nodes and pods (names have five digits)".into());
    }
    if options.pod_gpus > 1 {
        return fail("--pod-gpus is 0 or 1".into());
    }
    if options.dra && options.pod_gpus == 0 {
        return fail("--dra gives pods their GPUs through claims: it needs --pod-gpus 1".into());
    }
    if options.dra && options.gpus_per_node > dra::MAX_DEVICES_PER_SLICE {
        return fail(format!("--dra: at most {} GPUs a node (one ResourceSlice)", dra::MAX_DEVICES_PER_SLICE));
    }
    let gpus = u64::from(options.nodes) * u64::from(options.gpus_per_node);
    if u64::from(options.pods) * u64::from(options.pod_gpus) > gpus {
        return fail(format!(
            "{} pods of {} GPU do not fit {} nodes of {} GPUs: raise --gpus-per-node or --nodes",
            options.pods, options.pod_gpus, options.nodes, options.gpus_per_node
        ));
    }
    if options.only != Only::KubeScheduler {
        for (path, what) in [
            (&options.host_bin, "build it with `cargo build --release -p wasmsched`"),
            (&options.fifo, "`cargo build --release -p wasmsched` builds it"),
        ] {
            if !path.is_file() {
                return fail(format!("{} is missing: {what}", path.display()));
            }
        }
    }
    Ok(())
}

/// A client of the cluster of `kubeconfig`, once its apiserver has answered.
pub(crate) async fn client(kubeconfig: &Path) -> Result<kube::Client, ScaleError> {
    let fail = |detail: String| ScaleError::Kubeconfig { path: kubeconfig.to_owned(), detail };
    let file = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| fail(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| fail(e.to_string()))?;
    let client = kube::Client::try_from(config).map_err(|e| fail(e.to_string()))?;
    client.apiserver_version().await.map_err(|e| fail(format!("the apiserver does not answer ({e})")))?;
    Ok(client)
}

/// What the harness changed on the cluster, to put back.
pub(crate) struct Cluster {
    pub(crate) client: kube::Client,
    pub(crate) kcm: Daemon,
    pub(crate) scheduler: Daemon,
    pub(crate) apiserver_pid: Option<u32>,
    pub(crate) namespaces: Vec<String>,
}

impl Cluster {
    /// The cluster of `client` with the kit's daemons as `$K8S_RUN` (`k8s_run`) finds them.
    pub(crate) fn find(client: kube::Client, k8s_run: &Path) -> Result<Cluster, ScaleError> {
        Ok(Cluster {
            client,
            kcm: Daemon::find(k8s_run, "kcm")?,
            scheduler: Daemon::find(k8s_run, "scheduler")?,
            apiserver_pid: std::fs::read_to_string(k8s_run.join("apiserver.pid"))
                .ok()
                .and_then(|s| s.trim().parse().ok()),
            namespaces: Vec::new(),
        })
    }

    /// Deletes what a previous run left (killed before it cleaned up: its namespaces and
    /// nodes), then stops the controller manager so that nodes without a kubelet stay Ready.
    pub(crate) async fn take_over(&mut self) -> Result<(), ScaleError> {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let ours = ListParams::default().labels(&format!("{}=true", manifests::SCALE_LABEL));
        for ns in namespaces.list_metadata(&ours).await.map_err(api_error("list namespaces"))? {
            delete_namespace(&self.client, &ns.metadata.name.unwrap_or_default()).await;
        }
        delete_scale_nodes(&self.client).await;
        dra::delete_devices(&self.client).await;
        if self.kcm.was_running() {
            self.kcm.stop();
        }
        Ok(())
    }

    /// Deletes the harness's nodes and its namespaces' pods (at once: no kubelet would ever
    /// confirm a graceful deletion) and namespaces, then restores the controller manager and
    /// the scheduler. Best effort: each failure is logged and the rest still done.
    pub(crate) async fn clean_up(&mut self) {
        for ns in std::mem::take(&mut self.namespaces) {
            delete_namespace(&self.client, &ns).await;
        }
        delete_scale_nodes(&self.client).await;
        dra::delete_devices(&self.client).await;
        for d in [&mut self.kcm, &mut self.scheduler] {
            if let Err(e) = d.restore() {
                tracing::error!(error = %e, "could not restore the control plane; `cluster down` and `cluster up 2`");
            }
        }
    }
}

/// Deletes the pods (at once), the `PodGroup`s and ResourceClaims, then the namespace `ns`.
pub(crate) async fn delete_namespace(client: &kube::Client, ns: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
    if let Err(e) = pods.delete_collection(&now, &ListParams::default()).await {
        tracing::warn!(namespace = ns, error = %e, "could not delete the run's pods");
    }
    delete_pod_groups(client, ns).await;
    dra::delete_claims(client, ns).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match namespaces.delete(ns, &DeleteParams::default()).await {
        Ok(_) => tracing::info!(namespace = ns, "deleted"),
        Err(e) => tracing::warn!(namespace = ns, error = %e, "could not delete the namespace"),
    }
}

/// Deletes the run's `PodGroup`s, their protection finalizer cleared first: the controller that
/// would clear it runs only in a controller manager with the Workload API's gates, which the
/// kit's is not given, and a `PodGroup` left with it keeps its namespace `Terminating` (and the
/// namespace controller retrying, a load on the apiserver for good). Nothing to do where the
/// API is not served.
async fn delete_pod_groups(client: &kube::Client, ns: &str) {
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), ns, &manifests::pod_group_api());
    let Ok(groups) = api.list_metadata(&ListParams::default()).await else { return };
    let clear = Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}}));
    let patch = PatchParams::default();
    let names: Vec<String> = groups.items.into_iter().filter_map(|g| g.metadata.name).collect();
    let count = names.len();
    stream::iter(names)
        .for_each_concurrent(32, |name| {
            let (api, clear, patch) = (&api, &clear, &patch);
            async move {
                let _ = api.patch(&name, patch, clear).await;
                let _ = api.delete(&name, &DeleteParams::default()).await;
            }
        })
        .await;
    if count > 0 {
        tracing::info!(namespace = ns, count, "deleted the run's PodGroups");
    }
}

async fn delete_scale_nodes(client: &kube::Client) {
    let nodes: Api<Node> = Api::all(client.clone());
    let selector = ListParams::default().labels(&format!("{}=true", manifests::SCALE_LABEL));
    match nodes.delete_collection(&DeleteParams::default(), &selector).await {
        Ok(_) => tracing::info!("scale nodes deleted"),
        Err(e) => tracing::warn!(error = %e, "could not delete the scale nodes"),
    }
}

async fn experiment(options: &Options, cluster: &mut Cluster) -> Result<Report, ScaleError> {
    let started_unix_s = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let client = cluster.client.clone();
    cluster.take_over().await?;
    let shape = NodeShape::for_load(options.nodes, options.pods, options.gpus_per_node);
    let t = Instant::now();
    let now = serde_json::to_value(Time(k8s_openapi::jiff::Timestamp::now())).unwrap_or_default();
    let mut status = manifests::node_status(shape, now.as_str().unwrap_or_default());
    if options.dra {
        status = dra::node_status(status);
    }
    let nodes = (1..=options.nodes).map(|i| (manifests::node(i), status.clone())).collect();
    create_nodes(&client, nodes, options.concurrency).await?;
    if options.dra {
        let names: Vec<String> = (1..=options.nodes).map(manifests::node_name).collect();
        dra::create_devices(&client, &names, options.gpus_per_node, options.concurrency).await?;
    }
    let nodes_create_s = t.elapsed().as_secs_f64();
    tracing::info!(nodes = options.nodes, secs = nodes_create_s, "nodes created and Ready");

    let mut runs = Vec::new();
    let mut host_dir = None;
    if options.only != Only::KubeScheduler {
        let dir = std::env::temp_dir().join(format!("wasmsched-scale-{started_unix_s}"));
        runs.push(run_wasmsched(options, cluster, &dir, started_unix_s).await?);
        host_dir = Some(dir);
    }
    if options.only != Only::Wasmsched {
        runs.push(run_kube_scheduler(options, cluster, started_unix_s).await?);
    }
    // With groups the rate compared is groups bound whole per second.
    let rate = |s: Scheduler| {
        let run = runs.iter().find(|r| r.scheduler == s.name())?;
        if options.group_size > 1 { run.groups.as_ref()?.per_s } else { run.binds_per_s }
    };
    let ratio = match (rate(Scheduler::Wasmsched), rate(Scheduler::KubeScheduler)) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    Ok(Report {
        started_unix_s,
        options: options.clone(),
        node_cores: shape.cores,
        nodes_create_s,
        runs,
        ratio,
        host_dir,
    })
}

/// Creates each node, then patches its status with the merge patch beside it (the status of
/// a create is ignored), `concurrency` requests in flight.
pub(crate) async fn create_nodes(
    client: &kube::Client,
    nodes: Vec<(Node, serde_json::Value)>,
    concurrency: usize,
) -> Result<(), ScaleError> {
    let api: Api<Node> = Api::all(client.clone());
    let (post, patch) = (PostParams::default(), PatchParams::default());
    let results: Vec<Result<(), ScaleError>> = stream::iter(nodes)
        .map(|(node, status)| {
            let (api, post, patch) = (&api, &post, &patch);
            async move {
                let name = node.metadata.name.clone().unwrap_or_default();
                api.create(post, &node).await.map_err(api_error(format!("create node {name}")))?;
                api.patch_status(&name, patch, &Patch::Merge(status))
                    .await
                    .map_err(api_error(format!("patch the status of node {name}")))?;
                Ok(())
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    results.into_iter().collect()
}

/// A fresh namespace with its `default` ServiceAccount; remembered for the clean-up.
pub(crate) async fn fresh_namespace(cluster: &mut Cluster, name: String) -> Result<String, ScaleError> {
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    namespaces
        .create(&PostParams::default(), &manifests::namespace(&name))
        .await
        .map_err(api_error(format!("create namespace {name}")))?;
    cluster.namespaces.push(name.clone());
    let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client.clone(), &name);
    match accounts.create(&PostParams::default(), &manifests::default_service_account(&name)).await {
        // Made already by a controller manager that was not stopped.
        Ok(_) => Ok(name),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(name),
        Err(e) => Err(api_error(format!("create the default ServiceAccount of {name}"))(e)),
    }
}

/// Run A: the kube-scheduler stopped (it would only watch), the host started on a fresh
/// namespace, the pods bound by FIFO.
async fn run_wasmsched(
    options: &Options,
    cluster: &mut Cluster,
    dir: &std::path::Path,
    stamp: u64,
) -> Result<RunReport, ScaleError> {
    cluster.scheduler.stop();
    let ns = fresh_namespace(cluster, format!("scale-wasmsched-{stamp}")).await?;
    let listen = host::free_loopback_addr().map_err(|source| HostError::Prepare { path: dir.to_owned(), source })?;
    let mut config = HostConfig::kept_in(dir, "fifo", options.tick, &options.kubeconfig, &ns, listen);
    if options.dra {
        config.gpu_drivers = vec![dra::DRIVER.to_owned()];
    }
    if let Some(cache) = &options.cache_dir {
        config.cache_dir.clone_from(cache);
    }
    let config_path = host::prepare(dir, &config, &options.fifo)?;
    let log = dir.join("host.log");
    let start = start_host(&options.host_bin, config_path, log, listen);
    let report = measure::run(&cluster.client, &ns, Scheduler::Wasmsched, start, cluster.apiserver_pid, options).await;
    delete_namespace(&cluster.client, &ns).await;
    cluster.namespaces.retain(|n| *n != ns);
    report
}

/// Starts the host and waits until its control API answers and its loop has observed the
/// cluster once (up to 120 s).
pub(crate) async fn start_host(
    binary: &std::path::Path,
    config: PathBuf,
    log: PathBuf,
    listen: std::net::SocketAddr,
) -> Result<measure::Started, ScaleError> {
    let started = Instant::now();
    let mut process = HostProcess::start(binary, &config, &log)?;
    tracing::info!(pid = process.pid(), log = %log.display(), "host started");
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        process.check()?;
        if let Ok(status) = host::get_status(listen).await
            && host::status_reading(&status).ticks >= 1
        {
            break;
        }
        if Instant::now() > until {
            let hint = format!(": see {}", log.display());
            return Err(ScaleError::NotReady { scheduler: "wasmsched", secs: 120, hint });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tracing::info!(secs = started.elapsed().as_secs_f64(), "host ready");
    let subject = measure::Subject {
        scheduler: Scheduler::Wasmsched,
        pid: process.pid(),
        started,
        log,
        log_offset: 0,
        status_api: Some(listen),
    };
    Ok(measure::Started { subject, host: Some(process) })
}

/// Run B: the kube-scheduler started again with `--kube-api-qps=Q --kube-api-burst=Q` (5000 by
/// default; its other flags as they were), a fresh namespace, then the scheduler put back.
async fn run_kube_scheduler(options: &Options, cluster: &mut Cluster, stamp: u64) -> Result<RunReport, ScaleError> {
    cluster.scheduler.stop();
    let ns = fresh_namespace(cluster, format!("scale-kube-scheduler-{stamp}")).await?;
    let client = cluster.client.clone();
    let start = start_kube_scheduler(&mut cluster.scheduler, options);
    let report = measure::run(&client, &ns, Scheduler::KubeScheduler, start, cluster.apiserver_pid, options).await;
    delete_namespace(&cluster.client, &ns).await;
    cluster.namespaces.retain(|n| *n != ns);
    cluster.scheduler.restore()?;
    report
}

/// Starts the kube-scheduler with the run's flags and waits until it is ready.
async fn start_kube_scheduler(scheduler: &mut Daemon, options: &Options) -> Result<measure::Started, ScaleError> {
    let log = options.k8s_run.join("scheduler.log");
    let log_offset = std::fs::metadata(&log).map_or(0, |m| m.len());
    let started = Instant::now();
    let flags = match options.scheduler_qps {
        0 => Vec::new(),
        qps => vec![format!("--kube-api-qps={qps}"), format!("--kube-api-burst={qps}")],
    };
    let pid = scheduler.restart_with(&flags.iter().map(String::as_str).collect::<Vec<_>>())?;
    let port = scheduler
        .original()
        .and_then(|o| control_plane::flag_value(&o.argv, "--secure-port"))
        .unwrap_or("10259")
        .to_owned();
    wait_scheduler_ready(&port).await?;
    tracing::info!(pid, secs = started.elapsed().as_secs_f64(), "kube-scheduler ready");
    let subject =
        measure::Subject { scheduler: Scheduler::KubeScheduler, pid, started, log, log_offset, status_api: None };
    Ok(measure::Started { subject, host: None })
}

/// Polls the scheduler's `/readyz` (anonymous on its secure port) with curl, up to 60 s.
async fn wait_scheduler_ready(port: &str) -> Result<(), ScaleError> {
    let url = format!("https://127.0.0.1:{port}/readyz");
    for _ in 0..300 {
        let out = tokio::task::spawn_blocking({
            let url = url.clone();
            move || std::process::Command::new("curl").args(["-sk", "--max-time", "1", &url]).output()
        })
        .await;
        if let Ok(Ok(out)) = out
            && out.stdout.starts_with(b"ok")
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(ScaleError::NotReady { scheduler: "kube-scheduler", secs: 60, hint: format!(" ({url} did not say ok)") })
}
