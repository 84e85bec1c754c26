//! The long-running host's configuration: one TOML file, `wasmsched run --config FILE`.
//!
//! ```toml
//! tick = "30s"                      # time between observations, on the backend's clock
//! policies-dir = "policies.d"       # watched for NAME.wasm (+ NAME.toml); relative to this file
//!
//! [backend]
//! kind = "sim"
//! workload = "../scenarios/demo.toml"
//! speed = "real-time"               # or "max", or a factor such as 60
//! # or, real containers (docs/docker.md):
//! # kind = "docker"
//! # engines = ["unix:///var/run/docker.sock"]   # one node per engine
//! # selector = "wasmsched.managed=true"         # the label of managed containers
//! # gpus = true                                 # NVML where there is a driver
//! # or, pods on a Kubernetes cluster (docs/kubernetes.md):
//! # kind = "kubernetes"
//! # kubeconfig = "/etc/wasmsched/kubeconfig"    # default: KUBECONFIG, ~/.kube/config, in-cluster
//! # namespace = "default"
//! # selector = "wasmsched.managed=true"         # the label selector of managed pods
//! # scheduler-name = "wasmsched"                # queued pods name this scheduler
//!
//! [budget]                         # disruptions (stop, migrate, preempt) a policy may cause
//! window = "10m"
//! max-per-window = 5
//! max-per-node = 2
//! job-min-interval = "30m"
//!
//! [watchdog]                       # a policy failing on every call this long is benched
//! after = "30s"
//! safe = "keep-limits"             # or "fair-share"
//! stall-after = "60s"              # a job a placing policy leaves waiting that fits: started
//! stall-bench-after = 3            # rescues within stall-window that bench the policy
//! stall-window = "10m"
//! progress-after = "10m"           # jobs run and none progresses this long: benched
//! churn-after = 5                  # a job disrupted this often in a row before it progressed
//!
//! [policy.fair-share]               # serves policies.d/fair-share.wasm
//! role = "active"                   # or "shadow"
//! deadline = "50ms"                 # per call
//! instantiate-deadline = "1s"       # starting an instance: init, then its first decide
//! memory = "64MiB"
//! log-lines = 60                    # its own log, a minute; the rest dropped and counted
//! log-bytes = "8KiB"
//! fallback = "keep-limits"          # or "fair-share"
//! config = { }                      # the policy's own table, handed to it as JSON
//! ```
//!
//! Unknown keys are refused with their name; paths are relative to the config file's folder.
//!
//! `[backend]` is one backend's own table ([`BackendConfig`]): `kind` picks the backend, and
//! each backend defines its keys, their defaults and their checks in its module
//! ([`wasmsched_sim::SimSettings`], `DockerConfig` in `backend/docker.rs`,
//! `KubernetesConfig` in `backend/kubernetes.rs`). A key of another backend is refused with the
//! kind it belongs to; a kind this host was built without (the `docker` and `kubernetes`
//! Cargo features) says what to rebuild with.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use wasmsched_loop::budget::BudgetConfig;
use wasmsched_loop::watchdog::WatchdogConfig;
use wasmsched_runtime::Limits;
use wasmsched_runtime::supervise::{Fallback, Quarantine};

pub use crate::backend::BackendConfig;
pub use wasmsched_core::backend::Speed;

/// Why a config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The TOML is malformed, a key is unknown or a value is out of range.
    #[error("config {path}: {detail}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the line and the key.
        detail: String,
    },
    /// The values parse but do not make a host.
    #[error("config {path}: {detail}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong and what to do.
        detail: String,
    },
}

