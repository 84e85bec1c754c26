//! Replicas of the host on the real cluster: the Lease elector and the kept states between two
//! backends in this process, then the image as a Deployment of two, with its leader crashed,
//! frozen and deleted in turn.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use wasmsched::backend::kubernetes::lease::ElectionConfig;
use wasmsched::backend::kubernetes::{Kubernetes, KubernetesConfig};
use wasmsched::backend::{Checkpoint, Replicas as _};
use wasmsched::record::wall_ms;
use wasmsched::world::World;

use crate::cluster::{Cluster, cluster, poll, serial};
use crate::policies::{PolicyResource, install_crd};
use crate::{step, test_label};
use wasmsched_tests::live::{component, sha256, variant};

/// A backend on the test cluster that campaigns for `lease` with short times.
fn candidate(c: &Cluster, label: &str, lease: &str, identity: &str) -> Kubernetes {
    Kubernetes::new(KubernetesConfig {
        kubeconfig: Some(c.kubeconfig.clone()),
        selector: format!("wasmsched.test={label}"),
        timeout: Duration::from_secs(1),
        election: Some(ElectionConfig {
            lease: lease.into(),
            namespace: Some("default".into()),
            identity: Some(identity.into()),
            lease_duration: Duration::from_secs(4),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(500),
            checkpoint_every: 1,
        }),
        ..KubernetesConfig::default()
    })
    .unwrap()
}

fn checkpoint(policy: &str, state: Vec<u8>) -> Checkpoint {
    Checkpoint {
        policy: policy.into(),
        sha256: "ab".repeat(32),
        version: 3,
        tick: 7,
        saved_unix_ms: 1,
        state,
        left: Vec::new(),
    }
}

