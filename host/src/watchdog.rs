//! The watchdog: when the active policy has failed on every call for longer than
//! `watchdog.after` (it trapped, ran past its deadline, returned its own error or an oversized
//! decision, or sat in quarantine), the host stops calling it and runs a safe policy instead —
//! the built-in `keep-limits` (apply nothing) or `fair-share` (lift every limit), with the
//! backend's own placement starting queued jobs. It says so once at error level, in the status
//! and in the metrics, and hands control back when a new version is admitted or an operator
//! rolls back. Time runs on the backend's clock: wall time on a live backend.
//!
//! ```toml
//! [watchdog]
//! enabled = true
//! after = "30s"
//! safe = "keep-limits"     # or "fair-share"
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::runtime::supervise::Fallback;

/// When the watchdog takes over, and what runs then.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct WatchdogConfig {
    /// Whether it watches (default true).
    pub enabled: bool,
    /// How long the active policy may fail on every call before it is benched (default
    /// `"30s"`).
    #[serde(deserialize_with = "crate::units::duration")]
    pub after: Duration,
    /// What runs while it is benched: `"keep-limits"` (default) or `"fair-share"`.
    pub safe: Fallback,
}

impl Default for WatchdogConfig {
    fn default() -> Self {
        WatchdogConfig { enabled: true, after: Duration::from_secs(30), safe: Fallback::KeepLimits }
    }
}

/// A benched version, for the status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Benched {
    /// The policy's name.
    pub policy: String,
    /// The sha256 of the version benched.
    pub sha256: String,
    /// When it started failing, on the backend's clock (ms).
    pub failing_since_ms: u64,
    /// When the watchdog benched it, on the backend's clock (ms).
    pub benched_at_ms: u64,
    /// What runs instead.
    pub safe: Fallback,
}

/// The watchdog's state: how long the active version has been failing, and whom it benched.
#[derive(Debug, Default)]
pub struct Watchdog {
    config: WatchdogConfig,
    /// The version failing, and since when.
    failing: Option<(String, u64)>,
    benched: Option<Benched>,
}

impl Watchdog {
    /// A watchdog that has seen nothing.
    pub fn new(config: WatchdogConfig) -> Self {
        Watchdog { config, failing: None, benched: None }
    }

    /// The version benched now, if any.
    pub fn benched(&self) -> Option<&Benched> {
        self.benched.as_ref()
    }

    /// The active version's answer on a tick at `now_ms`: whether it `failed`. Gives the
    /// benching when this answer benches it.
    pub fn observe(&mut self, policy: &str, sha256: &str, failed: bool, now_ms: u64) -> Option<&Benched> {
        if !self.config.enabled || self.benched.is_some() {
            return None;
        }
        if !failed {
            self.failing = None;
            return None;
        }
        let since = match &self.failing {
            Some((digest, since)) if digest == sha256 => *since,
            _ => {
                self.failing = Some((sha256.to_string(), now_ms));
                now_ms
            }
        };
        if now_ms.saturating_sub(since) < self.config.after.as_millis() as u64 {
            return None;
        }
        self.failing = None;
        self.benched = Some(Benched {
            policy: policy.to_string(),
            sha256: sha256.to_string(),
            failing_since_ms: since,
            benched_at_ms: now_ms,
            safe: self.config.safe,
        });
        self.benched.as_ref()
    }

    /// Control goes back to the policy (a new version, or a rollback): the benching ends.
    pub fn release(&mut self) -> Option<Benched> {
        self.failing = None;
        self.benched.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dog() -> Watchdog {
        Watchdog::new(WatchdogConfig { after: Duration::from_secs(30), ..WatchdogConfig::default() })
    }

    #[test]
    fn a_version_failing_for_longer_than_after_is_benched_once() {
        let mut w = dog();
        for s in (0..30).step_by(5) {
            assert!(w.observe("p", "a", true, s * 1000).is_none(), "not yet at {s} s");
        }
        let b = w.observe("p", "a", true, 30_000).cloned().expect("benched at 30 s");
        assert_eq!((b.failing_since_ms, b.benched_at_ms, b.safe), (0, 30_000, Fallback::KeepLimits));
        assert!(w.observe("p", "a", true, 60_000).is_none(), "said once");
        assert_eq!(w.benched(), Some(&b));
        assert_eq!(w.release(), Some(b));
        assert!(w.benched().is_none());
    }

    #[test]
    fn one_good_answer_or_another_version_starts_the_count_again() {
        let mut w = dog();
        assert!(w.observe("p", "a", true, 0).is_none());
        assert!(w.observe("p", "a", false, 20_000).is_none());
        assert!(w.observe("p", "a", true, 25_000).is_none());
        assert!(w.observe("p", "a", true, 50_000).is_none(), "failing since 25 s only");
        assert!(w.observe("p", "b", true, 56_000).is_none(), "another version fails on its own count");
        assert!(w.observe("p", "b", true, 86_000).is_some());
    }

    #[test]
    fn a_disabled_watchdog_never_benches() {
        let mut w = Watchdog::new(WatchdogConfig { enabled: false, ..WatchdogConfig::default() });
        assert!(w.observe("p", "a", true, 0).is_none());
        assert!(w.observe("p", "a", true, u64::MAX).is_none());
    }

    #[test]
    fn the_config_reads_its_keys_and_refuses_others() {
        let c: WatchdogConfig = toml::from_str("after = \"5s\"\nsafe = \"fair-share\"").unwrap();
        assert_eq!((c.enabled, c.after, c.safe), (true, Duration::from_secs(5), Fallback::FairShare));
        let err = toml::from_str::<WatchdogConfig>("safe = \"panic\"").unwrap_err().to_string();
        assert!(err.contains("keep-limits"), "{err}");
    }
}
