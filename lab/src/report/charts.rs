//! The report's charts: every policy against the baseline as paired intervals, and over time
//! the JCT CDF of every policy, each job's progress toward its target, the CPU each job used,
//! the GPUs each tenant held, and the CPU limits a policy set.

use std::fmt::Write as _;

use wasmsched_core::bindings::wit::{Direction, JobKind};
use wasmsched_sim::model::{Model, meets};

use super::Section;
use super::svg::*;
use crate::experiment::paper::Measured;
use crate::experiment::run::RunReport;

/// Every policy against the baseline, paired over the same seeds: each figure's mean as a dot
/// (filled where the paired test found a difference) and its 95 % interval as a bar, beside
/// the dashed line of no difference; changes on one chart, ratios on another.
pub(super) fn paired(s: &Section, out: &mut String) {
    let all = s.comparison.against_baseline(s.claims);
    let _ = writeln!(
        out,
        "<h3>Against the baseline, paired over seeds</h3>\n<p class=\"note\">Each policy's figures against {} on \
         the same seeds: the dot is the mean over seeds, the bar its 95 % bootstrap interval, the dashed line no \
         difference. A filled dot: the paired permutation test found a difference (p &lt; 0.05); a hollow one: it \
         did not (with fewer than {} seeds it cannot, and the bar is about the seeds' range). Hover for the whole sentence.</p>",
        escape(s.comparison.baseline()),
        crate::stats::SEEDS_TO_FIND
    );
    if all.is_empty() {
        out.push_str("<p class=\"note\">Nothing to compare: only the baseline ran.</p>\n");
        return;
    }
    for ratio in [false, true] {
        let rows: Vec<&Measured> = all.iter().filter(|m| m.figure.is_ratio() == ratio).collect();
        if !rows.is_empty() {
            out.push_str(&forest(s, &rows, ratio));
        }
    }
}

/// One forest chart of `rows`: changes in percent, or ratios.
fn forest(s: &Section, rows: &[&Measured], ratio: bool) -> String {
    let (scale, null, title, axis): (f64, f64, &str, &str) = if ratio {
        (1.0, 1.0, "Ratios to the baseline, 95 % intervals", "ratio to the baseline (×)")
    } else {
        (100.0, 0.0, "Changes against the baseline, 95 % intervals", "change against the baseline (%)")
    };
    let ends = |m: &&Measured| m.paired.interval.unwrap_or([m.mean, m.mean]);
    let lo = rows.iter().map(|m| ends(m)[0]).fold(null, |a, b| a.min(finite(b)));
    let hi = rows.iter().map(|m| ends(m)[1]).fold(null, |a, b| a.max(finite(b)));
    let (left, right, top, row_h) = (320.0, 880.0, 34.0, 24.0);
    let bottom = top + rows.len() as f64 * row_h;
    let x = Scale::nice(lo * scale, hi * scale, left, right);
    let mut svg = Svg::new(900.0, bottom + 50.0, title);
    svg.text(left, 18.0, Anchor::Start, "title", title);
    x_axis(&mut svg, &x, bottom, top, axis);
    svg.line(x.at(null * scale), top, x.at(null * scale), bottom, "cap");
    for (k, m) in rows.iter().enumerate() {
        let y = top + (k as f64 + 0.5) * row_h;
        let colour = s.policy_colour(&m.policy);
        svg.open_group("paired", &m.sentence());
        let p = m.paired.p.map_or_else(String::new, crate::stats::show_p);
        svg.text(
            left - 8.0,
            y + 4.0,
            Anchor::End,
            "",
            &shorten(&format!("{} · {} · {p}", m.policy, m.figure.name()), 52),
        );
        let [a, b] = ends(m);
        svg.line_styled(x.at(a * scale), y, x.at(b * scale), y, colour, 2.0);
        svg.circle(x.at(m.mean * scale), y, 4.5, colour, 1.0);
        if !m.paired.found() {
            svg.circle(x.at(m.mean * scale), y, 2.5, "#ffffff", 1.0);
        }
        svg.close_group();
    }
    svg.finish()
}

