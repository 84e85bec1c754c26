//! Putting actions into force on pods: the request each action becomes, and what the world
//! learns when it succeeds. A preemption or a migration re-creates the pod: copy (unbound) →
//! delete the original → wait until it is gone → (bind the copy to the target node).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{AttachParams, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::pod::{self, Resource};
use super::{Kubernetes, within};
use crate::backend::ApplyError;
use crate::bindings::wit;
use crate::world::World;

/// What an action did, for the world's bookkeeping.
enum Effect {
    Cpu(Option<u64>),
    Memory(Option<u64>),
    Done,
    /// A queued pod was bound to node `node`.
    Started {
        node: usize,
        gpus: Vec<u32>,
    },
    /// The job runs on as pod `uid` (`name`), bound to `node`.
    Moved {
        node: usize,
        uid: String,
        name: String,
    },
    /// The job waits again as the unbound pod `uid` (`name`).
    Requeued {
        uid: String,
        name: String,
    },
    /// A queued pod was deleted.
    Removed,
}

/// Why an action failed: Kubernetes refused it, the host declined it before asking (it names
/// a NotReady node, say: nothing about the pod itself), or no answer.
enum Failure {
    Refused(String),
    Declined(String),
    Unreachable(String),
}

impl From<kube::Error> for Failure {
    fn from(e: kube::Error) -> Failure {
        match e {
            kube::Error::Api(status) if status.code == 404 => Failure::Refused("the pod is gone".into()),
            kube::Error::Api(status) => Failure::Refused(status.message),
            other => Failure::Unreachable(format!("the apiserver does not answer: {other}")),
        }
    }
}

type Ask = BoxFuture<'static, Result<Effect, Failure>>;

impl Kubernetes {
    /// Put `actions` into force at once (concurrently); the ones that failed.
    pub(super) fn apply_some(&mut self, actions: &[&wit::Action], world: &mut World) -> Vec<ApplyError> {
        let mut errors = Vec::new();
        let mut asks = Vec::new();
        for action in actions {
            let found = self.uid_of(action.job).and_then(|uid| {
                let p = self.pods.state().into_iter().find(|p| p.metadata.uid.as_deref() == Some(&*uid))?;
                Some((uid, p))
            });
            let (Some((uid, p)), Some(state)) = (found, world.state(action.job)) else {
                errors.push(ApplyError { job: action.job, reason: "the pod is no longer managed".into() });
                continue;
            };
            let places = matches!(action.kind, wit::ActionKind::Place(_));
            let ask = self.act(&p, action, state);
            asks.push(async move { (uid, action.job, places, ask.await) });
        }
        for (uid, job, places, result) in self.rt.block_on(futures_util::future::join_all(asks)) {
            match result {
                Ok(effect) => self.took_effect(&uid, job, effect, world),
                Err(Failure::Refused(reason)) => {
                    if let Some(m) = self.jobs.get_mut(&uid).filter(|_| places) {
                        m.refused = Some(reason.clone());
                    }
                    errors.push(ApplyError { job, reason });
                }
                Err(Failure::Declined(reason) | Failure::Unreachable(reason)) => {
                    errors.push(ApplyError { job, reason })
                }
            }
        }
        errors
    }

