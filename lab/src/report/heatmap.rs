//! The sweep page: the figure at every point of a parameter sweep as a heat map (the first
//! axis across, the second down), diverging around "no change", the best point framed; then
//! a table of every point.

use std::fmt::Write as _;

use serde_json::Value;

use super::page;
use super::svg::*;
use super::tables::{Cell, Table, goodness, verdict};
use crate::experiment::paper::Figure;
use crate::experiment::sweep::{Point, Sweep};

/// An axis value for a person: a string without its quotes, anything else as JSON.
fn value_label(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// A point's swept values: `alpha=0.5 · interval-s=30`.
fn point_label(sweep: &Sweep, p: &Point) -> String {
    let parts: Vec<String> = sweep
        .axes
        .iter()
        .zip(&p.at)
        .map(|(a, &i)| format!("{}={}", a.key, a.values.get(i).map_or_else(|| "?".into(), value_label)))
        .collect();
    if parts.is_empty() { "(no axis)".into() } else { parts.join(" · ") }
}

/// What the heat map shows: column and row labels, the axes held fixed, and the point of each
/// cell (`cells[row][column]`).
pub(super) struct Grid<'a> {
    pub(super) columns: Vec<String>,
    pub(super) rows: Vec<String>,
    /// The axes beyond the second, at the value they are drawn at.
    pub(super) fixed: Vec<String>,
    pub(super) cells: Vec<Vec<Option<&'a Point>>>,
}

/// The first two axes of `sweep` as a grid, any others held at the best point's values (or
/// the first point's when none was measured).
pub(super) fn grid(sweep: &Sweep) -> Grid<'_> {
    let labels = |k: usize| -> Vec<String> {
        sweep.axes.get(k).map_or_else(|| vec![String::new()], |a| a.values.iter().map(value_label).collect())
    };
    let (columns, rows) = (labels(0), labels(1));
    let anchor = sweep.best().or(sweep.points.first());
    let rest: Vec<usize> = anchor.map_or_else(Vec::new, |p| p.at.iter().skip(2).copied().collect());
    let fixed = sweep
        .axes
        .iter()
        .skip(2)
        .zip(&rest)
        .map(|(a, &i)| format!("{}={}", a.key, a.values.get(i).map_or_else(|| "?".into(), value_label)))
        .collect();
    let find = |x: usize, y: usize| {
        sweep.points.iter().find(|p| {
            (sweep.axes.is_empty() || p.at.first() == Some(&x))
                && (sweep.axes.len() < 2 || p.at.get(1) == Some(&y))
                && p.at.iter().skip(2).copied().eq(rest.iter().copied())
        })
    };
    let cells = (0..rows.len()).map(|y| (0..columns.len()).map(|x| find(x, y)).collect()).collect();
    Grid { columns, rows, fixed, cells }
}

/// The sweep page.
pub(super) fn render(sweep: &Sweep) -> String {
    let figure = sweep.figure;
    let title = format!("Sweep of {} on {}", sweep.policy, sweep.workload);
    let mut out = String::new();
    let _ = writeln!(out, "<h1>{}</h1>", escape(&title));
    let axes: Vec<String> = sweep.axes.iter().map(|a| format!("{} ({} values)", a.key, a.values.len())).collect();
    let seeds: Vec<String> = sweep.seeds.iter().map(u64::to_string).collect();
    let _ = writeln!(
        out,
        "<p class=\"meta\">{} against {}, the same seeds for both · {} seed(s): {} · axes: {} · {} points</p>",
        escape(figure.name()),
        escape(&sweep.baseline),
        sweep.seeds.len(),
        escape(&seeds.join(", ")),
        escape(&if axes.is_empty() { "none".into() } else { axes.join(" × ") }),
        sweep.points.len()
    );
    let paper = sweep
        .paper
        .map_or_else(|| "the workload gives no paper value".into(), |v| format!("paper: {}", figure.format(v)));
    out.push_str("<h2>Best point</h2>\n");
    match sweep.best().and_then(|p| p.measured.as_ref().map(|m| (p, m))) {
        Some((p, m)) => {
            let _ = writeln!(
                out,
                "<p><strong>{}</strong>: {} {} ({} → {}, over {} seed(s)); {}.</p>",
                escape(&point_label(sweep, p)),
                escape(figure.name()),
                escape(&m.summary()),
                escape(&figure.format_value(m.baseline_value)),
                escape(&figure.format_value(m.value)),
                m.seeds,
                escape(&paper)
            );
        }
        None => out.push_str("<p class=\"note\">No point could be measured.</p>\n"),
    }
    let _ = writeln!(out, "<h2>{} at every point</h2>", escape(figure.name()));
    let g = grid(sweep);
    let centre = if figure.lower_is_better() { "0 % (no change)" } else { "1× (as many as the baseline)" };
    let mut caption = format!(
        "{} of {} against {} on {}, mean over the seeds, in each cell. Blue is better than {}, red worse, \
         white about the same (centred on {centre}); the best point is framed; grey could not be measured. {}.",
        figure.name(),
        sweep.policy,
        sweep.baseline,
        sweep.workload,
        sweep.baseline,
        paper.replace("paper:", "The paper reports")
    );
    if !g.fixed.is_empty() {
        let _ = write!(
            caption,
            " Only the first two axes are drawn, the others held at the best point's values: {}.",
            g.fixed.join(", ")
        );
    }
    out.push_str(&heat_svg(sweep, &g));
    let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(&caption));
    out.push_str("<h2>Every point</h2>\n");
    points_table(sweep, &mut out);
    page(&title, &out)
}

