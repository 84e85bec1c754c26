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

use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};

use super::engine::JobOutcome;
use super::run::{Comparison, RunReport};
use super::workload::Workload;

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
            Some(plan) => plan.model.name().to_string(),
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
        for &(job, cores, _) in &sample.cpu {
            if let Some(t) = total.get_mut(job as usize) {
                *t += finite(cores).max(0.0);
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
                    for &(job, cores, _) in &s.cpu {
                        let cores = finite(cores).max(0.0);
                        match page.drawn.iter().position(|&j| j == job as usize) {
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
            let limit = sample.cpu.iter().find(|(j, _, _)| *j as usize == job).and_then(|(_, _, limit)| *limit);
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

/// A chart of values over time with a legend on its right.
struct TimeChart {
    svg: Svg,
    x: Scale,
    y: Scale,
}

impl TimeChart {
    const WIDTH: f64 = 960.0;
    const HEIGHT: f64 = 390.0;
    const LEFT: f64 = 70.0;
    const RIGHT: f64 = 730.0;
    const TOP: f64 = 40.0;
    const BOTTOM: f64 = 340.0;

    fn new(title: &str, max_x: f64, min_y: f64, max_y: f64, x_title: &str, y_title: &str) -> TimeChart {
        let mut svg = Svg::new(Self::WIDTH, Self::HEIGHT, title);
        svg.text(Self::LEFT, 20.0, Anchor::Start, "title", title);
        let x = Scale::nice(0.0, max_x, Self::LEFT, Self::RIGHT);
        let y = Scale::nice(min_y, max_y, Self::BOTTOM, Self::TOP);
        x_axis(&mut svg, &x, Self::BOTTOM, Self::TOP, x_title);
        y_axis(&mut svg, &y, Self::LEFT, Self::RIGHT, y_title);
        TimeChart { svg, x, y }
    }

    /// Pixel position of a value.
    fn at(&self, x: f64, y: f64) -> (f64, f64) {
        (self.x.at(x), self.y.at(y))
    }

    fn empty(&mut self, why: &str) {
        let (x, y) = ((Self::LEFT + Self::RIGHT) / 2.0, (Self::TOP + Self::BOTTOM) / 2.0);
        self.svg.text(x, y, Anchor::Middle, "empty", why);
    }

    fn legend(&mut self, entries: &[(String, &str)]) {
        let x = Self::RIGHT + 20.0;
        for (i, (name, colour)) in entries.iter().enumerate() {
            let y = Self::TOP + i as f64 * 15.0;
            self.svg.rect(x, y, 10.0, 10.0, colour, "#999");
            self.svg.text(x + 15.0, y + 9.0, Anchor::Start, "", &shorten(name, 28));
        }
    }

    fn finish(self) -> String {
        self.svg.finish()
    }
}

/// Grid lines, ticks and labels of a horizontal axis at `bottom`, and its title.
fn x_axis(svg: &mut Svg, x: &Scale, bottom: f64, top: f64, title: &str) {
    for t in x.ticks() {
        let px = x.at(t);
        svg.line(px, bottom, px, top, "grid");
        svg.line(px, bottom, px, bottom + 5.0, "axis");
        svg.text(px, bottom + 18.0, Anchor::Middle, "", &tick_label(t, x.step));
    }
    svg.line(x.px0, bottom, x.px1, bottom, "axis");
    svg.text((x.px0 + x.px1) / 2.0, bottom + 38.0, Anchor::Middle, "", title);
}

/// Grid lines, ticks and labels of a vertical axis at `left`, and its title.
fn y_axis(svg: &mut Svg, y: &Scale, left: f64, right: f64, title: &str) {
    for t in y.ticks() {
        let py = y.at(t);
        svg.line(left, py, right, py, "grid");
        svg.line(left - 5.0, py, left, py, "axis");
        svg.text(left - 8.0, py + 4.0, Anchor::End, "", &tick_label(t, y.step));
    }
    svg.line(left, y.px0, left, y.px1, "axis");
    svg.vtext(16.0, (y.px0 + y.px1) / 2.0, title);
}

/// A linear map from values to pixels over a range widened to whole ticks.
#[derive(Clone, Copy, Debug)]
struct Scale {
    lo: f64,
    hi: f64,
    step: f64,
    px0: f64,
    px1: f64,
}

impl Scale {
    /// Ticks wanted along an axis, about.
    const TICKS: f64 = 6.0;

    fn nice(lo: f64, hi: f64, px0: f64, px1: f64) -> Scale {
        let (mut lo, mut hi) = (finite(lo), finite(hi));
        if hi < lo {
            std::mem::swap(&mut lo, &mut hi);
        }
        if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
            let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
            (lo, hi) = if lo == 0.0 { (0.0, pad) } else { (lo - pad, hi + pad) };
        }
        let step = nice_step((hi - lo) / Self::TICKS);
        let lo = (lo / step + 1e-9).floor() * step;
        let hi = (hi / step - 1e-9).ceil() * step;
        let hi = if hi > lo { hi } else { lo + step };
        Scale { lo, hi, step, px0, px1 }
    }

    fn at(&self, v: f64) -> f64 {
        let span = self.hi - self.lo;
        if !span.is_finite() || span <= 0.0 || !v.is_finite() {
            return self.px0;
        }
        self.px0 + (v - self.lo) / span * (self.px1 - self.px0)
    }

    fn ticks(&self) -> Vec<f64> {
        let n = ((self.hi - self.lo) / self.step).round();
        let n = if n.is_finite() { (n as usize).min(100) } else { 0 };
        (0..=n).map(|i| self.lo + i as f64 * self.step).collect()
    }
}

/// The smallest 1, 2 or 5 × 10^k at least `raw`; 1 for anything not positive and finite.
fn nice_step(raw: f64) -> f64 {
    if !raw.is_finite() || raw <= 0.0 {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    let norm = raw / magnitude;
    let m = if norm <= 1.0 + 1e-9 {
        1.0
    } else if norm <= 2.0 + 1e-9 {
        2.0
    } else if norm <= 5.0 + 1e-9 {
        5.0
    } else {
        10.0
    };
    m * magnitude
}

/// A tick's label with as many decimals as its step needs.
fn tick_label(v: f64, step: f64) -> String {
    let decimals = if step > 0.0 && step.is_finite() { (-step.log10().floor()).clamp(0.0, 6.0) as usize } else { 0 };
    let v = if v.abs() < step.abs() * 1e-9 { 0.0 } else { finite(v) };
    format!("{v:.decimals$}")
}

/// Seconds, minutes or hours, picked from the largest value to show.
#[derive(Clone, Copy, Debug, PartialEq)]
struct TimeUnit {
    name: &'static str,
    seconds: f64,
}

impl TimeUnit {
    const S: TimeUnit = TimeUnit { name: "s", seconds: 1.0 };
    const MIN: TimeUnit = TimeUnit { name: "min", seconds: 60.0 };
    const H: TimeUnit = TimeUnit { name: "h", seconds: 3600.0 };

    fn for_max(max_s: f64) -> TimeUnit {
        match finite(max_s) {
            s if s < 120.0 => Self::S,
            s if s < 2.0 * 3600.0 => Self::MIN,
            _ => Self::H,
        }
    }

    fn label(self, s: f64) -> String {
        format!("{} {}", number(finite(s) / self.seconds), self.name)
    }
}

/// A duration for a table cell, in a unit of its own size.
fn duration(s: f64) -> String {
    TimeUnit::for_max(s).label(s)
}

/// A number for a person: at most one decimal, none when whole; non-finite becomes 0.
fn number(v: f64) -> String {
    let r = (finite(v) * 10.0).round() / 10.0;
    if r.fract() == 0.0 { format!("{r:.0}") } else { format!("{r:.1}") }
}

/// The `q`-quantile of sorted, non-empty values, interpolated between ranks.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let Some(last) = sorted.len().checked_sub(1) else { return 0.0 };
    let pos = q.clamp(0.0, 1.0) * last as f64;
    let (i, frac) = (pos.floor() as usize, pos.fract());
    let next = sorted[(i + 1).min(last)];
    sorted[i] + (next - sorted[i]) * frac
}

fn finite(v: f64) -> f64 {
    if v.is_finite() { v } else { 0.0 }
}

/// At most `max` characters, with an ellipsis when cut.
fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max { s.to_string() } else { s.chars().take(max - 1).chain(['…']).collect() }
}

/// `s` with `&`, `<`, `>`, `"` and `'` replaced by entities, for HTML text and attributes.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A coordinate in the SVG: one decimal at most, 0 if not finite.
struct Px(f64);

impl fmt::Display for Px {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&number(self.0.clamp(-1e6, 1e6)))
    }
}

