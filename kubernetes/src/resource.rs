//! The `SchedulingPolicy` custom resource (`schedulingpolicies.wasmsched.io`): a policy
//! delivered the cluster's way. Its spec names the component (an OCI artifact pinned by digest,
//! or a ConfigMap key for a cluster without a registry), its role, limits and config; its
//! status says what every replica of the host made of it and what the leader serves.
//!
//! Every replica writes its own entry in `status.replicas` (server-side apply, a field manager
//! of its own, the list keyed by replica name, so replicas never overwrite one another); the
//! leader writes the rest (conditions, digest, version, the replicas ready, history) under one
//! manager that passes from leader to leader. This file is the resource and its requests; what
//! the host does with it is the host's (`host/src/resources.rs`).

mod watch;

pub use kube::ResourceExt;
pub use watch::Resources;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, CustomResource, CustomResourceExt, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group.
pub const GROUP: &str = "wasmsched.io";

/// The field manager the leader writes the status with.
pub const LEADER_MANAGER: &str = "wasmsched-leader";

/// The annotation that names who last changed the spec, where the cluster stamps it
/// (`examples/kubernetes/changed-by.yaml`).
pub const CHANGED_BY: &str = "wasmsched.io/changed-by";

/// The annotation `wasmsched rollback --resource` leaves: the generation whose spec it applied.
pub const ROLLED_BACK_TO: &str = "wasmsched.io/rolled-back-to-generation";

/// How many earlier versions the status remembers, newest first, for `wasmsched rollback`.
pub const HISTORY: usize = 5;

/// A policy component for the host to serve: where it comes from, its role, limits and config.
#[derive(CustomResource, KubeSchema, Clone, Debug, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "wasmsched.io",
    version = "v1alpha1",
    kind = "SchedulingPolicy",
    plural = "schedulingpolicies",
    shortname = "spol",
    category = "wasmsched",
    namespaced,
    status = "SchedulingPolicyStatus",
    doc = "A scheduling policy component that the wasmsched host serves (docs/kubernetes.md).",
    printcolumn = r#"{"name":"Role","type":"string","jsonPath":".spec.role"}"#,
    printcolumn = r#"{"name":"Digest","type":"string","jsonPath":".status.shortDigest"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.readyReplicas"}"#,
    printcolumn = r#"{"name":"Serving Since","type":"date","jsonPath":".status.servingSince"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingPolicySpec {
    /// Where the component comes from: exactly one of `oci` and `configMap`.
    pub source: Source,
    /// `active` (its decisions are applied; one policy at a time) or `shadow` (only compared).
    #[serde(default)]
    pub role: Role,
    /// What a tick does when the policy fails: `keep-limits` (default) or `fair-share`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Fallback>,
    /// The limits every call of the policy runs under; each has the host's default.
    #[serde(default, skip_serializing_if = "Limits::is_empty")]
    pub limits: Limits,
    /// The policy's own config, handed to it as JSON.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    #[schemars(schema_with = "free_object")]
    pub config: serde_json::Map<String, serde_json::Value>,
}

/// Where the component comes from.
#[derive(KubeSchema, Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.oci) != has(self.configMap)").message("give exactly one of oci and configMap"))]
pub struct Source {
    /// An OCI artifact pinned by digest: `REGISTRY/REPOSITORY[:TAG]@sha256:…` (`wasmsched push`
    /// prints it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    #[x_kube(validation = Rule::new("self.matches('@sha256:[0-9a-f]{64}$')").message("pin the artifact by digest: REGISTRY/REPOSITORY[:TAG]@sha256:… (wasmsched push prints it)"))]
    pub oci: Option<String>,
    /// A key of a ConfigMap in the resource's namespace, for a cluster without a registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapSource>,
}

/// A component in a ConfigMap's `binaryData`.
#[derive(JsonSchema, Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapSource {
    /// The ConfigMap.
    pub name: String,
    /// The key holding the component.
    pub key: String,
    /// The key holding its signature (`cosign sign-blob`'s base64 output), where the host
    /// requires one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_key: Option<String>,
    /// The component's sha256, pinned (`sha256:…`): other bytes under the key are refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// What a tick does when the policy fails.
#[derive(JsonSchema, Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Fallback {
    /// The limits in force stay as they are.
    KeepLimits,
    /// The host's fair share applies.
    FairShare,
}

impl Fallback {
    /// As the host's config spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Fallback::KeepLimits => "keep-limits",
            Fallback::FairShare => "fair-share",
        }
    }
}