/// The heat map itself.
fn heat_svg(sweep: &Sweep, g: &Grid) -> String {
    let figure = sweep.figure;
    let (left, top, right) = (150.0, 54.0, 940.0);
    let (nx, ny) = (g.columns.len().max(1), g.rows.len().max(1));
    let cell_w = ((right - left) / nx as f64).min(160.0);
    let cell_h = if ny > 12 { 30.0 } else { 48.0 };
    let bottom = top + cell_h * ny as f64;
    let mut svg = Svg::new(960.0, bottom + 78.0, &format!("{} at every point", figure.name()));
    svg.text(
        left,
        22.0,
        Anchor::Start,
        "title",
        &format!("{}: {} against {}", figure.name(), sweep.policy, sweep.baseline),
    );
    let measured = || g.cells.iter().flatten().filter_map(|c| c.and_then(|p| p.measured.as_ref()));
    let scale = measured().map(|m| goodness(figure, m.mean).abs()).filter(|v| v.is_finite()).fold(0.0, f64::max);
    let scale = if scale > 1e-12 { scale } else { 1.0 };
    let best = sweep.best();
    let size = (cell_w / 6.0).clamp(7.0, 13.0);
    for (y, row) in g.cells.iter().enumerate() {
        for (x, cell) in row.iter().enumerate() {
            let (x0, y0) = (left + cell_w * x as f64, top + cell_h * y as f64);
            let (cx, cy) = (x0 + cell_w / 2.0, y0 + cell_h / 2.0);
            let Some(p) = cell else {
                svg.rect(x0, y0, cell_w, cell_h, "#f4f4f4", "#fff");
                continue;
            };
            let label = point_label(sweep, p);
            match (&p.measured, &p.error) {
                (Some(m), _) => {
                    let t = goodness(figure, m.mean) / scale;
                    svg.open_group("cell", &format!("{label}: {}", m.summary()));
                    svg.rect(x0, y0, cell_w, cell_h, &diverging(t), "#fff");
                    let ink = if t.abs() > 0.6 { "#fff" } else { "#111" };
                    let sd = m.summary().split_once(" ± ").map(|(_, sd)| format!("± {sd}")).unwrap_or_default();
                    let second = cell_h >= 40.0;
                    let y_main = if second { cy - 1.0 } else { cy + size / 3.0 };
                    svg.text_sized(cx, y_main, Anchor::Middle, size, ink, &figure.format(m.mean));
                    if second {
                        svg.text_sized(cx, cy + size + 1.0, Anchor::Middle, size * 0.8, ink, &sd);
                    }
                }
                (None, error) => {
                    let why = if error.is_some() { "refused" } else { "not measured" };
                    let tip = format!("{label}: {}", error.as_deref().unwrap_or("could not be measured"));
                    svg.open_group("cell", &tip);
                    svg.rect(x0, y0, cell_w, cell_h, "#bdbdbd", "#fff");
                    svg.text_sized(cx, cy + size / 3.0, Anchor::Middle, size * 0.85, "#333", why);
                }
            }
            svg.close_group();
            if best.is_some_and(|b| std::ptr::eq(b, *p)) {
                mark_best(&mut svg, (x0, y0, cell_w, cell_h), &label);
            }
        }
    }
    let fits = ((cell_w - 4.0) / 6.0).max(3.0) as usize;
    for (x, name) in g.columns.iter().enumerate() {
        svg.text(left + cell_w * (x as f64 + 0.5), bottom + 16.0, Anchor::Middle, "", &shorten(name, fits));
    }
    let x_title = sweep.axes.first().map_or("", |a| a.key.as_str());
    svg.text(left + cell_w * nx as f64 / 2.0, bottom + 36.0, Anchor::Middle, "", x_title);
    if let Some(axis) = sweep.axes.get(1) {
        for (y, name) in g.rows.iter().enumerate() {
            svg.text(left - 8.0, top + cell_h * (y as f64 + 0.5) + 4.0, Anchor::End, "", &shorten(name, 16));
        }
        svg.vtext(20.0, (top + bottom) / 2.0, &shorten(&axis.key, 30));
    }
    colour_scale(&mut svg, figure, scale, (left, bottom + 50.0));
    svg.finish()
}

