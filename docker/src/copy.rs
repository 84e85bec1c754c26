//! Re-creating a container from its own config. Docker fixes a container's GPUs, labels and
//! engine when it is created, so placing a queued container on GPUs or on another engine,
//! preempting a running one back into the queue, migrating one and resizing one (new GPUs, a
//! new batch size) all make a **copy**:
//! inspect → create body ([`copy_body`], pure) → create → carry the checkpoint folder →
//! (start) → remove the original → give the copy the original's name. The job keeps its
//! handle; the copy's id replaces the original's.
//!
//! Each copy carries `wasmsched.replaces=<original id>`. If the host stops half-way through
//! (the copy made, the original not yet removed), the next host to find the copy finishes the
//! job ([`settle`]): a running copy wins and the original is removed; a created copy whose
//! original still runs is the unfinished one and is removed; otherwise the checkpoint folder
//! is carried over again and the original removed.

use std::sync::Arc;

use bollard::Docker as Client;
use bollard::errors::Error as DockerError;
use bollard::models::{ContainerCreateBody, ContainerInspectResponse, DeviceRequest, HostConfig};
use bollard::query_parameters as q;
use futures_util::StreamExt;

pub(super) use wasmsched_core::live::carried::{
    ARRIVED, BATCH_IN_FORCE, BATCH_SIZE_ENV, GPU_MS, GPU_SHARE, REPLACES, RUN_MS, WAIT, arrived_unix_ms, attained,
    batch_in_force, unix_ms_of, wait_reason,
};

/// The label by which a container declares the GPUs its job asks for ([`wasmsched_core::declare`]).
const GPUS_LABEL: &str = "wasmsched.gpus";

/// How long a container may take to stop (and write a last checkpoint) before it is killed.
pub(super) const STOP_GRACE_S: i32 = 30;

/// The environment variable the NVIDIA runtime reads to choose a container's GPUs.
const VISIBLE_DEVICES: &str = "NVIDIA_VISIBLE_DEVICES";

/// The environment variable a CUDA process reads once, when it starts, to cap the share of a
/// GPU's threads it may use under MPS (the host must run the MPS control daemon, and the
/// container share its pipe directory).
pub(super) const MPS_PERCENTAGE: &str = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";

/// How a copy differs from its original.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Changes {
    /// The GPUs it gets, as NVML indices on its engine (an empty list: none); None keeps the
    /// original's device requests.
    pub gpus: Option<Vec<u32>>,
    /// Whether it waits in the queue after a preemption (the [`WAIT`] label); otherwise that
    /// label is dropped.
    pub preempted: bool,
    /// The run and GPU time attained so far, milliseconds, when they are to be written.
    pub service: Option<(u64, u64)>,
    /// Its share of its GPUs in percent (the [`MPS_PERCENTAGE`] it starts with, and the
    /// [`GPU_SHARE`] label); None keeps the original's.
    pub gpu_share: Option<u8>,
    /// After a resize: the GPUs its job asks for from now on (its `wasmsched.gpus` label), so
    /// that once preempted it waits for as many; None keeps the original's.
    pub asks_gpus: Option<u32>,
    /// After a resize: the global batch size in force, given to it as [`BATCH_SIZE_ENV`] and
    /// kept in the [`BATCH_IN_FORCE`] label; None keeps the original's.
    pub batch_size: Option<u32>,
}