/// The kept states, by policy.
fn by_policy(kept: Vec<Checkpoint>) -> BTreeMap<String, Checkpoint> {
    kept.into_iter().map(|c| (c.policy.clone(), c)).collect()
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn one_of_two_candidates_leads_the_other_takes_over_and_finds_the_states_kept() {
    let Some(c) = cluster() else {
        eprintln!("SKIPPED {}: no Kubernetes cluster", module_path!());
        return;
    };
    let _serial = serial();
    let label = test_label("elect");
    let lease = format!("elect-{}", std::process::id());
    let leases: Api<Lease> = Api::namespaced(c.client.clone(), "default");
    let maps: Api<ConfigMap> = Api::namespaced(c.client.clone(), "default");
    let clean = || {
        let _ = c.rt.block_on(leases.delete(&lease, &DeleteParams::default()));
        let params = ListParams::default().labels(&format!("wasmsched.lease={lease}"));
        let _ = c.rt.block_on(maps.delete_collection(&DeleteParams::default(), &params));
    };
    clean();
    let leads = |k: &Kubernetes| k.leads().then_some(());
    // A candidate campaigns from its first warm observation.
    let warm = |k: &mut Kubernetes| {
        let mut world = World::new();
        step(k, &mut world, 100);
        world
    };

    let mut a = candidate(c, &label, &lease, "a");
    assert!(!a.leads() && a.leadership().identity == "a", "a cold candidate does not lead");
    warm(&mut a);
    poll(Duration::from_secs(10), Duration::from_millis(50), || leads(&a)).expect("the only candidate leads");
    let mut b = candidate(c, &label, &lease, "b");
    let mut world = warm(&mut b);
    // Over three lease durations, b never leads while a renews.
    let held = poll(Duration::from_secs(12), Duration::from_millis(100), || b.leads().then_some(()));
    assert!(held.is_none(), "b took the lead from a leader that renews");
    assert!(a.leads());
    let lead = b.leadership();
    assert_eq!((lead.holder.as_deref(), lead.leading, lead.identity.as_str()), (Some("a"), false, "b"));

    // A standby observes and changes nothing: a queued pod of ours stays unbound.
    let _sweep = c.sweep(&label);
    let requests = json!({"requests": {"cpu": "100m", "memory": "32Mi"}});
    let queued = queued_pod(c, &label, &format!("elect-{}", std::process::id()), requests);
    poll(Duration::from_secs(10), Duration::ZERO, || {
        step(&mut b, &mut world, 200);
        (world.queue_len() == 1).then_some(())
    })
    .expect("the standby sees the queued pod");
    for _ in 0..4 {
        step(&mut b, &mut world, 200);
    }
    assert_eq!(node_of(c, &queued), None, "a standby binds nothing");

    // The leader keeps states, one over a ConfigMap's size; the standby reads them whole.
    let big: Vec<u8> = (0..(2u32 << 20)).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    a.keep(&[checkpoint("small", b"seven calls".to_vec()), checkpoint("big", big.clone())]);
    let kept = by_policy(b.kept());
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert_eq!(kept["small"], checkpoint("small", b"seven calls".to_vec()));
    assert!(kept["big"].state == big, "2 MiB kept in parts come back whole");
    // A standby keeps nothing: only the leader writes.
    b.keep(&[checkpoint("small", b"from the standby".to_vec())]);
    assert_eq!(by_policy(a.kept())["small"].state, b"seven calls");
    // A smaller state replaces the big one; its parts go.
    a.keep(&[checkpoint("big", b"small now".to_vec())]);
    assert_eq!(by_policy(b.kept())["big"].state, b"small now");
    let parts =
        c.rt.block_on(maps.list(&ListParams::default().labels(&format!("wasmsched.lease={lease},wasmsched.part-of"))));
    assert_eq!(parts.unwrap().items.len(), 0, "no part of an older state is left");

    // A clean stop hands the lead on within a retry period, not a lease duration.
    let stepped = Instant::now();
    a.step_down();
    assert!(!a.leads(), "a replica stepping down stops acting at once");
    poll(Duration::from_secs(4), Duration::from_millis(20), || leads(&b)).expect("b takes the released lead");
    let handover = stepped.elapsed();
    eprintln!("handover after a clean stop: {handover:.2?} (retry period 0.5 s)");
    assert!(handover < Duration::from_millis(1500), "{handover:?}");
    // The new leader's default placement binds the pod the standby left alone.
    poll(Duration::from_secs(10), Duration::from_millis(100), || {
        step(&mut b, &mut world, 500);
        node_of(c, &queued)
    })
    .expect("the new leader binds the queued pod");

    // A crash (the campaign ends without a release): a new candidate waits a lease duration
    // from when it first saw the Lease, then takes it.
    drop(b);
    let started = Instant::now();
    let mut d = candidate(c, &label, &lease, "d");
    warm(&mut d);
    poll(Duration::from_secs(10), Duration::from_millis(20), || leads(&d)).expect("d takes the expired lead");
    let waited = started.elapsed();
    eprintln!("takeover after a crash: {waited:.2?} (lease duration 4 s)");
    assert!(waited >= Duration::from_secs(4), "d must not take a lease it has not seen expire: {waited:?}");
    let transitions = c.rt.block_on(leases.get(&lease)).unwrap().spec.unwrap().lease_transitions;
    assert_eq!(transitions, Some(3), "a, b, d");
    drop(d);
    drop(a);
    clean();
}

/// A busybox pod `name` of the test's `label`, queued for our scheduler, with `resources`.
pub(crate) fn queued_pod(c: &Cluster, label: &str, name: &str, resources: serde_json::Value) -> String {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"wasmsched.test": label}},
        "spec": {
            "schedulerName": "wasmsched",
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "main", "image": "local/busybox:1", "imagePullPolicy": "Never",
                "command": ["sleep", "3600"],
                "resources": resources,
            }],
        },
    }))
    .unwrap();
    c.rt.block_on(c.pods().create(&PostParams::default(), &pod)).expect("create a queued pod");
    name.to_string()
}

