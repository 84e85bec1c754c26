//! The watchdog: no active policy, however broken, keeps the jobs from running. The loop
//! ([`crate::control::drive`]) shows it every tick, for every backend, and it benches the
//! active version — the host stops calling it and runs a safe policy instead, the built-in
//! `keep-limits` (apply nothing) or `fair-share` (lift every limit), with the backend's own
//! placement starting queued jobs — when:
//!
//! - **it fails**: it failed on at least every other call (trapped, ran past its deadline,
//!   returned its own error or an oversized decision, or sat in quarantine) for longer than
//!   `after`, twice at least. The count runs from its first failure, and starts again once its
//!   answers outnumber its failures since then: a version that fails on alternate calls is
//!   benched as one that fails on every call is;
//! - **it starves the queue**: a policy that places left a queued job unplaced although the
//!   default placement would start it now, for longer than `stall-after`. The host starts
//!   such a job itself, with the default placement, and says so (a warning naming the job,
//!   the audit log's `rescued`, the status, the metric `wasmsched_stall_rescues_total`); after
//!   `stall-bench-after` rescues within `stall-window` it benches the version;
//! - **it keeps every job from progressing**: jobs ran, but none of them did any work for
//!   longer than `progress-after` (each start undone before its first step, again and again),
//!   where the backend can tell (the simulator can; a live backend cannot and is not judged on
//!   it);
//! - **it undoes the work it lets start** (a livelock): it disrupted one training job —
//!   preempted, migrated, resized or stopped it — `churn-after` times in a row, each time
//!   before the job made progress it keeps since the disruption before (or, the first time,
//!   ever). What is kept is the backend's to say (`Progress::progressed_since`): on a live
//!   backend, an epoch reported (the job checkpoints at its end); in the simulator, any work
//!   of a GPU job (it keeps every step) and an epoch of a CPU job. Judged on what every
//!   backend has, so on every backend; jobs that do not train (services) are not counted, and
//!   another version starts every count again.
//!
//! It says so once at error level, in the status and in the metrics, and hands control back
//! when another version becomes active: a new one admitted, or an operator's rollback. Time
//! runs on the backend's clock: wall time on a live backend, virtual time in the simulator.
//!
//! ```toml
//! [watchdog]
//! enabled = true
//! after = "30s"
//! safe = "keep-limits"     # or "fair-share"
//! stall-after = "60s"
//! stall-bench-after = 3    # rescues
//! stall-window = "10m"
//! progress-after = "10m"
//! churn-after = 5          # disruptions in a row of one job, each before it progressed
//! ```

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use wasmsched_core::bindings::wit;
use wasmsched_core::world::{JobId, World};
use wasmsched_runtime::supervise::Fallback;

/// When the watchdog steps in, and what runs then.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct WatchdogConfig {
    /// Whether it watches (default true): off, it neither benches nor rescues.
    pub enabled: bool,
    /// How long the active policy may fail on every call before it is benched (default
    /// `"30s"`).
    #[serde(deserialize_with = "wasmsched_core::units::duration")]
    pub after: Duration,
    /// What runs while it is benched: `"keep-limits"` (default) or `"fair-share"`.
    pub safe: Fallback,
    /// How long a placing policy may leave a job waiting that the default placement would
    /// start, before the host starts it (default `"60s"`).
    #[serde(deserialize_with = "wasmsched_core::units::duration")]
    pub stall_after: Duration,
    /// Rescues within `stall-window` that bench the version (default 3).
    pub stall_bench_after: u32,
    /// The sliding window rescues are counted over (default `"10m"`).
    #[serde(deserialize_with = "wasmsched_core::units::duration")]
    pub stall_window: Duration,
    /// How long jobs may run with none of them progressing before the version is benched
    /// (default `"10m"`: a preemptive scheduler may restart every job at once, and a start
    /// takes its time, but not ten minutes of nothing, round after round).
    #[serde(deserialize_with = "wasmsched_core::units::duration")]
    pub progress_after: Duration,
    /// Disruptions in a row of one training job, each before it progressed since the one
    /// before, that bench the version (default 5).
    pub churn_after: u32,
}

