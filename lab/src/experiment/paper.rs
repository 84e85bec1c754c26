//! The published figures a scenario sets out to reproduce, and ours beside them.
//!
//! A scenario lists what a paper reports in `[[paper]]` tables ([`Claim`]); `wasmsched compare`
//! then measures the same [`Figure`] on every seed, each policy's run against the baseline's
//! run of the same seed (so only the policy differs), and prints [`Comparison::paper_table`].

use std::fmt::Write as _;

use serde::Serialize;

use wasmsched_sim::JobOutcome;

use super::run::{Comparison, RunReport, mean, std_dev};
use crate::stats::Paired;

pub use crate::scenario::claim::{Claim, Figure, format_seconds, objective};

/// The config variants of the `asked` policies that a figure of `claims` names (as the
/// policy or its baseline: `gacer:regulate=false` when `gacer` was asked for), which a
/// comparison runs too; each with the figure that names it.
pub fn named_variants(claims: &[Claim], asked: &[String]) -> Vec<(String, Figure)> {
    let mut variants: Vec<(String, Figure)> = Vec::new();
    for claim in claims {
        for named in std::iter::once(&claim.policy).chain(&claim.baseline) {
            let variant_of = named.split_once(':').map(|(base, _)| base);
            let known = asked.contains(named) || variants.iter().any(|(v, _)| v == named);
            if !known && variant_of.is_some_and(|base| asked.iter().any(|a| a == base)) {
                variants.push((named.clone(), claim.figure));
            }
        }
    }
    variants
}

impl Figure {
    /// This figure for `run` against `base` (the baseline's run of the same seed). None when
    /// it cannot be measured: no job reached the target in both runs, the baseline satisfied
    /// nobody, …
    pub fn measure(self, run: &RunReport, base: &RunReport) -> Option<f64> {
        let changes = |pick: fn(&JobOutcome) -> Option<f64>| per_job_changes(run, base, pick);
        let best = |xs: Vec<f64>| xs.into_iter().reduce(f64::min);
        let mean = |xs: Vec<f64>| (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64);
        match self {
            Figure::Makespan => change(run.makespan_s, base.makespan_s),
            Figure::MeanJct => change(run.mean_jct_s, base.mean_jct_s),
            Figure::BestJobJct => best(changes(|j| j.jct_s)),
            Figure::MeanJobJct => mean(changes(|j| j.jct_s)),
            Figure::BestJobT1 => best(changes(target(0))),
            Figure::MeanJobT1 => mean(changes(target(0))),
            Figure::BestJobT2 => best(changes(target(1))),
            Figure::MeanJobT2 => mean(changes(target(1))),
            Figure::SatisfiedRatio => (base.satisfied > 0).then(|| run.satisfied as f64 / base.satisfied as f64),
            Figure::Throughput => (run.makespan_s > 0.0 && finished(run) == finished(base) && finished(run) > 0)
                .then(|| base.makespan_s / run.makespan_s),
            Figure::Jain => {
                let (ours, theirs) = (run.fairness.as_ref()?.jain, base.fairness.as_ref()?.jain);
                (theirs > 0.0).then(|| ours / theirs)
            }
        }
    }

