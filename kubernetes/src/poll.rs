//! What the kubelet summaries ([`super::usage`]) and the GPU exporters ([`super::gpus`]) share:
//! each node's source is read again and again, one request per node at a time and a bounded
//! number in all, through the apiserver's proxy else directly; the tick waits for the answers
//! a moment only (one wait for both sources), a node that fails is asked again later and later,
//! and the nodes failing for one cause are logged in one line, once.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use wasmsched_core::live::Logged;

use super::{STATS_EARLY, STATS_EVERY, within};

/// How a node's source is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Route {
    /// Through the apiserver's proxy.
    Proxy,
    /// From the source itself.
    Direct,
}

/// A source's text and how it was reached, or why it could not be read.
pub(super) type Answer = Result<(String, Route), String>;

/// One node's reads of one source.
#[derive(Default)]
pub(super) struct Reads {
    /// How it is reached, once one way has worked.
    pub route: Option<Route>,
    /// The request made and not yet answered.
    pub asking: Option<JoinHandle<Answer>>,
    /// When it is next asked for: [`STATS_EVERY`] after an answer, the next tick while what it
    /// should measure is not measured yet (at most [`STATS_EARLY`] times in a row), longer after
    /// each failure in a row; None: at once.
    pub due: Option<Instant>,
    /// Its failures in a row.
    pub failures: u32,
    /// Its reads in a row asked for again at the next tick.
    pub early: u32,
}

impl Reads {
    /// Whether it may be asked now: nothing in flight, and due.
    pub fn due_now(&self, now: Instant) -> bool {
        self.asking.is_none() && self.due.is_none_or(|at| at <= now)
    }

    /// A read failed: the next after `backoff(failures)`. Whether it is the first failure in a
    /// row, the one to report (a node that keeps failing is reported once, when it starts to).
    pub fn failed(&mut self, backoff: fn(u32) -> Duration) -> bool {
        self.failures += 1;
        self.due = Some(Instant::now() + backoff(self.failures));
        self.failures == 1
    }

    /// A read of node `node`'s `source` answered through `route`, with `unmeasured` of what it
    /// should measure not measured yet ([`next_read`]).
    pub fn answered(&mut self, node: &str, source: &'static str, route: Route, unmeasured: u32) {
        if self.failures > 0 {
            tracing::info!(node, source, "read again");
        }
        self.failures = 0;
        if self.route != Some(route) {
            if route == Route::Direct {
                tracing::info!(node, source, "read directly: the apiserver's proxy does not answer, or is not granted");
            }
            self.route = Some(route);
        }
        let wait;
        (wait, self.early) = next_read(unmeasured, self.early);
        self.due = Some(Instant::now() + wait);
    }
}

/// How long until a node's source is read again, with `unmeasured` running pods there that it
/// does not measure yet and `early` reads in a row made at once for them before: at once (at
/// most [`STATS_EARLY`] times in a row), else [`STATS_EVERY`]; and the reads in a row now.
pub(super) fn next_read(unmeasured: u32, early: u32) -> (Duration, u32) {
    let wait = if unmeasured > 0 && early < STATS_EARLY { Duration::ZERO } else { STATS_EVERY };
    (wait, if unmeasured > 0 { early.saturating_add(1) } else { 0 })
}

/// The nodes to ask now, oldest due first: `wanted`, [`Reads::due_now`], as many as `in_flight`
/// allows beside those asking already.
pub(super) fn due<'a>(reads: impl Iterator<Item = &'a Reads>, wanted: &[bool], in_flight: usize) -> Vec<usize> {
    let now = Instant::now();
    let mut asking = 0;
    let mut due: Vec<(Option<Instant>, usize)> = Vec::new();
    for (i, r) in reads.enumerate() {
        asking += usize::from(r.asking.is_some());
        if wanted.get(i).copied().unwrap_or(false) && r.due_now(now) {
            due.push((r.due, i));
        }
    }
    due.sort_unstable();
    due.into_iter().take(in_flight.saturating_sub(asking)).map(|(_, i)| i).collect()
}

