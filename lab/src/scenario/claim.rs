//! The published figures a scenario sets out to reproduce, as plain data: a [`Claim`] (a
//! scenario's `[[paper]]` table) names a policy, a [`Figure`] and the paper's value. How a
//! figure is measured on runs is the experiment layer's (`crate::experiment::paper`).

use serde::{Deserialize, Serialize};

/// A figure a paper reports, measured as a change against the baseline run of the same seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Figure {
    /// Change of the makespan.
    Makespan,
    /// Change of the mean job completion time.
    MeanJct,
    /// The job that gains most: the most negative per-job change of completion time.
    BestJobJct,
    /// The mean of the per-job changes of completion time.
    MeanJobJct,
    /// The job that gains most in time to its first target (T1).
    BestJobT1,
    /// The mean of the per-job changes of time to T1.
    MeanJobT1,
    /// The job that gains most in time to its final target (T2).
    BestJobT2,
    /// The mean of the per-job changes of time to T2.
    MeanJobT2,
    /// Jobs that met their QoE target, as a multiple of the baseline's count.
    SatisfiedRatio,
    /// Aggregate throughput as a multiple of the baseline's: the same jobs finish in both runs,
    /// so it is the baseline's makespan over ours.
    Throughput,
    /// Jain's index of the tenants' GPU-time against their weighted entitlement while the
    /// cluster was contended, as a multiple of the baseline's (`crate::experiment::fairness`).
    Jain,
}

impl std::str::FromStr for Figure {
    type Err = String;

    fn from_str(s: &str) -> Result<Figure, String> {
        Figure::ALL
            .into_iter()
            .find(|f| f.key() == s)
            .ok_or_else(|| format!("no figure {s:?}: one of {}", Figure::ALL.map(Figure::key).join(", ")))
    }
}

impl Figure {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Figure::Makespan => "makespan",
            Figure::MeanJct => "mean JCT",
            Figure::BestJobJct => "best job, JCT",
            Figure::MeanJobJct => "per-job JCT, mean",
            Figure::BestJobT1 => "best job, time to T1",
            Figure::MeanJobT1 => "per-job time to T1, mean",
            Figure::BestJobT2 => "best job, time to T2",
            Figure::MeanJobT2 => "per-job time to T2, mean",
            Figure::SatisfiedRatio => "QoE satisfied, ratio",
            Figure::Throughput => "aggregate throughput",
            Figure::Jain => "tenants' fairness (Jain)",
        }
    }

    pub(crate) fn is_ratio(self) -> bool {
        matches!(self, Figure::SatisfiedRatio | Figure::Throughput | Figure::Jain)
    }

    /// A value of [`Figure::values`] for a person: a time, a count of jobs, or an index.
    pub fn format_value(self, value: f64) -> String {
        match self {
            Figure::SatisfiedRatio => format!("{value:.1} jobs"),
            Figure::Jain => format!("{value:.3}"),
            _ => format_seconds(value),
        }
    }

    /// A measured figure for a person: `+12.3 %`, or `2.50×` for a ratio.
    pub fn format(self, value: f64) -> String {
        if self.is_ratio() { format!("{value:.2}×") } else { format!("{:+.1} %", 100.0 * value) }
    }

    /// What it is called in tables.
    pub fn name(self) -> &'static str {
        self.label()
    }

    /// What it is called in files and on the command line: `best-job-jct`.
    pub fn key(self) -> &'static str {
        match self {
            Figure::Makespan => "makespan",
            Figure::MeanJct => "mean-jct",
            Figure::BestJobJct => "best-job-jct",
            Figure::MeanJobJct => "mean-job-jct",
            Figure::BestJobT1 => "best-job-t1",
            Figure::MeanJobT1 => "mean-job-t1",
            Figure::BestJobT2 => "best-job-t2",
            Figure::MeanJobT2 => "mean-job-t2",
            Figure::SatisfiedRatio => "satisfied-ratio",
            Figure::Throughput => "throughput",
            Figure::Jain => "jain",
        }
    }

    /// Every figure.
    pub const ALL: [Figure; 11] = [
        Figure::Makespan,
        Figure::MeanJct,
        Figure::BestJobJct,
        Figure::MeanJobJct,
        Figure::BestJobT1,
        Figure::MeanJobT1,
        Figure::BestJobT2,
        Figure::MeanJobT2,
        Figure::SatisfiedRatio,
        Figure::Throughput,
        Figure::Jain,
    ];

    /// Whether a lower value is better (every time); a ratio of satisfied jobs is better
    /// higher.
    pub fn lower_is_better(self) -> bool {
        !self.is_ratio()
    }
}

/// Seconds as a person reads them: `42 s`, `12.5 min`, `3.20 h`.
pub fn format_seconds(s: f64) -> String {
    if !s.is_finite() {
        "—".into()
    } else if s.abs() < 120.0 {
        format!("{s:.0} s")
    } else if s.abs() < 7200.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.2} h", s / 3600.0)
    }
}

/// One published figure: what a paper reports for a policy against its baseline.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Claim {
    /// The policy the figure is about, as given to `--policy`.
    pub policy: String,
    /// What is measured.
    pub figure: Figure,
    /// The paper's value: a fraction for a change (`-0.4206` for −42.06 %), a multiple for
    /// `satisfied-ratio` (`8.0`); absent when the paper gives none and ours is shown alone.
    pub value: Option<f64>,
    /// Where the paper reports it.
    pub source: String,
    /// What it is measured against, as given to `--policy` (`gacer:regulate=false`); absent:
    /// the comparison's baseline. `compare` runs it too when it was not asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
}

/// A policy's own objective in a workload: the first `[[paper]]` figure about it.
pub fn objective<'a>(claims: &'a [Claim], policy: &str) -> Option<&'a Claim> {
    claims.iter().find(|c| c.policy == policy)
}