/// One CDF line per policy: the fraction of all its jobs (every seed) finished by each time.
pub(super) fn jct_cdf(s: &Section, out: &mut String) {
    out.push_str(
        "<h3>Job completion time</h3>\n<p class=\"note\">Fraction of jobs finished within each completion time, \
         over every seed's jobs; the further left and the higher, the better. A line that ends below 1 left jobs \
         unfinished.</p>\n",
    );
    let curves: Vec<(&str, Vec<f64>, usize)> = s
        .policies
        .iter()
        .map(|p| {
            let runs = s.comparison.runs.iter().filter(|r| r.policy == *p);
            let total = runs.clone().map(|r| r.jobs.len()).sum();
            let mut xs: Vec<f64> =
                runs.flat_map(|r| r.jobs.iter().filter_map(|j| j.jct_s)).filter(|x| x.is_finite()).collect();
            xs.sort_by(f64::total_cmp);
            (*p, xs, total)
        })
        .collect();
    let max_s = curves.iter().flat_map(|c| &c.1).copied().fold(0.0, f64::max);
    let unit = TimeUnit::for_max(max_s);
    let mut chart = TimeChart::new(
        "Job completion time, CDF (all seeds)",
        max_s / unit.seconds,
        0.0,
        1.0,
        &format!("job completion time ({})", unit.name),
        "fraction of jobs finished",
    );
    if curves.is_empty() {
        chart.empty("no runs");
    }
    let mut legend: Vec<(String, &str)> = Vec::new();
    for (policy, xs, total) in &curves {
        let colour = s.policy_colour(policy);
        legend.push((policy.to_string(), colour));
        if xs.is_empty() {
            legend.push((format!("  no job finished (of {total})"), ""));
            continue;
        }
        let n = *total as f64;
        let mut points = vec![chart.at(0.0, 0.0)];
        for (k, &x) in xs.iter().enumerate() {
            points.push(chart.at(x / unit.seconds, k as f64 / n));
            points.push(chart.at(x / unit.seconds, (k + 1) as f64 / n));
        }
        points.push(chart.at(chart.x.hi, xs.len() as f64 / n));
        chart.svg.polyline_styled(&points, colour, 2.0, false);
        let median = unit.label(quantile(xs, 0.5));
        legend.push((format!("  median {median}, {}/{total} ended", xs.len()), ""));
    }
    chart.legend(&legend);
    out.push_str(&chart.finish());
}

/// A job's reports as progress toward its target: 0 at its first report, 1 at `target` (or,
/// without one, at its last report), clamped to 0..1. A job whose first report already meets
/// its target is at 1 throughout. Works alike for a metric that falls (loss) and one that
/// rises (accuracy): the span from the first report to the target carries the sign.
pub(super) fn normalised(curve: &[(f64, f64)], target: Option<f64>, direction: Direction) -> Vec<(f64, f64)> {
    let points: Vec<(f64, f64)> = curve.iter().copied().filter(|(t, m)| t.is_finite() && m.is_finite()).collect();
    let (Some(&(_, first)), Some(&(_, last))) = (points.first(), points.last()) else { return Vec::new() };
    let end = target.filter(|t| t.is_finite()).unwrap_or(last);
    let span = end - first;
    let reached = |m: f64| if meets(m, end, direction) { 1.0 } else { 0.0 };
    let already = target.is_some() && meets(first, end, direction);
    points
        .into_iter()
        .map(|(t, m)| {
            let y = if already {
                1.0
            } else if span.abs() <= 1e-12 * end.abs().max(1.0) {
                reached(m)
            } else {
                ((m - first) / span).clamp(0.0, 1.0)
            };
            (t, y)
        })
        .collect()
}

/// A job's target on its main metric (its last tier; an inference job's latency target), the
/// metric's name and its direction.
fn target_of(s: &Section, job: usize) -> (Option<f64>, String, Direction) {
    if let Some(plan) = s.workload.jobs.get(job) {
        let (metric, direction) = plan.metric();
        let target = match plan.kind {
            JobKind::Inference => plan.qoe_target,
            JobKind::Training => plan.tiers.map(|(_, t2)| t2),
        };
        return (target, metric.to_string(), direction);
    }
    let model = s.outcome_anywhere(job).and_then(|o| Model::parse(&o.model));
    let (metric, direction) = model.map_or(("metric", Direction::HigherIsBetter), Model::metric);
    (None, metric.to_string(), direction)
}

