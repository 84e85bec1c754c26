//! The HTML reports in a real browser: pages built from real simulated runs (and a hand-made
//! sweep) are opened in headless Chromium at 1280 px, screenshotted (the PNG is kept under
//! the target dir and its path printed), and probed by a script appended to a copy of the page:
//! nothing overflows the viewport, every chart fits, a click on a header sorts its table and a
//! search box filters its rows. Without Chromium the tests say they skip, loudly.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasmsched::experiment::paper::{Figure, Measured};
use wasmsched::experiment::run::{Comparison, PolicyChoice, RunOptions, simulate};
use wasmsched::experiment::sweep::{Axis, Point, Sweep};
use wasmsched::report::{Compared, write_html, write_sweep_html};
use wasmsched::scenario::Scenario;
use wasmsched::sim::SimConfig;
use wasmsched_tests::cdp::{HEADLESS, chromium_or_say};
use wasmsched_tests::common::runtime;

/// How long one Chromium run may take before the test fails.
const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(60);

/// The viewport the pages must fit.
const WIDTH: u32 = 1280;

/// Chromium, or return from the test after saying it is skipped.
macro_rules! chromium_or_skip {
    () => {
        match chromium_or_say("browser", "the HTML report was not checked in a browser") {
            Some(path) => path,
            None => return,
        }
    };
}

/// A fresh directory under the target dir for one page and its screenshots.
fn out_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs headless Chromium on `page` with `extra` flags, its stdout into `stdout`; fails the
/// test when it runs past [`CHROMIUM_TIMEOUT`] or exits with an error.
fn run_chromium(chromium: &Path, page: &Path, extra: &[String], stdout: &Path) {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chromium)
        .args(HEADLESS)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--window-size={WIDTH},1000"))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(stdout).unwrap())
        .stderr(std::fs::File::create(stdout.with_extension("stderr")).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", chromium.display()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > CHROMIUM_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium ran past {CHROMIUM_TIMEOUT:?} on {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stderr = std::fs::read_to_string(stdout.with_extension("stderr")).unwrap_or_default();
    assert!(status.success(), "chromium failed ({status}) on {}:\n{stderr}", page.display());
}

/// Appended to a copy of the page: on load, measures the page at the viewport's width, sorts
/// a table by a click and filters one by its search box, and writes what it saw as JSON into
/// `<pre id="probe-result">`.
const PROBE: &str = r#"<script>
window.addEventListener('load', function () {
  var r = {errors: []};
  function rows(t) { return Array.prototype.slice.call(t.tBodies[0].rows); }
  function keys(t, i) {
    return rows(t).map(function (row) { var v = row.cells[i] && row.cells[i].getAttribute('data-v'); return v === null ? null : parseFloat(v); })
      .filter(function (v) { return v !== null; });
  }
  function ordered(xs, asc) {
    for (var k = 1; k < xs.length; k++) { if (asc ? xs[k] < xs[k - 1] : xs[k] > xs[k - 1]) return false; }
    return true;
  }
  try {
    r.scrollWidth = document.documentElement.scrollWidth;
    r.innerWidth = window.innerWidth;
    r.svgs = 0; r.svgOverflow = [];
    document.querySelectorAll('svg').forEach(function (s, i) {
      r.svgs++;
      var b = s.getBoundingClientRect();
      if (b.left < -0.5 || b.right > window.innerWidth + 0.5 || b.width < 1) r.svgOverflow.push(i + ': ' + b.left + '..' + b.right);
    });
    var tables = document.querySelectorAll('table');
    r.tables = tables.length;
    r.sortableTables = document.querySelectorAll('table.sortable').length;
    r.headersWithHandler = 0; r.headers = 0;
    document.querySelectorAll('table.sortable thead th').forEach(function (th) { r.headers++; if (th.tabIndex === 0) r.headersWithHandler++; });
    var best = null;
    document.querySelectorAll('table.sortable').forEach(function (t) {
      var n = t.tHead.rows[0].cells.length;
      for (var i = 0; i < n; i++) {
        var ks = keys(t, i), distinct = ks.filter(function (v, k) { return ks.indexOf(v) === k; }).length;
        if (distinct >= 3 && (!best || distinct > best.distinct)) best = {t: t, i: i, distinct: distinct};
      }
    });
    if (best) {
      var th = best.t.tHead.rows[0].cells[best.i];
      r.sortedTable = best.t.id; r.sortedColumn = th.textContent;
      th.click();
      var up = keys(best.t, best.i);
      r.sortAscending = ordered(up, true) && th.getAttribute('aria-sort') === 'ascending';
      th.click();
      var down = keys(best.t, best.i);
      r.sortDescending = ordered(down, false) && th.getAttribute('aria-sort') === 'descending';
      r.sortedValues = up.length;
    }
    var filter = null;
    document.querySelectorAll('input.filter').forEach(function (f) {
      var t = document.getElementById(f.getAttribute('data-table'));
      if (!filter && t && rows(t).length >= 3) filter = {f: f, t: t};
    });
    r.filters = document.querySelectorAll('input.filter').length;
    if (filter) {
      var all = rows(filter.t);
      var q = all[0].cells[0].textContent.trim().toLowerCase();
      filter.f.value = q;
      filter.f.dispatchEvent(new Event('input', {bubbles: true}));
      var shown = all.filter(function (row) { return !row.hidden; });
      var matching = all.filter(function (row) { return row.textContent.toLowerCase().indexOf(q) >= 0; });
      r.filterQuery = q; r.filterRows = all.length; r.filterShown = shown.length; r.filterMatching = matching.length;
      r.filterShownMatch = shown.every(function (row) { return row.textContent.toLowerCase().indexOf(q) >= 0; });
      filter.f.value = '';
      filter.f.dispatchEvent(new Event('input', {bubbles: true}));
      r.filterCleared = rows(filter.t).every(function (row) { return !row.hidden; });
    }
  } catch (e) { r.errors.push(String(e)); }
  var out = document.createElement('pre');
  out.id = 'probe-result';
  out.textContent = JSON.stringify(r);
  document.body.appendChild(out);
});
</script>
"#;