    /// The values behind this figure, as (baseline's, ours): the two makespans, the two mean
    /// JCTs, the best job's two times, the means of the per-job times, the two satisfied
    /// counts. None when [`Figure::measure`] is None.
    pub fn values(self, run: &RunReport, base: &RunReport) -> Option<(f64, f64)> {
        let pairs = |pick: fn(&JobOutcome) -> Option<f64>| per_job_pairs(run, base, pick);
        let best = |pairs: Vec<(f64, f64)>| {
            pairs.into_iter().filter_map(|(b, o)| Some((change(o, b)?, (b, o)))).min_by(|x, y| x.0.total_cmp(&y.0))
        };
        let means = |pairs: Vec<(f64, f64)>| {
            let n = pairs.len() as f64;
            (!pairs.is_empty()).then(|| {
                let (b, o) = pairs.iter().fold((0.0, 0.0), |(b, o), p| (b + p.0, o + p.1));
                (b / n, o / n)
            })
        };
        self.measure(run, base)?;
        match self {
            Figure::Makespan => Some((base.makespan_s, run.makespan_s)),
            Figure::MeanJct => Some((base.mean_jct_s, run.mean_jct_s)),
            Figure::BestJobJct => best(pairs(|j| j.jct_s)).map(|b| b.1),
            Figure::MeanJobJct => means(pairs(|j| j.jct_s)),
            Figure::BestJobT1 => best(pairs(target(0))).map(|b| b.1),
            Figure::MeanJobT1 => means(pairs(target(0))),
            Figure::BestJobT2 => best(pairs(target(1))).map(|b| b.1),
            Figure::MeanJobT2 => means(pairs(target(1))),
            Figure::SatisfiedRatio => Some((base.satisfied as f64, run.satisfied as f64)),
            Figure::Throughput => Some((base.makespan_s, run.makespan_s)),
            Figure::Jain => Some((base.fairness.as_ref()?.jain, run.fairness.as_ref()?.jain)),
        }
    }
}

fn target(tier: usize) -> fn(&JobOutcome) -> Option<f64> {
    match tier {
        0 => |j| j.targets_reached_s.first().copied().flatten(),
        _ => |j| j.targets_reached_s.get(1).copied().flatten(),
    }
}

/// Jobs of a run that finished (not stopped, not left waiting).
fn finished(run: &RunReport) -> usize {
    run.jobs.iter().filter(|j| j.finish_s.is_some()).count()
}

fn change(ours: f64, base: f64) -> Option<f64> {
    (base > 0.0 && ours.is_finite()).then(|| ours / base - 1.0)
}

/// Each job's (baseline's, ours) value of `pick`, for the jobs where both runs have it.
fn per_job_pairs(run: &RunReport, base: &RunReport, pick: fn(&JobOutcome) -> Option<f64>) -> Vec<(f64, f64)> {
    run.jobs.iter().zip(&base.jobs).filter_map(|(ours, theirs)| Some((pick(theirs)?, pick(ours)?))).collect()
}

/// Each job's relative change of `pick` between the two runs, for the jobs where both have
/// it. Jobs pair by position: a workload's jobs are in the same order in every run.
pub fn per_job_changes(run: &RunReport, base: &RunReport, pick: fn(&JobOutcome) -> Option<f64>) -> Vec<f64> {
    per_job_pairs(run, base, pick).into_iter().filter_map(|(theirs, ours)| change(ours, theirs)).collect()
}

/// A figure measured over seeds: what the demo prints per policy and the report puts first.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Measured {
    /// The policy.
    pub policy: String,
    /// The baseline it was measured against.
    pub baseline: String,
    /// What was measured.
    pub figure: Figure,
    /// The baseline's value, mean over seeds (seconds, or jobs for `satisfied-ratio`).
    pub baseline_value: f64,
    /// The policy's value, mean over seeds.
    pub value: f64,
    /// The figure itself (a change, or a ratio), mean over seeds.
    pub mean: f64,
    /// Its sample standard deviation over seeds.
    pub sd: f64,
    /// Its lowest and highest over seeds.
    pub range: (f64, f64),
    /// Seeds it could be measured on.
    pub seeds: usize,
    /// How sure it is: the per-seed figures as a paired difference (its 95 % interval, the
    /// paired test's p, and the seeds a difference would need where none was found).
    pub paired: Paired,
    /// The paper's value, when the workload gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paper: Option<f64>,
    /// Where the paper reports it.
    pub source: String,
}