/// The policy's role.
#[derive(JsonSchema, Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Its decisions are applied.
    #[default]
    Active,
    /// Its decisions are only compared with the active one's.
    Shadow,
}

/// The limits of a policy's calls, as `[policy.NAME]` spells them in the host's config.
#[derive(JsonSchema, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// Wall-clock deadline per call (`50ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// Budget for starting an instance (`1s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instantiate_deadline: Option<String>,
    /// Memory cap of an instance (`64MiB`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// Log lines a minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_lines: Option<i64>,
    /// Log bytes a minute (`8KiB`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_bytes: Option<String>,
    /// Failures in a row that quarantine a version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quarantine_after: Option<i64>,
}

impl Limits {
    fn is_empty(&self) -> bool {
        *self == Limits::default()
    }

    /// The limits as the host config's keys (`instantiate-deadline = "1s"`), the unset ones left out.
    pub fn as_config(&self) -> BTreeMap<&'static str, serde_json::Value> {
        let mut keys = BTreeMap::new();
        let mut text = |key, value: &Option<String>| {
            if let Some(v) = value {
                keys.insert(key, serde_json::Value::from(v.clone()));
            }
        };
        text("deadline", &self.deadline);
        text("instantiate-deadline", &self.instantiate_deadline);
        text("memory", &self.memory);
        text("log-bytes", &self.log_bytes);
        if let Some(n) = self.log_lines {
            keys.insert("log-lines", n.into());
        }
        if let Some(n) = self.quarantine_after {
            keys.insert("quarantine-after", n.into());
        }
        keys
    }
}

/// What the replicas made of the resource, and what the leader serves.
#[derive(JsonSchema, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingPolicyStatus {
    /// The generation of the spec these fields speak of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Fetched`, `Verified`, `Ready` (every replica holds it compiled and warm) and `Serving`
    /// (the leader serves it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub conditions: Vec<Condition>,
    /// The artifact serving: its manifest digest, or its sha256 for a ConfigMap's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The first 12 hex digits of `digest`, for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_digest: Option<String>,
    /// The component's sha256, as `wasmsched status` and `validate` print it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The leader's version number of the policy serving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// The generation serving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving_generation: Option<i64>,
    /// Since when it serves (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving_since: Option<String>,
    /// Replicas holding the version that serves, of all (`2/2`), as a Deployment's READY
    /// counts its pods whatever their revision; the `Ready` condition is about the spec's
    /// generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<String>,
    /// The last error, in words a person can act on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Who changed the spec last, as the cluster recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_by: Option<String>,
    /// The versions served before, newest first (at most [`HISTORY`]): `wasmsched rollback`
    /// applies the first one's spec again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub history: Vec<Served>,
    /// Each replica's own account, one entry a replica.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub replicas: Vec<ReplicaStatus>,
}

/// A condition, as Kubernetes objects report them.
#[derive(JsonSchema, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `Fetched`, `Verified`, `Ready` or `Serving`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// One CamelCase word.
    pub reason: String,
    /// What happened, in words.
    pub message: String,
    /// The generation it speaks of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When `status` last changed (RFC 3339).
    pub last_transition_time: String,
}

impl Condition {
    /// A condition of `type_`, `ok` or not, at `generation`, changed `now`.
    pub fn new(type_: &str, ok: bool, reason: &str, message: String, generation: i64, now: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: if ok { "True" } else { "False" }.into(),
            reason: reason.into(),
            message,
            observed_generation: Some(generation),
            last_transition_time: now.into(),
        }
    }
}

/// One replica's account of the resource.
#[derive(JsonSchema, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaStatus {
    /// The replica (its pod's name).
    pub name: String,
    /// The generation it speaks of.
    pub generation: i64,
    /// The component's sha256 it holds for that generation, if it got that far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Whether it holds that generation compiled and swapped in.
    pub ready: bool,
    /// The component's sha256 it serves (or, a standby, holds warm) now, whatever generation
    /// that came from: what `readyReplicas` counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holds: Option<String>,
    /// What happened, in words.
    pub message: String,
    /// When (RFC 3339).
    pub at: String,
}

/// A version served before.
#[derive(JsonSchema, Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Served {
    /// Its generation.
    pub generation: i64,
    /// Its artifact's digest.
    pub digest: String,
    /// Since when it served (RFC 3339).
    pub since: String,
    /// Its spec, whole: a rollback applies it again.
    pub spec: SchedulingPolicySpec,
}

fn free_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// The CustomResourceDefinition, as JSON (`wasmsched crd`; `examples/kubernetes/crd.yaml`).
pub fn definition() -> serde_json::Value {
    serde_json::to_value(SchedulingPolicy::crd()).expect("a CRD serializes")
}

