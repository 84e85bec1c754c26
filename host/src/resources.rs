//! Policies delivered as the cluster's `SchedulingPolicy` resources (`[resources]`), in place
//! of the policies folder.
//!
//! Every replica of the host runs this worker beside its loop. It watches the resources of
//! its namespace and takes each new generation through the same steps, off to the side of the
//! loop: the spec's settings; the component fetched (an OCI artifact pinned by digest, or a
//! ConfigMap's key); its signature verified against the host's `[trust]`; admission (the right
//! contract, `init`, a dry-run `decide`, as for a file). What passes goes to the loop as a
//! [`Change`] that it swaps in at a tick boundary with the old version's state: on the leader
//! it serves; on a standby it is held warm, so a failover changes no policy. What fails is
//! tried again every `retry`, and the version serving keeps serving.
//!
//! Each replica writes its own entry in the resource's status (what it holds, or what failed);
//! the leader writes the rest (`resources/status.rs`): conditions `Fetched`, `Verified`, `Ready` (every
//! replica holds the generation compiled and warm) and `Serving`, the digest, version and
//! history. A resource deleted unloads its policy. Applying an earlier spec is a rollback, for
//! every replica at once.

mod status;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use wasmsched_kubernetes::KubernetesConfig;
use wasmsched_kubernetes::resource::{
    self as res, ReplicaStatus, ResourceExt, Resources, SchedulingPolicy, SchedulingPolicySpec,
};
use wasmsched_oci::{self as oci, RegistryOptions};
use wasmsched_runtime::Runtime;
use wasmsched_runtime::admission;

use crate::config::{PolicyConfig, ResourcesConfig};
use crate::reload::{Candidate, Change, LatestWorld};
use crate::status::{ReloadOutcome, StatusBoard};

/// How often the worker looks again when nothing changed: a swap landing, the leader's status.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// How often the leader lists the replicas there are (their pods).
const REPLICAS_EVERY: Duration = Duration::from_secs(5);

/// The step a generation failed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The spec's settings do not parse.
    Settings,
    /// The component could not be fetched.
    Fetch,
    /// Its signature or digest did not check out.
    Verify,
    /// Admission refused it.
    Admit,
    /// The loop refused it at the swap.
    Swap,
}

/// What this replica made of one generation of a resource.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    /// The artifact's digest and where it came from, once fetched.
    pub fetched: Option<(String, String)>,
    /// Who signed it ("not required" without `[trust]`), once verified.
    pub verified: Option<String>,
    /// The component's sha256, once admitted.
    pub sha256: Option<String>,
    /// Where it failed, and why.
    pub failed: Option<(Step, String)>,
    /// Whether it is swapped in here.
    pub ready: bool,
    /// When it went to the loop (wall ms): the swap's outcome is the first after.
    sent_wall_ms: u64,
}

/// One resource as this replica follows it.
struct Tracked {
    generation: i64,
    spec: SchedulingPolicySpec,
    /// Who changed the spec to this generation.
    changed_by: Option<String>,
    origin: String,
    progress: Progress,
    noticed: Instant,
    retry_at: Option<Instant>,
    /// The entry last written to the status.
    reported: Option<ReplicaStatus>,
}

/// What serves, as this replica last saw it become ready: for the status and its history.
#[derive(Clone, Debug)]
pub struct ServingRecord {
    /// Its generation.
    pub generation: i64,
    /// Its artifact's digest.
    pub digest: String,
    /// Its component's sha256.
    pub sha256: String,
    /// Its spec.
    pub spec: SchedulingPolicySpec,
}

/// The worker; see the module docs.
pub struct Worker<'rt> {
    rt: &'rt Runtime,
    resources: Resources,
    latest: LatestWorld,
    board: Arc<StatusBoard>,
    registry: RegistryOptions,
    trust: Option<wasmsched_oci::trust::Trust>,
    replica: String,
    retry: Duration,
    tracked: BTreeMap<String, Tracked>,
    serving: BTreeMap<String, ServingRecord>,
    /// The replicas there are (their pods' names), and when they were listed; None outside a
    /// pod.
    replicas: Option<(Instant, Option<Vec<String>>)>,
}

