//! GACER on the kit beside the simulator, tick by tick: the same four jobs (two light models,
//! two of each) on two GPUs of vm2 that allow several allocations, each pod's device through a
//! ResourceClaim of its own that the host allocates, and each job's GPU use served by a
//! dcgm-exporter page of the simulator's figures. Both policies are asked on every tick; their
//! actions must be the same, one by one (by job name, node name, GPU and share), and each is
//! carried out on its own side: placed alone to learn a model, then paired on a GPU, the pair's
//! shares set (the pods re-created with the share in their claims' allocation config), a pair
//! that gains nothing parted. At the end every pod runs on the device its job holds, with the
//! MPS share its job has.
//!
//! The kit's DRA test driver publishes whole devices on both nodes; pods of kube-scheduler's
//! hold them all here (the host leaves devices that other schedulers' pods hold out of a
//! node's GPUs), and the test publishes the two shareable ones, `perDeviceNodeSelection` so
//! that the driver's own slice controller leaves them alone; the driver prepares them as its own.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::DeleteParams;
use serde_json::json;

use wasmsched::runtime::Limits;
use wasmsched::scenario::Scenario;
use wasmsched::sim::{SimConfig, Simulator};
use wasmsched::world::{Cursor, GpuSlot};

use super::*;
use crate::dra::{DRIVER, claim_of, devices_on_vm2, holding, node};
use crate::gpus::{exporter, read_from, serve};
use crate::manifests;

/// The simulator's side: vm2's two 16 GiB GPUs and the four jobs, in the kit's arrival order.
const SCENARIO: &str = r#"
    name = "gacer-kit"
    [[node]]
    name = "vm2"
    cores = 64
    memory = "256GiB"
    gpus = 2
    gpu-memory = "16GiB"
    [[job]]
    name = "a-0"
    model = "cifar10"
    gpus = 1
    max-epochs = 1000
    [[job]]
    name = "b-0"
    model = "ncf"
    gpus = 1
    max-epochs = 1000
    [[job]]
    name = "a-1"
    model = "cifar10"
    gpus = 1
    max-epochs = 1000
    [[job]]
    name = "b-1"
    model = "ncf"
    gpus = 1
    max-epochs = 1000
"#;

/// The jobs, as the scenario lists them: name and model.
const JOBS: [(&str, &str); 4] = [("a-0", "cifar10"), ("b-0", "ncf"), ("a-1", "cifar10"), ("b-1", "ncf")];

/// Ticks asked on both sides: the models are learnt alone in three, the pairs made on the
/// fourth and regulated on the fifth, the pair that gains nothing parted three samples later
/// and its job put beside the other pair; then ten quiet ticks.
const TICKS: u64 = 20;

const MIB: u64 = 1 << 20;

/// Objects the test made, deleted when dropped (the last made first).
struct Made(&'static Cluster, Vec<serde_json::Value>);

impl Drop for Made {
    fn drop(&mut self) {
        let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
        for doc in self.1.iter().rev() {
            let name = doc["metadata"]["name"].as_str().unwrap_or_default();
            let _ = self.0.rt.block_on(manifests::api_for(self.0, doc).delete(name, &now));
        }
    }
}

/// Make the objects of `docs` (namespaced ones in `default`), as the admin.
fn make(c: &'static Cluster, docs: Vec<serde_json::Value>) -> Made {
    for doc in &docs {
        manifests::apply(c, doc, false).unwrap_or_else(|e| panic!("the apiserver takes {}: {e}", doc["metadata"]));
    }
    Made(c, docs)
}

/// A DeviceClass of the test driver's devices that `cel` picks, and a template of one of them
/// taking `capacity` of it (or all of them: `All`), both named `name`.
fn class_and_template(name: &str, cel: &str, request: serde_json::Value) -> Vec<serde_json::Value> {
    let mut exactly = json!({"deviceClassName": name});
    exactly.as_object_mut().unwrap().extend(request.as_object().unwrap().clone());
    vec![
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{DRIVER}' && {cel}")}}]}}),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}}),
    ]
}

/// A busybox pod asking for one device through template `template`: kube-scheduler's, held to
/// `node`, or (with `model`) ours, queued, declaring its model and a checkpoint folder (folder
/// `ckpt` of this machine).
fn pod(
    name: &str,
    labels: serde_json::Value,
    template: &str,
    node: Option<&str>,
    model: Option<(&str, &std::path::Path)>,
) -> serde_json::Value {
    let mut labels = labels;
    let mut spec = json!({
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "local/busybox:1", "imagePullPolicy": "Never",
            "command": ["sleep", "3600"],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "claims": [{"name": "gpu"}]}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
    });
    let mut annotations = json!({});
    if let Some(node) = node {
        spec["nodeSelector"] = json!({"kubernetes.io/hostname": node});
    }
    if let Some((model, ckpt)) = model {
        spec["schedulerName"] = json!("wasmsched");
        labels["wasmsched.model"] = json!(model);
        annotations["wasmsched.checkpoint"] = json!("/ckpt");
        spec["containers"][0]["volumeMounts"] = json!([{"name": "ckpt", "mountPath": "/ckpt"}]);
        spec["volumes"] = json!([{"name": "ckpt", "hostPath": {"path": ckpt, "type": "Directory"}}]);
    }
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels, "annotations": annotations},
        "spec": spec})
}

