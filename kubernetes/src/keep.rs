//! The policies' states kept in the cluster for the replica that leads next: one ConfigMap a
//! policy beside the Lease (`<lease>-<policy>`), its labels naming the Lease, its data the
//! policy, the digest and version that saved it, the tick, who saved it and the state's own
//! sha256; the state itself in `binaryData`. A state over [`INLINE`] bytes (states may reach
//! 16 MiB, and a ConfigMap holds 1 MiB) goes in parts, ConfigMaps named by the state's digest,
//! written before the ConfigMap that points at them: a leader that dies in the middle leaves the
//! last whole checkpoint in force. A state equal to the last one kept is not written again.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use sha2::{Digest, Sha256};

use super::{Kubernetes, within};
use wasmsched_core::replicas::Checkpoint;

/// The most state bytes one ConfigMap carries.
const INLINE: usize = 768 << 10;

/// The label every checkpoint ConfigMap carries: the Lease it belongs to.
const LEASE_LABEL: &str = "wasmsched.lease";
/// The label of a state's part (`<checkpoint>.<digest>.<n>`): the first 12 hex digits of the
/// state's sha256.
const PART_OF: &str = "wasmsched.part-of";

impl Kubernetes {
    /// Keep `checkpoints` in the cluster, as the leader; a state already kept is skipped.
    pub(super) fn keep_checkpoints(&mut self, checkpoints: &[Checkpoint]) {
        let Some(election) = &self.election else { return };
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), election.namespace());
        let (lease, by) = (election.lease_name().to_string(), election.identity().to_string());
        for c in checkpoints {
            let digest = hex::encode(Sha256::digest(&c.state));
            if self.kept.get(&c.policy) == Some(&digest) {
                continue;
            }
            let name = object_name(&lease, &c.policy);
            let write = write(&api, &name, &lease, &by, c, &digest, self.config.timeout);
            match self.rt.block_on(write) {
                Ok(()) => {
                    tracing::debug!(policy = %c.policy, bytes = c.state.len(), configmap = %name, "policy state kept");
                    self.kept.insert(c.policy.clone(), digest);
                }
                Err(e) => self.logged.once(format!("keep:{}", c.policy), || {
                    format!("cannot keep {}'s state in ConfigMap {name}: {e}; the next leader may start it from an older one", c.policy)
                }),
            }
        }
    }

    /// The checkpoints kept for this Lease; one that cannot be read is skipped, saying why.
    pub(super) fn kept_checkpoints(&mut self) -> Vec<Checkpoint> {
        let Some(election) = &self.election else { return Vec::new() };
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), election.namespace());
        let lease = election.lease_name().to_string();
        // What this replica wrote when it led before is no guide: another leader wrote since.
        self.kept.clear();
        let list = ListParams::default().labels(&format!("{LEASE_LABEL}={lease},!{PART_OF}"));
        let maps = match self.rt.block_on(within(self.config.timeout, api.list(&list))) {
            Ok(maps) => maps.items,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the policies' kept states; the policies start as they are");
                return Vec::new();
            }
        };
        let mut found = Vec::new();
        for map in maps {
            let name = map.metadata.name.clone().unwrap_or_default();
            match self.rt.block_on(read(&api, &map, self.config.timeout)) {
                Ok((c, digest)) => {
                    self.kept.insert(c.policy.clone(), digest);
                    found.push(c);
                }
                Err(why) => {
                    tracing::warn!(configmap = %name, "a kept policy state is unusable ({why}); that policy starts as it is")
                }
            }
        }
        found
    }
}

/// The ConfigMap that keeps `policy`'s state: `<lease>-<policy>` where that is a valid name,
/// else the policy's name made one, with a digest of it so two names cannot meet.
fn object_name(lease: &str, policy: &str) -> String {
    let clean: String = policy
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' })
        .collect();
    let name = format!("{lease}-{clean}");
    if clean == policy && name.len() <= 200 {
        return name;
    }
    let digest = hex::encode(&Sha256::digest(policy.as_bytes())[..4]);
    format!("{}-{digest}", &name[..name.len().min(200)].trim_end_matches('-'))
}