/// The policy's settings and its config as JSON, from a resource's spec: the keys of a
/// `[policy.NAME]` table, checked the same way.
pub fn settings_of(spec: &SchedulingPolicySpec) -> Result<(PolicyConfig, String), String> {
    let mut table = serde_json::Map::new();
    let role = match spec.role {
        res::Role::Active => "active",
        res::Role::Shadow => "shadow",
    };
    table.insert("role".into(), role.into());
    if let Some(fallback) = &spec.fallback {
        table.insert("fallback".into(), fallback.as_str().into());
    }
    for (key, value) in spec.limits.as_config() {
        table.insert(key.into(), value);
    }
    table.insert("config".into(), serde_json::Value::Object(spec.config.clone()));
    let value = toml::Value::try_from(serde_json::Value::Object(table))
        .map_err(|e| format!("spec.config cannot be a policy's config ({e}): leave out nulls"))?;
    let settings: PolicyConfig = value
        .try_into()
        .map_err(|e: toml::de::Error| format!("spec.limits or spec.fallback: {}", e.message().trim_end()))?;
    let config_json = serde_json::to_string(&spec.config).expect("a JSON map serializes");
    Ok((settings, config_json))
}

impl<'rt> Worker<'rt> {
    /// A worker watching the resources `config` names on the cluster `kube` reaches; call it
    /// within the Tokio runtime the worker runs on.
    pub async fn start(
        rt: &'rt Runtime,
        config: &ResourcesConfig,
        kube: &KubernetesConfig,
        trust: Option<wasmsched_oci::trust::Trust>,
        latest: LatestWorld,
        board: Arc<StatusBoard>,
    ) -> Result<Worker<'rt>, wasmsched_kubernetes::KubernetesSetupError> {
        let resources = Resources::watch(kube, config.namespace.as_deref()).await?;
        tracing::info!(namespace = %resources.namespace(), "serving the SchedulingPolicy resources");
        Ok(Worker {
            rt,
            resources,
            latest,
            board,
            registry: RegistryOptions { insecure: false, auth: oci::Auth::DockerConfig },
            trust,
            replica: wasmsched_kubernetes::lease::pod_name(),
            retry: config.retry,
            tracked: BTreeMap::new(),
            serving: BTreeMap::new(),
            replicas: None,
        })
    }

    /// Follow the resources until `stop` is set; every change goes to `sink`.
    pub async fn run(mut self, stop: &AtomicBool, mut sink: impl FnMut(Change)) {
        while !stop.load(Ordering::Relaxed) {
            if let Some(policies) = self.resources.listed() {
                self.look(&policies, &mut sink).await;
            }
            self.resources.changed(LOOK_EVERY).await;
        }
    }

    /// One look at every resource.
    async fn look(&mut self, policies: &[Arc<SchedulingPolicy>], sink: &mut impl FnMut(Change)) {
        let now = Instant::now();
        for policy in policies {
            let name = policy.name_any();
            let generation = policy.metadata.generation.unwrap_or_default();
            let due = match self.tracked.get(&name) {
                None => true,
                Some(t) => t.generation != generation || t.retry_at.is_some_and(|at| at <= now),
            };
            if due {
                self.take(policy, sink).await;
            }
        }
        let gone: Vec<String> =
            self.tracked.keys().filter(|n| !policies.iter().any(|p| p.name_any() == **n)).cloned().collect();
        for name in gone {
            if let Some(t) = self.tracked.remove(&name) {
                self.serving.remove(&name);
                tracing::info!(policy = %name, "SchedulingPolicy deleted; unloading it");
                sink(Change::Deleted {
                    name,
                    noticed: Instant::now(),
                    origin: Some(format!("{} (deleted)", t.origin)),
                });
            }
        }
        // One look at the loop's status serves the swaps and the leader's part.
        let board = self.board.get();
        self.swaps_landed(&board);
        self.report_replica(policies, &board).await;
        if board.leadership.as_ref().is_none_or(|l| l.leading) {
            self.publish(policies, &board).await;
        }
    }

    /// Take generation `policy` through settings, fetch, verification and admission.
    async fn take(&mut self, policy: &SchedulingPolicy, sink: &mut impl FnMut(Change)) {
        let name = policy.name_any();
        let generation = policy.metadata.generation.unwrap_or_default();
        let changed_by = res::changed_by(policy);
        let origin = format!(
            "SchedulingPolicy {}/{name} generation {generation}{}",
            self.resources.namespace(),
            changed_by.as_deref().map(|c| format!(", changed by {c}")).unwrap_or_default()
        );
        let noticed = match self.tracked.get(&name) {
            Some(t) if t.generation == generation => t.noticed,
            _ => Instant::now(),
        };
        let mut progress = Progress::default();
        match self.prepare(&name, &policy.spec, &mut progress).await {
            Ok((settings, config_json, policy_loaded)) => {
                progress.sent_wall_ms = wasmsched_loop::record::wall_ms();
                tracing::info!(policy = %name, generation, sha256 = progress.sha256.as_deref().unwrap_or("-"), origin = %origin, "SchedulingPolicy admitted; swapping it in at the next tick boundary");
                sink(Change::Admitted(Box::new(Candidate {
                    name: name.clone(),
                    policy: policy_loaded,
                    config_json,
                    noticed,
                    settings: Some(settings),
                    origin: Some(origin.clone()),
                })));
            }
            Err((step, why)) => {
                // Said once a generation and reason; its retries say it again only at debug level.
                let again = self.tracked.get(&name).is_some_and(|t| {
                    t.generation == generation
                        && t.progress.failed.as_ref().is_some_and(|(s, w)| (*s, w) == (step, &why))
                });
                if again {
                    tracing::debug!(policy = %name, generation, step = ?step, reason = %why, "SchedulingPolicy still refused");
                } else {
                    tracing::warn!(policy = %name, generation, step = ?step, reason = %why, retry_s = self.retry.as_secs(), "SchedulingPolicy refused; the version serving keeps serving");
                }
                progress.failed = Some((step, why));
            }
        }
        let retry_at = progress.failed.is_some().then(|| Instant::now() + self.retry);
        let reported = self.tracked.remove(&name).and_then(|t| t.reported);
        self.tracked.insert(
            name,
            Tracked {
                generation,
                spec: policy.spec.clone(),
                changed_by,
                origin,
                progress,
                noticed,
                retry_at,
                reported,
            },
        );
    }

    /// The steps up to admission; what each found goes into `progress`.
    async fn prepare(
        &self,
        name: &str,
        spec: &SchedulingPolicySpec,
        progress: &mut Progress,
    ) -> Result<(PolicyConfig, String, wasmsched_runtime::LoadedPolicy), (Step, String)> {
        let (settings, config_json) = settings_of(spec).map_err(|e| (Step::Settings, e))?;
        let (bytes, digest, from, signature) = self.fetch(spec).await?;
        progress.fetched = Some((digest.clone(), from));
        progress.verified = Some(self.verify(spec, &bytes, &digest, signature.as_deref()).await?);
        let world = self.latest.for_dry_run();
        let admitted = admission::admit(self.rt, name, &bytes, &config_json, settings.limits(), &world)
            .map_err(|e| (Step::Admit, wasmsched_core::error_chain(&e)))?;
        progress.sha256 = Some(admitted.policy.digest().to_string());
        Ok((settings, config_json, admitted.policy))
    }

    /// The component's bytes, the artifact's digest, where it came from, and the signature
    /// beside it (a ConfigMap's).
    async fn fetch(
        &self,
        spec: &SchedulingPolicySpec,
    ) -> Result<(Vec<u8>, String, String, Option<String>), (Step, String)> {
        let fetch_failed = |e: String| (Step::Fetch, e);
        if let Some(reference) = &spec.source.oci {
            if !reference.contains("@sha256:") {
                return Err((
                    Step::Verify,
                    format!(
                        "{reference} is not pinned by digest: write REGISTRY/REPOSITORY[:TAG]@sha256:… (wasmsched push prints it)"
                    ),
                ));
            }
            let fetched = oci::fetch(reference, &self.registry).await.map_err(|e| match e {
                oci::OciError::DigestMismatch { .. } | oci::OciError::TagMoved { .. } => {
                    (Step::Verify, wasmsched_core::error_chain(&e))
                }
                e => fetch_failed(wasmsched_core::error_chain(&e)),
            })?;
            let from = format!("{reference} ({} bytes)", fetched.bytes.len());
            return Ok((fetched.bytes, fetched.digest, from, None));
        }
        let Some(map) = &spec.source.config_map else {
            return Err((Step::Settings, "spec.source names neither oci nor configMap: give one".into()));
        };
        let ns = self.resources.namespace();
        let missing = |key: &str, map_there: bool| {
            let what = if map_there { format!("has no key {key}") } else { "does not exist".into() };
            format!(
                "ConfigMap {ns}/{} {what}: create it (kubectl -n {ns} create configmap {} --from-file={key}=POLICY.wasm)",
                map.name, map.name
            )
        };
        let read = |key: String| async move {
            match self.resources.config_map_key(&map.name, &key).await {
                Ok(Some(Some(bytes))) => Ok(bytes),
                Ok(Some(None)) => Err(fetch_failed(missing(&key, true))),
                Ok(None) => Err(fetch_failed(missing(&key, false))),
                Err(e) => Err(fetch_failed(format!("cannot read ConfigMap {}: {e}", map.name))),
            }
        };
        let bytes = read(map.key.clone()).await?;
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
        if let Some(pinned) = &map.sha256
            && *pinned != digest
        {
            return Err((
                Step::Verify,
                format!("ConfigMap {} key {} holds {digest}, the spec pins {pinned}", map.name, map.key),
            ));
        }
        let signature = match &map.signature_key {
            Some(key) => Some(String::from_utf8_lossy(&read(key.clone()).await?).trim().to_string()),
            None => None,
        };
        let from = format!("ConfigMap {} key {} ({} bytes)", map.name, map.key, bytes.len());
        Ok((bytes, digest, from, signature))
    }

    /// Who signed the artifact, or why it may not run.
    async fn verify(
        &self,
        spec: &SchedulingPolicySpec,
        bytes: &[u8],
        digest: &str,
        signature: Option<&str>,
    ) -> Result<String, (Step, String)> {
        let Some(trust) = &self.trust else { return Ok("not required: the host has no [trust]".into()) };
        let refused = |e: wasmsched_oci::trust::TrustError| (Step::Verify, wasmsched_core::error_chain(&e));
        let verified = match (&spec.source.oci, signature) {
            (Some(reference), _) => wasmsched_oci::trust::verify_artifact(trust, reference, digest, &self.registry)
                .await
                .map_err(refused)?,
            (None, Some(signature)) => wasmsched_oci::trust::verify_blob(trust, bytes, signature).map_err(refused)?,
            (None, None) => {
                return Err((
                    Step::Verify,
                    "the host requires signed policies ([trust]) and this ConfigMap source names no signatureKey: sign \
                     the component (cosign sign-blob, or wasmsched sign --blob) and put the signature beside it"
                        .into(),
                ));
            }
        };
        Ok(format!("signed by {}", verified.signers.join(", ")))
    }

    /// Mark the generations the loop has swapped in (or refused) since they were sent.
    fn swaps_landed(&mut self, status: &crate::status::Status) {
        let retry = self.retry;
        for (name, t) in &mut self.tracked {
            let p = &mut t.progress;
            let (Some(sha), false, None) = (&p.sha256, p.ready, &p.failed) else { continue };
            let Some(shown) = status.policies.iter().find(|s| s.name == *name) else { continue };
            let Some(last) = shown.last_reload.as_ref().filter(|r| r.wall_ms >= p.sent_wall_ms) else { continue };
            if last.sha256.as_deref() != Some(sha.as_str()) {
                continue;
            }
            match last.outcome {
                ReloadOutcome::Swapped | ReloadOutcome::Restored => {
                    p.ready = true;
                    let (digest, _) = p.fetched.clone().unwrap_or_default();
                    let record =
                        ServingRecord { generation: t.generation, digest, sha256: sha.clone(), spec: t.spec.clone() };
                    self.serving.insert(name.clone(), record);
                }
                ReloadOutcome::Refused => {
                    // Tried again: what refused it (another active policy) may change.
                    p.failed = Some((Step::Swap, last.detail.clone()));
                    t.retry_at = Some(Instant::now() + retry);
                }
                _ => {}
            }
        }
    }

    /// Write this replica's entry where it changed.
    async fn report_replica(&mut self, policies: &[Arc<SchedulingPolicy>], board: &crate::status::Status) {
        for policy in policies {
            let name = policy.name_any();
            let Some(t) = self.tracked.get_mut(&name) else { continue };
            let holds = board.policy(&name).and_then(|p| p.sha256.clone());
            let entry = status::entry(&self.replica, t.generation, &t.progress, holds);
            let listed = policy.status.as_ref().and_then(|s| s.replicas.iter().find(|r| r.name == self.replica));
            let same = |r: &ReplicaStatus| status::same_entry(r, &entry);
            if t.reported.as_ref().is_some_and(same) && listed.is_some_and(same) {
                continue;
            }
            match res::report_replica(self.resources.api(), &name, &entry).await {
                Ok(()) => t.reported = Some(entry),
                Err(e) => {
                    tracing::warn!(policy = %name, error = %e, "cannot write this replica's entry in the SchedulingPolicy status; trying again")
                }
            }
        }
    }

    /// As the leader: write each resource's status where it changed, and forget the entries
    /// of replicas that are gone.
    async fn publish(&mut self, policies: &[Arc<SchedulingPolicy>], board: &crate::status::Status) {
        if self.replicas.as_ref().is_none_or(|(at, _)| at.elapsed() >= REPLICAS_EVERY) {
            match self.resources.replica_pods(&self.replica).await {
                Ok(pods) => self.replicas = Some((Instant::now(), pods)),
                Err(e) => tracing::debug!(error = %e, "cannot list the host's replicas; counting the entries"),
            }
        }
        let pods = self.replicas.as_ref().and_then(|(_, pods)| pods.as_deref());
        for policy in policies {
            let name = policy.name_any();
            let Some(t) = self.tracked.get(&name) else { continue };
            let shown = board.policies.iter().find(|p| p.name == name);
            let view = status::View {
                generation: t.generation,
                progress: &t.progress,
                serving: self.serving.get(&name),
                version: shown.map(|p| p.version),
                changed_by: t.changed_by.clone(),
                retry_s: self.retry.as_secs(),
                replicas: pods,
            };
            let old = policy.status.clone().unwrap_or_default();
            let new = status::compute(&view, &old, &status::now());
            if !status::same_leader_part(&new, &old)
                && let Err(e) = res::publish(self.resources.api(), &name, &new).await
            {
                tracing::warn!(policy = %name, error = %e, "cannot write the SchedulingPolicy status; trying again");
            }
            let Some(pods) = pods else { continue };
            let gone: Vec<String> =
                old.replicas.iter().filter(|r| !pods.contains(&r.name)).map(|r| r.name.clone()).collect();
            if !gone.is_empty() {
                match res::forget_replicas(self.resources.api(), policy, &gone).await {
                    Ok(()) => {
                        tracing::info!(policy = %name, replicas = ?gone, "forgot the entries of replicas that are gone")
                    }
                    Err(e) => tracing::debug!(error = %e, "entries of gone replicas not forgotten yet"),
                }
            }
        }
    }
}