/// The resources of a pod whose CPU limit a resize may move.
pub(crate) fn with_limits() -> serde_json::Value {
    json!({"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"cpu": "2", "memory": "64Mi"}})
}

/// The node pod `name` is bound to.
pub(crate) fn node_of(c: &Cluster, name: &str) -> Option<String> {
    c.pod(name)?.spec?.node_name
}

/// The host's image for the Deployment test: the tests' `wasmsched-host` binary (a debug
/// build, dynamically linked), or the binary `WASMSCHED_HOST_BINARY` names (a release
/// `wasmsched`, to measure it), packed by `cli/image.sh` and imported into the nodes.
pub(crate) fn host_image() -> Option<String> {
    let binary = std::env::var("WASMSCHED_HOST_BINARY").unwrap_or_else(|_| env!("CARGO_BIN_EXE_wasmsched-host").into());
    let tag = format!("local/wasmsched-host:{}", &sha256(&std::fs::read(&binary).ok()?)[..12]);
    host_image_as(&binary, &tag)
}

/// The host's image from `binary`, imported into the kit's nodes as `tag`; None (having said
/// so) when it cannot be imported.
pub(crate) fn host_image_as(binary: &str, tag: &str) -> Option<String> {
    let tag = tag.to_string();
    let dir = tempfile::tempdir().ok()?;
    let tar = dir.path().join("host.tar");
    let pack = concat!(env!("CARGO_MANIFEST_DIR"), "/../cli/image.sh");
    let packed = std::process::Command::new(pack).arg(&tar).args(["--binary", binary, "--tag", &tag]).output().ok()?;
    assert!(packed.status.success(), "cli/image.sh: {}", String::from_utf8_lossy(&packed.stderr));
    eprintln!("{}", String::from_utf8_lossy(&packed.stdout).trim());
    let imported = std::process::Command::new(crate::cluster::script()).arg("import").arg(&tar).output().ok()?;
    if !imported.status.success() {
        eprintln!("SKIPPED: the host's image could not be imported ({})", String::from_utf8_lossy(&imported.stderr));
        return None;
    }
    Some(tag)
}

/// The audit lines a replica wrote: (wall ms, the counter's call number) per decision.
pub(crate) fn decisions(records: &Path, pod: &str) -> Vec<(u64, u64)> {
    let text = std::fs::read_to_string(records.join(pod).join("audit.jsonl")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|l| {
            let reason = l["active"]["actions"][0]["reason"].as_str()?.to_string();
            Some((l["wall_ms"].as_u64()?, reason.strip_prefix("call ")?.parse().ok()?))
        })
        .collect()
}

/// The process of pod `pod`'s host on this machine (its environment names the pod).
pub(crate) fn pid_of(pod: &str) -> Option<u32> {
    let needle = format!("POD_NAME={pod}");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        if !cmdline.starts_with(b"/wasmsched\0run") {
            return None;
        }
        let environ = std::fs::read(e.path().join("environ")).ok()?;
        environ.split(|b| *b == 0).any(|v| v == needle.as_bytes()).then_some(pid)
    })
}

pub(crate) fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill").args([sig, &pid.to_string()]).status().is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid}");
}

pub(crate) struct Replicas {
    pub(crate) c: &'static Cluster,
    pub(crate) namespace: &'static str,
    lease: String,
    app: String,
    dir: tempfile::TempDir,
}

