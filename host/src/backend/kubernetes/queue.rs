//! The default placement, for a policy that does not place: queued pods are bound in arrival
//! order, each to the first Ready node (in name order) with room for its CPU and memory
//! requests and its GPUs, while the oldest one fits (strict first come, first served). Room
//! is the node's allocatable less what the managed pods bound there request. A pod that no
//! node could ever hold is reported once and skipped, as is one whose binding the apiserver
//! refused (only a policy's `place` tries that one again).

use super::Kubernetes;
use crate::backend::Backend;
use crate::bindings::wit;
use crate::snapshot::Telemetry;

/// A queued pod, as the default placement sees it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Waiting {
    pub handle: u32,
    /// CPU (millicores) and memory (bytes) requested.
    pub requests: (u64, u64),
    pub gpus: u32,
    /// When the job arrived, Unix ms (ties go to the older handle).
    pub arrived_unix_ms: u64,
}

/// A node's room: CPU and memory left unrequested, its free GPUs, and whether it is Ready.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Room {
    pub cpu: u64,
    pub memory: u64,
    pub free_gpus: Vec<u32>,
    /// Its whole allocatable (CPU, memory, GPUs): what no pod may ask beyond.
    pub all: (u64, u64, u32),
    pub ready: bool,
}

/// What the default placement does with one queued pod.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Turn {
    /// Bind it to node `node` with these GPUs (bookkeeping).
    Bind { handle: u32, node: usize, gpus: Vec<u32> },
    /// No node could ever hold it.
    Never { handle: u32 },
}

/// Strict FCFS first fit over `rooms`.
pub(super) fn first_fit(mut waiting: Vec<Waiting>, mut rooms: Vec<Room>) -> Vec<Turn> {
    waiting.sort_by_key(|w| (w.arrived_unix_ms, w.handle));
    let mut turns = Vec::new();
    for w in waiting {
        let ever = rooms.iter().any(|r| w.requests.0 <= r.all.0 && w.requests.1 <= r.all.1 && w.gpus <= r.all.2);
        if !ever {
            turns.push(Turn::Never { handle: w.handle });
            continue;
        }
        let fits = |r: &Room| {
            r.ready && w.requests.0 <= r.cpu && w.requests.1 <= r.memory && w.gpus as usize <= r.free_gpus.len()
        };
        let Some(node) = rooms.iter().position(fits) else { break };
        let room = &mut rooms[node];
        room.cpu -= w.requests.0;
        room.memory -= w.requests.1;
        let gpus: Vec<u32> = room.free_gpus.drain(..w.gpus as usize).collect();
        turns.push(Turn::Bind { handle: w.handle, node, gpus });
    }
    turns
}

impl Kubernetes {
    /// Bind what the default placement binds now.
    pub(super) fn place_queued(&mut self, world: &mut Telemetry) {
        let waiting: Vec<Waiting> = self
            .jobs
            .values()
            .filter(|m| m.refused.is_none() && world.state(m.handle).is_some_and(|s| !s.is_running()))
            .map(|m| Waiting {
                handle: m.handle,
                requests: m.requests,
                gpus: m.gpus_asked,
                arrived_unix_ms: m.arrived_unix_ms,
            })
            .collect();
        if waiting.is_empty() {
            return;
        }
        let mut rooms: Vec<Room> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| Room {
                cpu: n.cpu_millicores,
                memory: n.memory_bytes,
                free_gpus: world.free_gpus(i as u32),
                all: (n.cpu_millicores, n.memory_bytes, n.gpus),
                ready: n.ready,
            })
            .collect();
        for m in self.jobs.values() {
            if let Some(s) = world.state(m.handle).filter(|s| s.is_running())
                && let Some(room) = rooms.get_mut(s.node as usize)
            {
                room.cpu = room.cpu.saturating_sub(m.requests.0);
                room.memory = room.memory.saturating_sub(m.requests.1);
            }
        }
        let mut actions = Vec::new();
        for turn in first_fit(waiting, rooms) {
            match turn {
                Turn::Bind { handle, node, gpus } => actions.push(wit::Action {
                    job: handle,
                    kind: wit::ActionKind::Place(wit::Placement {
                        nodes: vec![wit::NodePlacement { node: node as u32, gpus }],
                        share: false,
                    }),
                    reason: "default placement: first come, first served".into(),
                }),
                Turn::Never { handle } => {
                    let name = world.spec(handle).map_or_else(|| handle.to_string(), |s| s.name.clone());
                    self.log_once(format!("never:{handle}"), || {
                        format!(
                            "pod {name} asks for more CPU, memory or GPUs than any node has: the default placement \
                             cannot bind it; the pods behind it go ahead"
                        )
                    });
                }
            }
        }
        for e in self.apply(&actions, world) {
            let name = world.spec(e.job).map_or_else(|| e.job.to_string(), |s| s.name.clone());
            self.log_once(format!("bind:{}:{}", e.job, e.reason), || {
                format!("pod {name}: the default placement could not bind it ({}); it is left queued", e.reason)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(handle: u32, cpu: u64, gpus: u32, arrived: u64) -> Waiting {
        Waiting { handle, requests: (cpu, 0), gpus, arrived_unix_ms: arrived }
    }

    fn room(cpu: u64, gpus: u32, ready: bool) -> Room {
        Room { cpu, memory: u64::MAX, free_gpus: (0..gpus).collect(), all: (cpu, u64::MAX, gpus), ready }
    }

    #[test]
    fn pods_are_bound_in_arrival_order_to_the_first_node_with_room() {
        let turns =
            first_fit(vec![job(2, 1500, 0, 20), job(1, 1000, 1, 10)], vec![room(2000, 1, true), room(2000, 0, true)]);
        assert_eq!(
            turns,
            [Turn::Bind { handle: 1, node: 0, gpus: vec![0] }, Turn::Bind { handle: 2, node: 1, gpus: vec![] }]
        );
    }

    #[test]
    fn a_not_ready_node_gets_nothing_and_the_oldest_pod_holds_up_the_rest() {
        let turns =
            first_fit(vec![job(1, 3000, 0, 10), job(2, 100, 0, 20)], vec![room(4000, 0, false), room(2000, 0, true)]);
        assert!(turns.is_empty(), "{turns:?}");
    }

    #[test]
    fn a_pod_no_node_could_hold_is_reported_and_does_not_block() {
        let turns = first_fit(vec![job(1, 0, 4, 10), job(2, 0, 1, 20)], vec![room(1000, 2, true)]);
        assert_eq!(turns, [Turn::Never { handle: 1 }, Turn::Bind { handle: 2, node: 0, gpus: vec![0] }]);
    }
}
