//! An HTML report of a [`Comparison`]: one self-contained page (inline SVG and CSS, no
//! JavaScript, nothing fetched) that a person opens in a browser.
//!
//! The page holds the summary table, the spread of job completion times per policy over all
//! seeds, and for the first seed of each policy the CPU each job used over time, the CPU limit
//! the policy set on each job, each job's main metric over time, and a per-job table. Start at [`write_html`]; the pictures are drawn
//! by hand with a small `Svg` writer and "nice" ticks (1, 2 or 5 × 10^k), so the report needs
//! no fonts, no plotting crate and no system library. Every number written into the SVG goes
//! through one formatter that turns a non-finite value into 0, and every string through
//! `escape`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::run::{Comparison, RunReport};
use crate::backend::sim::JobOutcome;
use crate::backend::sim::workload::Workload;

mod svg;

use svg::*;

/// Jobs drawn in the time charts at most; the others are summed into one band or left out.
const MAX_JOBS_DRAWN: usize = 20;

/// One colour per drawn job, by rank (Tableau 20).
const PALETTE: [&str; MAX_JOBS_DRAWN] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
];

/// The band of the jobs that are not drawn one by one.
const OTHER_COLOUR: &str = "#eeeeee";

const CSS: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1000px;color:#222;padding:0 1em}\
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}h3{font-size:1em;margin:1.2em 0 .3em}\
pre{background:#f6f6f6;padding:.8em;overflow-x:auto;font-size:12px}\
.meta,.note{color:#555}.wide{overflow-x:auto}\
table{border-collapse:collapse;font-size:12px}th,td{border:1px solid #ddd;padding:2px 6px;text-align:right}\
th{background:#f3f3f3}td.l,th.l{text-align:left}\
svg{display:block;margin:.3em 0}svg text{font-family:system-ui,sans-serif;font-size:11px;fill:#222}\
svg .title{font-size:13px;font-weight:600}svg .empty{fill:#888;font-size:13px}\
svg .axis{stroke:#333;stroke-width:1}svg .grid{stroke:#e6e6e6;stroke-width:1}\
svg .cap{stroke:#555;stroke-width:1;stroke-dasharray:5 3}";

/// Write `dir/index.html` (creating `dir`), self-contained (inline SVG, inline CSS, no
/// JavaScript, no network), and return its path.
pub fn write_html(comparison: &Comparison, workload: &Workload, dir: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("index.html");
    std::fs::write(&path, render(comparison, workload))?;
    Ok(path)
}

/// What every section of the page needs: the runs to draw and which jobs to draw.
struct Page<'a> {
    comparison: &'a Comparison,
    workload: &'a Workload,
    policies: Vec<&'a str>,
    /// The run shown in the time charts and the job table for each policy, in `policies` order.
    first: Vec<&'a RunReport>,
    /// Jobs in the workload (or in the runs, if those have more).
    job_count: usize,
    /// The job indices drawn in the time charts, busiest first.
    drawn: Vec<usize>,
}

impl<'a> Page<'a> {
    fn new(comparison: &'a Comparison, workload: &'a Workload) -> Page<'a> {
        let policies = comparison.policies();
        let first: Vec<&RunReport> = policies.iter().filter_map(|p| first_run(comparison, p)).collect();
        let job_count = comparison.runs.iter().map(|r| r.jobs.len()).fold(workload.jobs.len(), usize::max);
        let drawn = busiest_jobs(&first, job_count, MAX_JOBS_DRAWN);
        Page { comparison, workload, policies, first, job_count, drawn }
    }

    /// How many jobs the time charts do not draw one by one.
    fn hidden(&self) -> usize {
        self.job_count.saturating_sub(self.drawn.len())
    }

    /// A job's name: from the workload, else from any run's outcome.
    fn job_name(&self, i: usize) -> String {
        match self.workload.jobs.get(i) {
            Some(plan) => plan.name.clone(),
            None => self.outcome_anywhere(i).map_or_else(|| format!("job {i}"), |o| o.name.clone()),
        }
    }

    fn job_model(&self, i: usize) -> String {
        match self.workload.jobs.get(i) {
            Some(plan) => plan.model_name().to_string(),
            None => self.outcome_anywhere(i).map_or_else(String::new, |o| o.model.clone()),
        }
    }

    fn job_arrival_s(&self, i: usize) -> Option<f64> {
        self.workload.jobs.get(i).map(|p| p.arrival_s).or_else(|| self.outcome_anywhere(i).map(|o| o.arrival_s))
    }

    fn outcome_anywhere(&self, i: usize) -> Option<&'a JobOutcome> {
        self.comparison.runs.iter().find_map(|r| r.jobs.get(i))
    }

    /// The palette slot of a drawn job.
    fn colour(&self, job: usize) -> Option<&'static str> {
        self.drawn.iter().position(|&j| j == job).map(|rank| PALETTE[rank % PALETTE.len()])
    }
}

/// The run of `policy` that kept a timeline, else its lowest seed.
fn first_run<'a>(comparison: &'a Comparison, policy: &str) -> Option<&'a RunReport> {
    let runs = comparison.runs.iter().filter(|r| r.policy == policy);
    runs.clone().find(|r| !r.timeline.is_empty()).or_else(|| runs.min_by_key(|r| r.seed))
}

/// The `max` jobs with the most CPU summed over the runs' timelines, busiest first; ties (and
/// runs without a timeline) go by workload order.
fn busiest_jobs(runs: &[&RunReport], job_count: usize, max: usize) -> Vec<usize> {
    let mut total = vec![0.0f64; job_count];
    for sample in runs.iter().flat_map(|r| &r.timeline) {
        for js in &sample.jobs {
            if let Some(t) = total.get_mut(js.job as usize) {
                *t += finite(js.cpu).max(0.0);
            }
        }
    }
    let mut order: Vec<usize> = (0..job_count).collect();
    order.sort_by(|&a, &b| total[b].total_cmp(&total[a]).then(a.cmp(&b)));
    order.truncate(max);
    order
}

/// The whole page.
fn render(comparison: &Comparison, workload: &Workload) -> String {
    let page = Page::new(comparison, workload);
    let name = if workload.name.is_empty() { &comparison.workload } else { &workload.name };
    let cores: f64 = workload.nodes.iter().map(|n| n.cpu_millicores as f64 / 1000.0).sum();
    let mut seeds: Vec<u64> = comparison.runs.iter().map(|r| r.seed).collect();
    seeds.sort_unstable();
    seeds.dedup();

    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>wasmsched: {}</title>\n<style>{CSS}</style>\n</head>\n<body>\n",
        escape(name)
    );
    let _ = writeln!(out, "<h1>Scheduling policies on workload {}</h1>", escape(name));
    let _ = writeln!(
        out,
        "<p class=\"meta\">{} jobs on {} nodes ({} cores) · {} policies · {} seed(s) · {} runs</p>",
        page.job_count,
        workload.nodes.len(),
        number(cores),
        page.policies.len(),
        seeds.len(),
        comparison.runs.len()
    );
    let _ = writeln!(out, "<pre>{}</pre>", escape(&comparison.table()));
    if !workload.paper.is_empty() {
        out.push_str("<h2>Beside the paper</h2>\n");
        let _ = writeln!(out, "<pre>{}</pre>", escape(&comparison.paper_table(&workload.paper)));
    }

    jct_section(&page, &mut out);
    cpu_section(&page, cores, &mut out);
    limits_section(&page, &mut out);
    progress_section(&page, &mut out);
    jobs_section(&page, &mut out);
    out.push_str("</body>\n</html>\n");
    out
}

/// Section 2: every job's completion time over all seeds, a box per policy.
fn jct_section(page: &Page, out: &mut String) {
    out.push_str("<h2>Job completion time</h2>\n");
    out.push_str(
        "<p class=\"note\">Every finished job of every seed. Whiskers span min to max, the box the \
         quartiles, the thick bar the median; each dot is one job.</p>\n",
    );
    let per_policy: Vec<Vec<f64>> = page
        .policies
        .iter()
        .map(|p| {
            let mut xs: Vec<f64> = page
                .comparison
                .runs
                .iter()
                .filter(|r| r.policy == *p)
                .flat_map(|r| r.jobs.iter().filter_map(|j| j.jct_s))
                .filter(|x| x.is_finite())
                .collect();
            xs.sort_by(f64::total_cmp);
            xs
        })
        .collect();
    let max_s = per_policy.iter().flatten().copied().fold(0.0, f64::max);
    let unit = TimeUnit::for_max(max_s);

    let (left, right, top, row_h) = (170.0, 740.0, 40.0, 44.0);
    let rows = page.policies.len().max(1);
    let bottom = top + rows as f64 * row_h;
    let mut svg = Svg::new(960.0, bottom + 52.0, "job completion time per policy");
    svg.text(left, 20.0, Anchor::Start, "title", "Job completion time per policy (all seeds)");
    let x = Scale::nice(0.0, max_s / unit.seconds, left, right);
    x_axis(&mut svg, &x, bottom, top, &format!("job completion time ({})", unit.name));
    svg.line(left, bottom, left, top, "axis");
    svg.vtext(18.0, (top + bottom) / 2.0, "policy");
    if page.policies.is_empty() {
        svg.text((left + right) / 2.0, (top + bottom) / 2.0 + 4.0, Anchor::Middle, "empty", "no runs");
    }
    for (row, (policy, xs)) in page.policies.iter().zip(&per_policy).enumerate() {
        let mid = top + (row as f64 + 0.5) * row_h;
        svg.line(left - 4.0, mid, left, mid, "axis");
        svg.text(left - 8.0, mid + 4.0, Anchor::End, "", &shorten(policy, 24));
        let jobs: usize = page.comparison.runs.iter().filter(|r| r.policy == *policy).map(|r| r.jobs.len()).sum();
        if xs.is_empty() {
            svg.text(left + 10.0, mid + 4.0, Anchor::Start, "empty", &format!("no job finished (of {jobs})"));
            continue;
        }
        let at = |s: f64| x.at(s / unit.seconds);
        let (lo, q1, med, q3, hi) =
            (xs[0], quantile(xs, 0.25), quantile(xs, 0.5), quantile(xs, 0.75), xs[xs.len() - 1]);
        let half = row_h * 0.3;
        svg.line(at(lo), mid, at(q1), mid, "axis");
        svg.line(at(q3), mid, at(hi), mid, "axis");
        svg.line(at(lo), mid - half / 2.0, at(lo), mid + half / 2.0, "axis");
        svg.line(at(hi), mid - half / 2.0, at(hi), mid + half / 2.0, "axis");
        svg.rect(at(q1), mid - half, at(q3) - at(q1), 2.0 * half, "#dbe8f5", "#1f77b4");
        for (i, &v) in xs.iter().enumerate() {
            // A fixed scatter so equal times stay visible, the same on every render.
            let dy = ((i * 7919) % 17) as f64 / 16.0 - 0.5;
            svg.circle(at(v), mid + dy * half * 1.6, 2.2, "#1f77b4", 0.45);
        }
        svg.line_styled(at(med), mid - half, at(med), mid + half, "#0b3c6b", 3.0);
        svg.text(
            right + 10.0,
            mid + 4.0,
            Anchor::Start,
            "",
            &format!("median {} · {}/{jobs} ended", unit.label(med), xs.len()),
        );
    }
    out.push_str(&svg.finish());
}

/// Opens a section drawn from each policy's first run: its title, and its note followed by
/// `left_out(drawn, hidden)` when some jobs are not drawn. False (after "No runs.") when there
/// is nothing to draw.
fn open_section(
    page: &Page,
    title: &str,
    note: &str,
    left_out: impl Fn(usize, usize) -> String,
    out: &mut String,
) -> bool {
    let _ = writeln!(out, "<h2>{title}</h2>");
    if page.first.is_empty() {
        out.push_str("<p class=\"note\">No runs.</p>\n");
        return false;
    }
    let hidden = page.hidden();
    let more = if hidden > 0 { left_out(page.drawn.len(), hidden) } else { String::new() };
    let _ = writeln!(out, "<p class=\"note\">{note}{more}</p>");
    true
}

/// Section 3: each policy's CPU per job over time, stacked, on shared axes.
fn cpu_section(page: &Page, capacity_cores: f64, out: &mut String) {
    let note = "Cores used by each job, stacked, at every tick of the first seed.";
    let left_out = |drawn, hidden| {
        format!(
            " Only the {drawn} jobs with the most CPU are drawn one by one; the other {hidden} are summed into the \
             grey band on top."
        )
    };
    if !open_section(page, "CPU used over time", note, left_out, out) {
        return;
    }
    // One row per sample: (time, cores per drawn job, cores of the others).
    let stacks: Vec<Vec<(f64, Vec<f64>, f64)>> = page
        .first
        .iter()
        .map(|run| {
            run.timeline
                .iter()
                .filter(|s| s.time_s.is_finite())
                .map(|s| {
                    let mut drawn = vec![0.0; page.drawn.len()];
                    let mut other = 0.0;
                    for js in &s.jobs {
                        let cores = finite(js.cpu).max(0.0);
                        match page.drawn.iter().position(|&j| j == js.job as usize) {
                            Some(k) => drawn[k] += cores,
                            None => other += cores,
                        }
                    }
                    (s.time_s, drawn, other)
                })
                .collect()
        })
        .collect();
    let max_t = stacks.iter().flatten().map(|s| s.0).fold(0.0, f64::max);
    let max_cores = stacks.iter().flatten().map(|s| s.1.iter().sum::<f64>() + s.2).fold(capacity_cores, f64::max);
    let unit = TimeUnit::for_max(max_t);
    let hidden = page.hidden();
    let legend = legend_entries(page, hidden);

    for (run, stack) in page.first.iter().zip(&stacks) {
        let _ = writeln!(out, "<h3>{} (seed {})</h3>", escape(&run.policy), run.seed);
        let mut chart = TimeChart::new(
            &format!("CPU used per job: {} (seed {})", run.policy, run.seed),
            max_t / unit.seconds,
            0.0,
            max_cores,
            &format!("time ({})", unit.name),
            "CPU (cores)",
        );
        if stack.is_empty() {
            chart.empty("no timeline recorded for this run");
        }
        let layers = page.drawn.len() + usize::from(hidden > 0);
        let mut base: Vec<f64> = vec![0.0; stack.len()];
        for layer in 0..layers {
            let top: Vec<f64> = stack
                .iter()
                .zip(&base)
                .map(|((_, drawn, other), b)| b + drawn.get(layer).copied().unwrap_or(*other))
                .collect();
            let mut points: Vec<(f64, f64)> =
                stack.iter().zip(&top).map(|(s, &y)| chart.at(s.0 / unit.seconds, y)).collect();
            points.extend(stack.iter().zip(&base).rev().map(|(s, &y)| chart.at(s.0 / unit.seconds, y)));
            let fill = page.drawn.get(layer).and_then(|&j| page.colour(j)).unwrap_or(OTHER_COLOUR);
            if stack.len() == 1 {
                // One tick: a thin bar instead of an area of no width.
                let (x, y0) = chart.at(stack[0].0 / unit.seconds, base[0]);
                let (_, y1) = chart.at(stack[0].0 / unit.seconds, top[0]);
                chart.svg.rect(x - 2.0, y1, 4.0, y0 - y1, fill, "none");
            } else if stack.len() > 1 {
                chart.svg.polygon(&points, fill);
            }
            base = top;
        }
        if capacity_cores > 0.0 {
            let (x0, y) = chart.at(chart.x.lo, capacity_cores);
            let (x1, _) = chart.at(chart.x.hi, capacity_cores);
            chart.svg.line(x0, y, x1, y, "cap");
            chart.svg.text(x1 - 4.0, y - 4.0, Anchor::End, "", &format!("capacity {} cores", number(capacity_cores)));
        }
        chart.legend(&legend);
        out.push_str(&chart.finish());
    }
}

/// Section 5: each drawn job's main metric over time, per policy.
fn progress_section(page: &Page, out: &mut String) {
    let note = "Each job's main metric (accuracy, loss or latency, by model) at every report of the first seed; a \
                dot marks its last report.";
    let series = |run: &RunReport, job: usize| -> Vec<Vec<(f64, f64)>> {
        let curve = run.jobs.get(job).map(|o| o.progress.clone()).unwrap_or_default();
        vec![curve.into_iter().filter(|(t, m)| t.is_finite() && m.is_finite()).collect()]
    };
    let lines = Lines {
        title: "Progress",
        chart: "Main metric per job",
        y_label: "main metric",
        note,
        empty: "no progress recorded for this run",
    };
    lines_section(page, &lines, series, out);
}

/// Section 4: the CPU limit each policy set on each drawn job over time.
fn limits_section(page: &Page, out: &mut String) {
    let note = "The CPU limit in force on each job at every tick of the first seed, in cores; no line while a \
                job runs unlimited (fair-share's default), a dot at the last limit.";
    // Stretches of consecutive ticks with a limit, each drawn as one line.
    let series = |run: &RunReport, job: usize| -> Vec<Vec<(f64, f64)>> {
        let mut stretches: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
        for sample in &run.timeline {
            let limit = sample.jobs.iter().find(|js| js.job as usize == job).and_then(|js| js.cpu_limit);
            match limit {
                Some(cores) if cores.is_finite() => {
                    stretches.last_mut().expect("never empty").push((sample.time_s, cores))
                }
                _ if stretches.last().is_some_and(|s| !s.is_empty()) => stretches.push(Vec::new()),
                _ => {}
            }
        }
        stretches.retain(|s| !s.is_empty());
        stretches
    };
    let lines = Lines {
        title: "CPU limits",
        chart: "CPU limit per job",
        y_label: "CPU limit (cores)",
        note,
        empty: "no CPU limit was set in this run",
    };
    lines_section(page, &lines, series, out);
}

/// The words of a section of per-job lines.
struct Lines<'a> {
    title: &'a str,
    chart: &'a str,
    y_label: &'a str,
    note: &'a str,
    empty: &'a str,
}

