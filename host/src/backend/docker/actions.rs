//! Putting actions into force: the request each action becomes, and what the world learns
//! when it succeeds. Migration and delivery are the long ones.

use std::sync::Arc;
use std::time::Duration;

use bollard::Docker as Client;
use bollard::errors::Error as DockerError;
use bollard::models::{ContainerCreateBody, ContainerUpdateBody};
use bollard::query_parameters as q;
use futures_util::StreamExt;

use super::{Docker, Managed, short};
use crate::bindings::wit;
use crate::declare;
use crate::snapshot::Telemetry;

/// What an action did, for the world's bookkeeping.
pub(super) enum Effect {
    Cpu(Option<u64>),
    Memory(Option<u64>),
    Done,
    Moved { to: usize, new_id: String },
}

/// One action on its way: the container, the job, and the request.
pub(super) type Ask = (Arc<str>, u32, futures_util::future::BoxFuture<'static, Result<Effect, DockerError>>);

impl Docker {
    /// The request that puts one action into force.
    pub(super) fn act(&self, client: Client, id: Arc<str>, m: &Managed, kind: &wit::ActionKind) -> Ask {
        let (cpu_all, memory_all) = self.engines[m.engine].capacity.unwrap_or((0, 0));
        let job = m.handle;
        let key = id.clone();
        let fut: futures_util::future::BoxFuture<'static, Result<Effect, DockerError>> = match *kind {
            wit::ActionKind::SetCpu(limit) => Box::pin(async move {
                let nano = limit.unwrap_or(cpu_all).max(1) as i64 * 1_000_000;
                client
                    .update_container(&id, ContainerUpdateBody { nano_cpus: Some(nano), ..Default::default() })
                    .await?;
                Ok(Effect::Cpu(limit))
            }),
            wit::ActionKind::SetMemory(limit) => Box::pin(async move {
                let bytes = limit.unwrap_or(memory_all) as i64;
                let body = ContainerUpdateBody { memory: Some(bytes), memory_swap: Some(-1), ..Default::default() };
                client.update_container(&id, body).await?;
                Ok(Effect::Memory(limit))
            }),
            wit::ActionKind::Place(_) | wit::ActionKind::Preempt => Box::pin(async move {
                Err(DockerError::DockerResponseServerError {
                    status_code: 501,
                    message: "this backend does not place or preempt containers yet".into(),
                })
            }),
            wit::ActionKind::Stop => Box::pin(async move {
                client.stop_container(&id, Some(q::StopContainerOptions { t: Some(10), signal: None })).await?;
                Ok(Effect::Done)
            }),
            wit::ActionKind::Deliver => {
                let command = m.deliver.clone();
                Box::pin(async move {
                    match command {
                        Some(cmd) => run_in(&client, &id, cmd).await,
                        None => Ok(Effect::Done),
                    }
                })
            }
            wit::ActionKind::Migrate(to) => {
                let to = to as usize;
                let target = self.engines.get(to).filter(|e| e.down.is_none()).and_then(|e| e.client.clone());
                let checkpoint = m.checkpoint.clone();
                let from = m.engine;
                Box::pin(async move {
                    let Some(target) = target.filter(|_| to != from) else {
                        return Err(refused(format!("node {to} is not another engine that answers")));
                    };
                    let new_id = migrate(&client, &target, &id, checkpoint.as_deref()).await?;
                    Ok(Effect::Moved { to, new_id })
                })
            }
            wit::ActionKind::SetGpuShare(_) => Box::pin(async move {
                Err(refused("Docker cannot cap a container's GPU share; use a GPU-sharing runtime".into()))
            }),
        };
        (key, job, fut)
    }

    pub(super) fn took_effect(&mut self, id: &Arc<str>, job: u32, effect: Effect, world: &mut Telemetry) {
        match effect {
            Effect::Cpu(limit) => {
                if let Some(s) = world.state_mut(job) {
                    s.cpu_limit_millicores = limit;
                }
            }
            Effect::Memory(limit) => {
                if let Some(s) = world.state_mut(job) {
                    s.memory_limit_bytes = limit;
                }
            }
            Effect::Done => {}
            Effect::Moved { to, new_id } => {
                // The old container has stopped: its follower reads to the end of its log, and
                // those last records are handed over before the job moves to its new id.
                if let Some(f) = self.jobs.get_mut(id).and_then(|m| m.follower.take()) {
                    let _ = self.rt.block_on(async { tokio::time::timeout(Duration::from_millis(300), f).await });
                }
                self.deliver_progress(world, world.time_ms());
                let Some(mut m) = self.jobs.remove(id) else { return };
                tracing::info!(job, from = %short(id), to = %short(&new_id), node = to, "migrated from its checkpoint");
                m.engine = to;
                m.last_cpu = None;
                m.last_line_ns = Arc::default();
                m.follower = self.follow(to, &new_id, &m);
                self.jobs.insert(Arc::from(new_id.as_str()), m);
                if let Some(s) = world.state_mut(job) {
                    s.node = to as u32;
                    s.cpu_used_millicores = 0;
                }
            }
        }
    }
}