impl Measured {
    /// `claim`'s figure over `pairs` of a run of `claim.policy` and the run of `baseline`
    /// with the same seed, on the pairs where it can be measured; None when it cannot be on
    /// any.
    pub fn over<'a>(
        claim: &Claim,
        baseline: &str,
        pairs: impl IntoIterator<Item = (&'a RunReport, &'a RunReport)>,
    ) -> Option<Measured> {
        let (mut bases, mut ours, mut figures) = (Vec::new(), Vec::new(), Vec::new());
        for (run, base) in pairs {
            if let (Some(f), Some((b, o))) = (claim.figure.measure(run, base), claim.figure.values(run, base)) {
                figures.push(f);
                bases.push(b);
                ours.push(o);
            }
        }
        let range = figures.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
        let null = if claim.figure.is_ratio() { 1.0 } else { 0.0 };
        (!figures.is_empty()).then(|| Measured {
            paired: Paired::of(&figures, null),
            policy: claim.policy.clone(),
            baseline: baseline.to_string(),
            figure: claim.figure,
            baseline_value: mean(&bases),
            value: mean(&ours),
            mean: mean(&figures),
            sd: std_dev(&figures),
            range,
            seeds: figures.len(),
            paper: claim.value,
            source: claim.source.clone(),
        })
    }

    /// The figure for a person, with its spread: `-10.4 % ± 0.6 %`.
    pub fn summary(&self) -> String {
        let sd = if self.figure.is_ratio() { format!("{:.2}×", self.sd) } else { format!("{:.1} %", 100.0 * self.sd) };
        format!("{} ± {sd}", self.figure.format(self.mean))
    }

    /// The figure as a paired difference, in one line a person reads: `tiresias: mean JCT
    /// -8.3 % (95 % CI -11.0 % … -5.4 %, 10 seeds, p < 0.01)` against its baseline, and where
    /// no difference was found, how many seeds would find one.
    pub fn sentence(&self) -> String {
        let figure = self.figure;
        format!("{}: {} {}", self.policy, figure.label(), self.paired.describe(|x| figure.format(x)))
    }

    /// The interval for a table cell: `[-11.0 %, -5.4 %]`; empty with one seed.
    pub fn interval(&self) -> String {
        self.paired
            .interval
            .map_or_else(String::new, |[lo, hi]| format!("[{}, {}]", self.figure.format(lo), self.figure.format(hi)))
    }
}

impl Comparison {
    /// `claim`'s figure measured on every seed where both `claim.policy` and the baseline ran
    /// and it can be measured; None when it cannot be measured on any.
    pub fn measure(&self, claim: &Claim) -> Option<Measured> {
        let baseline = self.baseline_of(claim);
        Measured::over(claim, baseline, self.paired_with(&claim.policy, baseline))
    }

    /// Why [`Comparison::measure`] gives nothing for `claim`, for a person.
    pub fn not_measured(&self, claim: &Claim) -> String {
        if self.policies().contains(&claim.policy.as_str()) {
            "not measured (never reached in both runs)".into()
        } else {
            format!("not measured ({} did not run)", claim.policy)
        }
    }

    /// The runs of `policy` paired with the baseline's runs of the same seeds.
    fn paired<'a>(&'a self, policy: &'a str) -> impl Iterator<Item = (&'a RunReport, &'a RunReport)> + 'a {
        self.paired_with(policy, self.baseline())
    }

