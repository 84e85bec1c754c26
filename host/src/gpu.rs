//! GPU telemetry from NVML, mapped to containers by process.
//!
//! [`GpuProbe`] is the I/O edge: [`GpuProbe::open`] loads NVML once (on a machine without the
//! NVIDIA driver it fails with a [`GpuUnavailable`] that says so, and the host goes on without
//! GPUs), and [`GpuProbe::sample`] reads each GPU's utilisation and memory and every process
//! using a GPU. The rest is pure and tested on recorded samples (`gpu/fixtures/`):
//! [`container_of`] reads the Docker container id out of a process's `/proc/<pid>/cgroup`,
//! [`ProcCgroups`] finds that file, and [`attribute`] turns a [`GpuSample`] into each
//! container's use of its GPU.
//!
//! NVML reports process ids in the host's pid namespace, so the host must read the host's
//! `/proc`: run it with `--pid=host`, or mount the host's `/proc` and point [`ProcCgroups`] at it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::{ProcessInfo, ProcessUtilizationSample};
use nvml_wrapper::{Device, Nvml};
use serde::{Deserialize, Serialize};
use tracing::debug;

/// Why the host sees no GPUs, or stopped seeing one.
#[derive(Debug, thiserror::Error)]
pub enum GpuUnavailable {
    /// The NVML library could not be loaded: the NVIDIA driver is not installed here.
    #[error(
        "no NVIDIA driver on this machine: its library libnvidia-ml.so.1 could not be loaded ({reason}); \
         for GPU telemetry install the NVIDIA driver, or run the host's container with `--gpus all` \
         under the NVIDIA Container Toolkit"
    )]
    NoLibrary {
        /// What the loader said.
        reason: String,
    },
    /// The library is installed but the driver's kernel module is not running.
    #[error(
        "the NVIDIA driver is installed but not loaded; load its kernel module (`nvidia-smi` should then \
         list the GPUs) for GPU telemetry"
    )]
    NoDriver,
    /// The driver's library and its kernel module are of different versions.
    #[error(
        "the NVIDIA driver's library and kernel module are of different versions (a driver upgrade \
         without a reboot?); reboot, or reload the nvidia kernel modules"
    )]
    DriverMismatch,
    /// The driver refused this user.
    #[error(
        "the NVIDIA driver refused this user; run the host as a user that may open /dev/nvidia* \
         (`nvidia-smi` works for such a user)"
    )]
    NoPermission,
    /// The driver runs, but there is no GPU.
    #[error("the NVIDIA driver is running but reports no GPU; check `nvidia-smi -L`")]
    NoGpu,
    /// An NVML call failed while opening.
    #[error(
        "NVML failed while {during}: {error}; check that `nvidia-smi` works for this user and that the \
         driver is R510 or newer"
    )]
    Nvml {
        /// What the probe was doing.
        during: String,
        /// NVML's error.
        error: NvmlError,
    },
    /// A GPU that was there at open stopped answering during a sample.
    #[error(
        "GPU {gpu}: reading its {what} failed: {error}; check it with `nvidia-smi` (it may have fallen off the bus)"
    )]
    Read {
        /// The GPU's NVML index.
        gpu: u32,
        /// What was being read.
        what: &'static str,
        /// NVML's error.
        error: NvmlError,
    },
}

impl GpuUnavailable {
    fn from_init(error: NvmlError) -> Self {
        match error {
            NvmlError::LibloadingError(e) => GpuUnavailable::NoLibrary { reason: e.to_string() },
            NvmlError::LibraryNotFound => GpuUnavailable::NoLibrary { reason: error.to_string() },
            NvmlError::DriverNotLoaded => GpuUnavailable::NoDriver,
            NvmlError::LibRmVersionMismatch => GpuUnavailable::DriverMismatch,
            NvmlError::NoPermission => GpuUnavailable::NoPermission,
            error => GpuUnavailable::Nvml { during: "initialising".into(), error },
        }
    }
}

/// A GPU as found at open; fixed while the probe lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuInfo {
    /// NVML's index of the GPU (not necessarily CUDA's).
    pub index: u32,
    /// The product name, e.g. `NVIDIA A100-SXM4-40GB`.
    pub name: String,
    /// The GPU's UUID, e.g. `GPU-0c6638d5-41ec-49ba-97c1-7e6dadfc0d28`.
    pub uuid: String,
    /// The memory installed.
    pub memory_total_bytes: u64,
}

