//! The wasmsched host as the harness runs it: its config (written here), its process, its
//! control API's `GET /status` (read with a small HTTP/1.1 client on loopback) and its log.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::control_plane;

/// What went wrong with the host.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// Its folder, config or policy could not be written.
    #[error("cannot prepare the host's folder {path}")]
    Prepare {
        /// What was being written.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The binary could not be started.
    #[error("cannot start the host {binary}: build it with `cargo build --release -p wasmsched`")]
    Start {
        /// The binary.
        binary: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It exited before it was stopped.
    #[error("the host exited early ({status}); its log is {log}")]
    Exited {
        /// How it ended.
        status: String,
        /// Its stderr.
        log: PathBuf,
    },
    /// Its control API did not answer as expected.
    #[error("the host's control API at {addr}: {detail}")]
    Api {
        /// Where.
        addr: SocketAddr,
        /// What was wrong.
        detail: String,
    },
}

/// What the harness puts in the host's config.
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// The loop's tick.
    pub tick: Duration,
    /// The active policy's name (`fifo`, `sia`): its table is `[policy.NAME]`, its component
    /// `NAME.wasm` in the policies folder.
    pub policy: String,
    /// The policy's deadline per call; None: the host's default (50 ms).
    pub deadline: Option<Duration>,
    /// The audit log (`[record] audit`); None: nothing recorded.
    pub audit: Option<PathBuf>,
    /// How many times faster than real time the workload runs: the disruption budget's
    /// window and per-job interval (`[budget]`, on the backend's wall clock) shrink by it; None:
    /// the host's defaults.
    pub speedup: Option<f64>,
    /// The policies folder (holding `NAME.wasm`).
    pub policies_dir: PathBuf,
    /// Where compiled policies are cached.
    pub cache_dir: PathBuf,
    /// The cluster's kubeconfig.
    pub kubeconfig: PathBuf,
    /// The namespace of the run's pods.
    pub namespace: String,
    /// The schedulerName the pods name.
    pub scheduler_name: String,
    /// The control API's address.
    pub listen: SocketAddr,
    /// The DRA drivers whose devices count as GPUs (`gpu-drivers`); empty: the host's default.
    pub gpu_drivers: Vec<String>,
}

impl HostConfig {
    /// The host of a run kept in `dir` (its policies folder and compile cache there), acting on
    /// the pods of `namespace` for our scheduler, `policy` active at the host's defaults,
    /// nothing recorded.
    pub fn kept_in(
        dir: &Path,
        policy: &str,
        tick: Duration,
        kubeconfig: &Path,
        namespace: &str,
        listen: SocketAddr,
    ) -> HostConfig {
        HostConfig {
            tick,
            policy: policy.into(),
            deadline: None,
            audit: None,
            speedup: None,
            policies_dir: dir.join("policies.d"),
            cache_dir: dir.join("cache"),
            kubeconfig: kubeconfig.to_owned(),
            namespace: namespace.into(),
            scheduler_name: super::Scheduler::Wasmsched.scheduler_name().into(),
            listen,
            gpu_drivers: Vec::new(),
        }
    }