impl Replicas {
    /// Replicas of the Lease `lease`, the Deployment `app` in `wasmsched-system`, not deployed
    /// yet; the rights they need (`rbac.yaml`) applied.
    pub(crate) fn new(c: &'static Cluster, lease: &str, app: &str) -> Replicas {
        for doc in crate::manifests::manifest("rbac.yaml") {
            crate::manifests::apply(c, &doc, false).unwrap_or_else(|e| panic!("rbac.yaml, {}: {e}", doc["kind"]));
        }
        let r = Replicas {
            c,
            namespace: "wasmsched-system",
            lease: lease.into(),
            app: app.into(),
            dir: tempfile::tempdir().unwrap(),
        };
        for sub in ["records", "run"] {
            // Open to the host's user: the Deployment runs it as 65532, not root.
            let folder = r.dir.path().join(sub);
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::set_permissions(&folder, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        }
        r
    }

    /// The tests' host.toml: the pods of `label`, a tick of 1 s, these replicas' Lease with a
    /// checkpoint every 3 ticks, SchedulingPolicy resources tried again every `retry`, the API
    /// on a socket, an audit log; `more` (a `[trust]` table) laid in after `[resources]`.
    pub(crate) fn host_toml(&self, label: &str, retry: &str, more: &str) -> String {
        format!(
            "tick = \"1s\"\ncache-dir = \"/var/cache/wasmsched\"\n\
             [resources]\nretry = \"{retry}\"\n{more}\
             [backend]\nkind = \"kubernetes\"\nnamespace = \"default\"\nselector = \"wasmsched.test={label}\"\n\
             [backend.election]\nlease = \"{}\"\ncheckpoint-every = 3\n\
             [api]\nlisten = \"unix:/run/wasmsched/api.sock\"\n\
             [record]\naudit = \"/var/log/wasmsched/audit.jsonl\"\n",
            self.lease
        )
    }

    /// Deploy the shipped Deployment with `config` as its host.toml and what this kit needs:
    /// the host network (no service network here), the apiserver on loopback, folders of this
    /// machine for the records and the sockets, the host's image `image`; then wait for both
    /// replicas to be ready and one to lead. The leader.
    pub(crate) fn deploy(&self, image: &str, config: &str) -> String {
        let c = self.c;
        let server = kube::config::Kubeconfig::read_from(&c.kubeconfig).unwrap().clusters[0]
            .cluster
            .clone()
            .unwrap()
            .server
            .unwrap();
        let port = server.rsplit(':').next().unwrap().trim_end_matches('/').to_string();
        let docs = crate::manifests::manifest("deployment.yaml");
        let mut map = docs.iter().find(|d| d["kind"] == "ConfigMap").unwrap().clone();
        map["metadata"]["name"] = json!(self.app);
        map["data"]["host.toml"] = json!(config);
        let mut d = docs.iter().find(|d| d["kind"] == "Deployment").unwrap().clone();
        let app = json!({"app.kubernetes.io/name": self.app});
        d["metadata"]["name"] = json!(self.app);
        d["metadata"]["labels"] = app.clone();
        d["spec"]["selector"]["matchLabels"] = app.clone();
        d["spec"]["template"]["metadata"]["labels"] = app.clone();
        let pod = &mut d["spec"]["template"]["spec"];
        pod["hostNetwork"] = json!(true);
        pod["dnsPolicy"] = json!("ClusterFirstWithHostNet");
        pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]["labelSelector"]
            ["matchLabels"] = app.clone();
        let host = &mut pod["containers"][0];
        host["image"] = json!(image);
        host["imagePullPolicy"] = json!("Never");
        // No page on loopback: on the host network both replicas share one (examples/overlays/kit).
        host["args"] = json!(["run", "--config", "/etc/wasmsched/host.toml"]);
        host["env"].as_array_mut().unwrap().extend([
            json!({"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"}),
            json!({"name": "KUBERNETES_SERVICE_PORT", "value": port}),
        ]);
        for mount in host["volumeMounts"].as_array_mut().unwrap() {
            if mount["name"] == "run" {
                mount["subPathExpr"] = json!("$(POD_NAME)");
            }
        }
        let folder = |sub: &str| json!({"path": self.dir.path().join(sub), "type": "Directory"});
        for volume in pod["volumes"].as_array_mut().unwrap() {
            let name = volume["name"].as_str().unwrap().to_string();
            match name.as_str() {
                "config" => volume["configMap"]["name"] = json!(self.app),
                "records" | "run" => *volume = json!({"name": name, "hostPath": folder(&name)}),
                _ => {}
            }
        }
        crate::manifests::apply(c, &map, false).unwrap();
        crate::manifests::apply(c, &d, false).unwrap_or_else(|e| panic!("the Deployment: {e}"));
        self.wait("two ready replicas and a leader", Duration::from_secs(120), || {
            let ready = self.ready_pods();
            let leader = self.leader()?;
            (ready.len() == 2 && ready.contains(&leader)).then_some(leader)
        })
    }

    pub(crate) fn records(&self) -> PathBuf {
        self.dir.path().join("records")
    }

    /// The pod holding the Lease now (the identity is `<pod>_<suffix>`).
    pub(crate) fn leader(&self) -> Option<String> {
        let leases: Api<Lease> = Api::namespaced(self.c.client.clone(), self.namespace);
        let holder = self.c.rt.block_on(leases.get_opt(&self.lease)).ok()??.spec?.holder_identity?;
        Some(holder.rsplit_once('_')?.0.to_string())
    }

    pub(crate) fn pods(&self) -> Vec<Pod> {
        let api: Api<Pod> = Api::namespaced(self.c.client.clone(), self.namespace);
        let params = ListParams::default().labels(&format!("app.kubernetes.io/name={}", self.app));
        self.c.rt.block_on(api.list(&params)).map(|l| l.items).unwrap_or_default()
    }