/// The whole host configuration.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct HostConfig {
    /// Time between observations, on the backend's clock (`"30s"`).
    #[serde(deserialize_with = "wasmsched_core::units::duration")]
    pub tick: Duration,
    /// The directory watched for policy components (`NAME.wasm`, and `NAME.toml` beside);
    /// required unless `[resources]` names the policies.
    #[serde(default)]
    pub policies_dir: PathBuf,
    /// Where the jobs live: `kind` picks the backend, the rest of the table is that
    /// backend's own ([`BackendConfig`]).
    pub backend: BackendConfig,
    /// Hot reload of the policies directory.
    #[serde(default)]
    pub reload: ReloadConfig,
    /// The control API.
    #[serde(default)]
    pub api: ApiConfig,
    /// The audit log and the telemetry recording.
    #[serde(default)]
    pub record: RecordConfig,
    /// Where compiled policies are cached; default `~/.cache/wasmsched`.
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// The policies, by name: `[policy.NAME]` serves `policies-dir/NAME.wasm`.
    #[serde(default)]
    pub policy: BTreeMap<String, PolicyConfig>,
    /// `[resources]`: the policies are the cluster's `SchedulingPolicy` resources
    /// ([`crate::resources`]), not files; the Kubernetes backend only.
    #[serde(default)]
    pub resources: Option<ResourcesConfig>,
    /// `[trust]`: the signatures a `SchedulingPolicy`'s component must carry to run
    /// ([`wasmsched_oci::trust`]); without it any component pinned by digest runs.
    #[serde(default)]
    pub trust: Option<wasmsched_oci::trust::TrustConfig>,
    /// How many disruptions (stop, migrate, preempt) the active policy may cause
    /// ([`wasmsched_loop::budget`]); on by default, with cautious limits.
    #[serde(default)]
    pub budget: BudgetConfig,
    /// When a failing active policy is benched for a safe one ([`wasmsched_loop::watchdog`]).
    #[serde(default)]
    pub watchdog: WatchdogConfig,
    /// The tenants jobs belong to, with their weights and quotas ([`wasmsched_core::tenants`]).
    #[serde(default)]
    pub tenants: Vec<wasmsched_core::tenants::TenantConfig>,
    /// `[experiment]`: two or more of the `[policy.*]` tables against each other, in turn
    /// ([`wasmsched_loop::experiment`]): the arm of each block is the active policy, the others
    /// shadows, until it concludes or is stopped.
    #[serde(default)]
    pub experiment: Option<wasmsched_loop::experiment::ExperimentConfig>,
}

/// `[resources]`: serve the `SchedulingPolicy` resources of a namespace.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ResourcesConfig {
    /// Their namespace (default: `[backend.election]`'s, else the host's own: its pod's).
    #[serde(default)]
    pub namespace: Option<String>,
    /// How soon a resource that could not be fetched, verified or compiled is tried again
    /// (`"10s"`).
    #[serde(default = "default_retry", deserialize_with = "wasmsched_core::units::duration")]
    pub retry: Duration,
}

fn default_retry() -> Duration {
    Duration::from_secs(10)
}

/// Hot reload of the policies directory.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ReloadConfig {
    /// Watch the directory and swap in new versions (default true).
    #[serde(default = "yes")]
    pub watch: bool,
    /// How long a file must stay quiet before it is looked at (default `"50ms"`).
    #[serde(default = "default_debounce", deserialize_with = "wasmsched_core::units::duration")]
    pub debounce: Duration,
    /// Scan the directory this often instead of listening to the kernel (default: listen). For
    /// a volume shared over the network (a ReadWriteMany claim that several replicas mount),
    /// where a file copied in through one machine is never announced to another.
    #[serde(default, deserialize_with = "wasmsched_core::units::duration_opt")]
    pub poll: Option<Duration>,
}

impl Default for ReloadConfig {
    fn default() -> Self {
        ReloadConfig { watch: true, debounce: default_debounce(), poll: None }
    }
}

fn yes() -> bool {
    true
}

fn default_debounce() -> Duration {
    Duration::from_millis(50)
}

