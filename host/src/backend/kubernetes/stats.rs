//! What the kubelet measures: its `/stats/summary`, one request per node per tick, read through
//! the apiserver's node proxy or, where the apiserver will not proxy (a node on loopback), from
//! the kubelet itself. Parsing is pure and tested against a recorded summary.

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
            let cpu = p.cpu.as_ref();
            let at = cpu.and_then(|c| c.time.as_deref()).and_then(crate::backend::progress::unix_ns);
            let used = PodUse {
                cpu: cpu.and_then(|c| c.usage_core_nano_seconds).zip(at),
                nano_cores: cpu.and_then(|c| c.usage_nano_cores),
                memory_bytes: p.memory.and_then(|m| m.working_set_bytes.or(m.usage_bytes)),
            };
            (p.pod_ref.uid, used)
        })
        .collect())
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
        {"podRef": {"name": "b", "namespace": "default", "uid": "u-b"}}
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
