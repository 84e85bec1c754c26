//! The requests an action becomes on the apiserver, each a future: bind, delete, exec, wait
//! until a pod is gone; and what a decision takes away ([`Freeing`]), which its copies wait for
//! before they are bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{AttachParams, DeleteParams, PostParams};
use serde_json::json;

use super::{Ask, Effect, Failure};
use crate::gate::Gate;
use crate::within;
use wasmsched_core::world::JobState;

/// What a decision's actions take away and have not yet: every preemption and stop until it
/// is done, every migration's and resize's original until it is gone, and the decision itself
/// until all its actions are sent. A migration or a resize binds its copy only once nothing
/// is left, so its copy never goes to a node whose kubelet still counts the GPUs of a pod on
/// its way out (the kubelet would refuse the copy: `OutOfnvidia.com/gpu`).
#[derive(Default)]
pub(crate) struct Freeing {
    left: AtomicUsize,
    done: tokio::sync::Notify,
}

/// One thing a decision takes away, counted in [`Freeing`] until it is dropped.
pub(crate) struct Frees(Arc<Freeing>);

impl Freeing {
    /// Count one more thing to take away.
    pub(crate) fn frees(self: &Arc<Self>) -> Frees {
        self.left.fetch_add(1, Ordering::SeqCst);
        Frees(self.clone())
    }

    /// Wait until everything counted is taken away.
    pub(crate) async fn all_done(&self) {
        loop {
            let done = self.done.notified();
            if self.left.load(Ordering::SeqCst) == 0 {
                return;
            }
            done.await;
        }
    }
}

impl Drop for Frees {
    fn drop(&mut self) {
        if self.0.left.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.done.notify_waiters();
        }
    }
}

/// The pod an action's request is about, and how requests reach the apiserver.
pub(crate) struct PodRef {
    pub(crate) api: Api<Pod>,
    pub(crate) name: String,
    /// How long one request may take.
    pub(crate) limit: Duration,
    pub(crate) gate: Gate,
}

/// Delete the pod: a running one stops (the next observation sees it gone), a queued one is
/// removed from the queue.
pub(crate) fn delete(to: PodRef, state: &JobState, freeing: &Arc<Freeing>) -> Ask {
    let queued = !state.is_running();
    let frees = freeing.frees();
    Box::pin(async move {
        let (PodRef { api, name, limit, gate }, delete) = (to, DeleteParams::default());
        gate.pass(|| within(limit, api.delete(&name, &delete))).await?;
        drop(frees);
        Ok(if queued { Effect::Removed } else { Effect::Done })
    })
}

/// Run the pod's declared delivery command in its main `container`, if it declares one.
pub(crate) fn deliver(to: PodRef, container: Option<String>, command: Option<Vec<String>>) -> Ask {
    Box::pin(async move {
        match command {
            Some(cmd) => run_in(&to.api, &to.name, container, cmd, to.limit * 4).await,
            None => Ok(Effect::Done),
        }
    })
}

/// Bind pod `name` to node `node` (the `binding` subresource), as a scheduler does.
pub(crate) async fn bind(api: &Api<Pod>, name: &str, node: &str) -> Result<(), kube::Error> {
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
pub(crate) async fn gone(
    api: &Api<Pod>,
    gate: &Gate,
    name: &str,
    uid: &str,
    patience: Duration,
) -> Result<(), Failure> {
    let started = Instant::now();
    loop {
        match gate.pass(|| api.get_opt(name)).await {
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

/// Whether the apiserver refused an exec for want of rights: a 403 answer, or (over websockets)
/// a 403 where the protocol switch was expected.
fn forbidden(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(status) => status.code == 403,
        kube::Error::UpgradeConnection(upgrade) => upgrade.to_string().contains("403"),
        _ => false,
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
        Ok(Err(e)) if forbidden(&e) => {
            return Err(Failure::Refused(format!(
                "the host may not run commands in pods here ({e}): grant it pods/exec create in this namespace \
                 (ClusterRole wasmsched-deliver in examples/kubernetes/rbac-optional.yaml)"
            )));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_waits_to_bind_until_everything_its_decision_takes_away_is_gone() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let freeing = Arc::new(Freeing::default());
            freeing.all_done().await; // nothing counted: at once
            let (preempted, resized) = (freeing.frees(), freeing.frees());
            let waiter = tokio::spawn({
                let freeing = freeing.clone();
                async move { freeing.all_done().await }
            });
            tokio::task::yield_now().await;
            drop(resized);
            tokio::task::yield_now().await;
            assert!(!waiter.is_finished(), "a preempted pod is still on its way out");
            drop(preempted);
            tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("woken once all are gone").unwrap();
        });
    }
}
