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
use wasmsched_core::bindings::wit;
use wasmsched_core::live::carried::{batch_after_resize, resize_needs_checkpoint};
use wasmsched_core::live::effect;
use wasmsched_core::world::{JobId, JobState, NodeId, World};

/// What an action did; a copy is named by its container id.
pub(super) type Effect = effect::Effect<String>;

/// One action on its way.
pub(super) struct Ask {
    /// The container acted on.
    pub id: Arc<str>,
    /// The job.
    pub job: JobId,
    /// Whether it places the job (a refusal then keeps the default placement off it).
    pub places: bool,
    /// How long it may take before its engine counts as unreachable.
    pub limit: Duration,
    /// The request.
    pub fut: Request,
}

/// A request on its way to an engine.
type Request = BoxFuture<'static, Result<Effect, DockerError>>;

/// What every action's request starts from: the container, its engine and its checkpoint.
struct Target {
    client: Client,
    id: Arc<str>,
    /// Its engine.
    from: usize,
    checkpoint: Option<String>,
}

impl Target {
    /// A copy of the container with `changes`, made from its checkpoint on its own engine.
    fn copy(&self, changes: Changes) -> Copy {
        Copy::of(&self.client, &self.id, self.checkpoint.clone(), changes)
    }
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
        let timeout = self.config.timeout * 4;
        let copying = timeout + Duration::from_secs(STOP_GRACE_S as u64);
        // A stop waits up to its grace for the job to finish its step and checkpoint: the
        // client's own timeout must not end the request first (and call the engine gone).
        let client = client.with_timeout(copying);
        let t = Target { client, id: id.clone(), from: m.engine, checkpoint: m.job.checkpoint.clone() };
        let (cpu_all, memory_all) = self.engines[m.engine].capacity.unwrap_or((0, 0));
        let (limit, fut) = match &action.kind {
            wit::ActionKind::SetCpu(limit) => (timeout, set_cpu(t, *limit, cpu_all)),
            wit::ActionKind::SetMemory(limit) => (timeout, set_memory(t, *limit, memory_all)),
            wit::ActionKind::Place(p) => (copying, self.place(t, p)),
            wit::ActionKind::Resize(r) => (copying, self.resize(t, r, state)),
            wit::ActionKind::Preempt => (copying, preempt(t, m, state)),
            wit::ActionKind::Stop => (timeout, stop(t, state)),
            wit::ActionKind::Deliver => (timeout, deliver(t, m.job.deliver.clone())),
            wit::ActionKind::Migrate(to) => (copying, self.migrate(t, to.index(), state, there)),
            wit::ActionKind::SetGpuShare(share) => (copying, set_gpu_share(t, share.percent, state)),
        };
        let places = matches!(action.kind, wit::ActionKind::Place(_));
        Ask { id, job: m.job.handle, places, limit, fut }
    }

    /// Engine `to`'s client, when it answers.
    fn answering(&self, to: usize) -> Option<Client> {
        self.engines.get(to).filter(|e| e.down.is_none()).and_then(|e| e.client.clone())
    }

    /// Start a queued container on one engine and its GPUs there: as it is on its own engine
    /// without GPUs, else as a copy with a device request for exactly those GPUs.
    fn place(&self, t: Target, p: &wit::Placement) -> Request {
        let target = p.nodes.first().map(|n| (n.node.index(), n.gpus.clone()));
        let spread = p.nodes.len() > 1;
        let to_client = target.as_ref().and_then(|(to, _)| self.answering(*to));
        Box::pin(async move {
            let Some((to, gpus)) = target.filter(|_| !spread) else {
                return Err(refused(
                    "a container runs on one engine: place it on one node (Docker cannot split it into replicas)"
                        .into(),
                ));
            };
            if to == t.from && gpus.is_empty() {
                t.client.start_container(&t.id, None).await?;
                return Ok(Effect::Started { node: NodeId(to as u32), gpus, copy: None });
            }
            let Some(to_client) = to_client else {
                return Err(refused(format!("node {to} is an engine that does not answer")));
            };
            let changes = Changes { gpus: (!gpus.is_empty()).then(|| gpus.clone()), ..Changes::default() };
            let new_id = t.copy(changes).onto(to_client, to != t.from).of_queued().run().await?;
            Ok(Effect::Started { node: NodeId(to as u32), gpus, copy: Some(new_id) })
        })
    }

    /// Re-create a running container from its checkpoint on exactly the GPUs of one engine,
    /// at the batch size in force.
    fn resize(&self, t: Target, r: &wit::Resize, state: &JobState) -> Request {
        let target = match r.placement.nodes.as_slice() {
            _ if !state.is_running() => {
                Err("a queued container is placed, not resized: place it on the GPUs it should have".into())
            }
            _ if t.checkpoint.is_none() => {
                Err(resize_needs_checkpoint("the container", "label it with the folder it checkpoints to"))
            }
            [entry] => Ok((entry.node.index(), entry.gpus.clone())),
            spread => Err(format!(
                "a container runs on one engine and this resize spreads it over {}: resize it onto GPUs of a \
                 single node (Docker cannot split one container across engines)",
                spread.len()
            )),
        };
        let to_client = target.as_ref().ok().and_then(|(to, _)| self.answering(*to));
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
            let new_id = t.copy(changes).onto(to_client, to != t.from).run().await?;
            Ok(Effect::Moved { node: NodeId(to as u32), copy: new_id, gpus, resized: Some(batch_size) })
        })
    }

    /// Re-create a running container from its checkpoint on another engine, on as many GPUs
    /// there as it holds (`there`).
    fn migrate(&self, t: Target, to: usize, state: &JobState, there: Vec<u32>) -> Request {
        let target = self.answering(to);
        let held = state.gpus.len();
        Box::pin(async move {
            let Some(target) = target.filter(|_| to != t.from) else {
                return Err(refused(format!("node {to} is not another engine that answers")));
            };
            if there.len() < held {
                return Err(refused(format!(
                    "engine {to} has {} free GPUs and the container holds {held}: migrate it where as many are free",
                    there.len()
                )));
            }
            // Its GPUs there, not the indices it held on the engine it leaves.
            let changes = Changes { gpus: (held > 0).then(|| there.clone()), ..Changes::default() };
            let new_id = t.copy(changes).onto(target, true).run().await?;
            Ok(Effect::Moved { node: NodeId(to as u32), copy: new_id, gpus: there, resized: None })
        })
    }
}