/// The create body of a copy of `info` with `changes`: the same image, command, environment,
/// labels and host config (limits, mounts, network mode), plus the bookkeeping labels.
pub(super) fn copy_body(info: &ContainerInspectResponse, changes: &Changes) -> ContainerCreateBody {
    let config = info.config.clone().unwrap_or_default();
    let id = info.id.clone().unwrap_or_default();
    let mut labels = config.labels.unwrap_or_default();
    labels.insert(REPLACES.into(), id.clone());
    if !labels.contains_key(ARRIVED)
        && let Some(ms) = info.created.as_deref().and_then(unix_ms_of)
    {
        labels.insert(ARRIVED.into(), ms.to_string());
    }
    if changes.preempted {
        labels.insert(WAIT.into(), "preempted".into());
    } else {
        labels.remove(WAIT);
    }
    if let Some((run_ms, gpu_ms)) = changes.service {
        labels.insert(RUN_MS.into(), run_ms.to_string());
        labels.insert(GPU_MS.into(), gpu_ms.to_string());
    }
    let mut env = config.env;
    if let Some(count) = changes.asks_gpus {
        labels.insert(GPUS_LABEL.into(), count.to_string());
    }
    if let Some(batch) = changes.batch_size {
        labels.insert(BATCH_IN_FORCE.into(), batch.to_string());
        set_var(&mut env, BATCH_SIZE_ENV, Some(batch.to_string()));
    }
    if let Some(percent) = changes.gpu_share {
        labels.insert(GPU_SHARE.into(), percent.to_string());
        set_var(&mut env, MPS_PERCENTAGE, (percent < 100).then(|| percent.to_string()));
    }
    let mut host_config = info.host_config.clone();
    if let Some(gpus) = &changes.gpus {
        // Under the NVIDIA runtime this variable (CUDA images set it to `all`) chooses the
        // GPUs, whatever the device requests say: it must name the same ones.
        let list: Vec<String> = gpus.iter().map(u32::to_string).collect();
        set_var(&mut env, VISIBLE_DEVICES, (!list.is_empty()).then(|| list.join(",")));
        ask_gpus(host_config.get_or_insert_with(Default::default), list);
    }
    // A hostname Docker chose is the original's short id: the copy gets its own.
    let hostname = config.hostname.filter(|h| !h.is_empty() && !id.starts_with(h.as_str()));
    ContainerCreateBody {
        hostname,
        domainname: config.domainname,
        user: config.user,
        attach_stdin: config.attach_stdin,
        attach_stdout: config.attach_stdout,
        attach_stderr: config.attach_stderr,
        exposed_ports: config.exposed_ports,
        tty: config.tty,
        open_stdin: config.open_stdin,
        stdin_once: config.stdin_once,
        env,
        cmd: config.cmd,
        healthcheck: config.healthcheck,
        args_escaped: config.args_escaped,
        image: config.image,
        volumes: config.volumes,
        working_dir: config.working_dir,
        entrypoint: config.entrypoint,
        network_disabled: config.network_disabled,
        labels: Some(labels),
        stop_signal: config.stop_signal,
        stop_timeout: config.stop_timeout,
        shell: config.shell,
        host_config,
        ..Default::default()
    }
}

/// The GPU device request of `hc` replaced by one for the GPUs `list` names (none for an
/// empty list), keeping the original's capabilities and options.
fn ask_gpus(hc: &mut HostConfig, list: Vec<String>) {
    let mut requests = hc.device_requests.take().unwrap_or_default();
    let old_gpu = requests.iter().position(is_gpu_request).map(|k| requests.remove(k));
    requests.retain(|r| !is_gpu_request(r));
    if !list.is_empty() {
        let old = old_gpu.unwrap_or_default();
        requests.push(DeviceRequest {
            driver: Some("nvidia".into()),
            count: None,
            device_ids: Some(list),
            capabilities: old.capabilities.filter(|c| !c.is_empty()).or_else(|| Some(vec![vec!["gpu".into()]])),
            options: old.options,
        });
    }
    hc.device_requests = (!requests.is_empty()).then_some(requests);
}

/// Set `key` in a container's environment to `value`, replacing any value it had; None
/// removes it.
fn set_var(env: &mut Option<Vec<String>>, key: &str, value: Option<String>) {
    let vars = env.get_or_insert_with(Vec::new);
    let prefix = format!("{key}=");
    vars.retain(|v| !v.starts_with(&prefix));
    if let Some(value) = value {
        vars.push(format!("{prefix}{value}"));
    }
}

/// Whether a device request asks for GPUs (`--gpus`, or the NVIDIA driver by name).
fn is_gpu_request(r: &DeviceRequest) -> bool {
    r.driver.as_deref() == Some("nvidia") || r.capabilities.iter().flatten().any(|and| and.iter().any(|c| c == "gpu"))
}