impl Default for WatchdogConfig {
    fn default() -> Self {
        WatchdogConfig {
            enabled: true,
            after: Duration::from_secs(30),
            safe: Fallback::KeepLimits,
            stall_after: Duration::from_secs(60),
            stall_bench_after: 3,
            stall_window: Duration::from_secs(600),
            progress_after: Duration::from_secs(600),
            churn_after: 5,
        }
    }
}

/// A benched version, for the status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Benched {
    /// The policy's name.
    pub policy: String,
    /// The sha256 of the version benched.
    pub sha256: String,
    /// When the trouble began, on the backend's clock (ms): its first failure, its first
    /// rescue in the window, or the last progress.
    pub failing_since_ms: u64,
    /// When the watchdog benched it, on the backend's clock (ms).
    pub benched_at_ms: u64,
    /// What runs instead.
    pub safe: Fallback,
    /// Why, in words.
    #[serde(default)]
    pub why: String,
}

/// What the loop shows the watchdog of one tick.
#[derive(Clone, Copy, Debug)]
pub struct Seen<'a> {
    /// The active policy's name.
    pub policy: &'a str,
    /// The sha256 of the active version.
    pub sha256: &'a str,
    /// Whether it failed, when it was asked on this tick.
    pub failed: Option<bool>,
    /// Jobs the host rescued from its queue on this tick.
    pub rescued: usize,
    /// How long no job has progressed although jobs run, when the backend can tell.
    pub idle_ms: Option<u64>,
    /// The job disrupted most times in a row before it progressed, on this tick: its name and
    /// the count ([`Churn`]).
    pub churned: Option<(&'a str, u32)>,
}

/// The watchdog's state: how long the active version has been failing, what it was rescued
/// from, and whom it benched.
#[derive(Debug, Default)]
pub struct Watchdog {
    config: WatchdogConfig,
    /// The version failing: since when, and its failures and answers since then.
    failing: Option<Failing>,
    /// The version rescued from, and when each rescue in the window was.
    rescues: Option<(String, VecDeque<u64>)>,
    benched: Option<Benched>,
    /// The loop's tick: the stall window holds `stall-bench-after` of them at least.
    tick: Duration,
}

impl Watchdog {
    /// A watchdog that has seen nothing.
    pub fn new(config: WatchdogConfig) -> Self {
        Watchdog { config, failing: None, rescues: None, benched: None, tick: Duration::ZERO }
    }

    /// One that watches a loop ticking every `tick`: a stall window shorter than
    /// `stall-bench-after` ticks could never hold that many rescues, and is taken as that long.
    pub fn ticking(mut self, tick: Duration) -> Self {
        self.tick = tick;
        self
    }

    /// The version benched now, if any.
    pub fn benched(&self) -> Option<&Benched> {
        self.benched.as_ref()
    }

    /// One tick at `now_ms`, as `seen`. Gives the benching when this tick benches the version.
    pub fn observe(&mut self, seen: Seen<'_>, now_ms: u64) -> Option<&Benched> {
        if !self.config.enabled || self.benched.is_some() {
            return None;
        }
        let why = self
            .failing(&seen, now_ms)
            .or_else(|| self.starving(&seen, now_ms))
            .or_else(|| {
                let idle = seen.idle_ms.filter(|&idle| idle >= self.config.progress_after.as_millis() as u64)?;
                let why = format!("no job made progress for {} s although jobs ran", idle / 1000);
                Some((now_ms.saturating_sub(idle), why))
            })
            .or_else(|| {
                let (job, in_row) = seen.churned.filter(|&(_, n)| n >= self.config.churn_after.max(1))?;
                let why =
                    format!("it disrupted job {job} {in_row} times in a row, each time before the job made progress");
                Some((now_ms, why))
            })?;
        self.failing = None;
        self.rescues = None;
        let (since, why) = why;
        self.benched = Some(Benched {
            policy: seen.policy.to_string(),
            sha256: seen.sha256.to_string(),
            failing_since_ms: since,
            benched_at_ms: now_ms,
            safe: self.config.safe,
            why,
        });
        self.benched.as_ref()
    }

