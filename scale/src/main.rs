//! `wasmsched-scale`: the command line over [`wasmsched_scale`].

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;
use wasmsched_scale::kubernetes::sia::{self, SiaOptions};
use wasmsched_scale::kubernetes::{self, Only, Options};

/// Scale experiments of the wasmsched host.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// wasmsched and kube-scheduler binding the same pods on the same fake nodes of a real
    /// cluster (the kit's `cluster up`): one table, both side by side.
    Kubernetes(KubernetesArgs),
    /// A live Sia run: object nodes shaped like `heterogeneous-64`, Sia's workload submitted
    /// as pod groups at its arrival times (sped up), the host with Sia alone; reports whether
    /// every placement Sia made over several nodes was bound whole.
    Sia(SiaArgs),
}

/// How both experiments reach the kit's cluster.
#[derive(clap::Args)]
struct ClusterArgs {
    /// The cluster's kubeconfig; default: `cluster kubeconfig` (`$K8S_RUN/admin.kubeconfig`).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The kit's state folder, with the controller manager's and the scheduler's pid files.
    #[arg(long, env = "K8S_RUN", default_value = "/tmp/k8s-run")]
    k8s_run: PathBuf,
    /// Requests in flight while creating nodes and pods.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
}

impl ClusterArgs {
    /// The kubeconfig given, else the kit's.
    fn kubeconfig(&self) -> PathBuf {
        self.kubeconfig.clone().unwrap_or_else(|| self.k8s_run.join("admin.kubeconfig"))
    }
}

#[derive(clap::Args)]
struct KubernetesArgs {
    /// Nodes to create as API objects.
    #[arg(long, default_value_t = 1000)]
    nodes: u32,
    /// Pods to bind in each run.
    #[arg(long, default_value_t = 10000)]
    pods: u32,
    /// `nvidia.com/gpu` on each node.
    #[arg(long, default_value_t = 8)]
    gpus_per_node: u32,
    /// `nvidia.com/gpu` each pod asks for (0 or 1).
    #[arg(long, default_value_t = 0)]
    pod_gpus: u32,
    /// Pods per group (a distributed job's pods, bound whole or not at all): above 1, the pods
    /// come in groups of this many, each declared by an upstream `PodGroup` (gang, minCount
    /// this); the cluster must serve `scheduling.k8s.io/v1alpha2` and its kube-scheduler run
    /// with the `GangScheduling` gate (`shared/k8s/README.md`). `--pods` is then a multiple.
    #[arg(long, default_value_t = 1)]
    group_size: u32,
    /// The host's tick.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    tick: Duration,
    /// The host's binary.
    #[arg(long, default_value = "target/release/wasmsched")]
    host_bin: PathBuf,
    /// The FIFO policy component the host runs.
    #[arg(long, default_value = "target/policies/wasm32-wasip2/release/policy_fifo.wasm")]
    fifo: PathBuf,
    /// Which schedulers to run.
    #[arg(long, value_enum, default_value = "both")]
    only: Only,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// How long one run may wait for its pods to be bound.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// The quiet window measured after all pods are bound.
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    steady: Duration,
    /// kube-scheduler's `--kube-api-qps` and `--kube-api-burst` in its run; 0 keeps its own
    /// flags (client default 50 / 100).
    #[arg(long, default_value_t = 5000)]
    scheduler_qps: u32,
    /// Create all pods before starting the scheduler: "binds/s from scheduler start" is then
    /// its own pace (otherwise both keep up with pod creation, ~250 pods/s on 2 cores).
    #[arg(long)]
    precreate: bool,
    /// GPUs through DRA: a ResourceSlice of `--gpus-per-node` devices on each node (driver
    /// `gpu.scale.wasmsched.dev`, one DeviceClass), a ResourceClaim of `--pod-gpus` devices made
    /// for each pod before it, and no `nvidia.com/gpu`; the cluster must serve
    /// `resource.k8s.io/v1`.
    #[arg(long)]
    dra: bool,
    /// Keep the host's compile cache in this folder across runs, as an operator's host keeps
    /// its own between restarts (the policy then loads rather than compiles at start); by
    /// default each run's cache is new.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Write the report as JSON here too.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(clap::Args)]
struct SiaArgs {
    /// Sia's workload CSV (`name,time,application,num_replicas,batch_size`).
    #[arg(long, default_value = sia::workload::DEFAULT_WORKLOAD)]
    workload: PathBuf,
    /// Arrival times are divided by this (and Sia's 60 s round with them).
    #[arg(long, default_value_t = 120.0)]
    speedup: f64,
    /// Only the first N jobs in arrival order.
    #[arg(long)]
    jobs: Option<usize>,
    /// How long the run goes on after the last job's arrival.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    tail: Duration,
    /// The host's tick.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    tick: Duration,
    /// Sia's deadline per call (its integer program over the queue).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    deadline: Duration,
    /// The host's binary.
    #[arg(long, default_value = "target/release/wasmsched")]
    host_bin: PathBuf,
    /// The Sia policy component the host runs.
    #[arg(long, default_value = "target/policies/wasm32-wasip2/release/policy_sia.wasm")]
    policy: PathBuf,
    /// Elastic jobs: each job's pods declare the GPU counts (1 up to what its model's largest
    /// batch feeds) and batch sizes its model runs at, as the simulator's elastic jobs do, so
    /// that Sia places and resizes them at other counts. A model without measurements stays
    /// rigid.
    #[arg(long)]
    elastic: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Write the report as JSON here too.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match Cli::parse().command {
        Command::Kubernetes(a) => kubernetes(a).await,
        Command::Sia(a) => sia(a).await,
    }
}

async fn sia(a: SiaArgs) -> anyhow::Result<()> {
    let options = SiaOptions {
        kubeconfig: a.cluster.kubeconfig(),
        workload: a.workload,
        speedup: a.speedup,
        jobs: a.jobs,
        tail: a.tail,
        tick: a.tick,
        deadline: a.deadline,
        host_bin: a.host_bin,
        policy: a.policy,
        k8s_run: a.cluster.k8s_run,
        concurrency: a.cluster.concurrency,
        elastic: a.elastic,
    };
    let report = sia::run(&options).await.context("the Sia run failed")?;
    println!("{}", sia::table::render(&report));
    write_json(a.json, &report)
}

async fn kubernetes(a: KubernetesArgs) -> anyhow::Result<()> {
    let options = Options {
        nodes: a.nodes,
        pods: a.pods,
        gpus_per_node: a.gpus_per_node,
        pod_gpus: a.pod_gpus,
        group_size: a.group_size.max(1),
        tick: a.tick,
        host_bin: a.host_bin,
        fifo: a.fifo,
        only: a.only,
        kubeconfig: a.cluster.kubeconfig(),
        k8s_run: a.cluster.k8s_run,
        concurrency: a.cluster.concurrency,
        timeout: a.timeout,
        steady: a.steady,
        scheduler_qps: a.scheduler_qps,
        precreate: a.precreate,
        dra: a.dra,
        cache_dir: a.cache_dir,
    };
    let report = kubernetes::run(&options).await.context("the scale run failed")?;
    println!("{}", kubernetes::table::render(&report));
    write_json(a.json, &report)
}

/// Writes `report` as JSON to `path`, if given.
fn write_json(path: Option<PathBuf>, report: &impl serde::Serialize) -> anyhow::Result<()> {
    if let Some(path) = path {
        let text = serde_json::to_string_pretty(report).context("cannot encode the report")?;
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
