//! `wasmsched-scale`: the command line over [`wasmsched_scale`].

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;
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
    /// The cluster's kubeconfig; default: `cluster kubeconfig` (`$K8S_RUN/admin.kubeconfig`).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The kit's state folder, with the controller manager's and the scheduler's pid files.
    #[arg(long, env = "K8S_RUN", default_value = "/tmp/k8s-run")]
    k8s_run: PathBuf,
    /// Requests in flight while creating nodes and pods.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
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
    let Command::Kubernetes(a) = Cli::parse().command;
    let kubeconfig = a.kubeconfig.unwrap_or_else(|| a.k8s_run.join("admin.kubeconfig"));
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
        kubeconfig,
        k8s_run: a.k8s_run,
        concurrency: a.concurrency,
        timeout: a.timeout,
        steady: a.steady,
        scheduler_qps: a.scheduler_qps,
        precreate: a.precreate,
    };
    let report = kubernetes::run(&options).await.context("the scale run failed")?;
    println!("{}", kubernetes::table::render(&report));
    if let Some(path) = a.json {
        let text = serde_json::to_string_pretty(&report).context("cannot encode the report")?;
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
