//! Policies delivered as `SchedulingPolicy` resources, on the real cluster, to the host's image
//! running as two replicas: pushed to a real registry and signed (cosign's format), applied,
//! fetched, verified and compiled by every replica, served by the leader; a new version swapped
//! in with the state; one signed by another key refused while the version before keeps
//! serving; the first version's spec applied again (the cluster's rollback); the leader killed,
//! and the next one serving the same digest with the state. `replicas.rs` runs the same
//! resources from ConfigMaps, with no registry.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use wasmsched::backend::kubernetes::resource::{self, Condition, SchedulingPolicy};
use wasmsched::oci::{self, RegistryOptions, trust};
use wasmsched::record::wall_ms;

use crate::cluster::{Cluster, cluster, poll, registry_or_skip, serial};
use crate::replicas::{Replicas, decisions, host_image, pid_of, queued_pod, signal, with_limits};
use crate::test_label;
use wasmsched_tests::live::{component, sha256, variant};

/// Install the CustomResourceDefinition (`examples/kubernetes/crd.yaml`) and wait until it is
/// served.
pub(crate) fn install_crd(c: &Cluster) {
    for doc in crate::manifests::manifest("crd.yaml") {
        crate::manifests::apply(c, &doc, false).unwrap_or_else(|e| panic!("crd.yaml: {e}"));
    }
    let api: Api<SchedulingPolicy> = Api::namespaced(c.client.clone(), "default");
    poll(Duration::from_secs(30), Duration::from_millis(200), || {
        c.rt.block_on(api.list(&Default::default())).ok().map(|_| ())
    })
    .expect("the SchedulingPolicy resource served within 30 s of its CRD");
}

/// One `SchedulingPolicy` the test applies and reads; deleted at the end, its ConfigMaps too.
pub(crate) struct PolicyResource {
    c: &'static Cluster,
    namespace: &'static str,
    name: String,
    maps: RefCell<Vec<String>>,
}

impl PolicyResource {
    pub(crate) fn new(c: &'static Cluster, namespace: &'static str, name: &str) -> PolicyResource {
        PolicyResource { c, namespace, name: name.into(), maps: RefCell::new(Vec::new()) }
    }

    fn api(&self) -> Api<SchedulingPolicy> {
        Api::namespaced(self.c.client.clone(), self.namespace)
    }

    /// Apply `spec` as the resource's whole spec (server-side apply, as `kubectl apply` does).
    pub(crate) fn apply(&self, spec: serde_json::Value) {
        let doc = json!({
            "apiVersion": "wasmsched.io/v1alpha1",
            "kind": "SchedulingPolicy",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": spec,
        });
        crate::manifests::apply(self.c, &doc, false).unwrap_or_else(|e| panic!("apply {}: {e}", self.name));
    }

    /// Put `bytes` (and `signature`) in ConfigMap `map` and point the resource at it.
    pub(crate) fn serve_config_map_signed(&self, map: &str, bytes: &[u8], signature: Option<&str>) {
        let mut binary = std::collections::BTreeMap::new();
        binary.insert("policy.wasm".to_string(), ByteString(bytes.to_vec()));
        let data = signature.map(|s| [("policy.wasm.sig".to_string(), s.to_string())].into_iter().collect());
        let object = ConfigMap {
            metadata: kube::api::ObjectMeta { name: Some(map.into()), ..Default::default() },
            binary_data: Some(binary),
            data,
            ..ConfigMap::default()
        };
        let maps: Api<ConfigMap> = Api::namespaced(self.c.client.clone(), self.namespace);
        let _ = self.c.rt.block_on(maps.delete(map, &DeleteParams::default()));
        self.c.rt.block_on(maps.create(&PostParams::default(), &object)).expect("create the policy's ConfigMap");
        self.maps.borrow_mut().push(map.into());
        let mut source = json!({"name": map, "key": "policy.wasm"});
        if signature.is_some() {
            source["signatureKey"] = json!("policy.wasm.sig");
        }
        self.apply(json!({"role": "active", "source": {"configMap": source}}));
    }