/// One GPU's use at a sample.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuState {
    /// NVML's index of the GPU.
    pub index: u32,
    /// Percent of the driver's last sample period (1/6 s to 1 s) during which a kernel ran.
    pub utilisation_percent: u32,
    /// Memory allocated on the GPU.
    pub memory_used_bytes: u64,
}

/// A process using a GPU at a sample. A process on two GPUs appears once per GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuProcess {
    /// Its id in the host's pid namespace.
    pub pid: u32,
    /// NVML's index of the GPU.
    pub gpu: u32,
    /// GPU memory it holds; None where the driver does not say (Windows WDDM, some MIG set-ups).
    pub memory_used_bytes: Option<u64>,
    /// Its SM (compute and 3D) utilisation in percent, from the driver's per-process samples
    /// since the previous sample; None where the GPU keeps none or it had none in that window.
    pub sm_percent: Option<u32>,
}

/// Every GPU's use and every GPU process at one moment. Serialises to JSON, so a sample can be
/// recorded and replayed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuSample {
    /// Each GPU, in index order.
    pub gpus: Vec<GpuState>,
    /// Each process on each GPU, by GPU then pid.
    pub processes: Vec<GpuProcess>,
}

/// The NVIDIA GPUs of this machine, opened once through NVML.
#[derive(Debug)]
pub struct GpuProbe {
    nvml: Nvml,
    gpus: Vec<GpuInfo>,
    /// Per GPU, the newest per-process utilisation timestamp read (µs, 0 before the first);
    /// None once the GPU said it keeps none.
    process_samples_seen: Vec<Option<u64>>,
}

impl GpuProbe {
    /// Load NVML and list the GPUs. An error says what a person can do about it; the caller
    /// logs it once and runs without GPUs.
    pub fn open() -> Result<GpuProbe, GpuUnavailable> {
        let nvml = Nvml::init().map_err(GpuUnavailable::from_init)?;
        let during = |what: String| move |error| GpuUnavailable::Nvml { during: what, error };
        let count = nvml.device_count().map_err(during("counting the GPUs".into()))?;
        if count == 0 {
            return Err(GpuUnavailable::NoGpu);
        }
        let mut gpus = Vec::with_capacity(count as usize);
        for index in 0..count {
            let what = format!("reading GPU {index}'s name, UUID and memory");
            let info = nvml.device_by_index(index).and_then(|device| {
                Ok(GpuInfo {
                    index,
                    name: device.name()?,
                    uuid: device.uuid()?,
                    memory_total_bytes: device.memory_info()?.total,
                })
            });
            gpus.push(info.map_err(during(what))?);
        }
        debug!(gpus = gpus.len(), "NVML opened");
        let process_samples_seen = vec![Some(0); gpus.len()];
        Ok(GpuProbe { nvml, gpus, process_samples_seen })
    }

    /// The GPUs found at open, in index order.
    pub fn gpus(&self) -> &[GpuInfo] {
        &self.gpus
    }

    /// Read every GPU's utilisation and memory, and every process on a GPU (compute and
    /// graphics). Per-process SM utilisation is read where the GPU keeps it; its absence fails
    /// nothing. Fails when a GPU stops answering.
    pub fn sample(&mut self) -> Result<GpuSample, GpuUnavailable> {
        let mut sample = GpuSample::default();
        for (info, seen) in self.gpus.iter().zip(&mut self.process_samples_seen) {
            let gpu = info.index;
            let read = |what| move |error| GpuUnavailable::Read { gpu, what, error };
            let device = self.nvml.device_by_index(gpu).map_err(read("handle"))?;
            let utilisation = device.utilization_rates().map_err(read("utilisation"))?;
            let memory = device.memory_info().map_err(read("memory"))?;
            let compute = optional(device.running_compute_processes()).map_err(read("compute processes"))?;
            let graphics = optional(device.running_graphics_processes()).map_err(read("graphics processes"))?;
            let sm = process_sm_percent(&device, gpu, seen);
            sample.gpus.push(GpuState {
                index: gpu,
                utilisation_percent: utilisation.gpu,
                memory_used_bytes: memory.used,
            });
            sample.processes.extend(merge_processes(gpu, compute.into_iter().chain(graphics), &sm));
        }
        Ok(sample)
    }
}

