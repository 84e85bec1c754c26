//! Putting actions into force: the request each action becomes, and what the world learns
//! when it succeeds. Placement, preemption, migration, resize and delivery are the long ones;
//! the first four make a copy of the container ([`super::copy`]).

use std::sync::Arc;
use std::time::Duration;

use bollard::Docker as Client;
use bollard::errors::Error as DockerError;
use bollard::models::ContainerUpdateBody;
use bollard::query_parameters as q;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;

use super::copy::{Changes, Copy, STOP_GRACE_S};
use super::{Docker, Managed, short};
use crate::backend::carried::{batch_after_resize, resize_needs_checkpoint};
use crate::bindings::wit;
use crate::world::{GpuSlot, JobState, World};

/// What an action did, for the world's bookkeeping.
pub(super) enum Effect {
    Cpu(Option<u64>),
    Memory(Option<u64>),
    Done,
    /// A running container was re-created as `new_id` on engine `to`, on `gpus` there.
    Moved {
        to: usize,
        new_id: String,
        gpus: Vec<u32>,
    },
    /// A running container was re-created as `new_id` on engine `to`, on `gpus` there, at
    /// batch size `batch_size` (None: the one it had).
    Resized {
        to: usize,
        new_id: String,
        gpus: Vec<u32>,
        batch_size: Option<u32>,
    },
    /// A queued container started on `engine` with `gpus`, as a copy when `new_id` is set.
    Started {
        engine: usize,
        gpus: Vec<u32>,
        new_id: Option<String>,
    },
    /// A running container was stopped and waits again, as the created copy `new_id`.
    Requeued {
        new_id: String,
    },
    /// A queued container was removed (stopped before it ever ran again).
    Removed,
    /// A running container was re-created as `new_id` with its GPU share at `percent`.
    Shared {
        new_id: String,
        percent: u8,
    },
}

/// One action on its way.
pub(super) struct Ask {
    /// The container acted on.
    pub id: Arc<str>,
    /// The job.
    pub job: u32,
    /// Whether it places the job (a refusal then keeps the default placement off it).
    pub places: bool,
    /// How long it may take before its engine counts as unreachable.
    pub limit: Duration,
    /// The request.
    pub fut: BoxFuture<'static, Result<Effect, DockerError>>,
}

