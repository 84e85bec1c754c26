//! The install as `docs/kubernetes.md` writes it, run as written on the kit: the host's image
//! imported under the documented tag, `kubectl apply -k examples/overlays/kit`, two replicas
//! ready and one leading; then `examples/kubernetes/policy.yaml` as its block applies it (the
//! pushed digest put in by `sed`, the fair-share ConfigMap made first), both resources ready on
//! both replicas and served. What it made is deleted after; the namespace, the CRD and the RBAC,
//! which the other tests share, stay.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use wasmsched::backend::kubernetes::resource::SchedulingPolicy;
use wasmsched::oci::{self, RegistryOptions};
use wasmsched_tests::live::component;

use crate::cluster::{Cluster, cluster, poll, registry_or_skip, serial};
use crate::replicas::host_image_as;

const NAMESPACE: &str = "wasmsched-system";
const KIT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/overlays/kit");
const POLICY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/kubernetes/policy.yaml");

/// `kubectl ARGS` against the kit, `stdin` fed in; panics with its words when it fails.
fn kubectl(c: &Cluster, args: &[&str], stdin: Option<&str>) -> String {
    let mut child = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", &c.kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl");
    if let Some(text) = stdin {
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    let (said, err) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "kubectl {}: {err}{said}", args.join(" "));
    said.into_owned()
}

/// What the install made, deleted whatever the test's outcome.
struct Installed(&'static Cluster);

impl Drop for Installed {
    fn drop(&mut self) {
        let c = self.0;
        let gone: [&[&str]; 5] = [
            &["delete", "schedulingpolicy", "flowcon", "fair-share"],
            &["delete", "deployment,poddisruptionbudget", "wasmsched"],
            &["delete", "configmap", "wasmsched", "fair-share-v1"],
            &["delete", "configmap", "-l", "wasmsched.lease=wasmsched"],
            &["delete", "lease", "wasmsched"],
        ];
        for what in gone {
            let _ = Command::new("kubectl")
                .args(what)
                .args(["-n", NAMESPACE, "--ignore-not-found", "--wait=true"])
                .env("KUBECONFIG", &c.kubeconfig)
                .output();
        }
        let pods: Api<Pod> = Api::namespaced(c.client.clone(), NAMESPACE);
        let params = ListParams::default().labels("app.kubernetes.io/name=wasmsched");
        let _ = poll(Duration::from_secs(60), Duration::from_millis(500), || {
            c.rt.block_on(pods.list(&params)).ok().filter(|l| l.items.is_empty()).map(|_| ())
        });
    }
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn the_documented_install_runs_as_written_on_the_kit() {
    let Some(c) = cluster() else {
        eprintln!("SKIPPED {}: no Kubernetes cluster", module_path!());
        return;
    };
    let Some(registry) = registry_or_skip(module_path!()) else { return };
    let _serial = serial();
    // cli/image.sh and `cluster import`, as the block does (the tests' debug host, not a release
    // build: minutes saved), under the tag the Deployment names.
    let Some(_) = host_image_as(env!("CARGO_BIN_EXE_wasmsched-host"), "local/wasmsched:1") else { return };
    let installed = Installed(c);
    kubectl(c, &["apply", "-k", KIT], None);
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NAMESPACE);
    let params = ListParams::default().labels("app.kubernetes.io/name=wasmsched");
    let leases: Api<Lease> = Api::namespaced(c.client.clone(), NAMESPACE);
    let ready = poll(Duration::from_secs(180), Duration::from_millis(500), || {
        let ready: Vec<String> =
            c.rt.block_on(pods.list(&params))
                .ok()?
                .items
                .into_iter()
                .filter(|p| {
                    let conditions = p.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
                    conditions.iter().any(|k| k.type_ == "Ready" && k.status == "True")
                })
                .filter_map(|p| p.metadata.name)
                .collect();
        let holder = c.rt.block_on(leases.get_opt("wasmsched")).ok()??.spec?.holder_identity?;
        (ready.len() == 2 && ready.iter().any(|p| holder.starts_with(&format!("{p}_")))).then_some(ready)
    });
    let ready = ready.unwrap_or_else(|| panic!("two ready replicas and a leader within 180 s:\n{}", describe(c)));
    eprintln!("install: replicas {ready:?} ready, one leading");

    // The policies, as the block applies them.
    let dir = tempfile::tempdir().unwrap();
    let flowcon = dir.path().join("policy_flowcon.wasm");
    std::fs::write(&flowcon, component("flowcon")).unwrap();
    let options = RegistryOptions { insecure: false, auth: oci::Auth::Anonymous };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let repository = format!("{}/wasmsched-tests/flowcon-{}", registry.trim(), std::process::id());
    let pushed = rt.block_on(oci::push(&flowcon, &format!("{repository}:v1"), &options)).unwrap();
    let reference = format!("{}@{}", pushed.reference, pushed.digest);
    let fair_share = dir.path().join("policy_fair_share.wasm");
    std::fs::write(&fair_share, component("fair-share")).unwrap();
    let from_file = format!("--from-file=policy.wasm={}", fair_share.display());
    kubectl(c, &["create", "configmap", "fair-share-v1", "-n", NAMESPACE, &from_file], None);
    let text = std::fs::read_to_string(POLICY).unwrap();
    let placeholder = format!("127.0.0.1:5000/policies/flowcon:v1@sha256:{}", "0".repeat(64));
    assert!(text.contains(&placeholder), "policy.yaml's placeholder, which the documented sed replaces");
    kubectl(c, &["apply", "-f", "-"], Some(&text.replace(&placeholder, &reference)));
    let policies: Api<SchedulingPolicy> = Api::namespaced(c.client.clone(), NAMESPACE);
    let served = poll(Duration::from_secs(120), Duration::from_millis(500), || {
        let all = c.rt.block_on(policies.list(&ListParams::default())).ok()?.items;
        let done = |name: &str| {
            all.iter().find(|p| p.metadata.name.as_deref() == Some(name)).and_then(|p| p.status.clone()).is_some_and(
                |s| {
                    s.ready_replicas.as_deref() == Some("2/2")
                        && s.conditions.iter().any(|k| k.type_ == "Serving" && k.status == "True")
                },
            )
        };
        (done("flowcon") && done("fair-share")).then_some(())
    });
    let table = kubectl(c, &["-n", NAMESPACE, "get", "schedulingpolicies"], None);
    eprintln!("{table}");
    assert!(served.is_some(), "both policies ready on both replicas and served:\n{table}\n{}", describe(c));
    assert!(table.lines().filter(|l| l.contains("2/2")).count() == 2, "{table}");
    drop(installed);
}

/// The install's pods and resources, for a failure's message.
fn describe(c: &Cluster) -> String {
    let out = Command::new("kubectl")
        .args(["-n", NAMESPACE, "describe", "pods,schedulingpolicies", "-l", "app.kubernetes.io/name=wasmsched"])
        .env("KUBECONFIG", &c.kubeconfig)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    out.chars().rev().take(6000).collect::<String>().chars().rev().collect()
}
