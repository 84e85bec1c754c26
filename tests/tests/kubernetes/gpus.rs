//! GPU telemetry from dcgm-exporter (`[backend.gpu-telemetry]`) on the kit. The kit has no GPU,
//! so the exporter is one of our own: busybox's httpd serving, on dcgm-exporter's port, a page
//! in its exact format from a folder of this machine that the test rewrites (the kit's nodes
//! run here, so a hostPath is that folder). Node `vm` advertises two `nvidia.com/gpu`
//! (accounting only); the host binds a managed pod asking for one, and the page names that pod
//! on GPU 1, as a device plugin may choose. The host finds the exporter through a Service's
//! endpoints here (the GACER test finds its exporter by the pods' labels).

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use wasmsched::backend::kubernetes::gpus::GpuTelemetryConfig;
use wasmsched::backend::kubernetes::{Kubernetes, KubernetesConfig};
use wasmsched::world::{Cursor, GpuSlot, JobId, NodeId, World};

use crate::cluster::{self, Cluster};
use crate::{job_named, step, test_label};

/// One tick of the loop, ms of wall time (the backend's clock is the wall clock).
const TICK_MS: u64 = 1000;

/// dcgm-exporter's page for node `vm`'s two A100s: GPU 1 held by pod `pod` at `util` percent
/// and 30 GiB, GPU 0 idle; `extra` lines after the first sample.
fn page(pod: &str, util: u32, extra: &[&str]) -> String {
    let gpu = |i: u32, held: bool| {
        let holder =
            if held { format!("container=\"main\",namespace=\"default\",pod=\"{pod}\"") } else { String::new() };
        format!(
            "gpu=\"{i}\",UUID=\"GPU-5fd4ad4c-5b47-6e2c-4e0a-6b1f3b2a9c1{i}\",pci_bus_id=\"00000000:0{i}:00.0\",\
             device=\"nvidia{i}\",modelName=\"NVIDIA A100-SXM4-80GB\",Hostname=\"vm\",\
             DCGM_FI_DRIVER_VERSION=\"550.54.15\",{holder}"
        )
    };
    let mut lines = vec![
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).".to_string(),
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge".into(),
        format!("DCGM_FI_DEV_GPU_UTIL{{{}}} 0", gpu(0, false)),
    ];
    lines.extend(extra.iter().map(|l| l.to_string()));
    lines.push(format!("DCGM_FI_DEV_GPU_UTIL{{{}}} {util}", gpu(1, true)));
    for (metric, idle, held) in [("FB_USED", 0, 30720), ("FB_FREE", 81920, 51200)] {
        lines.push(format!("# TYPE DCGM_FI_DEV_{metric} gauge"));
        lines.push(format!("DCGM_FI_DEV_{metric}{{{}}} {idle}", gpu(0, false)));
        lines.push(format!("DCGM_FI_DEV_{metric}{{{}}} {held}", gpu(1, true)));
    }
    lines.join("\n") + "\n"
}

/// Write `text` as `dir`'s `metrics` page at once (renamed into place: httpd never serves half).
pub(crate) fn serve(dir: &Path, text: &str) {
    let part = dir.join("metrics.part");
    std::fs::write(&part, text).unwrap();
    std::fs::set_permissions(&part, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    std::fs::rename(part, dir.join("metrics")).unwrap();
}

/// An exporter of our own on node `node`, running when this returns: busybox's httpd serving,
/// on dcgm-exporter's port, the `metrics` page that [`serve`] writes in `dir` (opened to every
/// user here), the pod labelled `wasmsched.dcgm=<label>`.
pub(crate) fn exporter(c: &'static Cluster, label: &str, node: &str, dir: &Path) -> Created {
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let exporter = Created::new(
        c,
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("wsg-{label}-dcgm"), "labels": {"wasmsched.dcgm": label}},
            "spec": {
                "nodeName": node, "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "exporter", "image": "local/busybox:1", "imagePullPolicy": "Never",
                    "command": ["busybox", "httpd", "-f", "-p", "9400", "-h", "/srv"],
                    "volumeMounts": [{"name": "page", "mountPath": "/srv"}]}],
                "volumes": [{"name": "page", "hostPath": {"path": dir, "type": "Directory"}}],
            },
        }),
    );
    c.wait(label, "the exporter running", Duration::from_secs(60), || {
        c.pod(&exporter.1).and_then(|p| p.status?.phase).filter(|p| p == "Running")
    });
    exporter
}

/// Where the host finds the exporters [`exporter`] makes for test `label`.
pub(crate) fn read_from(label: &str) -> GpuTelemetryConfig {
    GpuTelemetryConfig {
        namespace: "default".into(),
        selector: format!("wasmsched.dcgm={label}"),
        ..GpuTelemetryConfig::default()
    }
}

/// A Service over the exporter pods of test `label`, its port 80 reaching their 9400; deleted
/// when dropped.
struct ExporterService(&'static Cluster, String);

impl ExporterService {
    fn new(c: &'static Cluster, label: &str) -> ExporterService {
        let name = format!("wsg-{label}-dcgm");
        let service: Service = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name},
            "spec": {"selector": {"wasmsched.dcgm": label}, "ports": [{"name": "metrics", "port": 80, "targetPort": 9400}]},
        }))
        .unwrap();
        let api: Api<Service> = Api::default_namespaced(c.client.clone());
        c.rt.block_on(api.create(&PostParams::default(), &service)).expect("the apiserver takes the Service");
        ExporterService(c, name)
    }
}

