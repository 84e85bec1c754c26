//! Finding an engine's managed containers: a running one is a running job, a created one a
//! queued job; copies a previous host left half-made are settled first ([`super::copy`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bollard::Docker as Client;
use bollard::errors::Error as DockerError;
use bollard::models::{ContainerSummary, ContainerSummaryStateEnum};
use bollard::query_parameters as q;

use super::copy::{self, REPLACES};
use super::{Docker, Managed, short, unix_ms, within};
use wasmsched_core::world::{GpuSlot, NodeId, World};
use wasmsched_core::{declare, live};

impl Docker {
    /// List engine `i`'s managed containers; adopt new ones, return those that are gone.
    pub(super) fn discover(&mut self, i: usize, world: &mut World) -> Result<Vec<Arc<str>>, DockerError> {
        let Some(client) = self.engines[i].client.clone() else { return Ok(Vec::new()) };
        let (key_value, timeout) = (self.config.selector.clone(), self.config.timeout);
        let filters = HashMap::from([
            ("label".to_string(), vec![key_value]),
            ("status".to_string(), vec!["running".to_string(), "created".to_string()]),
        ]);
        let options = q::ListContainersOptions { all: true, filters: Some(filters), ..Default::default() };
        let mut listed = self.rt.block_on(within(timeout, client.list_containers(Some(options))))?;
        self.settle_copies(i, &client, &mut listed, world)?;
        let present: HashSet<Arc<str>> = listed.iter().filter_map(|c| c.id.as_deref().map(Arc::from)).collect();
        for summary in &listed {
            let Some(id) = summary.id.as_deref() else { continue };
            let runs = summary.state == Some(ContainerSummaryStateEnum::RUNNING);
            let Some(m) = self.jobs.get(id) else {
                self.adopt(i, &client, summary, world);
                continue;
            };
            let handle = m.job.handle;
            if runs && world.state(handle).is_some_and(|s| !s.is_running()) {
                // Started by someone else: it runs on the GPUs its own device requests give it.
                let info = self.rt.block_on(within(timeout, client.inspect_container(id, None))).ok();
                let gpus = self.gpu_slots(i, info.as_ref().and_then(|c| c.host_config.as_ref()), world);
                world.start_job(handle, NodeId(i as u32), gpus);
                tracing::info!(job = %handle, container = %short(id), "a queued container was started outside the host");
            }
            if runs && self.jobs[id].follower.is_none() {
                let follower = self.follow(i, id, &self.jobs[id]);
                self.jobs.get_mut(id).expect("just read").follower = follower;
            }
        }
        Ok(self
            .jobs
            .iter()
            .filter(|(id, m)| m.engine == i && !present.contains(*id))
            .map(|(id, _)| id.clone())
            .collect())
    }

    /// The GPUs of engine `i` that a container's device requests give it, as world slots.
    fn gpu_slots(&self, i: usize, hc: Option<&bollard::models::HostConfig>, world: &World) -> Vec<GpuSlot> {
        let count = world.nodes().get(i).map_or(0, |n| n.gpu_memory_bytes.len() as u32);
        copy::gpus_of(hc, count).into_iter().map(|index| GpuSlot { node: NodeId(i as u32), index }).collect()
    }