    /// When the version has failed on at least every other call for `after`, twice at least:
    /// since when, and why in words.
    fn failing(&mut self, seen: &Seen<'_>, now_ms: u64) -> Option<(u64, String)> {
        let failed = seen.failed?;
        let f = match &mut self.failing {
            Some(f) if f.digest == seen.sha256 => f,
            _ if !failed => return None,
            slot => slot.insert(Failing { digest: seen.sha256.to_string(), since_ms: now_ms, failures: 0, answers: 0 }),
        };
        match failed {
            true => f.failures += 1,
            false => f.answers += 1,
        }
        if f.answers > f.failures {
            self.failing = None;
            return None;
        }
        let failing = now_ms.saturating_sub(f.since_ms);
        // One failure is not a pattern, however long the ticks between calls.
        (f.failures >= 2 && failing >= self.config.after.as_millis() as u64).then(|| {
            let how = match f.answers {
                0 => "on every call".to_string(),
                n => format!("on {} of its {} calls", f.failures, f.failures + n),
            };
            (f.since_ms, format!("it failed {how} for {} s", failing / 1000))
        })
    }

    /// When the version was rescued from `stall-bench-after` times within the window.
    fn starving(&mut self, seen: &Seen<'_>, now_ms: u64) -> Option<(u64, String)> {
        if seen.rescued == 0 {
            return None;
        }
        let at_least = self.tick.saturating_mul(self.config.stall_bench_after.max(1));
        let window_ms = self.config.stall_window.max(at_least).as_millis() as u64;
        let times = match &mut self.rescues {
            Some((digest, times)) if digest == seen.sha256 => times,
            slot => &mut slot.insert((seen.sha256.to_string(), VecDeque::new())).1,
        };
        times.extend(std::iter::repeat_n(now_ms, seen.rescued));
        while times.front().is_some_and(|&at| now_ms.saturating_sub(at) >= window_ms) {
            times.pop_front();
        }
        let (count, first) = (times.len(), *times.front()?);
        (count >= self.config.stall_bench_after.max(1) as usize).then(|| {
            let window = humantime::format_duration(self.config.stall_window);
            (first, format!("the host started {count} jobs it left waiting in the last {window}"))
        })
    }

    /// Control goes back to a policy (another version is active): the benching ends.
    pub fn release(&mut self) -> Option<Benched> {
        self.failing = None;
        self.rescues = None;
        self.benched.take()
    }
}

/// A version's failing streak: from its first failure, while its failures are at least as many
/// as its answers.
#[derive(Debug)]
struct Failing {
    digest: String,
    since_ms: u64,
    failures: u32,
    answers: u32,
}

/// Training jobs disrupted before they progressed: per job, when it was last disrupted and how
/// many disruptions in a row found it with no progress it keeps since the one before (the
/// watchdog's livelock rule; the backend says what progress is kept,
/// `Progress::progressed_since`). Counted for one version: another starts every count again.
#[derive(Debug, Default)]
pub struct Churn {
    digest: String,
    /// Each job disrupted: when last, and disruptions in a row without progress.
    jobs: HashMap<JobId, (u64, u32)>,
}

impl Churn {
    /// Nothing seen.
    pub fn new() -> Self {
        Churn::default()
    }

