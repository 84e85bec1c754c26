//! The faults the backend survives on a real cluster: the apiserver killed and started again
//! mid-run, and a node going NotReady (its kubelet frozen). Each test puts the cluster back as
//! it found it, pass or fail.

use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use wasmsched::backend::{Backend, Status as _};
use wasmsched::bindings::wit;
use wasmsched::world::{NodeId, World};

use crate::cluster::{Cluster, TrainerPod, eventually, trainer_cluster_or_skip};
use crate::{QUICK, action, backend, job_named, place, step, test_label};

/// A process of the cluster's, by its pid file in the cluster's run folder (beside the
/// kubeconfig); None where the cluster is not one the tests started.
fn pid_of(c: &Cluster, name: &str) -> Option<(std::path::PathBuf, String)> {
    let pid_file = c.kubeconfig.parent()?.join(format!("{name}.pid"));
    let pid = std::fs::read_to_string(&pid_file).ok()?.trim().to_string();
    std::path::Path::new(&format!("/proc/{pid}")).exists().then_some((pid_file, pid))
}

/// The apiserver's process: its pid file and command line, to stop it and start it again.
struct Apiserver {
    pid_file: std::path::PathBuf,
    argv: Vec<String>,
}

impl Apiserver {
    fn find(c: &Cluster) -> Option<Apiserver> {
        let (pid_file, pid) = pid_of(c, "apiserver")?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let argv = cmdline
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        Some(Apiserver { pid_file, argv })
    }

    fn stop(&self) {
        let pid = std::fs::read_to_string(&self.pid_file).unwrap().trim().to_string();
        // Killed outright, as a crash would: on SIGTERM it closes its port at once but can
        // linger for minutes draining requests, and a second one then starts beside it.
        let _ = std::process::Command::new("kill").args(["-KILL", &pid]).status();
        // Gone, or a zombie its parent (long exited) leaves for init to reap.
        eventually("the apiserver stopped", Duration::from_secs(30), || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next().map(str::to_string));
            (stat.is_empty() || state.as_deref() == Some("Z")).then_some(())
        });
    }

    fn start(&self) {
        let log = std::fs::File::create(self.pid_file.with_file_name("apiserver.log")).unwrap();
        // In a process group of its own, as the cluster script starts it: it outlives the test.
        let child = std::process::Command::new(&self.argv[0])
            .args(&self.argv[1..])
            .process_group(0)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        std::fs::write(&self.pid_file, child.id().to_string()).unwrap();
        std::mem::forget(child);
    }
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn the_apiserver_restarted_mid_run_is_survived() {
    let (c, image, _serial) = trainer_cluster_or_skip!();
    let Some(apiserver) = Apiserver::find(c) else {
        eprintln!(
            "SKIPPED the_apiserver_restarted_mid_run_is_survived: the apiserver's process is not ours to restart"
        );
        return;
    };
    let label = test_label("outage");
    let _sweep = c.sweep(&label);
    let pod = c.trainer(&image, TrainerPod { node: Some("vm"), ..TrainerPod::new("outage", &label, QUICK) });
    let name = pod.metadata.name.unwrap();
    let mut k = backend(c, &label);
    let mut world = World::new();
    let handle = c.wait(&label, "the job and two epochs", Duration::from_secs(90), || {
        step(&mut k, &mut world, 500);
        let h = job_named(&world, &name)?;
        (world.history(h).count() >= 2).then_some(h)
    });

    let stopped = Instant::now();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        apiserver.stop();
        c.wait(&label, "the backend to notice", Duration::from_secs(30), || {
            step(&mut k, &mut world, 500);
            (!k.apiserver_up()).then_some(())
        });
        let status = &k.endpoints()[0];
        assert!(!status.up && status.down_for_ms.is_some() && status.jobs == 1, "the status shows it: {status:?}");
        assert_eq!(world.jobs().map(|(s, _)| s.handle).collect::<Vec<_>>(), [handle], "the job is kept");
        let errors = k.apply(&[action(handle, wit::ActionKind::SetCpu(Some(800)))], &mut world);
        assert!(errors.len() == 1 && errors[0].reason.contains("does not answer"), "{errors:?}");
    }));
    apiserver.start();
    result.unwrap();
    let epochs_before = world.history(handle).count();
    c.wait(&label, "the apiserver back", Duration::from_secs(90), || {
        step(&mut k, &mut world, 500);
        k.apiserver_up().then_some(())
    });
    eprintln!("apiserver down and back in {:.1?}", stopped.elapsed());
    let records = c.wait(&label, "progress again", Duration::from_secs(90), || {
        step(&mut k, &mut world, 500);
        let r: Vec<_> = world.history(handle).cloned().collect();
        (r.len() >= epochs_before + 3).then_some(r)
    });
    assert_eq!(world.jobs().map(|(s, _)| s.handle).collect::<Vec<_>>(), [handle], "the same job, the same handle");
    c.assert_no_kept_epoch_lost(&name, &records, "across the outage");
    let errors = k.apply(&[action(handle, wit::ActionKind::SetCpu(Some(800)))], &mut world);
    assert!(errors.is_empty(), "{errors:?}");
}

