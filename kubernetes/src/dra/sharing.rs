//! How a GPU share reaches a DRA driver (`[backend.gpu-sharing]`): the opaque config that a
//! claim's allocation carries for its devices of the GPU drivers, which the driver reads when it
//! prepares them.
//!
//! - **MPS** (the default): a pod that a policy caps (`set-gpu-share`) gets its share as MPS's
//!   active-thread percentage, and a limit on the device memory it may pin: by default the
//!   memory its claim takes of a shared device (consumable capacity `memory`), or its share of
//!   the device's memory, or none.
//! - **Time-slicing**: pods that share a device take turns on it at the configured interval.
//!   Time-slicing caps nothing, so a `set-gpu-share` is refused with it; every claim on a
//!   device that allows several allocations gets the interval (NVIDIA's driver only: no other
//!   has a standard way to be told, and they time-slice shared devices by default).
//!
//! NVIDIA's DRA driver (`gpu.nvidia.com`) reads its `GpuConfig` (`sharing.strategy`, with
//! `mpsConfig` or `timeSlicingConfig`); any other GPU driver gets the environment variables
//! that CUDA's MPS clients read, as the flat map that drivers such as Kubernetes' DRA test
//! driver take.

use serde::Deserialize;
use serde_json::json;

use k8s_openapi::api::resource::v1::Device;

use super::NVIDIA_DRIVER;
use super::allocate::Pick;
use super::cel;

/// How pods share a GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// NVIDIA's Multi-Process Service: each pod capped at its share of the GPU's threads.
    #[default]
    Mps,
    /// Turns on the GPU at an interval; no cap.
    TimeSlicing,
}

/// Under MPS, the device memory a capped pod may pin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PinnedMemory {
    /// The memory its claim takes of a shared device (its consumable capacity `memory`); no
    /// limit where it takes none.
    #[default]
    Requested,
    /// Its share of the device's memory (capacity `memory`), where the device says it.
    Share,
    /// No limit.
    None,
}

/// Under time-slicing, how long each pod's turn is: the NVIDIA driver's names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Interval {
    /// The driver's default.
    #[default]
    Default,
    /// Short turns: more switching, less wait.
    Short,
    /// Between the two.
    Medium,
    /// Long turns: less switching, more wait.
    Long,
}

impl Interval {
    fn name(self) -> &'static str {
        match self {
            Interval::Default => "Default",
            Interval::Short => "Short",
            Interval::Medium => "Medium",
            Interval::Long => "Long",
        }
    }
}

/// `[backend.gpu-sharing]`: how a GPU share reaches the driver of the GPUs DRA gives. Every key
/// is optional.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct GpuSharingConfig {
    /// `"mps"` (default) or `"time-slicing"`.
    pub strategy: Strategy,
    /// MPS only: `"requested"` (default), `"share"` or `"none"` ([`PinnedMemory`]).
    pub pinned_memory: Option<PinnedMemory>,
    /// Time-slicing only: `"default"` (the default), `"short"`, `"medium"` or `"long"`.
    pub interval: Option<Interval>,
}

impl GpuSharingConfig {
    /// Why the table cannot be used, saying what to write.
    pub fn check(&self) -> Result<(), String> {
        match self.strategy {
            Strategy::Mps if self.interval.is_some() => Err("[backend.gpu-sharing] interval is time-slicing's: \
                 drop it, or set strategy = \"time-slicing\""
                .into()),
            Strategy::TimeSlicing if self.pinned_memory.is_some() => Err("[backend.gpu-sharing] pinned-memory is \
                 MPS's (time-slicing limits no memory): drop it, or set strategy = \"mps\""
                .into()),
            _ => Ok(()),
        }
    }

