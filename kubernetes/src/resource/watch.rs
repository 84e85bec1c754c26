//! The resources as one replica sees them: a watch of the namespace's `SchedulingPolicy`
//! objects (a reflector: one list, then changes, a fresh list when the watch breaks), and the
//! few requests a replica makes of them.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::Notify;

use super::SchedulingPolicy;
use crate::{KubernetesConfig, KubernetesSetupError, within};

/// The label the replicas of one Deployment of the host share (`deployment.yaml`).
const APP_LABEL: &str = "app.kubernetes.io/name";

/// The namespace's `SchedulingPolicy` objects, watched.
pub struct Resources {
    api: Api<SchedulingPolicy>,
    client: Client,
    namespace: String,
    store: Store<SchedulingPolicy>,
    changed: Arc<Notify>,
    timeout: Duration,
}

impl Resources {
    /// Watch the resources of `namespace` (default: the election's namespace, else the
    /// kubeconfig's or the pod's) on the cluster `config` reaches. Call within a Tokio runtime:
    /// the watch runs on it. The apiserver need not answer yet: the watch retries with backoff.
    pub async fn watch(config: &KubernetesConfig, namespace: Option<&str>) -> Result<Resources, KubernetesSetupError> {
        let (client, own) = super::client(config.kubeconfig.as_deref()).await?;
        let namespace = namespace
            .map(String::from)
            .or_else(|| config.election.as_ref().and_then(|e| e.namespace.clone()))
            .unwrap_or(own);
        let api: Api<SchedulingPolicy> = Api::namespaced(client.clone(), &namespace);
        let (store, writer) = reflector::store();
        let changed = Arc::new(Notify::new());
        let stream =
            reflector::reflector(writer, watcher::watcher(api.clone(), watcher::Config::default()).default_backoff());
        let (notify, name) = (changed.clone(), namespace.clone());
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            let mut failing = false;
            while let Some(event) = stream.next().await {
                match event {
                    Ok(_) => {
                        failing = false;
                        notify.notify_one();
                    }
                    Err(e) if !failing => {
                        failing = true;
                        let hint = if e.to_string().contains("404") {
                            "; is the CustomResourceDefinition installed? (kubectl apply -f examples/kubernetes/crd.yaml)"
                        } else {
                            ""
                        };
                        tracing::warn!(namespace = %name, error = %e, "cannot watch the SchedulingPolicy resources{hint}; retrying");
                    }
                    Err(_) => {}
                }
            }
        });
        Ok(Resources { api, client, namespace, store, changed, timeout: config.timeout })
    }

    /// The namespace watched.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The API of the resources, for status writes.
    pub fn api(&self) -> &Api<SchedulingPolicy> {
        &self.api
    }

    /// Wait for a change, at most `limit`.
    pub async fn changed(&self, limit: Duration) {
        let _ = tokio::time::timeout(limit, self.changed.notified()).await;
    }

    /// The resources, once the watch has listed them; None before.
    pub fn listed(&self) -> Option<Vec<Arc<SchedulingPolicy>>> {
        use futures_util::FutureExt;
        let ready = self.store.wait_until_ready().now_or_never().is_some_and(|r| r.is_ok());
        ready.then(|| self.store.state())
    }

    /// The bytes under `key` of ConfigMap `name` in the namespace (`binaryData`, else `data`):
    /// None for a ConfigMap that is not there, `Some(None)` for a key that is not.
    pub async fn config_map_key(&self, name: &str, key: &str) -> kube::Result<Option<Option<Vec<u8>>>> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
        let Some(map) = within(self.timeout, api.get_opt(name)).await? else { return Ok(None) };
        let binary = map.binary_data.as_ref().and_then(|d| d.get(key)).map(|ByteString(b)| b.clone());
        Ok(Some(binary.or_else(|| map.data.as_ref().and_then(|d| d.get(key)).map(|s| s.clone().into_bytes()))))
    }

    /// The replicas there are: the pods of the namespace that carry pod `me`'s
    /// `app.kubernetes.io/name` label, not being deleted and not ended. None when `me` is not a
    /// pod there, or carries no such label (a host run outside the cluster).
    pub async fn replica_pods(&self, me: &str) -> kube::Result<Option<Vec<String>>> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let Some(pod) = within(self.timeout, api.get_metadata_opt(me)).await? else { return Ok(None) };
        let Some(app) = pod.metadata.labels.as_ref().and_then(|l| l.get(APP_LABEL)) else { return Ok(None) };
        let params = kube::api::ListParams::default().labels(&format!("{APP_LABEL}={app}"));
        let pods = within(self.timeout, api.list(&params)).await?;
        let live = |p: &Pod| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            p.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"))
        };
        Ok(Some(pods.items.iter().filter(|p| live(p)).filter_map(|p| p.metadata.name.clone()).collect()))
    }

    /// A request's time limit.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}