/// The GPUs a container's device requests give it, as indices on a node with `count` GPUs:
/// `--gpus all` is every one, `--gpus N` the first N (as the NVIDIA driver picks them),
/// `--gpus device=0,2` those named; names that are not indices (UUIDs) are not counted.
pub(super) fn gpus_of(host_config: Option<&bollard::models::HostConfig>, count: u32) -> Vec<u32> {
    let mut gpus: Vec<u32> = Vec::new();
    let requests = host_config.and_then(|hc| hc.device_requests.as_deref()).unwrap_or_default();
    for r in requests.iter().filter(|r| is_gpu_request(r)) {
        match (&r.device_ids, r.count) {
            (Some(ids), _) if !ids.is_empty() => {
                gpus.extend(ids.iter().filter_map(|d| d.trim().parse::<u32>().ok()).filter(|&g| g < count));
            }
            (_, Some(-1)) => gpus.extend(0..count),
            (_, Some(n)) if n > 0 => gpus.extend(0..(n as u32).min(count)),
            _ => {}
        }
    }
    gpus.sort_unstable();
    gpus.dedup();
    gpus
}

/// What a copy does: made from the original's config with its checkpoint folder carried, by
/// default on the original's engine, the original stopped first and the copy started
/// ([`Copy::of`]).
pub(super) struct Copy {
    /// The original's engine.
    from: Client,
    /// The copy's engine (the same client when it stays).
    to: Client,
    /// Whether `to` is another engine: the image is carried when it lacks it.
    moves: bool,
    /// The original's id.
    id: Arc<str>,
    /// The folder carried from the original to the copy.
    checkpoint: Option<String>,
    /// How the copy differs.
    changes: Changes,
    /// Stop the original first (it runs): its last checkpoint is final.
    stop: bool,
    /// Start the copy.
    start: bool,
}

impl Copy {
    /// A copy of container `id` on engine `from` with `changes`, carrying its `checkpoint`
    /// folder: on the same engine, the original stopped first, the copy started.
    pub(super) fn of(from: &Client, id: &Arc<str>, checkpoint: Option<String>, changes: Changes) -> Copy {
        let (from, id) = (from.clone(), id.clone());
        Copy { to: from.clone(), from, moves: false, id, checkpoint, changes, stop: true, start: true }
    }

    /// The copy made on engine `to`, another one when `moves`.
    pub(super) fn onto(self, to: Client, moves: bool) -> Copy {
        Copy { to, moves, ..self }
    }

    /// The original is queued (created, never run): nothing to stop.
    pub(super) fn of_queued(self) -> Copy {
        Copy { stop: false, ..self }
    }

    /// The copy waits, created and not started.
    pub(super) fn left_queued(self) -> Copy {
        Copy { start: false, ..self }
    }

    /// Make the copy and remove the original; the copy's id. When it fails after stopping
    /// the original, the original is started again (it resumes from its checkpoint) and the
    /// unfinished copy removed, so the job is where it was.
    pub(super) async fn run(self) -> Result<String, DockerError> {
        let (id, checkpoint) = (&self.id[..], self.checkpoint.as_deref());
        let info = self.from.inspect_container(id, None).await?;
        if self.moves {
            carry_image(&self.from, &self.to, info.config.as_ref().and_then(|c| c.image.as_deref()).unwrap_or(""))
                .await?;
        }
        if self.stop {
            let options = q::StopContainerOptions { t: Some(STOP_GRACE_S), signal: None };
            self.from.stop_container(id, Some(options)).await?;
        }
        let body = copy_body(&info, &self.changes);
        let made = async {
            let folder = match checkpoint {
                Some(path) => download(&self.from, id, path).await?,
                None => None,
            };
            let created = self.to.create_container(None::<q::CreateContainerOptions>, body).await?;
            let finished = async {
                if let (Some(tar), Some(path)) = (folder, checkpoint) {
                    upload(&self.to, &created.id, path, tar).await?;
                }
                if self.start {
                    self.to.start_container(&created.id, None).await?;
                }
                Ok::<_, DockerError>(())
            };
            if let Err(e) = finished.await {
                let _ = self.to.remove_container(&created.id, Some(force())).await;
                return Err(e);
            }
            Ok(created.id)
        };
        let new_id = match made.await {
            Ok(new_id) => new_id,
            Err(e) => {
                if self.stop {
                    let _ = self.from.start_container(id, None).await;
                }
                return Err(e);
            }
        };
        if let Err(e) = self.from.remove_container(id, Some(force())).await {
            // The copy is the job now; the next observation removes the original ([`settle`]).
            tracing::warn!(container = %super::short(id), "the original outlives its copy for now: {e}");
            return Ok(new_id);
        }
        if let Some(name) = info.name.as_deref().map(|n| n.trim_start_matches('/')).filter(|n| !n.is_empty()) {
            rename(&self.to, &new_id, name).await;
        }
        Ok(new_id)
    }
}

