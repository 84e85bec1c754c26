//! What the adapters of the older contracts (`v0_1`, `v0_2`, `v0_3`) convert alike: a job's
//! declaration, a node, a decision's actions and a policy's error, between the current types
//! and an older version's, whose types are others of the same shape.

/// Defines, in the module it is called from, what every older contract `$old` converts alike:
/// `gpu_states(g)` (the GPUs' use) and `error(e)` (a policy's own failure).
macro_rules! older_common {
    ($old:ident) => {
        fn gpu_states(g: &wit::GpuStates) -> $old::GpuStates {
            $old::GpuStates {
                utilisation_percent: g.utilisation_percent.clone(),
                memory_used_bytes: g.memory_used_bytes.clone(),
            }
        }

        /// An older policy error in current terms.
        pub(crate) fn error(e: $old::PolicyError) -> wit::PolicyError {
            match e {
                $old::PolicyError::InvalidConfig(m) => wit::PolicyError::InvalidConfig(m),
                $old::PolicyError::InvalidState(m) => wit::PolicyError::InvalidState(m),
                $old::PolicyError::Failed(m) => wit::PolicyError::Failed(m),
            }
        }
    };
}

/// Handles as the numbers an older contract's bindings hold.
pub(crate) fn numbers<H: Copy + Into<u32>>(handles: &[H]) -> Vec<u32> {
    handles.iter().map(|&h| h.into()).collect()
}

/// Defines, in the module it is called from, the per-tick columns of an older contract `$old`
/// that has a queue (0.2.0 on): `job_states(j)` (the running jobs' columns every such version
/// has, and the ones named after `$old`, `batch_size` …), `queue_states(q)` and
/// `progress_records(p)`.
macro_rules! older_columns {
    ($old:ident $(, $field:ident)*) => {
        fn job_states(j: &wit::JobStates) -> $old::JobStates {
            $old::JobStates {
                handle: $crate::older::numbers(&j.handle),
                node: $crate::older::numbers(&j.node),
                cpu_limit_millicores: j.cpu_limit_millicores.clone(),
                memory_limit_bytes: j.memory_limit_bytes.clone(),
                cpu_used_millicores: j.cpu_used_millicores.clone(),
                memory_used_bytes: j.memory_used_bytes.clone(),
                gpu_count: j.gpu_count.clone(),
                gpu_node: $crate::older::numbers(&j.gpu_node),
                gpu_index: j.gpu_index.clone(),
                gpu_share_percent: j.gpu_share_percent.clone(),
                gpu_used_percent: j.gpu_used_percent.clone(),
                run_ms: j.run_ms.clone(),
                gpu_ms: j.gpu_ms.clone(),
                $($field: j.$field.clone(),)*
            }
        }

        fn queue_states(q: &wit::QueueStates) -> $old::QueueStates {
            $old::QueueStates {
                handle: $crate::older::numbers(&q.handle),
                reason: q
                    .reason
                    .iter()
                    .map(|r| match r {
                        wit::WaitReason::NeverStarted => $old::WaitReason::NeverStarted,
                        wit::WaitReason::Preempted => $old::WaitReason::Preempted,
                    })
                    .collect(),
                since_ms: q.since_ms.clone(),
                run_ms: q.run_ms.clone(),
                gpu_ms: q.gpu_ms.clone(),
            }
        }

        fn progress_records(p: &wit::ProgressRecords) -> $old::ProgressRecords {
            $old::ProgressRecords {
                job: $crate::older::numbers(&p.job),
                time_ms: p.time_ms.clone(),
                epoch: p.epoch.clone(),
                value_count: p.value_count.clone(),
                values: p.values.clone(),
            }
        }
    };
}

/// Defines, in the module it is called from, the conversions every older contract `$old` (its
/// types module) shares with the current one:
/// - `older_job_spec(s)`: a job's declaration, the fields named after `$old` (`arrival_ms`, …) added
///   to those every version has;
/// - `older_node(n)`, `gpu_states(g)`: a node less what the older version lacks, and the GPUs' use;
/// - `error(e)`: a policy's own failure.
///
/// [`older_decision!`] converts a decision.
macro_rules! older_contract {
    ($old:ident $(, $field:ident)*) => {
        fn older_job_spec(s: &wit::JobSpec) -> $old::JobSpec {
            $old::JobSpec {
                handle: s.handle.0,
                name: s.name.clone(),
                model: s.model.clone(),
                kind: match s.kind {
                    wit::JobKind::Training => $old::JobKind::Training,
                    wit::JobKind::Inference => $old::JobKind::Inference,
                },
                metrics: s
                    .metrics
                    .iter()
                    .map(|m| $old::MetricSpec {
                        name: m.name.clone(),
                        direction: match m.direction {
                            wit::Direction::HigherIsBetter => $old::Direction::HigherIsBetter,
                            wit::Direction::LowerIsBetter => $old::Direction::LowerIsBetter,
                        },
                    })
                    .collect(),
                tiers: s.tiers.map(|t| $old::Tiers { deliverable: t.deliverable, final_: t.final_ }),
                qoe_target: s.qoe_target,
                max_epochs: s.max_epochs,
                labels: s.labels.clone(),
                $($field: s.$field,)*
            }
        }

        fn older_node(n: &wit::Node) -> $old::Node {
            $old::Node {
                name: n.name.clone(),
                cpu_millicores: n.cpu_millicores,
                memory_bytes: n.memory_bytes,
                gpu_memory_bytes: n.gpu_memory_bytes.clone(),
            }
        }

        $crate::older::older_common!($old);
    };
}

/// An older contract `$old`'s decision `$d` in current terms: its actions (the kinds every
/// version has, and the older version's others by the arms given), no reason why jobs wait.
macro_rules! older_decision {
    ($old:ident, $d:expr $(, $pat:pat => $e:expr)* $(,)?) => {{
        let d = $d;
        wit::Decision {
            actions: d
                .actions
                .into_iter()
                .map(|a| wit::Action {
                    job: a.job.into(),
                    reason: a.reason,
                    kind: match a.kind {
                        $old::ActionKind::SetCpu(m) => wit::ActionKind::SetCpu(m),
                        $old::ActionKind::SetMemory(b) => wit::ActionKind::SetMemory(b),
                        $old::ActionKind::Migrate(n) => wit::ActionKind::Migrate(n.into()),
                        $old::ActionKind::Deliver => wit::ActionKind::Deliver,
                        $old::ActionKind::Stop => wit::ActionKind::Stop,
                        $old::ActionKind::SetGpuShare(s) => {
                            wit::ActionKind::SetGpuShare(wit::GpuShare { gpu: s.gpu, percent: s.percent })
                        }
                        $($pat => $e,)*
                    },
                })
                .collect(),
            next_call_ms: d.next_call_ms,
            pending: Vec::new(),
        }
    }};
}

pub(crate) use {older_columns, older_common, older_contract, older_decision};