    /// Why a pod cannot be capped at a share of its GPU under this strategy; None when it can.
    pub fn refuses_a_cap(&self) -> Option<&'static str> {
        (self.strategy == Strategy::TimeSlicing).then_some(
            "the cluster's GPUs are shared by time-slicing ([backend.gpu-sharing] strategy), which cannot cap a \
             pod at a share of its GPU: set strategy = \"mps\" where the driver runs MPS, or leave the share",
        )
    }

    /// The parameters for a claim's devices `picked` of GPU driver `driver`, capped at
    /// `share` percent (None: not capped); None when the claim needs none.
    pub fn parameters(&self, driver: &str, picked: &[&Pick], share: Option<u8>) -> Option<serde_json::Value> {
        match self.strategy {
            Strategy::Mps => {
                let percent = share.filter(|&p| p < 100)?;
                let pinned = self.pinned_bytes(driver, picked, percent);
                Some(mps(driver, percent, pinned, picked.len()))
            }
            Strategy::TimeSlicing if picked.iter().any(|p| p.consumed.is_some()) => {
                time_slicing(driver, self.interval.unwrap_or_default())
            }
            Strategy::TimeSlicing => None,
        }
    }

    /// The device memory a pod capped at `percent` may pin on each of `picked` (the least over
    /// them), by [`PinnedMemory`]; None for no limit.
    fn pinned_bytes(&self, driver: &str, picked: &[&Pick], percent: u8) -> Option<u64> {
        let each = picked.iter().map(|p| match self.pinned_memory.unwrap_or_default() {
            PinnedMemory::Requested => {
                let consumed = p.consumed.as_ref()?;
                let (_, m) = consumed.iter().find(|(n, _)| cel::qualified(n, driver).1 == "memory")?;
                u64::try_from(m / 1000).ok().filter(|&b| b > 0)
            }
            PinnedMemory::Share => {
                let of = u128::from(memory_bytes(driver, p.offer.device)?) * u128::from(percent) / 100;
                u64::try_from(of).ok()
            }
            PinnedMemory::None => None,
        });
        each.collect::<Option<Vec<u64>>>()?.into_iter().min()
    }
}

/// Device `d`'s memory (its capacity `memory`), bytes.
pub fn memory_bytes(driver: &str, d: &Device) -> Option<u64> {
    let (_, m) = d.capacity.as_ref()?.iter().find(|(n, _)| cel::qualified(n, driver).1 == "memory")?;
    u64::try_from(cel::milli(&m.value)? / 1000).ok()
}

/// MPS at `percent` of the GPU's threads, pinning at most `pinned` bytes of each of its
/// `devices` devices: NVIDIA's `GpuConfig`, or CUDA's MPS variables for another driver.
pub fn mps(driver: &str, percent: u8, pinned: Option<u64>, devices: usize) -> serde_json::Value {
    if driver != NVIDIA_DRIVER {
        let mut env = json!({"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": percent.to_string()});
        if let Some(bytes) = pinned {
            // Per device as the pod numbers them, in MiB: "0=4096M,1=4096M".
            let mib = (bytes >> 20).max(1);
            let each: Vec<String> = (0..devices.max(1)).map(|i| format!("{i}={mib}M")).collect();
            env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = json!(each.join(","));
        }
        return env;
    }
    let mut config = json!({"defaultActiveThreadPercentage": percent});
    if let Some(bytes) = pinned {
        config["defaultPinnedDeviceMemoryLimit"] = json!(quantity_of_bytes(bytes));
    }
    json!({
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "GpuConfig",
        "sharing": {"strategy": "MPS", "mpsConfig": config},
    })
}

/// Time-slicing at `interval`: NVIDIA's `GpuConfig`. Another driver has no standard way to be
/// told, and time-slices the pods that share a device as it does by default: None.
fn time_slicing(driver: &str, interval: Interval) -> Option<serde_json::Value> {
    (driver == NVIDIA_DRIVER).then(|| {
        json!({
            "apiVersion": "resource.nvidia.com/v1beta1",
            "kind": "GpuConfig",
            "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": interval.name()}},
        })
    })
}