    /// The runs of `policy` paired with `baseline`'s runs of the same seeds.
    fn paired_with<'a>(
        &'a self,
        policy: &'a str,
        baseline: &'a str,
    ) -> impl Iterator<Item = (&'a RunReport, &'a RunReport)> + 'a {
        self.runs.iter().filter(move |r| r.policy == policy).filter_map(move |run| {
            self.runs.iter().find(|b| b.policy == baseline && b.seed == run.seed).map(|base| (run, base))
        })
    }

    /// Every policy but the baseline against it as paired differences over the same seeds:
    /// its own objective and every other figure `claims` gives it, then its mean JCT and
    /// makespan (and the tenants' fairness where the jobs have tenants) unless those were
    /// among them. What `compare` prints as sentences and writes as `paired`.
    pub fn against_baseline(&self, claims: &[Claim]) -> Vec<Measured> {
        let baseline = self.baseline();
        let mut out = Vec::new();
        for policy in self.policies().into_iter().filter(|p| *p != baseline) {
            let own: Vec<&Claim> = claims.iter().filter(|c| c.policy == policy).collect();
            out.extend(own.iter().filter_map(|c| self.measure(c)));
            let fair = self.runs.iter().any(|r| r.policy == policy && r.fairness.is_some());
            let general = [Figure::MeanJct, Figure::Makespan].into_iter().chain(fair.then_some(Figure::Jain));
            for figure in general.filter(|f| !own.iter().any(|c| c.figure == *f && c.baseline.is_none())) {
                let claim = Claim { policy: policy.into(), figure, value: None, source: String::new(), baseline: None };
                out.extend(self.measure(&claim));
            }
        }
        out
    }

    /// [`Comparison::against_baseline`] for a person: one sentence per figure.
    pub fn paired_table(&self, claims: &[Claim]) -> String {
        let mut out = format!(
            "paired against {} on the same seeds: mean, 95 % bootstrap interval, paired permutation test\n",
            self.baseline()
        );
        for measured in self.against_baseline(claims) {
            let vs = (measured.baseline != self.baseline()).then(|| format!(" (vs {})", measured.baseline));
            let _ = writeln!(out, "{}{}", measured.sentence(), vs.unwrap_or_default());
        }
        out
    }

    /// The paper's figures beside ours (mean ± sd over seeds, and the range), then for every
    /// policy the distribution of its per-job completion-time changes over all seeds.
    pub fn paper_table(&self, claims: &[Claim]) -> String {
        let baseline = self.baseline();
        let mut out = String::new();
        let _ = writeln!(out, "against {baseline}, the same seed for both; ours as mean ± sd over seeds [min, max]");
        let _ = writeln!(out, "{:<12} {:<26} {:>10} {:>30}  source", "policy", "figure", "paper", "ours");
        for claim in claims {
            let ours = match self.measure(claim) {
                None => self.not_measured(claim),
                Some(m) => {
                    let f = |x| claim.figure.format(x);
                    format!("{} [{}, {}]", m.summary(), f(m.range.0), f(m.range.1))
                }
            };
            let _ = writeln!(
                out,
                "{:<12} {:<26} {:>10} {:>30}  {}",
                claim.policy,
                claim
                    .baseline
                    .as_ref()
                    .map_or_else(|| claim.figure.label().to_string(), |b| format!("{}, vs {b}", claim.figure.label())),
                claim.value.map_or_else(|| "—".to_string(), |v| claim.figure.format(v)),
                ours,
                claim.source
            );
        }
        for policy in self.policies().into_iter().filter(|p| *p != baseline) {
            let mut changes: Vec<f64> =
                self.paired(policy).flat_map(|(run, base)| per_job_changes(run, base, |j| j.jct_s)).collect();
            if changes.is_empty() {
                continue;
            }
            changes.sort_by(f64::total_cmp);
            let q = |p: f64| Figure::Makespan.format(changes[((changes.len() - 1) as f64 * p).round() as usize]);
            let faster = changes.iter().filter(|c| **c < -0.005).count();
            let slower = changes.iter().filter(|c| **c > 0.005).count();
            let _ = writeln!(
                out,
                "{policy}: per-job JCT change over {} job runs: min {}, quartiles {} / {} / {}, max {}; {faster} faster, \
                 {slower} slower (beyond ±0.5 %)",
                changes.len(),
                q(0.0),
                q(0.25),
                q(0.5),
                q(0.75),
                q(1.0)
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(jct_s: Option<f64>, t1_s: Option<f64>) -> JobOutcome {
        JobOutcome {
            name: "j".into(),
            model: "cifar10".into(),
            tenant: "default".into(),
            gpus: 1,
            arrival_s: 0.0,
            finish_s: jct_s,
            jct_s,
            targets_reached_s: vec![t1_s, None],
            delivered_s: None,
            satisfied: None,
            qoe: None,
            migrations: 0,
            preemptions: 0,
            waited_s: Some(0.0),
            gpu_s: 0.0,
            stopped: false,
            epochs: 1,
            progress: Vec::new(),
            pending: None,
        }
    }

    fn run(policy: &str, seed: u64, jobs: Vec<JobOutcome>, satisfied: usize) -> RunReport {
        let jcts: Vec<f64> = jobs.iter().filter_map(|j| j.jct_s).collect();
        RunReport {
            policy: policy.into(),
            digest: String::new(),
            seed,
            makespan_s: jcts.iter().copied().fold(0.0, f64::max),
            mean_jct_s: mean(&jcts),
            p95_jct_s: 0.0,
            satisfied,
            with_qoe_target: 0,
            cpu_utilisation: 0.0,
            policy_calls: 0,
            policy_time_ms: 0.0,
            policy_call_ms: [0.0; 2],
            fallbacks: 0,
            rejected_actions: 0,
            disruptions: 0,
            over_budget: 0,
            rescues: 0,
            benched: None,
            unfinished: None,
            wall_ms: 0.0,
            jobs,
            timeline: Vec::new(),
            fairness: None,
        }
    }

    #[test]
    fn figures_compare_each_job_with_itself_under_the_baseline() {
        let base = run("fair-share", 0, vec![job(Some(100.0), Some(50.0)), job(Some(200.0), None)], 2);
        let ours = run("flowcon", 0, vec![job(Some(60.0), Some(25.0)), job(Some(220.0), Some(90.0))], 6);
        let close = |f: Figure, want: f64| {
            let got = f.measure(&ours, &base).unwrap();
            assert!((got - want).abs() < 1e-12, "{f:?}: {got} != {want}");
        };
        close(Figure::BestJobJct, -0.4);
        close(Figure::MeanJobJct, (-0.4 + 0.1) / 2.0);
        close(Figure::Makespan, 0.1);
        close(Figure::MeanJct, 140.0 / 150.0 - 1.0);
        close(Figure::BestJobT1, -0.5);
        close(Figure::SatisfiedRatio, 3.0);
        assert_eq!(Figure::BestJobT2.measure(&ours, &base), None, "no job reached T2 in both runs");
        let nobody = run("fair-share", 0, base.jobs.clone(), 0);
        assert_eq!(Figure::SatisfiedRatio.measure(&ours, &nobody), None);
    }

    #[test]
    fn the_paper_table_pairs_runs_by_seed_and_shows_the_spread() {
        let mut runs = Vec::new();
        for (seed, gain) in [(0, 0.6), (1, 0.8)] {
            runs.push(run("fair-share", seed, vec![job(Some(100.0), None), job(Some(100.0), None)], 1));
            runs.push(run("flowcon", seed, vec![job(Some(100.0 * gain), None), job(Some(100.0), None)], 1));
        }
        let comparison = Comparison { workload: "w".into(), runs };
        let claim = Claim {
            policy: "flowcon".into(),
            figure: Figure::BestJobJct,
            value: Some(-0.4206),
            source: "FlowCon, ICPP 2019".into(),
            baseline: None,
        };
        let missing = Claim { policy: "specon".into(), ..claim.clone() };
        let table = comparison.paper_table(&[claim, missing]);
        assert!(table.contains("-42.1 %"), "{table}");
        assert!(table.contains("-30.0 % ± 14.1 % [-40.0 %, -20.0 %]"), "{table}");
        assert!(table.contains("not measured (specon did not run)"), "{table}");
        assert!(table.contains("over 4 job runs: min -40.0 %"), "{table}");
        assert!(table.contains("2 faster, 0 slower"), "{table}");
    }
}
