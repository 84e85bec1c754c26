//! The Sia run's API objects: the nodes of the simulator's `heterogeneous-64` cluster
//! (`lab/src/scenario.rs`, `Cluster::nodes`) with their GPU type, GPU memory and topology as
//! labels, and a job's `PodGroup` and pods, rigid or elastic ([`Elastic`]). Pure, tested here.

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::Value;

use super::super::manifests::{self, NODE_PREFIX, NodeShape, PodParts};
use super::workload::SiaJob;

/// The node label that names its GPUs' type (`kubernetes/src/pod.rs`, `GPU_TYPE_LABEL`).
pub const GPU_TYPE_LABEL: &str = "wasmsched.gpu-type";
/// The node label with each GPU's memory in MiB (GPU Feature Discovery's, as the host reads it).
pub const GPU_MEMORY_LABEL: &str = "nvidia.com/gpu.memory";
/// The coarser topology label the host reads by default (`[backend] topology`).
pub const BLOCK_LABEL: &str = "cloud.provider.com/topology-block";
/// The finer one: a rack per GPU type here.
pub const RACK_LABEL: &str = "cloud.provider.com/topology-rack";
/// The pod label that names a job's model (`core/src/declare.rs`, `docs/targets.md`).
pub const MODEL_LABEL: &str = "wasmsched.model";
/// The pod label with the batch sizes a job accepts (`docs/targets.md`): a rigid job's one, the
/// workload's; an elastic job's range.
pub const BATCH_SIZE_LABEL: &str = "wasmsched.batch-size";
/// The pod annotation with the GPU counts of the whole group an elastic job may run at: an
/// annotation, as a label value cannot hold commas (the host reads both, `docs/kubernetes.md`).
pub const GPU_COUNTS_ANNOTATION: &str = "wasmsched.gpu-counts";
/// The most GPU counts a job declares (`core/src/world.rs`, `MAX_GPU_COUNTS`).
const MAX_GPU_COUNTS: u32 = 64;
/// Memory each pod requests, GiB (and 1 CPU, and 1 GPU).
pub const POD_MEMORY_GIB: u32 = 2;

/// Nodes of one GPU type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeType {
    /// The type as policies see it (`t4`, `rtx`, `a100`).
    pub gpu_type: &'static str,
    /// How many nodes.
    pub count: u32,
    /// GPUs on each.
    pub gpus: u32,
    /// Memory of each GPU, GiB.
    pub gpu_memory_gib: u32,
}

/// Sia's heterogeneous cluster of 64 GPUs (SOSP'23, Table 3), as the simulator has it: six
/// nodes of 4 T4, three of 8 RTX 2080Ti, two of 8 A100.
pub const HETEROGENEOUS_64: [NodeType; 3] = [
    NodeType { gpu_type: "t4", count: 6, gpus: 4, gpu_memory_gib: 16 },
    NodeType { gpu_type: "rtx", count: 3, gpus: 8, gpu_memory_gib: 11 },
    NodeType { gpu_type: "a100", count: 2, gpus: 8, gpu_memory_gib: 40 },
];

/// The name of the `index`th node (from 0) of `gpu_type`: `scale-node-t4-0`.
pub fn node_name(gpu_type: &str, index: u32) -> String {
    format!("{NODE_PREFIX}{gpu_type}-{index}")
}

/// Every node of `types`, type by type (`scale-node-t4-0`, …): each the object with its
/// labels (the scale label, so that the harness's clean-up deletes it) and the merge patch of
/// its status (64 cores, 256 GiB, 110 pods, its GPUs, Ready as of `now_rfc3339`).
pub fn nodes(types: &[NodeType], now_rfc3339: &str) -> Vec<(Node, Value)> {
    let mut out = Vec::new();
    for t in types {
        let shape = NodeShape { cores: 64, memory_gib: 256, pods: 110, gpus: t.gpus };
        let status = manifests::node_status(shape, now_rfc3339);
        for i in 0..t.count {
            let labels = [
                (GPU_TYPE_LABEL, t.gpu_type.to_owned()),
                (GPU_MEMORY_LABEL, (t.gpu_memory_gib * 1024).to_string()),
                (BLOCK_LABEL, "block-0".to_owned()),
                (RACK_LABEL, format!("rack-{}", t.gpu_type)),
            ];
            out.push((manifests::labelled_node(&node_name(t.gpu_type, i), &labels), status.clone()));
        }
    }
    out
}

