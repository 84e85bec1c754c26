//! The report's tables: each policy's objective, the paper's figures, the summary metrics and
//! the jobs. Every table sorts by a click on its header (numbers by their `data-v`).

use std::fmt::Write as _;

use super::Section;
use super::svg::{duration, escape, finite, number, quantile};
use crate::experiment::paper::{self, Claim, Figure, Measured, per_job_changes};
use crate::experiment::run::{RunReport, mean, std_dev};

/// One cell: its HTML (already escaped), the raw number it sorts by, and a class.
pub(super) struct Cell {
    html: String,
    value: Option<f64>,
    class: &'static str,
}

impl Cell {
    /// Text, left-aligned, sorted as text.
    pub(super) fn text(s: &str) -> Cell {
        Cell { html: escape(s), value: None, class: "l" }
    }

    /// A number shown as `s`, sorted by `value` (a non-finite one sorts as text).
    pub(super) fn num(value: f64, s: &str) -> Cell {
        Cell { html: escape(s), value: Some(value), class: "" }
    }

    /// A number shown as `html`, which the caller escaped.
    pub(super) fn num_html(value: f64, html: String) -> Cell {
        Cell { html, value: Some(value), class: "" }
    }

    /// A number, or `—` when there is none.
    pub(super) fn maybe(value: Option<f64>, show: impl Fn(f64) -> String) -> Cell {
        value.map_or_else(|| Cell::num(f64::NAN, "—"), |v| Cell::num(v, &show(v)))
    }

    /// The same cell with a class (`good`, `bad`).
    pub(super) fn with_class(self, class: &'static str) -> Cell {
        Cell { class, ..self }
    }
}

/// An HTML table that sorts by a click on its header, in a container that scrolls on its
/// own when it is wider than the page. A column is aligned left when its first cell is text.
pub(super) struct Table {
    id: String,
    label: String,
    columns: Vec<String>,
    /// Whether each column's first cell is text, once there is a row.
    text: Vec<bool>,
    rows: String,
}

impl Table {
    /// A table `id` (unique on the page) of `columns`, `label` naming it for a screen reader.
    pub(super) fn new(id: &str, label: &str, columns: &[&str]) -> Table {
        let columns = columns.iter().map(|c| c.to_string()).collect();
        Table { id: id.into(), label: label.into(), columns, text: Vec::new(), rows: String::new() }
    }

    pub(super) fn row(&mut self, cells: impl IntoIterator<Item = Cell>) {
        let first = self.text.is_empty();
        self.rows.push_str("<tr>");
        for c in cells {
            if first {
                self.text.push(c.class == "l");
            }
            let class = if c.class.is_empty() { String::new() } else { format!(" class=\"{}\"", c.class) };
            match c.value.filter(|v| v.is_finite()) {
                Some(v) => {
                    let _ = write!(self.rows, "<td{class} data-v=\"{v}\">{}</td>", c.html);
                }
                None => {
                    let _ = write!(self.rows, "<td{class}>{}</td>", c.html);
                }
            }
        }
        self.rows.push_str("</tr>\n");
    }

    /// The table into `out`, after a search box that filters its rows when `search`.
    pub(super) fn finish(self, search: bool, out: &mut String) {
        if search {
            let _ = writeln!(
                out,
                "<input type=\"search\" class=\"filter\" data-table=\"{}\" placeholder=\"filter rows…\" \
                 aria-label=\"filter the rows of {}\">",
                escape(&self.id),
                escape(&self.label)
            );
        }
        let _ = write!(
            out,
            "<div class=\"scroll\"><table class=\"sortable\" id=\"{}\" aria-label=\"{}\">\n<thead><tr>",
            escape(&self.id),
            escape(&self.label)
        );
        for (k, c) in self.columns.iter().enumerate() {
            let class = if self.text.get(k).copied().unwrap_or(k == 0) { " class=\"l\"" } else { "" };
            let _ = write!(out, "<th{class}>{}</th>", escape(c));
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        out.push_str(&self.rows);
        out.push_str("</tbody>\n</table></div>\n");
    }
}

/// How good a figure's value is: above 0 better than the baseline, below 0 worse.
pub(super) fn goodness(figure: Figure, value: f64) -> f64 {
    if figure.lower_is_better() { -value } else { value - 1.0 }
}

/// `good` or `bad` for a clear change (beyond ±0.5 %), else nothing.
pub(super) fn verdict(figure: Figure, value: f64) -> &'static str {
    match goodness(figure, value) {
        g if g > 0.005 => "good",
        g if g < -0.005 => "bad",
        _ => "",
    }
}