/// What the probe saw on `page`, after a screenshot of it was taken (and its path printed).
fn probe(chromium: &Path, page: &Path) -> Value {
    let dir = page.parent().unwrap();
    let screenshot = dir.join("page.png");
    run_chromium(chromium, page, &[format!("--screenshot={}", screenshot.display())], &dir.join("screenshot.out"));
    assert!(std::fs::metadata(&screenshot).is_ok_and(|m| m.len() > 1000), "no screenshot at {}", screenshot.display());
    println!("screenshot: {}", screenshot.display());

    let html = std::fs::read_to_string(page).unwrap();
    let probed = dir.join("probed.html");
    let at = html.rfind("</body>").expect("the page ends its body");
    std::fs::write(&probed, format!("{}{PROBE}{}", &html[..at], &html[at..])).unwrap();
    let dom = dir.join("dom.html");
    run_chromium(chromium, &probed, &["--dump-dom".into(), "--virtual-time-budget=5000".into()], &dom);
    let dom = std::fs::read_to_string(&dom).unwrap();
    let start = dom
        .find("<pre id=\"probe-result\">")
        .unwrap_or_else(|| panic!("the probe wrote nothing into {}", dir.display()))
        + "<pre id=\"probe-result\">".len();
    let json = &dom[start..start + dom[start..].find("</pre>").unwrap()];
    let json = json.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&amp;", "&");
    let seen: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    println!("probe: {seen}");
    seen
}

/// The checks every page passes: no horizontal overflow, every chart inside the viewport,
/// every table sortable, a sort both ways and, when the page has a search box, a filter.
fn assert_page_works(seen: &Value, min_svgs: u64) {
    assert_eq!(seen["errors"], json!([]), "{seen}");
    assert_eq!(seen["innerWidth"], json!(WIDTH), "{seen}");
    assert!(seen["scrollWidth"].as_u64().unwrap() <= u64::from(WIDTH), "the page overflows: {seen}");
    assert!(seen["svgs"].as_u64().unwrap() >= min_svgs, "{seen}");
    assert_eq!(seen["svgOverflow"], json!([]), "charts beyond the viewport: {seen}");
    assert!(seen["tables"].as_u64().unwrap() > 0, "{seen}");
    assert_eq!(seen["tables"], seen["sortableTables"], "{seen}");
    assert_eq!(seen["headers"], seen["headersWithHandler"], "every header sorts: {seen}");
    assert_eq!(seen["sortAscending"], json!(true), "{seen}");
    assert_eq!(seen["sortDescending"], json!(true), "{seen}");
    assert!(seen["filters"].as_u64().unwrap() > 0, "{seen}");
    assert_eq!(seen["filterShownMatch"], json!(true), "{seen}");
    assert_eq!(seen["filterShown"], seen["filterMatching"], "{seen}");
    assert_eq!(seen["filterCleared"], json!(true), "{seen}");
}

