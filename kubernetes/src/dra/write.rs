//! The writes DRA needs before a bind and after a pod is gone: a claim's finalizer, its
//! allocation and its reservation, each conditional on the version read; a claim released; and
//! a re-created pod's claims allocated before its copy is bound.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::{COPY_CLAIMS_WAIT, Dra, PROTECTION, Released, Target, Write};
use crate::gate::{Failure, Gate};
use crate::within;

/// Where a re-created pod goes: its name, and the node (name, labels) and GPUs it is bound to.
pub struct CopyTarget {
    pub name: String,
    pub node: String,
    pub labels: Arc<BTreeMap<String, String>>,
    pub prefer: Vec<u32>,
    /// Its GPU share, after a `set-gpu-share`.
    pub share: Option<u8>,
}

impl Dra {
    /// Allocate the claims of the copy `to` on its node before it is bound (a migration or a
    /// resize): [`Dra::allocate_copies`] of one.
    pub async fn allocate_copy(
        &self,
        pods: &Api<Pod>,
        claims: Api<ResourceClaim>,
        gate: &Gate,
        limit: Duration,
        to: &CopyTarget,
    ) -> Result<(), Failure> {
        self.allocate_copies(pods, claims, gate, limit, std::slice::from_ref(to)).await
    }

    /// Allocate the claims of the copies `to` on their nodes before they are bound (a pod's or
    /// a group's migration or resize): once they exist (a template's is made by the controller
    /// manager, seconds after the copy), planned together against the devices in use now, and
    /// written; all or nothing. Why not, when they cannot be had there or are not made within
    /// [`COPY_CLAIMS_WAIT`].
    pub async fn allocate_copies(
        &self,
        pods: &Api<Pod>,
        claims: Api<ResourceClaim>,
        gate: &Gate,
        limit: Duration,
        to: &[CopyTarget],
    ) -> Result<(), Failure> {
        let started = Instant::now();
        loop {
            let mut read = Vec::with_capacity(to.len());
            for t in to {
                read.push(gate.pass(|| within(limit, pods.get(&t.name))).await?);
            }
            let targets: Vec<Target> = read
                .iter()
                .zip(to)
                .map(|(p, t)| Target { pod: p, node: &t.node, labels: &t.labels, prefer: &t.prefer, share: t.share })
                .collect();
            let planned = self.plan_in(&targets, &mut self.read_round());
            match planned {
                Ok(writes) => {
                    let pods = read.iter().map(|p| (p.name_any(), p.uid().unwrap_or_default())).collect();
                    return Claims { api: claims, writes, pods }.write(gate, limit).await;
                }
                Err(why)
                    if started.elapsed() < COPY_CLAIMS_WAIT
                        && (why.contains("not made yet") || why.contains("does not exist yet")) =>
                {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(why) => {
                    let whose = if to.len() == 1 { "its copy's claims" } else { "its copies' claims" };
                    return Err(Failure::Refused(format!("{whose}: {why}")));
                }
            }
        }
    }
}

/// The claim writes a placement makes before its binds, for its pods (name, uid).
pub struct Claims {
    pub api: Api<ResourceClaim>,
    pub writes: Vec<(usize, Write)>,
    pub pods: Vec<(String, String)>,
}

impl Claims {
    /// Write every claim, one after another; on a failure, the ones written are released and
    /// the failure said.
    pub async fn write(&self, gate: &Gate, limit: Duration) -> Result<(), Failure> {
        for (n, (i, w)) in self.writes.iter().enumerate() {
            let (name, uid) = &self.pods[*i];
            if let Err(e) = write(&self.api, gate, limit, w, (name, uid)).await {
                self.release(gate, limit, n).await;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Release the first `written` claims (their pods were not bound).
    pub async fn release(&self, gate: &Gate, limit: Duration, written: usize) {
        for (i, w) in self.writes.iter().take(written) {
            let claim = [(w.claim.name_any(), w.claim.uid().unwrap_or_default())];
            release(&self.api, gate, limit, &claim, &self.pods[*i].1, None).await;
        }
    }

    /// How many claims it writes.
    pub fn len(&self) -> usize {
        self.writes.len()
    }
}

/// Write `w` for pod `pod` (name, uid): the finalizer, then the allocation and the
/// reservation, each conditional on the version read (a claim changed meanwhile is refused,
/// and the next tick plans again).
pub async fn write(
    api: &Api<ResourceClaim>,
    gate: &Gate,
    limit: Duration,
    w: &Write,
    pod: (&str, &str),
) -> Result<(), Failure> {
    let name = w.claim.name_any();
    let mut version = w.claim.resource_version();
    let params = PatchParams::default();
    let mut reserved: Vec<serde_json::Value> =
        w.claim.status.iter().flat_map(|s| s.reserved_for.iter().flatten()).map(|r| json!(r)).collect();
    if reserved.iter().any(|r| r["uid"] == pod.1) {
        return Ok(());
    }
    reserved.push(json!({"resource": "pods", "name": pod.0, "uid": pod.1}));
    let mut status = json!({"reservedFor": reserved});
    if let Some(allocation) = &w.allocation {
        let mut finalizers = w.claim.finalizers().to_vec();
        if !finalizers.iter().any(|f| f == PROTECTION) {
            finalizers.push(PROTECTION.to_string());
            let patch = Patch::Merge(json!({"metadata": {"resourceVersion": version, "finalizers": finalizers}}));
            let made = gate.pass(|| within(limit, api.patch(&name, &params, &patch))).await.map_err(refused)?;
            version = made.resource_version();
        }
        status["allocation"] = allocation.clone();
    }
    let patch = Patch::Merge(json!({"metadata": {"resourceVersion": version}, "status": status}));
    gate.pass(|| within(limit, api.patch_status(&name, &params, &patch))).await.map_err(refused)?;
    Ok(())
}

/// A claim write's failure: a conflict (someone changed the claim) is a refusal to retry.
fn refused(e: kube::Error) -> Failure {
    match e {
        kube::Error::Api(s) if s.code == 409 => {
            Failure::Refused(format!("its claim changed meanwhile ({})", s.message))
        }
        other => Failure::from(other),
    }
}

/// Take pod `uid`, gone, out of the `reservedFor` of claims `claims` (name, uid), and
/// deallocate a claim no pod holds any more (its finalizer off), as the controller manager
/// would; each claim free now (deallocated, found free or gone) is said in `released`, so the
/// next placement may take its devices before the watch shows it. A claim changed meanwhile is
/// left to the controller manager.
pub async fn release(
    api: &Api<ResourceClaim>,
    gate: &Gate,
    limit: Duration,
    claims: &[(String, String)],
    uid: &str,
    released: Option<&Released>,
) {
    let params = PatchParams::default();
    let free = |claim: &str| {
        if let Some(released) = released {
            released.lock().expect("dra released").insert(claim.to_string(), Instant::now());
        }
    };
    for (name, claim_uid) in claims {
        let claim = match gate.pass(|| within(limit, api.get_opt(name))).await {
            Ok(Some(c)) if c.uid().as_deref() == Some(claim_uid.as_str()) => c,
            Ok(_) => {
                free(claim_uid);
                continue;
            }
            Err(_) => continue,
        };
        let held: Vec<_> = claim.status.iter().flat_map(|s| s.reserved_for.iter().flatten()).collect();
        let allocated = claim.status.as_ref().is_some_and(|s| s.allocation.is_some());
        let left: Vec<_> = held.iter().filter(|r| r.uid != uid).collect();
        if !left.is_empty() || !allocated {
            // Held by others; or free already (the controller manager was first).
            if !allocated {
                free(claim_uid);
            }
            if left.len() == held.len() {
                continue;
            }
        }
        let mut status = json!({"reservedFor": if left.is_empty() { serde_json::Value::Null } else { json!(left) }});
        if left.is_empty() {
            status["allocation"] = serde_json::Value::Null;
        }
        let patch = Patch::Merge(json!({"metadata": {"resourceVersion": claim.resource_version()}, "status": status}));
        let Ok(claim) = gate.pass(|| within(limit, api.patch_status(name, &params, &patch))).await else { continue };
        if !left.is_empty() {
            continue;
        }
        free(claim_uid);
        if claim.finalizers().iter().any(|f| f == PROTECTION) {
            let finalizers: Vec<&String> = claim.finalizers().iter().filter(|f| *f != PROTECTION).collect();
            let patch = Patch::Merge(
                json!({"metadata": {"resourceVersion": claim.resource_version(), "finalizers": finalizers}}),
            );
            let _ = gate.pass(|| within(limit, api.patch(name, &params, &patch))).await;
        }
    }
}
