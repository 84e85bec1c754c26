//! HTML reports: one self-contained page (inline SVG, CSS and a few lines of JavaScript,
//! nothing fetched) that a person opens in a browser or prints.
//!
//! [`write_html`] draws one or more [`Compared`] scenarios (a scenario and the comparison of policies
//! on it). The page opens with each policy's own objective (its first `[[paper]]` figure,
//! measured against the baseline on the same seeds), then per scenario: the paper's figures,
//! the summary metrics, every policy against the baseline as paired intervals, a JCT CDF, each job's progress toward its target normalised to 0..1,
//! CPU used, the CPU limits of the policies that set any, placements on a per-node timeline
//! with migrations and preemptions, GPU holders and use when the workload has GPUs, and a
//! searchable per-job table. [`write_sweep_html`] draws a parameter sweep as a heat map and a
//! table of every point. Every table sorts by a click on its header.
//!
//! Start at [`write_html`]; the sections live in `tables` (every table), `charts` (the
//! charts over time), `lanes` (node and GPU timelines) and `heatmap` (the sweep page). The
//! pictures are drawn by hand with a small `Svg` writer and "nice" ticks (1, 2 or 5 × 10^k),
//! so the report needs no fonts, no plotting crate and no system library. Every number
//! written into the SVG goes through one formatter that turns a non-finite value into 0, and
//! every string through `escape`; the output is a function of the input alone.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use wasmsched_sim::JobOutcome;
use wasmsched_sim::workload::Workload;

use crate::experiment::run::{Comparison, RunReport};
use crate::experiment::sweep::Sweep;
use crate::scenario::{Claim, Scenario};
use crate::whatif::Replay;

mod charts;
mod heatmap;
mod lanes;
mod svg;
mod tables;

use svg::*;

/// One scenario's comparison, one section of a page.
#[derive(Clone, Copy, Debug)]
pub struct Compared<'a> {
    /// Every run of every policy on the scenario, over the same seeds.
    pub comparison: &'a Comparison,
    /// The scenario they ran: its jobs' names, models and targets, its nodes and GPUs, and
    /// the paper's figures.
    pub scenario: &'a Scenario,
    /// For a replay of a recording (`whatif`): the recorded jobs, beside which the runs are
    /// read.
    pub recorded: Option<&'a Replay>,
}

/// Write `dir/index.html` (creating `dir`): one self-contained page with a section per
/// scenario; returns its path.
pub fn write_html(title: &str, scenarios: &[Compared<'_>], dir: &Path) -> std::io::Result<PathBuf> {
    write_page(dir, &render(title, scenarios))
}

/// Write `dir/index.html` (creating `dir`) for a parameter sweep: the figure at every point
/// as a heat map and a table of every point; returns its path.
pub fn write_sweep_html(sweep: &Sweep, dir: &Path) -> std::io::Result<PathBuf> {
    write_page(dir, &heatmap::render(sweep))
}

fn write_page(dir: &Path, html: &str) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("index.html");
    std::fs::write(&path, html)?;
    Ok(path)
}

/// Jobs drawn one by one in the charts at most; tables list them all.
const MAX_JOBS_DRAWN: usize = 20;

/// One colour per drawn job, by rank (Tableau 20).
const PALETTE: [&str; MAX_JOBS_DRAWN] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
];

/// One colour per policy, by order (Okabe–Ito, told apart by most colour-blind readers).
const POLICY_PALETTE: [&str; 8] =
    ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#333333", "#8c564b"];

/// The band of the jobs that are not drawn one by one.
const OTHER_COLOUR: &str = "#d9d9d9";

const CSS: &str = "*{box-sizing:border-box}\
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1200px;color:#222;padding:0 1em;\
overflow-wrap:break-word}\
h1{font-size:1.5em}h2{font-size:1.3em;margin-top:2.2em;border-bottom:2px solid #ccc}\
h3{font-size:1.1em;margin:1.6em 0 .3em}h4{font-size:.95em;margin:1em 0 .2em}\
.meta,.note{color:#555;font-size:.9em}nav ul{columns:2;font-size:.9em}\
.scroll{overflow-x:auto;max-width:100%}\
table{border-collapse:collapse;font-size:12px;margin:.3em 0}\
th,td{border:1px solid #ddd;padding:2px 6px;text-align:right;vertical-align:top;white-space:nowrap}\
td.l{white-space:normal;min-width:4em}\
th{background:#f3f3f3}td.l,th.l{text-align:left}\
table.sortable th{cursor:pointer;user-select:none}table.sortable th:hover{background:#e6eef7}\
th[aria-sort=ascending]::after{content:' \\25B2'}th[aria-sort=descending]::after{content:' \\25BC'}\
td.good{background:#e3eef9}td.bad{background:#fbe3e3}.r{color:#666;font-size:.9em}\
.legend span{display:inline-block;margin-right:.9em;font-size:.85em}\
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;border:1px solid #999}\
input.filter{font:inherit;padding:2px 6px;margin:.3em 0;width:16em;max-width:100%}\
svg{display:block;width:100%;height:auto;margin:.3em 0}\
svg text{font-family:system-ui,sans-serif;font-size:11px;fill:#222}\
svg .title{font-size:13px;font-weight:600}svg .empty{fill:#888;font-size:13px}\
svg .axis{stroke:#333;stroke-width:1}svg .grid{stroke:#e6e6e6;stroke-width:1}\
svg .cap{stroke:#555;stroke-width:1;stroke-dasharray:5 3}\
@media print{body{max-width:none;margin:0;font-size:10pt}input.filter,nav{display:none}\
.scroll{overflow:visible}table{font-size:8pt;width:100%}th::after{content:''!important}\
svg{break-inside:avoid;page-break-inside:avoid}h2,h3,h4{break-after:avoid}}";