/// A node's kubelet, stopped (SIGSTOP) until dropped: the node cannot report itself Ready.
struct Frozen(String);

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill").args(["-CONT", &self.0]).status();
    }
}

/// Set node `name`'s Ready condition, as its kubelet (or the node controller) would.
fn report_ready(c: &Cluster, name: &str, ready: bool) {
    let nodes: Api<Node> = Api::all(c.client.clone());
    let node = c.rt.block_on(nodes.get_status(name)).unwrap();
    let mut conditions = node.status.and_then(|s| s.conditions).unwrap_or_default();
    for condition in conditions.iter_mut().filter(|c| c.type_ == "Ready") {
        condition.status = if ready { "True" } else { "False" }.into();
        condition.reason = Some(if ready { "KubeletReady" } else { "KubeletStopped" }.into());
        condition.message = Some(format!("set by {}", module_path!()));
    }
    let patch = json!({"status": {"conditions": conditions}});
    c.rt.block_on(nodes.patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))).unwrap();
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn a_node_going_not_ready_keeps_its_pods_and_gets_nothing_new() {
    let (c, image, _serial) = trainer_cluster_or_skip!();
    let Some((_, kubelet)) = pid_of(c, "kubelet-vm") else {
        eprintln!("SKIPPED a_node_going_not_ready_keeps_its_pods_and_gets_nothing_new: node vm's kubelet is not ours");
        return;
    };
    let label = test_label("notready");
    let _sweep = c.sweep(&label);
    let running = c.trainer(&image, TrainerPod { node: Some("vm"), ..TrainerPod::new("on-vm", &label, QUICK) });
    let running = running.metadata.name.unwrap();
    let mut k = backend(c, &label);
    k.set_placer(wasmsched::backend::Placer::Policy);
    let mut world = World::new();
    let on_vm = c.wait(&label, "the pod on vm as a job", Duration::from_secs(60), || {
        step(&mut k, &mut world, 300);
        job_named(&world, &running).filter(|&h| world.state(h).is_some_and(|s| s.is_running()))
    });

    {
        let _frozen = Frozen(kubelet.clone());
        let _ = std::process::Command::new("kill").args(["-STOP", &kubelet]).status();
        report_ready(c, "vm", false);
        let queued = c.trainer(&image, TrainerPod::new("queued", &label, QUICK)).metadata.name.unwrap();
        let waiting = c.wait(&label, "the queued pod as a job", Duration::from_secs(30), || {
            step(&mut k, &mut world, 300);
            job_named(&world, &queued)
        });
        // Its kubelet does not answer: its summary is read when it comes, the tick goes on (the
        // request's own limit is 5 s).
        let tick = Instant::now();
        step(&mut k, &mut world, 300);
        assert!(tick.elapsed() < Duration::from_secs(3), "a hung kubelet held the tick up for {:.1?}", tick.elapsed());
        // Nothing is placed on it, by a policy or by the default placement; its pod is kept.
        let errors = k.apply(&[place(waiting, 0)], &mut world);
        assert!(errors.len() == 1 && errors[0].reason.contains("NotReady"), "{errors:?}");
        assert!(world.state(on_vm).is_some_and(|s| s.is_running() && s.node == 0), "the pod on vm is kept");
        k.set_placer(wasmsched::backend::Placer::Backend);
        step(&mut k, &mut world, 300);
        let bound = c.pod(&queued).and_then(|p| p.spec?.node_name);
        assert_eq!(bound.as_deref(), Some("vm2"), "the default placement skips the NotReady node");
        assert_eq!(world.state(waiting).map(|s| s.node), Some(NodeId(1)));
    }
    // Its kubelet back, the node reports Ready again and takes pods.
    c.wait(&label, "vm Ready again", Duration::from_secs(60), || {
        let nodes: Api<Node> = Api::all(c.client.clone());
        let node = c.rt.block_on(nodes.get_status("vm")).ok()?;
        let ready = node.status?.conditions?.into_iter().find(|c| c.type_ == "Ready")?;
        (ready.status == "True").then_some(())
    });
    k.set_placer(wasmsched::backend::Placer::Policy);
    let later = c.trainer(&image, TrainerPod::new("later", &label, QUICK)).metadata.name.unwrap();
    let later = c.wait(&label, "the next queued pod", Duration::from_secs(30), || {
        step(&mut k, &mut world, 300);
        job_named(&world, &later)
    });
    let errors = k.apply(&[place(later, 0)], &mut world);
    assert!(errors.is_empty(), "vm takes pods again: {errors:?}");
    assert!(world.state(on_vm).is_some_and(|s| s.is_running()), "the same job, never dropped");
}
