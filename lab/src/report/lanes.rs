//! Timelines in lanes: where each job ran (a lane per node) with its migrations and
//! preemptions, and who held each GPU (a lane per GPU) with the share set and the use made.
//! Both are read off a run's timeline: a job's node set changing between consecutive samples
//! is a migration, a job missing from samples and coming back later a preemption.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::Section;
use super::svg::*;
use super::tables::{Cell, Table};
use crate::experiment::run::{RunReport, Sample};

/// Lanes drawn at most; the busiest are kept.
const MAX_LANES: usize = 32;

/// A job on a node without a break.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Stretch {
    pub(super) job: usize,
    pub(super) node: u32,
    pub(super) from_s: f64,
    pub(super) to_s: f64,
}

/// Something that happened to a job at a time.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Mark {
    /// Its nodes changed between two consecutive samples.
    Migration { job: usize, at_s: f64, from: u32, to: u32 },
    /// It left the samples at `at_s` (on `node`) and came back later.
    Preemption { job: usize, at_s: f64, node: u32 },
}

/// The samples with a finite time, and the end of the last one (one more tick after it).
fn samples(timeline: &[Sample]) -> (Vec<&Sample>, f64) {
    let samples: Vec<&Sample> = timeline.iter().filter(|s| s.time_s.is_finite()).collect();
    let end = match samples.as_slice() {
        [] => 0.0,
        [one] => one.time_s,
        [.., a, b] => b.time_s + (b.time_s - a.time_s).max(0.0),
    };
    (samples, end)
}

/// Every job's stretches on each node it ran on, and its migrations and preemptions.
pub(super) fn placements_of(timeline: &[Sample]) -> (Vec<Stretch>, Vec<Mark>) {
    struct Open {
        /// The nodes it is on now, each with the time it came there.
        nodes: BTreeMap<u32, f64>,
        /// The last sample it was in.
        seen: usize,
        /// When and where it left, if it is gone.
        gone: Option<(f64, u32)>,
    }
    let (samples, end) = samples(timeline);
    let (mut stretches, mut marks) = (Vec::new(), Vec::new());
    let mut open: BTreeMap<usize, Open> = BTreeMap::new();
    let close = |job: usize, nodes: &mut BTreeMap<u32, f64>, keep: &BTreeSet<u32>, at: f64, out: &mut Vec<Stretch>| {
        let gone: Vec<u32> = nodes.keys().copied().filter(|n| !keep.contains(n)).collect();
        for node in gone {
            let from_s = nodes.remove(&node).unwrap_or(at);
            out.push(Stretch { job, node, from_s, to_s: at });
        }
    };
    for (i, sample) in samples.iter().enumerate() {
        let t = sample.time_s;
        let mut here: BTreeMap<usize, BTreeSet<u32>> = BTreeMap::new();
        for js in &sample.jobs {
            let nodes = here.entry(js.job as usize).or_default();
            nodes.insert(js.node);
            nodes.extend(js.gpus.iter().map(|g| g.0));
        }
        for (&job, o) in open.iter_mut() {
            if o.seen + 1 == i && !here.contains_key(&job) && !o.nodes.is_empty() {
                o.gone = o.nodes.keys().next().map(|&n| (t, n));
                close(job, &mut o.nodes, &BTreeSet::new(), t, &mut stretches);
            }
        }
        for (job, nodes) in here {
            let o = open.entry(job).or_insert_with(|| Open { nodes: BTreeMap::new(), seen: i, gone: None });
            if !o.nodes.is_empty() {
                let removed: Vec<u32> = o.nodes.keys().copied().filter(|n| !nodes.contains(n)).collect();
                let added: Vec<u32> = nodes.iter().copied().filter(|n| !o.nodes.contains_key(n)).collect();
                if let (Some(&from), Some(&to)) = (removed.first(), added.first()) {
                    marks.push(Mark::Migration { job, at_s: t, from, to });
                }
                close(job, &mut o.nodes, &nodes, t, &mut stretches);
            } else if let Some((at_s, node)) = o.gone.take() {
                marks.push(Mark::Preemption { job, at_s, node });
            }
            for n in nodes {
                o.nodes.entry(n).or_insert(t);
            }
            o.seen = i;
        }
    }
    for (job, o) in open.iter_mut() {
        close(*job, &mut o.nodes, &BTreeSet::new(), end, &mut stretches);
    }
    stretches.sort_by(|a, b| a.node.cmp(&b.node).then(a.from_s.total_cmp(&b.from_s)).then(a.job.cmp(&b.job)));
    (stretches, marks)
}

