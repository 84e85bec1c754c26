//! The report as one plain-text table: a row per figure, a column per run.

use super::{Report, RunReport};

/// A figure, or "n/a".
pub(crate) fn or_na<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map_or_else(|| "n/a".to_owned(), f)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// The rows: a label and a function of a run.
type Row = (&'static str, fn(&RunReport) -> String);

const ROWS: &[Row] = &[
    ("pods created / bound", |r| {
        format!("{} / {}{}", r.pods_created, r.pods_bound, if r.timed_out { " (timed out)" } else { "" })
    }),
    ("create errors", |r| r.create_errors.to_string()),
    ("bound off the scale nodes", |r| r.bound_off_scale_nodes.to_string()),
    ("most pods on one node", |r| r.max_pods_per_node.to_string()),
    ("scale nodes over capacity", |r| r.overcommitted_nodes.to_string()),
    ("pods created in", |r| format!("{:.1} s", r.create_s)),
    ("first created → last bound", |r| format!("{:.1} s", r.bind_span_s)),
    ("binds/s (from first pod created)", |r| or_na(r.binds_per_s, |v| format!("{v:.1}"))),
    ("binds/s (from scheduler start)", |r| or_na(r.binds_per_s_from_start, |v| format!("{v:.1}"))),
    ("binds/s (first bind → last)", |r| or_na(r.binds_per_s_binding, |v| format!("{v:.1}"))),
    ("created → bound p50", |r| or_na(r.latency, |l| format!("{:.0} ms", l.p50_ms))),
    ("created → bound p99", |r| or_na(r.latency, |l| format!("{:.0} ms", l.p99_ms))),
    ("created → bound max", |r| or_na(r.latency, |l| format!("{:.0} ms", l.max_ms))),
    ("scheduler RSS peak", |r| or_na(r.rss_peak_bytes, mib)),
    ("scheduler RSS steady", |r| or_na(r.rss_steady_bytes, mib)),
    ("scheduler CPU binding", |r| or_na(r.cpu_binding_pct, |v| format!("{v:.0} % core"))),
    ("scheduler CPU steady", |r| or_na(r.cpu_steady_pct, |v| format!("{v:.1} % core"))),
    ("apiserver CPU binding", |r| or_na(r.apiserver_cpu_binding_pct, |v| format!("{v:.0} % core"))),
    ("log lines (total)", |r| or_na(r.log, |l| l.lines.to_string())),
    ("log lines/s binding", |r| or_na(r.log_lines_per_s_binding, |v| format!("{v:.1}"))),
    ("log lines/s steady", |r| or_na(r.log_lines_per_s_steady, |v| format!("{v:.1}"))),
    ("log: errors", |r| or_na(r.log, |l| l.errors.to_string())),
    ("log: does not answer / timed out / 429", |r| {
        or_na(r.log, |l| format!("{} / {} / {}", l.does_not_answer, l.timed_out, l.too_many_requests))
    }),
    ("apiserver requests/s binding", |r| or_na(r.requests_per_s_binding, |v| format!("{v:.1}"))),
    ("apiserver requests/s steady", |r| or_na(r.requests_per_s_steady, |v| format!("{v:.1}"))),
    ("groups bound whole / partly", |r| {
        or_na(r.groups.as_ref(), |g| format!("{} of {} / {}", g.bound_whole, g.created, g.partly_bound))
    }),
    ("groups/s (from first pod created)", |r| or_na(r.groups.as_ref().and_then(|g| g.per_s), |v| format!("{v:.1}"))),
    ("group's last created → all bound p50", |r| {
        or_na(r.groups.as_ref().and_then(|g| g.latency), |l| format!("{:.0} ms", l.p50_ms))
    }),
    ("group's last created → all bound p99", |r| {
        or_na(r.groups.as_ref().and_then(|g| g.latency), |l| format!("{:.0} ms", l.p99_ms))
    }),
    ("claims allocated / on their pod's node", |r| {
        or_na(r.dra, |d| format!("{} of {} / {}", d.allocated, d.claims, d.on_pod_node))
    }),
    ("claims reserved for their pod", |r| or_na(r.dra, |d| d.reserved_for_pod.to_string())),
    ("devices given twice", |r| or_na(r.dra, |d| d.double_allocated_devices.to_string())),
    ("host ticks", |r| or_na(r.host_ticks, |v| v.to_string())),
    ("tick wall p50 / p99 / max", |r| {
        or_na(r.tick_wall, |t| format!("{:.0} / {:.0} / {:.0} ms (n={})", t.p50_ms, t.p99_ms, t.max_ms, t.count))
    }),
];

/// `table` (a header row, then rows of as many cells) as lines: the first column left-aligned,
/// the others right-aligned, a rule under the header.
pub(crate) fn grid(table: &[Vec<String>]) -> Vec<String> {
    let columns = table.first().map_or(0, Vec::len);
    let widths: Vec<usize> =
        (0..columns).map(|c| table.iter().map(|row| row[c].chars().count()).max().unwrap_or(0)).collect();
    let mut lines = Vec::with_capacity(table.len() + 1);
    for (i, row) in table.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(
                |(c, cell)| {
                    if c == 0 { format!("{cell:<w$}", w = widths[c]) } else { format!("{cell:>w$}", w = widths[c]) }
                },
            )
            .collect();
        lines.push(format!("| {} |", cells.join(" | ")));
        if i == 0 {
            lines.push(format!("|{}|", widths.iter().map(|w| "-".repeat(w + 2)).collect::<Vec<_>>().join("|")));
        }
    }
    lines
}