    /// The config as TOML (`docs/run.md`, `examples/kubernetes.toml`): the named policy active,
    /// the audit log where asked, the other sections at their defaults.
    pub fn to_toml(&self) -> String {
        let mut toml = format!(
            "# Written by wasmsched-scale.\n\
             tick = \"{tick}ms\"\n\
             policies-dir = {policies}\n\
             cache-dir = {cache}\n\
             \n\
             [backend]\n\
             kind = \"kubernetes\"\n\
             kubeconfig = {kubeconfig}\n\
             namespace = {namespace}\n\
             selector = \"{managed}=true\"\n\
             scheduler-name = {scheduler}\n\
             {drivers}\
             \n\
             [api]\n\
             listen = \"{listen}\"\n",
            drivers = match self.gpu_drivers.as_slice() {
                [] => String::new(),
                d => format!("gpu-drivers = [{}]\n", d.iter().map(|d| toml_string(d)).collect::<Vec<_>>().join(", ")),
            },
            tick = self.tick.as_millis(),
            policies = toml_string(&self.policies_dir.to_string_lossy()),
            cache = toml_string(&self.cache_dir.to_string_lossy()),
            kubeconfig = toml_string(&self.kubeconfig.to_string_lossy()),
            namespace = toml_string(&self.namespace),
            managed = super::manifests::MANAGED_LABEL,
            scheduler = toml_string(&self.scheduler_name),
            listen = self.listen,
        );
        if let Some(audit) = &self.audit {
            toml.push_str(&format!("\n[record]\naudit = {}\n", toml_string(&audit.to_string_lossy())));
        }
        if let Some(speedup) = self.speedup.filter(|s| *s > 0.0) {
            // The host's defaults, 10 minutes and 30 minutes, in the workload's time.
            let ms = |minutes: f64| (minutes * 60_000.0 / speedup).round().max(1.0) as u64;
            toml.push_str(&format!("\n[budget]\nwindow = \"{}ms\"\njob-min-interval = \"{}ms\"\n", ms(10.0), ms(30.0)));
        }
        toml.push_str(&format!("\n[policy.{}]\nrole = \"active\"\n", toml_key(&self.policy)));
        if let Some(deadline) = self.deadline {
            toml.push_str(&format!("deadline = \"{}ms\"\n", deadline.as_millis()));
        }
        toml
    }
}

/// `key` as a TOML key: bare when it can be, quoted otherwise.
pub fn toml_key(key: &str) -> String {
    let bare = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if bare { key.to_owned() } else { toml_string(key) }
}

/// `s` as a TOML basic string.
pub fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Writes `config` and copies the policy's `component` in as `NAME.wasm`; the config's path.
pub fn prepare(dir: &Path, config: &HostConfig, component: &Path) -> Result<PathBuf, HostError> {
    let prepare_error = |path: &Path| {
        let path = path.to_owned();
        move |source| HostError::Prepare { path, source }
    };
    std::fs::create_dir_all(&config.policies_dir).map_err(prepare_error(&config.policies_dir))?;
    std::fs::create_dir_all(&config.cache_dir).map_err(prepare_error(&config.cache_dir))?;
    let wasm = config.policies_dir.join(format!("{}.wasm", config.policy));
    std::fs::copy(component, &wasm).map_err(prepare_error(component))?;
    let path = dir.join("host.toml");
    std::fs::write(&path, config.to_toml()).map_err(prepare_error(&path))?;
    Ok(path)
}

/// A free port on loopback, for the control API.
pub fn free_loopback_addr() -> std::io::Result<SocketAddr> {
    std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()
}

/// The running host; stopped (Ctrl-C, then kill) when dropped.
#[derive(Debug)]
pub struct HostProcess {
    child: Child,
    /// Its stdout and stderr.
    pub log: PathBuf,
}

impl HostProcess {
    /// Starts `binary run --config config`, its output to `log`, in a process group of its own.
    pub fn start(binary: &Path, config: &Path, log: &Path) -> Result<HostProcess, HostError> {
        let start_error = |source| HostError::Start { binary: binary.to_owned(), source };
        let out = std::fs::File::create(log).map_err(start_error)?;
        let mut command = Command::new(binary);
        command.arg("run").arg("--config").arg(config).env("NO_COLOR", "1");
        let child = super::spawn_logged(&mut command, out).map_err(start_error)?;
        Ok(HostProcess { child, log: log.to_owned() })
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// An error if it has exited.
    pub fn check(&mut self) -> Result<(), HostError> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(HostError::Exited { status: status.to_string(), log: self.log.clone() }),
            _ => Ok(()),
        }
    }

    /// Ctrl-C (it stops after the tick in progress), SIGKILL after 10 s.
    pub fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            control_plane::signal(self.child.id(), "INT");
            for _ in 0..100 {
                if !matches!(self.child.try_wait(), Ok(None)) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The host's loop-tick durations, if its status has them (`tick_wall`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct TickWall {
    /// Ticks counted.
    pub count: u64,
    /// Median, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Longest, ms.
    pub max_ms: f64,
}