/// The figure each policy other than the baseline is judged by: its own first `[[paper]]`
/// figure, else the mean JCT (said so in its source).
fn objective_of(s: &Section, policy: &str) -> Claim {
    paper::objective(s.claims, policy).cloned().unwrap_or_else(|| Claim {
        policy: policy.into(),
        figure: Figure::MeanJct,
        value: None,
        source: "no [[paper]] figure about it: mean JCT shown".into(),
        baseline: None,
    })
}

/// Each policy's own objective, measured against the baseline, one row per policy and
/// scenario (with a scenario column when there are several).
pub(super) fn objectives(sections: &[Section], id: &str, out: &mut String) {
    out.push_str(
        "<p class=\"note\">The figure each policy sets out to move (the first paper figure about it), measured \
         against the baseline run of the same seed; change as mean ± sd over seeds, blue when better, red when \
         worse; its 95 % bootstrap interval, and the paired permutation test's p.</p>\n",
    );
    let several = sections.len() > 1;
    let mut columns = if several { vec!["scenario"] } else { Vec::new() };
    columns.extend(["policy", "objective", "baseline", "ours", "change", "95 % CI", "p", "seeds", "paper", "source"]);
    let mut table = Table::new(id, "each policy's objective", &columns);
    for s in sections {
        let baseline = s.comparison.baseline();
        let others: Vec<&str> = s.policies.iter().copied().filter(|p| *p != baseline).collect();
        if others.is_empty() {
            let mut row = if several { vec![Cell::text(s.name())] } else { Vec::new() };
            row.extend([Cell::text(baseline), Cell::text("—"), Cell::text(&format!("{baseline} only"))]);
            row.extend((0..6).map(|_| Cell::num(f64::NAN, "—")));
            row.push(Cell::text("nothing to compare: only the baseline ran"));
            table.row(row);
        }
        for policy in others {
            let claim = objective_of(s, policy);
            let mut row = if several { vec![Cell::text(s.name())] } else { Vec::new() };
            row.extend([Cell::text(policy), Cell::text(claim.figure.name())]);
            match s.comparison.measure(&claim) {
                Some(m) => row.extend(measured_cells(&m, true)),
                None => {
                    row.extend([Cell::text(baseline), Cell::num(f64::NAN, "—")]);
                    row.push(Cell::num(f64::NAN, &s.comparison.not_measured(&claim)));
                    row.extend([Cell::num(f64::NAN, "—"), Cell::num(f64::NAN, "—"), Cell::num(0.0, "0")]);
                }
            }
            row.push(Cell::maybe(claim.value, |v| claim.figure.format(v)));
            row.push(Cell::text(&claim.source));
            table.row(row);
        }
    }
    table.finish(false, out);
}

/// baseline (with its value when `values`), ours, change, seeds.
fn measured_cells(m: &Measured, values: bool) -> Vec<Cell> {
    let f = m.figure;
    let mut cells = Vec::new();
    if values {
        let base = format!("{}: {}", m.baseline, f.format_value(m.baseline_value));
        cells.push(Cell::num(m.baseline_value, &base));
        cells.push(Cell::num(m.value, &f.format_value(m.value)));
    }
    cells.push(Cell::num(m.mean, &m.summary()).with_class(verdict(f, m.mean)));
    let low = m.paired.interval.map_or(f64::NAN, |i| i[0]);
    cells.push(Cell::num(low, &m.interval()));
    let p = m.paired.p.map_or(f64::NAN, |p| p);
    cells.push(Cell::num(p, &m.paired.p.map_or_else(String::new, crate::stats::show_p)));
    cells.push(Cell::num(m.seeds as f64, &m.seeds.to_string()));
    cells
}