/// The table: a heading line with the experiment, a row per figure, the ratio last.
pub fn render(report: &Report) -> String {
    let o = &report.options;
    let mut lines = vec![format!(
        "{} nodes ({} cores, {} GPUs each), {} pods of 1 CPU / 1 GiB{}{}, host tick {} ms, kube-scheduler QPS {}{}",
        o.nodes,
        report.node_cores,
        o.gpus_per_node,
        o.pods,
        if o.pod_gpus > 0 { format!(" / {} GPU", o.pod_gpus) } else { String::new() },
        if o.group_size > 1 {
            format!(" in {} groups of {}", o.pods / o.group_size, o.group_size)
        } else {
            String::new()
        },
        o.tick.as_millis(),
        if o.scheduler_qps == 0 { "as configured".to_owned() } else { o.scheduler_qps.to_string() },
        if o.precreate { ", pods created before each scheduler starts" } else { "" },
    )];
    if o.cache_dir.is_some() {
        lines[0].push_str("; the host's compile cache kept from an earlier run");
    }
    if o.dra {
        lines[0].push_str(&format!(
            "; GPUs through DRA ({}: a ResourceSlice a node, a ResourceClaim a pod)",
            super::dra::DRIVER
        ));
    }
    let mut table: Vec<Vec<String>> =
        vec![std::iter::once(String::new()).chain(report.runs.iter().map(|r| r.scheduler.clone())).collect()];
    for (label, f) in ROWS {
        table.push(std::iter::once((*label).to_owned()).chain(report.runs.iter().map(f)).collect());
    }
    lines.extend(grid(&table));
    let per = if o.group_size > 1 { "groups/s" } else { "binds/s" };
    lines.push(format!("\n{per} wasmsched / kube-scheduler: {}", or_na(report.ratio, |r| format!("{r:.2}"))));
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubernetes::{Only, Options};
    use crate::stats::Latency;
    use std::path::PathBuf;
    use std::time::Duration;

    fn run(name: &str, rate: Option<f64>) -> RunReport {
        RunReport {
            scheduler: name.into(),
            namespace: format!("scale-{name}"),
            pods_created: 4000,
            create_errors: 0,
            pods_bound: 4000,
            bound_off_scale_nodes: 0,
            max_pods_per_node: 4,
            overcommitted_nodes: 0,
            timed_out: false,
            create_s: 12.0,
            bind_span_s: 80.0,
            binds_per_s: rate,
            binds_per_s_from_start: rate,
            binds_per_s_binding: rate,
            latency: Some(Latency { count: 4000, p50_ms: 1500.0, p99_ms: 9000.0, max_ms: 9500.0 }),
            rss_peak_bytes: Some(100 * 1024 * 1024),
            rss_steady_bytes: None,
            cpu_binding_pct: Some(95.0),
            cpu_steady_pct: Some(1.5),
            apiserver_cpu_binding_pct: None,
            log: None,
            log_lines_per_s_binding: None,
            log_lines_per_s_steady: None,
            requests_per_s_binding: None,
            requests_per_s_steady: None,
            tick_wall: None,
            host_ticks: None,
            groups: None,
            dra: None,
        }
    }

    fn report(runs: Vec<RunReport>, ratio: Option<f64>) -> Report {
        Report {
            started_unix_s: 0,
            options: Options {
                nodes: 1000,
                pods: 4000,
                gpus_per_node: 8,
                pod_gpus: 0,
                group_size: 1,
                tick: Duration::from_secs(1),
                host_bin: PathBuf::new(),
                fifo: PathBuf::new(),
                only: Only::Both,
                kubeconfig: PathBuf::new(),
                k8s_run: PathBuf::new(),
                concurrency: 32,
                timeout: Duration::from_secs(600),
                steady: Duration::from_secs(20),
                scheduler_qps: 5000,
                precreate: false,
                dra: false,
                cache_dir: None,
            },
            node_cores: 64,
            nodes_create_s: 10.0,
            runs,
            ratio,
            host_dir: None,
        }
    }

    #[test]
    fn both_runs_sit_side_by_side_with_missing_figures_as_na() {
        let text = render(&report(vec![run("wasmsched", Some(50.0)), run("kube-scheduler", Some(250.0))], Some(0.2)));
        let header = text.lines().nth(1).unwrap();
        assert!(header.contains("wasmsched") && header.contains("kube-scheduler"), "{text}");
        let rate = text.lines().find(|l| l.contains("binds/s (from first")).unwrap();
        assert!(rate.contains("50.0") && rate.contains("250.0"), "{rate}");
        assert!(text.lines().find(|l| l.contains("RSS steady")).unwrap().contains("n/a"));
        assert!(text.ends_with("binds/s wasmsched / kube-scheduler: 0.20"), "{text}");
    }

    #[test]
    fn every_row_of_the_table_is_as_wide_as_the_header() {
        let text = render(&report(vec![run("wasmsched", None)], None));
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(rows.len(), ROWS.len() + 2);
        assert!(rows.iter().all(|r| r.chars().count() == rows[0].chars().count()), "{text}");
        assert!(text.ends_with("n/a"));
    }
}
