//! What NVIDIA's dcgm-exporter says of a node's GPUs: its `/metrics` page, in the Prometheus
//! text format (read by the `prometheus-parse` crate), made into one [`Gpu`] per GPU index.
//!
//! The series read: `DCGM_FI_DEV_GPU_UTIL` (percent), else `DCGM_FI_PROF_SM_ACTIVE` (a ratio,
//! times 100) for the utilisation; `DCGM_FI_DEV_FB_USED`, `DCGM_FI_DEV_FB_FREE` and
//! `DCGM_FI_DEV_FB_RESERVED` (MiB) for the memory; the labels `gpu` (the index), `UUID`,
//! `modelName`, and `namespace` and `pod` for the pod that holds the GPU. GPU_UTIL is preferred:
//! it is the figure NVML's `utilization.gpu` gives, which the Docker backend reads, so a policy
//! sees the same quantity on both backends; SM_ACTIVE (a profiling counter, finer but not in
//! every counter set) stands in where GPU_UTIL is not exported. A MIG instance's series (label
//! `GPU_I_ID`) are not read: the world has whole GPUs only.
//!
//! Each line is read on its own: a line that is not a sample (`# TYPE` lines included, so a
//! stray one cannot change how the crate reads the lines after it) is left out, and a sample of
//! a series read here with no GPU index or a value out of range is counted in
//! [`Reading::bad_lines`] and skipped; the rest of the page is used.

use std::collections::BTreeMap;

/// Utilisation in percent.
const GPU_UTIL: &str = "DCGM_FI_DEV_GPU_UTIL";
/// The share of SMs busy, 0 to 1.
const SM_ACTIVE: &str = "DCGM_FI_PROF_SM_ACTIVE";
/// Frame buffer memory used, free and reserved by the driver, MiB.
const FB_USED: &str = "DCGM_FI_DEV_FB_USED";
const FB_FREE: &str = "DCGM_FI_DEV_FB_FREE";
const FB_RESERVED: &str = "DCGM_FI_DEV_FB_RESERVED";

const MIB: f64 = (1u64 << 20) as f64;

/// A pod by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// One GPU as the exporter reports it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Gpu {
    /// Its index on the node (label `gpu`).
    pub index: u32,
    /// Its utilisation, percent: `DCGM_FI_DEV_GPU_UTIL`, else `DCGM_FI_PROF_SM_ACTIVE` × 100.
    pub utilisation_percent: Option<f32>,
    /// Its memory in use, bytes.
    pub memory_used_bytes: Option<u64>,
    /// Its memory in all, bytes (used, free and reserved): None unless used and free are known.
    pub memory_total_bytes: Option<u64>,
    /// Its UUID (label `UUID`); empty when not given.
    pub uuid: String,
    /// Its model (label `modelName`); empty when not given.
    pub model: String,
    /// The pods that hold it (labels `namespace` and `pod`), usually one; none when idle.
    pub holders: Vec<PodRef>,
}

/// A page read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reading {
    /// Every GPU named, by index.
    pub gpus: Vec<Gpu>,
    /// The lines that were neither a sample, a comment nor empty, and the samples of the series
    /// read here that were refused (no GPU index, a value out of range).
    pub bad_lines: usize,
}

/// What one GPU's series said, before they are put together.
#[derive(Default)]
struct Figures {
    gpu: Gpu,
    util: Option<f64>,
    sm_active: Option<f64>,
    used: Option<f64>,
    free: Option<f64>,
    reserved: Option<f64>,
}

/// The GPUs that `text`, a dcgm-exporter page, reports; never fails: bad lines are counted.
pub fn parse(text: &str) -> Reading {
    let mut gpus: BTreeMap<u32, Figures> = BTreeMap::new();
    let mut bad_lines = 0;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let one = prometheus_parse::Scrape::parse(std::iter::once(Ok(line.to_string())));
        let Some(sample) = one.ok().and_then(|s| s.samples.into_iter().next()) else {
            bad_lines += 1;
            continue;
        };
        if !matches!(sample.metric.as_str(), GPU_UTIL | SM_ACTIVE | FB_USED | FB_FREE | FB_RESERVED) {
            continue;
        }
        let label = |key: &str| sample.labels.get(key).map(str::trim).filter(|v| !v.is_empty());
        if label("GPU_I_ID").is_some() {
            continue;
        }
        let (Some(index), Some(value)) = (label("gpu").and_then(|g| g.parse::<u32>().ok()), value_of(&sample)) else {
            bad_lines += 1;
            continue;
        };
        let in_range = match sample.metric.as_str() {
            GPU_UTIL => value <= 100.0,
            SM_ACTIVE => value <= 1.0,
            _ => true,
        };
        if !in_range {
            bad_lines += 1;
            continue;
        }
        let f =
            gpus.entry(index).or_insert_with(|| Figures { gpu: Gpu { index, ..Gpu::default() }, ..Figures::default() });
        let figure = match sample.metric.as_str() {
            GPU_UTIL => &mut f.util,
            SM_ACTIVE => &mut f.sm_active,
            FB_USED => &mut f.used,
            FB_FREE => &mut f.free,
            _ => &mut f.reserved,
        };
        *figure = Some(value);
        let g = &mut f.gpu;
        for (field, key) in [(&mut g.uuid, "UUID"), (&mut g.model, "modelName")] {
            if let Some(v) = label(key) {
                v.clone_into(field);
            }
        }
        if let Some(name) = label("pod") {
            let pod = PodRef { namespace: label("namespace").unwrap_or_default().into(), name: name.into() };
            if !g.holders.contains(&pod) {
                g.holders.push(pod);
            }
        }
    }
    Reading { gpus: gpus.into_values().map(Figures::into_gpu).collect(), bad_lines }
}