/// The `MAX_LANES` keys with the most time, in key order.
fn busiest_lanes<K: Ord + Copy>(time: impl Iterator<Item = (K, f64)>) -> (Vec<K>, usize) {
    let mut total: BTreeMap<K, f64> = BTreeMap::new();
    for (k, t) in time {
        *total.entry(k).or_default() += finite(t).max(0.0);
    }
    let all = total.len();
    let mut keys: Vec<(K, f64)> = total.into_iter().collect();
    keys.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    keys.truncate(MAX_LANES);
    let mut keys: Vec<K> = keys.into_iter().map(|k| k.0).collect();
    keys.sort();
    (keys, all)
}

/// Rows of a node's lane drawn at most; more jobs at once share the last.
const MAX_ROWS: usize = 16;

/// A row for each stretch (sorted by node, then start) within its node's lane, so that no two
/// on a node overlap: the lowest row free when it starts. Returns the rows, in `stretches`
/// order, and each node's number of rows.
pub(super) fn pack(stretches: &[Stretch]) -> (Vec<usize>, BTreeMap<u32, usize>) {
    let mut ends: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    let rows = stretches
        .iter()
        .map(|x| {
            let ends = ends.entry(x.node).or_default();
            let row = match ends.iter().position(|&end| end <= x.from_s + 1e-9) {
                Some(row) => row,
                None if ends.len() < MAX_ROWS => {
                    ends.push(x.to_s);
                    ends.len() - 1
                }
                None => MAX_ROWS - 1,
            };
            ends[row] = ends[row].max(x.to_s);
            row
        })
        .collect();
    (rows, ends.into_iter().map(|(node, rows)| (node, rows.len())).collect())
}

fn node_name(s: &Section, node: u32) -> String {
    s.workload.nodes.get(node as usize).map_or_else(|| format!("node {node}"), |n| n.name.clone())
}

/// An HTML legend of the drawn jobs' colours, which wraps with the page.
fn html_legend(s: &Section, extra: &str, out: &mut String) {
    out.push_str("<p class=\"legend\">");
    for (name, colour) in s.legend() {
        let _ = write!(out, "<span><i style=\"background:{colour}\"></i>{}</span> ", escape(&name));
    }
    let _ = writeln!(out, "{extra}</p>");
}

/// Per policy, a lane per node with each job's stretches there, its migrations (▼ and a dashed
/// line from the node it left) and its preemptions (×).
pub(super) fn placements(s: &Section, out: &mut String) {
    let _ = writeln!(
        out,
        "<h3>Placements, migrations and preemptions</h3>\n<p class=\"note\">Where each job ran at every tick of the \
         first seed, a lane per node (at most the {MAX_LANES} busiest). ▼ marks a migration (a dashed line from the \
         node it left), × a preemption (the job left every node and came back later). Hover a bar for its job and \
         times.{}</p>",
        escape(&s.left_out())
    );
    if s.first.is_empty() {
        out.push_str("<p class=\"note\">No runs.</p>\n");
        return;
    }
    html_legend(s, "<span>▼ migration</span> <span>× preemption</span>", out);
    let unit = TimeUnit::for_max(s.max_t);
    for run in &s.first {
        placement_lanes(s, run, unit, out);
    }
}