#[derive(Clone, Copy)]
enum Anchor {
    Start,
    Middle,
    End,
}

/// An SVG document written as text; every string escaped, every number through [`Px`].
struct Svg {
    out: String,
}

impl Svg {
    fn new(width: f64, height: f64, label: &str) -> Svg {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "<svg width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
            escape(label),
            w = Px(width),
            h = Px(height)
        );
        Svg { out }
    }

    fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, class: &str) {
        let _ = writeln!(
            self.out,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" class=\"{}\"/>",
            Px(x1),
            Px(y1),
            Px(x2),
            Px(y2),
            escape(class)
        );
    }

    fn line_styled(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str, width: f64) {
        let _ = writeln!(
            self.out,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"{}\"/>",
            Px(x1),
            Px(y1),
            Px(x2),
            Px(y2),
            escape(stroke),
            Px(width)
        );
    }

    fn points(points: &[(f64, f64)]) -> String {
        let mut s = String::new();
        for (i, (x, y)) in points.iter().enumerate() {
            let _ = write!(s, "{}{},{}", if i > 0 { " " } else { "" }, Px(*x), Px(*y));
        }
        s
    }

    fn polyline(&mut self, points: &[(f64, f64)], stroke: &str) {
        let _ = writeln!(
            self.out,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>",
            Self::points(points),
            escape(stroke)
        );
    }

    fn polygon(&mut self, points: &[(f64, f64)], fill: &str) {
        let _ = writeln!(
            self.out,
            "<polygon points=\"{}\" fill=\"{}\" stroke=\"#fff\" stroke-width=\"0.3\"/>",
            Self::points(points),
            escape(fill)
        );
    }

    fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, stroke: &str) {
        // A negative size is invalid SVG: draw from the other corner instead.
        let (x, w) = if w < 0.0 { (x + w, -w) } else { (x, w) };
        let (y, h) = if h < 0.0 { (y + h, -h) } else { (y, h) };
        let _ = writeln!(
            self.out,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"{}\"/>",
            Px(x),
            Px(y),
            Px(w),
            Px(h),
            escape(fill),
            escape(stroke)
        );
    }

    fn circle(&mut self, cx: f64, cy: f64, r: f64, fill: &str, opacity: f64) {
        let _ = writeln!(
            self.out,
            "<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\" fill-opacity=\"{}\"/>",
            Px(cx),
            Px(cy),
            Px(r),
            escape(fill),
            Px(opacity)
        );
    }

    fn text(&mut self, x: f64, y: f64, anchor: Anchor, class: &str, s: &str) {
        let anchor = match anchor {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        };
        let _ = writeln!(
            self.out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\" class=\"{}\">{}</text>",
            Px(x),
            Px(y),
            escape(class),
            escape(s)
        );
    }

    /// Text turned a quarter left, centred on (x, y): a vertical axis's title.
    fn vtext(&mut self, x: f64, y: f64, s: &str) {
        let _ = writeln!(
            self.out,
            "<text transform=\"translate({},{}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
            Px(x),
            Px(y),
            escape(s)
        );
    }

    fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::model::Model;
    use crate::sim::run::Sample;
    use crate::sim::workload::{JobPlan, NodeSpec};

    fn plan(name: &str, arrival_s: f64) -> JobPlan {
        JobPlan { max_epochs: Some(5), ..JobPlan::training(name, Model::Cifar10, arrival_s) }
    }

    fn workload(names: &[&str]) -> Workload {
        Workload {
            name: "tiny & <odd>".into(),
            nodes: vec![NodeSpec {
                name: "n0".into(),
                cpu_millicores: 8000,
                memory_bytes: 64 << 30,
                gpus: 0,
                gpu_memory_bytes: 0,
            }],
            jobs: names.iter().enumerate().map(|(i, n)| plan(n, 10.0 * i as f64)).collect(),
            paper: Vec::new(),
        }
    }

    fn outcome(name: &str, jct_s: Option<f64>, progress: Vec<(f64, f64)>) -> JobOutcome {
        JobOutcome {
            name: name.into(),
            model: "cifar10".into(),
            arrival_s: 0.0,
            finish_s: jct_s,
            jct_s,
            targets_reached_s: vec![Some(30.0), None],
            delivered_s: None,
            satisfied: Some(true),
            qoe: None,
            migrations: 1,
            stopped: false,
            epochs: 5,
            progress,
        }
    }

    fn run(policy: &str, seed: u64, jobs: Vec<JobOutcome>, timeline: Vec<Sample>) -> RunReport {
        RunReport {
            policy: policy.into(),
            digest: "00".into(),
            seed,
            makespan_s: 100.0,
            mean_jct_s: 50.0,
            p95_jct_s: 90.0,
            satisfied: 1,
            with_qoe_target: 2,
            cpu_utilisation: 0.5,
            policy_calls: 10,
            policy_time_ms: 1.0,
            fallbacks: 0,
            rejected_actions: 0,
            wall_ms: 3.0,
            jobs,
            timeline,
        }
    }

    fn timeline(jobs: u32) -> Vec<Sample> {
        (0..5)
            .map(|t| Sample {
                time_s: 30.0 * t as f64,
                cpu: (0..jobs).map(|j| (j, 1.0 + f64::from(j), Some(4.0))).collect(),
            })
            .collect()
    }

    fn two_policies() -> (Comparison, Workload) {
        let w = workload(&["a<b", "plain"]);
        let jobs = |scale: f64| {
            vec![
                outcome("a<b", Some(60.0 * scale), vec![(0.0, 0.1), (30.0, 0.5), (60.0, 0.8)]),
                outcome("plain", Some(90.0 * scale), vec![(10.0, 0.2), (100.0, 0.7)]),
            ]
        };
        let runs = vec![
            run("fair-share", 0, jobs(1.0), timeline(2)),
            run("fair-share", 1, jobs(1.1), Vec::new()),
            run("flowcon", 0, jobs(0.8), timeline(2)),
            run("flowcon", 1, jobs(0.9), Vec::new()),
        ];
        (Comparison { workload: w.name.clone(), runs }, w)
    }

    fn write(comparison: &Comparison, workload: &Workload) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = write_html(comparison, workload, dir.path()).unwrap();
        assert_eq!(path, dir.path().join("index.html"));
        std::fs::read_to_string(path).unwrap()
    }

    /// Every number in an SVG attribute parses as a finite float.
    fn assert_svg_numbers_are_finite(html: &str) {
        for attr in
            [" x=\"", " y=\"", " x1=\"", " x2=\"", " y1=\"", " y2=\"", " cx=\"", " cy=\"", " width=\"", " height=\""]
        {
            for rest in html.split(attr).skip(1) {
                let value = &rest[..rest.find('"').unwrap()];
                assert!(value.parse::<f64>().is_ok_and(f64::is_finite), "{attr}{value}");
            }
        }
        for rest in html.split(" points=\"").skip(1) {
            for pair in rest[..rest.find('"').unwrap()].split(' ') {
                for v in pair.split(',') {
                    assert!(v.parse::<f64>().is_ok_and(f64::is_finite), "points {pair}");
                }
            }
        }
    }

    fn assert_clean(html: &str) {
        assert!(!html.contains("NaN"), "NaN in the page");
        assert!(!html.contains("inf"), "inf in the page");
        assert!(!html.contains("<script"), "no JavaScript");
        assert!(!html.contains("http"), "nothing fetched");
        assert_svg_numbers_are_finite(html);
    }

    #[test]
    fn report_has_a_chart_per_policy_and_escapes_every_name() {
        let (comparison, workload) = two_policies();
        let html = write(&comparison, &workload);
        // One JCT chart, then a CPU chart, a limits chart and a progress chart per policy.
        assert_eq!(html.matches("<svg").count(), 1 + 3 * 2);
        assert_eq!(html.matches("</svg>").count(), 1 + 3 * 2);
        assert!(html.contains("CPU limit per job: flowcon (seed 0)"));
        assert!(!html.contains("no CPU limit was set"), "both runs have limits");
        for policy in ["fair-share", "flowcon"] {
            assert!(html.contains(policy), "{policy} missing");
        }
        assert!(html.contains("a&lt;b"));
        assert!(!html.contains("a<b"));
        assert!(html.contains("tiny &amp; &lt;odd&gt;"));
        assert!(html.contains("<pre>") && html.contains("mean JCT s"), "the text table is on the page");
        assert!(html.contains("2 jobs on 1 nodes (8 cores)"));
        assert_clean(&html);
    }

    #[test]
    fn limits_draw_one_line_per_stretch_and_a_run_without_limits_says_so() {
        let (mut comparison, workload) = two_policies();
        // Job 0 limited, then unlimited, then limited again: two stretches.
        comparison.runs[2].timeline = (0..6)
            .map(|t| Sample {
                time_s: 30.0 * t as f64,
                cpu: vec![(0, 1.0, (t != 2 && t != 3).then_some(2.0 + f64::from(t))), (1, 1.0, None)],
            })
            .collect();
        comparison.runs[0].timeline = Vec::new();
        let html = write(&comparison, &workload);
        let limits = &html[html.find("CPU limit per job: flowcon").unwrap()..];
        let limits = &limits[..limits.find("</svg>").unwrap()];
        assert_eq!(limits.matches("<polyline").count(), 2, "{limits}");
        assert!(html.contains("no CPU limit was set in this run"), "fair-share's first run has none");
        assert_clean(&html);
    }

    #[test]
    fn zero_runs_still_write_a_page_with_the_jobs_of_the_workload() {
        let workload = workload(&["x<y"]);
        let html = write(&Comparison { workload: workload.name.clone(), runs: Vec::new() }, &workload);
        assert_eq!(html.matches("<svg").count(), 1, "only the JCT chart, saying there are no runs");
        assert!(html.contains("no runs"));
        assert!(html.contains("x&lt;y"));
        assert_clean(&html);
    }

    #[test]
    fn unfinished_jobs_single_points_and_non_finite_inputs_draw_no_nan() {
        let workload = workload(&["only"]);
        let mut lone = outcome("only", None, vec![(5.0, f64::NAN), (7.0, 0.3)]);
        lone.targets_reached_s.clear();
        lone.satisfied = None;
        let one_sample = vec![Sample { time_s: 0.0, cpu: vec![(0, f64::INFINITY, None), (99, 2.0, None)] }];
        let comparison = Comparison {
            workload: "w".into(),
            runs: vec![
                run("stuck", 0, vec![lone.clone()], one_sample),
                run("empty", 0, Vec::new(), Vec::new()),
                run("flat", 0, vec![outcome("only", Some(0.0), vec![(0.0, 1.0), (0.0, 1.0)])], timeline(1)),
            ],
        };
        let html = write(&comparison, &workload);
        assert_eq!(html.matches("<svg").count(), 1 + 3 * 3);
        assert!(html.contains("no job finished (of 1)"));
        assert!(html.contains("did not end"));
        assert!(html.contains("no timeline recorded"));
        assert_clean(&html);
    }

    #[test]
    fn more_than_twenty_jobs_draw_the_twenty_busiest_and_say_so() {
        let names: Vec<String> = (0..25).map(|i| format!("job-{i:02}")).collect();
        let workload = workload(&names.iter().map(String::as_str).collect::<Vec<_>>());
        let jobs = names.iter().map(|n| outcome(n, Some(10.0), Vec::new())).collect();
        let report = run("fair-share", 0, jobs, timeline(25));
        assert_eq!(busiest_jobs(&[&report], 25, 20), (5..25).rev().collect::<Vec<_>>());
        let html = write(&Comparison { workload: "w".into(), runs: vec![report] }, &workload);
        assert!(html.contains("Only the 20 jobs with the most CPU"));
        assert!(html.contains("5 other jobs"));
        assert_clean(&html);
    }

    #[test]
    fn ticks_step_by_one_two_or_five_times_a_power_of_ten() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(1.3), 2.0);
        assert_eq!(nice_step(30.0), 50.0);
        assert_eq!(nice_step(600.0), 1000.0);
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(nice_step(f64::NAN), 1.0);
        let s = Scale::nice(0.0, 93.0, 0.0, 100.0);
        assert_eq!((s.lo, s.hi, s.step), (0.0, 100.0, 20.0));
        assert_eq!(s.ticks(), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        let flat = Scale::nice(0.5, 0.5, 0.0, 100.0);
        assert!(flat.lo < 0.5 && flat.hi > 0.5, "{flat:?}");
        assert_eq!(tick_label(0.30000000000000004, 0.1), "0.3");
    }

    #[test]
    fn time_unit_follows_the_largest_value() {
        assert_eq!(TimeUnit::for_max(90.0), TimeUnit::S);
        assert_eq!(TimeUnit::for_max(600.0), TimeUnit::MIN);
        assert_eq!(TimeUnit::for_max(36_000.0), TimeUnit::H);
        assert_eq!(TimeUnit::for_max(f64::NAN), TimeUnit::S);
        assert_eq!(duration(5400.0), "90 min");
    }

    #[test]
    fn quartiles_interpolate_between_ranks() {
        let xs = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&xs, 0.5), 2.5);
        assert_eq!(quantile(&xs, 0.0), 1.0);
        assert_eq!(quantile(&xs, 1.0), 4.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }

    #[test]
    fn escape_replaces_the_html_specials() {
        assert_eq!(escape(r#"a<b>&"c'"#), "a&lt;b&gt;&amp;&quot;c&#39;");
        assert_eq!(shorten("abcdef", 4), "abc…");
    }
}