    /// The request that puts one action into force on pod `p`, job `state`.
    fn act(&self, p: &Pod, action: &wit::Action, state: &crate::world::JobState) -> Ask {
        let api = self.pods_api();
        let name = p.metadata.name.clone().unwrap_or_default();
        let limit = self.config.timeout;
        let node_of = |i: u32| self.nodes.get(i as usize).map(|n| (n.name.clone(), n.ready));
        let capacity = self.nodes.get(state.node as usize).map_or((0, 0), |n| (n.cpu_millicores, n.memory_bytes));
        let refuse = |why: String| -> Ask { Box::pin(async move { Err(Failure::Declined(why)) }) };
        match &action.kind {
            wit::ActionKind::SetCpu(m) | wit::ActionKind::SetMemory(m) => {
                let (resource, all) = match action.kind {
                    wit::ActionKind::SetCpu(_) => (Resource::Cpu, capacity.0),
                    _ => (Resource::Memory, capacity.1),
                };
                if !state.is_running() {
                    return refuse("a queued pod has no limits in force to resize; it gets its own when bound".into());
                }
                let patch = match pod::resize(p, resource, m.unwrap_or(all).max(1)) {
                    Ok(patch) => patch,
                    Err(why) => return refuse(why),
                };
                let limit_asked = *m;
                Box::pin(async move {
                    let params = PatchParams::default();
                    within(limit, api.patch_subresource("resize", &name, &params, &Patch::Strategic(patch))).await?;
                    Ok(match resource {
                        Resource::Cpu => Effect::Cpu(limit_asked),
                        Resource::Memory => Effect::Memory(limit_asked),
                    })
                })
            }
            wit::ActionKind::Place(placement) => {
                let [target] = placement.nodes.as_slice() else {
                    return refuse("a pod runs on one node: place it on one (Kubernetes cannot split it)".into());
                };
                let Some((node, ready)) = node_of(target.node) else {
                    return refuse(format!("node {} is not in the cluster", target.node));
                };
                if !ready {
                    return refuse(format!("node {node} is NotReady"));
                }
                let (to, gpus) = (target.node as usize, target.gpus.clone());
                Box::pin(async move {
                    within(limit, bind(&api, &name, &node)).await?;
                    Ok(Effect::Started { node: to, gpus })
                })
            }
            wit::ActionKind::Preempt | wit::ActionKind::Migrate(_) => {
                let Some(m) = self.uid_of(action.job).and_then(|uid| self.jobs.get(&uid)) else {
                    return refuse("the pod is no longer managed".into());
                };
                let target = match action.kind {
                    wit::ActionKind::Migrate(to) => match node_of(to) {
                        Some((node, true)) if to != state.node => Some((to as usize, node)),
                        Some((node, true)) => return refuse(format!("the pod already runs on node {node}")),
                        Some((node, false)) => return refuse(format!("node {node} is NotReady")),
                        None => return refuse(format!("node {to} is not in the cluster")),
                    },
                    _ => None,
                };
                match (&m.checkpoint, target.is_none()) {
                    (None, true) => {
                        return refuse(
                            "the pod declares no wasmsched.checkpoint folder, so a preemption would lose its \
                             progress; annotate it with the folder it checkpoints to, on a volume that outlives it"
                                .into(),
                        );
                    }
                    (Some(folder), _) => {
                        if let Err(why) = pod::checkpoint_survives(p, folder) {
                            return refuse(why);
                        }
                    }
                    (None, false) => {}
                }
                let changes = pod::Changes {
                    scheduler: self.config.scheduler.clone(),
                    preempted: target.is_none(),
                    service: (state.run_ms, state.gpu_ms),
                    arrived_unix_ms: m.arrived_unix_ms,
                };
                let copy = pod::copy(p, &changes);
                let original_uid = p.metadata.uid.clone().unwrap_or_default();
                let grace =
                    p.spec.as_ref().and_then(|s| s.termination_grace_period_seconds).unwrap_or(30).clamp(0, 600);
                Box::pin(async move {
                    let made = within(limit, api.create(&PostParams::default(), &copy)).await?;
                    let (uid, new_name) =
                        (made.metadata.uid.unwrap_or_default(), made.metadata.name.unwrap_or_default());
                    within(limit, api.delete(&name, &DeleteParams::default())).await?;
                    let patience = limit + Duration::from_secs(grace as u64 + 30);
                    gone(&api, &name, &original_uid, patience).await?;
                    match target {
                        Some((to, node)) => {
                            within(limit, bind(&api, &new_name, &node)).await?;
                            Ok(Effect::Moved { node: to, uid, name: new_name })
                        }
                        None => Ok(Effect::Requeued { uid, name: new_name }),
                    }
                })
            }
            wit::ActionKind::Stop => {
                let queued = !state.is_running();
                Box::pin(async move {
                    within(limit, api.delete(&name, &DeleteParams::default())).await?;
                    Ok(if queued { Effect::Removed } else { Effect::Done })
                })
            }
            wit::ActionKind::Deliver => {
                let command = self.uid_of(action.job).and_then(|uid| self.jobs.get(&uid)?.deliver.clone());
                let container = pod::main_container(p).map(|c| c.name.clone());
                Box::pin(async move {
                    match command {
                        Some(cmd) => run_in(&api, &name, container, cmd, limit * 4).await,
                        None => Ok(Effect::Done),
                    }
                })
            }
            wit::ActionKind::SetGpuShare(_) => refuse(
                "Kubernetes gives a pod whole GPUs through the device plugin; it cannot cap a pod's GPU share".into(),
            ),
        }
    }

    fn took_effect(&mut self, uid: &Arc<str>, job: u32, effect: Effect, world: &mut World) {
        match effect {
            Effect::Cpu(limit) => {
                if let Some(s) = world.state_mut(job) {
                    s.cpu_limit_millicores = limit;
                }
                self.follow_anew(uid);
            }
            Effect::Memory(limit) => {
                if let Some(s) = world.state_mut(job) {
                    s.memory_limit_bytes = limit;
                }
                self.follow_anew(uid);
            }
            Effect::Done => {}
            Effect::Started { node, gpus } => {
                let Some(m) = self.jobs.get_mut(uid) else { return };
                m.refused = None;
                tracing::info!(job, pod = %m.name, node = %self.nodes[node].name, ?gpus, "bound");
                let slots = gpus.iter().map(|&index| crate::world::GpuSlot { node: node as u32, index }).collect();
                world.start_job(job, node as u32, slots);
            }
            Effect::Moved { node, uid: new_uid, name } => {
                let Some(mut m) = self.hand_over(uid, world) else { return };
                tracing::info!(job, from = %m.name, to = %name, node = %self.nodes[node].name, "migrated: re-created from its checkpoint");
                m.name = name;
                m.last_line_ns = Arc::default();
                self.jobs.insert(Arc::from(new_uid.as_str()), m);
                if let Some(s) = world.state_mut(job) {
                    s.node = node as u32;
                }
            }
            Effect::Requeued { uid: new_uid, name } => {
                let Some(mut m) = self.hand_over(uid, world) else { return };
                tracing::info!(job, from = %m.name, to = %name, "preempted: waits unbound with its checkpoint");
                m.name = name;
                m.last_line_ns = Arc::default();
                self.jobs.insert(Arc::from(new_uid.as_str()), m);
                world.requeue_job(job, wit::WaitReason::Preempted);
            }
            Effect::Removed => {
                if let Some(m) = self.jobs.remove(uid) {
                    tracing::info!(job, pod = %m.name, "deleted a queued pod");
                }
                world.remove_job(job);
            }
        }
    }