/// The control API: status, metrics, rollback.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ApiConfig {
    /// Serve the API (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Where it listens: `"127.0.0.1:7878"` (port 0 picks a free one), or a Unix socket,
    /// `"unix:/run/wasmsched/api.sock"` (replicas that share a network, a probe in the pod). Any
    /// TCP address but loopback needs a `token`.
    #[serde(default = "default_listen")]
    pub listen: Listen,
    /// A bearer token every request must carry (`Authorization: Bearer TOKEN`).
    #[serde(default)]
    pub token: Option<String>,
    /// A file whose content is the token (a mounted Secret), instead of `token`; read at start.
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// A TCP address the API (the operator's page with it) is also served on, `"0.0.0.0:7878"`:
    /// for a browser where `listen` is a Unix socket, as in the cluster. Any address but
    /// loopback needs a token.
    #[serde(default)]
    pub http: Option<SocketAddr>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig { enabled: true, listen: default_listen(), token: None, token_file: None, http: None }
    }
}

impl ApiConfig {
    /// Every address the API is served on: `listen`, and `http` where set.
    pub fn addresses(&self) -> Vec<Listen> {
        std::iter::once(self.listen.clone()).chain(self.http.map(Listen::Tcp)).collect()
    }

    /// Serve the API on `http` too, and read the token from `token_file` (both `wasmsched run`
    /// flags, over the config's), checked as the config's are.
    pub fn also(&mut self, http: Option<SocketAddr>, token_file: Option<PathBuf>) -> Result<(), String> {
        if http.is_some() {
            self.http = http;
        }
        if token_file.is_some() {
            (self.token, self.token_file) = (None, token_file);
            self.read_token()?;
        }
        self.check_token()
    }

    /// A TCP address beyond loopback needs a token.
    fn check_token(&self) -> Result<(), String> {
        let tokenless = self.token.as_deref().is_none_or(str::is_empty) && self.token_file.is_none();
        match self.addresses().iter().find(|a| !a.is_local()) {
            Some(addr) if self.enabled && tokenless => Err(format!(
                "the API would listen on {addr}, which is not loopback: set [api] token = \"…\" (or token-file) or \
                 listen on 127.0.0.1"
            )),
            _ => Ok(()),
        }
    }

    /// Read `token-file` into `token`.
    fn read_token(&mut self) -> Result<(), String> {
        let Some(file) = &self.token_file else { return Ok(()) };
        if self.token.is_some() {
            return Err("[api] has both token and token-file: keep one".into());
        }
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("[api] token-file {}: {e}; create it, or set token", file.display()))?;
        let token = text.trim();
        if token.is_empty() {
            return Err(format!("[api] token-file {} is empty: put the token in it", file.display()));
        }
        self.token = Some(token.to_string());
        Ok(())
    }
}

/// The control API's address when none is given.
pub const DEFAULT_API: &str = "127.0.0.1:7878";

fn default_listen() -> Listen {
    DEFAULT_API.parse().expect("a valid address")
}

/// Where the control API listens, or where a client finds it: a TCP address, or a Unix
/// socket's path written `unix:PATH`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A Unix socket.
    Unix(PathBuf),
}

impl Listen {
    /// Whether only this machine (or this pod) reaches it: loopback, or a Unix socket.
    pub fn is_local(&self) -> bool {
        match self {
            Listen::Tcp(a) => a.ip().is_loopback(),
            Listen::Unix(_) => true,
        }
    }

    /// The TCP port, for a TCP address.
    pub fn port(&self) -> Option<u16> {
        match self {
            Listen::Tcp(a) => Some(a.port()),
            Listen::Unix(_) => None,
        }
    }
}

impl std::str::FromStr for Listen {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Err("a Unix socket is written unix:PATH, e.g. unix:/run/wasmsched/api.sock".into());
            }
            return Ok(Listen::Unix(PathBuf::from(path)));
        }
        s.parse().map(Listen::Tcp).map_err(|_| {
            format!("{s:?} is neither an address (127.0.0.1:7878) nor a Unix socket (unix:/run/wasmsched/api.sock)")
        })
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Tcp(a) => write!(f, "{a}"),
            Listen::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

impl From<SocketAddr> for Listen {
    fn from(a: SocketAddr) -> Self {
        Listen::Tcp(a)
    }
}

impl From<&Listen> for Listen {
    fn from(l: &Listen) -> Self {
        l.clone()
    }
}