/// How a copy found at discovery was left.
#[derive(Debug, PartialEq)]
pub(super) enum Settled {
    /// The copy is the job (its original is gone, or was removed now).
    Keep,
    /// The copy was unfinished and has been removed; the original is the job.
    Dropped,
}

/// Finish, or undo, a copy that a host left half-made (see the module docs). `running`
/// says whether the copy runs; `original` is its [`REPLACES`] label.
pub(super) async fn settle(
    client: &Client,
    copy: &str,
    running: bool,
    original: &str,
    checkpoint: Option<&str>,
) -> Result<Settled, DockerError> {
    let info = match client.inspect_container(original, None).await {
        Ok(info) => info,
        Err(DockerError::DockerResponseServerError { status_code: 404, .. }) => return Ok(Settled::Keep),
        Err(e) => return Err(e),
    };
    let original_runs = info.state.as_ref().and_then(|s| s.running).unwrap_or(false);
    if !running && original_runs {
        client.remove_container(copy, Some(force())).await?;
        return Ok(Settled::Dropped);
    }
    if !running
        && let Some(path) = checkpoint
        && let Some(tar) = download(client, original, path).await?
    {
        upload(client, copy, path, tar).await?;
    }
    client.remove_container(original, Some(force())).await?;
    if let Some(name) = info.name.as_deref().map(|n| n.trim_start_matches('/')).filter(|n| !n.is_empty()) {
        rename(client, copy, name).await;
    }
    Ok(Settled::Keep)
}

fn force() -> q::RemoveContainerOptions {
    q::RemoveContainerOptions { force: true, ..Default::default() }
}

/// Give the copy the original's name; a failure only costs the name, so it is logged.
async fn rename(client: &Client, id: &str, name: &str) {
    let options = q::RenameContainerOptions { name: name.to_string() };
    if let Err(e) = client.rename_container(id, options).await {
        tracing::warn!(container = %super::short(id), name, "the copy keeps Docker's name for it: {e}");
    }
}

/// Load `image` on `to` from `from` when `to` lacks it.
async fn carry_image(from: &Client, to: &Client, image: &str) -> Result<(), DockerError> {
    if to.inspect_image(image).await.is_ok() {
        return Ok(());
    }
    let saved = collect(from.export_image(image)).await?;
    let mut load = to.import_image(q::ImportImageOptions::default(), bollard::body_full(saved.into()), None);
    while let Some(step) = load.next().await {
        step?;
    }
    Ok(())
}

/// The folder at `path` in a container, as a tar; None when it does not exist (yet).
async fn download(client: &Client, id: &str, path: &str) -> Result<Option<Vec<u8>>, DockerError> {
    let options = q::DownloadFromContainerOptions { path: path.to_string() };
    match collect(client.download_from_container(id, Some(options))).await {
        Ok(tar) => Ok(Some(tar)),
        Err(DockerError::DockerResponseServerError { status_code: 404, .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Unpack a folder downloaded from `path` back at `path` in container `id`.
async fn upload(client: &Client, id: &str, path: &str, tar: Vec<u8>) -> Result<(), DockerError> {
    let parent = std::path::Path::new(path).parent().map_or("/".into(), |p| p.display().to_string());
    let options = q::UploadToContainerOptions { path: parent, ..Default::default() };
    client.upload_to_container(id, Some(options), bollard::body_full(tar.into())).await
}

async fn collect<B: AsRef<[u8]>>(
    stream: impl futures_util::Stream<Item = Result<B, DockerError>>,
) -> Result<Vec<u8>, DockerError> {
    let mut stream = std::pin::pin!(stream);
    let mut all = Vec::new();
    while let Some(chunk) = stream.next().await {
        all.extend_from_slice(chunk?.as_ref());
    }
    Ok(all)
}

#[cfg(test)]
mod tests;