/// The GPUs of `types` together.
pub fn total_gpus(types: &[NodeType]) -> u32 {
    types.iter().map(|t| t.count * t.gpus).sum()
}

/// What an elastic job declares, as the simulator's `elastic_scaling` has it
/// (`sim/src/lib.rs`): one GPU up to as many as its model's largest measured batch
/// feeds at the smallest per-GPU batch (at most `MAX_GPU_COUNTS`, 64), at any batch size between
/// its model's smallest and largest measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Elastic {
    /// The most GPUs of the group together; it may run at 1 to this many.
    pub most: u32,
    /// The smallest global batch size.
    pub batch_min: u32,
    /// The largest.
    pub batch_max: u32,
}

impl Elastic {
    /// The scaling of a job of `application` (Sia's model names are the goodput crate's:
    /// `bert`, `cifar10`, `deepspeech2`, `imagenet`, `ncf`, `yolov3`); None for a model it has
    /// not measured, which stays rigid.
    pub fn of(application: &str) -> Option<Elastic> {
        let model = wasmsched_goodput::Model::parse(application)?;
        let most = model.most_gpus_fed().min(MAX_GPU_COUNTS);
        Some(Elastic { most, batch_min: model.default_batch_size(), batch_max: model.max_batch_size() })
    }

    /// Its `wasmsched.gpu-counts`: `1,2,…,most`.
    pub fn gpu_counts(&self) -> String {
        (1..=self.most).map(|n| n.to_string()).collect::<Vec<_>>().join(",")
    }

    /// Its `wasmsched.batch-size`: `min-max`.
    pub fn batch_sizes(&self) -> String {
        format!("{}-{}", self.batch_min, self.batch_max)
    }
}

/// The job's upstream `PodGroup` (`scheduling.k8s.io/v1alpha2`): a gang of all its pods.
pub fn pod_group(job: &SiaJob, namespace: &str) -> Value {
    manifests::named_pod_group(&job.name, namespace, job.replicas)
}

/// Where each pod says it checkpoints (`wasmsched.checkpoint`): a folder on a hostPath volume,
/// which outlives the pod, so that the host carries out Sia's preemptions (no kubelet ever
/// mounts it).
const CHECKPOINT: &str = "/ckpt";

/// The job's pods, for `scheduler`: one GPU, 1 CPU and [`POD_MEMORY_GIB`] each, naming its
/// `PodGroup`, declaring its model and batch size (its batch range and GPU counts when
/// `elastic`), and a checkpoint folder on a volume that outlives them.
pub fn pods(job: &SiaJob, namespace: &str, scheduler: &str, elastic: Option<Elastic>) -> Vec<Pod> {
    let batch = elastic.map_or_else(|| job.batch_size.to_string(), |e| e.batch_sizes());
    let labels = [(MODEL_LABEL, job.application.clone()), (BATCH_SIZE_LABEL, batch)];
    (0..job.replicas)
        .map(|r| {
            let mut pod = manifests::pod_of(&PodParts {
                name: job.pod_name(r),
                namespace,
                scheduler,
                labels: &labels,
                memory_gib: POD_MEMORY_GIB,
                gpus: 1,
                group: Some(job.name.clone()),
            });
            checkpointed(&mut pod, &job.name);
            if let Some(e) = elastic {
                let annotations = pod.metadata.annotations.get_or_insert_with(Default::default);
                annotations.insert(GPU_COUNTS_ANNOTATION.into(), e.gpu_counts());
            }
            pod
        })
        .collect()
}

