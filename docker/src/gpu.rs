//! GPU telemetry from NVML, mapped to containers by process.
//!
//! [`GpuProbe`] is the I/O edge (`gpu/nvml.rs`): [`GpuProbe::open`] loads NVML once (on a
//! machine without the NVIDIA driver it fails with a [`GpuUnavailable`] that says so, and the
//! host goes on without GPUs; so it does in a host built without the `nvml` feature), and
//! [`GpuProbe::sample`] reads each GPU's utilisation and memory and every process using a
//! GPU. The rest is pure and tested on recorded samples (`gpu/fixtures/`):
//! [`container_of`] reads the Docker container id out of a process's `/proc/<pid>/cgroup`,
//! [`ProcCgroups`] finds that file, and [`attribute`] turns a [`GpuSample`] into each
//! container's use of its GPU.
//!
//! NVML reports process ids in the host's pid namespace, so the host must read the host's
//! `/proc`: run it with `--pid=host`, or mount the host's `/proc` and point [`ProcCgroups`] at it.

#[cfg(feature = "nvml")]
mod nvml;

use std::collections::BTreeMap;
use std::path::PathBuf;

#[cfg(feature = "nvml")]
pub use nvml::GpuProbe;
#[cfg(feature = "nvml")]
use nvml_wrapper::error::NvmlError;
use serde::{Deserialize, Serialize};

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
    /// This host was built without NVML (the `nvml` feature).
    #[cfg(not(feature = "nvml"))]
    #[error("this wasmsched was built without NVML: rebuild with --features nvml to read GPUs")]
    NotBuilt,
    /// An NVML call failed while opening.
    #[cfg(feature = "nvml")]
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
    #[cfg(feature = "nvml")]
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

/// Without NVML built in there are no GPUs to open: [`GpuProbe::open`] says so, and no
/// probe can exist.
#[cfg(not(feature = "nvml"))]
#[derive(Debug)]
pub struct GpuProbe(std::convert::Infallible);

#[cfg(not(feature = "nvml"))]
impl GpuProbe {
    /// Always [`GpuUnavailable::NotBuilt`]; the caller logs it once and runs without GPUs.
    pub fn open() -> Result<GpuProbe, GpuUnavailable> {
        Err(GpuUnavailable::NotBuilt)
    }

    /// The GPUs found at open: none can be.
    pub fn gpus(&self) -> &[GpuInfo] {
        match self.0 {}
    }

    /// A sample of the GPUs: none can be taken.
    pub fn sample(&mut self) -> Result<GpuSample, GpuUnavailable> {
        match self.0 {}
    }
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
