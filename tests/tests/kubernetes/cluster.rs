//! The tests' Kubernetes cluster: found (`../shared/k8s/cluster up 2` starts one; its kubeconfig
//! in `WASMSCHED_KUBECONFIG`), or started here when the first test asks for it if
//! `WASMSCHED_K8S_START` is set, as `.ci/run` sets it, so that the tests that run before these
//! (the Docker fidelity checks among them) have the machine without it; and the trainer's image
//! imported into its nodes from this repo's trainer, without a registry.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

/// A reachable cluster, a client, and a runtime to talk to it.
pub struct Cluster {
    pub kubeconfig: PathBuf,
    pub client: kube::Client,
    pub rt: tokio::runtime::Runtime,
    /// The trainer's image tag and the tarball it was packed into (kept to import again).
    image: OnceLock<Option<(String, tempfile::TempDir)>>,
}

/// The cluster the tests use, or None (and a loud line saying why) when none answers. Where
/// `WASMSCHED_K8S_START` asks for one to be started and none answers after, the test fails.
pub fn cluster() -> Option<&'static Cluster> {
    static CLUSTER: OnceLock<Option<Cluster>> = OnceLock::new();
    let asked = std::env::var_os("WASMSCHED_K8S_START").is_some_and(|v| !v.is_empty());
    let found = CLUSTER.get_or_init(|| {
        if asked {
            start();
        }
        find()
    });
    assert!(
        found.is_some() || !asked,
        "WASMSCHED_K8S_START asked for the test cluster, and it did not start (see the lines above); \
         `{} up 2` starts it by hand",
        script().display()
    );
    found.as_ref()
}

/// `cluster up 2`, once; what it says goes to the log (it reuses a cluster already up).
fn start() {
    let script = script();
    eprintln!("starting the test cluster: {} up 2", script.display());
    let started = std::time::Instant::now();
    match std::process::Command::new(&script).args(["up", "2"]).output() {
        Ok(out) => eprintln!(
            "{} up 2 ended ({}) after {:.0} s: {}{}",
            script.display(),
            out.status,
            started.elapsed().as_secs_f64(),
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => eprintln!("{} could not be run: {e}", script.display()),
    }
}

/// The first cluster that answers, of `WASMSCHED_KUBECONFIG`'s and the script's usual one.
fn find() -> Option<Cluster> {
    let candidates = [std::env::var("WASMSCHED_KUBECONFIG").ok(), Some("/tmp/k8s-run/admin.kubeconfig".into())];
    // The host's own log lines, shown with a failing test's output.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("wasmsched=info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(false).with_test_writer().try_init();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let mut tried = Vec::new();
    for path in candidates.into_iter().flatten().map(PathBuf::from) {
        tried.push(path.display().to_string());
        let answered = rt.block_on(async {
            let file = kube::config::Kubeconfig::read_from(&path).ok()?;
            let config = kube::Config::from_custom_kubeconfig(file, &Default::default()).await.ok()?;
            let client = kube::Client::try_from(config).ok()?;
            let nodes: Api<Node> = Api::all(client.clone());
            let params = ListParams::default();
            let listed = tokio::time::timeout(Duration::from_secs(5), nodes.list(&params));
            listed.await.ok()?.ok().filter(|l| !l.items.is_empty()).map(|_| client)
        });
        if let Some(client) = answered {
            return Some(Cluster { kubeconfig: path, client, rt, image: OnceLock::new() });
        }
    }
    eprintln!(
        "SKIPPED: the Kubernetes backend's tests need a cluster and none answers (tried {}). \
         `../shared/k8s/cluster up 2` starts one; export its kubeconfig as WASMSCHED_KUBECONFIG.",
        tried.join(", ")
    );
    None
}

/// The cluster with the trainer's image in its nodes, and the lock that runs these tests one
/// at a time; or return from the test after saying why it is skipped.
macro_rules! trainer_cluster_or_skip {
    () => {{
        let Some(c) = crate::cluster::cluster() else {
            eprintln!("SKIPPED {}: no Kubernetes cluster", module_path!());
            return;
        };
        let serial = crate::cluster::serial();
        let Some(image) = c.trainer_image() else { return };
        c.reimport_images();
        (c, image.to_string(), serial)
    }};
}
pub(crate) use trainer_cluster_or_skip;

/// These tests share one cluster and two cores: one at a time.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// The OCI registry the tests push to (`WASMSCHED_REGISTRY`), or None after saying the test
/// `test` skips.
pub fn registry_or_skip(test: &str) -> Option<String> {
    let registry = std::env::var("WASMSCHED_REGISTRY").ok().map(|r| r.trim().to_string()).filter(|r| !r.is_empty());
    if registry.is_none() {
        eprintln!("SKIPPED {test}: no OCI registry (`.ci/registry start` serves one: export WASMSCHED_REGISTRY)");
    }
    registry
}

/// The `cluster` script: `WASMSCHED_K8S_CLUSTER`, else `../shared/k8s/cluster` beside the repo.
pub fn script() -> PathBuf {
    std::env::var_os("WASMSCHED_K8S_CLUSTER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/k8s/cluster")))
}