/// Sorts a table by the clicked column (numbers by `data-v`, text otherwise; asc, then desc;
/// empty cells last) and filters a table's rows by its search box.
const SCRIPT: &str = "(function(){\n\
function key(td){if(!td)return[2,''];var v=td.getAttribute('data-v');\
if(v!==null&&v!==''){var n=parseFloat(v);if(n===n)return[0,n];}\
var s=td.textContent.trim();return s===''||s==='\\u2014'?[2,'']:[1,s.toLowerCase()];}\n\
function sortBy(t,th,i){var asc=th.getAttribute('aria-sort')!=='ascending';\
Array.prototype.forEach.call(t.tHead.rows[0].cells,function(h){h.removeAttribute('aria-sort');});\
th.setAttribute('aria-sort',asc?'ascending':'descending');var b=t.tBodies[0];\
var rows=Array.prototype.slice.call(b.rows);rows.sort(function(x,y){var a=key(x.cells[i]),c=key(y.cells[i]);\
if(a[0]!==c[0])return a[0]-c[0];var r=a[0]===0?a[1]-c[1]:(a[1]<c[1]?-1:a[1]>c[1]?1:0);return asc?r:-r;});\
rows.forEach(function(r){b.appendChild(r);});}\n\
Array.prototype.forEach.call(document.querySelectorAll('table.sortable'),function(t){\
Array.prototype.forEach.call(t.tHead.rows[0].cells,function(th,i){th.tabIndex=0;th.title='sort';\
th.addEventListener('click',function(){sortBy(t,th,i);});\
th.addEventListener('keydown',function(e){if(e.key==='Enter')sortBy(t,th,i);});});});\n\
Array.prototype.forEach.call(document.querySelectorAll('input.filter'),function(f){\
var t=document.getElementById(f.getAttribute('data-table'));if(!t)return;\
f.addEventListener('input',function(){var q=f.value.trim().toLowerCase();\
Array.prototype.forEach.call(t.tBodies[0].rows,function(r){\
r.hidden=q!==''&&r.textContent.toLowerCase().indexOf(q)<0;});});});\n\
})();";

/// A whole page around `body`: the head with the CSS, then the script that sorts and filters.
fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}<script>\n{SCRIPT}\n</script>\n</body>\n</html>\n",
        escape(title)
    )
}