    pub(crate) fn serve_config_map(&self, map: &str, bytes: &[u8]) {
        self.serve_config_map_signed(map, bytes, None);
    }

    pub(crate) fn get(&self) -> SchedulingPolicy {
        self.c.rt.block_on(self.api().get(&self.name)).expect("the SchedulingPolicy")
    }

    fn condition(&self, p: &SchedulingPolicy, type_: &str) -> Option<Condition> {
        let generation = p.metadata.generation?;
        let status = p.status.as_ref()?;
        (status.observed_generation == Some(generation)).then_some(())?;
        status.conditions.iter().find(|c| c.type_ == type_).cloned()
    }

    /// Wait until the condition `type_` of the spec's generation has `status`; the resource then.
    pub(crate) fn wait_condition(&self, type_: &str, status: &str, limit: Duration) -> SchedulingPolicy {
        poll(limit, Duration::from_millis(100), || {
            let p = self.get();
            (self.condition(&p, type_)?.status == status).then_some(p)
        })
        .unwrap_or_else(|| panic!("{type_} never {status} within {limit:?}: {:#?}", self.get().status))
    }

    /// Wait until every replica holds the component `sha` of the spec's generation and the
    /// leader serves it.
    pub(crate) fn wait_ready(&self, r: &Replicas, sha: &str, limit: Duration) -> SchedulingPolicy {
        let p = r.wait(&format!("{} Ready and Serving sha256 {}", self.name, &sha[..12]), limit, || {
            let p = self.get();
            let ok = |t: &str| self.condition(&p, t).is_some_and(|c| c.status == "True");
            let status = p.status.as_ref()?;
            (ok("Ready") && ok("Serving") && status.sha256.as_deref() == Some(sha)).then_some(p)
        });
        let status = p.status.clone().unwrap();
        assert_eq!(status.ready_replicas.as_deref(), Some("2/2"), "{status:#?}");
        p
    }

    /// What `wasmsched rollback NAME --resource` does: the spec served before, applied again.
    pub(crate) fn roll_back(&self) {
        let rolled =
            self.c.rt.block_on(resource::rollback(&self.api(), self.namespace, &self.name)).expect("a rollback");
        eprintln!(
            "rolled back {} to generation {}'s spec: now generation {}",
            self.name, rolled.from_generation, rolled.generation
        );
    }
}

impl Drop for PolicyResource {
    fn drop(&mut self) {
        let _ = self.c.rt.block_on(self.api().delete(&self.name, &DeleteParams::default()));
        let maps: Api<ConfigMap> = Api::namespaced(self.c.client.clone(), self.namespace);
        for map in self.maps.borrow().iter() {
            let _ = self.c.rt.block_on(maps.delete(map, &DeleteParams::default()));
        }
    }
}

/// Push `bytes` to `reference` and sign it with `key`; the reference pinned by digest.
fn push_signed(reference: &str, bytes: &[u8], key: &trust::KeyPair) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("counter.wasm");
    std::fs::write(&file, bytes).unwrap();
    let options = RegistryOptions { insecure: false, auth: oci::Auth::Anonymous };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let pushed = rt.block_on(oci::push(&file, reference, &options)).unwrap();
    let pinned = format!("{}@{}", pushed.reference, pushed.digest);
    rt.block_on(trust::sign_artifact(&pinned, &pushed.digest, &key.private_pem, b"", &Default::default(), &options))
        .unwrap();
    pinned
}