/// The answers that come before `limit` passes, with their keys; the requests not answered by
/// then stay in their [`Reads`], read at a later tick.
pub(super) async fn answers<K: Copy>(reads: Vec<(K, &mut Reads)>, limit: Duration) -> Vec<(K, Answer)> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut answers = Vec::new();
    for (key, r) in reads {
        let Some(ask) = r.asking.as_mut() else { continue };
        if let Ok(answer) = tokio::time::timeout_at(deadline, ask).await {
            r.asking = None;
            answers.push((key, answer.unwrap_or_else(|e| Err(format!("the request failed: {e}")))));
        }
    }
    answers
}

/// Text from `proxy`'s `proxied` path (the apiserver's proxy), else from `direct`'s `path`
/// (the source itself, when it can be reached so); straight to `direct` once `route` says the
/// proxy does not work. Each request gives up after `limit`.
pub(super) async fn get(
    route: Option<Route>,
    (proxy, proxied): (kube::Client, String),
    direct: Option<(kube::Client, String)>,
    limit: Duration,
) -> Answer {
    let get = |client: kube::Client, path: String| async move {
        let request = http::Request::get(path).body(Vec::new()).map_err(kube::Error::HttpError)?;
        within(limit, client.request_text(request)).await
    };
    let answer = match route {
        Some(Route::Direct) if direct.is_some() => Err(None),
        _ => get(proxy, proxied).await.map_err(Some),
    };
    match (answer, direct) {
        (Ok(text), _) => Ok((text, Route::Proxy)),
        (Err(proxy_error), Some((direct, path))) => match get(direct, path).await {
            Ok(text) => Ok((text, Route::Direct)),
            Err(e) => Err(format!(
                "{}directly: {}",
                proxy_error.map_or(String::new(), |p| format!("through the apiserver: {}; ", said(&p))),
                said(&e)
            )),
        },
        (Err(e), None) => Err(e.map_or_else(String::new, |e| said(&e))),
    }
}

/// What the apiserver said, in short: its status code and message, not the whole status.
pub(super) fn said(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => format!("{} {}", status.code, status.message),
        other => other.to_string(),
    }
}

/// The nodes of `failed` (name, why), one call of `warn` per cause (the first five names, how
/// many more, the cause), each cause once under `key`: a thousand nodes failing alike are one
/// line, not one a tick.
pub(super) fn log_causes(logged: &mut Logged, key: &str, failed: &[(&str, String)], warn: impl Fn(&str, usize, &str)) {
    let mut causes: HashMap<&str, Vec<&str>> = HashMap::new();
    for (name, why) in failed {
        causes.entry(why.as_str()).or_default().push(name);
    }
    for (why, names) in causes {
        if logged.first(format!("{key}:{why}")) {
            warn(&names[..names.len().min(5)].join(", "), names.len().saturating_sub(5), why);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_with_pods_not_measured_is_asked_again_at_once_a_few_times_only() {
        assert_eq!(next_read(0, 3), (STATS_EVERY, 0));
        assert_eq!(next_read(2, 0), (Duration::ZERO, 1));
        assert_eq!(next_read(1, STATS_EARLY - 1), (Duration::ZERO, STATS_EARLY));
        assert_eq!(next_read(1, STATS_EARLY), (STATS_EVERY, STATS_EARLY + 1));
    }

    #[test]
    fn the_nodes_due_are_the_wanted_ones_oldest_first_within_the_bound() {
        let later = Instant::now() + Duration::from_secs(60);
        let past = |s| Some(Instant::now() - Duration::from_secs(s));
        let mut reads: Vec<Reads> = (0..5).map(|_| Reads::default()).collect();
        (reads[0].due, reads[1].due, reads[2].due, reads[3].due) = (past(1), past(9), Some(later), None);
        assert_eq!(due(reads.iter(), &[true, true, true, true, false], 8), [3, 1, 0], "never asked first");
        assert_eq!(due(reads.iter(), &[true, true, true, true, false], 2), [3, 1]);
        let mut failing = Reads::default();
        assert!(failing.failed(|_| Duration::from_secs(60)), "the first failure is reported");
        assert!(!failing.failed(|_| Duration::from_secs(60)), "the next is not");
        assert!(!failing.due_now(Instant::now()), "it waits its backoff");
        failing.answered("vm", "test", Route::Direct, 0);
        assert_eq!((failing.failures, failing.route, failing.early), (0, Some(Route::Direct), 0));
    }
}