/// Who last changed the resource's spec: the cluster's stamp ([`CHANGED_BY`]) where there is
/// one, and the field manager that wrote the spec last, with when.
pub fn changed_by(policy: &SchedulingPolicy) -> Option<String> {
    let stamped = policy.annotations().get(CHANGED_BY).cloned();
    let manager = last_spec_writer(policy.managed_fields());
    match (stamped, manager) {
        (Some(user), Some(m)) => Some(format!("{user} ({m})")),
        (Some(user), None) => Some(user),
        (None, Some(m)) => Some(m),
        (None, None) => None,
    }
}

/// `kubectl-client-side-apply at 2026-…`: the manager that wrote the resource itself (not its
/// status) last. A write that only removes fields owns none of the spec, so any field counts.
fn last_spec_writer(fields: &[ManagedFieldsEntry]) -> Option<String> {
    fields
        .iter()
        .filter(|f| f.subresource.as_deref().unwrap_or("").is_empty())
        .max_by_key(|f| f.time.as_ref().map(|t| t.0))
        .map(|f| {
            let who = f.manager.clone().unwrap_or_else(|| "an unnamed manager".into());
            match &f.time {
                Some(t) => format!("{who} at {}", t.0),
                None => who,
            }
        })
}

/// Write replica `name`'s entry of the status (server-side apply, a manager of its own).
pub async fn report_replica(api: &Api<SchedulingPolicy>, policy: &str, entry: &ReplicaStatus) -> kube::Result<()> {
    let body = serde_json::json!({
        "apiVersion": format!("{GROUP}/v1alpha1"),
        "kind": "SchedulingPolicy",
        "metadata": {"name": policy},
        "status": {"replicas": [entry]},
    });
    let manager = format!("wasmsched-replica-{}", entry.name);
    api.patch_status(policy, &PatchParams::apply(&manager).force(), &Patch::Apply(&body)).await?;
    Ok(())
}

/// Write the leader's part of the status (everything but `replicas`).
pub async fn publish(api: &Api<SchedulingPolicy>, policy: &str, status: &SchedulingPolicyStatus) -> kube::Result<()> {
    let mut status = serde_json::to_value(status).expect("a status serializes");
    if let Some(map) = status.as_object_mut() {
        map.remove("replicas");
    }
    let body = serde_json::json!({
        "apiVersion": format!("{GROUP}/v1alpha1"),
        "kind": "SchedulingPolicy",
        "metadata": {"name": policy},
        "status": status,
    });
    api.patch_status(policy, &PatchParams::apply(LEADER_MANAGER).force(), &Patch::Apply(&body)).await?;
    Ok(())
}

/// Remove the entries of `gone` replicas from the status, as read in `policy` (a replace
/// guarded by its `resourceVersion`: if an entry was written meanwhile, the apiserver refuses
/// it and nothing is lost; the leader tries again at its next look).
pub async fn forget_replicas(
    api: &Api<SchedulingPolicy>,
    policy: &SchedulingPolicy,
    gone: &[String],
) -> kube::Result<()> {
    let mut kept = policy.clone();
    if let Some(status) = kept.status.as_mut() {
        status.replicas.retain(|r| !gone.contains(&r.name));
    }
    kept.metadata.managed_fields = None;
    api.replace_status(&policy.name_any(), &PostParams::default(), &kept).await?;
    Ok(())
}

/// The namespace `wasmsched rollback --resource` looks in unless told: the install's.
pub const DEFAULT_NAMESPACE: &str = "wasmsched-system";

/// The resources' API in `namespace` of the cluster `kubeconfig` names (else `KUBECONFIG`,
/// `~/.kube/config`, or the pod's service account), for a command run by a person.
pub async fn api(
    kubeconfig: Option<&std::path::Path>,
    namespace: &str,
) -> Result<Api<SchedulingPolicy>, crate::KubernetesSetupError> {
    let (client, _) = client(kubeconfig).await?;
    Ok(Api::namespaced(client, namespace))
}

/// A client of the cluster `kubeconfig` names (else `KUBECONFIG`, `~/.kube/config`, or the
/// pod's service account), and its default namespace (the pod's, in the cluster).
async fn client(kubeconfig: Option<&std::path::Path>) -> Result<(kube::Client, String), crate::KubernetesSetupError> {
    let config = crate::load_config(kubeconfig).await?;
    let namespace = config.default_namespace.clone();
    let client = kube::Client::try_from(config).map_err(|e| crate::KubernetesSetupError::Client(e.to_string()))?;
    Ok((client, namespace))
}

