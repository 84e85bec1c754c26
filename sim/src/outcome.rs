//! What a run did to each job: its completion, targets, QoE, migrations, preemptions and wait,
//! read off the simulator's jobs at the end.

use super::Simulator;

/// What happened to one job in a run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct JobOutcome {
    /// Its name in the workload.
    pub name: String,
    /// Its model.
    pub model: String,
    /// Its tenant (`default` when it names none).
    pub tenant: String,
    /// The GPUs it asked for.
    pub gpus: u32,
    /// When it arrived.
    pub arrival_s: f64,
    /// When it ended (finished, stopped, or its service window closed); None if it never did.
    pub finish_s: Option<f64>,
    /// Time from arrival to end.
    pub jct_s: Option<f64>,
    /// Time from arrival to reaching T1 and T2 (TRADL tiers), when declared.
    pub targets_reached_s: Vec<Option<f64>>,
    /// Time from arrival to its `deliver` action, if one came.
    pub delivered_s: Option<f64>,
    /// Whether it met its QoE target (mean time per epoch, or mean latency), when declared.
    pub satisfied: Option<bool>,
    /// Mean time per epoch (training) or mean latency in ms (inference).
    pub qoe: Option<f64>,
    /// Migrations it went through.
    pub migrations: u32,
    /// Times it was preempted.
    pub preemptions: u32,
    /// Time from arrival to its first start; None if it never started.
    pub waited_s: Option<f64>,
    /// GPU-seconds it held, restarts' restore time included (0 for a job without GPUs).
    pub gpu_s: f64,
    /// Whether a policy stopped it before its last epoch.
    pub stopped: bool,
    /// Epochs (or latency windows) completed.
    pub epochs: u32,
    /// (time, main metric) at every report, when the run kept them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub progress: Vec<(f64, f64)>,
    /// Why it waited, as the policy last said while it was queued (contract 0.3.0's
    /// `decision.pending`); None when it never said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<String>,
}

impl Simulator {
    /// What happened to every job, in workload order.
    pub fn outcomes(&self) -> Vec<JobOutcome> {
        self.jobs
            .iter()
            .map(|j| {
                let qoe = if j.is_inference() {
                    (j.windows > 0).then(|| j.latency_sum_ms / f64::from(j.windows))
                } else {
                    (j.epoch > 0).then(|| j.epoch_time_sum / f64::from(j.epoch))
                };
                JobOutcome {
                    name: j.plan.name.clone(),
                    model: j.plan.model_name().to_string(),
                    tenant: j.plan.tenant.clone(),
                    gpus: j.plan.gpus,
                    arrival_s: j.plan.arrival_s,
                    finish_s: j.finish_s,
                    jct_s: j.finish_s.map(|f| f - j.plan.arrival_s),
                    targets_reached_s: if j.plan.tiers.is_some() { j.reached.to_vec() } else { Vec::new() },
                    delivered_s: j.delivered_s,
                    satisfied: j.plan.qoe_target.zip(qoe).map(|(target, q)| q <= target),
                    qoe,
                    migrations: j.migrations,
                    preemptions: j.preemptions,
                    waited_s: j.started_s.map(|s| s - j.plan.arrival_s),
                    gpu_s: if j.plan.gpus > 0 || j.plan.by_goodput() { j.gpu_s } else { 0.0 },
                    stopped: j.stopped,
                    epochs: if j.is_inference() { j.windows } else { j.epoch },
                    progress: j.progress.clone(),
                    pending: None,
                }
            })
            .collect()
    }
}
