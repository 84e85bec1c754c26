//! What a job carries from one container (or pod) to the next when a backend re-creates it to
//! place, preempt, migrate or resize it: the bookkeeping keys it writes as labels (Docker) or
//! annotations (Kubernetes), the batch size in force, and the service the job attained before.
//! The queue lives in the engine, so a host that restarts finds every job as it left it.

use std::collections::HashMap;

/// The id of the container (the uid of the pod) this one is a copy of.
pub const REPLACES: &str = "wasmsched.replaces";
/// `preempted` on a job that waits in the queue after a preemption.
pub const WAIT: &str = "wasmsched.wait";
/// When the job first arrived (its first container's creation), Unix milliseconds.
pub const ARRIVED: &str = "wasmsched.arrived-unix-ms";
/// The run time the job had attained when this copy was made, milliseconds.
pub const RUN_MS: &str = "wasmsched.run-ms";
/// The GPU time the job had attained when this copy was made, milliseconds.
pub const GPU_MS: &str = "wasmsched.gpu-ms";
/// The job's share of its GPUs in percent, set by `set-gpu-share` (Docker: its MPS active
/// thread percentage).
pub const GPU_SHARE: &str = "wasmsched.gpu-share";
/// The job's global batch size in force, set by a `resize`: the host reads it back as the
/// job's `batch-size` (the job reads [`BATCH_SIZE_ENV`]).
pub const BATCH_IN_FORCE: &str = "wasmsched.batch-size-in-force";
/// The environment variable through which a resized job's main container learns the global
/// batch size to train at (the same as [`BATCH_IN_FORCE`]).
pub const BATCH_SIZE_ENV: &str = "WASMSCHED_BATCH_SIZE";
/// The environment variable that tells each pod of a group its rank (0 for the group's
/// leader), set on every pod the host re-creates for a group.
pub const RANK_ENV: &str = "WASMSCHED_RANK";
/// The environment variable that tells each pod of a group how many ranks the group has.
pub const WORLD_SIZE_ENV: &str = "WASMSCHED_WORLD_SIZE";

/// The batch size in force that a job's keys carry ([`BATCH_IN_FORCE`]); None where they
/// carry none, or none above 0.
pub fn batch_in_force(keys: &HashMap<String, String>) -> Option<u32> {
    keys.get(BATCH_IN_FORCE).and_then(|v| v.trim().parse::<u32>().ok()).filter(|&b| b > 0)
}

/// The batch size a resize leaves in force: the one it asks for, else the one the job had
/// (none where it had none).
pub fn batch_after_resize(asked: Option<u32>, had: u32) -> Option<u32> {
    asked.or(Some(had).filter(|&b| b > 0))
}

/// Why a job that declares no checkpoint is not resized: `what` names it ("the pod", "the
/// container"), `declare` says how to declare one.
pub fn resize_needs_checkpoint(what: &str, declare: &str) -> String {
    format!(
        "{what} declares no wasmsched.checkpoint folder, and a resize re-creates it from its checkpoint: it would \
         start its training over; {declare}"
    )
}

/// The job's service before this copy, from its keys, plus the time this copy has run (since
/// `started_unix_ms`, when it runs): (run ms, GPU ms).
pub fn attained(
    keys: &HashMap<String, String>,
    started_unix_ms: Option<u64>,
    now_unix_ms: u64,
    gpus: usize,
) -> (u64, u64) {
    let key = |k: &str| keys.get(k).and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(0);
    let running = started_unix_ms.map_or(0, |s| now_unix_ms.saturating_sub(s));
    (key(RUN_MS).saturating_add(running), key(GPU_MS).saturating_add(running.saturating_mul(gpus.max(1) as u64)))
}

/// When a job arrived, Unix ms: the time its copy carries (its original's), else `created`, when
/// what runs it was created.
pub fn arrived_unix_ms(keys: &HashMap<String, String>, created: u64) -> u64 {
    keys.get(ARRIVED).and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(created)
}

/// Why a queued job waits: preempted when its copy says so, else it never started.
pub fn wait_reason(keys: &HashMap<String, String>) -> crate::bindings::wit::WaitReason {
    use crate::bindings::wit::WaitReason;
    if keys.get(WAIT).is_some_and(|w| w.trim() == "preempted") {
        WaitReason::Preempted
    } else {
        WaitReason::NeverStarted
    }
}

/// An RFC 3339 time (`2026-11-23T10:56:00.450091411Z`) in Unix milliseconds; None for
/// Docker's zero time (`0001-01-01T00:00:00Z`, a container never started) or garbage.
pub fn unix_ms_of(stamp: &str) -> Option<u64> {
    let at = humantime::parse_rfc3339_weak(stamp).ok()?;
    let ms = at.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis();
    u64::try_from(ms).ok().filter(|&ms| ms > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::declare::{KNOWN_KEYS, PREFIX};

    #[test]
    fn every_key_the_host_writes_is_one_the_label_check_knows() {
        for key in [REPLACES, WAIT, ARRIVED, RUN_MS, GPU_MS, GPU_SHARE, BATCH_IN_FORCE] {
            let short = key.strip_prefix(PREFIX).expect("a wasmsched key");
            assert!(KNOWN_KEYS.contains(&short), "{key} would be reported as a misspelling");
        }
    }

    #[test]
    fn the_batch_in_force_is_read_only_when_it_is_a_size() {
        let keys = |v: &str| HashMap::from([(BATCH_IN_FORCE.to_string(), v.to_string())]);
        assert_eq!(batch_in_force(&keys(" 256 ")), Some(256));
        for bad in ["0", "-4", "lots", ""] {
            assert_eq!(batch_in_force(&keys(bad)), None, "{bad:?}");
        }
        assert_eq!(batch_in_force(&HashMap::new()), None);
    }
}
