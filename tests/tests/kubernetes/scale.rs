//! The scale harness (`wasmsched-scale kubernetes`, `scale/README.md`) at a size CI affords:
//! fifty nodes as API objects and five hundred one-GPU pods queued before either scheduler starts, bound
//! once by the host (as a process of its own) and once by the cluster's kube-scheduler. Its
//! figures are printed, not asserted (the machine is shared and noisy); what is asserted is
//! that every pod was bound, within its node's room, on the nodes its selector allows, and that
//! the host made the apiserver time out on nothing; with DRA (`--dra`: two hundred one-device
//! pods on fifty nodes of eight devices), also that every claim was allocated on its pod's node
//! and reserved for it, no device given twice. The thousand- and five-thousand-node runs are
//! documented commands (`docs/kubernetes.md`).

use std::path::PathBuf;
use std::time::Duration;

use wasmsched_scale::kubernetes::{self as scale, Only, Options};

use crate::cluster;

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn fifty_nodes_and_five_hundred_pods_are_bound_by_the_host_and_by_kube_scheduler() {
    let Some(c) = cluster::cluster() else {
        eprintln!("SKIPPED {}: no Kubernetes cluster", module_path!());
        return;
    };
    let _serial = cluster::serial();
    // One GPU a pod, as the cluster had: FIFO fits GPUs; it cannot see CPU requests (the
    // contract's job spec has none), so on CPU-only pods the host refuses what it piles on one
    // node and the watchdog's stall rule has to rescue them.
    let options = small(c, 500, 1);
    let report = c.rt.block_on(scale::run(&options)).unwrap_or_else(|e| panic!("the scale run failed: {e:#}"));
    eprintln!("{}", scale::table::render(&report));
    assert_eq!(report.runs.len(), 2, "both schedulers ran");
    for run in &report.runs {
        bound_every_pod(run, 500);
    }
    let host = &report.runs[0];
    let log = host.log.as_ref().expect("the host's log was read");
    assert_eq!((log.does_not_answer, log.timed_out), (0, 0), "the host made the apiserver time out: {log:?}");
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn fifty_nodes_and_a_hundred_groups_of_three_are_bound_whole_by_the_host_and_by_kube_scheduler() {
    let Some(c) = cluster::cluster() else {
        eprintln!("SKIPPED {}: no Kubernetes cluster", module_path!());
        return;
    };
    let _serial = cluster::serial();
    if !crate::groups::serves_podgroups(c) {
        eprintln!(
            "SKIPPED {}: the cluster does not serve scheduling.k8s.io/v1alpha2 PodGroups; start it with the Workload \
             API's feature gates (shared/k8s/README.md, \"Alpha APIs\")",
            module_path!()
        );
        return;
    }
    // scheduler_perf's gang workload, small: groups of three one-GPU pods, each group declared by
    // an upstream PodGroup that kube-scheduler's GangScheduling reads as well as the host.
    let options = small(c, 300, 3);
    let report = c.rt.block_on(scale::run(&options)).unwrap_or_else(|e| panic!("the scale run failed: {e:#}"));
    eprintln!("{}", scale::table::render(&report));
    assert_eq!(report.runs.len(), 2, "both schedulers ran");
    for run in &report.runs {
        let who = &run.scheduler;
        let groups = run.groups.as_ref().expect("a grouped run reports its groups");
        assert!(!run.timed_out, "{who} bound {} of {} pods in time", run.pods_bound, run.pods_created);
        assert_eq!(
            (groups.created, groups.bound_whole, groups.partly_bound),
            (100, 100, 0),
            "{who} bound every group whole"
        );
        assert_eq!(run.overcommitted_nodes, 0, "{who} kept every node's room");
    }
    // A bind the watch has not brought yet is not a lost pod: the host took nothing back.
    let dir = report.host_dir.as_ref().expect("the host's folder");
    let log = std::fs::read_to_string(dir.join("host.log")).unwrap_or_default();
    let took_back = log.lines().filter(|l| l.contains("group lost a pod") || l.contains("taking")).count();
    assert_eq!(took_back, 0, "the host took back pods of groups it had bound whole:\n{log}");
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn fifty_nodes_and_two_hundred_dra_pods_get_their_claims_allocated_by_the_host_and_by_kube_scheduler() {
    let Some(c) = cluster::cluster() else {
        eprintln!("SKIPPED {}: no Kubernetes cluster", module_path!());
        return;
    };
    let _serial = cluster::serial();
    if let Err(why) = serves_resource_slices(c) {
        eprintln!(
            "SKIPPED {}: the cluster does not serve resource.k8s.io/v1 ResourceSlices ({why}); DRA is on by \
             default from Kubernetes 1.34 (shared/k8s/README.md, \"DRA\")",
            module_path!()
        );
        return;
    }
    // scheduler_perf's DRA case, small: a ResourceSlice of eight devices on each node, a claim
    // made for each pod before it (the controller manager that would make template claims is
    // stopped), each claim one device of the class with a CEL selector on its memory of its own.
    let options = Options { gpus_per_node: 8, dra: true, ..small(c, 200, 1) };
    let report = c.rt.block_on(scale::run(&options)).unwrap_or_else(|e| panic!("the scale run failed: {e:#}"));
    eprintln!("{}", scale::table::render(&report));
    assert_eq!(report.runs.len(), 2, "both schedulers ran");
    for run in &report.runs {
        let who = &run.scheduler;
        bound_every_pod(run, 200);
        let dra = run.dra.expect("a DRA run reads its claims");
        assert_eq!((dra.claims, dra.allocated), (200, 200), "{who} allocated every claim: {dra:?}");
        assert_eq!(dra.on_pod_node, 200, "{who} allocated each claim on its pod's node: {dra:?}");
        assert_eq!(dra.reserved_for_pod, 200, "{who} reserved each claim for its pod: {dra:?}");
        assert_eq!(dra.double_allocated_devices, 0, "{who} gave no device to two claims: {dra:?}");
    }
    let host = &report.runs[0];
    let log = host.log.as_ref().expect("the host's log was read");
    assert_eq!((log.does_not_answer, log.timed_out), (0, 0), "the host made the apiserver time out: {log:?}");
}

/// Whether the cluster lists `resource.k8s.io/v1` ResourceSlices; why not.
fn serves_resource_slices(c: &cluster::Cluster) -> Result<(), String> {
    use k8s_openapi::api::resource::v1::ResourceSlice;
    let slices: kube::Api<ResourceSlice> = kube::Api::all(c.client.clone());
    c.rt.block_on(slices.list_metadata(&kube::api::ListParams::default().limit(1)))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// `run` bound all its `pods` in time, each within its node's room and on the nodes its selector
/// allows.
fn bound_every_pod(run: &scale::RunReport, pods: u64) {
    let who = &run.scheduler;
    assert!(!run.timed_out, "{who} bound {} of {} pods in time", run.pods_bound, run.pods_created);
    assert_eq!(run.pods_bound, pods, "{who} bound every pod");
    assert_eq!(run.bound_off_scale_nodes, 0, "{who} kept every pod's nodeSelector");
    assert_eq!(run.overcommitted_nodes, 0, "{who} kept every node's room");
}

/// The small run CI affords: fifty nodes of 16 GPUs, `pods` one-GPU pods (in groups of
/// `group_size`) queued before either scheduler starts, the host as the tests' binary with FIFO.
fn small(c: &cluster::Cluster, pods: u32, group_size: u32) -> Options {
    Options {
        nodes: 50,
        pods,
        gpus_per_node: 16,
        pod_gpus: 1,
        group_size,
        tick: Duration::from_secs(1),
        host_bin: PathBuf::from(env!("CARGO_BIN_EXE_wasmsched-host")),
        fifo: PathBuf::from(wasmsched_test_artifacts::path("fifo")),
        only: Only::Both,
        kubeconfig: c.kubeconfig.clone(),
        k8s_run: std::env::var_os("K8S_RUN").map_or_else(|| PathBuf::from("/tmp/k8s-run"), PathBuf::from),
        concurrency: 32,
        timeout: Duration::from_secs(180),
        steady: Duration::from_secs(5),
        scheduler_qps: 5000,
        precreate: true,
        dra: false,
        cache_dir: None,
    }
}
