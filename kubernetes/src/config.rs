//! `kind = "kubernetes"`: the `[backend]` table that says how the backend reaches its cluster,
//! and why it could not.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use wasmsched_core::backend::{Built, Settings, filled};
use wasmsched_core::live::DEFAULT_SELECTOR;

use super::{Kubernetes, dra, gpus, lease};

/// The node labels that name topology domains unless `[backend] topology` says otherwise:
/// block, then rack, as Kueue's and KAI's topology-aware scheduling examples label nodes.
pub const DEFAULT_TOPOLOGY: [&str; 2] = ["cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"];

/// The scheduler name that queued pods give (`spec.schedulerName`) when none is configured.
pub const DEFAULT_SCHEDULER: &str = "wasmsched";

/// `kind = "kubernetes"`: how the backend reaches its cluster. The `[backend]` table of
/// `wasmsched run`; every key is optional.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct KubernetesConfig {
    /// A kubeconfig file, relative to the config file; default `KUBECONFIG`,
    /// `~/.kube/config`, or the pod's service account when the host runs in the cluster.
    pub kubeconfig: Option<PathBuf>,
    /// The namespace whose pods are managed (default `"default"`).
    pub namespace: String,
    /// The label selector of managed pods (default `"wasmsched.managed=true"`).
    pub selector: String,
    /// The `schedulerName` of the pods the host queues and binds (key `scheduler-name`,
    /// default `"wasmsched"`).
    #[serde(rename = "scheduler-name")]
    pub scheduler: String,
    /// The most pods whose logs are followed at once for progress (key `max-log-streams`,
    /// default 256; 0 reads no logs). A pod that reports through its `wasmsched.progress`
    /// annotation needs no stream; one beyond the limit waits for a stream to end.
    #[serde(rename = "max-log-streams")]
    pub max_log_streams: usize,
    /// The node labels whose values are a node's topology domains, coarsest first (key
    /// `topology`; default [`DEFAULT_TOPOLOGY`], the block and rack labels of Kueue's and KAI's
    /// topology examples). A node's domains stop at the first label it lacks.
    pub topology: Vec<String>,
    /// `[backend.election]`: run beside other replicas of the host, one acting at a time, the
    /// policies' states kept in the cluster for the next leader ([`lease`]). Without it the
    /// host acts alone, as if it always led.
    pub election: Option<lease::ElectionConfig>,
    /// The DRA drivers whose devices count as GPUs (key `gpu-drivers`, default NVIDIA's
    /// `gpu.nvidia.com`): a node's GPUs are its `nvidia.com/gpu` allocatable and these drivers'
    /// whole GPUs in its ResourceSlices (`dra.rs`).
    #[serde(rename = "gpu-drivers")]
    pub gpu_drivers: Vec<String>,
    /// `[backend.gpu-telemetry]`: each GPU's use, and which pod holds it, from NVIDIA's
    /// dcgm-exporter on the nodes that run managed pods ([`gpus`]). Without it GPUs show idle.
    #[serde(rename = "gpu-telemetry")]
    pub gpu_telemetry: Option<gpus::GpuTelemetryConfig>,
    /// `[backend.gpu-sharing]`: how a GPU share reaches the driver of the GPUs that DRA gives
    /// (MPS by default; [`dra::sharing`]).
    #[serde(rename = "gpu-sharing")]
    pub gpu_sharing: dra::sharing::GpuSharingConfig,
    /// How long one request may take before the apiserver counts as unreachable (5 s; not a
    /// key of the table).
    #[serde(skip)]
    pub timeout: Duration,
}

impl Default for KubernetesConfig {
    fn default() -> Self {
        KubernetesConfig {
            kubeconfig: None,
            namespace: "default".into(),
            selector: DEFAULT_SELECTOR.into(),
            scheduler: DEFAULT_SCHEDULER.into(),
            max_log_streams: 256,
            topology: DEFAULT_TOPOLOGY.iter().map(|s| s.to_string()).collect(),
            election: None,
            gpu_drivers: vec![dra::NVIDIA_DRIVER.to_string()],
            gpu_telemetry: None,
            gpu_sharing: dra::sharing::GpuSharingConfig::default(),
            timeout: Duration::from_secs(5),
        }
    }
}

impl Settings for KubernetesConfig {
    const KIND: &'static str = "kubernetes";
    const DOES: &'static str = "runs pods on a cluster in real time";

    fn check(&self) -> Result<(), String> {
        filled(&self.selector, "selector is a label selector, e.g. \"wasmsched.managed=true\"")?;
        filled(&self.namespace, "namespace is a namespace's name, e.g. \"default\"")?;
        self.gpu_telemetry.as_ref().map_or(Ok(()), gpus::GpuTelemetryConfig::check)?;
        self.gpu_sharing.check()?;
        self.election.as_ref().map_or(Ok(()), |e| e.check(self.timeout))
    }
}

impl KubernetesConfig {
    /// The Kubernetes backend on this cluster ([`Kubernetes::new`]).
    pub fn build(&self) -> Result<Built, KubernetesSetupError> {
        let kubernetes = Kubernetes::new(self.clone())?;
        let name = format!("kubernetes (namespace {}, {})", self.namespace, self.selector);
        Ok(Built { backend: Box::new(kubernetes), name })
    }
}

/// Why the backend could not start.
#[derive(Debug, thiserror::Error)]
pub enum KubernetesSetupError {
    /// The async runtime could not start.
    #[error("cannot start the Kubernetes client's runtime")]
    Runtime(#[source] std::io::Error),
    /// No usable kubeconfig.
    #[error(
        "no usable Kubernetes configuration ({0}): set [backend] kubeconfig = \"PATH\", export KUBECONFIG, or run the \
         host in a pod with a service account"
    )]
    Config(String),
    /// The kubeconfig names a cluster the client cannot use.
    #[error("cannot make a Kubernetes client: {0}")]
    Client(String),
}