/// A scenario from `scenarios/`, with its default targets.
fn scenario(name: &str) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios").join(name);
    Scenario::load(&path, &Default::default()).unwrap().with_default_targets()
}

/// `policies` on `workload` over seeds 0 and 1, the first keeping its timeline.
fn compare(workload: &Scenario, policies: &[&str]) -> Comparison {
    let rt = runtime();
    let mut runs = Vec::new();
    for policy in policies {
        let choice = PolicyChoice::resolve(rt, policy).unwrap();
        for seed in 0..2 {
            let options = RunOptions {
                sim: SimConfig { seed, ..SimConfig::default() },
                tick: Duration::from_secs(30),
                timeline: seed == 0,
                ..RunOptions::default()
            };
            runs.push(simulate(rt, &choice, workload, &options));
        }
    }
    Comparison { workload: workload.name().to_string(), runs }
}

#[test]
fn the_comparison_report_fits_1280_px_and_its_tables_sort_and_filter_in_chromium() {
    let chromium = chromium_or_skip!();
    let flowcon = scenario("flowcon-paper.toml");
    let gpu = scenario("gpu-queue.toml");
    let on_cpu = compare(&flowcon, &["fair-share", "flowcon"]);
    let on_gpus = compare(&gpu, &["fair-share", "fifo", "tiresias"]);
    let dir = out_dir("comparison");
    let scenarios = [
        Compared { comparison: &on_cpu, scenario: &flowcon, recorded: None },
        Compared { comparison: &on_gpus, scenario: &gpu, recorded: None },
    ];
    let page = write_html("Policies on their scenarios", &scenarios, &dir).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("CPU limit per job: flowcon"), "flowcon sets limits");
    assert!(html.contains("fair-share set no CPU limit"), "fair-share sets none");
    assert!(html.contains("GPU holders and use: tiresias"), "the GPU scenario draws its GPUs");
    assert_eq!(html.matches("<h3>GPUs</h3>").count(), 1, "only the GPU scenario");

    let seen = probe(&chromium, &page);
    // Per scenario: the CDF, and per policy progress, CPU and placements; limits for flowcon;
    // GPUs for the three schedulers.
    assert_page_works(&seen, (1 + 2 * 3 + 1) + (1 + 3 * 3 + 3));
}

#[test]
fn the_sweep_report_fits_1280_px_and_its_table_sorts_and_filters_in_chromium() {
    let chromium = chromium_or_skip!();
    let axes = vec![
        Axis { key: "alpha".into(), values: (1..=6).map(|i| json!(f64::from(i) / 10.0)).collect() },
        Axis { key: "interval-s-with-a-long-name".into(), values: vec![json!(10), json!(30), json!(60)] },
    ];
    let mut points = Vec::new();
    for a in 0..6 {
        for b in 0..3 {
            let mean = 0.12 - 0.03 * a as f64 - 0.01 * b as f64;
            let config =
                [("alpha".to_string(), axes[0].values[a].clone()), (axes[1].key.clone(), axes[1].values[b].clone())]
                    .into_iter()
                    .collect();
            let measured = (a, b) != (1, 2);
            points.push(Point {
                at: vec![a, b],
                config,
                measured: measured.then(|| Measured {
                    policy: "flowcon".into(),
                    baseline: "fair-share".into(),
                    figure: Figure::BestJobJct,
                    baseline_value: 600.0,
                    value: 600.0 * (1.0 + mean),
                    mean,
                    sd: 0.02,
                    range: (mean - 0.03, mean + 0.03),
                    seeds: 2,
                    paired: wasmsched::stats::Paired::of(&[mean - 0.02, mean + 0.02], 0.0),
                    paper: Some(-0.4206),
                    source: "FlowCon (ICPP 2019)".into(),
                }),
                per_seed: vec![Some(mean - 0.02), Some(mean + 0.02)],
                error: (!measured).then(|| "flowcon refused the config: interval too long".into()),
            });
        }
    }
    let sweep = Sweep {
        workload: "flowcon-paper".into(),
        policy: "flowcon".into(),
        baseline: "fair-share".into(),
        figure: Figure::BestJobJct,
        paper: Some(-0.4206),
        seeds: vec![0, 1],
        axes,
        points,
    };
    let dir = out_dir("sweep");
    let page = write_sweep_html(&sweep, &dir).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html.matches("<g class=\"cell\">").count(), 18);
    let seen = probe(&chromium, &page);
    assert_page_works(&seen, 1);
}
