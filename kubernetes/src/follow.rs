//! A job's progress on Kubernetes: from its pod's `wasmsched.progress` annotation when it
//! reports there, else from its log, followed while one of `max-log-streams` is free. A stream
//! that will not open is tried again later and later; one quiet for [`FOLLOW_QUIET`] is
//! followed again.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures_util::AsyncReadExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::LogParams;
use wasmsched_core::live::progress;

use super::{Kubernetes, Managed, pod};

/// The annotation through which a job may report its progress instead of its log: its latest
/// progress lines, each after its time (RFC 3339), newest last.
pub const PROGRESS: &str = "wasmsched.progress";

/// When a log stream is next opened after one ended, `opened` or not: at once after one that
/// opened; after one that would not (a kubelet that does not answer), later and later, not at
/// every tick. `failed`: the last retry and the failures in a row.
fn retry_after(opened: bool, failed: Option<(Instant, u32)>, now: Instant) -> Option<(Instant, u32)> {
    if opened {
        return None;
    }
    let failures = failed.map_or(0, |(_, n)| n) + 1;
    Some((now + super::backoff(Duration::from_secs(1), failures, FOLLOW_QUIET), failures))
}

/// Where a log stream resumes after the last line read (`after`, Unix ns; 0: from the start):
/// an absolute time, not seconds ago, since the apiserver may take seconds to answer (one
/// starting up does) and would count them from then, skipping what came meanwhile. It takes
/// whole seconds: from two seconds before the last line, whose reader skips what it read.
fn since(after: u64) -> Option<Timestamp> {
    (after > 0).then(|| {
        let seconds = i64::try_from(after / 1_000_000_000).unwrap_or(i64::MAX).saturating_sub(2);
        Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH)
    })
}

impl Kubernetes {
    /// Read running pod `uid`'s progress: from its `wasmsched.progress` annotation when it has
    /// one, else by following its log while a stream is free.
    pub(super) fn read_progress(&mut self, uid: &Arc<str>, p: &Pod, streams: &mut Streams) {
        let Some(m) = self.jobs.get_mut(uid) else { return };
        if let Some(value) = p.metadata.annotations.as_ref().and_then(|a| a.get(PROGRESS)) {
            if let Some(f) = m.follower.take() {
                f.abort();
            }
            if m.annotated.as_deref() != Some(value) {
                let mut reader =
                    progress::Reader::new(m.job.metrics.clone(), m.job.last_line_ns.load(Ordering::Relaxed));
                self.inbox.feed(uid, &mut reader, format!("{value}\n").as_bytes(), &m.job.last_line_ns);
                m.annotated = Some(value.clone());
            }
            return;
        }
        if !pod::started(p) || m.follower.as_ref().is_some_and(|f| !f.is_finished()) {
            return;
        }
        let now = Instant::now();
        if let Some(ended) = m.follower.take() {
            use futures_util::FutureExt;
            let opened = ended.now_or_never().and_then(Result::ok).unwrap_or(false);
            m.follow_retry = retry_after(opened, m.follow_retry, now);
        }
        if m.follow_retry.is_none_or(|(at, _)| at <= now) && streams.take() {
            let follower = self.follow(uid, p);
            self.jobs.get_mut(uid).expect("just read").follower = follower;
        }
    }

    /// Follow pod `uid`'s log (its main container) from after the last line read. A stream
    /// quiet for [`FOLLOW_QUIET`] is dropped and followed again at the next observation: a
    /// stream can stall without ending (a log file the runtime started afresh, a proxy), and a
    /// job that prints rarely costs one request per pod per half minute.
    fn follow(&self, uid: &Arc<str>, p: &Pod) -> Option<tokio::task::JoinHandle<bool>> {
        let api = self.pods_api();
        let m = self.jobs.get(uid)?;
        let container = pod::main_container(p)?.name.clone();
        let (uid, name, metrics, inbox, last) =
            (uid.clone(), m.name.clone(), m.job.metrics.clone(), self.inbox.clone(), m.job.last_line_ns.clone());
        Some(self.rt.spawn(async move {
            let after = last.load(std::sync::atomic::Ordering::Relaxed);
            let params = LogParams {
                container: Some(container),
                follow: true,
                timestamps: true,
                since_time: since(after),
                ..LogParams::default()
            };
            let stream = match api.log_stream(&name, &params).await {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::debug!(pod = %name, "cannot follow the log: {e}");
                    return false;
                }
            };
            let mut stream = std::pin::pin!(stream);
            let mut reader = progress::Reader::new(metrics, after);
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match tokio::time::timeout(FOLLOW_QUIET, stream.read(&mut buf)).await {
                    Ok(Ok(0)) => tracing::debug!(pod = %name, "the log stream ended"),
                    Ok(Err(e)) => tracing::debug!(pod = %name, "the log stream broke: {e}"),
                    Err(_) => tracing::debug!(pod = %name, "the log stream was quiet; following it again"),
                    Ok(Ok(n)) => {
                        inbox.feed(&uid, &mut reader, &buf[..n], &last);
                        continue;
                    }
                }
                return true;
            }
        }))
    }
}

/// How long a log stream may bring nothing before it is followed again.
const FOLLOW_QUIET: Duration = Duration::from_secs(30);

/// The log streams one observation may open: the limit less those open.
pub(super) struct Streams {
    free: usize,
    /// Pods that wanted one and found none.
    waiting: usize,
}

impl Streams {
    pub(super) fn new<'a>(most: usize, jobs: impl Iterator<Item = &'a Managed>) -> Streams {
        let open = jobs.filter(|m| m.follower.as_ref().is_some_and(|f| !f.is_finished())).count();
        Streams { free: most.saturating_sub(open), waiting: 0 }
    }

    /// Whether a stream is free; it is taken.
    pub(super) fn take(&mut self) -> bool {
        let free = self.free > 0;
        self.free -= usize::from(free);
        self.waiting += usize::from(!free);
        free
    }

    pub(super) fn waiting(&self) -> Option<usize> {
        (self.waiting > 0).then_some(self.waiting)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_that_would_not_open_is_retried_later_and_later_and_one_that_opened_at_once() {
        let now = Instant::now();
        let first = retry_after(false, None, now).unwrap();
        assert_eq!((first.0 - now, first.1), (Duration::from_secs(2), 1));
        let third = retry_after(false, Some((now, 2)), now).unwrap();
        assert_eq!((third.0 - now, third.1), (Duration::from_secs(8), 3));
        assert_eq!(retry_after(false, Some((now, 30)), now).unwrap().0 - now, FOLLOW_QUIET, "at most");
        assert_eq!(retry_after(true, Some((now, 5)), now), None);
    }

    #[test]
    fn a_stream_resumes_two_whole_seconds_before_the_last_line() {
        assert_eq!(since(0), None, "from the start");
        let last = 1_795_860_010_750_000_000;
        assert_eq!(since(last), Some(Timestamp::from_second(1_795_860_008).unwrap()));
    }

    #[test]
    fn streams_are_handed_out_up_to_the_limit_and_the_rest_counted() {
        let mut streams = Streams { free: 1, waiting: 0 };
        assert_eq!(streams.waiting(), None);
        assert!(streams.take());
        assert!(!streams.take() && !streams.take());
        assert_eq!(streams.waiting(), Some(2));
    }
}