    /// Version `digest` disrupted `jobs` in `world`, at its time; `progressed(job, since)` says
    /// whether a job made progress it keeps since a time (since it started, when None). Gives
    /// the training job of them disrupted most times in a row before it progressed, and how
    /// many.
    pub fn disrupted(
        &mut self,
        digest: &str,
        jobs: impl IntoIterator<Item = JobId>,
        world: &World,
        progressed: impl Fn(JobId, Option<u64>) -> bool,
    ) -> Option<(JobId, u32)> {
        if self.digest != digest {
            self.digest = digest.to_string();
            self.jobs.clear();
        }
        let now_ms = world.time_ms();
        let mut worst: Option<(JobId, u32)> = None;
        for job in jobs {
            if world.spec(job).is_none_or(|s| s.kind != wit::JobKind::Training) {
                continue;
            }
            let last = self.jobs.get(&job).copied();
            let in_row = match last {
                Some((at, n)) if !progressed(job, Some(at)) => n + 1,
                Some(_) => 0,
                None => u32::from(!progressed(job, None)),
            };
            self.jobs.insert(job, (now_ms, in_row));
            if worst.is_none_or(|(_, n)| in_row > n) {
                worst = Some((job, in_row));
            }
        }
        self.jobs.retain(|&job, _| world.state(job).is_some());
        worst.filter(|&(_, n)| n > 0)
    }
}

/// Which queued jobs a placing policy has left waiting although the default placement would
/// start them, and since when.
#[derive(Debug, Default)]
pub struct Stalls {
    /// Each such job, and when it was first seen so.
    since: HashMap<JobId, u64>,
}

impl Stalls {
    /// Nothing seen.
    pub fn new() -> Self {
        Stalls::default()
    }

    /// Forget every job: the policy does not place now.
    pub fn clear(&mut self) {
        self.since.clear();
    }

    /// At `now_ms`, the default placement would start `startable`, in its order: those of them
    /// left so for `after` or longer, in that order. The others are forgotten.
    pub fn overdue(&mut self, startable: &[JobId], now_ms: u64, after: Duration) -> Vec<JobId> {
        let after_ms = after.as_millis() as u64;
        let mut kept = HashMap::with_capacity(startable.len());
        let mut overdue = Vec::new();
        for &job in startable {
            let since = self.since.get(&job).copied().unwrap_or(now_ms);
            kept.insert(job, since);
            if now_ms.saturating_sub(since) >= after_ms {
                overdue.push(job);
            }
        }
        self.since = kept;
        overdue
    }

