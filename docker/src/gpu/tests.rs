use std::collections::BTreeMap;

#[cfg(feature = "nvml")]
use nvml_wrapper::enums::device::UsedGpuMemory;
#[cfg(feature = "nvml")]
use nvml_wrapper::struct_wrappers::device::{ProcessInfo, ProcessUtilizationSample};
use serde::Deserialize;

use super::*;

/// A 2-GPU host: pids 41230 and 41388 in container A on GPU 0 (with per-process utilisation),
/// 52017 in container B on GPU 1 (without), 3121 a host process on GPU 1.
const TWO_GPUS: &str = include_str!("fixtures/two-gpus.json");
/// `/proc/<pid>/cgroup` of those four processes on the same host booted with cgroup v1, and v2.
const PROC_CGROUP_V1: &str = include_str!("fixtures/proc-cgroup-v1.json");
const PROC_CGROUP_V2: &str = include_str!("fixtures/proc-cgroup-v2.json");
/// Cgroup files of Docker's and others' processes, each with the container it belongs to.
const CGROUP_FORMS: &str = include_str!("fixtures/cgroup-forms.json");

const A: &str = "34674cebfc87fcd3b2350b38dc916cff84101f23ca28e3f0b8fc660d347e2f5b";
const B: &str = "a3182d61679ed04717f78f614126769300401ed185ddef23ce4b08a83107be00";

#[derive(Deserialize)]
struct Form {
    form: String,
    cgroup: String,
    container: Option<String>,
}

fn two_gpus() -> GpuSample {
    serde_json::from_str(TWO_GPUS).expect("two-gpus.json is a GpuSample")
}

/// A resolver over recorded cgroup files, through a real `ProcCgroups` on a temporary `/proc`.
fn proc_from(fixture: &str) -> (tempfile::TempDir, ProcCgroups) {
    let files: BTreeMap<u32, String> = serde_json::from_str(fixture).expect("pid -> cgroup text");
    let root = tempfile::tempdir().expect("temporary directory");
    for (pid, text) in files {
        let dir = root.path().join(pid.to_string());
        std::fs::create_dir(&dir).expect("pid directory");
        std::fs::write(dir.join("cgroup"), text).expect("cgroup file");
    }
    let cgroups = ProcCgroups { root: root.path().to_owned() };
    (root, cgroups)
}

fn process(pid: u32, gpu: u32, memory_used_bytes: Option<u64>, sm_percent: Option<u32>) -> GpuProcess {
    GpuProcess { pid, gpu, memory_used_bytes, sm_percent }
}

fn gpu_shares_sum(attribution: &Attribution, gpu: u32) -> f32 {
    let containers = attribution.containers.values().filter(|u| u.gpu == gpu);
    containers.chain(attribution.unattributed.iter().filter(|u| u.gpu == gpu)).map(|u| u.utilisation_percent).sum()
}

#[test]
fn container_of_finds_docker_ids_in_every_cgroup_form_and_none_elsewhere() {
    let forms: Vec<Form> = serde_json::from_str(CGROUP_FORMS).expect("cgroup-forms.json");
    assert!(forms.iter().any(|f| f.container.is_some()) && forms.iter().any(|f| f.container.is_none()));
    for form in forms {
        assert_eq!(container_of(&form.cgroup), form.container, "{}", form.form);
    }
}

#[test]
fn proc_cgroups_reads_the_pid_file_and_misses_exited_processes() {
    let (_root, cgroups) = proc_from(PROC_CGROUP_V1);
    assert_eq!(cgroups.container(41230).as_deref(), Some(A));
    assert_eq!(cgroups.container(52017).as_deref(), Some(B));
    assert_eq!(cgroups.container(3121), None);
    assert_eq!(cgroups.container(99999), None, "a pid with no directory has exited");
    assert_eq!(ProcCgroups::default().root, PathBuf::from("/proc"));
}

#[test]
fn a_recorded_sample_reads_back_unchanged() {
    let sample = two_gpus();
    assert_eq!((sample.gpus.len(), sample.processes.len()), (2, 4));
    let again: GpuSample = serde_json::from_str(&serde_json::to_string(&sample).unwrap()).unwrap();
    assert_eq!(again, sample);
}

