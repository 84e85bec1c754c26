//! The report's drawing kit: an SVG writer that escapes every string and rounds every number,
//! linear scales with "nice" ticks (1, 2 or 5 × 10^k), axes, a time chart with a legend, a
//! chart of lanes (one row per node or GPU, bars along time) and a diverging colour scale.

use std::fmt::{self, Write as _};

/// A chart of values over time with a legend on its right.
pub(super) struct TimeChart {
    pub(super) svg: Svg,
    pub(super) x: Scale,
    pub(super) y: Scale,
}

impl TimeChart {
    pub(super) const WIDTH: f64 = 960.0;
    pub(super) const HEIGHT: f64 = 390.0;
    pub(super) const LEFT: f64 = 70.0;
    pub(super) const RIGHT: f64 = 730.0;
    pub(super) const TOP: f64 = 40.0;
    pub(super) const BOTTOM: f64 = 340.0;

    pub(super) fn new(title: &str, max_x: f64, min_y: f64, max_y: f64, x_title: &str, y_title: &str) -> TimeChart {
        let mut svg = Svg::new(Self::WIDTH, Self::HEIGHT, title);
        svg.text(Self::LEFT, 20.0, Anchor::Start, "title", title);
        let x = Scale::nice(0.0, max_x, Self::LEFT, Self::RIGHT);
        let y = Scale::nice(min_y, max_y, Self::BOTTOM, Self::TOP);
        x_axis(&mut svg, &x, Self::BOTTOM, Self::TOP, x_title);
        y_axis(&mut svg, &y, Self::LEFT, Self::RIGHT, y_title);
        TimeChart { svg, x, y }
    }

    /// Pixel position of a value.
    pub(super) fn at(&self, x: f64, y: f64) -> (f64, f64) {
        (self.x.at(x), self.y.at(y))
    }

    pub(super) fn empty(&mut self, why: &str) {
        let (x, y) = ((Self::LEFT + Self::RIGHT) / 2.0, (Self::TOP + Self::BOTTOM) / 2.0);
        self.svg.text(x, y, Anchor::Middle, "empty", why);
    }

    /// Entries beside the plot, one a line (no swatch for an empty colour); those that do not
    /// fit are counted on a last line.
    pub(super) fn legend(&mut self, entries: &[(String, &str)]) {
        let x = Self::RIGHT + 20.0;
        let room = ((Self::HEIGHT - Self::TOP - 10.0) / 15.0) as usize;
        for (i, (name, colour)) in entries.iter().enumerate() {
            let y = Self::TOP + i as f64 * 15.0;
            if i + 1 == room && entries.len() > room {
                let more = entries.len() - i;
                self.svg.text(x, y + 9.0, Anchor::Start, "", &format!("… and {more} more"));
                break;
            }
            if !colour.is_empty() {
                self.svg.rect(x, y, 10.0, 10.0, colour, "#999");
            }
            self.svg.text(x + 15.0, y + 9.0, Anchor::Start, "", &shorten(name, 34));
        }
    }

    pub(super) fn finish(self) -> String {
        self.svg.finish()
    }
}

/// Lanes along a shared time axis, one a node or GPU, each labelled on the left and holding
/// one or more rows of bars.
pub(super) struct LaneChart {
    pub(super) svg: Svg,
    pub(super) x: Scale,
    /// The top of each lane, then the bottom of the last.
    tops: Vec<f64>,
}

impl LaneChart {
    pub(super) const WIDTH: f64 = 960.0;
    pub(super) const LEFT: f64 = 120.0;
    pub(super) const RIGHT: f64 = 940.0;
    pub(super) const TOP: f64 = 34.0;
    /// The height of one row of bars.
    pub(super) const ROW: f64 = 14.0;
    /// The room around a lane's rows.
    const PAD: f64 = 4.0;