/// Per policy, each drawn job's progress toward its target over time, on one 0..1 axis.
pub(super) fn progress(s: &Section, out: &mut String) {
    let _ = writeln!(
        out,
        "<h3>Progress toward each job's target</h3>\n<p class=\"note\">Each job's main metric at every report of \
         the first seed, rescaled so that 0 is its first report and 1 its target (T2), or its last report when it \
         has none; a falling loss and a rising accuracy share the axis. Clamped to 0..1; a dot marks the last \
         report.{}</p>",
        escape(&s.left_out())
    );
    if s.first.is_empty() {
        out.push_str("<p class=\"note\">No runs.</p>\n");
        return;
    }
    let targets: Vec<(Option<f64>, String, Direction)> = s.drawn.iter().map(|&j| target_of(s, j)).collect();
    let series = |run: &RunReport| -> Vec<Vec<(f64, f64)>> {
        s.drawn
            .iter()
            .zip(&targets)
            .map(|(&j, (target, _, direction))| {
                run.jobs.get(j).map(|o| normalised(&o.progress, *target, *direction)).unwrap_or_default()
            })
            .collect()
    };
    let all: Vec<Vec<Vec<(f64, f64)>>> = s.first.iter().map(|r| series(r)).collect();
    let max_t = all.iter().flatten().flatten().map(|p| p.0).fold(s.max_t, f64::max);
    let unit = TimeUnit::for_max(max_t);
    let legend: Vec<(String, &str)> = s
        .drawn
        .iter()
        .zip(&targets)
        .map(|(&j, (_, metric, direction))| {
            let arrow = if *direction == Direction::LowerIsBetter { "↓" } else { "↑" };
            (format!("{} ({metric} {arrow})", s.job_name(j)), s.colour(j))
        })
        .collect();
    for (run, lines) in s.first.iter().zip(&all) {
        let _ = writeln!(out, "<h4>{} (seed {})</h4>", escape(&run.policy), run.seed);
        let title = format!("Progress toward target: {} (seed {})", run.policy, run.seed);
        let mut chart = TimeChart::new(
            &title,
            max_t / unit.seconds,
            0.0,
            1.0,
            &format!("time ({})", unit.name),
            "progress (1 = target)",
        );
        let mut any = false;
        for (&job, line) in s.drawn.iter().zip(lines) {
            let points: Vec<(f64, f64)> = line.iter().map(|&(t, y)| chart.at(t / unit.seconds, y)).collect();
            if points.len() > 1 {
                chart.svg.polyline(&points, s.colour(job));
            }
            if let Some(&(x, y)) = points.last() {
                chart.svg.circle(x, y, 3.0, s.colour(job), 1.0);
                any = true;
            }
        }
        if !any {
            chart.empty("no progress recorded (the run kept no timeline)");
        }
        chart.legend(&legend);
        out.push_str(&chart.finish());
    }
}

