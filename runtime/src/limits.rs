//! What one policy call may use, and the store state that enforces it: a memory cap through
//! the store's limiter, an empty and deterministic WASI context, and the `log` import.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::current::guest;
use crate::current::wasmsched::policy::host::{Host, Level};

pub use crate::throttle::LogBudget;

/// How many log lines one call may emit before the rest are dropped.
pub const LOG_LINES_PER_CALL: u32 = 64;
/// How many log lines a policy may write a minute, by default ([`Limits::log_lines`]).
pub const LOG_LINES_PER_MINUTE: u32 = 60;
/// How many bytes of log a policy may write a minute, by default ([`Limits::log_bytes`]).
pub const LOG_BYTES_PER_MINUTE: u64 = 8 << 10;
/// The longest log line kept, in bytes.
pub const LOG_LINE_BYTES: usize = 1024;
/// How much of a policy's stderr (its panic message) is kept.
const STDERR_BYTES: usize = 4096;

/// Limits on every call into a policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// Wall-clock deadline per call, enforced by epoch interruption.
    pub deadline: Duration,
    /// The instantiation budget: wall-clock deadline for making an instance and its `init`
    /// together, and again for its first `decide` (a resync that carries every job), apart
    /// from the per-call deadline, so that a large component (a bundled interpreter: CPython,
    /// QuickJS) has room to start while every later call keeps the tight per-call deadline.
    pub instantiate: Duration,
    /// Cap on the instance's linear memory.
    pub memory_bytes: u64,
    /// Fuel per call when the runtime counts fuel.
    pub fuel: u64,
    /// Log lines the policy may write a minute, over all its calls ([`LogBudget`]).
    pub log_lines: u32,
    /// Bytes of log the policy may write a minute.
    pub log_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_millis(50),
            instantiate: Duration::from_secs(1),
            memory_bytes: 64 << 20,
            fuel: u64::MAX / 2,
            log_lines: LOG_LINES_PER_MINUTE,
            log_bytes: LOG_BYTES_PER_MINUTE,
        }
    }
}

