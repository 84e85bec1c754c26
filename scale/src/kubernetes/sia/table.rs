//! The Sia run's report as one plain-text table (a row per figure, as `kubernetes/table.rs`
//! draws it), then every place over several nodes that was refused, and the verdict.

use super::super::table::{grid, or_na};
use super::SiaReport;
use super::audit::LogExcerpt;
use super::objects::HETEROGENEOUS_64;

/// The rows: a label and a function of the report.
type Row = (&'static str, fn(&SiaReport) -> String);

const ROWS: &[Row] = &[
    ("jobs created / create errors", |r| format!("{} of {} / {}", r.jobs_created, r.jobs, r.create_errors)),
    ("jobs elastic (declaring gpu-counts)", |r| format!("{} of {}", r.elastic_jobs, r.jobs)),
    ("latest submission behind its arrival", |r| format!("{:.2} s", r.submit_late_max_s)),
    ("groups bound whole (ever / at the end)", |r| {
        format!("{} / {} of {}", r.groups.bound_whole, r.groups.whole_at_end, r.groups.created)
    }),
    ("  of those over several nodes", |r| r.groups.whole_over_several_nodes.to_string()),
    ("groups seen partly bound at a watch event", |r| r.groups.partly_seen.to_string()),
    ("longest partly bound", |r| or_na(r.groups.longest_partly_ms, |ms| format!("{ms:.0} ms"))),
    ("groups partly bound at the end (must be 0)", |r| r.groups.partly_at_end.to_string()),
    ("groups re-created at another pod count", |r| r.groups.resized.to_string()),
    ("group's last created → bound whole p50 / p99", |r| {
        or_na(r.groups.latency, |l| format!("{:.0} / {:.0} ms (n={})", l.p50_ms, l.p99_ms, l.count))
    }),
    ("pods bound / off the scale nodes", |r| format!("{} / {}", r.groups.pods_bound, r.groups.pods_off_scale_nodes)),
    ("Sia's decisions (failed calls)", |r| {
        or_na(r.audit.as_ref(), |a| format!("{} ({} failed)", a.decisions, a.failed_calls))
    }),
    ("place actions / over several nodes", |r| {
        or_na(r.audit.as_ref(), |a| format!("{} / {}", a.places, a.places_multi_node))
    }),
    ("places over several nodes applied", |r| {
        or_na(r.audit.as_ref(), |a| format!("{} of {}", a.places_multi_node_applied, a.places_multi_node))
    }),
    ("places refused or failed (over several nodes; for the budget)", |r| {
        or_na(r.audit.as_ref(), |a| {
            let multi = a.refused_multi_node().count();
            format!("{} ({multi}; {})", a.refused_places.len(), multi - a.refused_multi_node_not_budget().count())
        })
    }),
    ("preempt actions / refused or failed", |r| {
        or_na(r.audit.as_ref(), |a| format!("{} / {}", a.preempts, a.preempts_refused))
    }),
    ("resize actions / over several nodes", |r| {
        or_na(r.audit.as_ref(), |a| format!("{} / {}", a.resizes, a.resizes_multi_node))
    }),
    ("resizes refused or failed", |r| or_na(r.audit.as_ref(), |a| a.resizes_refused.to_string())),
    ("places / resizes at another GPU total", |r| {
        or_na(r.audit.as_ref(), |a| format!("{} / {}", a.places_other_total, a.resizes_other_total))
    }),
    ("jobs the host started itself (stall rule)", |r| or_na(r.audit.as_ref(), |a| a.rescued.to_string())),
    ("host log: \"could not be applied\"", |r| r.not_applied_warnings.count.to_string()),
    ("host log: \"actions of earlier ticks failed\"", |r| r.earlier_failed_warnings.count.to_string()),
    ("host log lines / errors", |r| or_na(r.log, |l| format!("{} / {}", l.lines, l.errors))),
    ("host ticks / decisions", |r| or_na(r.status, |s| format!("{} / {}", s.ticks, s.decisions))),
    ("host jobs running / queued / held", |r| {
        or_na(r.status, |s| format!("{} / {} / {}", s.jobs_running, s.jobs_queued, s.held))
    }),
    ("watchdog benchings / disruptions / over budget", |r| {
        or_na(r.status, |s| format!("{} / {} / {}", s.watchdog_benchings, s.disruptions, s.over_budget))
    }),
];

/// Whether the run met its goal, and if not, why: every place over several nodes applied,
/// none refused but for the disruption budget (an action it counted on was over it), no group
/// partly bound at the end.
pub fn verdict(r: &SiaReport) -> Result<(), Vec<String>> {
    let mut why = Vec::new();
    match &r.audit {
        None => why.push("no audit log: see the host's log".to_owned()),
        Some(a) => {
            if a.places_multi_node == 0 {
                why.push("Sia made no place over several nodes: run more jobs".to_owned());
            }
            let refused = a.refused_multi_node_not_budget().count();
            if refused > 0 {
                why.push(format!(
                    "{refused} places over several nodes refused or failed, not for the disruption budget"
                ));
            }
        }
    }
    if r.groups.partly_at_end > 0 {
        why.push(format!("{} groups partly bound at the end", r.groups.partly_at_end));
    }
    if why.is_empty() { Ok(()) } else { Err(why) }
}

fn excerpt_lines(title: &str, e: &LogExcerpt, lines: &mut Vec<String>) {
    if e.count > 0 {
        lines.push(format!("\n{title} ({}; the first {}):", e.count, e.first.len()));
        lines.extend(e.first.iter().map(|l| format!("  {l}")));
    }
}

/// The report: a heading, the table, the refusals, the log's warnings, the verdict.
pub fn render(r: &SiaReport) -> String {
    let o = &r.options;
    let shape: Vec<String> =
        HETEROGENEOUS_64.iter().map(|t| format!("{}×{} {}", t.count, t.gpus, t.gpu_type)).collect();
    let mut lines = vec![format!(
        "Sia on heterogeneous-64 ({} object nodes, {} GPUs: {}): {} jobs ({}) of {} at {}× (last arrival {:.0} s), \
         host tick {} ms, run {:.0} s; run folder {}",
        r.nodes,
        r.gpus,
        shape.join(", "),
        r.jobs,
        if o.elastic { "elastic" } else { "rigid" },
        o.workload.display(),
        o.speedup,
        r.last_arrival_s,
        o.tick.as_millis(),
        r.run_s,
        r.run_dir.display(),
    )];
    let mut table = vec![vec![String::new(), "sia".to_owned()]];
    table.extend(ROWS.iter().map(|(label, f)| vec![(*label).to_owned(), f(r)]));
    lines.extend(grid(&table));
    if let Some(a) = &r.audit {
        let multi: Vec<_> = a.refused_multi_node().collect();
        if !multi.is_empty() {
            lines.push("\nplaces over several nodes refused or failed:".to_owned());
        }
        for p in multi {
            let stage =
                serde_json::to_value(p.stage).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
            lines.push(format!("  tick {} job {} on {} ({stage}): {}", p.tick, p.job, p.nodes.join(", "), p.reason));
        }
        for (what, reasons) in [("preemptions", &a.preempt_reasons), ("resizes", &a.resize_reasons)] {
            if !reasons.is_empty() {
                lines.push(format!("\n{what} refused or failed, the first reasons:"));
                lines.extend(reasons.iter().map(|why| format!("  {why}")));
            }
        }
        if let Some(f) = &a.first_failure {
            lines.push(format!("\nSia's first failed call: {f}"));
        }
    }
    excerpt_lines("host log: \"could not be applied\"", &r.not_applied_warnings, &mut lines);
    excerpt_lines("host log: \"actions of earlier ticks failed\"", &r.earlier_failed_warnings, &mut lines);
    lines.push(match verdict(r) {
        Ok(()) => {
            let cut = r.audit.as_ref().map_or(0, |a| a.refused_multi_node().count());
            let but = if cut > 0 { format!(" but {cut} for the disruption budget") } else { String::new() };
            format!("\nevery place Sia made over several nodes was bound whole; none refused{but}")
        }
        Err(why) => format!("\nNOT MET: {}", why.join("; ")),
    });
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubernetes::sia::SiaOptions;
    use crate::kubernetes::sia::audit::{AuditSummary, RefusedPlace, Stage};
    use crate::kubernetes::sia::groups::GroupSummary;
    use std::path::PathBuf;

    fn report(audit: Option<AuditSummary>) -> SiaReport {
        SiaReport {
            started_unix_s: 0,
            options: SiaOptions::sample(),
            run_dir: PathBuf::from("/tmp/wasmsched-sia-1"),
            namespace: "scale-sia-1".into(),
            nodes: 11,
            gpus: 64,
            jobs: 160,
            elastic_jobs: 0,
            last_arrival_s: 238.0,
            run_s: 300.0,
            jobs_created: 160,
            create_errors: 0,
            submit_late_max_s: 0.2,
            groups: GroupSummary { created: 160, bound_whole: 9, whole_over_several_nodes: 6, ..Default::default() },
            audit,
            not_applied_warnings: LogExcerpt::default(),
            earlier_failed_warnings: LogExcerpt::default(),
            log: None,
            status: None,
            node_handles: Vec::new(),
        }
    }

    #[test]
    fn every_row_is_as_wide_as_the_header_and_missing_figures_are_na() {
        let text = render(&report(None));
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(rows.len(), ROWS.len() + 2);
        assert!(rows.iter().all(|r| r.chars().count() == rows[0].chars().count()), "{text}");
        assert!(text.lines().find(|l| l.contains("Sia's decisions")).unwrap().contains("n/a"));
        assert!(text.ends_with("NOT MET: no audit log: see the host's log"), "{text}");
        assert!(text.contains("160 jobs (rigid)"), "{text}");
    }

    #[test]
    fn resizes_and_their_first_refusals_are_shown() {
        let audit = AuditSummary {
            resizes: 7,
            resizes_multi_node: 2,
            resizes_refused: 1,
            resize_reasons: vec!["pod a-3 could not be bound".into()],
            places_other_total: 3,
            resizes_other_total: 5,
            ..Default::default()
        };
        let mut r = report(Some(audit));
        (r.elastic_jobs, r.options.elastic) = (158, true);
        let text = render(&r);
        let row = |label: &str| text.lines().find(|l| l.contains(label)).unwrap().to_owned();
        assert!(row("resize actions / over several nodes").contains("7 / 2"), "{text}");
        assert!(row("resizes refused or failed").contains(" 1 "), "{text}");
        assert!(row("places / resizes at another GPU total").contains("3 / 5"), "{text}");
        assert!(row("jobs elastic").contains("158 of 160"), "{text}");
        assert!(text.contains("160 jobs (elastic)"), "{text}");
        assert!(text.contains("resizes refused or failed, the first reasons:\n  pod a-3 could not be bound"), "{text}");
    }

    #[test]
    fn a_refused_place_over_several_nodes_is_listed_and_fails_the_verdict() {
        let refused = RefusedPlace {
            tick: 12,
            job: 3,
            nodes: vec!["scale-node-t4-0".into(), "scale-node-t4-1".into()],
            stage: Stage::NotApplied,
            reason: "pod x could not be bound".into(),
        };
        let audit = AuditSummary {
            places: 10,
            places_multi_node: 6,
            places_multi_node_applied: 5,
            refused_places: vec![refused],
            ..Default::default()
        };
        let text = render(&report(Some(audit.clone())));
        assert!(text.contains("  tick 12 job 3 on scale-node-t4-0, scale-node-t4-1 (not-applied): pod x"), "{text}");
        assert!(
            text.ends_with("NOT MET: 1 places over several nodes refused or failed, not for the disruption budget"),
            "{text}"
        );
        // Refused because a preemption it counted on was over the disruption budget: listed, and
        // the goal met.
        let budget = RefusedPlace { stage: Stage::OverBudget, ..audit.refused_places[0].clone() };
        let cut = AuditSummary { refused_places: vec![budget], ..audit.clone() };
        let text = render(&report(Some(cut)));
        assert!(text.contains("(over-budget)") && text.contains("1 (1; 1) |"), "{text}");
        assert!(text.ends_with("none refused but 1 for the disruption budget"), "{text}");
        assert!(verdict(&report(Some(AuditSummary { places_multi_node_applied: 6, ..audit.clone() }))).is_err());
        let met = AuditSummary { places_multi_node_applied: 6, refused_places: Vec::new(), ..audit };
        assert!(render(&report(Some(met))).ends_with("none refused"));
    }
}