impl Drop for ExporterService {
    fn drop(&mut self) {
        let api: Api<Service> = Api::default_namespaced(self.0.client.clone());
        let _ = self.0.rt.block_on(api.delete(&self.1, &DeleteParams::default()));
    }
}

/// A pod that the test creates and that is deleted when this is dropped.
pub(crate) struct Created(&'static Cluster, String);

impl Created {
    fn new(c: &'static Cluster, pod: serde_json::Value) -> Created {
        let pod: Pod = serde_json::from_value(pod).unwrap();
        let created =
            c.rt.block_on(c.pods().create(&PostParams::default(), &pod)).expect("the apiserver creates the pod");
        Created(c, created.metadata.name.unwrap())
    }
}

impl Drop for Created {
    fn drop(&mut self) {
        let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
        let _ = self.0.rt.block_on(self.0.pods().delete(&self.1, &now));
    }
}

/// What a policy is shown of GPU `gpu` and job `job`: the GPU's utilisation and memory in use,
/// and the job's GPU use.
fn shown(world: &World, gpu: GpuSlot, job: JobId) -> Option<(f32, u64, f32)> {
    let s = world.snapshot_for(&mut Cursor::fresh());
    let at = world.gpu_position(gpu)?;
    let i = s.jobs.handle.iter().position(|&h| h == job)?;
    Some((s.gpus.utilisation_percent[at], s.gpus.memory_used_bytes[at], s.jobs.gpu_used_percent[i]))
}

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn gpu_use_from_dcgm_exporter_reaches_the_gpu_and_the_job_that_holds_it() {
    let Some(c) = cluster::cluster() else {
        eprintln!("SKIPPED {}: no Kubernetes cluster", module_path!());
        return;
    };
    let _serial = cluster::serial();
    c.reimport_images();
    let label = test_label("dcgm");
    let _sweep = c.sweep(&label);
    let _gpus = c.advertise_gpus("vm", 2);
    let dir = tempfile::tempdir().unwrap();
    let job_pod = format!("wsg-{label}-job");
    serve(dir.path(), &page(&job_pod, 37, &[]));
    let _exporter = exporter(c, &label, "vm", dir.path());
    let service = ExporterService::new(c, &label);
    let _job = Created::new(
        c,
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": job_pod, "labels": {"wasmsched.test": label}},
            "spec": {
                "schedulerName": "wasmsched", "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "main", "image": "local/busybox:1", "imagePullPolicy": "Never",
                    "command": ["sleep", "3600"],
                    "resources": {"requests": {"cpu": "50m", "memory": "16Mi"}, "limits": {"nvidia.com/gpu": "1"}}}],
            },
        }),
    );
    let mut k = Kubernetes::new(KubernetesConfig {
        kubeconfig: Some(c.kubeconfig.clone()),
        selector: format!("wasmsched.test={label}"),
        // Found through the Service's endpoints alone: the selector matches no pod, and the
        // port is the one the endpoints name (9400), not this.
        gpu_telemetry: Some(GpuTelemetryConfig {
            service: Some(service.1.clone()),
            selector: "wasmsched.dcgm=no-such-pod".into(),
            port: 1,
            ..read_from(&label)
        }),
        ..KubernetesConfig::default()
    })
    .unwrap();
    let mut world = World::new();

    // The host binds the pod (its default placement: node vm, the one with GPUs, its GPU 0 in the
    // host's book); within two ticks of its running, the page's figures are the policy's.
    let job = c.wait(&label, "the GPU pod bound and running as a job", Duration::from_secs(60), || {
        step(&mut k, &mut world, TICK_MS);
        job_named(&world, &job_pod).filter(|&j| world.state(j).is_some_and(|s| s.is_running()))
    });
    let vm = NodeId(world.nodes().iter().position(|n| n.name == "vm").unwrap() as u32);
    let gpu1 = GpuSlot { node: vm, index: 1 };
    let mut ticks = 0;
    while shown(&world, gpu1, job).is_none_or(|(util, _, used)| util != 37.0 || used != 37.0) && ticks < 2 {
        step(&mut k, &mut world, TICK_MS);
        ticks += 1;
    }
    assert_eq!(shown(&world, gpu1, job), Some((37.0, 30 << 30, 37.0)), "within two ticks of the pod running");
    let state = world.state(job).unwrap();
    assert_eq!(state.gpus, [gpu1], "the GPU the exporter names, not the host's first free one");
    assert_eq!(world.free_gpus(vm), [0], "so GPU 0 is free in the book");
    let node = &world.nodes()[vm.index()];
    assert_eq!(node.gpu_type, "NVIDIA-A100-SXM4-80GB", "the model, for a node without GFD's labels");
    assert_eq!(node.gpu_memory_bytes, [80 << 30, 80 << 30]);

    // The figure follows the page: read again within 10 s (and a tick to land), then with
    // garbage among its lines.
    for (util, extra) in [
        (81, &[][..]),
        (12, &["DCGM_FI_DEV_GPU_UTIL{gpu=\"1\" 55", "}}}} garbage", "DCGM_FI_DEV_FB_USED{gpu=\"x\"} 9"][..]),
    ] {
        serve(dir.path(), &page(&job_pod, util, extra));
        let changed = Instant::now();
        c.wait(&label, &format!("GPU 1 and the job at {util} %"), Duration::from_secs(25), || {
            step(&mut k, &mut world, TICK_MS);
            shown(&world, gpu1, job).filter(|&(u, _, used)| u == util as f32 && used == util as f32)
        });
        eprintln!("GPU use {util} % seen {:.1?} after the page changed", changed.elapsed());
    }
    assert_eq!(world.state(job).unwrap().gpus, [gpu1]);
}