/// `docker update` of the CPU limit (a lifted limit is the engine's whole capacity, `all`).
fn set_cpu(t: Target, limit: Option<u64>, all: u64) -> Request {
    Box::pin(async move {
        let nano = limit.unwrap_or(all).max(1) as i64 * 1_000_000;
        t.client.update_container(&t.id, ContainerUpdateBody { nano_cpus: Some(nano), ..Default::default() }).await?;
        Ok(Effect::Cpu(limit))
    })
}

/// `docker update` of the memory limit (a lifted limit is the engine's whole memory, `all`).
fn set_memory(t: Target, limit: Option<u64>, all: u64) -> Request {
    Box::pin(async move {
        let bytes = limit.unwrap_or(all) as i64;
        let body = ContainerUpdateBody { memory: Some(bytes), memory_swap: Some(-1), ..Default::default() };
        t.client.update_container(&t.id, body).await?;
        Ok(Effect::Memory(limit))
    })
}

/// Stop a running container and leave in its place a created copy that waits, preempted,
/// with its checkpoint folder and its attained service.
fn preempt(t: Target, m: &Managed, state: &JobState) -> Request {
    let changes = Changes {
        gpus: (m.job.gpus_asked > 0).then(Vec::new),
        preempted: true,
        service: Some((state.run_ms, state.gpu_ms)),
        // It leaves its GPUs, and its share with them.
        gpu_share: state.gpu_share_percent.map(|_| 100),
        ..Changes::default()
    };
    Box::pin(async move {
        if t.checkpoint.is_none() {
            return Err(refused(
                "the container declares no wasmsched.checkpoint folder, so a preemption would lose its progress; \
                 label it with the folder it checkpoints to"
                    .into(),
            ));
        }
        Ok(Effect::Requeued { copy: t.copy(changes).left_queued().run().await? })
    })
}