/// Run the worker on a thread of its own until `stop` is set (the host's loop ended). A
/// worker that cannot start says why; the host goes on with no policy.
pub fn work(
    rt: &Runtime,
    config: &crate::config::HostConfig,
    latest: LatestWorld,
    board: Arc<StatusBoard>,
    stop: &AtomicBool,
    sink: impl FnMut(Change),
) {
    let (Some(resources), crate::backend::BackendConfig::Kubernetes(kube)) = (&config.resources, &config.backend)
    else {
        return;
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            return tracing::error!(error = %e, "cannot start the SchedulingPolicy worker's runtime; no policy serves");
        }
    };
    let trust = match config.trust.as_ref().map(|t| t.load(None)).transpose() {
        Ok(t) => t,
        Err(e) => {
            return tracing::error!(error = %wasmsched_core::error_chain(&e), "the [trust] config cannot be used; no SchedulingPolicy will run until it is fixed");
        }
    };
    runtime.block_on(async {
        match Worker::start(rt, resources, kube, trust, latest, board).await {
            Ok(worker) => worker.run(stop, sink).await,
            Err(e) => tracing::error!(error = %wasmsched_core::error_chain(&e), "cannot watch the SchedulingPolicy resources; no policy serves"),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(value: serde_json::Value) -> SchedulingPolicySpec {
        let mut whole = serde_json::json!({"source": {"oci": "r/p@sha256:ab"}});
        whole.as_object_mut().unwrap().extend(value.as_object().unwrap().clone());
        serde_json::from_value(whole).unwrap()
    }

    #[test]
    fn a_specs_settings_are_a_policy_tables_checked_the_same_way() {
        let (settings, config) = settings_of(&spec(serde_json::json!({
            "role": "shadow",
            "fallback": "fair-share",
            "limits": {"deadline": "80ms", "memory": "32MiB", "logLines": 5},
            "config": {"interval-s": 6, "tiers": [0.8, 0.9]},
        })))
        .unwrap();
        assert_eq!(settings.role, crate::config::Role::Shadow);
        assert_eq!(settings.deadline, Duration::from_millis(80));
        assert_eq!((settings.memory, settings.log_lines), (32 << 20, 5));
        assert_eq!(config, r#"{"interval-s":6,"tiers":[0.8,0.9]}"#);
        for (bad, needed) in [
            (serde_json::json!({"limits": {"deadline": "soon"}}), "spec.limits"),
            (serde_json::json!({"limits": {"logLines": -1}}), "spec.limits"),
            (serde_json::json!({"config": {"x": null}}), "leave out nulls"),
        ] {
            let err = settings_of(&spec(bad)).unwrap_err();
            assert!(err.contains(needed), "{needed:?} not in {err}");
        }
    }
}
