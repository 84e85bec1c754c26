//! What the kubelet measures: its `/stats/summary`, one request per node every 10 s (sooner for
//! a pod not measured yet), read through the apiserver's node proxy or, where the apiserver
//! will not proxy (a node on loopback), from the kubelet itself. Parsing is pure and tested against a recorded summary.
//!
//! A pod's use is the sum of its containers' figures, which the kubelet has from the container
//! runtime and refreshes every few seconds from a container's start. The pod-level figures
//! (from the pod's cgroup) serve only where no container has any: on a kubelet measured here
//! they stayed at zero, stamped with the pod's start, for the first 18 s of a pod's life, and a
//! policy shown a job that uses no CPU judges it idle.

use std::collections::HashMap;

/// One pod's use, as a kubelet summary gives it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PodUse {
    /// Cumulative CPU time of the pod, core-nanoseconds, and when it was sampled (Unix ns).
    pub cpu: Option<(u64, u64)>,
    /// CPU use the kubelet averaged itself, nanocores (its own window).
    pub nano_cores: Option<u64>,
    /// Working-set memory, bytes.
    pub memory_bytes: Option<u64>,
}

#[derive(serde::Deserialize)]
struct Summary {
    #[serde(default)]
    pods: Vec<PodStats>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodStats {
    pod_ref: PodRef,
    cpu: Option<Cpu>,
    memory: Option<Memory>,
    #[serde(default)]
    containers: Vec<ContainerStats>,
}

#[derive(serde::Deserialize)]
struct ContainerStats {
    cpu: Option<Cpu>,
    memory: Option<Memory>,
}

#[derive(serde::Deserialize)]
struct PodRef {
    uid: String,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Cpu {
    time: Option<String>,
    usage_nano_cores: Option<u64>,
    usage_core_nano_seconds: Option<u64>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Memory {
    working_set_bytes: Option<u64>,
    usage_bytes: Option<u64>,
}

/// Every pod's use in a summary, by uid.
pub fn parse(text: &str) -> Result<HashMap<String, PodUse>, serde_json::Error> {
    let summary: Summary = serde_json::from_str(text)?;
    Ok(summary
        .pods
        .into_iter()
        .map(|p| {
            let containers = use_of(p.containers.iter().map(|c| (c.cpu.as_ref(), c.memory.as_ref())));
            let pod = use_of([(p.cpu.as_ref(), p.memory.as_ref())]);
            let used = PodUse {
                cpu: containers.cpu.or(pod.cpu),
                nano_cores: if containers.cpu.is_some() { containers.nano_cores } else { pod.nano_cores },
                memory_bytes: containers.memory_bytes.or(pod.memory_bytes),
            };
            (p.pod_ref.uid, used)
        })
        .collect())
}

/// The summed use of `parts` (a pod's containers, or the pod itself): cumulative CPU stamped
/// with the latest sample's time, where any part has a sample; memory where any part has it.
fn use_of<'a>(parts: impl IntoIterator<Item = (Option<&'a Cpu>, Option<&'a Memory>)>) -> PodUse {
    let mut total = PodUse { cpu: None, nano_cores: None, memory_bytes: None };
    for (cpu, memory) in parts {
        let at = cpu.and_then(|c| c.time.as_deref()).and_then(wasmsched_core::live::progress::unix_ns);
        if let Some((core_ns, at)) = cpu.and_then(|c| c.usage_core_nano_seconds).zip(at) {
            let (sum, latest) = total.cpu.unwrap_or((0, 0));
            total.cpu = Some((sum.saturating_add(core_ns), latest.max(at)));
        }
        if let Some(n) = cpu.and_then(|c| c.usage_nano_cores) {
            total.nano_cores = Some(total.nano_cores.unwrap_or(0).saturating_add(n));
        }
        if let Some(b) = memory.and_then(|m| m.working_set_bytes.or(m.usage_bytes)) {
            total.memory_bytes = Some(total.memory_bytes.unwrap_or(0).saturating_add(b));
        }
    }
    total
}

/// Mean CPU use in millicores between two cumulative samples (core-ns, Unix ns); None when the
/// samples are the same one or run backwards (a restarted pod).
pub fn millicores_between(then: (u64, u64), now: (u64, u64)) -> Option<u64> {
    let (used, wall) = (now.0.checked_sub(then.0)?, now.1.checked_sub(then.1)?);
    (wall > 0).then(|| (used as f64 / wall as f64 * 1000.0).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUMMARY: &str = r#"{
      "node": {"nodeName": "vm", "cpu": {"time": "2026-11-24T10:00:00Z", "usageNanoCores": 1}},
      "pods": [
        {"podRef": {"name": "a", "namespace": "default", "uid": "u-a"},
         "startTime": "2026-11-24T09:59:00Z",
         "cpu": {"time": "2026-11-24T10:00:01.500000000Z", "usageNanoCores": 950000000, "usageCoreNanoSeconds": 61000000000},
         "memory": {"time": "2026-11-24T10:00:01Z", "usageBytes": 9000000, "workingSetBytes": 8000000}},
        {"podRef": {"name": "b", "namespace": "default", "uid": "u-b"}},
        {"podRef": {"name": "c", "namespace": "default", "uid": "u-c"},
         "startTime": "2026-11-27T12:47:12Z",
         "containers": [
           {"name": "trainer", "startTime": "2026-11-27T12:47:13Z",
            "cpu": {"time": "2026-11-27T12:47:16Z", "usageNanoCores": 1629800187, "usageCoreNanoSeconds": 5864426983},
            "memory": {"time": "2026-11-27T12:47:16Z", "workingSetBytes": 30000000}},
           {"name": "sidecar", "startTime": "2026-11-27T12:47:13Z",
            "cpu": {"time": "2026-11-27T12:47:15Z", "usageNanoCores": 100000000, "usageCoreNanoSeconds": 135573017},
            "memory": {"time": "2026-11-27T12:47:15Z", "workingSetBytes": 2000000}}
         ],
         "cpu": {"time": "2026-11-27T12:47:12Z", "usageNanoCores": 0, "usageCoreNanoSeconds": 0},
         "memory": {"time": "2026-11-27T12:47:12Z", "workingSetBytes": 0}}
      ]
    }"#;

    #[test]
    fn a_summary_gives_each_pods_cumulative_cpu_and_working_set() {
        let pods = parse(SUMMARY).unwrap();
        let a = pods["u-a"];
        let (core_ns, at) = a.cpu.unwrap();
        assert_eq!(core_ns, 61_000_000_000);
        assert_eq!(at % 1_000_000_000, 500_000_000);
        assert_eq!((a.nano_cores, a.memory_bytes), (Some(950_000_000), Some(8_000_000)));
        assert_eq!(pods["u-b"], PodUse { cpu: None, nano_cores: None, memory_bytes: None }, "a pod not yet measured");
    }

    #[test]
    fn a_young_pods_use_is_its_containers_not_its_stale_cgroup() {
        // As a kubelet gave it 4 s after the pod started: the pod-level figures still zero,
        // stamped with the pod's start; the containers' fresh.
        let c = parse(SUMMARY).unwrap()["u-c"];
        let (core_ns, at) = c.cpu.unwrap();
        assert_eq!(core_ns, 5_864_426_983 + 135_573_017);
        assert_eq!(
            at,
            wasmsched_core::live::progress::unix_ns("2026-11-27T12:47:16Z").unwrap(),
            "the latest sample's time"
        );
        assert_eq!((c.nano_cores, c.memory_bytes), (Some(1_729_800_187), Some(32_000_000)));
    }

    #[test]
    fn cpu_use_is_the_difference_of_two_samples() {
        assert_eq!(millicores_between((1_000_000_000, 0), (2_500_000_000, 1_000_000_000)), Some(1500));
        assert_eq!(millicores_between((5, 10), (5, 10)), None, "the same sample twice");
        assert_eq!(millicores_between((9, 10), (5, 20)), None, "a restarted pod's counter");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(parse("<html>").is_err());
        assert!(parse("{}").unwrap().is_empty());
    }
}