async fn write(
    api: &Api<ConfigMap>,
    name: &str,
    lease: &str,
    by: &str,
    c: &Checkpoint,
    digest: &str,
    limit: std::time::Duration,
) -> Result<(), kube::Error> {
    let apply = PatchParams::apply("wasmsched").force();
    let labels = |extra: Option<(&str, &str)>| {
        let mut l = BTreeMap::from([(LEASE_LABEL.to_string(), lease.to_string())]);
        if let Some((k, v)) = extra {
            l.insert(k.into(), v.into());
        }
        Some(l)
    };
    let chunks: Vec<&[u8]> = if c.state.len() > INLINE { c.state.chunks(INLINE).collect() } else { Vec::new() };
    let part_of = format!("{name}.{}", &digest[..12]);
    for (i, chunk) in chunks.iter().enumerate() {
        let part = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("{part_of}.{i}")),
                labels: labels(Some((PART_OF, &digest[..12]))),
                ..ObjectMeta::default()
            },
            binary_data: Some(BTreeMap::from([("part".to_string(), ByteString(chunk.to_vec()))])),
            ..ConfigMap::default()
        };
        within(limit, api.patch(&format!("{part_of}.{i}"), &apply, &Patch::Apply(&part))).await?;
    }
    let data = BTreeMap::from([
        ("policy".to_string(), c.policy.clone()),
        ("sha256".to_string(), c.sha256.clone()),
        ("version".to_string(), c.version.to_string()),
        ("tick".to_string(), c.tick.to_string()),
        ("saved-by".to_string(), by.to_string()),
        ("saved-unix-ms".to_string(), c.saved_unix_ms.to_string()),
        ("state-bytes".to_string(), c.state.len().to_string()),
        ("state-sha256".to_string(), digest.to_string()),
        ("parts".to_string(), chunks.len().to_string()),
        ("left".to_string(), c.left.join(",")),
    ]);
    let binary = chunks.is_empty().then(|| BTreeMap::from([("state".to_string(), ByteString(c.state.clone()))]));
    let map = ConfigMap {
        metadata: ObjectMeta { name: Some(name.into()), labels: labels(None), ..ObjectMeta::default() },
        data: Some(data),
        // An empty map, not none: a state kept inline before must not outlive a state in parts.
        binary_data: Some(binary.unwrap_or_default()),
        ..ConfigMap::default()
    };
    within(limit, api.patch(name, &apply, &Patch::Apply(&map))).await?;
    // The parts of older states of this policy.
    let stale = ListParams::default().labels(&format!("{LEASE_LABEL}={lease},{PART_OF}"));
    for old in within(limit, api.list(&stale)).await?.items {
        let old_name = old.metadata.name.unwrap_or_default();
        let (policy_of, digest_of) =
            old_name.rsplit_once('.').and_then(|(p, _)| p.rsplit_once('.')).unwrap_or_default();
        if policy_of == name && (chunks.is_empty() || digest_of != &digest[..12]) {
            let _ = within(limit, api.delete(&old_name, &DeleteParams::default())).await;
        }
    }
    Ok(())
}

/// A checkpoint and its state's digest, from its ConfigMap (and its parts).
async fn read(
    api: &Api<ConfigMap>,
    map: &ConfigMap,
    limit: std::time::Duration,
) -> Result<(Checkpoint, String), String> {
    let empty = BTreeMap::new();
    let data = map.data.as_ref().unwrap_or(&empty);
    let field = |key: &str| data.get(key).cloned().ok_or_else(|| format!("no {key}"));
    let number = |key: &str| field(key)?.parse::<u64>().map_err(|_| format!("{key} is not a number"));
    let (parts, digest) = (number("parts")?, field("state-sha256")?);
    let state = if parts == 0 {
        map.binary_data.as_ref().and_then(|b| b.get("state")).map(|b| b.0.clone()).unwrap_or_default()
    } else {
        let name = map.metadata.name.clone().unwrap_or_default();
        let mut state = Vec::new();
        for i in 0..parts.min(64) {
            let part_name = format!("{name}.{}.{i}", digest.get(..12).unwrap_or_default());
            let part = within(limit, api.get(&part_name)).await.map_err(|e| format!("part {part_name}: {e}"))?;
            let bytes =
                part.binary_data.and_then(|mut b| b.remove("part")).ok_or(format!("part {part_name} is empty"))?;
            state.extend_from_slice(&bytes.0);
        }
        state
    };
    if hex::encode(Sha256::digest(&state)) != digest {
        return Err("its state does not match its sha256".into());
    }
    let checkpoint = Checkpoint {
        policy: field("policy")?,
        sha256: field("sha256")?,
        version: number("version")? as u32,
        tick: number("tick")?,
        saved_unix_ms: number("saved-unix-ms")?,
        state,
        // Absent from what a host before it wrote: a line with nothing left behind.
        left: data
            .get("left")
            .map(|l| l.split(',').filter(|d| !d.is_empty()).map(str::to_string).collect())
            .unwrap_or_default(),
    };
    Ok((checkpoint, digest))
}

/// The digests of the states kept, by policy: what the leader need not write again.
pub(super) type Kept = HashMap<String, String>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_name_becomes_a_configmap_name_that_no_other_name_shares() {
        assert_eq!(object_name("wasmsched", "fair-share"), "wasmsched-fair-share");
        let a = object_name("wasmsched", "Fair_Share");
        let b = object_name("wasmsched", "fair_share");
        assert!(a.starts_with("wasmsched-fair-share-") && b.starts_with("wasmsched-fair-share-"));
        assert_ne!(a, b);
        assert!(object_name("w", &"x".repeat(400)).len() <= 253);
    }
}
