//! How much the host's log may say about one policy, however badly it behaves: its own lines
//! within a budget per minute ([`LogBudget`]), and the host's warnings about it (a call that
//! failed and fell back, actions refused, a disruption over budget) at most once a minute per
//! kind ([`Throttle`]), each with one line saying how many more there were. Both count wall
//! time: the log is written in wall time, and a simulated week passes in seconds.
//!
//! The counts behind the held-back lines are not lost: the status, the metrics and the audit
//! log keep every failure, refusal and rejection.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The interval both count over.
pub const INTERVAL: Duration = Duration::from_secs(60);

/// Warnings of each kind said at most once an interval: the first in full, the rest held back
/// and counted, and one line saying how many when the interval is over (at the next warning of
/// the kind, or when the throttle is dropped).
#[derive(Debug)]
pub struct Throttle {
    /// Whom the warnings are about, for the held-back lines.
    about: String,
    interval: Duration,
    kinds: HashMap<&'static str, Held>,
}

/// One kind's interval: when it began and how many were held back since.
#[derive(Debug)]
struct Held {
    since: Instant,
    held: u64,
}

impl Throttle {
    /// A throttle for the warnings about `about` (a policy's name, or "the loop").
    pub fn new(about: impl Into<String>) -> Self {
        Throttle::every(about, INTERVAL)
    }

    /// One that says each kind at most once every `interval`.
    pub fn every(about: impl Into<String>, interval: Duration) -> Self {
        Throttle { about: about.into(), interval, kinds: HashMap::new() }
    }

    /// Whether a warning of `kind` may be said now. One that may not is counted, and said
    /// as part of the count when the interval is over.
    pub fn allow(&mut self, kind: &'static str) -> bool {
        let now = Instant::now();
        match self.kinds.get_mut(kind) {
            Some(h) if now.duration_since(h.since) < self.interval => {
                h.held += 1;
                false
            }
            Some(h) => {
                let held = std::mem::take(&mut h.held);
                h.since = now;
                self.said(kind, held);
                true
            }
            None => {
                self.kinds.insert(kind, Held { since: now, held: 0 });
                true
            }
        }
    }

    /// How many warnings are held back now, of every kind.
    pub fn held(&self) -> u64 {
        self.kinds.values().map(|h| h.held).sum()
    }

    fn said(&self, kind: &str, held: u64) {
        if held > 0 {
            let every = humantime::format_duration(self.interval);
            tracing::warn!(about = %self.about, held, "{held} more \"{kind}\" warnings about {} in the last {every}, not logged one by one", self.about);
        }
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        for (kind, h) in &self.kinds {
            self.said(kind, h.held);
        }
    }
}

/// A policy's own log lines within a budget per interval, in lines and in bytes; the rest are
/// dropped, and counted. The first dropped line of an interval says so; the next interval
/// begins with how many were dropped.
#[derive(Debug)]
pub struct LogBudget {
    policy: String,
    lines: u32,
    bytes: u64,
    interval: Duration,
    window: Option<Window>,
}

/// One interval's use.
#[derive(Debug)]
struct Window {
    since: Instant,
    lines: u32,
    bytes: u64,
    dropped_lines: u64,
    dropped_bytes: u64,
}

impl LogBudget {
    /// `lines` and `bytes` a minute for `policy`.
    pub fn new(policy: impl Into<String>, lines: u32, bytes: u64) -> Self {
        LogBudget { policy: policy.into(), lines, bytes, interval: INTERVAL, window: None }
    }

    /// Whether a line of `len` bytes may be written now; one that may not is counted.
    pub fn admit(&mut self, len: usize) -> bool {
        let now = Instant::now();
        if let Some(w) = self.window.take_if(|w| now.duration_since(w.since) >= self.interval) {
            self.dropped(&w);
        }
        let fresh = || Window { since: now, lines: 0, bytes: 0, dropped_lines: 0, dropped_bytes: 0 };
        let window = self.window.get_or_insert_with(fresh);
        let len = len as u64;
        if window.lines < self.lines && window.bytes + len <= self.bytes {
            window.lines += 1;
            window.bytes += len;
            return true;
        }
        window.dropped_lines += 1;
        window.dropped_bytes += len;
        if window.dropped_lines == 1 {
            tracing::warn!(
                target: "policy",
                policy = %self.policy,
                "over its log budget ({} lines, {} bytes a minute): its next lines this minute are dropped and counted",
                self.lines,
                self.bytes
            );
        }
        false
    }

    /// Count a line dropped before it reached the budget (past the lines one call may log).
    pub fn drop_line(&mut self, len: usize) {
        if let Some(w) = &mut self.window {
            w.dropped_lines += 1;
            w.dropped_bytes += len as u64;
        }
    }

    fn dropped(&self, w: &Window) {
        if w.dropped_lines > 0 {
            tracing::warn!(
                target: "policy",
                policy = %self.policy,
                lines = w.dropped_lines,
                bytes = w.dropped_bytes,
                "dropped {} of its log lines ({} bytes) in a minute, over its budget or past the lines one call may log",
                w.dropped_lines,
                w.dropped_bytes
            );
        }
    }
}

impl Drop for LogBudget {
    fn drop(&mut self) {
        if let Some(w) = self.window.take() {
            self.dropped(&w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_is_said_once_an_interval_and_the_rest_counted() {
        let mut t = Throttle::every("p", Duration::from_millis(50));
        assert!(t.allow("fell back"));
        assert!(!t.allow("fell back"));
        assert!(!t.allow("fell back"));
        assert!(t.allow("rejected"), "another kind has its own interval");
        assert_eq!(t.held(), 2);
        std::thread::sleep(Duration::from_millis(60));
        assert!(t.allow("fell back"), "a new interval");
        assert_eq!(t.held(), 0);
    }

    #[test]
    fn a_budget_admits_its_lines_and_bytes_a_minute_and_drops_the_rest() {
        let mut b = LogBudget::new("p", 3, 100);
        assert!(b.admit(10) && b.admit(10) && b.admit(10));
        assert!(!b.admit(1), "the fourth line");
        let mut b = LogBudget::new("p", 100, 100);
        assert!(b.admit(60));
        assert!(!b.admit(60), "over the bytes");
        assert!(b.admit(40), "a shorter line still fits");
        b.drop_line(5);
        let w = b.window.as_ref().unwrap();
        assert_eq!((w.lines, w.bytes, w.dropped_lines, w.dropped_bytes), (2, 100, 2, 65));
    }
}