/// A section with one chart per policy's first run: each drawn job's `series` (stretches of
/// (time s, value)) as lines, a dot at its last point.
fn lines_section(
    page: &Page,
    words: &Lines,
    series: impl Fn(&RunReport, usize) -> Vec<Vec<(f64, f64)>>,
    out: &mut String,
) {
    let left_out =
        |drawn, hidden| format!(" Only the {drawn} jobs with the most CPU are drawn; {hidden} are left out.");
    if !open_section(page, words.title, words.note, left_out, out) {
        return;
    }
    let all: Vec<(f64, f64)> = page
        .first
        .iter()
        .flat_map(|r| page.drawn.iter().flat_map(|&j| series(r, j)).flatten().collect::<Vec<_>>())
        .collect();
    let max_t = all.iter().map(|p| p.0).fold(0.0, f64::max);
    let (lo, hi) = all.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
    let (lo, hi) = if all.is_empty() { (0.0, 1.0) } else { (lo, hi) };
    let unit = TimeUnit::for_max(max_t);
    let legend = legend_entries(page, 0);

    for run in &page.first {
        let _ = writeln!(out, "<h3>{} (seed {})</h3>", escape(&run.policy), run.seed);
        let mut chart = TimeChart::new(
            &format!("{}: {} (seed {})", words.chart, run.policy, run.seed),
            max_t / unit.seconds,
            lo,
            hi,
            &format!("time ({})", unit.name),
            words.y_label,
        );
        let mut any = false;
        for &job in &page.drawn {
            let colour = page.colour(job).unwrap_or(OTHER_COLOUR);
            let stretches = series(run, job);
            for stretch in &stretches {
                let points: Vec<(f64, f64)> = stretch.iter().map(|&(t, y)| chart.at(t / unit.seconds, y)).collect();
                if points.len() > 1 {
                    chart.svg.polyline(&points, colour);
                }
            }
            if let Some(&(t, y)) = stretches.last().and_then(|s| s.last()) {
                let (x, y) = chart.at(t / unit.seconds, y);
                chart.svg.circle(x, y, 3.0, colour, 1.0);
                any = true;
            }
        }
        if !any {
            chart.empty(words.empty);
        }
        chart.legend(&legend);
        out.push_str(&chart.finish());
    }
}