    /// Start managing a container found on engine `i`: a running job, or a queued one.
    fn adopt(&mut self, i: usize, client: &Client, summary: &ContainerSummary, world: &mut World) {
        let Some(id) = summary.id.as_deref() else { return };
        let name = summary.names.as_ref().and_then(|n| n.first()).map_or(id, String::as_str);
        let empty = HashMap::new();
        let labels = summary.labels.as_ref().unwrap_or(&empty);
        let mut declared = declare::from_labels(name, summary.image.as_deref().unwrap_or(""), labels);
        for (label, why) in &declared.problems {
            let job = declared.spec.name.clone();
            self.logged
                .once(format!("label:{id}:{label}"), || format!("container {job}: ignoring label {label}: {why}"));
        }
        let info = self.rt.block_on(within(self.config.timeout, client.inspect_container(id, None))).ok();
        let hc = info.as_ref().and_then(|c| c.host_config.clone());
        let origin = self.clock.origin_unix_ms();
        let created_ms = info
            .as_ref()
            .and_then(|c| c.created.as_deref())
            .and_then(copy::unix_ms_of)
            .or_else(|| summary.created.and_then(|s| u64::try_from(s).ok()).map(|s| s * 1000))
            .unwrap_or_else(unix_ms);
        let arrived = copy::arrived_unix_ms(labels, created_ms);
        declared.spec.arrival_ms = arrived.saturating_sub(origin);
        let runs = summary.state == Some(ContainerSummaryStateEnum::RUNNING);
        let spec = declared.spec.clone();
        let handle = if runs { world.add_job(spec, NodeId(i as u32)) } else { world.enqueue_job(spec) };
        let gpus = if runs { self.gpu_slots(i, hc.as_ref(), world) } else { Vec::new() };
        let started = info.as_ref().and_then(|c| c.state.as_ref()?.started_at.as_deref()).and_then(copy::unix_ms_of);
        let (run_ms, gpu_ms) = copy::attained(labels, started.filter(|_| runs), unix_ms(), gpus.len());
        let capacity = self.engines[i].capacity.unwrap_or((u64::MAX, u64::MAX));
        if let Some(state) = world.state_mut(handle) {
            if let Some(hc) = &hc {
                state.cpu_limit_millicores = super::cpu_limit(hc).filter(|&m| m < capacity.0);
                state.memory_limit_bytes = hc.memory.filter(|&b| b > 0).map(|b| b as u64).filter(|&b| b < capacity.1);
            }
            if !runs {
                state.queued = Some(copy::wait_reason(labels));
                state.since_ms = created_ms.saturating_sub(origin);
            }
            state.gpus = gpus;
            (state.run_ms, state.gpu_ms) = (run_ms, gpu_ms);
            state.gpu_share_percent =
                labels.get(copy::GPU_SHARE).and_then(|v| v.trim().parse::<u8>().ok()).filter(|p| (1..100).contains(p));
            state.batch_size = copy::batch_in_force(labels).unwrap_or(state.batch_size);
        }
        let job = live::Job::new(handle, &declared, arrived);
        let mut m = Managed { job, engine: i, last_cpu: None, follower: None };
        if runs {
            m.follower = self.follow(i, id, &m);
        }
        let name = name.trim_start_matches('/');
        tracing::info!(job = %handle, container = %short(id), name, queued = !runs, "managing a new container");
        self.jobs.insert(Arc::from(id), m);
    }

    /// Settle the copies among `listed` that a host left half-made: found for the first time,
    /// or whose original is still there. What was removed leaves `listed`; a managed original
    /// whose copy is kept hands its job (and handle) to the copy.
    fn settle_copies(
        &mut self,
        i: usize,
        client: &Client,
        listed: &mut Vec<ContainerSummary>,
        world: &mut World,
    ) -> Result<(), DockerError> {
        let ids: HashSet<&str> = listed.iter().filter_map(|c| c.id.as_deref()).collect();
        let mut todo = Vec::new();
        for c in listed.iter() {
            let (Some(id), Some(original)) = (c.id.as_deref(), c.labels.as_ref().and_then(|l| l.get(REPLACES))) else {
                continue;
            };
            if original != id && (!self.jobs.contains_key(id) || ids.contains(original.as_str())) {
                let runs = c.state == Some(ContainerSummaryStateEnum::RUNNING);
                let empty = HashMap::new();
                let labels = c.labels.as_ref().unwrap_or(&empty);
                let checkpoint = declare::from_labels(id, "", labels).checkpoint;
                todo.push((id.to_string(), original.clone(), runs, checkpoint));
            }
        }
        let mut removed = HashSet::new();
        for (id, original, runs, checkpoint) in todo {
            if removed.contains(&id) || removed.contains(&original) {
                continue;
            }
            let limit = self.config.timeout * 4;
            let settled =
                self.rt.block_on(within(limit, copy::settle(client, &id, runs, &original, checkpoint.as_deref())))?;
            match settled {
                copy::Settled::Dropped => {
                    tracing::info!(copy = %short(&id), original = %short(&original), "removed an unfinished copy");
                    removed.insert(id);
                }
                copy::Settled::Keep => {
                    removed.insert(original.clone());
                    if let Some(mut m) = self.jobs.remove(original.as_str()) {
                        tracing::info!(job = %m.job.handle, from = %short(&original), to = %short(&id), "finished an interrupted copy");
                        if let Some(f) = m.follower.take() {
                            f.abort();
                        }
                        m.last_cpu = None;
                        if runs && world.state(m.job.handle).is_some_and(|s| !s.is_running()) {
                            world.start_job(m.job.handle, NodeId(i as u32), Vec::new());
                        }
                        self.jobs.insert(Arc::from(id.as_str()), m);
                    }
                }
            }
        }
        listed.retain(|c| c.id.as_deref().is_none_or(|id| !removed.contains(id)));
        Ok(())
    }
}