#[test]
fn attribution_is_the_same_on_cgroup_v1_and_v2() {
    let sample = two_gpus();
    let (_v1, v1) = proc_from(PROC_CGROUP_V1);
    let (_v2, v2) = proc_from(PROC_CGROUP_V2);
    let by_v1 = attribute(&sample, |pid| v1.container(pid));
    assert_eq!(by_v1, attribute(&sample, |pid| v2.container(pid)));
    assert_eq!(by_v1.containers.keys().map(String::as_str).collect::<Vec<_>>(), [A, B]);
}

#[test]
fn a_container_gets_its_processes_memory_and_reported_utilisation() {
    let (_root, cgroups) = proc_from(PROC_CGROUP_V2);
    let attribution = attribute(&two_gpus(), |pid| cgroups.container(pid));
    let a = &attribution.containers[A];
    assert_eq!((a.gpu, a.pids.as_slice()), (0, [41230, 41388].as_slice()));
    assert_eq!(a.memory_used_bytes, 11_811_160_064 + 536_870_912);
    // GPU 0 reports per-process use: 81 + 3 of its 87 percent.
    assert!((a.utilisation_percent - 84.0).abs() < 1e-3, "{}", a.utilisation_percent);
    assert!(gpu_shares_sum(&attribution, 0) <= 87.0 + 1e-3);
}

#[test]
fn without_per_process_use_a_gpu_is_split_by_memory_and_host_processes_are_unattributed() {
    let (_root, cgroups) = proc_from(PROC_CGROUP_V2);
    let attribution = attribute(&two_gpus(), |pid| cgroups.container(pid));
    let b = &attribution.containers[B];
    let host = &attribution.unattributed;
    assert_eq!((b.gpu, b.pids.as_slice(), b.memory_used_bytes), (1, [52017].as_slice(), 17_179_869_184));
    assert_eq!(host.len(), 1);
    assert_eq!(
        (host[0].gpu, host[0].pids.as_slice(), host[0].memory_used_bytes),
        (1, [3121].as_slice(), 1_283_457_024)
    );
    let b_share = 64.0 * 17_179_869_184.0 / (17_179_869_184.0 + 1_283_457_024.0);
    assert!((b.utilisation_percent - b_share).abs() < 1e-3, "{}", b.utilisation_percent);
    assert!((gpu_shares_sum(&attribution, 1) - 64.0).abs() < 1e-3);
}

#[test]
fn a_container_on_two_gpus_is_placed_where_it_holds_most_memory() {
    let sample = GpuSample {
        gpus: vec![
            GpuState { index: 0, utilisation_percent: 30, memory_used_bytes: 2 << 30 },
            GpuState { index: 1, utilisation_percent: 90, memory_used_bytes: 8 << 30 },
        ],
        processes: vec![process(7, 0, Some(2 << 30), None), process(7, 1, Some(8 << 30), None)],
    };
    let attribution = attribute(&sample, |_| Some(A.to_owned()));
    let a = &attribution.containers[A];
    assert_eq!((a.gpu, a.pids.as_slice(), a.memory_used_bytes), (1, [7].as_slice(), 10 << 30));
    assert!((a.utilisation_percent - 120.0).abs() < 1e-3, "totals are in percent of one GPU");
    assert!(attribution.unattributed.is_empty());
}

#[test]
fn reported_use_above_the_gpus_is_scaled_down_to_it() {
    let sample = GpuSample {
        gpus: vec![GpuState { index: 0, utilisation_percent: 60, memory_used_bytes: 3 << 30 }],
        processes: vec![
            process(1, 0, Some(1 << 30), Some(50)),
            process(2, 0, Some(1 << 30), Some(30)),
            process(3, 0, Some(1 << 30), None),
        ],
    };
    let attribution = attribute(&sample, |pid| Some(format!("{pid:064x}")));
    let share = |pid: u32| attribution.containers[&format!("{pid:064x}")].utilisation_percent;
    assert!((share(1) - 37.5).abs() < 1e-3 && (share(2) - 22.5).abs() < 1e-3, "{} {}", share(1), share(2));
    assert_eq!(share(3), 0.0);
}