/// One run's lanes: a lane per node (the busiest), the jobs' stretches on it, their marks.
fn placement_lanes(s: &Section, run: &RunReport, unit: TimeUnit, out: &mut String) {
    let _ = writeln!(out, "<h4>{} (seed {})</h4>", escape(&run.policy), run.seed);
    let (stretches, marks) = placements_of(&run.timeline);
    let (nodes, all) = busiest_lanes(stretches.iter().map(|x| (x.node, x.to_s - x.from_s)));
    if all > nodes.len() {
        let _ = writeln!(out, "<p class=\"note\">{} of {all} nodes drawn, the busiest.</p>", nodes.len());
    }
    let (rows, row_counts) = pack(&stretches);
    let names: Vec<(String, usize)> =
        nodes.iter().map(|&n| (node_name(s, n), row_counts.get(&n).copied().unwrap_or(1))).collect();
    let title = format!("Jobs on nodes: {} (seed {})", run.policy, run.seed);
    let mut chart = LaneChart::new(&title, &names, s.max_t / unit.seconds, &format!("time ({})", unit.name));
    if stretches.is_empty() {
        chart.empty("no timeline recorded for this run");
    }
    let lane = |node: u32| nodes.iter().position(|&n| n == node);
    // The row of the job's stretch on `node` that starts (or ends) at `at_s`.
    let row_at = |job: usize, node: u32, at_s: f64, starts: bool| -> Option<(usize, usize)> {
        let k = lane(node)?;
        let i = stretches.iter().position(|x| {
            x.job == job && x.node == node && (if starts { x.from_s } else { x.to_s } - at_s).abs() < 1e-9
        })?;
        Some((k, rows[i]))
    };
    for (x, &row) in stretches.iter().zip(&rows) {
        let Some(k) = lane(x.node) else { continue };
        let (top, bottom) = chart.row(k, row);
        let (x0, x1) = (chart.x.at(x.from_s / unit.seconds), chart.x.at(x.to_s / unit.seconds));
        let name = s.job_name(x.job);
        let tip = format!("{name} on {}: {} to {}", node_name(s, x.node), duration(x.from_s), duration(x.to_s));
        chart.svg.open_group("stretch", &tip);
        chart.svg.rect(x0, top, (x1 - x0).max(1.0), bottom - top, s.colour(x.job), "#fff");
        if x1 - x0 > 40.0 {
            let fits = ((x1 - x0 - 6.0) / 6.0) as usize;
            chart.svg.text_sized(x0 + 3.0, bottom - 3.0, Anchor::Start, 10.0, "#111", &shorten(&name, fits.max(2)));
        }
        chart.svg.close_group();
    }
    let seen_preemptions = draw_marks(&mut chart, &marks, &row_at, s, unit);
    out.push_str(&chart.finish());
    let unseen: Vec<String> = run
        .jobs
        .iter()
        .enumerate()
        .filter(|(i, o)| o.preemptions > seen_preemptions.get(i).copied().unwrap_or(0))
        .map(|(i, o)| format!("{} ({})", s.job_name(i), o.preemptions))
        .collect();
    if !unseen.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"note\">Preempted by the run's count but not between two samples (so not drawn): {}.</p>",
            escape(&unseen.join(", "))
        );
    }
}

/// The migrations and preemptions on `chart`, each at its job's row (`row_at`: the lane and row
/// of a job's stretch on a node that starts, or ends, at a time). Returns the preemptions drawn
/// per job.
fn draw_marks(
    chart: &mut LaneChart,
    marks: &[Mark],
    row_at: &dyn Fn(usize, u32, f64, bool) -> Option<(usize, usize)>,
    s: &Section,
    unit: TimeUnit,
) -> BTreeMap<usize, u32> {
    let mut seen_preemptions: BTreeMap<usize, u32> = BTreeMap::new();
    for mark in marks {
        match *mark {
            Mark::Migration { job, at_s, from, to } => {
                let Some((k, row)) = row_at(job, to, at_s, true) else { continue };
                let x = chart.x.at(at_s / unit.seconds);
                let (top, bottom) = chart.row(k, row);
                let tip = format!(
                    "{} migrated from {} to {} at {}",
                    s.job_name(job),
                    node_name(s, from),
                    node_name(s, to),
                    duration(at_s)
                );
                chart.svg.open_group("migration", &tip);
                if let Some((f, frow)) = row_at(job, from, at_s, false) {
                    let (ft, fb) = chart.row(f, frow);
                    chart.svg.polyline_styled(&[(x, (ft + fb) / 2.0), (x, (top + bottom) / 2.0)], "#000", 1.0, true);
                }
                chart.svg.polygon_styled(&[(x - 5.0, top - 3.0), (x + 5.0, top - 3.0), (x, top + 5.0)], "#000", "#fff");
                chart.svg.close_group();
            }
            Mark::Preemption { job, at_s, node } => {
                *seen_preemptions.entry(job).or_default() += 1;
                let Some((k, row)) = row_at(job, node, at_s, false) else { continue };
                let x = chart.x.at(at_s / unit.seconds);
                let (top, bottom) = chart.row(k, row);
                let y = (top + bottom) / 2.0;
                chart.svg.open_group("preemption", &format!("{} preempted at {}", s.job_name(job), duration(at_s)));
                chart.svg.line_styled(x - 5.0, y - 5.0, x + 5.0, y + 5.0, "#c00", 2.5);
                chart.svg.line_styled(x - 5.0, y + 5.0, x + 5.0, y - 5.0, "#c00", 2.5);
                chart.svg.close_group();
            }
        }
    }
    seen_preemptions
}

