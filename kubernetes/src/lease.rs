//! Several replicas of the host, one acting: leader election through a `coordination.k8s.io`
//! Lease, as kube-scheduler and the controller manager do it.
//!
//! Every replica tries the Lease every retry period, and watches it. The holder renews it; the
//! others take it once they have seen it unchanged for a lease duration (or free: released, or
//! never held). Expiry is judged by when *this* replica saw the Lease change, on its own
//! monotonic clock, never by the times written in it, so clocks that disagree between nodes
//! cannot make two leaders. Every write carries the `resourceVersion` it read: of two replicas
//! writing at once, one wins.
//!
//! A replica acts only while its last successful renewal *began* less than a renew deadline ago
//! ([`Election::leading`]). A standby takes over a lease duration after it saw the last renewal
//! land, which is after that renewal began; with the renew deadline below the lease duration by
//! more than a request's timeout, the old leader has stopped acting, and its last requests have
//! been answered, before the new one starts. A leader cut off from the apiserver, or frozen and
//! woken up later, finds its deadline passed and does nothing.
//!
//! No crate fitted: kube-rs 5 has no elector; `kubert` and `kube-leader-election` are built on
//! older kube-rs releases (a second client in the tree); `kube-lease-manager` has no renew
//! deadline (a leader that cannot renew goes on believing it leads until a request fails) and
//! a standby looks again only when the expiry it last read has passed, so a released Lease waits
//! a full duration.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use serde::Deserialize;

use super::within;
use wasmsched_core::replicas::Leadership;

/// `[backend.election]`: run several replicas of the host against one cluster, one acting at a
/// time (`docs/kubernetes.md`, "Replicas"). Every key is optional; the times are
/// kube-scheduler's defaults.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ElectionConfig {
    /// The Lease's name (default `"wasmsched"`); replicas of one scheduler name the same.
    pub lease: String,
    /// The Lease's namespace, where the policies' checkpoints are kept too (default: the host's
    /// own: its pod's namespace in the cluster, else the kubeconfig context's).
    pub namespace: Option<String>,
    /// This replica's name in the Lease (default: `POD_NAME`, else the hostname, and a random
    /// suffix).
    pub identity: Option<String>,
    /// How long a standby waits after the Lease last changed before it takes over (15 s).
    #[serde(deserialize_with = "wasmsched_core::units::duration")]
    pub lease_duration: Duration,
    /// How long the leader acts after its last renewal began (10 s); it renews every retry
    /// period.
    #[serde(deserialize_with = "wasmsched_core::units::duration")]
    pub renew_deadline: Duration,
    /// How often every replica tries the Lease (2 s).
    #[serde(deserialize_with = "wasmsched_core::units::duration")]
    pub retry_period: Duration,
    /// The leader saves the policies' states to the cluster every this many ticks, and at a
    /// clean stop (10; 0 only at a stop).
    pub checkpoint_every: u64,
}

impl Default for ElectionConfig {
    fn default() -> Self {
        ElectionConfig {
            lease: "wasmsched".into(),
            namespace: None,
            identity: None,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            checkpoint_every: 10,
        }
    }
}

impl ElectionConfig {
    /// Refuse times that could make two leaders, or none; `timeout` is one request's limit.
    pub fn check(&self, timeout: Duration) -> Result<(), String> {
        super::filled(&self.lease, "election.lease is a Lease's name, e.g. \"wasmsched\"")?;
        if self.retry_period.is_zero() || self.retry_period >= self.renew_deadline {
            return Err("election.retry-period must be above 0 and below renew-deadline (2s and 10s by default)".into());
        }
        if self.renew_deadline + timeout > self.lease_duration {
            return Err(format!(
                "election.renew-deadline plus a request's timeout ({}s) must not exceed lease-duration: a leader \
                 could still be acting when a standby takes over (15s and 10s by default)",
                timeout.as_secs()
            ));
        }
        Ok(())
    }

    /// This replica's identity: as configured, else the pod's (or the machine's) name and a
    /// random suffix, so that a restarted replica is a new candidate.
    pub fn identity(&self) -> String {
        if let Some(id) = self.identity.as_ref().filter(|i| !i.trim().is_empty()) {
            return id.clone();
        }
        format!("{}_{:08x}", pod_name(), random_u32())
    }
}