    /// A chart of `lanes`, each a name and its number of rows.
    pub(super) fn new(title: &str, lanes: &[(String, usize)], max_x: f64, x_title: &str) -> LaneChart {
        let mut tops = vec![Self::TOP];
        for (_, rows) in lanes {
            let last = *tops.last().expect("never empty");
            tops.push(last + 2.0 * Self::PAD + Self::ROW * (*rows).max(1) as f64);
        }
        let bottom = if lanes.is_empty() { Self::TOP + 2.0 * Self::PAD + Self::ROW } else { tops[lanes.len()] };
        let mut svg = Svg::new(Self::WIDTH, bottom + 48.0, title);
        svg.text(Self::LEFT, 20.0, Anchor::Start, "title", title);
        let x = Scale::nice(0.0, max_x, Self::LEFT, Self::RIGHT);
        x_axis(&mut svg, &x, bottom, Self::TOP, x_title);
        for (k, (name, _)) in lanes.iter().enumerate() {
            let (top, bottom) = (tops[k], tops[k + 1]);
            if k % 2 == 1 {
                svg.rect_opacity(Self::LEFT, top, Self::RIGHT - Self::LEFT, bottom - top, "#000", 0.035);
            }
            svg.text(Self::LEFT - 8.0, (top + bottom) / 2.0 + 4.0, Anchor::End, "", &shorten(name, 18));
        }
        svg.line(Self::LEFT, Self::TOP, Self::LEFT, bottom, "axis");
        LaneChart { svg, x, tops }
    }

    /// The top and bottom of row `row` of lane `k`.
    pub(super) fn row(&self, k: usize, row: usize) -> (f64, f64) {
        let lane = k.min(self.tops.len().saturating_sub(2));
        let top = self.tops[lane] + Self::PAD + Self::ROW * row as f64;
        (top + 1.0, top + Self::ROW - 1.0)
    }

    /// The top and bottom of lane `k`, inside its padding.
    pub(super) fn lane(&self, k: usize) -> (f64, f64) {
        let lane = k.min(self.tops.len().saturating_sub(2));
        let bottom = self.tops.get(lane + 1).copied().unwrap_or(self.tops[lane]);
        (self.tops[lane] + Self::PAD, bottom - Self::PAD)
    }

    pub(super) fn empty(&mut self, why: &str) {
        let bottom = self.tops.last().copied().unwrap_or(Self::TOP);
        let y = (Self::TOP + bottom.max(Self::TOP + 22.0)) / 2.0 + 4.0;
        self.svg.text((Self::LEFT + Self::RIGHT) / 2.0, y, Anchor::Middle, "empty", why);
    }

    pub(super) fn finish(self) -> String {
        self.svg.finish()
    }
}