/// A job on a GPU without a change of holders, share or use.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct GpuUse {
    pub(super) gpu: (u32, u32),
    pub(super) job: usize,
    pub(super) from_s: f64,
    pub(super) to_s: f64,
    /// The share set on the job, in percent.
    pub(super) share: Option<u8>,
    /// How much of the GPU it used, in percent, to the nearest 5.
    pub(super) used: Option<f64>,
    /// Its row among the GPU's holders then, and how many there were.
    pub(super) slot: usize,
    pub(super) slots: usize,
}

/// Who held each GPU over a run, with the share and use, merged over ticks that agree.
pub(super) fn gpu_uses(timeline: &[Sample]) -> Vec<GpuUse> {
    type Holders = Vec<(usize, Option<u8>, Option<i64>)>;
    let (samples, end) = samples(timeline);
    let mut uses = Vec::new();
    let mut open: BTreeMap<(u32, u32), (Holders, f64)> = BTreeMap::new();
    let emit = |gpu: (u32, u32), holders: &Holders, from_s: f64, to_s: f64, uses: &mut Vec<GpuUse>| {
        for (slot, &(job, share, used)) in holders.iter().enumerate() {
            let used = used.map(|u| u as f64 * 5.0);
            uses.push(GpuUse { gpu, job, from_s, to_s, share, used, slot, slots: holders.len() });
        }
    };
    for sample in &samples {
        let t = sample.time_s;
        let mut now: BTreeMap<(u32, u32), Holders> = BTreeMap::new();
        for js in &sample.jobs {
            let used = js.gpu_used.filter(|u| u.is_finite()).map(|u| (f64::from(u) / 5.0).round() as i64);
            for &gpu in &js.gpus {
                now.entry(gpu).or_default().push((js.job as usize, js.gpu_share, used));
            }
        }
        let changed: Vec<(u32, u32)> =
            open.iter().filter(|(g, (h, _))| now.get(g) != Some(h)).map(|(g, _)| *g).collect();
        for gpu in changed {
            if let Some((holders, from_s)) = open.remove(&gpu) {
                emit(gpu, &holders, from_s, t, &mut uses);
            }
        }
        for (gpu, holders) in now {
            open.entry(gpu).or_insert((holders, t));
        }
    }
    for (gpu, (holders, from_s)) in open {
        emit(gpu, &holders, from_s, end, &mut uses);
    }
    uses.sort_by(|a, b| a.gpu.cmp(&b.gpu).then(a.from_s.total_cmp(&b.from_s)).then(a.slot.cmp(&b.slot)));
    uses
}

fn gpu_name(s: &Section, gpu: (u32, u32)) -> String {
    format!("{} GPU {}", node_name(s, gpu.0), gpu.1)
}