#[test]
fn the_rest_of_a_gpus_use_goes_to_unreported_processes_by_memory_or_equally() {
    let mixed = [
        process(1, 0, Some(4 << 30), Some(20)),
        process(2, 0, Some(3 << 30), None),
        process(3, 0, Some(1 << 30), None),
    ];
    let shares_of = |processes: &[GpuProcess]| shares(80.0, &processes.iter().collect::<Vec<_>>());
    assert_eq!(shares_of(&mixed), [20.0, 45.0, 15.0]);
    let unknown_memory = [process(1, 0, None, None), process(2, 0, None, None)];
    assert_eq!(shares_of(&unknown_memory), [40.0, 40.0]);
    assert_eq!(shares(0.0, &[&mixed[1]]), [0.0]);
}

#[cfg(feature = "nvml")]
#[test]
fn a_process_in_both_lists_is_one_record_with_its_memory_and_newest_utilisation() {
    use super::nvml::{merge_processes, newest_per_pid};

    let info =
        |pid, used_gpu_memory| ProcessInfo { pid, used_gpu_memory, gpu_instance_id: None, compute_instance_id: None };
    let compute = [info(900, UsedGpuMemory::Used(3 << 30)), info(901, UsedGpuMemory::Unavailable)];
    let graphics = [info(900, UsedGpuMemory::Used(1 << 30)), info(902, UsedGpuMemory::Used(1 << 20))];
    let util = |pid, timestamp, sm_util| ProcessUtilizationSample {
        pid,
        timestamp,
        sm_util,
        mem_util: 0,
        enc_util: 0,
        dec_util: 0,
    };
    let sm = newest_per_pid(&[util(900, 2_000, 70), util(900, 1_000, 10), util(902, 1_500, 5)]);
    let merged = merge_processes(1, compute.into_iter().chain(graphics), &sm);
    assert_eq!(
        merged,
        [
            process(900, 1, Some(3 << 30), Some(70)),
            process(901, 1, None, None),
            process(902, 1, Some(1 << 20), Some(5))
        ]
    );
}

#[test]
fn gpu_errors_are_sendable_between_threads() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<GpuUnavailable>();
    send_sync::<GpuProbe>();
}

/// Live NVML: on a machine without the driver (or a host built without NVML), the error must
/// say so; with one, the GPUs must be listed and sampled.
#[test]
fn open_says_there_is_no_driver_or_samples_the_gpus() {
    match GpuProbe::open() {
        #[cfg(not(feature = "nvml"))]
        Err(error @ GpuUnavailable::NotBuilt) => {
            let message = error.to_string();
            assert!(message.contains("--features nvml"), "{message}");
            eprintln!("SKIPPED live NVML sample (built without NVML): {message}");
        }
        Err(error @ (GpuUnavailable::NoLibrary { .. } | GpuUnavailable::NoDriver)) => {
            let message = error.to_string();
            assert!(message.contains("NVIDIA driver"), "{message}");
            assert!(message.contains("libnvidia-ml") || message.contains("not loaded"), "{message}");
            eprintln!("SKIPPED live NVML sample (no NVIDIA driver here): {message}");
        }
        Err(error) => panic!("NVML is installed but unusable: {error}"),
        Ok(mut probe) => {
            assert!(!probe.gpus().is_empty());
            let sample = probe.sample().expect("a sample of every GPU");
            let indices: Vec<u32> = probe.gpus().iter().map(|g| g.index).collect();
            assert_eq!(sample.gpus.iter().map(|g| g.index).collect::<Vec<_>>(), indices);
            assert!(sample.gpus.iter().all(|g| g.utilisation_percent <= 100));
            assert!(sample.processes.iter().all(|p| indices.contains(&p.gpu)));
            probe.sample().expect("a second sample, reading per-process use since the first");
        }
    }
}