/// Stop a running container; remove a queued one.
fn stop(t: Target, state: &JobState) -> Request {
    let queued = !state.is_running();
    Box::pin(async move {
        if queued {
            let options = q::RemoveContainerOptions { force: true, ..Default::default() };
            t.client.remove_container(&t.id, Some(options)).await?;
            return Ok(Effect::Removed);
        }
        t.client.stop_container(&t.id, Some(q::StopContainerOptions { t: Some(10), signal: None })).await?;
        Ok(Effect::Done)
    })
}

/// Run the container's declared delivery command, if it declares one.
fn deliver(t: Target, command: Option<Vec<String>>) -> Request {
    Box::pin(async move {
        match command {
            Some(cmd) => run_in(&t.client, &t.id, cmd).await,
            None => Ok(Effect::Done),
        }
    })
}

/// Re-create a container with its GPU share at `percent`: MPS reads the percentage once, when
/// the CUDA process starts, so a new share is a new container, resumed from the checkpoint.
fn set_gpu_share(t: Target, percent: u8, state: &JobState) -> Request {
    let (holds_gpus, now) = (!state.gpus.is_empty(), state.gpu_share_percent);
    Box::pin(async move {
        if !holds_gpus {
            return Err(refused("the container holds no GPU to share".into()));
        }
        if now == Some(percent) {
            return Ok(Effect::Done);
        }
        let changes = Changes { gpu_share: Some(percent), ..Changes::default() };
        Ok(Effect::Shared { copy: t.copy(changes).run().await?, percent })
    })
}

impl Docker {
    /// Put what the action on container `id` did into the world and the books.
    pub(super) fn took_effect(&mut self, id: &Arc<str>, job: JobId, effect: Effect, world: &mut World) {
        match &effect {
            Effect::Cpu(_)
            | Effect::Memory(_)
            | Effect::Done
            | Effect::StartedSpread { .. }
            | Effect::MovedSpread { .. } => {}
            Effect::Started { node, gpus, copy } => {
                let new_id: Arc<str> = copy.as_deref().map_or_else(|| id.clone(), Arc::from);
                let Some(mut m) = self.jobs.remove(id) else { return };
                tracing::info!(%job, container = %short(&new_id), %node, ?gpus, copied = *id != new_id, "placed");
                m.engine = node.index();
                m.job.refused = None;
                m.last_cpu = None;
                m.follower = self.follow(m.engine, &new_id, &m);
                self.jobs.insert(new_id, m);
            }
            Effect::Moved { node, gpus, copy, resized } => {
                let Some(mut m) = self.hand_over(id, copy, world) else { return };
                match resized {
                    Some(batch_size) => {
                        tracing::info!(%job, from = %short(id), to = %short(copy), %node, ?gpus, ?batch_size, "resized: re-created from its checkpoint");
                        m.job.gpus_asked = gpus.len() as u32;
                    }
                    None => {
                        tracing::info!(%job, from = %short(id), to = %short(copy), %node, ?gpus, "migrated from its checkpoint")
                    }
                }
                m.engine = node.index();
                self.resume(copy, m, true);
            }
            Effect::Shared { copy, percent } => {
                let Some(m) = self.hand_over(id, copy, world) else { return };
                tracing::info!(%job, from = %short(id), to = %short(copy), percent, "GPU share set: re-created from its checkpoint");
                self.resume(copy, m, true);
            }
            Effect::Requeued { copy } => {
                let Some(m) = self.hand_over(id, copy, world) else { return };
                tracing::info!(%job, from = %short(id), to = %short(copy), "preempted: waits with its checkpoint");
                self.resume(copy, m, false);
            }
            Effect::Removed => {
                self.jobs.remove(id);
                tracing::info!(%job, container = %short(id), "removed a queued container");
            }
        }
        effect.update(job, world);
    }

    /// Manage container `new_id` as the job's entry `m`; its log is followed from its start
    /// when it `runs`.
    fn resume(&mut self, new_id: &str, mut m: Managed, runs: bool) {
        if runs {
            m.job.last_line_ns = Arc::default();
            m.follower = self.follow(m.engine, new_id, &m);
        }
        self.jobs.insert(Arc::from(new_id), m);
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