/// What the harness reads from the host's `GET /status`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StatusReading {
    /// Ticks so far.
    pub ticks: u64,
    /// Queued jobs as the host sees them.
    pub jobs_queued: u64,
    /// Running (bound) jobs as the host sees them.
    pub jobs_running: u64,
    /// Requests made to the apiservers so far (`endpoints[].requests`, summed); None on a
    /// host that does not count them.
    pub requests: Option<u64>,
    /// The loop's tick durations; None on a host that does not report them.
    pub tick_wall: Option<TickWall>,
}

/// Reads the fields the harness uses from the status JSON (`host/src/status.rs`), each
/// one optional: a host before `requests` and `tick_wall` still gives the rest.
pub fn status_reading(status: &Value) -> StatusReading {
    let u = |key: &str| status.get(key).and_then(Value::as_u64).unwrap_or(0);
    let requests = status
        .get("endpoints")
        .and_then(Value::as_array)
        .and_then(|endpoints| endpoints.iter().map(|e| e.get("requests").and_then(Value::as_u64)).sum::<Option<u64>>());
    let requests =
        requests.filter(|_| status.get("endpoints").and_then(Value::as_array).is_some_and(|e| !e.is_empty()));
    let tick_wall = status.get("tick_wall").and_then(|t| serde_json::from_value(t.clone()).ok());
    StatusReading {
        ticks: u("ticks"),
        jobs_queued: u("jobs_queued"),
        jobs_running: u("jobs_running"),
        requests,
        tick_wall,
    }
}

/// `GET /status` from the control API at `addr` (within 2 s).
pub async fn get_status(addr: SocketAddr) -> Result<Value, HostError> {
    let api = |detail: String| HostError::Api { addr, detail };
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(format!("GET /status HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())
            .await?;
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).await?;
        Ok::<_, std::io::Error>(bytes)
    };
    let bytes = tokio::time::timeout(Duration::from_secs(2), exchange)
        .await
        .map_err(|_| api("no answer within 2 s".into()))?
        .map_err(|e| api(e.to_string()))?;
    let body = http_body(&bytes).map_err(api)?;
    serde_json::from_slice(&body).map_err(|e| api(format!("the body is not JSON: {e}")))
}

/// The body of a whole HTTP/1.1 response with status 200 (plain or chunked).
pub fn http_body(response: &[u8]) -> Result<Vec<u8>, String> {
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").ok_or("no end of headers")?;
    let head = String::from_utf8_lossy(&response[..split]);
    let body = &response[split + 4..];
    let status_line = head.lines().next().unwrap_or_default();
    if status_line.split_whitespace().nth(1) != Some("200") {
        return Err(format!("answered `{status_line}`"));
    }
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if !chunked {
        return Ok(body.to_vec());
    }
    let mut out = Vec::new();
    let mut rest = body;
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n").ok_or("a chunk without its size line")?;
        let size_text = String::from_utf8_lossy(&rest[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| format!("a bad chunk size `{size_text}`"))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        let chunk = rest.get(..size).ok_or("a chunk cut short")?;
        out.extend_from_slice(chunk);
        rest = rest.get(size + 2..).ok_or("a chunk cut short")?;
    }
}

/// What the log says about the apiserver, and how much it says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LogCounts {
    /// Lines.
    pub lines: u64,
    /// Lines at error level (tracing's `ERROR`, klog's `E`).
    pub errors: u64,
    /// Lines saying the apiserver "does not answer".
    pub does_not_answer: u64,
    /// Lines with "timed out".
    pub timed_out: u64,
    /// Lines with an HTTP 429 (`429 Too Many Requests`, `code: 429`).
    pub too_many_requests: u64,
}