/// A process list the GPU does not keep is an empty one.
fn optional(list: Result<Vec<ProcessInfo>, NvmlError>) -> Result<Vec<ProcessInfo>, NvmlError> {
    match list {
        Err(NvmlError::NotSupported) => Ok(Vec::new()),
        list => list,
    }
}

/// Each pid's SM utilisation on `device` (GPU `gpu`) from the driver's per-process samples newer than
/// `seen`, which moves on to the newest read. Empty where there are none; None in `seen` once
/// the GPU said it keeps none, so it is not asked again.
fn process_sm_percent(device: &Device, gpu: u32, seen: &mut Option<u64>) -> BTreeMap<u32, u32> {
    let Some(since) = *seen else { return BTreeMap::new() };
    match device.process_utilization_stats(since) {
        Ok(samples) => {
            *seen = samples.iter().map(|s| s.timestamp).max().or(*seen);
            newest_per_pid(&samples)
        }
        // No process ran a kernel since the last read.
        Err(NvmlError::NotFound) => BTreeMap::new(),
        Err(NvmlError::NotSupported) => {
            debug!(gpu, "no per-process utilisation on this GPU; splitting its use by memory");
            *seen = None;
            BTreeMap::new()
        }
        Err(error) => {
            debug!(gpu, %error, "per-process utilisation unreadable; splitting the GPU's use by memory");
            BTreeMap::new()
        }
    }
}

/// Each pid's SM utilisation from its newest per-process sample.
fn newest_per_pid(samples: &[ProcessUtilizationSample]) -> BTreeMap<u32, u32> {
    let mut newest: BTreeMap<u32, (u64, u32)> = BTreeMap::new();
    for s in samples {
        let entry = newest.entry(s.pid).or_insert((s.timestamp, s.sm_util));
        if s.timestamp >= entry.0 {
            *entry = (s.timestamp, s.sm_util);
        }
    }
    newest.into_iter().map(|(pid, (_, sm))| (pid, sm)).collect()
}

/// One record per pid on a GPU from its compute and graphics lists (a process with both
/// contexts is in both), by pid.
fn merge_processes(
    gpu: u32,
    listed: impl IntoIterator<Item = ProcessInfo>,
    sm: &BTreeMap<u32, u32>,
) -> Vec<GpuProcess> {
    let mut memory: BTreeMap<u32, Option<u64>> = BTreeMap::new();
    for process in listed {
        let used = match process.used_gpu_memory {
            UsedGpuMemory::Used(bytes) => Some(bytes),
            UsedGpuMemory::Unavailable => None,
        };
        let entry = memory.entry(process.pid).or_insert(used);
        *entry = (*entry).max(used);
    }
    memory
        .into_iter()
        .map(|(pid, memory_used_bytes)| GpuProcess { pid, gpu, memory_used_bytes, sm_percent: sm.get(&pid).copied() })
        .collect()
}

/// The Docker container a process runs in, from the text of its `/proc/<pid>/cgroup`: the
/// 64-hex id in a path component `<id>` (cgroupfs driver: `/docker/<id>`, Kubernetes'
/// `/kubepods/…/<id>`) or `docker-<id>.scope` (systemd driver), cgroup v1 or v2. When ids are
/// nested (Docker in Docker), the innermost. None for processes outside Docker.
pub fn container_of(cgroup_text: &str) -> Option<String> {
    cgroup_text.lines().find_map(|line| {
        // `hierarchy-id:controllers:path`; the path may itself hold ':'.
        let path = line.splitn(3, ':').nth(2)?;
        path.split('/')
            .filter_map(|part| {
                let id = part.strip_prefix("docker-").and_then(|p| p.strip_suffix(".scope")).unwrap_or(part);
                is_container_id(id).then(|| id.to_owned())
            })
            .next_back()
    })
}

fn is_container_id(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Finds a process's container by reading `<root>/<pid>/cgroup`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcCgroups {
    /// The `/proc` of the host's pid namespace.
    pub root: PathBuf,
}

impl Default for ProcCgroups {
    fn default() -> Self {
        ProcCgroups { root: PathBuf::from("/proc") }
    }
}

impl ProcCgroups {
    /// The container `pid` runs in; None when it runs in none or has exited.
    pub fn container(&self, pid: u32) -> Option<String> {
        let text = std::fs::read_to_string(self.root.join(pid.to_string()).join("cgroup")).ok()?;
        container_of(&text)
    }
}