impl<'de> Deserialize<'de> for Listen {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// What the host writes down.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RecordConfig {
    /// The audit log: one JSON line per tick (appended).
    #[serde(default)]
    pub audit: Option<PathBuf>,
    /// The telemetry recording that `wasmsched replay` reads (overwritten).
    #[serde(default)]
    pub telemetry: Option<PathBuf>,
}

/// Whether a policy's decisions are applied.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Its decisions are applied. At most one policy is active.
    #[default]
    Active,
    /// It sees the same snapshots; its decisions are recorded and compared, never applied.
    Shadow,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Active => "active",
            Role::Shadow => "shadow",
        })
    }
}

/// One policy: `[policy.NAME]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PolicyConfig {
    /// `"active"` (its decisions are applied) or `"shadow"` (only compared).
    #[serde(default)]
    pub role: Role,
    /// Wall-clock deadline per call (`"50ms"`).
    #[serde(default = "default_deadline", deserialize_with = "wasmsched_core::units::duration")]
    pub deadline: Duration,
    /// Budget for starting an instance (`"1s"`): making it with its `init`, and again its first
    /// `decide` (a resync with every job), apart from the per-call deadline: a component that
    /// bundles an interpreter needs more to start.
    #[serde(default = "default_instantiate", deserialize_with = "wasmsched_core::units::duration")]
    pub instantiate_deadline: Duration,
    /// Memory cap of an instance (`"64MiB"`).
    #[serde(default = "default_memory", deserialize_with = "wasmsched_core::units::bytes")]
    pub memory: u64,
    /// Log lines the policy may write a minute (60); the rest are dropped, and counted in one
    /// line a minute.
    #[serde(default = "default_log_lines")]
    pub log_lines: u32,
    /// Bytes of log the policy may write a minute (`"8KiB"`).
    #[serde(default = "default_log_bytes", deserialize_with = "wasmsched_core::units::bytes")]
    pub log_bytes: u64,
    /// What a tick does when the policy fails: `"keep-limits"` or `"fair-share"`.
    #[serde(default)]
    pub fallback: Fallback,
    /// Failures in a row that quarantine a version.
    #[serde(default = "default_quarantine_after")]
    pub quarantine_after: u32,
    /// The policy's own table, handed to it as JSON; a `NAME.toml` beside the component
    /// overrides its keys.
    #[serde(default)]
    pub config: toml::Table,
}

fn default_deadline() -> Duration {
    Limits::default().deadline
}

fn default_instantiate() -> Duration {
    Limits::default().instantiate
}

fn default_memory() -> u64 {
    Limits::default().memory_bytes
}

fn default_log_lines() -> u32 {
    Limits::default().log_lines
}

fn default_log_bytes() -> u64 {
    Limits::default().log_bytes
}

fn default_quarantine_after() -> u32 {
    Quarantine::default().after
}

impl PolicyConfig {
    /// The limits every call runs under.
    pub fn limits(&self) -> Limits {
        Limits {
            deadline: self.deadline,
            instantiate: self.instantiate_deadline,
            memory_bytes: self.memory,
            log_lines: self.log_lines,
            log_bytes: self.log_bytes,
            ..Limits::default()
        }
    }

    /// When failures quarantine a version.
    pub fn quarantine(&self) -> Quarantine {
        Quarantine { after: self.quarantine_after.max(1), ..Quarantine::default() }
    }
}