/// Grid lines, ticks and labels of a horizontal axis at `bottom`, and its title.
pub(super) fn x_axis(svg: &mut Svg, x: &Scale, bottom: f64, top: f64, title: &str) {
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
pub(super) fn y_axis(svg: &mut Svg, y: &Scale, left: f64, right: f64, title: &str) {
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
pub(super) struct Scale {
    pub(super) lo: f64,
    pub(super) hi: f64,
    pub(super) step: f64,
    pub(super) px0: f64,
    pub(super) px1: f64,
}

impl Scale {
    /// Ticks wanted along an axis, about.
    pub(super) const TICKS: f64 = 6.0;

    pub(super) fn nice(lo: f64, hi: f64, px0: f64, px1: f64) -> Scale {
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

    pub(super) fn at(&self, v: f64) -> f64 {
        let span = self.hi - self.lo;
        if !span.is_finite() || span <= 0.0 || !v.is_finite() {
            return self.px0;
        }
        self.px0 + (v - self.lo) / span * (self.px1 - self.px0)
    }

    pub(super) fn ticks(&self) -> Vec<f64> {
        let n = ((self.hi - self.lo) / self.step).round();
        let n = if n.is_finite() { (n as usize).min(100) } else { 0 };
        (0..=n).map(|i| self.lo + i as f64 * self.step).collect()
    }
}

/// The smallest 1, 2 or 5 × 10^k at least `raw`; 1 for anything not positive and finite.
pub(super) fn nice_step(raw: f64) -> f64 {
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
pub(super) fn tick_label(v: f64, step: f64) -> String {
    let decimals = if step > 0.0 && step.is_finite() { (-step.log10().floor()).clamp(0.0, 6.0) as usize } else { 0 };
    let v = if v.abs() < step.abs() * 1e-9 { 0.0 } else { finite(v) };
    format!("{v:.decimals$}")
}

/// Seconds, minutes or hours, picked from the largest value to show.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct TimeUnit {
    pub(super) name: &'static str,
    pub(super) seconds: f64,
}

impl TimeUnit {
    pub(super) const S: TimeUnit = TimeUnit { name: "s", seconds: 1.0 };
    pub(super) const MIN: TimeUnit = TimeUnit { name: "min", seconds: 60.0 };
    pub(super) const H: TimeUnit = TimeUnit { name: "h", seconds: 3600.0 };

    pub(super) fn for_max(max_s: f64) -> TimeUnit {
        match finite(max_s) {
            s if s < 120.0 => Self::S,
            s if s < 2.0 * 3600.0 => Self::MIN,
            _ => Self::H,
        }
    }

    pub(super) fn label(self, s: f64) -> String {
        format!("{} {}", number(finite(s) / self.seconds), self.name)
    }
}

/// A duration for a table cell, in a unit of its own size.
pub(super) fn duration(s: f64) -> String {
    TimeUnit::for_max(s).label(s)
}

/// A number for a person: at most one decimal, none when whole; non-finite becomes 0.
pub(super) fn number(v: f64) -> String {
    let r = (finite(v) * 10.0).round() / 10.0;
    if r.fract() == 0.0 { format!("{r:.0}") } else { format!("{r:.1}") }
}

/// The `q`-quantile of sorted, non-empty values, interpolated between ranks.
pub(super) fn quantile(sorted: &[f64], q: f64) -> f64 {
    let Some(last) = sorted.len().checked_sub(1) else { return 0.0 };
    let pos = q.clamp(0.0, 1.0) * last as f64;
    let (i, frac) = (pos.floor() as usize, pos.fract());
    let next = sorted[(i + 1).min(last)];
    sorted[i] + (next - sorted[i]) * frac
}

pub(super) fn finite(v: f64) -> f64 {
    if v.is_finite() { v } else { 0.0 }
}

/// At most `max` characters, with an ellipsis when cut.
pub(super) fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max { s.to_string() } else { s.chars().take(max - 1).chain(['…']).collect() }
}

/// `s` with `&`, `<`, `>`, `"` and `'` replaced by entities, for HTML text and attributes.
pub(super) fn escape(s: &str) -> String {
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
pub(super) struct Px(pub(super) f64);

impl fmt::Display for Px {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&number(self.0.clamp(-1e6, 1e6)))
    }
}

#[derive(Clone, Copy)]
pub(super) enum Anchor {
    Start,
    Middle,
    End,
}

/// An SVG document written as text; every string escaped, every number through [`Px`].
pub(super) struct Svg {
    pub(super) out: String,
}

impl Svg {
    pub(super) fn new(width: f64, height: f64, label: &str) -> Svg {
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

    pub(super) fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, class: &str) {
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

    pub(super) fn line_styled(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str, width: f64) {
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

    pub(super) fn points(points: &[(f64, f64)]) -> String {
        let mut s = String::new();
        for (i, (x, y)) in points.iter().enumerate() {
            let _ = write!(s, "{}{},{}", if i > 0 { " " } else { "" }, Px(*x), Px(*y));
        }
        s
    }

    pub(super) fn polyline(&mut self, points: &[(f64, f64)], stroke: &str) {
        let _ = writeln!(
            self.out,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>",
            Self::points(points),
            escape(stroke)
        );
    }

    pub(super) fn polygon(&mut self, points: &[(f64, f64)], fill: &str) {
        let _ = writeln!(
            self.out,
            "<polygon points=\"{}\" fill=\"{}\" stroke=\"#fff\" stroke-width=\"0.3\"/>",
            Self::points(points),
            escape(fill)
        );
    }

    pub(super) fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, stroke: &str) {
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

    pub(super) fn circle(&mut self, cx: f64, cy: f64, r: f64, fill: &str, opacity: f64) {
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

    pub(super) fn text(&mut self, x: f64, y: f64, anchor: Anchor, class: &str, s: &str) {
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
    pub(super) fn vtext(&mut self, x: f64, y: f64, s: &str) {
        let _ = writeln!(
            self.out,
            "<text transform=\"translate({},{}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
            Px(x),
            Px(y),
            escape(s)
        );
    }

    /// A rectangle of `fill` at `opacity`, no outline.
    pub(super) fn rect_opacity(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, opacity: f64) {
        let (x, w) = if w < 0.0 { (x + w, -w) } else { (x, w) };
        let (y, h) = if h < 0.0 { (y + h, -h) } else { (y, h) };
        let _ = writeln!(
            self.out,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" fill-opacity=\"{}\"/>",
            Px(x),
            Px(y),
            Px(w),
            Px(h),
            escape(fill),
            Px(opacity.clamp(0.0, 1.0))
        );
    }

    /// A polyline of `stroke` at `width`, dashed or not.
    pub(super) fn polyline_styled(&mut self, points: &[(f64, f64)], stroke: &str, width: f64, dashed: bool) {
        let dash = if dashed { " stroke-dasharray=\"4 3\"" } else { "" };
        let _ = writeln!(
            self.out,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{dash}/>",
            Self::points(points),
            escape(stroke),
            Px(width)
        );
    }

    /// A polygon of `fill` outlined in `stroke`.
    pub(super) fn polygon_styled(&mut self, points: &[(f64, f64)], fill: &str, stroke: &str) {
        let _ = writeln!(
            self.out,
            "<polygon points=\"{}\" fill=\"{}\" stroke=\"{}\"/>",
            Self::points(points),
            escape(fill),
            escape(stroke)
        );
    }

    /// Text of `size` pixels in `fill`.
    pub(super) fn text_sized(&mut self, x: f64, y: f64, anchor: Anchor, size: f64, fill: &str, s: &str) {
        let anchor = match anchor {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        };
        let _ = writeln!(
            self.out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\" style=\"font-size:{}px;fill:{}\">{}</text>",
            Px(x),
            Px(y),
            Px(size),
            escape(fill),
            escape(s)
        );
    }

    /// Opens a group of `class` whose tooltip is `tooltip`; [`Svg::close_group`] closes it.
    pub(super) fn open_group(&mut self, class: &str, tooltip: &str) {
        let _ = writeln!(self.out, "<g class=\"{}\"><title>{}</title>", escape(class), escape(tooltip));
    }

    pub(super) fn close_group(&mut self) {
        self.out.push_str("</g>\n");
    }

    pub(super) fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

/// A colour of a diverging scale: `good` 1 is blue, −1 red, 0 near white; clamped.
pub(super) fn diverging(good: f64) -> String {
    const WHITE: [f64; 3] = [247.0, 247.0, 247.0];
    const BLUE: [f64; 3] = [33.0, 102.0, 172.0];
    const RED: [f64; 3] = [178.0, 24.0, 43.0];
    let t = finite(good).clamp(-1.0, 1.0);
    let end = if t >= 0.0 { BLUE } else { RED };
    let mix = |k: usize| (WHITE[k] + (end[k] - WHITE[k]) * t.abs()).round() as u8;
    format!("#{:02x}{:02x}{:02x}", mix(0), mix(1), mix(2))
}