/// Use of GPUs by a container, or by the processes of one GPU that are in no container.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuUse {
    /// The GPU: for a container, the one where it holds most memory.
    pub gpu: u32,
    /// Its processes, by pid.
    pub pids: Vec<u32>,
    /// GPU memory its processes hold, over all GPUs.
    pub memory_used_bytes: u64,
    /// Its share of GPU time, in percent of one GPU, over all GPUs (see [`attribute`]).
    pub utilisation_percent: f32,
}

/// A sample's GPU use, by container.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Attribution {
    /// Each container on a GPU, by container id.
    pub containers: BTreeMap<String, GpuUse>,
    /// Per GPU (in index order, only those with any), its processes in no container.
    pub unattributed: Vec<GpuUse>,
}

/// Share each GPU's use among the containers of its processes; `resolve` gives a pid's
/// container (e.g. [`ProcCgroups::container`]) and is asked once per pid.
///
/// On each GPU a process is credited its own SM utilisation where the driver reported it; the
/// rest of the GPU's utilisation is split among the other processes by their memory (equally if
/// none is known). Where the reported figures add up to more than the GPU's utilisation they are
/// scaled down to it, so a GPU's shares never sum to more than its utilisation.
pub fn attribute(sample: &GpuSample, resolve: impl Fn(u32) -> Option<String>) -> Attribution {
    let mut containers: BTreeMap<String, BTreeMap<u32, GpuUse>> = BTreeMap::new();
    let mut unattributed: BTreeMap<u32, GpuUse> = BTreeMap::new();
    let mut resolved: BTreeMap<u32, Option<String>> = BTreeMap::new();
    let mut on_gpu: BTreeMap<u32, Vec<&GpuProcess>> = BTreeMap::new();
    for process in &sample.processes {
        on_gpu.entry(process.gpu).or_default().push(process);
    }
    for (gpu, processes) in on_gpu {
        let utilisation = sample.gpus.iter().find(|g| g.index == gpu).map_or(0.0, |g| g.utilisation_percent as f32);
        for (process, share) in processes.iter().zip(shares(utilisation, &processes)) {
            let container = resolved.entry(process.pid).or_insert_with(|| resolve(process.pid));
            let slot = match container {
                Some(id) => containers.entry(id.clone()).or_default().entry(gpu).or_default(),
                None => unattributed.entry(gpu).or_default(),
            };
            slot.gpu = gpu;
            slot.pids.push(process.pid);
            slot.memory_used_bytes += process.memory_used_bytes.unwrap_or(0);
            slot.utilisation_percent += share;
        }
    }
    let containers = containers
        .into_iter()
        .map(|(id, per_gpu)| {
            let mut total = GpuUse::default();
            let mut most = None;
            for u in per_gpu.values() {
                // By index, so the lowest wins a tie.
                let weight = (u.memory_used_bytes, u.utilisation_percent);
                if most.is_none_or(|most| weight > most) {
                    (most, total.gpu) = (Some(weight), u.gpu);
                }
                total.pids.extend(&u.pids);
                total.memory_used_bytes += u.memory_used_bytes;
                total.utilisation_percent += u.utilisation_percent;
            }
            total.pids.sort_unstable();
            total.pids.dedup();
            (id, total)
        })
        .collect();
    Attribution { containers, unattributed: unattributed.into_values().collect() }
}

/// Each process's share of one GPU's `utilisation` percent (see [`attribute`]).
fn shares(utilisation: f32, processes: &[&GpuProcess]) -> Vec<f32> {
    let reported: f32 = processes.iter().filter_map(|p| p.sm_percent).map(|sm| sm as f32).sum();
    if reported >= utilisation {
        let scale = if reported > 0.0 { utilisation / reported } else { 0.0 };
        return processes.iter().map(|p| p.sm_percent.map_or(0.0, |sm| sm as f32 * scale)).collect();
    }
    let rest = utilisation - reported;
    let others: Vec<u64> =
        processes.iter().filter(|p| p.sm_percent.is_none()).map(|p| p.memory_used_bytes.unwrap_or(0)).collect();
    let others_memory: u64 = others.iter().sum();
    processes
        .iter()
        .map(|p| match (p.sm_percent, p.memory_used_bytes.unwrap_or(0)) {
            (Some(sm), _) => sm as f32,
            (None, memory) if others_memory > 0 => rest * (memory as f64 / others_memory as f64) as f32,
            (None, _) => rest / others.len() as f32,
        })
        .collect()
}

#[cfg(test)]
mod tests;