impl HostConfig {
    /// Read and check a config file; relative paths become relative to its folder.
    pub fn load(path: &Path) -> Result<HostConfig, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        let mut config = Self::parse(path, &text)?;
        let base = path.parent().unwrap_or(Path::new("."));
        config.resolve(base);
        config.api.read_token().map_err(|detail| ConfigError::Invalid { path: path.into(), detail })?;
        if let Some(trust) = &config.trust {
            trust
                .load(None)
                .map_err(|e| ConfigError::Invalid { path: path.into(), detail: wasmsched_core::error_chain(&e) })?;
        }
        Ok(config)
    }

    /// Parse and check config text; `path` names it in errors. Paths stay as written.
    pub fn parse(path: &Path, text: &str) -> Result<HostConfig, ConfigError> {
        let config: HostConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            detail: e.to_string().trim_end().to_string(),
        })?;
        config.check().map_err(|detail| ConfigError::Invalid { path: path.to_path_buf(), detail })?;
        Ok(config)
    }

    /// The declared tenants, as the contract has them (checked when the config was parsed).
    pub fn declared_tenants(&self) -> Vec<wasmsched_core::bindings::wit::Tenant> {
        wasmsched_core::tenants::declare(&self.tenants).unwrap_or_default()
    }

    fn check(&self) -> Result<(), String> {
        if self.tick.is_zero() {
            return Err("tick must be above zero, e.g. \"30s\"".into());
        }
        wasmsched_core::tenants::declare(&self.tenants)?;
        let active: Vec<&str> =
            self.policy.iter().filter(|(_, p)| p.role == Role::Active).map(|(n, _)| n.as_str()).collect();
        if active.len() > 1 {
            return Err(format!(
                "policies {} are all active; at most one may be: make the others `role = \"shadow\"`",
                active.join(", ")
            ));
        }
        if let Some(resources) = &self.resources {
            if !self.policy.is_empty() {
                return Err(
                    "[resources] makes the cluster's SchedulingPolicy resources the policies: remove the [policy.*] \
                     tables (each becomes a resource's spec), or remove [resources] to serve files"
                        .into(),
                );
            }
            if self.backend.kind() != "kubernetes" {
                return Err(format!(
                    "[resources] needs [backend] kind = \"kubernetes\" (this one is {:?}): the resources live in a cluster",
                    self.backend.kind()
                ));
            }
            if resources.retry.is_zero() {
                return Err("[resources] retry must be above 0 (\"10s\", say)".into());
            }
        } else if self.trust.is_some() {
            return Err(
                "[trust] checks the signatures of SchedulingPolicy resources: add [resources], or remove [trust]"
                    .into(),
            );
        } else if self.policies_dir.as_os_str().is_empty() {
            return Err(
                "policies-dir is missing: name the folder of policy components (policies-dir = \"policies\"), or add \
                 [resources] to serve the cluster's SchedulingPolicy resources"
                    .into(),
            );
        }
        if let Some(bad) = self.policy.keys().find(|n| n.is_empty() || n.contains(['/', '\\']) || n.starts_with('.')) {
            return Err(format!("policy name {bad:?} cannot be a file name in the policies directory"));
        }
        if self.reload.poll.is_some_and(|p| p.is_zero()) {
            return Err("[reload] poll must be above 0 (\"10s\", say), or left out to listen to the kernel".into());
        }
        if let Some(e) = &self.experiment {
            e.check().map_err(|e| e.to_string())?;
            if let Some(arm) = e.arms.iter().find(|a| !self.policy.contains_key(*a)) {
                return Err(format!(
                    "[experiment] arm {arm:?} is not a policy: add a [policy.{arm}] table (its role does not matter: \
                     the experiment makes each arm active in its blocks)"
                ));
            }
        }
        self.api.check_token()
    }

    fn resolve(&mut self, base: &Path) {
        let join = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        if !self.policies_dir.as_os_str().is_empty() {
            join(&mut self.policies_dir);
        }
        let optional = [&mut self.record.audit, &mut self.record.telemetry, &mut self.cache_dir];
        for p in optional.into_iter().flatten().chain(self.backend.paths()) {
            join(p);
        }
        if let Some(p) = &mut self.api.token_file {
            join(p);
        }
        if let Listen::Unix(p) = &mut self.api.listen {
            join(p);
        }
        if let Some(trust) = &mut self.trust {
            let any_of = trust.any_of.iter_mut().flat_map(|a| a.signatures.iter_mut());
            for signer in trust.all_of.iter_mut().chain(any_of) {
                if let Some(key) = &mut signer.key {
                    join(key);
                }
            }
        }
    }

    /// The active policy's name, if one is configured.
    pub fn active(&self) -> Option<&str> {
        self.policy.iter().find(|(_, p)| p.role == Role::Active).map(|(n, _)| n.as_str())
    }
}

#[cfg(test)]
mod tests;