    /// `jobs` were started: they wait no more.
    pub fn started(&mut self, jobs: &[JobId]) {
        for job in jobs {
            self.since.remove(job);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dog() -> Watchdog {
        Watchdog::new(WatchdogConfig { after: Duration::from_secs(30), ..WatchdogConfig::default() })
    }

    fn seen(sha256: &str, failed: bool) -> Seen<'_> {
        Seen { policy: "p", sha256, failed: Some(failed), rescued: 0, idle_ms: None, churned: None }
    }

    #[test]
    fn a_version_failing_for_longer_than_after_is_benched_once() {
        let mut w = dog();
        for s in (0..30).step_by(5) {
            assert!(w.observe(seen("a", true), s * 1000).is_none(), "not yet at {s} s");
        }
        let b = w.observe(seen("a", true), 30_000).cloned().expect("benched at 30 s");
        assert_eq!((b.failing_since_ms, b.benched_at_ms, b.safe), (0, 30_000, Fallback::KeepLimits));
        assert_eq!(b.why, "it failed on every call for 30 s");
        assert!(w.observe(seen("a", true), 60_000).is_none(), "said once");
        assert_eq!(w.benched(), Some(&b));
        assert_eq!(w.release(), Some(b));
        assert!(w.benched().is_none());
    }

    #[test]
    fn more_answers_than_failures_or_another_version_start_the_count_again() {
        let mut w = dog();
        assert!(w.observe(seen("a", true), 0).is_none());
        assert!(w.observe(seen("a", false), 10_000).is_none());
        assert!(w.observe(seen("a", false), 20_000).is_none(), "two answers to one failure");
        assert!(w.observe(seen("a", true), 25_000).is_none());
        assert!(w.observe(seen("a", true), 50_000).is_none(), "failing since 25 s only");
        assert!(w.observe(seen("b", true), 56_000).is_none(), "another version fails on its own count");
        assert!(w.observe(Seen { failed: None, ..seen("b", true) }, 70_000).is_none(), "a tick not asked");
        assert!(w.observe(seen("b", true), 86_000).is_some());
    }

    #[test]
    fn a_version_failing_on_alternate_calls_is_benched_and_one_failing_less_often_is_not() {
        let mut w = dog();
        for s in (0..30).step_by(5) {
            assert!(w.observe(seen("a", s % 10 == 0), s * 1000).is_none(), "not yet at {s} s");
        }
        let b = w.observe(seen("a", true), 30_000).cloned().expect("benched at 30 s");
        assert_eq!(b.why, "it failed on 4 of its 7 calls for 30 s");
        let mut w = dog();
        for s in (0..300).step_by(5) {
            assert!(w.observe(seen("a", s % 15 == 0), s * 1000).is_none(), "one call in three fails: never benched");
        }
        let mut w = dog();
        assert!(w.observe(seen("a", true), 0).is_none());
        assert!(w.observe(seen("a", false), 60_000).is_none(), "one failure is not a pattern");
        assert!(w.observe(seen("a", true), 120_000).is_some(), "two in three calls are");
    }

    #[test]
    fn a_job_disrupted_churn_after_times_in_a_row_before_it_progressed_benches() {
        let mut w = dog();
        let churned = |n| Seen { churned: Some(("cifar", n)), ..seen("a", false) };
        assert!(w.observe(churned(4), 0).is_none());
        let b = w.observe(churned(5), 30_000).cloned().expect("five in a row");
        assert_eq!(b.why, "it disrupted job cifar 5 times in a row, each time before the job made progress");
    }

    #[test]
    fn churn_counts_disruptions_of_a_training_job_until_it_reports_progress() {
        use wasmsched_core::bindings::wit::JobKind;
        let mut world = World::new();
        let spec =
            |name: &str, kind| wit::JobSpec { name: name.into(), kind, ..wasmsched_core::world::sample::job_spec(0) };
        let train = world.enqueue_job(spec("train", JobKind::Training));
        let serve = world.enqueue_job(spec("serve", JobKind::Inference));
        let mut churn = Churn::new();
        let at = |world: &mut World, ms: u64, jobs: &[JobId], churn: &mut Churn, digest: &str| {
            world.set_time_ms(ms);
            churn.disrupted(digest, jobs.iter().copied(), world, |job, since| world.reported_since(job, since))
        };
        assert_eq!(at(&mut world, 1_000, &[train, serve], &mut churn, "a"), Some((train, 1)), "never reported: undone");
        assert_eq!(at(&mut world, 2_000, &[train], &mut churn, "a"), Some((train, 2)));
        world.set_time_ms(2_500);
        assert!(world.record(train, 1, vec![]), "an epoch after the last disruption");
        assert_eq!(at(&mut world, 3_000, &[train], &mut churn, "a"), None, "it progressed: the count starts again");
        assert_eq!(at(&mut world, 4_000, &[train], &mut churn, "a"), Some((train, 1)));
        assert_eq!(at(&mut world, 5_000, &[train], &mut churn, "b"), None, "another version counts afresh");
        assert_eq!(at(&mut world, 6_000, &[serve, serve], &mut churn, "b"), None, "a service is never counted");
    }

    #[test]
    fn a_stall_window_holds_stall_bench_after_ticks_however_long_the_tick() {
        let mut w = Watchdog::new(WatchdogConfig::default()).ticking(Duration::from_secs(600));
        let rescued = |n| Seen { rescued: n, ..seen("a", false) };
        assert!(w.observe(rescued(1), 0).is_none());
        assert!(w.observe(rescued(1), 600_000).is_none());
        assert!(w.observe(rescued(1), 1_200_000).is_some(), "three rescues a tick apart, in a window of 30 min");
    }

    #[test]
    fn rescues_within_the_window_bench_and_older_ones_fall_out_of_it() {
        let mut w = dog();
        let rescued = |n| Seen { rescued: n, ..seen("a", false) };
        assert!(w.observe(rescued(1), 0).is_none());
        assert!(w.observe(rescued(1), 300_000).is_none());
        assert!(w.observe(rescued(1), 600_000).is_none(), "the first fell out of the 10 min window");
        let b = w.observe(rescued(1), 700_000).cloned().expect("three in the window");
        assert_eq!((b.failing_since_ms, b.benched_at_ms), (300_000, 700_000));
        assert_eq!(b.why, "the host started 3 jobs it left waiting in the last 10m");
        w.release();
        assert!(w.observe(rescued(2), 800_000).is_none(), "the count starts again after a release");
        assert!(w.observe(rescued(5), 800_000).is_some(), "several at once count each");
    }

    #[test]
    fn jobs_running_without_progress_for_progress_after_bench() {
        let mut w = dog();
        let idle = |ms| Seen { idle_ms: Some(ms), ..seen("a", false) };
        assert!(w.observe(idle(599_000), 700_000).is_none());
        let b = w.observe(idle(600_000), 701_000).cloned().expect("ten minutes without progress");
        assert_eq!((b.failing_since_ms, b.why.as_str()), (101_000, "no job made progress for 600 s although jobs ran"));
    }

    #[test]
    fn a_disabled_watchdog_never_benches() {
        let mut w = Watchdog::new(WatchdogConfig { enabled: false, ..WatchdogConfig::default() });
        assert!(w.observe(seen("a", true), 0).is_none());
        assert!(w.observe(Seen { rescued: 100, idle_ms: Some(u64::MAX), ..seen("a", true) }, u64::MAX).is_none());
    }

    #[test]
    fn a_job_is_overdue_after_stall_after_of_being_startable_and_forgotten_when_not() {
        let mut s = Stalls::new();
        let after = Duration::from_secs(60);
        assert!(s.overdue(&[JobId(1), JobId(2)], 0, after).is_empty());
        assert!(s.overdue(&[JobId(1), JobId(2)], 30_000, after).is_empty());
        assert!(s.overdue(&[JobId(2)], 45_000, after).is_empty(), "1 was placed, or stopped fitting");
        assert_eq!(s.overdue(&[JobId(1), JobId(2)], 60_000, after), [2], "1 starts its count again");
        s.started(&[JobId(2)]);
        assert_eq!(s.overdue(&[JobId(1), JobId(2)], 90_000, after), Vec::<JobId>::new());
        assert_eq!(s.overdue(&[JobId(2), JobId(1)], 120_000, after), [1]);
    }

    #[test]
    fn the_config_reads_its_keys_and_refuses_others() {
        let c: WatchdogConfig = toml::from_str(
            "after = \"5s\"\nsafe = \"fair-share\"\nstall-after = \"2m\"\nstall-bench-after = 5\nprogress-after = \"1h\"\nchurn-after = 9",
        )
        .unwrap();
        assert_eq!((c.enabled, c.after, c.safe), (true, Duration::from_secs(5), Fallback::FairShare));
        assert_eq!((c.stall_after, c.stall_bench_after), (Duration::from_secs(120), 5));
        assert_eq!((c.progress_after, c.churn_after), (Duration::from_secs(3600), 9));
        let err = toml::from_str::<WatchdogConfig>("safe = \"panic\"").unwrap_err().to_string();
        assert!(err.contains("keep-limits"), "{err}");
    }
}