    pub(crate) fn ready_pods(&self) -> Vec<String> {
        self.pods()
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                let conditions = p.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
                conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
            })
            .filter_map(|p| p.metadata.name)
            .collect()
    }

    pub(crate) fn socket(&self, pod: &str) -> wasmsched::api::Listen {
        wasmsched::api::Listen::Unix(self.dir.path().join("run").join(pod).join("api.sock"))
    }

    pub(crate) fn status(&self, pod: &str) -> Option<wasmsched::status::Status> {
        wasmsched::api::client::status(self.socket(pod), None).ok()
    }

    pub(crate) fn describe(&self) -> String {
        let mut lines: Vec<String> = self
            .pods()
            .iter()
            .map(|p| {
                let s = p.status.clone().unwrap_or_default();
                format!(
                    "replica {}: phase={:?} containers={:?}",
                    p.metadata.name.clone().unwrap_or_default(),
                    s.phase,
                    s.container_statuses
                        .unwrap_or_default()
                        .iter()
                        .map(|c| (c.restart_count, c.state.clone()))
                        .collect::<Vec<_>>()
                )
            })
            .collect();
        lines.push(format!("leader: {:?}", self.leader()));
        lines.join("\n")
    }

    pub(crate) fn wait<T>(&self, what: &str, limit: Duration, ready: impl FnMut() -> Option<T>) -> T {
        poll(limit, Duration::from_millis(100), ready)
            .unwrap_or_else(|| panic!("waited {limit:?} for {what}\n{}", self.describe()))
    }
}