    /// Stop following pod `uid`'s log; the next observation follows it again from after the
    /// last line read: cheap insurance after a resize, should the runtime start the container's
    /// log file afresh then (a follower left on the old file would hear nothing more).
    fn follow_anew(&mut self, uid: &Arc<str>) {
        if let Some(f) = self.jobs.get_mut(uid).and_then(|m| m.follower.take()) {
            f.abort();
        }
    }

    /// Pod `uid` is gone and a copy carries its job on: its follower reads to the end of its
    /// log, those last records are handed over, and the job's entry is taken out.
    fn hand_over(&mut self, uid: &Arc<str>, world: &mut World) -> Option<super::Managed> {
        if let Some(f) = self.jobs.get_mut(uid).and_then(|m| m.follower.take()) {
            let _ = self.rt.block_on(async { tokio::time::timeout(Duration::from_millis(300), f).await });
        }
        self.deliver_progress(world, world.time_ms());
        let mut m = self.jobs.remove(uid)?;
        m.last_cpu = None;
        if let Some(s) = world.state_mut(m.handle) {
            s.cpu_used_millicores = 0;
        }
        Some(m)
    }
}

/// Bind pod `name` to node `node` (the `binding` subresource), as a scheduler does.
async fn bind(api: &Api<Pod>, name: &str, node: &str) -> Result<(), kube::Error> {
    let binding = json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": { "name": name },
        "target": { "apiVersion": "v1", "kind": "Node", "name": node },
    });
    api.create_subresource::<_, serde_json::Value>("binding", name, &PostParams::default(), &binding).await?;
    Ok(())
}

/// Wait until pod `name` with `uid` no longer exists (its containers have stopped, so its last
/// checkpoint is final).
async fn gone(api: &Api<Pod>, name: &str, uid: &str, patience: Duration) -> Result<(), Failure> {
    let started = Instant::now();
    loop {
        match api.get_opt(name).await {
            Ok(None) => return Ok(()),
            Ok(Some(p)) if p.metadata.uid.as_deref() != Some(uid) => return Ok(()),
            Ok(Some(_)) | Err(_) if started.elapsed() < patience => {}
            Ok(Some(_)) => {
                return Err(Failure::Refused(format!(
                    "pod {name} was deleted but has not stopped after {patience:?}; its copy waits unbound"
                )));
            }
            Err(e) => return Err(e.into()),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Run the delivery command in the pod and wait for it; a non-zero exit is a refusal.
async fn run_in(
    api: &Api<Pod>,
    name: &str,
    container: Option<String>,
    cmd: Vec<String>,
    limit: Duration,
) -> Result<Effect, Failure> {
    let mut params = AttachParams::default().stdout(true).stderr(true).stdin(false);
    params.container = container;
    let run = async {
        use tokio::io::AsyncReadExt;
        let mut process = api.exec(name, cmd.clone(), &params).await?;
        let status = process.take_status();
        let mut out = String::new();
        if let Some(mut stdout) = process.stdout() {
            let _ = stdout.read_to_string(&mut out).await;
        }
        if let Some(mut stderr) = process.stderr() {
            let _ = stderr.read_to_string(&mut out).await;
        }
        let status = match status {
            Some(s) => s.await,
            None => None,
        };
        Ok::<_, kube::Error>((status, out))
    };
    let (status, out) = match tokio::time::timeout(limit, run).await {
        Ok(result) => result?,
        Err(_) => return Err(Failure::Refused(format!("delivery command {} ran past {limit:?}", cmd.join(" ")))),
    };
    match status {
        Some(s) if s.status.as_deref() == Some("Success") => Ok(Effect::Done),
        None => Ok(Effect::Done),
        Some(s) => {
            let last = out.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
            Err(Failure::Refused(format!(
                "delivery command {} failed ({}): {last}",
                cmd.join(" "),
                s.message.unwrap_or_default()
            )))
        }
    }
}
