//! What the live backends (Docker, Kubernetes) share, so that a third one (Slurm, Nomad) is one
//! backend crate of its own: the wall clock their ticks wait for ([`Clock`]), causes logged once
//! ([`Logged`]), requests bounded in time ([`within`]), the first-come-first-served default
//! placement over `wasmsched_rules::first_fit` ([`queue`]), the world's update for each effect an
//! action had ([`effect`]), the fields every managed job has ([`Job`]), what a job's checkpoint
//! copy carries ([`carried`]) and its progress lines ([`progress`]).

pub mod carried;
pub mod effect;
mod job;
pub mod progress;
pub mod queue;

use std::collections::HashSet;

pub use job::Job;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The label that marks the jobs a live backend manages when none is configured.
pub const DEFAULT_SELECTOR: &str = "wasmsched.managed=true";

/// Now, milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// A live backend's clock: the wall clock, from a zero set at the first observation.
#[derive(Clone, Copy, Debug, Default)]
pub struct Clock {
    /// The zero, as an instant and in Unix ms.
    origin: Option<(Instant, u64)>,
}

impl Clock {
    /// Wait until `until_ms` on the backend's clock is due (the host's pacer usually has
    /// already), so any driver can run a live backend. The first call sets the zero so that it
    /// is due at once; it returns true.
    pub fn wait_for(&mut self, until_ms: u64) -> bool {
        let elapsed = Duration::from_millis(until_ms);
        let first = self.origin.is_none();
        let (origin, _) = *self.origin.get_or_insert_with(|| {
            let now = Instant::now();
            (now.checked_sub(elapsed).unwrap_or(now), unix_ms().saturating_sub(until_ms))
        });
        if let Some(wait) = (origin + elapsed).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        first
    }

    /// The clock's zero in Unix ms; 0 before the first observation.
    pub fn origin_unix_ms(&self) -> u64 {
        self.origin.map_or(0, |(_, unix)| unix)
    }
}

/// Causes already logged, so that each is logged once (an engine down, a pod that can never
/// start, a garbage log line) until it is cleared.
#[derive(Debug, Default)]
pub struct Logged(HashSet<String>);

impl Logged {
    /// Warn with `message` unless `key` was warned of already.
    pub fn once(&mut self, key: String, message: impl FnOnce() -> String) {
        if self.first(key) {
            tracing::warn!("{}", message());
        }
    }

    /// Whether `key` is new (it is noted now): for a cause logged once at another level.
    pub fn first(&mut self, key: String) -> bool {
        self.0.insert(key)
    }

    /// Forget `key` (its cause is over); true when it had been logged.
    pub fn clear(&mut self, key: &str) -> bool {
        self.0.remove(key)
    }
}

/// `fut`, failing with `late()` once `limit` has passed (feature `async`: the live backends'
/// requests run on tokio).
#[cfg(feature = "async")]
pub async fn within<T, E>(
    limit: Duration,
    fut: impl Future<Output = Result<T, E>>,
    late: impl FnOnce() -> E,
) -> Result<T, E> {
    tokio::time::timeout(limit, fut).await.unwrap_or_else(|_| Err(late()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_wait_is_due_at_once_and_later_ones_wait_for_their_time() {
        let mut clock = Clock::default();
        let started = Instant::now();
        assert!(clock.wait_for(60_000), "the first observation starts the clock");
        assert!(started.elapsed() < Duration::from_secs(1), "the first observation is due at once");
        assert!(clock.origin_unix_ms() + 60_000 <= unix_ms() + 1_000);
        assert!(!clock.wait_for(60_050));
        assert!(started.elapsed() >= Duration::from_millis(50), "50 ms of the backend's clock are 50 wall ms");
    }

    #[test]
    fn a_cause_is_logged_once_until_cleared() {
        let mut logged = Logged::default();
        logged.once("down".into(), String::new);
        assert!(!logged.first("down".into()), "logged once already");
        assert!(logged.clear("down") && !logged.clear("down"));
        assert!(logged.first("down".into()), "a cause that was over is new again");
    }

    #[cfg(feature = "async")]
    #[test]
    fn a_request_past_its_limit_fails_as_late() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let slow = within(Duration::from_millis(10), std::future::pending::<Result<(), String>>(), || "late".into());
        assert_eq!(rt.block_on(slow), Err("late".to_string()));
        let quick = within(Duration::from_secs(1), async { Ok::<_, String>(7) }, || "late".into());
        assert_eq!(rt.block_on(quick), Ok(7));
    }
}