/// What the simulator shows of each running job, by name: its GPU's index, its own GPU use,
/// and its GPU's memory in use.
fn figures(world: &World) -> BTreeMap<String, (u32, f32, u64)> {
    let s = world.snapshot_for(&mut Cursor::fresh());
    let mut out = BTreeMap::new();
    for (spec, state) in world.jobs() {
        let (Some(&gpu), Some(i)) = (state.gpus.first(), s.jobs.handle.iter().position(|&h| h == state.handle)) else {
            continue;
        };
        let memory = world.gpu_position(gpu).map_or(0, |at| s.gpus.memory_used_bytes[at]);
        out.insert(spec.name.clone(), (gpu.index, s.jobs.gpu_used_percent[i], memory));
    }
    out
}

/// dcgm-exporter's page for vm2's two GPUs: each one's use (the simulator's uses of the jobs on
/// it added up: the exporter measures a GPU, not a process), its memory, and a series per pod
/// on it.
fn page(gpus: &[(f32, u64, Vec<String>)]) -> String {
    let mut lines = Vec::new();
    for (metric, value) in [
        ("GPU_UTIL", &(|g: &(f32, u64, Vec<String>)| format!("{:.3}", g.0)) as &dyn Fn(&_) -> String),
        ("FB_USED", &|g: &(f32, u64, Vec<String>)| (g.1 / MIB).to_string()),
        ("FB_FREE", &|g: &(f32, u64, Vec<String>)| (16384 - g.1 / MIB).to_string()),
    ] {
        lines.push(format!("# TYPE DCGM_FI_DEV_{metric} gauge"));
        for (i, g) in gpus.iter().enumerate() {
            let base = format!(
                "gpu=\"{i}\",UUID=\"GPU-0c1d2e3f-4a5b-6c7d-8e9f-00000000000{i}\",device=\"nvidia{i}\",\
                 modelName=\"Tesla V100-SXM2-16GB\",Hostname=\"vm2\""
            );
            let holders: Vec<String> = match g.2.is_empty() {
                true => vec![base.clone()],
                false => {
                    g.2.iter().map(|p| format!("{base},container=\"main\",namespace=\"default\",pod=\"{p}\"")).collect()
                }
            };
            lines.extend(holders.iter().map(|labels| format!("DCGM_FI_DEV_{metric}{{{labels}}} {}", value(g))));
        }
    }
    lines.join("\n") + "\n"
}

/// The pod of `pods` that carries job `job` now (a copy carries its original's job name), not
/// being deleted.
fn carrying<'a>(pods: &'a [Pod], job: &str) -> Option<&'a Pod> {
    pods.iter().find(|p| {
        let name = p.annotations().get(wasmsched::backend::kubernetes::pod::JOB_NAME);
        p.metadata.deletion_timestamp.is_none() && name.map_or(p.name_any(), |j| j.clone()) == job
    })
}