impl Cluster {
    /// The trainer's image (`local/wasmsched-trainer:<digest>`), packed by
    /// `jobs/trainer/image.sh` from the static binary the test artifacts build made and imported
    /// into every node once; None (said loudly) where that cannot be done.
    pub fn trainer_image(&self) -> Option<&str> {
        self.image
            .get_or_init(|| {
                let Some(binary) = wasmsched_test_artifacts::TRAINER else {
                    eprintln!("SKIPPED: no static trainer binary was built on this host");
                    return None;
                };
                let bytes = std::fs::read(binary).unwrap_or_else(|e| panic!("{binary}: {e}"));
                let tag = format!("local/wasmsched-trainer:{}", &wasmsched_tests::live::sha256(&bytes)[..12]);
                let dir = tempfile::tempdir().unwrap();
                let tar = dir.path().join("trainer.tar");
                let pack = concat!(env!("CARGO_MANIFEST_DIR"), "/../jobs/trainer/image.sh");
                let packed = std::process::Command::new(pack)
                    .arg(&tar)
                    .args(["--binary", binary, "--tag", &tag])
                    .status()
                    .is_ok_and(|s| s.success());
                assert!(packed, "jobs/trainer/image.sh packs the trainer");
                match import(&tar) {
                    Ok(()) => Some((tag, dir)),
                    Err(e) => {
                        eprintln!("SKIPPED: the trainer's image could not be imported into the nodes ({e})");
                        None
                    }
                }
            })
            .as_ref()
            .map(|(tag, _)| tag.as_str())
    }

    /// Import the sandbox (`pause`), busybox and trainer images into every node again, before
    /// each test. A kubelet short of disk removes the images no pod uses, the sandbox's among
    /// them, and then no pod on that node gets past ContainerCreating (no registry to pull
    /// from); importing an image already there takes a fraction of a second.
    pub fn reimport_images(&self) {
        let run = PathBuf::from(std::env::var("K8S_RUN").unwrap_or_else(|_| "/tmp/k8s-run".into()));
        let trainer = self.image.get().and_then(|i| i.as_ref()).map(|(_, dir)| dir.path().join("trainer.tar"));
        let base = ["pause", "busybox"].map(|i| run.join("images").join(format!("{i}.tar")));
        for tar in base.into_iter().filter(|t| t.exists()).chain(trainer) {
            if let Err(e) = import(&tar) {
                panic!("importing {} into the nodes again failed: {e}", tar.display());
            }
        }
    }