/// A sample's value when it is a finite number, not negative.
fn value_of(sample: &prometheus_parse::Sample) -> Option<f64> {
    use prometheus_parse::Value;
    let v = match sample.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
        Value::Histogram(_) | Value::Summary(_) => return None,
    };
    (v.is_finite() && v >= 0.0).then_some(v)
}

impl Figures {
    fn into_gpu(self) -> Gpu {
        let bytes = |mib: f64| (mib * MIB) as u64;
        let total = match (self.used, self.free) {
            (Some(used), Some(free)) => Some(bytes(used + free + self.reserved.unwrap_or(0.0))),
            _ => None,
        };
        Gpu {
            utilisation_percent: self.util.or(self.sm_active.map(|r| r * 100.0)).map(|p| p as f32),
            memory_used_bytes: self.used.map(bytes),
            memory_total_bytes: total,
            ..self.gpu
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A page as dcgm-exporter 3.3 writes it with the GPU Operator: two A100s, the first held
    /// by pod `job-1`, the second idle.
    const PAGE: &str = r#"# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-5fd4ad4c-5b47-6e2c-4e0a-6b1f3b2a9c11",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.54.15",container="trainer",namespace="default",pod="job-1"} 1410
DCGM_FI_DEV_SM_CLOCK{gpu="1",UUID="GPU-0b2c1f3e-1111-2222-3333-444455556666",pci_bus_id="00000000:0F:00.0",device="nvidia1",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.54.15"} 210
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-5fd4ad4c-5b47-6e2c-4e0a-6b1f3b2a9c11",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.54.15",container="trainer",namespace="default",pod="job-1"} 87
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-0b2c1f3e-1111-2222-3333-444455556666",pci_bus_id="00000000:0F:00.0",device="nvidia1",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.54.15",container="",namespace="",pod=""} 0
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-5fd4ad4c-5b47-6e2c-4e0a-6b1f3b2a9c11",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.54.15",container="trainer",namespace="default",pod="job-1"} 50407
DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-0b2c1f3e-1111-2222-3333-444455556666",pci_bus_id="00000000:0F:00.0",device="nvidia1",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.54.15"} 81037
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-5fd4ad4c-5b47-6e2c-4e0a-6b1f3b2a9c11",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.54.15",container="trainer",namespace="default",pod="job-1"} 30512
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-0b2c1f3e-1111-2222-3333-444455556666",pci_bus_id="00000000:0F:00.0",device="nvidia1",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.54.15"} 0
# HELP DCGM_FI_DEV_FB_RESERVED Framebuffer memory reserved (in MiB).
# TYPE DCGM_FI_DEV_FB_RESERVED gauge
DCGM_FI_DEV_FB_RESERVED{gpu="0",UUID="GPU-5fd4ad4c-5b47-6e2c-4e0a-6b1f3b2a9c11",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.54.15",container="trainer",namespace="default",pod="job-1"} 581
DCGM_FI_DEV_FB_RESERVED{gpu="1",UUID="GPU-0b2c1f3e-1111-2222-3333-444455556666",pci_bus_id="00000000:0F:00.0",device="nvidia1",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.54.15"} 581
"#;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_real_page_gives_each_gpus_use_memory_model_and_holder() {
        let r = parse(PAGE);
        assert_eq!(r.bad_lines, 0);
        assert_eq!(r.gpus.len(), 2);
        let (held, idle) = (&r.gpus[0], &r.gpus[1]);
        assert_eq!((held.index, held.utilisation_percent), (0, Some(87.0)));
        assert_eq!(held.memory_used_bytes, Some(30512 * MIB));
        assert_eq!(held.memory_total_bytes, Some((30512 + 50407 + 581) * MIB), "81500 MiB: an 80 GB card");
        assert_eq!(held.uuid, "GPU-5fd4ad4c-5b47-6e2c-4e0a-6b1f3b2a9c11");
        assert_eq!(held.model, "NVIDIA A100-SXM4-80GB");
        assert_eq!(held.holders, [PodRef { namespace: "default".into(), name: "job-1".into() }]);
        assert_eq!((idle.index, idle.utilisation_percent, idle.memory_used_bytes), (1, Some(0.0), Some(0)));
        assert!(idle.holders.is_empty(), "empty pod labels name no pod");
    }

    #[test]
    fn sm_active_stands_in_for_gpu_util_only_where_that_is_missing() {
        let both = "DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\"} 0.25\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 90\n";
        assert_eq!(parse(both).gpus[0].utilisation_percent, Some(90.0));
        let sm = "DCGM_FI_PROF_SM_ACTIVE{gpu=\"3\",modelName=\"NVIDIA H100 80GB HBM3\"} 0.25\n";
        let r = parse(sm);
        assert_eq!((r.gpus[0].index, r.gpus[0].utilisation_percent), (3, Some(25.0)));
        assert_eq!(r.gpus[0].memory_total_bytes, None, "no memory series: no total");
    }

    #[test]
    fn bad_samples_are_counted_and_skipped_and_the_rest_is_used() {
        let page = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 55\n\
                    DCGM_FI_DEV_GPU_UTIL{gpu=\"x\"} 10\n\
                    DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-1\"} 10\n\
                    DCGM_FI_DEV_GPU_UTIL{gpu=\"1\"} 250\n\
                    DCGM_FI_DEV_FB_USED{gpu=\"1\"} -5\n\
                    DCGM_FI_DEV_FB_USED{gpu=\"1\"} NaN\n\
                    DCGM_FI_DEV_GPU_UTIL{gpu=\"1\"} many\n\
                    {{{ not a line at all\n\
                    DCGM_FI_DEV_FB_USED{gpu=\"0\"} 100\n\
                    DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",GPU_I_ID=\"1\",GPU_I_PROFILE=\"1g.10gb\"} 3\n\
                    other_metric{gpu=\"nope\"} 1\n";
        let r = parse(page);
        assert_eq!(r.bad_lines, 7);
        assert_eq!(r.gpus.len(), 1, "{:?}", r.gpus);
        assert_eq!(r.gpus[0].utilisation_percent, Some(55.0), "a MIG instance's series is not the GPU's");
        assert_eq!(r.gpus[0].memory_used_bytes, Some(100 * MIB));
    }

    #[test]
    fn a_stray_type_line_does_not_change_how_later_lines_are_read() {
        let page = "# TYPE DCGM_FI_DEV_GPU_UTIL histogram\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 42\n";
        assert_eq!(parse(page).gpus[0].utilisation_percent, Some(42.0));
    }

    /// A line of any text but a line break.
    fn garbage() -> impl Strategy<Value = String> {
        prop_oneof![
            "[^\n\r]{0,80}",
            "DCGM_FI_DEV_(GPU_UTIL|FB_USED|FB_FREE)[{}=\",a-z0-9 #]{0,40}",
            "# (TYPE|HELP) DCGM_FI_DEV_(GPU_UTIL|FB_USED) [a-z ]{0,20}",
        ]
    }

    proptest! {
        #[test]
        fn garbage_lines_anywhere_never_panic_nor_change_the_good_lines(
            garbage in proptest::collection::vec((0..=8usize, garbage()), 0..24),
            util in 0u32..=100,
            used in 0u64..100_000,
        ) {
            let good = [
                format!("DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",UUID=\"GPU-a\",modelName=\"T4\",namespace=\"ns\",pod=\"p\"}} {util}"),
                format!("DCGM_FI_DEV_FB_USED{{gpu=\"0\",UUID=\"GPU-a\",modelName=\"T4\",namespace=\"ns\",pod=\"p\"}} {used}"),
                "DCGM_FI_DEV_FB_FREE{gpu=\"0\",UUID=\"GPU-a\",modelName=\"T4\",namespace=\"ns\",pod=\"p\"} 1000".to_string(),
            ];
            let mut lines: Vec<String> = good.to_vec();
            for (at, line) in garbage {
                // Garbage that happens to be a sample of GPU 0 is not garbage (the crate reads
                // `gpu=0` and `gpu= "0"` as well).
                if line.replace([' ', '"'], "").contains("gpu=0") {
                    continue;
                }
                lines.insert(at.min(lines.len()), line);
            }
            let r = parse(&lines.join("\n"));
            let gpu = r.gpus.iter().find(|g| g.index == 0).expect("GPU 0 is read");
            prop_assert_eq!(gpu.utilisation_percent, Some(util as f32));
            prop_assert_eq!(gpu.memory_used_bytes, Some(used * MIB));
            prop_assert_eq!(gpu.memory_total_bytes, Some((used + 1000) * MIB));
            prop_assert_eq!(&gpu.holders, &[PodRef { namespace: "ns".into(), name: "p".into() }]);
            prop_assert_eq!((gpu.uuid.as_str(), gpu.model.as_str()), ("GPU-a", "T4"));
        }

        #[test]
        fn any_text_is_read_without_panicking(text in "(?s).{0,400}") {
            let r = parse(&text);
            prop_assert!(r.bad_lines <= text.lines().count());
        }
    }
}