impl Drop for Replicas {
    fn drop(&mut self) {
        let client = self.c.client.clone();
        let params = ListParams::default().labels(&format!("app.kubernetes.io/name={}", self.app));
        let _ = self.c.rt.block_on(async {
            let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
                Api::namespaced(client.clone(), self.namespace);
            let _ = deployments.delete(&self.app, &DeleteParams::default()).await;
            let pods: Api<Pod> = Api::namespaced(client.clone(), self.namespace);
            let _ = pods
                .delete_collection(&DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() }, &params)
                .await;
            let maps: Api<ConfigMap> = Api::namespaced(client.clone(), self.namespace);
            let _ = maps.delete(&self.app, &DeleteParams::default()).await;
            let kept = ListParams::default().labels(&format!("wasmsched.lease={}", self.lease));
            let _ = maps.delete_collection(&DeleteParams::default(), &kept).await;
            let leases: Api<Lease> = Api::namespaced(client, self.namespace);
            leases.delete(&self.lease, &DeleteParams::default()).await
        });
    }
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn the_host_runs_in_the_cluster_as_two_replicas_whose_leader_may_crash_freeze_or_leave() {
    let Some(c) = cluster() else {
        eprintln!("SKIPPED {}: no Kubernetes cluster", module_path!());
        return;
    };
    let _serial = serial();
    let Some(image) = host_image() else { return };
    let pid = std::process::id();
    let label = test_label("replicas");
    let _sweep = c.sweep(&label);
    let (lease, app) = (format!("replicas-{pid}"), format!("wasmsched-test-{pid}"));
    let r = Replicas::new(c, &lease, &app);
    // The policy, as a SchedulingPolicy whose component is in a ConfigMap: no registry.
    install_crd(c);
    let counter = component("counter");
    let policy = PolicyResource::new(c, r.namespace, "counter");
    policy.serve_config_map("counter-v1", &counter);
    // Both replicas come up ready (a warm world each), one leads.
    let leader = r.deploy(&image, &r.host_toml(&label, "2s", ""));
    let standby = r.ready_pods().into_iter().find(|p| *p != leader).unwrap();
    // Its first tick comes at once, maybe before its first look at the Lease: leading by the next.
    let status = r.wait("the leader's status, leading", Duration::from_secs(10), || {
        r.status(&leader).filter(|s| s.leadership.as_ref().is_some_and(|l| l.leading))
    });
    assert!(status.leadership.as_ref().is_some_and(|l| l.leading), "{status:?}");
    assert!(r.status(&standby).and_then(|s| s.leadership).is_some_and(|l| !l.leading && l.holder.is_some()));
    for (name, pid) in [(&leader, pid_of(&leader)), (&standby, pid_of(&standby))] {
        let status = pid.and_then(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok()).unwrap_or_default();
        let field = |key: &str| {
            status.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)).map(str::to_string)
        };
        eprintln!("replica {name}: host process {pid:?}, resident {} KiB", field("VmRSS:").unwrap_or_default());
        if pid.is_some() {
            // The shipped Deployment's hardening in force: not root, no capabilities.
            assert_eq!(field("Uid:").as_deref(), Some("65532"), "{name} runs as the Deployment's user: {status}");
            assert_eq!(field("CapEff:").as_deref(), Some("0000000000000000"), "{name} has no capabilities");
        }
    }

    // The leader binds the queue and decides; the standby does neither.
    let mut pods: Vec<String> =
        (0..4).map(|i| queued_pod(c, &label, &format!("replicas-{pid}-{i}"), with_limits())).collect();
    let bound = |pods: &[String]| pods.iter().all(|p| node_of(c, p).is_some());
    r.wait("the leader to bind the queue", Duration::from_secs(30), || bound(&pods).then_some(()));
    let uids: BTreeMap<String, String> =
        pods.iter().map(|p| (p.clone(), c.pod(p).unwrap().metadata.uid.unwrap())).collect();
    r.wait("six decisions by the leader", Duration::from_secs(30), || {
        (decisions(&r.records(), &leader).len() >= 6).then_some(())
    });
    assert!(decisions(&r.records(), &standby).is_empty(), "a standby decides nothing");

    // 1. The leader crashes (SIGKILL: no release, no last checkpoint). The standby takes over a
    //    lease duration after it last saw the Lease renewed, from the state last kept.
    let killed_at = wall_ms();
    signal(pid_of(&leader).expect("the leader's process"), "-KILL");
    pods.extend((4..7).map(|i| queued_pod(c, &label, &format!("replicas-{pid}-{i}"), with_limits())));
    let (first_wall, first_call) = r.wait("the standby's first decision", Duration::from_secs(45), || {
        decisions(&r.records(), &standby).first().copied()
    });
    let old = decisions(&r.records(), &leader);
    let (last_wall, last_call) = *old.last().unwrap();
    eprintln!(
        "crash: leader killed → first decision by the new leader {:.1} s; nobody acting {:.1} s; \
         the counter went on from call {last_call} to call {first_call}",
        (first_wall - killed_at) as f64 / 1e3,
        (first_wall - last_wall) as f64 / 1e3
    );
    assert!(last_wall < first_wall, "the two leaders' decisions never overlap");
    assert!(first_call > 1 && first_call + 3 >= last_call, "the state kept every 3 ticks was restored: {old:?}");
    assert!(first_wall - killed_at <= 25_000, "failover took {} ms", first_wall - killed_at);
    let restored = r.status(&standby).unwrap();
    let reload = restored.policy("counter").unwrap().last_reload.clone().unwrap();
    assert_eq!(reload.outcome, wasmsched::status::ReloadOutcome::Restored, "{reload:?}");
    r.wait("every pod bound, the ones queued during the failover too", Duration::from_secs(30), || {
        bound(&pods).then_some(())
    });
    for (p, uid) in &uids {
        assert_eq!(c.pod(p).unwrap().metadata.uid.as_ref(), Some(uid), "{p} was bound once, never made again");
    }
    let leader = standby;

    // 2. The new leader freezes (SIGSTOP) past its renew deadline. The restarted replica takes
    //    over; woken up, the old leader finds its deadline passed and does nothing.
    let other = r.wait("the crashed replica back as a standby", Duration::from_secs(60), || {
        r.ready_pods()
            .into_iter()
            .find(|p| *p != leader && r.status(p).is_some_and(|s| s.leadership.is_some_and(|l| !l.leading)))
    });
    let frozen = pid_of(&leader).unwrap();
    let stopped_at = wall_ms();
    signal(frozen, "-STOP");
    let took = r.wait("the standby to take over from the frozen leader", Duration::from_secs(45), || {
        decisions(&r.records(), &other).iter().find(|(wall, _)| *wall > stopped_at).copied()
    });
    signal(frozen, "-CONT");
    let woke_at = wall_ms();
    eprintln!("freeze: leader frozen → first decision by the new leader {:.1} s", (took.0 - stopped_at) as f64 / 1e3);
    std::thread::sleep(Duration::from_secs(4));
    let after: Vec<_> = decisions(&r.records(), &leader).into_iter().filter(|(wall, _)| *wall >= woke_at).collect();
    assert!(after.is_empty(), "the frozen leader acted after it woke up: {after:?}");
    let woken = r.wait("the woken replica's status", Duration::from_secs(10), || r.status(&leader));
    assert!(woken.leadership.is_some_and(|l| !l.leading), "the woken replica stands by");
    let leader = other;

    // 3. A new version: the resource's spec names another ConfigMap. Every replica compiles it;
    //    the leader swaps it in with its state. Then a rollback (`wasmsched rollback counter
    //    --resource`): the spec before, applied again, for every replica.
    let v2 = variant("counter", 2);
    policy.serve_config_map("counter-v2", &v2);
    // Compiled in the pod by a debug build of the host, beside the other replica doing the same.
    let swapped = poll(Duration::from_secs(120), Duration::from_millis(200), || {
        let s = r.status(&leader)?;
        let p = s.policy("counter")?.clone();
        (p.sha256.as_deref() == Some(&sha256(&v2))).then_some(p)
    })
    .unwrap_or_else(|| panic!("the new version never served on the leader: {:#?}", r.status(&leader)));
    let detail = swapped.last_reload.unwrap().detail;
    assert!(detail.contains("bytes of its state") && !detail.contains(" 0 bytes"), "the state carried over: {detail}");
    policy.wait_ready(&r, &sha256(&v2), Duration::from_secs(120));
    let before = decisions(&r.records(), &leader).last().unwrap().1;
    let rolled_at = wall_ms();
    policy.roll_back();
    let rolled = policy.wait_ready(&r, &sha256(&counter), Duration::from_secs(60));
    // Serving since the rollback (to the second RFC 3339 keeps), not since version 1 first served.
    let before_status = rolled.status.clone();
    let since = rolled.status.and_then(|s| s.serving_since).expect("servingSince after the rollback");
    let since_ms = |t: &str| {
        humantime::parse_rfc3339(t).unwrap().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
    };
    assert!(since_ms(&since) + 1_000 >= rolled_at, "servingSince {since} is before the rollback");
    let went_on = r.wait("a decision after the rollback", Duration::from_secs(10), || {
        decisions(&r.records(), &leader).last().filter(|(_, call)| *call > before + 1).copied()
    });
    assert!(went_on.1 > before, "the count goes on through a swap and a rollback");

    // 4. The leader leaves cleanly (kubectl delete pod): it keeps the states and releases the
    //    Lease; whoever looks first (the standby, or the replica the Deployment starts in its
    //    place) takes over within a retry period.
    let deleted_at = wall_ms();
    let api: Api<Pod> = Api::namespaced(c.client.clone(), r.namespace);
    c.rt.block_on(api.delete(&leader, &DeleteParams::default())).unwrap();
    let (next, first) = r.wait("a decision by another replica after the clean stop", Duration::from_secs(30), || {
        let next = r.leader().filter(|l| *l != leader)?;
        let first = decisions(&r.records(), &next).into_iter().find(|(wall, _)| *wall > deleted_at)?;
        Some((next, first))
    });
    let last = decisions(&r.records(), &leader).last().copied().unwrap();
    eprintln!(
        "clean stop: leader deleted → first decision by the new leader ({next}) {:.1} s; the counter went on from \
         call {} to call {}",
        (first.0 - deleted_at) as f64 / 1e3,
        last.1,
        first.1
    );
    assert_eq!(first.1, last.1 + 1, "the state kept at the clean stop is the last one");
    // The same version serves across the takeover: servingSince stays the rollback's.
    std::thread::sleep(Duration::from_secs(3));
    let after_status = policy.get().status;
    let after = after_status.as_ref().and_then(|s| s.serving_since.clone());
    assert_eq!(
        after.as_deref(),
        Some(since.as_str()),
        "servingSince after the takeover; before {before_status:#?}\nafter {after_status:#?}"
    );
    assert!(first.0 - deleted_at <= 8_000, "a released Lease is taken within a retry period and a tick");
}