    /// The pods of the default namespace.
    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), "default")
    }

    /// A pod by name, as the apiserver has it now.
    pub fn pod(&self, name: &str) -> Option<Pod> {
        self.rt.block_on(self.pods().get_opt(name)).ok().flatten()
    }

    /// Every pod of a test's `wasmsched.test` label.
    pub fn labelled(&self, label: &str) -> Vec<Pod> {
        let params = ListParams::default().labels(&format!("wasmsched.test={label}"));
        self.rt.block_on(self.pods().list(&params)).map(|l| l.items).unwrap_or_default()
    }

    /// Create a trainer pod of the test's `label` running `args`. `queued` gives it our
    /// scheduler's name (it waits unbound); otherwise it is bound to `node` at creation.
    /// `extra` adds keys to the spec (volumes, resources …).
    pub fn trainer(&self, image: &str, spec: TrainerPod<'_>) -> Pod {
        let mut labels: BTreeMap<String, String> =
            BTreeMap::from([("wasmsched.managed".into(), "true".into()), ("wasmsched.test".into(), spec.label.into())]);
        labels.extend(spec.labels.iter().map(|(k, v)| (format!("wasmsched.{k}"), v.to_string())));
        labels.extend(spec.raw_labels.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let mut annotations: BTreeMap<String, String> =
            spec.annotations.iter().map(|(k, v)| (format!("wasmsched.{k}"), v.to_string())).collect();
        annotations.extend(spec.raw_annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let mut container = json!({
            "name": "trainer",
            "image": image,
            "imagePullPolicy": "Never",
            "command": ["/wasmsched-trainer"],
            "args": spec.args,
            "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}},
        });
        if spec.gpus > 0 {
            container["resources"]["limits"] = json!({GPU: spec.gpus.to_string()});
        }
        if let Some(mounts) = &spec.mounts {
            container["volumeMounts"] = mounts.clone();
        }
        if !spec.env.is_empty() {
            container["env"] = spec.env.iter().map(|(name, value)| json!({"name": name, "value": value})).collect();
        }
        let mut pod_spec = json!({
            "shareProcessNamespace": true,
            "restartPolicy": "OnFailure",
            "terminationGracePeriodSeconds": 5,
            "containers": [container],
        });
        if let Some(volumes) = &spec.volumes {
            pod_spec["volumes"] = volumes.clone();
        }
        let claim = match (spec.claim_template, spec.claim_name) {
            (Some(template), _) => Some(json!({"name": "gpu", "resourceClaimTemplateName": template})),
            (None, Some(name)) => Some(json!({"name": "gpu", "resourceClaimName": name})),
            (None, None) => None,
        };
        if let Some(claim) = claim {
            pod_spec["resourceClaims"] = json!([claim]);
            pod_spec["containers"][0]["resources"]["claims"] = json!([{"name": "gpu"}]);
        }
        match spec.node {
            Some(node) => pod_spec["nodeName"] = json!(node),
            None => pod_spec["schedulerName"] = json!("wasmsched"),
        }
        // The label holds the test and the process, so two tests never share a pod's name.
        let name = format!("wst-{}-{}", spec.label, spec.name);
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": pod_spec,
        }))
        .unwrap();
        self.rt.block_on(self.pods().create(&PostParams::default(), &pod)).expect("the apiserver creates the pod")
    }

    /// The epoch times (`time_s`) pod `name` printed so far.
    pub fn epoch_times(&self, name: &str) -> Vec<f64> {
        self.log(name)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?.get("time_s")?.as_f64())
            .collect()
    }

    /// The epochs pod `name`'s log still holds, as the apiserver gives it now.
    pub fn kept_epochs(&self, name: &str) -> Vec<u32> {
        self.log(name)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?.get("epoch")?.as_u64())
            .map(|e| e as u32)
            .collect()
    }

    /// What pod `name`'s log holds (its main container's, stdout and stderr), empty when it
    /// cannot be read.
    pub fn log(&self, name: &str) -> String {
        self.rt.block_on(self.pods().logs(name, &Default::default())).unwrap_or_default()
    }

    /// No epoch that pod `name`'s log still holds is missing from `records`, and none was read
    /// twice: the records are consecutive, except for one gap just before the log's first
    /// epoch where the cluster started the log file afresh. This cluster's two kubelets share
    /// `/var/log/pods`, and each one's container GC (once a minute) removes the log directories
    /// of the other's pods; the kubelet then starts a new file, and lines written in between
    /// exist nowhere. A follower connected at the time reads on from the open file; one that
    /// follows again (after an outage, a resize) can only read what the new file holds.
    pub fn assert_no_kept_epoch_lost<'a>(
        &self,
        name: &str,
        records: impl IntoIterator<Item = &'a wasmsched::world::Record>,
        what: &str,
    ) {
        let epochs: Vec<u32> = records.into_iter().map(|r| r.epoch).collect();
        let kept = self.kept_epochs(name);
        let fresh_from = kept.first().copied().filter(|&first| first > epochs.first().copied().unwrap_or(1));
        let split = fresh_from.map_or(epochs.len(), |first| epochs.partition_point(|&e| e < first));
        let (before, after) = epochs.split_at(split);
        let consecutive = |run: &[u32]| run.windows(2).all(|w| w[1] == w[0] + 1);
        let last = epochs.last().copied().unwrap_or(0);
        let kept_read: Vec<u32> = kept.iter().copied().filter(|&e| e <= last).collect();
        let whole = consecutive(before) && (fresh_from.is_none() || after == kept_read.as_slice());
        assert!(
            whole && consecutive(after),
            "{what}: an epoch lost or read twice: {epochs:?} (the log holds {kept:?})"
        );
        if let Some(first) = fresh_from {
            eprintln!(
                "NOTE {what}: pod {name}'s log now starts at epoch {first}: the cluster started the file afresh (the \
                 other kubelet's GC), so epochs {}..{first} exist nowhere; every epoch the log holds was read once",
                before.last().map_or(0, |e| e + 1)
            );
        }
    }

    /// Wait until `ready` holds, polling; after `limit`, panic with `what` and how the nodes and
    /// the pods of the test's `label` stand, so that a failure in CI says what the cluster did.
    pub fn wait<T>(&self, label: &str, what: &str, limit: Duration, ready: impl FnMut() -> Option<T>) -> T {
        match poll(limit, Duration::from_millis(200), ready) {
            Some(v) => v,
            None => panic!("waited {limit:?} for {what}\n{}", self.describe(label)),
        }
    }

    /// The nodes' readiness and the phase, node and container states of the pods of a test's
    /// `label`, one line each.
    pub fn describe(&self, label: &str) -> String {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let mut lines = Vec::new();
        match self.rt.block_on(nodes.list(&ListParams::default())) {
            Ok(list) => {
                for n in list.items {
                    let conditions = n.status.and_then(|s| s.conditions).unwrap_or_default();
                    let taints = n.spec.and_then(|s| s.taints).unwrap_or_default();
                    let ready = conditions.iter().find(|c| c.type_ == "Ready");
                    lines.push(format!(
                        "node {}: Ready={} ({}), pressure: {:?}, taints: {:?}",
                        n.metadata.name.unwrap_or_default(),
                        ready.map_or("?", |c| c.status.as_str()),
                        ready.and_then(|c| c.message.clone()).unwrap_or_default(),
                        conditions
                            .iter()
                            .filter(|c| c.type_ != "Ready" && c.status == "True")
                            .map(|c| &c.type_)
                            .collect::<Vec<_>>(),
                        taints.iter().map(|t| format!("{}:{}", t.key, t.effect)).collect::<Vec<_>>(),
                    ));
                }
            }
            Err(e) => lines.push(format!("nodes: cannot list ({e})")),
        }
        for p in self.labelled(label) {
            let status = p.status.unwrap_or_default();
            let containers: Vec<String> = status
                .container_statuses
                .unwrap_or_default()
                .iter()
                .map(|c| format!("{} restarts={} state={:?}", c.name, c.restart_count, c.state))
                .collect();
            let name = p.metadata.name.unwrap_or_default();
            let node = p.spec.and_then(|s| s.node_name);
            lines.push(format!(
                "pod {name}: phase={:?} node={node:?} reason={:?} message={:?} containers={containers:?}",
                status.phase, status.reason, status.message,
            ));
            lines.extend(self.events(&name));
            lines.extend(node.and_then(|n| kubelet_lines(&n, &name)));
        }
        lines.join("\n")
    }

    /// The events of pod `name`, oldest first, a line each ("FailedCreatePodSandBox: …" says
    /// why a pod stays ContainerCreating).
    fn events(&self, name: &str) -> Vec<String> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), "default");
        let params = ListParams::default().fields(&format!("involvedObject.name={name}"));
        match self.rt.block_on(events.list(&params)) {
            Ok(list) => list
                .items
                .into_iter()
                .map(|e| {
                    let (reason, message) = (e.reason.unwrap_or_default(), e.message.unwrap_or_default());
                    format!("  event {} ×{}: {reason}: {message}", e.type_.unwrap_or_default(), e.count.unwrap_or(1))
                })
                .collect(),
            Err(e) => vec![format!("  events: cannot list ({e})")],
        }
    }

    /// A guard that deletes every pod of a test's label on drop, pass or fail (copies of a pod
    /// have names of their own).
    pub fn sweep(&'static self, label: &str) -> Sweep {
        Sweep { cluster: self, label: label.to_string() }
    }
}