/// This replica's name: its pod's (`POD_NAME`, which the Deployment sets), else the machine's,
/// else `wasmsched`.
pub fn pod_name() -> String {
    std::env::var("POD_NAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "wasmsched".into())
}

/// A random number from the standard library's hasher seeds (no crate for eight hex digits).
fn random_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.write_u32(std::process::id());
    h.finish() as u32
}

/// What the campaign and the backend share.
#[derive(Default)]
struct Standing {
    /// Until when this replica may act: when its last successful renewal began, plus the
    /// renew deadline.
    acting_until: Option<Instant>,
    /// The Lease's `resourceVersion` at the last look, and when it was first seen.
    observed: Option<(String, Instant)>,
    holder: Option<String>,
    transitions: u64,
    acquired: u64,
    /// Set by [`Election::step_down`]: the campaign releases the Lease and ends.
    stopping: bool,
    /// How many looks at the Lease (each with its write, if any) have ended.
    looks: u64,
}

impl Standing {
    /// The Lease is at `version`: a version not seen before counts from now.
    fn saw(&mut self, version: String) {
        if self.observed.as_ref().is_none_or(|(v, _)| *v != version) {
            self.observed = Some((version, Instant::now()));
        }
    }
}

/// This replica's candidacy: a task on the backend's runtime that keeps trying the Lease.
pub struct Election {
    standing: Arc<Mutex<Standing>>,
    identity: String,
    namespace: String,
    name: String,
    task: Option<tokio::task::JoinHandle<()>>,
    wake: Arc<tokio::sync::Notify>,
}

impl Election {
    /// Start campaigning as `identity` for `config`'s Lease through `api` (its namespace), each
    /// request within `timeout`.
    pub fn start(
        rt: &tokio::runtime::Runtime,
        api: Api<Lease>,
        config: &ElectionConfig,
        identity: String,
        timeout: Duration,
    ) -> Election {
        let standing = Arc::new(Mutex::new(Standing::default()));
        let wake = Arc::new(tokio::sync::Notify::new());
        let namespace = api.namespace().unwrap_or("default").to_string();
        let lease = format!("{namespace}/{}", config.lease);
        let campaign = Campaign {
            api,
            name: config.lease.clone(),
            identity: identity.clone(),
            config: config.clone(),
            timeout,
            standing: standing.clone(),
        };
        let task = rt.spawn(campaign.run(wake.clone()));
        tracing::info!(%identity, %lease, "campaigning for the lead");
        Election { standing, identity, namespace, name: config.lease.clone(), task: Some(task), wake }
    }