/// The actions as names: job, kind, node, GPUs, share.
fn describe(world: &World, actions: &[wit::Action], prefix: &str) -> Vec<String> {
    let job = |a: &wit::Action| {
        let name = world.spec(a.job).map_or("?", |s| s.name.as_str());
        name.strip_prefix(prefix).unwrap_or(name).to_string()
    };
    let node = |n: NodeId| world.nodes().get(n.index()).map_or("?".into(), |n| n.name.clone());
    actions
        .iter()
        .map(|a| match &a.kind {
            wit::ActionKind::Place(p) => {
                let on: Vec<String> = p.nodes.iter().map(|e| format!("{}{:?}", node(e.node), e.gpus)).collect();
                format!("place {} on {} share={}", job(a), on.join("+"), p.share)
            }
            wit::ActionKind::SetGpuShare(s) => format!("share {} gpu {} {} %", job(a), s.gpu, s.percent),
            other => format!("{} {other:?}", job(a)),
        })
        .collect()
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn gacer_pairs_jobs_on_shared_devices_through_claims_and_decides_as_in_the_simulator() {
    let Some(c) = cluster::cluster() else {
        eprintln!("SKIPPED {}: no Kubernetes cluster", module_path!());
        return;
    };
    let _serial = cluster::serial();
    if devices_on_vm2(c).is_none() {
        eprintln!(
            "SKIPPED {}: the kit's DRA test driver publishes no devices; start the kit with \
             `K8S_DRA=4 ../shared/k8s/cluster up 2`",
            module_path!()
        );
        return;
    }
    c.reimport_images();
    let label = test_label("gacer");
    let _sweep = c.sweep(&label);

    // The driver's own devices, held by kube-scheduler's pods on both nodes.
    let plain = format!("wst-{label}-plain");
    let mut docs = class_and_template(&plain, "!device.allowMultipleAllocations", json!({"allocationMode": "All"}));
    let fillers = ["vm", "vm2"].map(|n| format!("wsf-{label}-{n}"));
    for (name, n) in fillers.iter().zip(["vm", "vm2"]) {
        docs.push(pod(name, json!({"wasmsched.filler": label}), &plain, Some(n), None));
    }
    let _plain = make(c, docs);
    c.wait(&label, "kube-scheduler's pods holding the driver's devices", Duration::from_secs(60), || {
        fillers.iter().all(|f| c.pod(f).and_then(|p| p.status?.phase).is_some_and(|p| p == "Running")).then_some(())
    });

    // Two devices on vm2 that several claims share while their 16 GiB last; each pod takes 4.
    let shared = format!("wst-{label}-shared");
    let devices: Vec<_> = (0..2)
        .map(|i| {
            json!({"name": format!("shared-{i}"), "nodeName": "vm2", "allowMultipleAllocations": true,
            "capacity": {"memory": {"value": "16Gi"}}})
        })
        .collect();
    let mut docs =
        vec![json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": shared},
        "spec": {"driver": DRIVER, "perDeviceNodeSelection": true,
            "pool": {"name": shared, "generation": 1, "resourceSliceCount": 1}, "devices": devices}})];
    docs.extend(class_and_template(
        &shared,
        "device.allowMultipleAllocations",
        json!({"capacity": {"requests": {"memory": "4Gi"}}}),
    ));
    let _shared = make(c, docs);

    // The exporter on vm2, serving the page the test writes.
    let dir = tempfile::tempdir().unwrap();
    let idle = vec![(0.0, 0, Vec::new()), (0.0, 0, Vec::new())];
    serve(dir.path(), &page(&idle));
    let _exporter = exporter(c, &label, "vm2", dir.path());

    // Our four pods, a second apart so that they arrive in the scenario's order.
    let prefix = format!("wsk-{label}-");
    let ckpt = tempfile::tempdir().unwrap();
    let mut ours = Vec::new();
    for (name, model) in JOBS {
        let declared = Some((model, ckpt.path()));
        let made = pod(&format!("{prefix}{name}"), json!({"wasmsched.test": label}), &shared, None, declared);
        ours.push(make(c, vec![made]));
        std::thread::sleep(Duration::from_millis(1100));
    }
    let mut k = Kubernetes::new(KubernetesConfig {
        kubeconfig: Some(c.kubeconfig.clone()),
        selector: format!("wasmsched.test={label}"),
        gpu_drivers: vec![DRIVER.into()],
        gpu_telemetry: Some(read_from(&label)),
        ..KubernetesConfig::default()
    })
    .unwrap();
    k.set_placer(wasmsched::backend::Placer::Policy);
    let mut world = World::new();
    let vm2 =
        c.wait(&label, "four jobs queued; vm2 with the two shared GPUs, vm with none", Duration::from_secs(60), || {
            step(&mut k, &mut world, 300);
            let (vm, vm2) = (node(&world, "vm")?, node(&world, "vm2")?);
            let gpus = |n: u32| world.nodes()[n as usize].gpu_memory_bytes.clone();
            let queued = JOBS.iter().all(|(j, _)| job_named(&world, &format!("{prefix}{j}")).is_some());
            (queued && gpus(vm).is_empty() && gpus(vm2) == [16 << 30, 16 << 30]).then_some(NodeId(vm2))
        });

    let rt = runtime();
    let gacer = || {
        Supervised::new(loaded("gacer"), "{}".into(), Limits::default(), Fallback::KeepLimits, Quarantine::default())
    };
    let (mut on_kit, mut on_sim) = (gacer(), gacer());
    let scenario = Scenario::from_toml_str("gacer-kit", SCENARIO).unwrap();
    // A busybox pod runs at once: no GPU job's start-up in the simulator either.
    let config = SimConfig { noise: 0.0, gpu_start_s: 0.0, ..SimConfig::default() };
    let mut sim = Simulator::new(&scenario.workload, config);
    sim.set_placer(wasmsched::backend::Placer::Policy);
    let mut sim_world = World::new();
    let mut served = String::new();
    let mut transcript = Vec::new();
    for tick in 1..=TICKS {
        sim.observe(&mut sim_world, tick * 1000);
        let want = figures(&sim_world);
        // The kit to the same state: what runs there runs here, on the same GPU, and the page
        // of the simulator's figures is read.
        c.wait(&label, &format!("tick {tick}: the kit as the simulator: {want:?}"), Duration::from_secs(90), || {
            step(&mut k, &mut world, 250);
            let pods = c.labelled(&label);
            let mut gpus = vec![(0.0f32, 0u64, Vec::new()), (0.0, 0, Vec::new())];
            let mut seen = BTreeMap::new();
            for (spec, state) in world.jobs() {
                let name = spec.name.strip_prefix(&prefix).unwrap_or(&spec.name).to_string();
                let &GpuSlot { node, index } = state.gpus.first()?;
                let &(sim_index, used, memory) = want.get(&name)?;
                let running = carrying(&pods, &spec.name)
                    .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))?;
                if node != vm2 || index != sim_index {
                    return None;
                }
                let g = gpus.get_mut(index as usize)?;
                (g.0, g.1) = (g.0 + used, memory);
                g.2.push(running.name_any());
                let weight = state.gpu_share_percent.map_or(100.0, f32::from);
                seen.insert(spec.name.clone(), (index, weight, state.gpu_used_percent));
            }
            if seen.len() != want.len() {
                return None;
            }
            let text = page(&gpus);
            if text != served {
                serve(dir.path(), &text);
                served = text;
            }
            let s = world.snapshot_for(&mut Cursor::fresh());
            let read = gpus.iter().enumerate().all(|(i, g)| {
                let at = world.gpu_position(GpuSlot { node: vm2, index: i as u32 });
                at.is_some_and(|at| s.gpus.memory_used_bytes[at] == g.1 / MIB * MIB)
            });
            // Each job's part of its GPU's use, by its share.
            let weights = |i: u32| seen.values().filter(|s| s.0 == i).map(|s| s.1).sum::<f32>();
            let used = seen.values().all(|&(i, w, u)| (u - gpus[i as usize].0 * w / weights(i)).abs() < 0.01);
            (read && used).then_some(())
        });

        let (decided_sim, decided_kit) = (on_sim.tick(rt, &sim_world), on_kit.tick(rt, &world));
        for d in [&decided_sim, &decided_kit] {
            assert!(d.failure.is_none() && d.rejected.is_empty(), "tick {tick}: {:?} {:?}", d.failure, d.rejected);
        }
        let (simulated, live) =
            (describe(&sim_world, &decided_sim.actions, ""), describe(&world, &decided_kit.actions, &prefix));
        assert_eq!(live, simulated, "tick {tick}: the kit's actions, then the simulator's");
        let errors = sim.apply(&decided_sim.actions, &mut sim_world);
        assert!(errors.is_empty(), "tick {tick}, simulator: {errors:?}");
        let mut errors = k.apply(&decided_kit.actions, &mut world);
        errors.extend(k.drain(&mut world, Duration::from_secs(120)));
        assert!(errors.is_empty(), "tick {tick}, kit: {errors:?}");
        if !live.is_empty() {
            eprintln!("tick {tick}: {}", live.join("; "));
            transcript.extend(live);
        }
    }
    for kind in ["place", "share=true", "share ", "Preempt"] {
        assert!(transcript.iter().any(|a| a.contains(kind)), "no {kind:?} among {transcript:?}");
    }

    // Every job runs on the device of its GPU, its claim carrying its share.
    step(&mut k, &mut world, 300);
    let pods = c.labelled(&label);
    for (spec, state) in world.jobs() {
        let p = carrying(&pods, &spec.name).unwrap_or_else(|| panic!("{}: no pod", spec.name));
        let claim = claim_of(c, &p.name_any()).unwrap_or_else(|| panic!("{}: no claim", spec.name));
        let index = state.gpus[0].index;
        assert_eq!(holding(&claim).0, [format!("{shared}/shared-{index}")], "{}: its GPU's device", spec.name);
        let allocation = claim.status.unwrap().allocation.unwrap().devices.unwrap();
        assert!(allocation.results.unwrap()[0].share_id.is_some(), "{}: a share of the device", spec.name);
        let config = allocation.config.unwrap_or_default();
        let mps = config.iter().find_map(|c| Some(c.opaque.as_ref()?.parameters.0.clone()));
        // A share of 100 is the whole GPU: no MPS limit to write. A capped pod may pin the 4 GiB
        // its claim takes of the device (`pinned-memory = "requested"`, the default).
        let want = state.gpu_share_percent.filter(|&p| p < 100);
        let want = want.map(|p| {
            json!({"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": p.to_string(), "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=4096M"})
        });
        assert_eq!(mps, want, "{}: its share in its allocation", spec.name);
    }
    drop(ours);
}