/// `cluster import TAR`: load an image into every node.
fn import(tar: &std::path::Path) -> Result<(), String> {
    match std::process::Command::new(script()).arg("import").arg(tar).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("{}: {}", o.status, String::from_utf8_lossy(&o.stderr).trim())),
        Err(e) => Err(format!("{}: {e}", script().display())),
    }
}

/// The last lines of node `node`'s kubelet log that name pod `pod`, and the last that say it
/// reclaimed disk (evicting, removing images), or None where there is no such log.
fn kubelet_lines(node: &str, pod: &str) -> Option<String> {
    let run = std::env::var("K8S_RUN").unwrap_or_else(|_| "/tmp/k8s-run".into());
    let log = std::fs::read_to_string(format!("{run}/kubelet-{node}.log")).ok()?;
    let last = |keep: &dyn Fn(&str) -> bool, n: usize| {
        let lines: Vec<&str> = log.lines().filter(|l| keep(l)).collect();
        lines[lines.len().saturating_sub(n)..].to_vec()
    };
    let mut tail = last(&|l| l.contains("eviction_manager") || l.contains("image_gc_manager"), 4);
    tail.extend(last(&|l| l.contains(pod), 6));
    if tail.is_empty() {
        return None;
    }
    Some(
        tail.iter()
            .map(|l| format!("  kubelet {node}: {}", l.chars().take(400).collect::<String>()))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// A trainer pod to create.
pub struct TrainerPod<'a> {
    pub name: &'a str,
    pub label: &'a str,
    pub args: &'a [&'a str],
    /// `wasmsched.*` labels, without the prefix.
    pub labels: &'a [(&'a str, &'a str)],
    /// `wasmsched.*` annotations, without the prefix.
    pub annotations: &'a [(&'a str, &'a str)],
    /// Bound to this node at creation; None: queued for our scheduler.
    pub node: Option<&'a str>,
    pub mounts: Option<serde_json::Value>,
    pub volumes: Option<serde_json::Value>,
    /// `nvidia.com/gpu` it asks for (0: none).
    pub gpus: u32,
    /// Labels and annotations as they are, not `wasmsched.*` (a pod group's, say).
    pub raw_labels: &'a [(&'a str, &'a str)],
    pub raw_annotations: &'a [(&'a str, &'a str)],
    /// The container's environment.
    pub env: &'a [(&'a str, &'a str)],
    /// A ResourceClaimTemplate its container's devices come from (claim `gpu`).
    pub claim_template: Option<&'a str>,
    /// A ResourceClaim (made beforehand) its container's devices come from (claim `gpu`).
    pub claim_name: Option<&'a str>,
}