/// Every `[[paper]]` figure beside ours, then each policy's per-job JCT changes.
pub(super) fn paper(s: &Section, out: &mut String) {
    out.push_str("<h3>Beside the paper</h3>\n");
    if s.claims.is_empty() {
        out.push_str("<p class=\"note\">The workload lists no paper figures.</p>\n");
    } else {
        let _ = writeln!(
            out,
            "<p class=\"note\">Every figure the scenario lists, against {} on the same seeds; ours as mean ± sd \
             over seeds, and its range.</p>",
            escape(s.comparison.baseline())
        );
        let columns = ["policy", "figure", "paper", "ours", "lowest", "highest", "seeds", "source"];
        let mut table = Table::new(&s.id("paper"), "the paper's figures beside ours", &columns);
        for claim in s.claims {
            let f = claim.figure;
            let mut row = vec![Cell::text(&claim.policy), Cell::text(f.name())];
            row.push(Cell::maybe(claim.value, |v| f.format(v)));
            match s.comparison.measure(claim) {
                Some(m) => {
                    row.push(Cell::num(m.mean, &m.summary()).with_class(verdict(f, m.mean)));
                    row.push(Cell::num(m.range.0, &f.format(m.range.0)));
                    row.push(Cell::num(m.range.1, &f.format(m.range.1)));
                    row.push(Cell::num(m.seeds as f64, &m.seeds.to_string()));
                }
                None => {
                    row.push(Cell::num(f64::NAN, &s.comparison.not_measured(claim)));
                    row.extend([Cell::num(f64::NAN, "—"), Cell::num(f64::NAN, "—"), Cell::num(0.0, "0")]);
                }
            }
            row.push(Cell::text(&claim.source));
            table.row(row);
        }
        table.finish(false, out);
    }
    job_changes(s, out);
}

/// Each policy's per-job JCT change against the baseline's run of the same seed.
fn job_changes(s: &Section, out: &mut String) {
    let baseline = s.comparison.baseline();
    let runs = &s.comparison.runs;
    let rows: Vec<(&str, Vec<f64>)> = s
        .policies
        .iter()
        .filter(|p| **p != baseline)
        .map(|p| {
            let mut changes: Vec<f64> = runs
                .iter()
                .filter(|r| r.policy == *p)
                .filter_map(|r| runs.iter().find(|b| b.policy == baseline && b.seed == r.seed).map(|b| (r, b)))
                .flat_map(|(r, b)| per_job_changes(r, b, |j| j.jct_s))
                .filter(|c| c.is_finite())
                .collect();
            changes.sort_by(f64::total_cmp);
            (*p, changes)
        })
        .filter(|(_, c)| !c.is_empty())
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<h4>Per-job JCT change against {}</h4>\n<p class=\"note\">Each job against itself under the baseline, \
         same seed, over all seeds; faster and slower count changes beyond ±0.5 %.</p>",
        escape(baseline)
    );
    let columns =
        ["policy", "job runs", "lowest", "lower quartile", "median", "upper quartile", "highest", "faster", "slower"];
    let mut table = Table::new(&s.id("job-changes"), "per-job JCT change", &columns);
    let pct = |v: f64| Figure::MeanJobJct.format(v);
    for (policy, c) in rows {
        let mut row = vec![Cell::text(policy), Cell::num(c.len() as f64, &c.len().to_string())];
        for q in [0.0, 0.25, 0.5, 0.75, 1.0] {
            let v = quantile(&c, q);
            row.push(Cell::num(v, &pct(v)));
        }
        let faster = c.iter().filter(|x| **x < -0.005).count();
        let slower = c.iter().filter(|x| **x > 0.005).count();
        row.push(Cell::num(faster as f64, &faster.to_string()));
        row.push(Cell::num(slower as f64, &slower.to_string()));
        table.row(row);
    }
    table.finish(false, out);
}