/// An engine's refusal, in bollard's terms, for a request we would not make.
fn refused(message: String) -> DockerError {
    DockerError::DockerResponseServerError { status_code: 400, message }
}

/// Run the delivery command in the container and wait for it; a non-zero exit is an error.
async fn run_in(client: &Client, id: &str, cmd: Vec<String>) -> Result<Effect, DockerError> {
    use bollard::exec::{CreateExecOptions, StartExecResults};
    let exec = client
        .create_exec(
            id,
            CreateExecOptions {
                cmd: Some(cmd.clone()),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                ..Default::default()
            },
        )
        .await?;
    let mut last = String::new();
    if let StartExecResults::Attached { mut output, .. } = client.start_exec(&exec.id, None).await? {
        while let Some(Ok(chunk)) = output.next().await {
            let text = String::from_utf8_lossy(&chunk.into_bytes()).trim().to_string();
            if !text.is_empty() {
                last = text;
            }
        }
    }
    match client.inspect_exec(&exec.id).await?.exit_code {
        Some(0) | None => Ok(Effect::Done),
        Some(code) => Err(refused(format!("delivery command {} exited with {code}: {last}", cmd.join(" ")))),
    }
}

/// Restart a container on another engine from its checkpoint folder: stop it (its last
/// checkpoint is final), copy the folder out, create the same container on the target
/// (loading the image there first if it lacks it), copy the folder in, start it, and remove
/// the old one. Returns the new container's id.
async fn migrate(from: &Client, to: &Client, id: &str, checkpoint: Option<&str>) -> Result<String, DockerError> {
    let info = from.inspect_container(id, None).await?;
    let config = info.config.unwrap_or_default();
    let image = config.image.clone().unwrap_or_default();
    if to.inspect_image(&image).await.is_err() {
        let saved = collect(from.export_image(&image)).await?;
        let mut load = to.import_image(q::ImportImageOptions::default(), bollard::body_full(saved.into()), None);
        while let Some(step) = load.next().await {
            step?;
        }
    }
    from.stop_container(id, Some(q::StopContainerOptions { t: Some(30), signal: None })).await?;
    let folder = match checkpoint {
        Some(path) => {
            let options = q::DownloadFromContainerOptions { path: path.to_string() };
            Some(collect(from.download_from_container(id, Some(options))).await?)
        }
        None => None,
    };
    let mut labels = config.labels.unwrap_or_default();
    labels.insert(format!("{}migrated-from", declare::PREFIX), id.to_string());
    let body = ContainerCreateBody {
        image: Some(image),
        cmd: config.cmd,
        entrypoint: config.entrypoint,
        env: config.env,
        working_dir: config.working_dir,
        labels: Some(labels),
        host_config: info.host_config,
        ..Default::default()
    };
    let name = info.name.map(|n| n.trim_start_matches('/').to_string());
    let created = to.create_container(Some(q::CreateContainerOptions { name, ..Default::default() }), body).await?;
    if let (Some(tar), Some(path)) = (folder, checkpoint) {
        let parent = std::path::Path::new(path).parent().map_or("/".into(), |p| p.display().to_string());
        let options = q::UploadToContainerOptions { path: parent, ..Default::default() };
        to.upload_to_container(&created.id, Some(options), bollard::body_full(tar.into())).await?;
    }
    to.start_container(&created.id, None).await?;
    from.remove_container(id, None).await?;
    Ok(created.id)
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