impl<'a> TrainerPod<'a> {
    /// A pod with only a name, a label and arguments, queued.
    pub fn new(name: &'a str, label: &'a str, args: &'a [&'a str]) -> Self {
        TrainerPod {
            name,
            label,
            args,
            labels: &[],
            annotations: &[],
            node: None,
            mounts: None,
            volumes: None,
            gpus: 0,
            raw_labels: &[],
            raw_annotations: &[],
            env: &[],
            claim_template: None,
            claim_name: None,
        }
    }

    /// The same, with folder `dir` of this machine (opened to every user) mounted at `/ckpt`
    /// through a hostPath volume: a checkpoint folder that outlives the pod and that both of
    /// the kit's nodes reach.
    pub fn with_checkpoint_dir(self, dir: &std::path::Path) -> Self {
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        TrainerPod {
            mounts: Some(json!([{"name": "ckpt", "mountPath": "/ckpt"}])),
            volumes: Some(json!([{"name": "ckpt", "hostPath": {"path": dir, "type": "Directory"}}])),
            ..self
        }
    }
}

/// A node advertising `nvidia.com/gpu` (accounting only: no device plugin, no device) until
/// dropped; see [`Cluster::advertise_gpus`].
pub struct Advertised {
    cluster: &'static Cluster,
    node: String,
}