/// Why a rollback of the resource did not happen.
#[derive(Debug, thiserror::Error)]
pub enum RollbackError {
    /// No such resource.
    #[error("no SchedulingPolicy {namespace}/{name}: `kubectl -n {namespace} get schedulingpolicies` lists them")]
    NotFound {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// Nothing served before.
    #[error(
        "SchedulingPolicy {0} has no earlier version in its status.history: nothing served before the version serving"
    )]
    NoHistory(String),
    /// The apiserver refused or did not answer.
    #[error(transparent)]
    Api(#[from] kube::Error),
}

/// What [`rollback`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct RolledBack {
    /// The generation whose spec was applied again.
    pub from_generation: i64,
    /// Its digest.
    pub digest: String,
    /// The resource's generation now.
    pub generation: i64,
}

/// Apply again the spec of the version served before the one serving (`status.history`'s
/// first entry whose spec differs): a new generation that every replica fetches and the leader
/// swaps in. The spec is replaced whole, guarded by the `resourceVersion` read, so a change
/// made meanwhile is not overwritten blindly.
pub async fn rollback(api: &Api<SchedulingPolicy>, namespace: &str, name: &str) -> Result<RolledBack, RollbackError> {
    let not_found = || RollbackError::NotFound { namespace: namespace.into(), name: name.into() };
    let mut policy = api.get_opt(name).await?.ok_or_else(not_found)?;
    let status = policy.status.clone().unwrap_or_default();
    let earlier =
        status.history.iter().find(|s| s.spec != policy.spec).ok_or_else(|| RollbackError::NoHistory(name.into()))?;
    policy.spec = earlier.spec.clone();
    policy.metadata.managed_fields = None;
    // Named in the managed fields as the writer, with when (what `changed_by` reads).
    let from = earlier.generation.to_string();
    policy.annotations_mut().insert(ROLLED_BACK_TO.into(), from);
    let params = PostParams { field_manager: Some("wasmsched-rollback".into()), ..PostParams::default() };
    let replaced = api.replace(name, &params, &policy).await?;
    Ok(RolledBack {
        from_generation: earlier.generation,
        digest: earlier.digest.clone(),
        generation: replaced.metadata.generation.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definition_has_the_columns_the_status_and_the_rules() {
        let crd = serde_json::to_string(&definition()).unwrap();
        for needed in [
            "schedulingpolicies.wasmsched.io",
            "\"Serving Since\"",
            ".status.readyReplicas",
            "has(self.oci) != has(self.configMap)",
            "@sha256:[0-9a-f]{64}$",
            "x-kubernetes-preserve-unknown-fields",
            "\"x-kubernetes-list-map-keys\":[\"name\"]",
            "\"status\":{}",
        ] {
            assert!(crd.contains(needed), "{needed} not in {crd}");
        }
    }

    #[test]
    fn a_spec_reads_as_kubectl_writes_it() {
        let spec: SchedulingPolicySpec = serde_json::from_value(serde_json::json!({
            "source": {"oci": "127.0.0.1:5000/p/flowcon@sha256:ab"},
            "role": "shadow",
            "limits": {"deadline": "80ms", "logLines": 10},
            "config": {"interval-s": 6},
        }))
        .unwrap();
        assert_eq!(spec.role, Role::Shadow);
        let limits = spec.limits.as_config();
        assert_eq!(limits["deadline"], "80ms");
        assert_eq!(limits["log-lines"], 10);
        assert_eq!(limits.len(), 2);
        assert_eq!(spec.config["interval-s"], 6);
    }

    #[test]
    fn the_last_writer_of_the_spec_is_named() {
        let entry = |manager: &str, time: &str, spec: bool, subresource: Option<&str>| ManagedFieldsEntry {
            manager: Some(manager.into()),
            time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(time.parse().unwrap())),
            fields_v1: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(if spec {
                serde_json::json!({"f:spec": {}})
            } else {
                serde_json::json!({"f:status": {}})
            })),
            subresource: subresource.map(String::from),
            ..ManagedFieldsEntry::default()
        };
        let fields = [
            entry("kubectl-client-side-apply", "2026-11-29T07:00:00Z", true, None),
            entry("wasmsched-leader", "2026-11-29T07:05:00Z", false, Some("status")),
            entry("wasmsched", "2026-11-29T07:03:00Z", true, None),
        ];
        assert_eq!(last_spec_writer(&fields).unwrap(), "wasmsched at 2026-11-29T07:03:00Z");
        assert_eq!(last_spec_writer(&fields[1..2]), None, "the status's writer never");
    }
}