/// Give `pod` the checkpoint folder [`CHECKPOINT`], on a hostPath volume of job `job`'s.
fn checkpointed(pod: &mut Pod, job: &str) {
    use k8s_openapi::api::core::v1::{HostPathVolumeSource, Volume, VolumeMount};
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("wasmsched.checkpoint".into(), CHECKPOINT.into());
    let Some(spec) = pod.spec.as_mut() else { return };
    spec.volumes.get_or_insert_with(Vec::new).push(Volume {
        name: "ckpt".into(),
        host_path: Some(HostPathVolumeSource {
            path: format!("/tmp/wasmsched-sia/{job}"),
            type_: Some("DirectoryOrCreate".into()),
        }),
        ..Volume::default()
    });
    if let Some(c) = spec.containers.first_mut() {
        c.volume_mounts.get_or_insert_with(Vec::new).push(VolumeMount {
            name: "ckpt".into(),
            mount_path: CHECKPOINT.into(),
            ..VolumeMount::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubernetes::manifests::{MANAGED_LABEL, NOT_READY_TAINT, SCALE_LABEL};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn job() -> SiaJob {
        SiaJob {
            name: "deepspeech2-1".into(),
            arrival_s: 110.0,
            application: "deepspeech2".into(),
            replicas: 6,
            batch_size: 320,
            line: 3,
        }
    }

    #[test]
    fn the_cluster_is_heterogeneous_64_with_types_memory_and_racks_as_labels() {
        let nodes = nodes(&HETEROGENEOUS_64, "2026-01-01T00:00:00Z");
        assert_eq!((nodes.len(), total_gpus(&HETEROGENEOUS_64)), (11, 64));
        let names: Vec<String> = nodes.iter().map(|(n, _)| n.metadata.name.clone().unwrap()).collect();
        assert_eq!(names[0], "scale-node-t4-0");
        assert_eq!(names[6], "scale-node-rtx-0");
        assert_eq!(names[10], "scale-node-a100-1");
        let (a100, status) = &nodes[10];
        let labels = a100.metadata.labels.clone().unwrap();
        assert_eq!(labels[SCALE_LABEL], "true");
        assert_eq!(labels[GPU_TYPE_LABEL], "a100");
        assert_eq!(labels[GPU_MEMORY_LABEL], "40960");
        assert_eq!(labels[BLOCK_LABEL], "block-0");
        assert_eq!(labels[RACK_LABEL], "rack-a100");
        let node: Node =
            serde_json::from_value(serde_json::json!({ "metadata": {}, "status": status["status"] })).unwrap();
        let alloc = node.status.unwrap().allocatable.unwrap();
        assert_eq!(alloc["nvidia.com/gpu"], Quantity("8".into()));
        assert_eq!((alloc["cpu"].clone(), alloc["pods"].clone()), (Quantity("64".into()), Quantity("110".into())));
        let t4 = nodes[0].0.metadata.labels.clone().unwrap();
        assert_eq!((t4[GPU_MEMORY_LABEL].as_str(), t4[RACK_LABEL].as_str()), ("16384", "rack-t4"));
    }

    #[test]
    fn a_job_is_a_gang_of_one_gpu_pods_naming_its_group_model_and_batch_size() {
        let group = pod_group(&job(), "ns-s");
        assert_eq!(group["metadata"]["name"], "deepspeech2-1");
        assert_eq!(group["spec"]["schedulingPolicy"]["gang"]["minCount"], 6);
        let pods = pods(&job(), "ns-s", "wasmsched", None);
        assert_eq!(pods.len(), 6);
        let p = &pods[5];
        assert_eq!(p.metadata.name.as_deref(), Some("deepspeech2-1-5"));
        assert_eq!(p.metadata.namespace.as_deref(), Some("ns-s"));
        let labels = p.metadata.labels.clone().unwrap();
        assert_eq!(labels[MANAGED_LABEL], "true");
        assert_eq!(labels[MODEL_LABEL], "deepspeech2");
        assert_eq!(labels[BATCH_SIZE_LABEL], "320");
        assert!(!labels.contains_key(SCALE_LABEL), "the host warns about wasmsched. keys it does not read");
        let annotations = p.metadata.annotations.clone().unwrap();
        assert_eq!(annotations["wasmsched.checkpoint"], "/ckpt", "a preemption keeps its progress");
        assert!(!annotations.contains_key(GPU_COUNTS_ANNOTATION), "rigid");
        let spec = p.spec.clone().unwrap();
        let volume = &spec.volumes.as_ref().unwrap()[0];
        assert_eq!(volume.host_path.as_ref().map(|h| h.path.as_str()), Some("/tmp/wasmsched-sia/deepspeech2-1"));
        assert_eq!(spec.containers[0].volume_mounts.as_ref().unwrap()[0].mount_path, "/ckpt");
        assert_eq!(spec.scheduler_name.as_deref(), Some("wasmsched"));
        assert_eq!(spec.scheduling_group.unwrap().pod_group_name.as_deref(), Some("deepspeech2-1"));
        assert_eq!(spec.node_selector.unwrap()[SCALE_LABEL], "true");
        assert_eq!(spec.tolerations.unwrap()[0].key.as_deref(), Some(NOT_READY_TAINT));
        let resources = spec.containers[0].resources.clone().unwrap();
        let (requests, limits) = (resources.requests.unwrap(), resources.limits.unwrap());
        assert_eq!(requests["nvidia.com/gpu"], Quantity("1".into()));
        assert_eq!(limits["nvidia.com/gpu"], Quantity("1".into()));
        assert_eq!(
            (requests["cpu"].clone(), requests["memory"].clone()),
            (Quantity("1".into()), Quantity("2Gi".into()))
        );
    }

    #[test]
    fn an_elastic_job_declares_its_models_gpu_counts_as_an_annotation_and_its_batch_range() {
        // As the simulator's `elastic_scaling`: every measured model's largest batch feeds 64 GPUs
        // or more at its smallest per-GPU batch (bert 384 / 4, deepspeech2 640 / 10, …).
        let ranges: Vec<(&str, u32, u32, u32)> = wasmsched_goodput::Model::ALL
            .iter()
            .map(|m| {
                let e = Elastic::of(m.name()).unwrap();
                (m.name(), e.most, e.batch_min, e.batch_max)
            })
            .collect();
        assert_eq!(
            ranges,
            [
                ("bert", 64, 12, 384),
                ("cifar10", 64, 128, 4096),
                ("deepspeech2", 64, 20, 640),
                ("imagenet", 64, 200, 12800),
                ("ncf", 64, 256, 32768),
                ("yolov3", 64, 8, 512),
            ]
        );
        assert_eq!(Elastic::of("gpt2"), None, "an unmeasured model stays rigid");
        let e = Elastic { most: 3, batch_min: 20, batch_max: 640 };
        assert_eq!(e.gpu_counts(), "1,2,3");
        let pods = pods(&job(), "ns-s", "wasmsched", Elastic::of("deepspeech2"));
        assert_eq!(pods.len(), 6, "placed first as the workload has it");
        for p in &pods {
            let labels = p.metadata.labels.clone().unwrap();
            assert_eq!(labels[BATCH_SIZE_LABEL], "20-640");
            assert!(!labels.contains_key(GPU_COUNTS_ANNOTATION), "a label value cannot hold commas");
            let counts = p.metadata.annotations.clone().unwrap()[GPU_COUNTS_ANNOTATION].clone();
            assert!(counts.starts_with("1,2,3,") && counts.ends_with(",63,64"), "{counts}");
        }
    }
}
