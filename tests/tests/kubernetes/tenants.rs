//! Tenants on a real cluster: pods name their tenant in a label, the host holds each tenant to
//! its quota, and the `quota` policy takes lent GPUs back by preempting real pods, which resume
//! from their checkpoints. The GPUs are advertised on vm2's status (accounting only).

use std::time::Duration;

use wasmsched::bindings::wit;
use wasmsched::control::{self, LoopConfig};
use wasmsched::runtime::supervise::{Fallback, Quarantine, Supervised};
use wasmsched::world::World;

use crate::cluster::{TrainerPod, trainer_cluster_or_skip};
use crate::{CHECKPOINTED, Until, backend, test_label};
use wasmsched_tests::common::{loaded, runtime};

/// Tenant `name` with a quota of `quota` GPUs in cohort "lab".
fn lab(name: &str, quota: u32) -> wit::Tenant {
    wit::Tenant {
        name: name.into(),
        weight: 1.0,
        quota_gpus: Some(quota),
        borrowing_limit_gpus: None,
        cohort: "lab".into(),
    }
}

/// The running jobs of each tenant, by name, in the world's tenant order.
fn running_by_tenant(world: &World) -> Vec<(String, usize)> {
    world
        .tenants()
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.clone(), world.jobs().filter(|(_, s)| s.tenant as usize == i).count()))
        .collect()
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn a_tenant_borrows_idle_quota_and_gives_it_back_by_preemption_when_its_owner_asks() {
    let (c, image, _serial) = trainer_cluster_or_skip!();
    let label = test_label("tenants");
    let _sweep = c.sweep(&label);
    let _gpus = c.advertise_gpus("vm2", 4);
    let dirs: Vec<tempfile::TempDir> = (0..6).map(|_| tempfile::tempdir().unwrap()).collect();
    let pod = |name: &str, tenant: &str, dir: &tempfile::TempDir| {
        let labels = [("tenant", tenant)];
        let spec = TrainerPod {
            labels: &labels,
            annotations: &[("checkpoint", "/ckpt")],
            gpus: 1,
            ..TrainerPod::new(name, &label, CHECKPOINTED).with_checkpoint_dir(dir.path())
        };
        c.trainer(&image, spec).metadata.name.unwrap()
    };
    for (i, dir) in dirs[..4].iter().enumerate() {
        pod(&format!("vision-{i}"), "vision", dir);
        // Distinct arrival times: the newest is the first taken back.
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut k = backend(c, &label);
    let mut policy =
        Supervised::new(loaded("quota"), "{}".into(), Default::default(), Fallback::KeepLimits, Quarantine::default());
    let config = LoopConfig {
        tenants: vec![lab("vision", 2), lab("speech", 2)],
        ..LoopConfig::unbudgeted(Duration::from_millis(500))
    };
    // Vision's quota is two GPUs; speech's two are idle and lent: all four run. Then speech
    // asks for its two: two of vision's pods are preempted and speech's bound.
    let (mut borrowed, mut seen) = (false, None);
    let mut driver = Until {
        policy: &mut policy,
        done: |w: &World| {
            let running = running_by_tenant(w);
            let of = |name: &str| running.iter().find(|(t, _)| t == name).map_or(0, |(_, n)| *n);
            if !borrowed && of("vision") == 4 {
                borrowed = true;
                for (i, dir) in dirs[4..].iter().enumerate() {
                    pod(&format!("speech-{i}"), "speech", dir);
                }
            }
            let preempted = w.queue().filter(|(_, s)| s.queued == Some(wit::WaitReason::Preempted)).count();
            // Done once the preemptions have landed too: two of each run.
            let done = borrowed && of("speech") == 2 && of("vision") == 2;
            if done {
                seen = Some((of("vision"), of("speech"), preempted));
            }
            done
        },
        limit_ms: 180_000,
    };
    control::drive(&mut k, &mut driver, runtime(), &config);
    assert!(borrowed, "vision borrowed speech's idle quota\n{}", c.describe(&label));
    let Some((vision, speech, preempted)) = seen else {
        panic!("speech got its quota back\n{}", c.describe(&label));
    };
    assert_eq!((vision, speech), (2, 2));
    assert_eq!(preempted, 2, "vision's two borrowed pods wait, preempted, to resume from their checkpoints");
    let bound_to_vm2 = c
        .labelled(&label)
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("vm2"))
        .count();
    assert_eq!(bound_to_vm2, 4, "four pods hold vm2's four GPUs; the two preempted copies are unbound");
}