/// Reads one number off a run, and shows a mean ± sd of it.
struct Metric {
    name: &'static str,
    of: fn(&RunReport) -> f64,
    show: fn(f64, f64) -> String,
}

/// Mean ± sd of times, in the mean's unit.
fn time_pm(m: f64, sd: f64) -> String {
    let unit = super::svg::TimeUnit::for_max(m);
    format!("{} ± {} {}", number(m / unit.seconds), number(sd / unit.seconds), unit.name)
}

/// Each policy's summary metrics over seeds, with the ratio of each to the baseline's.
pub(super) fn summary(s: &Section, out: &mut String) {
    let baseline = s.comparison.baseline();
    let _ = writeln!(
        out,
        "<h3>Summary</h3>\n<p class=\"note\">Mean ± sd over seeds; below each, the ratio to {}.</p>",
        escape(baseline)
    );
    let metrics = [
        Metric { name: "makespan", of: |r| r.makespan_s, show: time_pm },
        Metric { name: "mean JCT", of: |r| r.mean_jct_s, show: time_pm },
        Metric { name: "p95 JCT", of: |r| r.p95_jct_s, show: time_pm },
        Metric {
            name: "satisfied",
            of: |r| r.satisfied as f64,
            show: |m, sd| format!("{} ± {}", number(m), number(sd)),
        },
        Metric {
            name: "CPU util",
            of: |r| 100.0 * r.cpu_utilisation,
            show: |m, sd| format!("{} ± {} %", number(m), number(sd)),
        },
        Metric {
            name: "disruptions",
            of: |r| r.disruptions as f64,
            show: |m, sd| format!("{} ± {}", number(m), number(sd)),
        },
        Metric {
            name: "policy time",
            of: |r| r.policy_time_ms,
            show: |m, sd| format!("{:.2} ± {:.2} ms", finite(m), finite(sd)),
        },
    ];
    let mut columns = vec!["policy", "seeds"];
    columns.extend(metrics.iter().map(|m| m.name));
    let mut table = Table::new(&s.id("summary"), "summary metrics", &columns);
    let of = |policy: &str, f: fn(&RunReport) -> f64| -> Vec<f64> {
        s.comparison.runs.iter().filter(|r| r.policy == policy).map(f).map(finite).collect()
    };
    for policy in &s.policies {
        let seeds = s.comparison.runs.iter().filter(|r| r.policy == *policy).count();
        let mut row = vec![Cell::text(policy), Cell::num(seeds as f64, &seeds.to_string())];
        for m in &metrics {
            let xs = of(policy, m.of);
            let (avg, base) = (mean(&xs), mean(&of(baseline, m.of)));
            let mut html = escape(&(m.show)(avg, std_dev(&xs)));
            if base.abs() > 1e-12 {
                let _ = write!(html, "<br><span class=\"r\">×{:.3}</span>", avg / base);
            }
            row.push(Cell::num_html(avg, html));
        }
        table.row(row);
    }
    table.finish(false, out);
}