/// The comparison page.
fn render(title: &str, scenarios: &[Compared<'_>]) -> String {
    let sections: Vec<Section> = scenarios.iter().enumerate().map(|(i, s)| Section::new(i, s)).collect();
    let mut out = String::new();
    let _ = writeln!(out, "<h1>{}</h1>", escape(title));
    let runs: usize = scenarios.iter().map(|s| s.comparison.runs.len()).sum();
    let _ = writeln!(out, "<p class=\"meta\">{} scenario(s) · {runs} simulated runs</p>", scenarios.len());
    if sections.len() > 1 {
        out.push_str("<nav><ul>\n");
        for s in &sections {
            let _ = writeln!(out, "<li><a href=\"#{}\">{}</a></li>", s.id(""), escape(s.name()));
        }
        out.push_str("</ul></nav>\n");
    }
    out.push_str("<h2 id=\"objectives\">Each policy's own objective</h2>\n");
    tables::objectives(&sections, "objectives-table", &mut out);
    if sections.is_empty() {
        out.push_str("<p class=\"note\">No scenario was given.</p>\n");
    }
    for s in &sections {
        section(s, sections.len() > 1, &mut out);
    }
    page(title, &out)
}

/// One scenario: its tables, then its pictures, then its jobs.
fn section(s: &Section, several: bool, out: &mut String) {
    let w = s.workload;
    let cores: f64 = w.nodes.iter().map(|n| n.cpu_millicores as f64 / 1000.0).sum();
    let gpus: u32 = w.nodes.iter().map(|n| n.gpus).sum();
    let mut seeds: Vec<u64> = s.comparison.runs.iter().map(|r| r.seed).collect();
    seeds.sort_unstable();
    seeds.dedup();
    let _ = writeln!(out, "<section id=\"{}\">\n<h2>Workload {}</h2>", s.id(""), escape(s.name()));
    let _ = writeln!(
        out,
        "<p class=\"meta\">{} jobs on {} nodes ({} cores{}) · policies {} · baseline {} · {} seed(s) · {} runs</p>",
        s.job_count,
        w.nodes.len(),
        number(cores),
        if gpus > 0 { format!(", {gpus} GPUs") } else { String::new() },
        escape(&s.policies.join(", ")),
        escape(s.comparison.baseline()),
        seeds.len(),
        s.comparison.runs.len()
    );
    if several {
        out.push_str("<h3>Objectives</h3>\n");
        tables::objectives(std::slice::from_ref(s), &s.id("objectives"), out);
    }
    tables::paper(s, out);
    tables::summary(s, out);
    tables::recorded(s, out);
    charts::paired(s, out);
    charts::jct_cdf(s, out);
    charts::progress(s, out);
    charts::cpu(s, cores, out);
    charts::tenants(s, f64::from(gpus), out);
    charts::limits(s, out);
    lanes::placements(s, out);
    if gpus > 0 {
        lanes::gpus(s, out);
    }
    tables::jobs(s, out);
    out.push_str("</section>\n");
}

/// What every part of a scenario's section needs: the runs to draw and which jobs to draw.
struct Section<'a> {
    /// The scenario's position on the page, for element ids.
    index: usize,
    comparison: &'a Comparison,
    workload: &'a Workload,
    /// The paper's figures for it.
    claims: &'a [Claim],
    policies: Vec<&'a str>,
    /// The run shown in the charts over time and the job table for each policy, in
    /// `policies` order.
    first: Vec<&'a RunReport>,
    /// Jobs in the workload (or in the runs, if those have more).
    job_count: usize,
    /// The job indices drawn one by one, busiest first.
    drawn: Vec<usize>,
    /// The last time in any first run's timeline, in seconds.
    max_t: f64,
    /// For a replay of a recording: the recorded jobs.
    recorded: Option<&'a Replay>,
}

impl<'a> Section<'a> {
    fn new(index: usize, compared: &Compared<'a>) -> Section<'a> {
        let (comparison, workload, claims) =
            (compared.comparison, &compared.scenario.workload, compared.scenario.claims.as_slice());
        let policies = comparison.policies();
        let first: Vec<&RunReport> = policies.iter().filter_map(|p| first_run(comparison, p)).collect();
        let job_count = comparison.runs.iter().map(|r| r.jobs.len()).fold(workload.jobs.len(), usize::max);
        let drawn = busiest_jobs(&first, job_count, MAX_JOBS_DRAWN);
        let max_t = first.iter().flat_map(|r| &r.timeline).map(|s| finite(s.time_s)).fold(0.0, f64::max);
        Section {
            index,
            comparison,
            workload,
            claims,
            policies,
            first,
            job_count,
            drawn,
            max_t,
            recorded: compared.recorded,
        }
    }

    fn name(&self) -> &str {
        if self.workload.name.is_empty() { &self.comparison.workload } else { &self.workload.name }
    }

    /// An element id unique on the page: the section's, or one of its parts.
    fn id(&self, part: &str) -> String {
        if part.is_empty() { format!("s{}", self.index) } else { format!("s{}-{part}", self.index) }
    }

    /// How many jobs the charts do not draw one by one.
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

    /// The palette slot of a drawn job, grey for the others.
    fn colour(&self, job: usize) -> &'static str {
        self.drawn.iter().position(|&j| j == job).map_or(OTHER_COLOUR, |rank| PALETTE[rank % PALETTE.len()])
    }

    /// A policy's colour, by its order in the comparison.
    fn policy_colour(&self, policy: &str) -> &'static str {
        let k = self.policies.iter().position(|p| *p == policy).unwrap_or(0);
        POLICY_PALETTE[k % POLICY_PALETTE.len()]
    }

    /// The legend of the per-job charts: the drawn jobs, then the others if any.
    fn legend(&self) -> Vec<(String, &'static str)> {
        let mut entries: Vec<(String, &str)> = self.drawn.iter().map(|&j| (self.job_name(j), self.colour(j))).collect();
        if self.hidden() > 0 {
            entries.push((format!("{} other jobs", self.hidden()), OTHER_COLOUR));
        }
        entries
    }

    /// A sentence saying which jobs the charts leave out, or nothing.
    fn left_out(&self) -> String {
        match self.hidden() {
            0 => String::new(),
            hidden => format!(
                " Only the {} jobs with the most CPU are drawn one by one; the other {hidden} are grey or left out \
                 (the tables list every job).",
                self.drawn.len()
            ),
        }
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
                *t += finite(js.cpu).max(0.0) + js.gpus.len() as f64;
            }
        }
    }
    let mut order: Vec<usize> = (0..job_count).collect();
    order.sort_by(|&a, &b| total[b].total_cmp(&total[a]).then(a.cmp(&b)));
    order.truncate(max);
    order
}

#[cfg(test)]
mod tests;