fn seconds(from: u64) -> f64 {
    (wall_ms() - from) as f64 / 1e3
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn a_signed_policy_resource_is_served_by_every_replica_swapped_refused_rolled_back_and_survives_failover() {
    let Some(c) = cluster() else {
        eprintln!("SKIPPED {}: no Kubernetes cluster", module_path!());
        return;
    };
    let Some(registry) = registry_or_skip(module_path!()) else { return };
    let _serial = serial();
    let Some(image) = host_image() else { return };
    install_crd(c);
    // Who changes a policy, stamped by the apiserver (Kubernetes 1.36's MutatingAdmissionPolicy).
    for doc in crate::manifests::manifest("changed-by.yaml") {
        crate::manifests::apply(c, &doc, false).unwrap_or_else(|e| panic!("changed-by.yaml, {}: {e}", doc["kind"]));
    }
    let pid = std::process::id();
    let label = test_label("policies");
    let _sweep = c.sweep(&label);

    // Three versions in the registry: two signed with the release key, one with another.
    let (release, other) = (trust::generate_key_pair(b"").unwrap(), trust::generate_key_pair(b"").unwrap());
    let repository = format!("{}/wasmsched-tests/counter-{pid}-{}", registry.trim(), wall_ms());
    let (v1, v2, v3) = (component("counter"), variant("counter", 2), variant("counter", 3));
    let v1_ref = push_signed(&format!("{repository}:v1"), &v1, &release);
    let v2_ref = push_signed(&format!("{repository}:v2"), &v2, &release);
    let v3_ref = push_signed(&format!("{repository}:v3"), &v3, &other);

    let (lease, app) = (format!("policies-{pid}"), format!("wasmsched-policies-{pid}"));
    let r = Replicas::new(c, &lease, &app);
    let trust = format!(
        "[[trust.all-of]]\nkind = \"public-key\"\nname = \"release\"\nkey-pem = \"\"\"\n{}\"\"\"\n",
        release.public_pem.trim_end()
    );
    let leader = r.deploy(&image, &r.host_toml(&label, "3s", &trust));
    for i in 0..2 {
        queued_pod(c, &label, &format!("policies-{pid}-{i}"), with_limits());
    }

    // 1. Applied: every replica fetches, verifies and compiles it; the leader serves it.
    let policy = PolicyResource::new(c, r.namespace, "counter");
    let applied = wall_ms();
    policy.apply(json!({"role": "active", "source": {"oci": v1_ref}}));
    policy.wait_condition("Serving", "True", Duration::from_secs(120));
    let serving_s = seconds(applied);
    let p = policy.wait_ready(&r, &sha256(&v1), Duration::from_secs(120));
    let ready_s = seconds(applied);
    eprintln!("v1: kubectl apply → the leader serving {serving_s:.1} s; → every replica Ready {ready_s:.1} s");
    let status = p.status.unwrap();
    let verified = status.conditions.iter().find(|c| c.type_ == "Verified").unwrap();
    assert!(verified.message.contains("signed by release"), "{verified:?}");
    assert_eq!(status.digest.as_deref(), v1_ref.split_once('@').map(|(_, d)| d));
    // The kit's user, stamped by the apiserver, and the tool that wrote the spec.
    let by = status.changed_by.as_deref().unwrap_or_default();
    assert!(by.starts_with("admin (wasmsched-tests at "), "{status:?}");
    r.wait("decisions by the leader", Duration::from_secs(30), || {
        (decisions(&r.records(), &leader).len() >= 4).then_some(())
    });

    // 2. Version 2: swapped in on the leader with its state.
    let applied = wall_ms();
    policy.apply(json!({"role": "active", "source": {"oci": v2_ref}}));
    policy.wait_ready(&r, &sha256(&v2), Duration::from_secs(120));
    eprintln!("v2: kubectl apply → every replica Ready and the leader serving {:.1} s", seconds(applied));
    let detail = r.status(&leader).unwrap().policy("counter").unwrap().last_reload.clone().unwrap().detail;
    assert!(detail.contains("bytes of its state") && !detail.contains(" 0 bytes"), "the state carried over: {detail}");

    // 3. Version 3, signed by another key: refused on every replica within a retry; version 2
    //    keeps serving, and the status says why.
    let applied = wall_ms();
    policy.apply(json!({"role": "active", "source": {"oci": v3_ref}}));
    let p = policy.wait_condition("Verified", "False", Duration::from_secs(30));
    eprintln!("v3 (another key): kubectl apply → Verified False on the resource {:.1} s", seconds(applied));
    let status = p.status.unwrap();
    let verified = status.conditions.iter().find(|c| c.type_ == "Verified").unwrap();
    assert_eq!(verified.reason, "VerificationFailed");
    assert!(verified.message.contains("release") && verified.message.contains("keeps serving"), "{verified:?}");
    assert_eq!(status.sha256.as_deref(), Some(&sha256(&v2)[..]), "version 2 keeps serving: {status:#?}");
    std::thread::sleep(Duration::from_secs(4));
    for pod in r.ready_pods() {
        let serving = r.status(&pod).and_then(|s| s.policy("counter").and_then(|p| p.sha256.clone()));
        assert_eq!(serving.as_deref(), Some(&sha256(&v2)[..]), "{pod} still holds version 2");
    }

    // 4. Version 1's spec applied again: the whole cluster rolls back.
    let applied = wall_ms();
    policy.apply(json!({"role": "active", "source": {"oci": v1_ref}}));
    policy.wait_ready(&r, &sha256(&v1), Duration::from_secs(60));
    eprintln!("rollback (v1's spec applied): → every replica Ready and the leader serving {:.1} s", seconds(applied));
    // The audit log names the generation swapped in and who changed it (on the next tick's line).
    r.wait("the rollback in the leader's audit log", Duration::from_secs(10), || {
        let audit = std::fs::read_to_string(r.records().join(&leader).join("audit.jsonl")).unwrap_or_default();
        audit
            .lines()
            .any(|l| {
                l.contains("SchedulingPolicy wasmsched-system/counter generation 4, changed by admin (wasmsched-tests")
            })
            .then_some(())
    });

    // 5. The leader killed: the standby, which held version 1 warm, serves the same digest and
    //    goes on from the state kept.
    let last = decisions(&r.records(), &leader).last().copied().unwrap();
    let killed = Instant::now();
    signal(pid_of(&leader).expect("the leader's process"), "-KILL");
    let next = r.wait("another leader", Duration::from_secs(45), || r.leader().filter(|l| *l != leader));
    let first = r.wait("the new leader's first decision", Duration::from_secs(30), || {
        decisions(&r.records(), &next).first().copied()
    });
    eprintln!("failover: leader killed → first decision by the new leader {:.1} s", killed.elapsed().as_secs_f64());
    let serving = r.status(&next).unwrap().policy("counter").unwrap().clone();
    assert_eq!(serving.sha256.as_deref(), Some(&sha256(&v1)[..]), "the same digest after the failover");
    assert!(first.1 > 1 && first.1 + 3 >= last.1, "the state kept was restored: {first:?} after {last:?}");

    // 6. No registry: the component in a ConfigMap, its signature (cosign sign-blob's) beside
    //    it. Signed by the release key it serves everywhere; unsigned it is refused.
    let signature = trust::sign_blob(&v2, &release.private_pem, b"").unwrap();
    policy.serve_config_map_signed("counter-v2-signed", &v2, Some(&signature));
    policy.wait_ready(&r, &sha256(&v2), Duration::from_secs(120));
    policy.serve_config_map("counter-v3-unsigned", &v3);
    let p = policy.wait_condition("Verified", "False", Duration::from_secs(30));
    let status = p.status.unwrap();
    assert!(status.last_error.as_deref().is_some_and(|e| e.contains("signatureKey")), "{status:#?}");
    assert_eq!(status.sha256.as_deref(), Some(&sha256(&v2)[..]), "the signed version keeps serving");
}