/// Section 6: one row per job, the first seed's outcome under each policy.
fn jobs_section(page: &Page, out: &mut String) {
    out.push_str("<h2>Jobs</h2>\n");
    out.push_str(
        "<p class=\"note\">First seed of each policy. Times are from the job's arrival; targets are the \
         times its tiers were reached (— if never).</p>\n<div class=\"wide\">\n<table>\n<thead>\n<tr>\
         <th class=\"l\" rowspan=\"2\">job</th><th class=\"l\" rowspan=\"2\">model</th><th rowspan=\"2\">arrival</th>",
    );
    for run in &page.first {
        let _ = write!(out, "<th colspan=\"4\">{} (seed {})</th>", escape(&run.policy), run.seed);
    }
    out.push_str("</tr>\n<tr>");
    for _ in &page.first {
        out.push_str("<th>JCT</th><th>targets</th><th>satisfied</th><th>migrations</th>");
    }
    out.push_str("</tr>\n</thead>\n<tbody>\n");
    for i in 0..page.job_count {
        let arrival = page.job_arrival_s(i).map_or_else(|| "—".to_string(), duration);
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td>",
            escape(&page.job_name(i)),
            escape(&page.job_model(i)),
            escape(&arrival)
        );
        for run in &page.first {
            match run.jobs.get(i) {
                Some(o) => {
                    let jct = o.jct_s.map_or_else(|| "did not end".to_string(), duration);
                    let jct = if o.stopped { format!("{jct} (stopped)") } else { jct };
                    let targets: Vec<String> =
                        o.targets_reached_s.iter().map(|t| t.map_or_else(|| "—".to_string(), duration)).collect();
                    let satisfied = match o.satisfied {
                        Some(true) => "yes",
                        Some(false) => "no",
                        None => "—",
                    };
                    let _ = write!(
                        out,
                        "<td>{}</td><td>{}</td><td>{satisfied}</td><td>{}</td>",
                        escape(&jct),
                        escape(&targets.join(" / ")),
                        o.migrations
                    );
                }
                None => out.push_str("<td>—</td><td>—</td><td>—</td><td>—</td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n</div>\n");
}

/// The legend of the time charts: the drawn jobs, then the others' band if any.
fn legend_entries(page: &Page, hidden: usize) -> Vec<(String, &'static str)> {
    let mut entries: Vec<(String, &str)> =
        page.drawn.iter().map(|&j| (page.job_name(j), page.colour(j).unwrap_or(OTHER_COLOUR))).collect();
    if hidden > 0 {
        entries.push((format!("{hidden} other jobs"), OTHER_COLOUR));
    }
    entries
}

#[cfg(test)]
mod tests;
