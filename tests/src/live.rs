//! Helpers for the tests of the long-running host: a temp dir with a policies directory and a
//! workload, a config, and the host running on a thread of its own.

use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::Duration;

use wasmsched::config::HostConfig;
use wasmsched::control::LoopSummary;
use wasmsched::host::{Host, HostError, HostHandle};
use wasmsched::record::{self, AuditLine};
use wasmsched::scenario::Scenario;
use wasmsched::status::Status;
use wasmsched::world::{Record, World};

use crate::common::runtime;

/// Long enough for any test: a service for 1000 hours beside two training jobs.
pub const LONG_WORKLOAD: &str = r#"
name = "long"

[[node]]
name = "n0"
cores = 16
memory = "64GiB"

[[job]]
name = "svc"
model = "bert"
kind = "inference"
arrival = "0s"
request-rate = 20
duration = "1000h"

[[job]]
name = "a"
model = "cifar10"
arrival = "0s"

[[job]]
name = "b"
model = "ncf"
arrival = "30s"
"#;

/// How long a test waits for something the host should do in well under a second.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A host's files.
pub struct Setup {
    /// Where everything is; removed on drop.
    pub dir: tempfile::TempDir,
}

impl Default for Setup {
    fn default() -> Self {
        Self::new()
    }
}

impl Setup {
    /// A temp dir with `policies/` and the long workload.
    pub fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("policies")).unwrap();
        std::fs::write(dir.path().join("workload.toml"), LONG_WORKLOAD).unwrap();
        Setup { dir }
    }

    /// The watched policies directory.
    pub fn policies(&self) -> PathBuf {
        self.dir.path().join("policies")
    }

    /// The audit log's path.
    pub fn audit(&self) -> PathBuf {
        self.dir.path().join("audit.jsonl")
    }

    /// The telemetry recording's path.
    pub fn recording(&self) -> PathBuf {
        self.dir.path().join("telemetry.jsonl")
    }

    /// A config: `tick`, `speed` and the `[policy.…]` tables given; audit log and recording
    /// on; no API; a short debounce.
    pub fn config(&self, tick: &str, speed: &str, policies: &str) -> HostConfig {
        let text = format!(
            "tick = \"{tick}\"\npolicies-dir = \"policies\"\n\
             [backend]\nkind = \"sim\"\nworkload = \"workload.toml\"\nspeed = {speed}\n\
             [reload]\ndebounce = \"20ms\"\n\
             [api]\nenabled = false\n\
             [record]\naudit = \"audit.jsonl\"\ntelemetry = \"telemetry.jsonl\"\n{policies}"
        );
        let path = self.dir.path().join("host.toml");
        std::fs::write(&path, text).unwrap();
        HostConfig::load(&path).unwrap()
    }

    /// Put `bytes` in place as `name.wasm`, the careful way: a hidden temp file renamed over.
    pub fn land(&self, name: &str, bytes: &[u8]) {
        let tmp = self.policies().join(format!(".{name}.wasm.tmp"));
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, self.policies().join(format!("{name}.wasm"))).unwrap();
    }

    /// Overwrite `name.wasm` in place, the careless way.
    pub fn overwrite(&self, name: &str, bytes: &[u8]) {
        std::fs::write(self.policies().join(format!("{name}.wasm")), bytes).unwrap();
    }

    /// Every whole line of the audit log.
    pub fn audit_lines(&self) -> Vec<AuditLine> {
        record::read_all(&self.audit()).unwrap()
    }
}

/// The component built from `policies/<name>` (or a fixture), as bytes.
pub fn component(name: &str) -> Vec<u8> {
    std::fs::read(wasmsched_test_artifacts::path(name)).unwrap()
}

