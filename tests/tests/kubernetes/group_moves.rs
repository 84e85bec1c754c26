//! Pod groups of trainer pods on the kit, moved whole: preempted, migrated and resized (to
//! the same pod count, and an elastic group to others), each time resuming from its
//! checkpoint with no epoch lost.

use std::time::{Duration, Instant};

use wasmsched::backend::Backend;
use wasmsched::world::{NodeId, World};

use crate::cluster::Cluster;
use crate::{backend, step, test_label};

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn a_group_of_trainer_pods_is_preempted_migrated_and_resized_whole_and_resumes_from_its_checkpoint() {
    use crate::cluster::{TrainerPod, trainer_cluster_or_skip};
    use wasmsched::bindings::wit;
    let (c, image, _serial) = trainer_cluster_or_skip!();
    let label = test_label("gpair");
    let _sweep = c.sweep(&label);
    let dir = tempfile::tempdir().unwrap();
    // Two ranks of one data-parallel job (a Kueue plain-pod group): each trains its shard and
    // waits for the other after every epoch (their rendezvous is a folder on a volume both
    // nodes reach), rank 0 checkpoints, and rank 0's log is the job's progress. Neither makes
    // an epoch without the other: epochs show the group runs whole.
    let group = [("kueue.x-k8s.io/pod-group-name", "pair")];
    let total = [("kueue.x-k8s.io/pod-group-total-count", "2")];
    let args: Vec<Vec<String>> = (0..2)
        .map(|rank| {
            let mut a: Vec<String> = crate::QUICK.iter().map(|s| s.to_string()).collect();
            a.extend(["--checkpoint".into(), "/ckpt/model".into(), "--rank".into(), rank.to_string()]);
            a.extend(["--world-size".into(), "2".into()]);
            a
        })
        .collect();
    let args: Vec<Vec<&str>> = args.iter().map(|a| a.iter().map(String::as_str).collect()).collect();
    let names: Vec<String> = (0..2)
        .map(|rank| {
            let pod = c.trainer(
                &image,
                TrainerPod {
                    annotations: &[("checkpoint", "/ckpt")],
                    raw_labels: &group,
                    raw_annotations: &total,
                    ..TrainerPod::new(["rank0", "rank1"][rank], &label, &args[rank]).with_checkpoint_dir(dir.path())
                },
            );
            pod.metadata.name.unwrap()
        })
        .collect();
    let mut k = backend(c, &label);
    let mut world = World::new();
    let started = Instant::now();
    let handle = c.wait(&label, "the group bound whole and three epochs", Duration::from_secs(90), || {
        step(&mut k, &mut world, 500);
        let h = crate::job_named(&world, "pair")?;
        (world.history(h).count() >= 3).then_some(h)
    });
    let first = started.elapsed();
    assert_eq!(world.spec(handle).map(|s| s.replicas), Some(2), "one job of two pods");
    let rank1 = c.log(&names[1]);
    assert!(rank1.contains("rank 1 of 2") && rank1.contains("\"epoch\":3"), "rank 1 trains with rank 0: {rank1}");
    let bound: Vec<_> = names.iter().map(|n| c.pod(n).and_then(|p| p.spec?.node_name)).collect();
    assert!(bound.iter().all(Option::is_some), "both bound: {bound:?}");
    c.wait(&label, "the group's CPU use, both pods'", Duration::from_secs(60), || {
        step(&mut k, &mut world, 1000);
        (world.state(handle)?.cpu_used_millicores > 150).then_some(())
    });

    // Preempted whole: both pods re-created unbound, waiting as preempted.
    k.set_placer(wasmsched::backend::Placer::Policy);
    let preempted = Instant::now();
    let mut errors = k.apply(&[crate::action(handle, wit::ActionKind::Preempt)], &mut world);
    errors.extend(k.drain(&mut world, Duration::from_secs(90)));
    assert!(errors.is_empty(), "{errors:?}");
    let took = preempted.elapsed();
    assert_eq!(world.state(handle).unwrap().queued, Some(wit::WaitReason::Preempted));
    step(&mut k, &mut world, 500);
    let waiting = c.labelled(&label);
    assert_eq!(waiting.len(), 2, "both pods, as copies");
    for p in &waiting {
        assert_eq!(p.spec.as_ref().unwrap().node_name, None, "unbound");
        assert_eq!(
            p.metadata.annotations.as_ref().unwrap().get("wasmsched.wait").map(String::as_str),
            Some("preempted")
        );
    }
    assert!(crate::job_named(&world, "pair") == Some(handle), "the same job waits");

    // Placed again, on vm2 only: both pods there, resuming from their checkpoints.
    let place = crate::place(handle, 1);
    let resumed = resumes_after(c, &mut k, &mut world, &label, place, Duration::from_secs(30), "preemption").1;
    let on: Vec<_> = c.labelled(&label).into_iter().map(|p| p.spec.and_then(|s| s.node_name)).collect();
    assert_eq!(on, [Some("vm2".to_string()), Some("vm2".to_string())], "both on the node named");

    // Migrated whole to vm: both pods re-created from their checkpoints and bound there.
    let migrate = crate::action(handle, wit::ActionKind::Migrate(NodeId(0)));
    let migrated = resumes_after(c, &mut k, &mut world, &label, migrate, Duration::from_secs(90), "migration").1;
    assert_eq!(world.state(handle).map(|s| s.node), Some(NodeId(0)), "the world shows it on vm");
    let on: Vec<_> = c.labelled(&label).into_iter().map(|p| p.spec.and_then(|s| s.node_name)).collect();
    assert_eq!(on, [Some("vm".to_string()), Some("vm".to_string())], "both moved to vm");
    assert_eq!(crate::job_named(&world, "pair"), Some(handle), "the same job runs on");

    // Resized whole: the same pods, back on vm2, at batch size 64, which every copy carries.
    let placement = wit::Placement { nodes: vec![wit::NodePlacement::new(1, [])], share: false };
    let resize = crate::action(handle, wit::ActionKind::Resize(wit::Resize { placement, batch_size: Some(64) }));
    let resized = resumes_after(c, &mut k, &mut world, &label, resize, Duration::from_secs(90), "resize").1;
    assert_eq!(world.state(handle).map(|s| (s.node, s.batch_size)), Some((NodeId(1), 64)));
    for p in c.labelled(&label) {
        let spec = p.spec.unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("vm2"), "both moved to vm2");
        let env = spec.containers[0].env.clone().unwrap_or_default();
        let batch = env.iter().find(|e| e.name == "WASMSCHED_BATCH_SIZE").and_then(|e| e.value.clone());
        assert_eq!(batch.as_deref(), Some("64"), "every copy trains at the batch size in force");
    }
    eprintln!(
        "a group of 2 trainer pods: bound whole to its third epoch {first:.1?}; preempted (both re-created unbound) in \
         {took:.1?}; to its second epoch again after being placed again {resumed:.1?}, migrated {migrated:.1?}, \
         resized (to vm2 at batch size 64) {resized:.1?}"
    );

    // Stopped whole.
    let errors = k.apply(&[crate::action(handle, wit::ActionKind::Stop)], &mut world);
    assert!(errors.is_empty(), "{errors:?}");
    c.wait(&label, "the group gone", Duration::from_secs(30), || {
        step(&mut k, &mut world, 300);
        world.state(handle).is_none().then_some(())
    });
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn an_elastic_group_is_resized_to_other_pod_counts_and_gpus_per_pod_with_ranks_and_resumes() {
    use crate::cluster::{TrainerPod, trainer_cluster_or_skip};
    use wasmsched::bindings::wit;
    let (c, image, _serial) = trainer_cluster_or_skip!();
    let label = test_label("gelastic");
    let _sweep = c.sweep(&label);
    let (_vm, _vm2) = (c.advertise_gpus("vm", 2), c.advertise_gpus("vm2", 2));
    let dir = tempfile::tempdir().unwrap();
    // Two ranks of 2 GPUs each (GPUs advertised for accounting only), elastic from 2 to 4 GPUs
    // in all, their ranks in torchrun's variables as a PyTorch job would have them.
    let group = [("kueue.x-k8s.io/pod-group-name", "elastic")];
    let total = [("kueue.x-k8s.io/pod-group-total-count", "2")];
    let args: Vec<&str> = crate::QUICK.iter().copied().chain(["--checkpoint", "/ckpt/model"]).collect();
    let envs = [[("RANK", "0"), ("WORLD_SIZE", "2")], [("RANK", "1"), ("WORLD_SIZE", "2")]];
    for (rank, env) in envs.iter().enumerate() {
        c.trainer(
            &image,
            TrainerPod {
                annotations: &[("checkpoint", "/ckpt"), ("gpu-counts", "2,3,4"), ("batch-size", "32-256")],
                raw_labels: &group,
                raw_annotations: &total,
                gpus: 2,
                env,
                ..TrainerPod::new(["rank0", "rank1"][rank], &label, &args).with_checkpoint_dir(dir.path())
            },
        );
    }
    let mut k = backend(c, &label);
    let mut world = World::new();
    let handle = c.wait(&label, "the group bound whole and two epochs", Duration::from_secs(90), || {
        step(&mut k, &mut world, 500);
        let h = crate::job_named(&world, "elastic")?;
        (world.history(h).count() >= 2).then_some(h)
    });
    let spec = world.spec(handle).unwrap();
    assert_eq!((spec.gpus, spec.replicas, spec.scaling.gpu_counts.clone()), (4, 2, vec![2, 3, 4]));
    k.set_placer(wasmsched::backend::Placer::Policy);

    // To 3 GPUs, 2 on vm and 1 on vm2: three pods of 1 GPU, at batch size 96.
    let placement = wit::Placement {
        nodes: vec![wit::NodePlacement::new(0, [0, 1]), wit::NodePlacement::new(1, [0])],
        share: false,
    };
    let resize = crate::action(handle, wit::ActionKind::Resize(wit::Resize { placement, batch_size: Some(96) }));
    let grown = resumes_after(c, &mut k, &mut world, &label, resize, Duration::from_secs(90), "resize to 3 pods").1;
    let pods = ranks_of(c, &label);
    let shape: Vec<_> = pods.iter().map(|(rank, world, node, gpus, _)| (*rank, *world, node.as_str(), *gpus)).collect();
    assert_eq!(shape, [(0, 3, "vm", 1), (1, 3, "vm", 1), (2, 3, "vm2", 1)], "three ranks of 1 GPU");
    c.wait(&label, "the new rank's log: rank 2 of 3", Duration::from_secs(30), || {
        c.log(&pods[2].4).contains("rank 2 of 3").then_some(())
    });
    let state = world.state(handle).unwrap();
    assert_eq!((state.gpus.len(), state.batch_size), (3, 96));

    // To 2 GPUs on vm2: two pods of 1 GPU, at batch size 64.
    let placement = wit::Placement { nodes: vec![wit::NodePlacement::new(1, [0, 1])], share: false };
    let resize = crate::action(handle, wit::ActionKind::Resize(wit::Resize { placement, batch_size: Some(64) }));
    let shrunk = resumes_after(c, &mut k, &mut world, &label, resize, Duration::from_secs(90), "resize to 2 pods").1;
    let pods = ranks_of(c, &label);
    let shape: Vec<_> = pods.iter().map(|(rank, world, node, gpus, _)| (*rank, *world, node.as_str(), *gpus)).collect();
    assert_eq!(shape, [(0, 2, "vm2", 1), (1, 2, "vm2", 1)], "two ranks of 1 GPU");
    c.wait(&label, "rank 1's log: rank 1 of 2", Duration::from_secs(30), || {
        c.log(&pods[1].4).contains("rank 1 of 2").then_some(())
    });
    assert_eq!(crate::job_named(&world, "elastic"), Some(handle), "the same job runs on");

    // Preempted, then placed by the policy at 3 GPUs: the queued group is made three pods of
    // 1 GPU, then bound, and resumes.
    let preempt = || crate::action(handle, wit::ActionKind::Preempt);
    let mut errors = k.apply(&[preempt()], &mut world);
    errors.extend(k.drain(&mut world, Duration::from_secs(90)));
    assert!(errors.is_empty(), "{errors:?}");
    step(&mut k, &mut world, 500); // the copies seen: the group's pods now
    let placement = wit::Placement {
        nodes: vec![wit::NodePlacement::new(1, [0, 1]), wit::NodePlacement::new(0, [1])],
        share: false,
    };
    let place = crate::action(handle, wit::ActionKind::Place(placement));
    let placed = resumes_after(c, &mut k, &mut world, &label, place, Duration::from_secs(90), "placement as 3 pods").1;
    let shape: Vec<_> = ranks_of(c, &label).into_iter().map(|(r, w, node, g, _)| (r, w, node, g)).collect();
    let on = |n: &str| n.to_string();
    assert_eq!(shape, [(0, 3, on("vm2"), 1), (1, 3, on("vm2"), 1), (2, 3, on("vm"), 1)], "three ranks of 1 GPU");
    assert_eq!(world.state(handle).map(|s| s.gpus.len()), Some(3));

    // Preempted again, and placed by the default placement: whole, in the shape it has now.
    let mut errors = k.apply(&[preempt()], &mut world);
    errors.extend(k.drain(&mut world, Duration::from_secs(90)));
    assert!(errors.is_empty(), "{errors:?}");
    k.set_placer(wasmsched::backend::Placer::Backend);
    c.wait(&label, "placed again whole, as three pods of 1 GPU", Duration::from_secs(90), || {
        step(&mut k, &mut world, 500);
        let pods = ranks_of(c, &label);
        let shape: Vec<_> = pods.iter().map(|p| (p.0, p.1, p.3, p.2 != "-")).collect();
        (shape == [(0, 3, 1, true), (1, 3, 1, true), (2, 3, 1, true)]).then_some(())
    });
    assert_eq!(world.state(handle).map(|s| s.gpus.len()), Some(3));
    eprintln!(
        "an elastic group of 2 pods of 2 GPUs: to 3 pods of 1 GPU, to its second epoch after {grown:.1?}; to 2 pods of \
         1 GPU, {shrunk:.1?}; preempted and placed as 3 pods of 1 GPU, {placed:.1?}"
    );
}