/// `bytes` as a Kubernetes quantity: whole Gi or Mi where they divide it, else bytes.
fn quantity_of_bytes(bytes: u64) -> String {
    match bytes {
        b if b > 0 && b % (1 << 30) == 0 => format!("{}Gi", b >> 30),
        b if b > 0 && b % (1 << 20) == 0 => format!("{}Mi", b >> 20),
        b => b.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use cel_interpreter::Value;
    use serde_json::json;

    use super::super::allocate::{DeviceId, Offer, Pick};
    use super::*;

    const TEST_DRIVER: &str = "test-driver.cdi.k8s.io";

    /// A device of 80 GiB.
    fn device() -> Device {
        serde_json::from_value(json!({"name": "gpu-0", "capacity": {"memory": {"value": "80Gi"}}})).unwrap()
    }

    fn offer<'a>(driver: &str, d: &'a Device) -> Offer<'a> {
        let id = DeviceId { driver: driver.into(), pool: "vm".into(), device: d.name.clone() };
        Offer { id, device: d, value: Value::Null }
    }

    /// A pick of `o`, taking `memory` bytes of it when shared.
    fn pick<'o, 'a>(o: &'o Offer<'a>, memory: Option<u64>) -> Pick<'o, 'a> {
        let consumed = memory.map(|b| BTreeMap::from([("memory".to_string(), i128::from(b) * 1000)]));
        Pick { request: "gpu".into(), offer: o, consumed }
    }

    fn sharing(toml_text: &str) -> GpuSharingConfig {
        let config: GpuSharingConfig = toml::from_str(toml_text).unwrap();
        config.check().unwrap();
        config
    }

    #[test]
    fn a_capped_pod_gets_mps_with_the_memory_its_claim_takes_of_a_shared_device() {
        let d = device();
        let (nvidia, other) = (offer(NVIDIA_DRIVER, &d), offer(TEST_DRIVER, &d));
        let mps = GpuSharingConfig::default();
        let got = mps.parameters(NVIDIA_DRIVER, &[&pick(&nvidia, Some(4 << 30))], Some(30)).unwrap();
        assert_eq!(
            got["sharing"],
            json!({"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 30, "defaultPinnedDeviceMemoryLimit": "4Gi"}})
        );
        let got = mps.parameters(TEST_DRIVER, &[&pick(&other, Some(4 << 30)), &pick(&other, Some(6 << 30))], Some(30));
        assert_eq!(
            got.unwrap(),
            json!({"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "30", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=4096M,1=4096M"}),
            "the least over its devices, for each of them"
        );
        // A device held whole: no memory taken, so no limit; not capped: no config at all.
        let whole = mps.parameters(TEST_DRIVER, &[&pick(&other, None)], Some(30)).unwrap();
        assert_eq!(whole, json!({"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "30"}));
        assert_eq!(mps.parameters(NVIDIA_DRIVER, &[&pick(&nvidia, Some(4 << 30))], None), None);
        assert_eq!(mps.parameters(NVIDIA_DRIVER, &[&pick(&nvidia, Some(4 << 30))], Some(100)), None);
    }

    #[test]
    fn the_pinned_memory_may_be_the_pods_share_of_the_device_or_none() {
        let d = device();
        let nvidia = offer(NVIDIA_DRIVER, &d);
        let share = sharing("pinned-memory = \"share\"");
        let got = share.parameters(NVIDIA_DRIVER, &[&pick(&nvidia, None)], Some(30)).unwrap();
        assert_eq!(got["sharing"]["mpsConfig"]["defaultPinnedDeviceMemoryLimit"], "24Gi", "30 % of 80 GiB");
        let odd = share.parameters(NVIDIA_DRIVER, &[&pick(&nvidia, None)], Some(33)).unwrap();
        assert_eq!(odd["sharing"]["mpsConfig"]["defaultPinnedDeviceMemoryLimit"], "28346784153");
        let none = sharing("pinned-memory = \"none\"");
        let got = none.parameters(NVIDIA_DRIVER, &[&pick(&nvidia, Some(4 << 30))], Some(30)).unwrap();
        assert_eq!(got["sharing"]["mpsConfig"], json!({"defaultActiveThreadPercentage": 30}));
    }

    #[test]
    fn time_slicing_gives_shared_devices_its_interval_and_caps_nothing() {
        let d = device();
        let (nvidia, other) = (offer(NVIDIA_DRIVER, &d), offer(TEST_DRIVER, &d));
        let slicing = sharing("strategy = \"time-slicing\"\ninterval = \"long\"");
        let got = slicing.parameters(NVIDIA_DRIVER, &[&pick(&nvidia, Some(4 << 30))], None).unwrap();
        assert_eq!(got["sharing"], json!({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}));
        assert_eq!(slicing.parameters(NVIDIA_DRIVER, &[&pick(&nvidia, None)], None), None, "a device held whole");
        assert_eq!(slicing.parameters(TEST_DRIVER, &[&pick(&other, Some(4 << 30))], None), None, "no standard way");
        assert!(slicing.refuses_a_cap().unwrap().contains("strategy = \"mps\""));
        assert_eq!(GpuSharingConfig::default().refuses_a_cap(), None);
    }

    #[test]
    fn the_table_is_checked_and_says_what_to_write() {
        let refused = |text: &str| {
            toml::from_str::<GpuSharingConfig>(text).map_err(|e| e.to_string()).and_then(|c| c.check().map(|_| c))
        };
        assert!(refused("interval = \"short\"").unwrap_err().contains("set strategy = \"time-slicing\""));
        let why = refused("strategy = \"time-slicing\"\npinned-memory = \"share\"").unwrap_err();
        assert!(why.contains("set strategy = \"mps\""), "{why}");
        assert!(refused("strategy = \"mig\"").unwrap_err().contains("expected `mps` or `time-slicing`"));
        assert!(refused("pinned = \"none\"").unwrap_err().contains("unknown field"));
    }
}