/// A frame around the best point's cell (`x`, `y`, width, height).
fn mark_best(svg: &mut Svg, (x0, y0, w, h): (f64, f64, f64, f64), label: &str) {
    svg.open_group("best", &format!("best point: {label}"));
    let frame = [(x0 + 1.5, y0 + 1.5), (x0 + w - 1.5, y0 + 1.5), (x0 + w - 1.5, y0 + h - 1.5)];
    let mut frame = frame.to_vec();
    frame.extend([(x0 + 1.5, y0 + h - 1.5), (x0 + 1.5, y0 + 1.5)]);
    svg.polyline_styled(&frame, "#000", 3.0, false);
    svg.text_sized(x0 + 5.0, y0 + 11.0, Anchor::Start, 9.0, "#000", "★ best");
    svg.close_group();
}

/// The colour scale at (`sx`, `sy`): worse on the left, better on the right, `scale` the
/// figure's distance from even at either end.
fn colour_scale(svg: &mut Svg, figure: Figure, scale: f64, (sx, sy): (f64, f64)) {
    for k in 0..=8 {
        let t = (k as f64 - 4.0) / 4.0;
        svg.rect(sx + 40.0 * k as f64, sy, 40.0, 12.0, &diverging(t), "#ccc");
    }
    // `+ 0.0` turns -0 into 0.
    let at = |t: f64| if figure.lower_is_better() { -t * scale + 0.0 } else { 1.0 + t * scale };
    svg.text(sx, sy + 24.0, Anchor::Start, "", &format!("{} worse", figure.format(at(-1.0))));
    svg.text(sx + 180.0, sy + 24.0, Anchor::Middle, "", &figure.format(at(0.0)));
    svg.text(sx + 360.0, sy + 24.0, Anchor::End, "", &format!("better {}", figure.format(at(1.0))));
}

/// Every point: its values, mean ± sd, 95 % interval and p, range, what is behind it, each
/// seed, and any error.
fn points_table(sweep: &Sweep, out: &mut String) {
    let f: Figure = sweep.figure;
    let columns =
        ["point", "config", "mean ± sd", "95 % CI", "p", "lowest", "highest", "baseline", "ours", "per seed", "error"];
    let mut table = Table::new("points", "every point of the sweep", &columns);
    let best = sweep.best();
    for p in &sweep.points {
        let star = if best.is_some_and(|b| std::ptr::eq(b, p)) { "★ " } else { "" };
        let config: Vec<String> = p.config.iter().map(|(k, v)| format!("{k}={}", value_label(v))).collect();
        let config = config.join(", ");
        let mut row = vec![Cell::text(&format!("{star}{}", point_label(sweep, p))), Cell::text(&config)];
        match &p.measured {
            Some(m) => {
                row.push(Cell::num(m.mean, &m.summary()).with_class(verdict(f, m.mean)));
                row.push(Cell::num(m.paired.interval.map_or(f64::NAN, |i| i[0]), &m.interval()));
                let p = m.paired.p.map_or_else(String::new, crate::stats::show_p);
                row.push(Cell::num(m.paired.p.unwrap_or(f64::NAN), &p));
                row.push(Cell::num(m.range.0, &f.format(m.range.0)));
                row.push(Cell::num(m.range.1, &f.format(m.range.1)));
                row.push(Cell::num(m.baseline_value, &f.format_value(m.baseline_value)));
                row.push(Cell::num(m.value, &f.format_value(m.value)));
            }
            None => row.extend((0..7).map(|_| Cell::num(f64::NAN, "—"))),
        }
        let seeds: Vec<String> =
            p.per_seed.iter().map(|v| v.map_or_else(|| "—".into(), |v| f.format(v).replace(' ', "\u{a0}"))).collect();
        row.push(Cell::text(&seeds.join(", ")));
        row.push(Cell::text(p.error.as_deref().unwrap_or("")));
        table.row(row);
    }
    table.finish(true, out);
}