/// The pods labelled `label`, by rank: rank, world size (from the environment the host set),
/// node ("-" when unbound), GPUs asked and name.
pub(crate) fn ranks_of(c: &Cluster, label: &str) -> Vec<(u32, u32, String, u32, String)> {
    let mut pods: Vec<_> = c
        .labelled(label)
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let spec = p.spec.unwrap();
            let env = spec.containers[0].env.clone().unwrap_or_default();
            let var = |name: &str| {
                env.iter().find(|v| v.name == name).and_then(|v| v.value.as_deref()?.parse().ok()).unwrap_or(u32::MAX)
            };
            let gpus = spec.containers[0].resources.as_ref().and_then(|r| r.limits.as_ref()?.get("nvidia.com/gpu"));
            (
                var("WASMSCHED_RANK"),
                var("WASMSCHED_WORLD_SIZE"),
                spec.node_name.unwrap_or_else(|| "-".into()),
                gpus.and_then(|q| q.0.parse().ok()).unwrap_or(0),
                p.metadata.name.unwrap_or_default(),
            )
        })
        .collect();
    pods.sort();
    pods
}

/// Apply `action` to the group's job, wait for every answer (`within`), then for two more
/// epochs, each following the one before: how long until the first of them, and until both.
/// `after` names the action.
pub(crate) fn resumes_after(
    c: &Cluster,
    k: &mut wasmsched::backend::kubernetes::Kubernetes,
    world: &mut World,
    label: &str,
    action: wasmsched::bindings::wit::Action,
    within: Duration,
    after: &str,
) -> (Duration, Duration) {
    let handle = action.job;
    let last = world.history(handle).last().unwrap().epoch;
    let started = Instant::now();
    let mut errors = k.apply(&[action], world);
    errors.extend(k.drain(world, within));
    assert!(errors.is_empty(), "{errors:?}");
    // Epochs the pods it replaced made while it was under way are read too; two more are the
    // new pods'.
    step(k, world, 500);
    let landed = world.history(handle).last().unwrap().epoch.max(last);
    let mut first = None;
    c.wait(label, &format!("epochs again after the {after}"), Duration::from_secs(90), || {
        step(k, world, 500);
        let now = world.history(handle).last()?.epoch;
        if now > landed {
            first.get_or_insert_with(|| started.elapsed());
        }
        (now >= landed + 2).then_some(())
    });
    let took = started.elapsed();
    wasmsched_tests::live::assert_consecutive_epochs(
        world.history(handle),
        &format!("resumed after the group's {after}"),
    );
    (first.unwrap_or(took), took)
}