/// Counts `text`'s lines and the apiserver trouble among them.
pub fn log_counts(text: &str) -> LogCounts {
    let mut c = LogCounts::default();
    for line in text.lines() {
        let klog_error = line.starts_with('E') && line.as_bytes().get(1).is_some_and(u8::is_ascii_digit);
        c.lines += 1;
        c.errors += u64::from(line.contains(" ERROR ") || klog_error);
        c.does_not_answer += u64::from(line.contains("does not answer"));
        c.timed_out += u64::from(line.contains("timed out"));
        c.too_many_requests += u64::from(line.contains("Too Many Requests") || line.contains("code: 429"));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config() -> HostConfig {
        HostConfig {
            tick: Duration::from_millis(1500),
            policy: "fifo".into(),
            deadline: None,
            audit: None,
            speedup: None,
            policies_dir: PathBuf::from("/tmp/run \"1\"/policies.d"),
            cache_dir: PathBuf::from("/tmp/run/cache"),
            kubeconfig: PathBuf::from("/tmp/k8s-run/admin.kubeconfig"),
            namespace: "scale-wasmsched-1".into(),
            scheduler_name: "wasmsched".into(),
            listen: "127.0.0.1:40123".parse().unwrap(),
            gpu_drivers: Vec::new(),
        }
    }

    #[test]
    fn the_host_config_is_toml_with_the_keys_the_host_reads() {
        let t: toml::Table = config().to_toml().parse().unwrap();
        assert_eq!(t["tick"].as_str(), Some("1500ms"));
        assert_eq!(t["policies-dir"].as_str(), Some("/tmp/run \"1\"/policies.d"));
        let backend = t["backend"].as_table().unwrap();
        assert_eq!(backend["kind"].as_str(), Some("kubernetes"));
        assert_eq!(backend["kubeconfig"].as_str(), Some("/tmp/k8s-run/admin.kubeconfig"));
        assert_eq!(backend["namespace"].as_str(), Some("scale-wasmsched-1"));
        assert_eq!(backend["selector"].as_str(), Some("wasmsched.managed=true"));
        assert_eq!(backend["scheduler-name"].as_str(), Some("wasmsched"));
        assert_eq!(t["api"]["listen"].as_str(), Some("127.0.0.1:40123"));
        assert_eq!(t["policy"]["fifo"]["role"].as_str(), Some("active"));
        assert!(t["policy"]["fifo"].get("deadline").is_none() && t.get("record").is_none());
        assert!(t.get("budget").is_none(), "the host's own budget");
        assert!(backend.get("gpu-drivers").is_none(), "the host's default drivers");
    }

    #[test]
    fn dra_drivers_go_in_the_backend_table() {
        let c = HostConfig { gpu_drivers: vec!["gpu.scale.wasmsched.dev".into()], ..config() };
        let t: toml::Table = c.to_toml().parse().unwrap();
        let drivers = t["backend"]["gpu-drivers"].as_array().unwrap();
        assert_eq!(drivers.iter().map(|d| d.as_str().unwrap()).collect::<Vec<_>>(), ["gpu.scale.wasmsched.dev"]);
        assert_eq!(t["api"]["listen"].as_str(), Some("127.0.0.1:40123"));
    }

    #[test]
    fn a_named_policy_gets_its_table_deadline_and_the_audit_log() {
        let c = HostConfig {
            policy: "sia".into(),
            deadline: Some(Duration::from_secs(1)),
            audit: Some(PathBuf::from("/tmp/wasmsched-sia-1/audit.jsonl")),
            speedup: Some(120.0),
            ..config()
        };
        let t: toml::Table = c.to_toml().parse().unwrap();
        assert_eq!(t["policy"]["sia"]["role"].as_str(), Some("active"));
        assert_eq!(t["policy"]["sia"]["deadline"].as_str(), Some("1000ms"));
        assert!(t["policy"].get("fifo").is_none());
        assert_eq!(t["record"]["audit"].as_str(), Some("/tmp/wasmsched-sia-1/audit.jsonl"));
        assert_eq!(t["budget"]["window"].as_str(), Some("5000ms"), "10 minutes of the workload at 120x");
        assert_eq!(t["budget"]["job-min-interval"].as_str(), Some("15000ms"));
    }

    #[test]
    fn prepare_writes_the_config_and_copies_fifo_in() {
        let dir = std::env::temp_dir().join(format!("wasmsched-scale-prepare-{}", std::process::id()));
        let fifo = dir.join("policy_fifo.wasm");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(&fifo, b"\0asm").unwrap();
        let c = HostConfig { policies_dir: dir.join("policies.d"), cache_dir: dir.join("cache"), ..config() };
        let path = prepare(&dir, &c, &fifo).unwrap();
        assert_eq!(std::fs::read(dir.join("policies.d/fifo.wasm")).unwrap(), b"\0asm");
        assert!(std::fs::read_to_string(path).unwrap().contains("[policy.fifo]"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn toml_strings_escape_quotes_backslashes_and_controls() {
        assert_eq!(toml_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000A\"");
        assert_eq!((toml_key("fair-share"), toml_key("a.b")), ("fair-share".to_owned(), "\"a.b\"".to_owned()));
    }

    #[test]
    fn a_current_host_status_has_no_requests_or_tick_wall() {
        let status = json!({
            "ticks": 12, "jobs_queued": 3, "jobs_running": 9,
            "endpoints": [{"kind": "apiserver", "name": "https://127.0.0.1:6443/", "up": true, "jobs": 12, "down_for_ms": null}],
        });
        let r = status_reading(&status);
        assert_eq!((r.ticks, r.jobs_queued, r.jobs_running), (12, 3, 9));
        assert_eq!((r.requests, r.tick_wall), (None, None));
    }

    #[test]
    fn requests_are_summed_over_endpoints_and_tick_wall_read() {
        let status = json!({
            "ticks": 5,
            "endpoints": [{"requests": 40}, {"requests": 2}],
            "tick_wall": {"count": 5, "p50_ms": 12.5, "p99_ms": 80.0, "max_ms": 91.0},
        });
        let r = status_reading(&status);
        assert_eq!(r.requests, Some(42));
        assert_eq!(r.tick_wall, Some(TickWall { count: 5, p50_ms: 12.5, p99_ms: 80.0, max_ms: 91.0 }));
    }

    #[test]
    fn a_plain_and_a_chunked_response_give_the_same_body() {
        let plain = b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\n\r\n{\"a\":1}";
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n";
        assert_eq!(http_body(plain).unwrap(), b"{\"a\":1}");
        assert_eq!(http_body(chunked).unwrap(), b"{\"a\":1}");
    }

    #[test]
    fn a_refusal_is_an_error_naming_the_status_line() {
        let e = http_body(b"HTTP/1.1 401 Unauthorized\r\n\r\n").unwrap_err();
        assert!(e.contains("401"), "{e}");
    }

    #[test]
    fn log_counts_find_the_apiserver_trouble() {
        let log = "\
2026-01-01T00:00:00.429Z  INFO bound job=429 pod=scale-pod-00429
2026-01-01T00:00:01Z  WARN the apiserver does not answer (timed out)
2026-01-01T00:00:02Z ERROR kube_client::client::builder: failed with status 429 Too Many Requests
E1126 12:07:00.429063    1897 configmap_cafile_content.go:246] \"Unhandled Error\"
I1126 12:07:00.500000    1897 eventhandlers.go:1] \"Add event for unscheduled pod\"
";
        assert_eq!(
            log_counts(log),
            LogCounts { lines: 5, errors: 2, does_not_answer: 1, timed_out: 1, too_many_requests: 1 }
        );
    }
}