/// For each policy's first seed, a searchable table of every job.
pub(super) fn jobs(s: &Section, out: &mut String) {
    out.push_str(
        "<h3>Jobs</h3>\n<p class=\"note\">The first seed of each policy. Times are from the job's arrival; T1 and T2 \
         are when its targets were reached (— if never); waited is the time to its first start, and why, as the \
         policy last said while the job was queued.</p>\n",
    );
    if s.first.is_empty() {
        out.push_str("<p class=\"note\">No runs.</p>\n");
    }
    let tiers = s.workload.jobs.iter().any(|j| j.tiers.is_some())
        || s.first.iter().flat_map(|r| &r.jobs).any(|o| !o.targets_reached_s.is_empty());
    let mut columns = vec!["job", "model", "arrival", "JCT"];
    if tiers {
        columns.extend(["T1", "T2"]);
    }
    columns.extend(["satisfied", "waited", "why it waited", "migrations", "preemptions"]);
    for (k, run) in s.first.iter().enumerate() {
        let _ = writeln!(out, "<h4>{} (seed {})</h4>", escape(&run.policy), run.seed);
        let label = format!("jobs under {}", run.policy);
        let mut table = Table::new(&s.id(&format!("jobs-{k}")), &label, &columns);
        for i in 0..s.job_count {
            let mut row = vec![Cell::text(&s.job_name(i)), Cell::text(&s.job_model(i))];
            row.push(Cell::maybe(s.job_arrival_s(i), duration));
            let Some(o) = run.jobs.get(i) else {
                row.extend((3..columns.len()).map(|_| Cell::num(f64::NAN, "—")));
                table.row(row);
                continue;
            };
            let jct = o.jct_s.map_or_else(|| "did not end".to_string(), duration);
            row.push(Cell::num(o.jct_s.unwrap_or(f64::NAN), &if o.stopped { format!("{jct} (stopped)") } else { jct }));
            if tiers {
                for t in 0..2 {
                    row.push(Cell::maybe(o.targets_reached_s.get(t).copied().flatten(), duration));
                }
            }
            let satisfied = match o.satisfied {
                Some(true) => "yes",
                Some(false) => "no",
                None => "—",
            };
            row.push(Cell::text(satisfied));
            row.push(Cell::maybe(o.waited_s, duration));
            row.push(Cell::text(o.pending.as_deref().unwrap_or("—")));
            row.push(Cell::num(f64::from(o.migrations), &o.migrations.to_string()));
            row.push(Cell::num(f64::from(o.preemptions), &o.preemptions.to_string()));
            table.row(row);
        }
        table.finish(true, out);
    }
}

/// For a replay of a recording: each job's recorded JCT beside each policy's (mean over the
/// seeds it ended in), with what its speed rests on; the jobs left out of the replay last.
pub(super) fn recorded(s: &Section, out: &mut String) {
    let Some(replay) = s.recorded else { return };
    let versus = replay.versus(s.comparison);
    let recorded = replay.recorded_policy.as_deref().unwrap_or("the recorded policy");
    let _ = writeln!(
        out,
        "<h3>Recorded and replayed</h3>\n<p class=\"note\">Each job's completion time as recorded (under {}) and \
         under each policy, mean over the seeds it ended in. A speed fitted to the job itself rests on what it ran; \
         an assumed one on the jobs that ran a whole epoch (it ran none). A job unfinished at the recording's end \
         runs to its end here, and has no recorded JCT. The means are over the jobs that ended in the recording \
         and in every replay.</p>",
        escape(recorded)
    );
    let mut columns = vec!["jobs of", "jobs", "recorded mean JCT"];
    columns.extend(versus.iter().map(|v| v.policy.as_str()));
    let mut means = Table::new(&s.id("recorded-means"), "mean JCTs recorded and replayed", &columns);
    for m in replay.means(&versus) {
        let mut row = vec![Cell::text(m.tenant.as_deref().unwrap_or("every tenant"))];
        row.push(Cell::num(m.jobs as f64, &m.jobs.to_string()));
        row.push(Cell::maybe(Some(m.recorded_s), duration));
        row.extend(m.policies_s.iter().map(|&p| Cell::maybe(Some(p), duration)));
        means.row(row);
    }
    means.finish(false, out);
    let mut columns = vec!["job", "tenant", "speed", "recorded JCT"];
    columns.extend(versus.iter().map(|v| v.policy.as_str()));
    let mut table = Table::new(&s.id("recorded"), "recorded and replayed jobs", &columns);
    for (i, job) in replay.jobs.iter().enumerate() {
        let speed = job.speed.as_ref().map_or_else(|| "left out".to_string(), ToString::to_string);
        let mut row = vec![Cell::text(&job.name), Cell::text(&job.tenant), Cell::text(&speed)];
        row.push(if job.unfinished {
            Cell::num(f64::NAN, "unfinished")
        } else {
            Cell::maybe(job.recorded_jct_s, duration)
        });
        row.extend(versus.iter().map(|v| Cell::maybe(v.jct_s.get(i).copied().flatten(), duration)));
        table.row(row);
    }
    table.finish(true, out);
}