impl Cluster {
    /// Make node `node` advertise `count` GPUs in its status's capacity and allocatable, as a
    /// device plugin would, until the guard is dropped.
    pub fn advertise_gpus(&'static self, node: &str, count: u32) -> Advertised {
        self.set_gpus(node, Some(count));
        Advertised { cluster: self, node: node.to_string() }
    }

    fn set_gpus(&self, node: &str, count: Option<u32>) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let value = count.map(|n| json!(n.to_string()));
        let patch = json!({"status": {"capacity": {GPU: value}, "allocatable": {GPU: value}}});
        let params = kube::api::PatchParams::default();
        self.rt
            .block_on(nodes.patch_status(node, &params, &kube::api::Patch::Merge(patch)))
            .unwrap_or_else(|e| panic!("cannot set node {node}'s GPUs: {e}"));
    }
}

impl Drop for Advertised {
    fn drop(&mut self) {
        self.cluster.set_gpus(&self.node, None);
    }
}

const GPU: &str = "nvidia.com/gpu";

/// Deletes a test's pods on drop; see [`Cluster::sweep`].
pub struct Sweep {
    cluster: &'static Cluster,
    label: String,
}

impl Drop for Sweep {
    fn drop(&mut self) {
        let c = self.cluster;
        let params = ListParams::default().labels(&format!("wasmsched.test={}", self.label));
        let now = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
        let _ = c.rt.block_on(c.pods().delete_collection(&now, &params));
    }
}

/// The cgroup (v1, cgroupfs driver) the kubelet made for pod `p`'s main container:
/// `…/kubepods/<class>/pod<uid>/<container id>` in `controller`'s hierarchy (`cpu`,
/// `cpuacct`), under either node's root.
fn container_cgroup(p: &Pod, controller: &str) -> Option<PathBuf> {
    let uid = p.metadata.uid.as_deref()?;
    let status = p.status.as_ref()?.container_statuses.as_ref()?.first()?;
    let id = status.container_id.as_deref()?.rsplit("://").next()?;
    let root = std::path::Path::new("/sys/fs/cgroup").join(controller);
    let pod_dir = find_dir(&root, &format!("pod{uid}"), 5)?;
    Some(pod_dir.join(id))
}

fn read_number(path: PathBuf) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The CFS quota in force for pod `p`'s main container, in millicores (None: unlimited).
pub fn cgroup_cpu_limit(p: &Pod) -> Option<Option<u64>> {
    let dir = container_cgroup(p, "cpu")?;
    let (quota, period) = (read_number(dir.join("cpu.cfs_quota_us"))?, read_number(dir.join("cpu.cfs_period_us"))?);
    Some((quota > 0).then(|| (quota * 1000 / period.max(1)) as u64))
}

/// The CPU time pod `p`'s main container has used, nanoseconds (its cgroup's cpuacct.usage).
pub fn cgroup_cpu_used_ns(p: &Pod) -> Option<u64> {
    u64::try_from(read_number(container_cgroup(p, "cpuacct")?.join("cpuacct.usage"))?).ok()
}

fn find_dir(root: &std::path::Path, name: &str, depth: u32) -> Option<PathBuf> {
    for entry in std::fs::read_dir(root).ok()?.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        if entry.file_name().to_string_lossy() == name {
            return Some(path);
        }
        if depth > 0
            && let Some(found) = find_dir(&path, name, depth - 1)
        {
            return Some(found);
        }
    }
    None
}

/// Wait until `ready` holds, polling; panics with `what` after `limit`.
pub fn eventually<T>(what: &str, limit: Duration, ready: impl FnMut() -> Option<T>) -> T {
    poll(limit, Duration::from_millis(200), ready).unwrap_or_else(|| panic!("waited {limit:?} for {what}"))
}

/// `ready`'s first answer within `limit`, asking every `every`.
pub fn poll<T>(limit: Duration, every: Duration, mut ready: impl FnMut() -> Option<T>) -> Option<T> {
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = ready() {
            return Some(v);
        }
        if start.elapsed() >= limit {
            return None;
        }
        std::thread::sleep(every);
    }
}