/// The same component with a custom section appended: another file, another sha256, the same
/// code. `n` tells the variants apart.
pub fn variant(name: &str, n: u32) -> Vec<u8> {
    let mut bytes = component(name);
    let section_name = b"wasmsched-test-variant";
    let payload = n.to_le_bytes();
    let mut body = leb128(section_name.len() as u32);
    body.extend_from_slice(section_name);
    body.extend_from_slice(&payload);
    bytes.push(0); // a custom section
    bytes.extend(leb128(body.len() as u32));
    bytes.extend(body);
    bytes
}

fn leb128(mut n: u32) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

/// The hex sha256 of `bytes`, as the host reports a version.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// A host running on a thread of its own.
pub struct Running {
    /// Commands and status.
    pub handle: HostHandle,
    thread: Option<JoinHandle<Result<LoopSummary, HostError>>>,
}

impl Running {
    /// Start a host with `config` on a new thread; a simulator's workload loads as `run`
    /// loads it.
    pub fn start(config: HostConfig) -> Running {
        Running::start_logging(config, tracing::Dispatch::none())
    }

    /// [`Running::start`], the loop's thread logging to `log`.
    pub fn start_logging(config: HostConfig, log: tracing::Dispatch) -> Running {
        let host = Host::new(config, Scenario::load_workload).unwrap();
        let handle = host.handle();
        let thread = std::thread::spawn(move || tracing::dispatcher::with_default(&log, || host.run(runtime())));
        Running { handle, thread: Some(thread) }
    }

    /// A host with `config` on `backend` (built by the caller), on a new thread.
    pub fn start_on(config: HostConfig, backend: Box<dyn wasmsched::backend::Backend + Send>) -> Running {
        let built = wasmsched::backend::Built { backend, name: "a test's backend".into() };
        let host = Host::with_backend(config, built).unwrap();
        let handle = host.handle();
        let thread = std::thread::spawn(move || host.run(runtime()));
        Running { handle, thread: Some(thread) }
    }

    /// Wait until `ready` holds; panics with the status after [`PATIENCE`].
    pub fn wait(&self, what: &str, ready: impl FnMut(&Status) -> bool) -> Status {
        self.handle
            .board()
            .wait_until(PATIENCE, ready)
            .unwrap_or_else(|| panic!("waited {PATIENCE:?} for {what}; status: {:#?}", self.handle.board().get()))
    }

    /// Stop the host and wait for it.
    pub fn stop(mut self) -> LoopSummary {
        self.handle.stop();
        self.thread.take().unwrap().join().unwrap().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.handle.stop();
            let _ = t.join();
        }
    }
}

/// The serving sha256 of `policy`.
pub fn serving(s: &Status, policy: &str) -> Option<String> {
    s.policy(policy).and_then(|p| p.sha256.clone())
}

/// Every audit line is the next tick, on the backend's clock, with no gap.
pub fn assert_no_tick_missed(lines: &[AuditLine], tick_ms: u64) {
    assert!(!lines.is_empty(), "no audit lines");
    for pair in lines.windows(2) {
        assert_eq!(pair[1].tick, pair[0].tick + 1, "a tick is missing after tick {}", pair[0].tick);
        assert_eq!(pair[1].time_ms, pair[0].time_ms + tick_ms, "the clock jumped after tick {}", pair[0].tick);
    }
}

/// Every record's epoch follows the one before it: no epoch lost, none read (or run) twice.
/// `what` says where; a failure lists the epochs.
pub fn assert_consecutive_epochs<'a>(records: impl IntoIterator<Item = &'a Record>, what: &str) {
    let epochs: Vec<u32> = records.into_iter().map(|r| r.epoch).collect();
    assert!(epochs.windows(2).all(|w| w[1] == w[0] + 1), "{what}: an epoch lost or read twice: {epochs:?}");
}

/// Whether a live run of `expected` jobs, `created` of them made so far, is over: all made, all
/// seen by the world, and none left in it.
pub fn every_job_came_and_went(world: &World, created: usize, expected: usize) -> bool {
    created == expected && world.jobs_seen() as usize >= expected && world.job_count() + world.queue_len() == 0
}