/// Per policy, a lane per GPU: the job holding it (light), how much it used (dark, from the
/// bottom) and the share set on it (a black line); then a table per GPU.
pub(super) fn gpus(s: &Section, out: &mut String) {
    let _ = writeln!(
        out,
        "<h3>GPUs</h3>\n<p class=\"note\">Who held each GPU at every tick of the first seed, a lane per GPU (at most \
         the {MAX_LANES} busiest): the light bar is the job holding it, the dark part how much of it the job used \
         (full height = 100 %), a black line the GPU share the policy set. Jobs sharing a GPU split its lane.{}</p>",
        escape(&s.left_out())
    );
    if s.first.is_empty() {
        out.push_str("<p class=\"note\">No runs.</p>\n");
        return;
    }
    html_legend(s, "", out);
    let unit = TimeUnit::for_max(s.max_t);
    let columns = ["policy", "GPU", "held", "used while held", "shares set", "jobs"];
    let mut table = Table::new(&s.id("gpus"), "GPU use", &columns);
    for run in &s.first {
        let _ = writeln!(out, "<h4>{} (seed {})</h4>", escape(&run.policy), run.seed);
        let uses = gpu_uses(&run.timeline);
        let (lanes, all) = busiest_lanes(uses.iter().map(|u| (u.gpu, (u.to_s - u.from_s) / u.slots as f64)));
        if all > lanes.len() {
            let _ = writeln!(out, "<p class=\"note\">{} of {all} GPUs drawn, the busiest.</p>", lanes.len());
        }
        let names: Vec<(String, usize)> = lanes.iter().map(|&g| (gpu_name(s, g), 1)).collect();
        let title = format!("GPU holders and use: {} (seed {})", run.policy, run.seed);
        let mut chart = LaneChart::new(&title, &names, s.max_t / unit.seconds, &format!("time ({})", unit.name));
        if uses.is_empty() {
            chart.empty(if run.timeline.is_empty() { "no timeline recorded for this run" } else { "no GPU was held" });
        }
        for u in &uses {
            let Some(k) = lanes.iter().position(|&g| g == u.gpu) else { continue };
            let (top, bottom) = chart.lane(k);
            let h = (bottom - top) / u.slots.max(1) as f64;
            let (y0, y1) = (top + h * u.slot as f64, top + h * (u.slot + 1) as f64);
            let (x0, x1) = (chart.x.at(u.from_s / unit.seconds), chart.x.at(u.to_s / unit.seconds));
            let w = (x1 - x0).max(1.0);
            let colour = s.colour(u.job);
            let used = u.used.map_or_else(|| "use unknown".into(), |p| format!("used {} %", number(p)));
            let share = u.share.map_or_else(|| "no share set".into(), |p| format!("share {p} %"));
            let tip = format!(
                "{} on {}: {} to {}, {used}, {share}",
                s.job_name(u.job),
                gpu_name(s, u.gpu),
                duration(u.from_s),
                duration(u.to_s)
            );
            chart.svg.open_group("gpu-use", &tip);
            chart.svg.rect_opacity(x0, y0, w, y1 - y0, colour, 0.35);
            if let Some(p) = u.used {
                let hp = (y1 - y0) * (p / 100.0).clamp(0.0, 1.0);
                chart.svg.rect_opacity(x0, y1 - hp, w, hp, colour, 0.95);
            }
            if let Some(p) = u.share {
                let y = y1 - (y1 - y0) * (f64::from(p) / 100.0).clamp(0.0, 1.0);
                chart.svg.line_styled(x0, y, x0 + w, y, "#000", 1.2);
            }
            chart.svg.close_group();
        }
        out.push_str(&chart.finish());
        gpu_rows(s, run, &uses, &mut table);
    }
    out.push_str("<h4>Per GPU</h4>\n<p class=\"note\">Time held over the run's timeline, use weighted by time.</p>\n");
    table.finish(true, out);
}

/// One row per GPU a run used.
fn gpu_rows(s: &Section, run: &RunReport, uses: &[GpuUse], table: &mut Table) {
    let (_, end) = samples(&run.timeline);
    let start = run.timeline.first().map_or(0.0, |x| finite(x.time_s));
    let span = (end - start).max(1e-9);
    let gpus: BTreeSet<(u32, u32)> = uses.iter().map(|u| u.gpu).collect();
    for gpu in gpus {
        let mine: Vec<&GpuUse> = uses.iter().filter(|u| u.gpu == gpu).collect();
        let held: f64 = {
            let mut spans: Vec<(f64, f64)> = mine.iter().map(|u| (u.from_s, u.to_s)).collect();
            spans.sort_by(|a, b| a.0.total_cmp(&b.0));
            spans.dedup();
            spans.iter().map(|(a, b)| b - a).sum()
        };
        let (used_t, weight) = mine
            .iter()
            .filter_map(|u| u.used.map(|p| (p * (u.to_s - u.from_s), u.to_s - u.from_s)))
            .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
        let shares: Vec<u8> = mine.iter().filter_map(|u| u.share).collect();
        let shares = match (shares.iter().min(), shares.iter().max()) {
            (Some(lo), Some(hi)) if lo == hi => format!("{lo} %"),
            (Some(lo), Some(hi)) => format!("{lo}–{hi} %"),
            _ => "—".into(),
        };
        let mut jobs: Vec<usize> = mine.iter().map(|u| u.job).collect();
        jobs.sort_unstable();
        jobs.dedup();
        let jobs: Vec<String> = jobs.into_iter().map(|j| s.job_name(j)).collect();
        let held_pct = 100.0 * held / span;
        table.row([
            Cell::text(&run.policy),
            Cell::text(&gpu_name(s, gpu)),
            Cell::num(held_pct, &format!("{} %", number(held_pct))),
            Cell::maybe((weight > 0.0).then(|| used_t / weight), |p| format!("{} %", number(p))),
            Cell::text(&shares),
            Cell::text(&jobs.join(", ")),
        ]);
    }
}