/// Enforces the memory cap and remembers that it was hit.
#[derive(Debug)]
pub struct MemoryCap {
    max_bytes: usize,
    /// Set when a growth was refused.
    pub hit: bool,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.max_bytes {
            self.hit = true;
            wasmtime::bail!("memory cap of {} MiB reached (asked for {} MiB)", self.max_bytes >> 20, desired >> 20);
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

/// The data of one policy instance's store.
pub struct StoreState {
    policy: Arc<str>,
    wasi: WasiCtx,
    table: ResourceTable,
    stderr: MemoryOutputPipe,
    pub(crate) memory: MemoryCap,
    pub(crate) log_lines: u32,
    log_budget: SharedLogBudget,
}

/// A log budget several instances of one policy share.
pub type SharedLogBudget = Arc<Mutex<LogBudget>>;

impl LogBudget {
    /// A budget of `limits`' lines and bytes a minute for `policy`, to share.
    pub fn shared(policy: &str, limits: &Limits) -> SharedLogBudget {
        Arc::new(Mutex::new(LogBudget::new(policy, limits.log_lines, limits.log_bytes)))
    }
}

impl StoreState {
    /// A store for `policy` under `limits`, its log counted against `log_budget`: no files,
    /// network, environment or arguments; clocks stuck at a fixed, non-zero instant and
    /// randomness from a fixed seed, so that calls replay bit for bit.
    pub fn new(policy: Arc<str>, limits: &Limits, log_budget: SharedLogBudget) -> Self {
        let stderr = MemoryOutputPipe::new(STDERR_BYTES);
        let wasi = WasiCtxBuilder::new()
            .stderr(stderr.clone())
            .wall_clock(FrozenClock)
            .monotonic_clock(FrozenClock)
            .secure_random(wasmtime_wasi::Deterministic::new(vec![0x5a, 0x17, 0xc3, 0x08]))
            .insecure_random(wasmtime_wasi::Deterministic::new(vec![0x2e, 0x91, 0x44, 0xb6]))
            .insecure_random_seed(0x5eed)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        let max_bytes = usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX);
        StoreState {
            policy,
            wasi,
            table: ResourceTable::new(),
            stderr,
            memory: MemoryCap { max_bytes, hit: false },
            log_lines: 0,
            log_budget,
        }
    }

    /// What the policy wrote to stderr (a panic message), on one line: Rust's panic hook
    /// writes "thread … panicked at FILE:LINE:COL:", the message, then a "note: …" line.
    pub fn stderr(&self) -> String {
        let bytes = self.stderr.contents();
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> =
            text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("note: ")).collect();
        lines.join(" ")
    }
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// The `types` interface has no functions, but the bindings ask for its host trait.
impl guest::Host for StoreState {}

/// An older policy's `log` is the same import under its older package.
macro_rules! older_log {
    ($($version:ident),+) => {$(
        impl crate::$version::old::Host for StoreState {}

        impl crate::$version::wasmsched::policy::host::Host for StoreState {
            fn log(&mut self, level: crate::$version::wasmsched::policy::host::Level, message: String) {
                use crate::$version::wasmsched::policy::host::Level as Old;
                let level = match level {
                    Old::Trace => Level::Trace,
                    Old::Debug => Level::Debug,
                    Old::Info => Level::Info,
                    Old::Warn => Level::Warn,
                    Old::Error => Level::Error,
                };
                Host::log(self, level, message);
            }
        }
    )+};
}

older_log!(v0_1, v0_2, v0_3);

impl Host for StoreState {
    fn log(&mut self, level: Level, message: String) {
        // Only what the log would write counts: a line below the level shown costs nothing.
        let shown = match level {
            Level::Trace => tracing::enabled!(target: "policy", tracing::Level::TRACE),
            Level::Debug => tracing::enabled!(target: "policy", tracing::Level::DEBUG),
            Level::Info => tracing::enabled!(target: "policy", tracing::Level::INFO),
            Level::Warn => tracing::enabled!(target: "policy", tracing::Level::WARN),
            Level::Error => tracing::enabled!(target: "policy", tracing::Level::ERROR),
        };
        if !shown {
            return;
        }
        let mut message = message;
        crate::validate::truncate_marked(&mut message, LOG_LINE_BYTES);
        self.log_lines += 1;
        let mut budget = self.log_budget.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.log_lines > LOG_LINES_PER_CALL {
            budget.drop_line(message.len());
            return;
        }
        if !budget.admit(message.len()) {
            return;
        }
        drop(budget);
        let policy = &*self.policy;
        match level {
            Level::Trace => tracing::trace!(target: "policy", policy, "{message}"),
            Level::Debug => tracing::debug!(target: "policy", policy, "{message}"),
            Level::Info => tracing::info!(target: "policy", policy, "{message}"),
            Level::Warn => tracing::warn!(target: "policy", policy, "{message}"),
            Level::Error => tracing::error!(target: "policy", policy, "{message}"),
        }
    }
}

/// Clocks that never move: a policy's only clock is the snapshot's. They read a fixed,
/// non-zero instant, because some language runtimes take a monotonic clock that reads zero for
/// one that is missing and abort (Go's does).
struct FrozenClock;

impl FrozenClock {
    /// What the wall clock reads: 2020-01-01T00:00:00Z, in seconds since the Unix epoch.
    const WALL_SECS: u64 = 1_577_836_800;
    /// What the monotonic clock reads: one second, in nanoseconds.
    const MONOTONIC_NANOS: u64 = 1_000_000_000;
}

impl wasmtime_wasi::HostWallClock for FrozenClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::from_secs(Self::WALL_SECS)
    }
}

impl wasmtime_wasi::HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        Self::MONOTONIC_NANOS
    }
}