impl Docker {
    /// The request that puts one action into force on job `state`, held by container `id`;
    /// a migration takes the job to `there` ([`World::gpus_after_migration`]).
    pub(super) fn act(
        &self,
        client: Client,
        id: Arc<str>,
        m: &Managed,
        action: &wit::Action,
        state: &JobState,
        there: Vec<u32>,
    ) -> Ask {
        let (cpu_all, memory_all) = self.engines[m.engine].capacity.unwrap_or((0, 0));
        let timeout = self.config.timeout * 4;
        let copying = timeout + Duration::from_secs(STOP_GRACE_S as u64);
        let answering = |to: usize| self.engines.get(to).filter(|e| e.down.is_none()).and_then(|e| e.client.clone());
        let key = id.clone();
        let (from, checkpoint) = (m.engine, m.checkpoint.clone());
        let mut allowed = timeout;
        let fut: BoxFuture<'static, Result<Effect, DockerError>> = match action.kind {
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
            wit::ActionKind::Place(ref p) => {
                allowed = copying;
                let target = p.nodes.first().map(|n| (n.node as usize, n.gpus.clone()));
                let spread = p.nodes.len() > 1;
                let to_client = target.as_ref().and_then(|(to, _)| answering(*to));
                Box::pin(async move {
                    let Some((to, gpus)) = target.filter(|_| !spread) else {
                        return Err(refused(
                            "a container runs on one engine: place it on one node (Docker cannot split it into replicas)"
                                .into(),
                        ));
                    };
                    if to == from && gpus.is_empty() {
                        client.start_container(&id, None).await?;
                        return Ok(Effect::Started { engine: to, gpus, new_id: None });
                    }
                    let Some(to_client) = to_client else {
                        return Err(refused(format!("node {to} is an engine that does not answer")));
                    };
                    let changes = Changes { gpus: (!gpus.is_empty()).then(|| gpus.clone()), ..Changes::default() };
                    let copy = Copy {
                        from: &client,
                        to: &to_client,
                        moves: to != from,
                        id: &id,
                        checkpoint: checkpoint.as_deref(),
                        changes,
                        stop: false,
                        start: true,
                    };
                    let new_id = copy.run().await?;
                    Ok(Effect::Started { engine: to, gpus, new_id: Some(new_id) })
                })
            }
            wit::ActionKind::Resize(ref r) => {
                allowed = copying;
                let target = match r.placement.nodes.as_slice() {
                    _ if !state.is_running() => {
                        Err("a queued container is placed, not resized: place it on the GPUs it should have".into())
                    }
                    _ if checkpoint.is_none() => {
                        Err(resize_needs_checkpoint("the container", "label it with the folder it checkpoints to"))
                    }
                    [entry] => Ok((entry.node as usize, entry.gpus.clone())),
                    spread => Err(format!(
                        "a container runs on one engine and this resize spreads it over {}: resize it onto GPUs of a \
                         single node (Docker cannot split one container across engines)",
                        spread.len()
                    )),
                };
                let to_client = target.as_ref().ok().and_then(|(to, _)| answering(*to));
                let batch_size = batch_after_resize(r.batch_size, state.batch_size);
                Box::pin(async move {
                    let (to, gpus) = target.map_err(refused)?;
                    let Some(to_client) = to_client else {
                        return Err(refused(format!("node {to} is an engine that does not answer")));
                    };
                    let changes = Changes {
                        gpus: Some(gpus.clone()),
                        asks_gpus: Some(gpus.len() as u32),
                        batch_size,
                        ..Changes::default()
                    };
                    let copy = Copy {
                        from: &client,
                        to: &to_client,
                        moves: to != from,
                        id: &id,
                        checkpoint: checkpoint.as_deref(),
                        changes,
                        stop: true,
                        start: true,
                    };
                    Ok(Effect::Resized { to, new_id: copy.run().await?, gpus, batch_size })
                })
            }
            wit::ActionKind::Preempt => {
                allowed = copying;
                let changes = Changes {
                    gpus: (m.gpus_asked > 0).then(Vec::new),
                    preempted: true,
                    service: Some((state.run_ms, state.gpu_ms)),
                    // It leaves its GPUs, and its share with them.
                    gpu_share: state.gpu_share_percent.map(|_| 100),
                    ..Changes::default()
                };
                Box::pin(async move {
                    let Some(checkpoint) = checkpoint else {
                        return Err(refused(
                            "the container declares no wasmsched.checkpoint folder, so a preemption would lose its \
                             progress; label it with the folder it checkpoints to"
                                .into(),
                        ));
                    };
                    let copy = Copy {
                        from: &client,
                        to: &client,
                        moves: false,
                        id: &id,
                        checkpoint: Some(&checkpoint),
                        changes,
                        stop: true,
                        start: false,
                    };
                    Ok(Effect::Requeued { new_id: copy.run().await? })
                })
            }
            wit::ActionKind::Stop if !state.is_running() => Box::pin(async move {
                let options = q::RemoveContainerOptions { force: true, ..Default::default() };
                client.remove_container(&id, Some(options)).await?;
                Ok(Effect::Removed)
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
                allowed = copying;
                let to = to as usize;
                let target = answering(to);
                let held = state.gpus.len();
                Box::pin(async move {
                    let Some(target) = target.filter(|_| to != from) else {
                        return Err(refused(format!("node {to} is not another engine that answers")));
                    };
                    if there.len() < held {
                        return Err(refused(format!(
                            "engine {to} has {} free GPUs and the container holds {held}: migrate it where as many \
                             are free",
                            there.len()
                        )));
                    }
                    // Its GPUs there, not the indices it held on the engine it leaves.
                    let changes = Changes { gpus: (held > 0).then(|| there.clone()), ..Changes::default() };
                    let copy = Copy {
                        from: &client,
                        to: &target,
                        moves: true,
                        id: &id,
                        checkpoint: checkpoint.as_deref(),
                        changes,
                        stop: true,
                        start: true,
                    };
                    Ok(Effect::Moved { to, new_id: copy.run().await?, gpus: there })
                })
            }
            wit::ActionKind::SetGpuShare(share) => {
                allowed = copying;
                let (holds_gpus, now) = (!state.gpus.is_empty(), state.gpu_share_percent);
                Box::pin(async move {
                    if !holds_gpus {
                        return Err(refused("the container holds no GPU to share".into()));
                    }
                    if now == Some(share.percent) {
                        return Ok(Effect::Done);
                    }
                    // MPS reads the percentage once, when the CUDA process starts: a new share
                    // is a new container, resumed from the checkpoint, like a migration.
                    let changes = Changes { gpu_share: Some(share.percent), ..Changes::default() };
                    let copy = Copy {
                        from: &client,
                        to: &client,
                        moves: false,
                        id: &id,
                        checkpoint: checkpoint.as_deref(),
                        changes,
                        stop: true,
                        start: true,
                    };
                    Ok(Effect::Shared { new_id: copy.run().await?, percent: share.percent })
                })
            }
        };
        let places = matches!(action.kind, wit::ActionKind::Place(_));
        Ask { id: key, job: m.handle, places, limit: allowed, fut }
    }

