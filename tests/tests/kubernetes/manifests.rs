//! The manifests shipped in `examples/kubernetes/`: the RBAC is applied to the real cluster and
//! the host then runs every action under exactly those rules (by impersonating its
//! ServiceAccount); the Deployment is checked by the apiserver (a server-side dry run) and its
//! host config by the host's own parser; the example config runs the example pods as its
//! comments say.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use serde_json::json;
use wasmsched::backend::Backend;
use wasmsched::backend::kubernetes::Kubernetes;
use wasmsched::bindings::wit;
use wasmsched::world::World;

use crate::cluster::{Cluster, TrainerPod, trainer_cluster_or_skip};
use crate::{CHECKPOINTED, action, backend_with, job_named, place, step, test_label};
use wasmsched::config::{BackendConfig, HostConfig};
use wasmsched_tests::live::{Running, Setup, component};

/// Who the host runs as in the cluster (`examples/kubernetes/rbac.yaml`).
pub(crate) const SERVICE_ACCOUNT: &str = "system:serviceaccount:wasmsched-system:wasmsched";

/// The documents of a manifest in `examples/kubernetes/`.
pub(crate) fn manifest(name: &str) -> Vec<serde_json::Value> {
    let path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/kubernetes")).join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The API of one document's kind, in its namespace if it names one.
pub(crate) fn api_for(c: &Cluster, doc: &serde_json::Value) -> Api<DynamicObject> {
    let (api_version, kind) = (doc["apiVersion"].as_str().unwrap(), doc["kind"].as_str().unwrap());
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    match doc["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(c.client.clone(), ns, &resource),
        None => Api::all_with(c.client.clone(), &resource),
    }
}

/// Server-side apply of one document (`dry_run`: checked by the apiserver, not stored).
pub(crate) fn apply(c: &Cluster, doc: &serde_json::Value, dry_run: bool) -> Result<(), kube::Error> {
    let api = api_for(c, doc);
    let mut params = PatchParams::apply("wasmsched-tests").force();
    if dry_run {
        params = params.dry_run();
    }
    let name = doc["metadata"]["name"].as_str().unwrap();
    c.rt.block_on(api.patch(name, &params, &Patch::Apply(doc))).map(|_| ())
}

/// A copy of the test cluster's kubeconfig that acts as `user` (impersonation).
pub(crate) fn kubeconfig_as(c: &Cluster, user: &str, dir: &std::path::Path) -> PathBuf {
    let mut config = kube::config::Kubeconfig::read_from(&c.kubeconfig).unwrap();
    for named in &mut config.auth_infos {
        named.auth_info.get_or_insert_with(Default::default).impersonate = Some(user.to_string());
    }
    let path = dir.join("kubeconfig");
    std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
    path
}

#[test]
fn the_deployments_host_config_parses() {
    let docs = manifest("deployment.yaml");
    let map = docs.iter().find(|d| d["kind"] == "ConfigMap").expect("a ConfigMap");
    let text = map["data"]["host.toml"].as_str().expect("host.toml in the ConfigMap");
    let config = wasmsched::config::HostConfig::parse(std::path::Path::new("/etc/wasmsched/host.toml"), text)
        .unwrap_or_else(|e| panic!("{e}"));
    let BackendConfig::Kubernetes(backend) = &config.backend else { panic!("not kind = \"kubernetes\": {config:?}") };
    assert_eq!(backend.kubeconfig, None, "in the cluster: its ServiceAccount");
    assert!(config.resources.is_some(), "in the cluster the policies are SchedulingPolicy resources");
    assert!(config.policy.is_empty() && config.policies_dir.as_os_str().is_empty(), "and no folder of files");
    let election = backend.election.as_ref().expect("replicas elect a leader");
    assert_eq!((election.lease_duration.as_secs(), election.renew_deadline.as_secs()), (15, 10));
    assert!(matches!(config.api.listen, wasmsched::api::Listen::Unix(_)), "a socket per pod: no port to share");
    let deployment = docs.iter().find(|d| d["kind"] == "Deployment").expect("a Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "wasmsched");
    assert_eq!(deployment["spec"]["replicas"], 2, "a leader and a standby");
    let probe = &pod["containers"][0]["readinessProbe"]["exec"]["command"];
    assert_eq!(probe[4].as_str(), Some(&config.api.listen.to_string()[..]), "the probes ask the API where it listens");
    assert!(docs.iter().any(|d| d["kind"] == "PodDisruptionBudget"), "evictions leave one replica");
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn the_rbac_manifest_is_all_the_host_needs_for_every_action() {
    let (c, image, _serial) = trainer_cluster_or_skip!();
    for doc in manifest("rbac.yaml") {
        apply(c, &doc, false).unwrap_or_else(|e| panic!("rbac.yaml, {}: {e}", doc["kind"]));
    }
    // The apiserver accepts the Deployment and what it needs (checked, not stored).
    for doc in manifest("deployment.yaml") {
        apply(c, &doc, true).unwrap_or_else(|e| panic!("deployment.yaml, {}: {e}", doc["kind"]));
    }

    let label = test_label("rbac");
    let _sweep = c.sweep(&label);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig_as(c, SERVICE_ACCOUNT, dir.path());
    // The identity is really the ServiceAccount's: what the manifest does not grant is refused.
    let restricted = c.rt.block_on(async {
        let file = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(file, &Default::default()).await.unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client, "default");
        secrets.list(&ListParams::default()).await
    });
    assert!(
        matches!(&restricted, Err(kube::Error::Api(s)) if s.code == 403),
        "reading secrets is refused: {restricted:?}"
    );

    let ckpt = tempfile::tempdir().unwrap();
    let pod = c.trainer(
        &image,
        TrainerPod {
            annotations: &[
                ("checkpoint", "/ckpt"),
                ("deliver", "/wasmsched-trainer,export,/ckpt/model,/ckpt/delivered"),
            ],
            ..TrainerPod::new("rbac", &label, CHECKPOINTED).with_checkpoint_dir(ckpt.path())
        },
    );
    let name = pod.metadata.name.unwrap();
    let mut k = backend_with(kubeconfig, &label);
    k.set_placer(wasmsched::backend::Placer::Policy);
    let mut world = World::new();
    // Watch pods and nodes: the queued pod is a job.
    let handle = c.wait(&label, "the queued pod as a job", Duration::from_secs(30), || {
        step(&mut k, &mut world, 300);
        job_named(&world, &name)
    });
    let act = |k: &mut Kubernetes, world: &mut World, what: &str, a: wit::Action| {
        let mut errors = k.apply(&[a], world);
        errors.extend(k.drain(world, Duration::from_secs(90)));
        assert!(errors.is_empty(), "{what} as the ServiceAccount: {errors:?}\n{}", c.describe(&label));
    };
    // Bind; follow the log; read the kubelet's summary.
    act(&mut k, &mut world, "place", place(handle, 1));
    c.wait(&label, "two epochs from the log and CPU use", Duration::from_secs(90), || {
        step(&mut k, &mut world, 500);
        let s = world.state(handle)?;
        (world.history(handle).count() >= 2 && s.cpu_used_millicores > 0).then_some(())
    });
    // Resize; exec the delivery command.
    act(&mut k, &mut world, "set-cpu", action(handle, wit::ActionKind::SetCpu(Some(700))));
    act(&mut k, &mut world, "set-memory", action(handle, wit::ActionKind::SetMemory(Some(256 << 20))));
    // Deliver runs a command in the pod: refused, saying what to grant, until the optional
    // role is bound; then it runs.
    set_optional(c, false);
    let mut refused = k.apply(&[action(handle, wit::ActionKind::Deliver)], &mut world);
    refused.extend(k.drain(&mut world, Duration::from_secs(90)));
    assert!(
        refused.len() == 1 && refused[0].reason.contains("rbac-optional.yaml"),
        "deliver without pods/exec: {refused:?}"
    );
    set_optional(c, true);
    act(&mut k, &mut world, "deliver", action(handle, wit::ActionKind::Deliver));
    set_optional(c, false);
    assert!(ckpt.path().join("delivered").exists(), "the delivery command ran in the pod");
    // Copy and delete (preempt), bind the copy, delete it (stop).
    let started = Instant::now();
    act(&mut k, &mut world, "preempt", action(handle, wit::ActionKind::Preempt));
    assert_eq!(world.state(handle).unwrap().queued, Some(wit::WaitReason::Preempted));
    eprintln!("preemption as the ServiceAccount (copy, delete, gone): {:.1?}", started.elapsed());
    step(&mut k, &mut world, 300);
    act(&mut k, &mut world, "place the copy", place(handle, 0));
    act(&mut k, &mut world, "stop", action(handle, wit::ActionKind::Stop));
    c.wait(&label, "the stopped job gone", Duration::from_secs(30), || {
        step(&mut k, &mut world, 300);
        world.state(handle).is_none().then_some(())
    });
}

/// Bind (`on`) or unbind the roles of `rbac-optional.yaml` (the roles themselves stay). A
/// namespace a binding names that the kit lacks (the GPU Operator's) is made, and stays.
fn set_optional(c: &Cluster, on: bool) {
    for doc in manifest("rbac-optional.yaml") {
        let kind = doc["kind"].as_str().unwrap();
        if let Some(ns) = doc["metadata"]["namespace"].as_str().filter(|_| on) {
            let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(c.client.clone());
            if c.rt.block_on(namespaces.get_opt(ns)).unwrap().is_none() {
                apply(c, &namespace, false).unwrap_or_else(|e| panic!("namespace {ns}: {e}"));
            }
        }
        if kind.ends_with("Role") {
            apply(c, &doc, false).unwrap();
        } else if on {
            apply(c, &doc, false).unwrap_or_else(|e| panic!("rbac-optional.yaml, {kind}: {e}"));
        } else {
            delete(c, &doc);
        }
    }
}

/// Delete one document's object, if it exists.
fn delete(c: &Cluster, doc: &serde_json::Value) {
    let api = api_for(c, doc);
    let kind = doc["kind"].as_str().unwrap();
    let name = doc["metadata"]["name"].as_str().unwrap();
    match c.rt.block_on(api.delete(name, &Default::default())) {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => panic!("deleting {kind} {name}: {e}"),
    }
}

/// Whether the host's ServiceAccount may `verb` `resource` (`group/resource/subresource`
/// written as the apiserver names them) in `namespace` ("" for cluster-wide), as the
/// apiserver's authorizer answers a SubjectAccessReview.
fn may(c: &Cluster, verb: &str, group: &str, resource: &str, namespace: &str) -> bool {
    use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
    let (resource, subresource) = match resource.split_once('/') {
        Some((r, sub)) => (r, Some(sub.to_string())),
        None => (resource, None),
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(SERVICE_ACCOUNT.into()),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                "system:serviceaccounts:wasmsched-system".into(),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                subresource,
                namespace: (!namespace.is_empty()).then(|| namespace.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(c.client.clone());
    let answer = c.rt.block_on(api.create(&Default::default(), &review)).expect("the apiserver answers a review");
    answer.status.is_some_and(|s| s.allowed)
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn the_service_account_can_do_what_the_host_needs_and_nothing_it_must_not() {
    let Some(c) = crate::cluster::cluster() else {
        eprintln!("SKIPPED {}: no Kubernetes cluster", module_path!());
        return;
    };
    let _serial = crate::cluster::serial();
    for doc in manifest("rbac.yaml") {
        apply(c, &doc, false).unwrap_or_else(|e| panic!("rbac.yaml, {}: {e}", doc["kind"]));
    }
    set_optional(c, false);
    let (core, system) = ("", "wasmsched-system");
    let needs = [
        ("watch", core, "nodes", ""),
        ("get", core, "nodes/stats", ""),
        ("list", core, "pods", ""),
        ("create", core, "pods", "default"),
        ("delete", core, "pods", "default"),
        ("create", core, "pods/binding", "default"),
        ("patch", core, "pods/resize", "default"),
        ("get", core, "pods/log", "default"),
        ("watch", "scheduling.k8s.io", "podgroups", "default"),
        ("update", "coordination.k8s.io", "leases", system),
        ("patch", core, "configmaps", system),
        ("watch", "wasmsched.io", "schedulingpolicies", system),
        ("patch", "wasmsched.io", "schedulingpolicies/status", system),
        ("list", core, "pods", system),
        ("watch", core, "pods", "gpu-operator"),
        ("watch", "discovery.k8s.io", "endpointslices", "gpu-operator"),
        ("watch", "resource.k8s.io", "resourceslices", ""),
        ("watch", "resource.k8s.io", "deviceclasses", ""),
        ("watch", "resource.k8s.io", "resourceclaims", ""),
        ("patch", "resource.k8s.io", "resourceclaims", "default"),
        ("patch", "resource.k8s.io", "resourceclaims/status", "default"),
        ("watch", "resource.k8s.io", "resourceclaimtemplates", "default"),
        ("patch", "resource.k8s.io", "resourceclaims/binding", ""),
    ];
    let must_not = [
        ("get", core, "secrets", "default"),
        ("list", core, "secrets", system),
        ("list", core, "secrets", "kube-system"),
        ("list", core, "configmaps", "default"),
        ("get", core, "configmaps", "kube-system"),
        ("create", core, "pods/exec", "default"),
        ("create", core, "pods/exec", system),
        ("get", core, "nodes/proxy", ""),
        ("create", core, "pods", "kube-system"),
        ("delete", core, "pods", "kube-system"),
        ("create", core, "pods/binding", "kube-system"),
        ("patch", core, "nodes", ""),
        ("delete", core, "nodes", ""),
        ("create", core, "pods/eviction", "default"),
        ("create", "rbac.authorization.k8s.io", "rolebindings", "default"),
        ("escalate", "rbac.authorization.k8s.io", "clusterroles", ""),
        ("impersonate", core, "serviceaccounts", ""),
        ("update", "coordination.k8s.io", "leases", "kube-system"),
        ("patch", "scheduling.k8s.io", "podgroups", "default"),
        ("patch", "wasmsched.io", "schedulingpolicies", system),
        ("delete", "wasmsched.io", "schedulingpolicies", system),
        ("watch", "wasmsched.io", "schedulingpolicies", "default"),
        ("delete", core, "pods", system),
        ("get", core, "pods/proxy", "gpu-operator"),
        ("get", core, "pods/proxy", "default"),
        ("patch", "resource.k8s.io", "resourceclaims/status", "kube-system"),
        ("delete", "resource.k8s.io", "resourceclaims", "default"),
        ("create", "resource.k8s.io", "resourceclaims", "default"),
        ("create", "resource.k8s.io", "resourceslices", ""),
        ("patch", "resource.k8s.io", "deviceclasses", ""),
        ("create", "discovery.k8s.io", "endpointslices", "gpu-operator"),
        ("get", core, "services/proxy", "gpu-operator"),
    ];
    let wrong: Vec<String> = needs
        .iter()
        .filter(|(verb, group, resource, ns)| !may(c, verb, group, resource, ns))
        .map(|(verb, _, resource, ns)| format!("cannot {verb} {resource} in {ns:?}"))
        .chain(
            must_not
                .iter()
                .filter(|(verb, group, resource, ns)| may(c, verb, group, resource, ns))
                .map(|(verb, _, resource, ns)| format!("may {verb} {resource} in {ns:?}")),
        )
        .collect();
    assert!(wrong.is_empty(), "rbac.yaml grants the host's ServiceAccount the wrong rights: {wrong:?}");
    // The optional roles grant exactly what they say, and only while bound.
    set_optional(c, true);
    assert!(may(c, "create", core, "pods/exec", "default") && may(c, "get", core, "nodes/proxy", ""));
    assert!(!may(c, "create", core, "pods/exec", system), "deliver in the managed namespace only");
    assert!(may(c, "get", core, "pods/proxy", "gpu-operator"), "the GPU exporters through the apiserver");
    assert!(!may(c, "get", core, "pods/proxy", "default"), "in the exporters' namespace only");
    set_optional(c, false);
    assert!(!may(c, "create", core, "pods/exec", "default"));
}

#[test]
fn the_kustomize_base_is_the_whole_install() {
    let base = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/kubernetes");
    let out = match std::process::Command::new("kubectl").args(["kustomize", base]).output() {
        Ok(out) => out,
        Err(e) => {
            eprintln!("SKIPPED: no kubectl to render the kustomize base ({e})");
            return;
        }
    };
    assert!(out.status.success(), "kubectl kustomize {base}: {}", String::from_utf8_lossy(&out.stderr));
    let rendered: Vec<serde_json::Value> = serde_saphyr::from_multiple(&String::from_utf8_lossy(&out.stdout)).unwrap();
    let key = |d: &serde_json::Value| {
        format!("{} {}/{}", d["kind"], d["metadata"]["namespace"].as_str().unwrap_or(""), d["metadata"]["name"])
    };
    let mut got: Vec<String> = rendered.iter().map(key).collect();
    let mut want: Vec<String> =
        ["crd.yaml", "rbac.yaml", "deployment.yaml"].iter().flat_map(|m| manifest(m)).map(|d| key(&d)).collect();
    got.sort();
    want.sort();
    assert_eq!(got, want, "kubectl apply -k examples/kubernetes installs crd.yaml, rbac.yaml and deployment.yaml");
    let deployment = rendered.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let pod = &deployment["spec"]["template"]["spec"];
    let host = &pod["containers"][0]["securityContext"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    assert_eq!(host["readOnlyRootFilesystem"], true);
    assert_eq!(host["allowPrivilegeEscalation"], false);
    assert_eq!(host["capabilities"]["drop"], json!(["ALL"]));
    assert!(
        pod["volumes"].as_array().unwrap().iter().all(|v| v.get("persistentVolumeClaim").is_none()),
        "the base needs no storage: {pod}"
    );

    // The overlays: the records on a claim; the page on a Service, behind the Secret's token.
    let render = |overlay: &str| -> Vec<serde_json::Value> {
        let dir = format!("{}/../examples/overlays/{overlay}", env!("CARGO_MANIFEST_DIR"));
        let out = std::process::Command::new("kubectl").args(["kustomize", &dir]).output().unwrap();
        assert!(out.status.success(), "kubectl kustomize {dir}: {}", String::from_utf8_lossy(&out.stderr));
        serde_saphyr::from_multiple(&String::from_utf8_lossy(&out.stdout)).unwrap()
    };
    let pod_of = |docs: &[serde_json::Value]| {
        docs.iter().find(|d| d["kind"] == "Deployment").unwrap()["spec"]["template"]["spec"].clone()
    };
    let storage = render("storage");
    assert!(storage.iter().any(|d| d["kind"] == "PersistentVolumeClaim"));
    let records = pod_of(&storage)["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "records").cloned();
    assert_eq!(records.unwrap()["persistentVolumeClaim"]["claimName"], "wasmsched-records");
    let page = render("page");
    let service = page.iter().find(|d| d["kind"] == "Service").expect("the page's Service");
    assert_eq!(service["spec"]["ports"][0]["port"], 7878);
    let args = pod_of(&page)["containers"][0]["args"].clone();
    let args: Vec<&str> = args.as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(args.windows(2).any(|w| w == ["--http", "0.0.0.0:7878"]), "{args:?}");
    assert!(args.windows(2).any(|w| w == ["--token-file", "/etc/wasmsched/api/token"]), "{args:?}");
    let volumes = pod_of(&page)["volumes"].clone();
    assert!(volumes.as_array().unwrap().iter().any(|v| v["secret"]["secretName"] == "wasmsched-api"), "{volumes}");
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn the_example_config_and_pods_run_as_documented() {
    let (c, image, _serial) = trainer_cluster_or_skip!();
    let label = test_label("example");
    let _sweep = c.sweep(&label);
    // The shipped pods as they are, but for this test's image, names and label.
    let mut names = Vec::new();
    for mut doc in manifest("pods.yaml") {
        let name = format!("wst-{label}-{}", doc["metadata"]["name"].as_str().unwrap());
        doc["metadata"]["name"] = json!(name);
        doc["metadata"]["namespace"] = json!("default");
        doc["metadata"]["labels"]["wasmsched.test"] = json!(label);
        doc["spec"]["containers"][0]["image"] = json!(image);
        apply(c, &doc, false).unwrap_or_else(|e| panic!("pods.yaml, {name}: {e}"));
        names.push(name);
    }
    let [learning, flat] = names.as_slice() else { panic!("pods.yaml holds two pods: {names:?}") };
    // The shipped config as it is, but for this cluster, this test's pods, a folder of its own
    // and no control API.
    let setup = Setup::new();
    let path = setup.dir.path().join("kubernetes.toml");
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/kubernetes.toml"), &path).unwrap();
    let mut config = HostConfig::load(&path).unwrap();
    let BackendConfig::Kubernetes(backend) = &mut config.backend else { panic!("not kind = \"kubernetes\"") };
    backend.kubeconfig = Some(c.kubeconfig.clone());
    backend.selector = format!("wasmsched.test={label}");
    config.api.enabled = false;
    std::fs::create_dir_all(&config.policies_dir).unwrap();
    for policy in ["flowcon", "fair-share"] {
        std::fs::write(config.policies_dir.join(format!("{policy}.wasm")), component(policy)).unwrap();
    }
    let host = Running::start(config);
    let limit = |name: &str| c.pod(name).and_then(|p| wasmsched::backend::kubernetes::pod::limits(&p).0);
    let capped =
        crate::cluster::poll(Duration::from_secs(90), Duration::from_millis(200), || limit(flat).filter(|&m| m < 1000))
            .unwrap_or_else(|| {
                let telemetry = setup.dir.path().join("telemetry.jsonl");
                panic!(
                    "waited 90s for FlowCon capping the flat pod\n{}\nwhat the host saw and did, tick by tick:\n{}",
                    c.describe(&label),
                    digest(&telemetry)
                )
            });
    let nodes: Vec<_> = names.iter().map(|n| c.pod(n).and_then(|p| p.spec?.node_name)).collect();
    let learning_limit = limit(learning);
    host.stop();
    assert!(nodes[0].is_some() && nodes[0] == nodes[1], "the default placement put both on one node: {nodes:?}");
    assert!(learning_limit.is_none_or(|m| m > capped), "the learning pod keeps more: {learning_limit:?}m");
    let audit = std::fs::read_to_string(setup.dir.path().join("audit.jsonl")).unwrap();
    assert!(audit.contains("flowcon: completing"), "the audit log has FlowCon's reason");
}

/// A telemetry recording, one line a tick: each running job's node, CPU use and limit, the
/// progress records that arrived (count, last epoch and values), and the actions applied; so
/// that a failure says what the policy was shown.
fn digest(path: &std::path::Path) -> String {
    let Ok(text) = std::fs::read_to_string(path) else { return format!("no recording at {}", path.display()) };
    let column = |v: &serde_json::Value, c: &str| -> Vec<serde_json::Value> {
        v.get(c).and_then(|c| c.as_array()).cloned().unwrap_or_default()
    };
    let mut lines = Vec::new();
    for line in text.lines() {
        let Ok(tick) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let s = &tick["snapshot"];
        let jobs = &s["jobs"];
        let (handles, nodes, used, limits) = (
            column(jobs, "handle"),
            column(jobs, "node"),
            column(jobs, "cpu_used_millicores"),
            column(jobs, "cpu_limit_millicores"),
        );
        let mut out = format!("t={:.1}s", s["time_ms"].as_f64().unwrap_or(0.0) / 1000.0);
        for i in 0..handles.len() {
            out.push_str(&format!(" | job {} node {} used {}m limit {}m", handles[i], nodes[i], used[i], limits[i]));
        }
        let progress = &s["progress"];
        let (job, epoch, counts, values) = (
            column(progress, "job"),
            column(progress, "epoch"),
            column(progress, "value_count"),
            column(progress, "values"),
        );
        let starts: Vec<usize> = counts
            .iter()
            .scan(0, |at, n| {
                let start = *at;
                *at += n.as_u64().unwrap_or(0) as usize;
                Some(start)
            })
            .collect();
        for h in &handles {
            let mine: Vec<usize> = (0..job.len()).filter(|&i| &job[i] == h).collect();
            if let Some(&last) = mine.last() {
                let n = counts[last].as_u64().unwrap_or(0) as usize;
                let shown = serde_json::Value::from(values.get(starts[last]..starts[last] + n).unwrap_or_default());
                out.push_str(&format!(" | job {h}: {} records, last epoch {} {shown}", mine.len(), epoch[last]));
            }
        }
        out.push_str(&format!(" | queued {}", column(&s["queue"], "handle").len()));
        if let Some(actions) = tick["decision"]["actions"].as_array().filter(|a| !a.is_empty()) {
            out.push_str(&format!(" | actions {}", serde_json::Value::Array(actions.clone())));
        }
        lines.push(out);
    }
    lines.join("\n")
}
