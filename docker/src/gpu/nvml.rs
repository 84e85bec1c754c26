//! The NVML side of [`super`]: open the library once, list the GPUs, sample them.

use std::collections::BTreeMap;

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::{ProcessInfo, ProcessUtilizationSample};
use nvml_wrapper::{Device, Nvml};
use tracing::debug;

use super::{GpuInfo, GpuProcess, GpuSample, GpuState, GpuUnavailable};

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
pub(super) fn newest_per_pid(samples: &[ProcessUtilizationSample]) -> BTreeMap<u32, u32> {
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
pub(super) fn merge_processes(
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