    /// Container `id`'s running copy `new_id` carries its job on, on engine `to` and its GPUs
    /// there (None: the same engine and GPUs); false when the job is gone.
    fn resumed_copy(&mut self, id: &Arc<str>, new_id: &str, to: Option<(usize, &[u32])>, world: &mut World) -> bool {
        let Some(mut m) = self.hand_over(id, new_id, world) else { return false };
        let job = m.handle;
        m.engine = to.map_or(m.engine, |(engine, _)| engine);
        m.last_line_ns = Arc::default();
        m.follower = self.follow(m.engine, new_id, &m);
        if let Some(s) = world.state_mut(job) {
            s.node = m.engine as u32;
            if let Some((_, gpus)) = to {
                s.gpus = gpus.iter().map(|&index| GpuSlot { node: s.node, index }).collect();
            }
        }
        self.jobs.insert(Arc::from(new_id), m);
        true
    }

    pub(super) fn took_effect(&mut self, id: &Arc<str>, job: u32, effect: Effect, world: &mut World) {
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
            Effect::Moved { to, new_id, gpus } => {
                if self.resumed_copy(id, &new_id, Some((to, &gpus)), world) {
                    tracing::info!(job, from = %short(id), to = %short(&new_id), node = to, ?gpus, "migrated from its checkpoint");
                }
            }
            Effect::Resized { to, new_id, gpus, batch_size } => {
                if self.resumed_copy(id, &new_id, Some((to, &gpus)), world) {
                    tracing::info!(job, from = %short(id), to = %short(&new_id), node = to, ?gpus, ?batch_size, "resized: re-created from its checkpoint");
                    if let Some(m) = self.jobs.get_mut(new_id.as_str()) {
                        m.gpus_asked = gpus.len() as u32;
                    }
                    if let Some(s) = world.state_mut(job) {
                        s.batch_size = batch_size.unwrap_or(s.batch_size);
                    }
                }
            }
            Effect::Shared { new_id, percent } => {
                if self.resumed_copy(id, &new_id, None, world) {
                    tracing::info!(job, from = %short(id), to = %short(&new_id), percent, "GPU share set: re-created from its checkpoint");
                    if let Some(s) = world.state_mut(job) {
                        s.gpu_share_percent = Some(percent).filter(|&p| p < 100);
                    }
                }
            }
            Effect::Started { engine, gpus, new_id } => {
                let new_id: Arc<str> = new_id.map_or_else(|| id.clone(), |n| Arc::from(n.as_str()));
                let Some(mut m) = self.jobs.remove(id) else { return };
                tracing::info!(job, container = %short(&new_id), node = engine, ?gpus, copied = *id != new_id, "placed");
                m.engine = engine;
                m.refused = None;
                m.last_cpu = None;
                m.follower = self.follow(engine, &new_id, &m);
                self.jobs.insert(new_id, m);
                let slots = gpus.iter().map(|&index| GpuSlot { node: engine as u32, index }).collect();
                world.start_job(job, engine as u32, slots);
            }
            Effect::Requeued { new_id } => {
                let Some(m) = self.hand_over(id, &new_id, world) else { return };
                tracing::info!(job, from = %short(id), to = %short(&new_id), "preempted: waits with its checkpoint");
                self.jobs.insert(Arc::from(new_id.as_str()), m);
                world.requeue_job(job, wit::WaitReason::Preempted);
            }
            Effect::Removed => {
                self.jobs.remove(id);
                world.remove_job(job);
                tracing::info!(job, container = %short(id), "removed a queued container");
            }
        }
    }

    /// Container `id` has stopped and `new_id` carries its job on: its follower reads to the
    /// end of its log, and those last records are handed over before the job changes id.
    /// Returns the job's entry, taken out under the old id.
    fn hand_over(&mut self, id: &Arc<str>, new_id: &str, world: &mut World) -> Option<Managed> {
        if let Some(f) = self.jobs.get_mut(id).and_then(|m| m.follower.take()) {
            let _ = self.rt.block_on(async { tokio::time::timeout(Duration::from_millis(300), f).await });
        }
        self.deliver_progress(world, world.time_ms());
        let mut m = self.jobs.remove(id)?;
        debug_assert_ne!(&**id, new_id, "a copy has an id of its own");
        m.last_cpu = None;
        if let Some(s) = world.state_mut(m.handle) {
            s.cpu_used_millicores = 0;
        }
        Some(m)
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