    /// Wait (up to `limit`) until the campaign's first look at the Lease (and its write, if it
    /// took the Lease) has ended, so that the tick that started it knows whether this replica
    /// leads and who does.
    pub fn first_look(&self, rt: &tokio::runtime::Runtime, limit: Duration) {
        let standing = self.standing.clone();
        let looked = move || standing.lock().expect("standing lock").looks > 0;
        rt.block_on(async move {
            let wait = async {
                while !looked() {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            };
            let _ = tokio::time::timeout(limit, wait).await;
        });
    }

    /// This replica's identity in the Lease.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The Lease's name.
    pub fn lease_name(&self) -> &str {
        &self.name
    }

    /// The Lease's namespace, where the checkpoints are kept too.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Whether this replica may act now.
    pub fn leading(&self) -> bool {
        let s = self.standing.lock().expect("standing lock");
        !s.stopping && s.acting_until.is_some_and(|until| Instant::now() < until)
    }

    /// The standing, for the status.
    pub fn leadership(&self) -> Leadership {
        let leading = self.leading();
        let s = self.standing.lock().expect("standing lock");
        Leadership {
            identity: self.identity.clone(),
            leading,
            holder: s.holder.clone(),
            lease: format!("{}/{}", self.namespace, self.name),
            transitions: s.transitions,
            acquired: s.acquired,
        }
    }

    /// Stop acting at once, release the Lease if this replica holds it (so a standby takes over
    /// at once rather than after a lease duration), and end the campaign.
    pub fn step_down(&mut self, rt: &tokio::runtime::Runtime, limit: Duration) {
        self.standing.lock().expect("standing lock").stopping = true;
        self.wake.notify_one();
        if let Some(task) = self.task.take() {
            let _ = rt.block_on(async move { tokio::time::timeout(limit, task).await });
        }
    }
}

impl Drop for Election {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Watch the Lease, so that a change counts from when it lands rather than from the next look
/// (a standby's lease duration then starts up to a retry period sooner), and a released Lease
/// is tried at once. Each change is still seen after it was written: the expiry stays safe.
async fn watch_changes(api: Api<Lease>, name: String, standing: Arc<Mutex<Standing>>, wake: Arc<tokio::sync::Notify>) {
    use futures_util::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher(api, config).default_backoff());
    while let Some(event) = events.next().await {
        let (Ok(watcher::Event::Apply(lease)) | Ok(watcher::Event::InitApply(lease))) = event else { continue };
        let Some(version) = lease.metadata.resource_version else { continue };
        let free = lease.spec.and_then(|s| s.holder_identity).is_none_or(|h| h.is_empty());
        standing.lock().expect("standing lock").saw(version);
        if free {
            wake.notify_one();
        }
    }
}

struct Campaign {
    api: Api<Lease>,
    name: String,
    identity: String,
    config: ElectionConfig,
    timeout: Duration,
    standing: Arc<Mutex<Standing>>,
}

impl Campaign {
    async fn run(self, wake: Arc<tokio::sync::Notify>) {
        let watch =
            tokio::spawn(watch_changes(self.api.clone(), self.name.clone(), self.standing.clone(), wake.clone()));
        let mut failures = 0u32;
        loop {
            if self.standing.lock().expect("standing lock").stopping {
                break;
            }
            let attempt = self.attempt().await;
            self.standing.lock().expect("standing lock").looks += 1;
            let wait = match attempt {
                Ok(wait) => {
                    failures = 0;
                    wait
                }
                Err(e) => {
                    failures += 1;
                    if failures.is_power_of_two() {
                        tracing::warn!(lease = %self.name, error = %e, failures, "cannot read or write the Lease");
                    }
                    self.config.retry_period
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = wake.notified() => {}
            }
        }
        watch.abort();
        self.release().await;
    }

    /// One look at the Lease, and a write if it is ours to take or renew. How long to wait
    /// before the next look.
    async fn attempt(&self) -> Result<Duration, kube::Error> {
        let began = Instant::now();
        let Some(mut lease) = within(self.timeout, self.api.get_opt(&self.name)).await? else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(self.name.clone()), ..ObjectMeta::default() },
                spec: Some(self.claim(None)),
            };
            return match within(self.timeout, self.api.create(&PostParams::default(), &lease)).await {
                Ok(made) => Ok(self.took(&made, began)),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(Duration::ZERO),
                Err(e) => Err(e),
            };
        };
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let duration = spec
            .lease_duration_seconds
            .filter(|s| *s > 0)
            .map_or(self.config.lease_duration, |s| Duration::from_secs(s as u64));
        let seen_at = {
            let mut s = self.standing.lock().expect("standing lock");
            s.saw(version);
            s.holder = holder.clone();
            s.transitions = spec.lease_transitions.unwrap_or(0).max(0) as u64;
            s.observed.as_ref().map_or(began, |(_, at)| *at)
        };
        let mine = holder.as_deref() == Some(&self.identity);
        let expires = seen_at + duration;
        if !mine && holder.is_some() && Instant::now() < expires {
            self.lost();
            // Look again at the expiry if it comes before the next retry.
            return Ok(expires.saturating_duration_since(Instant::now()).min(self.config.retry_period));
        }
        lease.spec = Some(self.claim(mine.then_some(&spec)));
        match within(self.timeout, self.api.replace(&self.name, &PostParams::default(), &lease)).await {
            Ok(written) => Ok(self.took(&written, began)),
            Err(kube::Error::Api(e)) if e.code == 409 => {
                // Another replica wrote it since this one read it.
                self.lost();
                Ok(self.config.retry_period)
            }
            Err(e) => Err(e),
        }
    }

    /// The spec that takes the Lease for this replica, or renews `held` (its own).
    fn claim(&self, held: Option<&LeaseSpec>) -> LeaseSpec {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let transitions = held.map_or_else(
            || self.standing.lock().expect("standing lock").transitions as i32 + 1,
            |h| h.lease_transitions.unwrap_or(0),
        );
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.config.lease_duration.as_secs().max(1) as i32),
            acquire_time: held.and_then(|h| h.acquire_time.clone()).or_else(|| Some(now.clone())),
            renew_time: Some(now),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    /// The write that began at `began` landed: this replica leads until the renew deadline.
    fn took(&self, lease: &Lease, began: Instant) -> Duration {
        let mut s = self.standing.lock().expect("standing lock");
        let was = s.acting_until.is_some_and(|until| Instant::now() < until);
        s.acting_until = Some(began + self.config.renew_deadline);
        s.observed = lease.metadata.resource_version.clone().map(|v| (v, Instant::now()));
        s.holder = Some(self.identity.clone());
        s.transitions = lease.spec.as_ref().and_then(|l| l.lease_transitions).unwrap_or(0).max(0) as u64;
        if !was {
            s.acquired += 1;
            tracing::info!(identity = %self.identity, lease = %self.name, "this replica leads now");
        }
        self.config.retry_period
    }

    /// Another replica holds the Lease: stop acting now.
    fn lost(&self) {
        let mut s = self.standing.lock().expect("standing lock");
        if s.acting_until.take().is_some_and(|until| Instant::now() < until) {
            tracing::warn!(identity = %self.identity, holder = ?s.holder, "this replica lost the lead");
        }
    }

    /// Give the Lease up, if this replica holds it: free, with a one-second duration, so a
    /// standby takes it at its next look.
    async fn release(&self) {
        self.standing.lock().expect("standing lock").acting_until = None;
        let Ok(Some(mut lease)) = within(self.timeout, self.api.get_opt(&self.name)).await else { return };
        let Some(spec) = lease.spec.as_mut() else { return };
        if spec.holder_identity.as_deref() != Some(&self.identity) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        match within(self.timeout, self.api.replace(&self.name, &PostParams::default(), &lease)).await {
            Ok(_) => tracing::info!(identity = %self.identity, lease = %self.name, "released the lead"),
            Err(e) => {
                tracing::warn!(lease = %self.name, error = %e, "cannot release the Lease; a standby takes it when it expires")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_core::backend::Settings;

    fn election(text: &str) -> Result<ElectionConfig, String> {
        let config: crate::KubernetesConfig =
            toml::from_str(&format!("[election]\n{text}")).map_err(|e: toml::de::Error| e.to_string())?;
        config.check()?;
        Ok(config.election.expect("an election table"))
    }

    #[test]
    fn the_defaults_are_kube_schedulers_and_times_that_could_make_two_leaders_are_refused() {
        let e = election("").unwrap();
        assert_eq!(e, ElectionConfig::default());
        assert_eq!(
            (e.lease_duration, e.renew_deadline, e.retry_period),
            (Duration::from_secs(15), Duration::from_secs(10), Duration::from_secs(2))
        );
        let custom = election("lease = \"sched\"\nlease-duration = \"30s\"\ncheckpoint-every = 5").unwrap();
        assert_eq!(
            (custom.lease.as_str(), custom.lease_duration, custom.checkpoint_every),
            ("sched", Duration::from_secs(30), 5)
        );
        let refused = |text: &str| election(text).unwrap_err();
        assert!(refused("renew-deadline = \"12s\"").contains("must not exceed lease-duration"));
        assert!(refused("retry-period = \"10s\"").contains("below renew-deadline"));
        assert!(refused("lease = \" \"").contains("a Lease's name"));
        assert!(refused("leader = \"me\"").contains("unknown field"));
    }

    #[test]
    fn an_identity_is_the_pods_name_and_a_suffix_unless_given() {
        let given = ElectionConfig { identity: Some("replica-a".into()), ..ElectionConfig::default() };
        assert_eq!(given.identity(), "replica-a");
        let (a, b) = (ElectionConfig::default().identity(), ElectionConfig::default().identity());
        assert_ne!(a, b, "a restarted replica is a new candidate");
        assert_eq!(a.rsplit_once('_').map(|(_, s)| s.len()), Some(8), "{a}");
    }
}