/// Per policy, the cores each job used over time, stacked, on shared axes.
pub(super) fn cpu(s: &Section, capacity_cores: f64, out: &mut String) {
    let _ = writeln!(
        out,
        "<h3>CPU used over time</h3>\n<p class=\"note\">Cores used by each job, stacked, at every tick of the \
         first seed.{}</p>",
        escape(&s.left_out())
    );
    if s.first.is_empty() {
        out.push_str("<p class=\"note\">No runs.</p>\n");
        return;
    }
    // One row per sample: (time, cores per drawn job, cores of the others).
    let stacks: Vec<Vec<(f64, Vec<f64>, f64)>> = s
        .first
        .iter()
        .map(|run| {
            run.timeline
                .iter()
                .filter(|x| x.time_s.is_finite())
                .map(|x| {
                    let mut drawn = vec![0.0; s.drawn.len()];
                    let mut other = 0.0;
                    for js in &x.jobs {
                        let cores = finite(js.cpu).max(0.0);
                        match s.drawn.iter().position(|&j| j == js.job as usize) {
                            Some(k) => drawn[k] += cores,
                            None => other += cores,
                        }
                    }
                    (x.time_s, drawn, other)
                })
                .collect()
        })
        .map(|rows: Vec<(f64, Vec<f64>, f64)>| {
            // A tick that repeats both neighbours adds nothing to the areas: leave it out.
            let same = |a: &(f64, Vec<f64>, f64), b: &(f64, Vec<f64>, f64)| a.1 == b.1 && a.2 == b.2;
            let last = rows.len().saturating_sub(1);
            (0..rows.len())
                .filter(|&i| i == 0 || i == last || !same(&rows[i], &rows[i - 1]) || !same(&rows[i], &rows[i + 1]))
                .map(|i| rows[i].clone())
                .collect()
        })
        .collect();
    let max_cores = stacks.iter().flatten().map(|x| x.1.iter().sum::<f64>() + x.2).fold(capacity_cores, f64::max);
    let unit = TimeUnit::for_max(s.max_t);
    let hidden = s.hidden();
    let legend = s.legend();
    for (run, stack) in s.first.iter().zip(&stacks) {
        let _ = writeln!(out, "<h4>{} (seed {})</h4>", escape(&run.policy), run.seed);
        let mut chart = TimeChart::new(
            &format!("CPU used per job: {} (seed {})", run.policy, run.seed),
            s.max_t / unit.seconds,
            0.0,
            max_cores,
            &format!("time ({})", unit.name),
            "CPU (cores)",
        );
        if stack.is_empty() {
            chart.empty("no timeline recorded for this run");
        }
        let rows: Vec<(f64, Vec<f64>)> = stack
            .iter()
            .map(|(t, drawn, other)| (*t, drawn.iter().copied().chain((hidden > 0).then_some(*other)).collect()))
            .collect();
        let colours: Vec<&str> =
            s.drawn.iter().map(|&j| s.colour(j)).chain((hidden > 0).then_some(super::OTHER_COLOUR)).collect();
        stacked_areas(&mut chart, &rows, &colours, unit.seconds);
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

/// Draw `rows` (time s, one value per layer) as areas stacked in layer order, each in its
/// colour, time divided by `per` for the x axis; a single row as thin bars.
fn stacked_areas(chart: &mut TimeChart, rows: &[(f64, Vec<f64>)], colours: &[&str], per: f64) {
    let mut base: Vec<f64> = vec![0.0; rows.len()];
    for (layer, fill) in colours.iter().enumerate() {
        let top: Vec<f64> =
            rows.iter().zip(&base).map(|((_, values), b)| b + values.get(layer).copied().unwrap_or(0.0)).collect();
        if rows.len() == 1 {
            let (x, y0) = chart.at(rows[0].0 / per, base[0]);
            let (_, y1) = chart.at(rows[0].0 / per, top[0]);
            chart.svg.rect(x - 2.0, y1, 4.0, y0 - y1, fill, "none");
        } else if rows.len() > 1 {
            let mut points: Vec<(f64, f64)> = rows.iter().zip(&top).map(|(x, &y)| chart.at(x.0 / per, y)).collect();
            points.extend(rows.iter().zip(&base).rev().map(|(x, &y)| chart.at(x.0 / per, y)));
            chart.svg.polygon(&points, fill);
        }
        base = top;
    }
}

/// Each tenant's GPUs over time, stacked, for the first run of every policy whose jobs belong to
/// more than one tenant; nothing when none does.
pub(super) fn tenants(s: &Section, capacity_gpus: f64, out: &mut String) {
    let runs: Vec<(&RunReport, &crate::experiment::fairness::Fairness)> =
        s.first.iter().filter_map(|run| Some((*run, run.fairness.as_ref()?))).collect();
    if runs.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<h3>GPUs by tenant over time</h3>\n<p class=\"note\">The GPUs each tenant's jobs hold, stacked, at every \
         tick of the first seed; the table gives each tenant's share against its weighted entitlement.</p>"
    );
    let max_x = runs.iter().filter_map(|(_, f)| f.held.last()).map(|h| h.0).fold(0.0, f64::max);
    let unit = TimeUnit::for_max(max_x);
    for (run, f) in runs {
        let _ = writeln!(out, "<h4>{} (seed {})</h4>", escape(&run.policy), run.seed);
        let mut chart = TimeChart::new(
            &format!("GPUs by tenant: {} (seed {})", run.policy, run.seed),
            max_x / unit.seconds,
            0.0,
            capacity_gpus.max(1.0),
            &format!("time ({})", unit.name),
            "GPUs",
        );
        let rows: Vec<(f64, Vec<f64>)> =
            f.held.iter().map(|(t, held)| (*t, held.iter().map(|&g| f64::from(g)).collect())).collect();
        let colours: Vec<&str> = (0..f.tenants.len()).map(|k| super::PALETTE[k % super::PALETTE.len()]).collect();
        stacked_areas(&mut chart, &rows, &colours, unit.seconds);
        let (x0, y) = chart.at(chart.x.lo, capacity_gpus);
        let (x1, _) = chart.at(chart.x.hi, capacity_gpus);
        chart.svg.line(x0, y, x1, y, "cap");
        let legend: Vec<(String, &str)> = f
            .tenants
            .iter()
            .zip(&colours)
            .map(|(t, c)| {
                let name = format!(
                    "{} (w {}, {:.0} % of {:.0} %)",
                    t.name,
                    number(t.weight),
                    100.0 * t.share,
                    100.0 * t.entitled_share
                );
                (name, *c)
            })
            .collect();
        chart.legend(&legend);
        out.push_str(&chart.finish());
    }
}

/// Stretches of consecutive ticks, each a line of (time s, value).
type Stretches = Vec<Vec<(f64, f64)>>;

/// A job's CPU limit over a run: stretches of consecutive ticks with a limit, (time s, cores).
pub(super) fn limit_stretches(run: &RunReport, job: usize) -> Stretches {
    let mut stretches: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for sample in &run.timeline {
        let limit = sample.jobs.iter().find(|js| js.job as usize == job).and_then(|js| js.cpu_limit);
        match limit {
            Some(cores) if cores.is_finite() && sample.time_s.is_finite() => {
                stretches.last_mut().expect("never empty").push((sample.time_s, cores))
            }
            _ if stretches.last().is_some_and(|s| !s.is_empty()) => stretches.push(Vec::new()),
            _ => {}
        }
    }
    stretches.retain(|s| !s.is_empty());
    stretches
}

/// Whether a run set a CPU limit on any job at any tick.
pub(super) fn sets_limits(run: &RunReport) -> bool {
    run.timeline.iter().flat_map(|s| &s.jobs).any(|js| js.cpu_limit.is_some())
}

/// The CPU limits of the policies that set any, one chart each; a line for the others.
pub(super) fn limits(s: &Section, out: &mut String) {
    let _ = writeln!(
        out,
        "<h3>CPU limits</h3>\n<p class=\"note\">The CPU limit in force on each job at every tick of the first \
         seed, in cores; no line while a job runs unlimited, a dot at its last limit.{}</p>",
        escape(&s.left_out())
    );
    let limited: Vec<&RunReport> = s.first.iter().copied().filter(|r| sets_limits(r)).collect();
    for run in &s.first {
        if run.timeline.is_empty() {
            let _ = writeln!(
                out,
                "<p class=\"note\">{}: no timeline recorded (seed {}).</p>",
                escape(&run.policy),
                run.seed
            );
        } else if !sets_limits(run) {
            let _ =
                writeln!(out, "<p class=\"note\">{} set no CPU limit (seed {}).</p>", escape(&run.policy), run.seed);
        }
    }
    if limited.is_empty() {
        return;
    }
    let series: Vec<Vec<Stretches>> =
        limited.iter().map(|r| s.drawn.iter().map(|&j| limit_stretches(r, j)).collect()).collect();
    let all = || series.iter().flatten().flatten().flatten();
    let hi = all().map(|p| p.1).fold(0.0, f64::max);
    let unit = TimeUnit::for_max(s.max_t);
    let legend = s.legend();
    for (run, jobs) in limited.iter().zip(&series) {
        let _ = writeln!(out, "<h4>{} (seed {})</h4>", escape(&run.policy), run.seed);
        let title = format!("CPU limit per job: {} (seed {})", run.policy, run.seed);
        let mut chart = TimeChart::new(
            &title,
            s.max_t / unit.seconds,
            0.0,
            hi,
            &format!("time ({})", unit.name),
            "CPU limit (cores)",
        );
        for (&job, stretches) in s.drawn.iter().zip(jobs) {
            for stretch in stretches {
                let points: Vec<(f64, f64)> = stretch.iter().map(|&(t, y)| chart.at(t / unit.seconds, y)).collect();
                if points.len() > 1 {
                    chart.svg.polyline(&points, s.colour(job));
                }
            }
            if let Some(&(t, y)) = stretches.last().and_then(|x| x.last()) {
                let (x, y) = chart.at(t / unit.seconds, y);
                chart.svg.circle(x, y, 3.0, s.colour(job), 1.0);
            }
        }
        chart.legend(&legend);
        out.push_str(&chart.finish());
    }
}
