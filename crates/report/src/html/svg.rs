//! The drawing primitives of the HTML report's charts: inline SVG written as text, with a
//! linear scale, axes with round ticks, and marks that carry their exact values as a
//! `<title>` (the browser shows it on hover, with or without JavaScript).
//!
//! Every chart is a `<figure class="chart" data-chart="ID">` holding one `<svg>`; each
//! drawn datum is an element of class `mark`.

use std::fmt::Write as _;

/// Text escaped for HTML and SVG content and attribute values.
pub fn esc(s: &str) -> String {
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

/// A linear map from data to pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    /// Data range.
    pub lo: f64,
    /// Data range.
    pub hi: f64,
    /// Pixel at `lo`.
    pub from: f64,
    /// Pixel at `hi`.
    pub to: f64,
}

impl Scale {
    /// A scale over the finite values given (and `include`), widened a little and to round
    /// ends; a single value gets a range around it.
    pub fn over(
        values: impl IntoIterator<Item = f64>,
        include: &[f64],
        from: f64,
        to: f64,
    ) -> Scale {
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        for v in values.into_iter().chain(include.iter().copied()) {
            if v.is_finite() {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
        if !lo.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        if hi - lo < 1e-12 {
            let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
            (lo, hi) = (lo - pad, hi + pad);
        }
        let step = nice_step((hi - lo) / 5.0);
        Scale {
            lo: (lo / step).floor() * step,
            hi: (hi / step).ceil() * step,
            from,
            to,
        }
    }

    /// The pixel of `v`, clamped to the range (an infinite bound is drawn at the edge).
    pub fn at(&self, v: f64) -> f64 {
        let v = if v.is_nan() {
            self.lo
        } else {
            v.clamp(self.lo, self.hi)
        };
        self.from + (v - self.lo) / (self.hi - self.lo) * (self.to - self.from)
    }

    /// About five round tick values within the range.
    pub fn ticks(&self) -> Vec<f64> {
        let step = nice_step((self.hi - self.lo) / 5.0);
        let mut t = (self.lo / step).ceil() * step;
        let mut out = Vec::new();
        while t <= self.hi + step * 1e-9 {
            out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
            t += step;
        }
        out
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    p * if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    }
}

/// A tick label: as few decimals as the value needs.
pub fn tick(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if !(1e-3..1e6).contains(&a) {
        return format!("{v:.1e}");
    }
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A value for a tooltip: three significant decimals at most.
pub fn exact(v: f64) -> String {
    if !v.is_finite() {
        return if v > 0.0 {
            "inf".into()
        } else if v < 0.0 {
            "-inf".into()
        } else {
            "-".into()
        };
    }
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// Round values within a scale of log10 values: powers of ten, with 2 and 5 times them over
/// short ranges.
fn log_ticks(s: &Scale) -> Vec<f64> {
    let steps: &[f64] = if s.hi - s.lo < 3.0 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let mut out = Vec::new();
    for e in (s.lo.floor() as i32)..=(s.hi.ceil() as i32) {
        for m in steps {
            let v = m * 10f64.powi(e);
            if (s.lo..=s.hi + 1e-9).contains(&v.log10()) {
                out.push(v);
            }
        }
    }
    out
}

/// Room per character of a legend entry, px: the widest of the common sans-serif fonts at
/// the legend's 11 px (DejaVu Sans averages about 6.9 px a character over names like
/// `membw@100`) with a margin.
const LEGEND_CHAR: f64 = 7.4;

/// Colours of the lines of a chart, told apart also by dash patterns in print.
pub const PALETTE: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22",
];

/// The `i`th colour of [`PALETTE`].
pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// An SVG being drawn.
pub struct Svg {
    /// Width, px.
    pub width: f64,
    /// Height, px.
    pub height: f64,
    body: String,
}

impl Svg {
    /// An empty drawing.
    pub fn new(width: f64, height: f64) -> Svg {
        Svg {
            width,
            height,
            body: String::new(),
        }
    }

    /// Raw SVG.
    pub fn raw(&mut self, s: &str) {
        self.body.push_str(s);
    }

    /// Text at (x, y); `anchor` is start, middle or end.
    pub fn text(&mut self, x: f64, y: f64, anchor: &str, class: &str, s: &str) {
        let _ = write!(
            self.body,
            r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{anchor}" class="{class}">{}</text>"#,
            esc(s)
        );
    }

    /// A line.
    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, class: &str) {
        let _ = write!(
            self.body,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" class="{class}"/>"#
        );
    }

    /// A data mark: a rectangle with its tooltip.
    pub fn rect_mark(&mut self, x: f64, y: f64, w: f64, h: f64, style: &str, tip: &str) {
        let _ = write!(
            self.body,
            r#"<rect class="mark" x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" style="{style}"><title>{}</title></rect>"#,
            w.max(1.0),
            h.max(1.0),
            esc(tip)
        );
    }

    /// A data mark: a point with its tooltip.
    pub fn point_mark(&mut self, x: f64, y: f64, fill: &str, tip: &str) {
        let _ = write!(
            self.body,
            r#"<circle class="mark" cx="{x:.1}" cy="{y:.1}" r="3.5" style="fill:{fill}"><title>{}</title></circle>"#,
            esc(tip)
        );
    }

    /// A data mark: a polyline through the points, with its tooltip.
    pub fn path_mark(&mut self, points: &[(f64, f64)], stroke: &str, dash: usize, tip: &str) {
        if points.is_empty() {
            return;
        }
        let d: Vec<String> = points
            .iter()
            .enumerate()
            .map(|(i, (x, y))| format!("{}{x:.1},{y:.1}", if i == 0 { "M" } else { "L" }))
            .collect();
        let dash = match dash % 3 {
            0 => "",
            1 => "stroke-dasharray:6 3;",
            _ => "stroke-dasharray:2 2;",
        };
        let _ = write!(
            self.body,
            r#"<path class="mark line" d="{}" style="stroke:{stroke};{dash}"><title>{}</title></path>"#,
            d.join(""),
            esc(tip)
        );
    }

    /// A filled band between `upper` and `lower` (same x positions), for intervals.
    pub fn band(&mut self, upper: &[(f64, f64)], lower: &[(f64, f64)], fill: &str) {
        if upper.len() < 2 {
            return;
        }
        let mut d = String::new();
        for (i, (x, y)) in upper.iter().enumerate() {
            let _ = write!(d, "{}{x:.1},{y:.1}", if i == 0 { "M" } else { "L" });
        }
        for (x, y) in lower.iter().rev() {
            let _ = write!(d, "L{x:.1},{y:.1}");
        }
        let _ = write!(
            self.body,
            r#"<path class="band" d="{d}Z" style="fill:{fill}"/>"#
        );
    }

    /// A vertical axis at `x` with the scale's ticks and gridlines across to `x_end`.
    pub fn y_axis(&mut self, s: &Scale, x: f64, x_end: f64, label: &str) {
        let ticks: Vec<(f64, f64)> = s.ticks().into_iter().map(|t| (t, t)).collect();
        self.y_axis_ticked(s, &ticks, x, x_end, label);
    }

    /// A horizontal axis at `y` with the scale's ticks and gridlines up to `y_end`.
    pub fn x_axis(&mut self, s: &Scale, y: f64, y_end: f64, label: &str) {
        let ticks: Vec<(f64, f64)> = s.ticks().into_iter().map(|t| (t, t)).collect();
        self.x_axis_ticked(s, &ticks, y, y_end, label);
    }

    /// A vertical axis of log10 values: a tick at each power of ten (and at 2 and 5 times
    /// it when the range spans less than three decades).
    pub fn y_axis_log(&mut self, s: &Scale, x: f64, x_end: f64, label: &str) {
        let ticks: Vec<(f64, f64)> = log_ticks(s).into_iter().map(|t| (t.log10(), t)).collect();
        self.y_axis_ticked(s, &ticks, x, x_end, label);
    }

    /// A horizontal axis of log10 values, ticked like [`Svg::y_axis_log`].
    pub fn x_axis_log(&mut self, s: &Scale, y: f64, y_end: f64, label: &str) {
        let ticks: Vec<(f64, f64)> = log_ticks(s).into_iter().map(|t| (t.log10(), t)).collect();
        self.x_axis_ticked(s, &ticks, y, y_end, label);
    }

    /// A vertical axis with `ticks` (position on the scale, value written), gridlines and
    /// its label turned along it.
    fn y_axis_ticked(&mut self, s: &Scale, ticks: &[(f64, f64)], x: f64, x_end: f64, label: &str) {
        for &(at, value) in ticks {
            let y = s.at(at);
            self.line(x, y, x_end, y, "grid");
            self.text(x - 4.0, y + 4.0, "end", "tick", &tick(value));
        }
        self.line(x, s.from, x, s.to, "axis");
        if !label.is_empty() {
            let _ = write!(
                self.body,
                r#"<text class="label" text-anchor="middle" transform="translate(12 {:.1}) rotate(-90)">{}</text>"#,
                (s.from + s.to) / 2.0,
                esc(label)
            );
        }
    }

    /// A horizontal axis with `ticks` (position on the scale, value written), gridlines and
    /// its label under it.
    fn x_axis_ticked(&mut self, s: &Scale, ticks: &[(f64, f64)], y: f64, y_end: f64, label: &str) {
        for &(at, value) in ticks {
            let x = s.at(at);
            self.line(x, y, x, y_end, "grid");
            self.text(x, y + 14.0, "middle", "tick", &tick(value));
        }
        self.line(s.from, y, s.to, y, "axis");
        if !label.is_empty() {
            self.text((s.from + s.to) / 2.0, y + 30.0, "middle", "label", label);
        }
    }

    /// A legend entry per name, in rows from (x, y) that wrap at the right edge; returns the
    /// height used. Each entry is given [`LEGEND_CHAR`] px per character, more than the
    /// legend's 11 px text takes, so that neighbours never overlap.
    pub fn legend(&mut self, x: f64, y: f64, names: &[String]) -> f64 {
        self.legend_from(x, y, names, 0)
    }

    /// A [`Svg::legend`] whose colours start at palette index `first` (lines drawn after
    /// `first` others).
    pub fn legend_from(&mut self, x: f64, y: f64, names: &[String], first: usize) -> f64 {
        let (mut at, mut row) = (x, y);
        for (i, n) in names.iter().enumerate() {
            let w = 28.0 + LEGEND_CHAR * n.chars().count() as f64;
            if at + w > self.width - 10.0 && at > x {
                at = x;
                row += 15.0;
            }
            let _ = write!(
                self.body,
                r#"<rect class="key" x="{at:.1}" y="{:.1}" width="10" height="10" style="fill:{}"/>"#,
                row - 9.0,
                colour(first + i)
            );
            self.text(at + 14.0, row, "start", "key", n);
            at += w;
        }
        row - y + 15.0
    }

    /// The finished figure, with a caption.
    pub fn figure(self, id: &str, caption: &str) -> String {
        format!(
            r#"<figure class="chart" data-chart="{}"><figcaption>{}</figcaption><svg viewBox="0 0 {w:.0} {h:.0}" width="{w:.0}" height="{h:.0}" role="img" aria-label="{}">{}</svg></figure>"#,
            esc(id),
            esc(caption),
            esc(caption),
            self.body,
            w = self.width,
            h = self.height,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_round_their_ends_and_clamp() {
        let s = Scale::over([3.0, 47.0], &[0.0], 0.0, 100.0);
        assert_eq!((s.lo, s.hi), (0.0, 50.0));
        assert_eq!(s.at(25.0), 50.0);
        assert_eq!(s.at(f64::INFINITY), 100.0);
        assert_eq!(s.ticks(), vec![0.0, 10.0, 20.0, 30.0, 40.0, 50.0]);
        let one = Scale::over([5.0], &[], 0.0, 10.0);
        assert!(one.lo < 5.0 && one.hi > 5.0);
    }

    /// Defect: legend entries overlapped (`membw@100` over `memhog@100`): each was given 6.6
    /// px a character, less than the text took. Each entry now has room for its name at
    /// the widest common sans-serif glyphs of its size (7 px at 11 px), and rows wrap
    /// inside the chart.
    #[test]
    fn legend_entries_leave_room_for_their_names() {
        let names: Vec<String> = [
            "baseline",
            "cpu@100",
            "cache@100",
            "membw@100",
            "memhog@100",
            "forkbomb@100",
            "disk@100",
            "net-tx@100",
            "net-rx@100",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut s = Svg::new(400.0, 100.0);
        let height = s.legend(10.0, 14.0, &names);
        let svg = s.figure("l", "legend");
        let texts: Vec<(f64, f64)> = svg
            .split(r#"<text x=""#)
            .skip(1)
            .map(|t| {
                let x: f64 = t.split('"').next().unwrap().parse().unwrap();
                let y: f64 = t
                    .split(r#"y=""#)
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                (x, y)
            })
            .collect();
        assert_eq!(texts.len(), names.len());
        assert!(height >= 30.0, "nine entries wrap at 400 px: {height}");
        for (i, w) in texts.windows(2).enumerate() {
            let ((x0, y0), (x1, y1)) = (w[0], w[1]);
            if y0 == y1 {
                assert!(
                    x1 - x0 >= 14.0 + 7.0 * names[i].chars().count() as f64,
                    "{} and {} overlap",
                    names[i],
                    names[i + 1]
                );
            }
        }
        for ((x, _), n) in texts.iter().zip(&names) {
            assert!(
                x + 7.0 * n.chars().count() as f64 <= 400.0,
                "{n} leaves the chart"
            );
        }
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc(r#"a<b & "c"'"#), "a&lt;b &amp; &quot;c&quot;&#39;");
        let mut s = Svg::new(10.0, 10.0);
        s.text(0.0, 0.0, "start", "t", "<x>");
        assert!(s.figure("x", "cap").contains("&lt;x&gt;"));
    }
}
