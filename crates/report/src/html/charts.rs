//! The charts of the HTML report, each a function from plain data to a finished
//! [`Svg::figure`]: horizontal bars with intervals, a heat map, curves with interval bands,
//! time series with shaded spans, and the percentile and histogram plots of latencies.

use super::svg::{colour, esc, exact, Scale, Svg};

/// Width of every chart, px.
const WIDTH: f64 = 760.0;

/// One bar: a value with its interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// Row label.
    pub label: String,
    /// Value.
    pub value: f64,
    /// Interval, when the value is an estimate.
    pub interval: Option<(f64, f64)>,
    /// Which series (colour).
    pub series: usize,
    /// Drawn pale: not to be trusted.
    pub faded: bool,
    /// Hover text.
    pub tip: String,
}

/// Horizontal bars from `reference` to each value, with interval whiskers; bars of one label
/// sit together. `series` names the colours (no legend when one).
pub fn bars(
    id: &str,
    caption: &str,
    axis: &str,
    items: &[Bar],
    reference: f64,
    series: &[String],
) -> String {
    let mut labels: Vec<&str> = Vec::new();
    for b in items {
        if !labels.contains(&b.label.as_str()) {
            labels.push(&b.label);
        }
    }
    // The series each label has bars of, in series order: a row is as tall as its label's
    // bars need, so a label with one series' bar has no empty slot.
    let of_label = |label: &str| -> Vec<usize> {
        let mut v: Vec<usize> = items
            .iter()
            .filter(|b| b.label == label)
            .map(|b| b.series)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let per = labels
        .iter()
        .map(|l| of_label(l).len())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let bar_h = 12.0;
    let row_h = bar_h * per + 6.0;
    let left = label_width(labels.iter().copied());
    let mut s = Svg::new(WIDTH, 0.0);
    let top = if series.len() > 1 {
        14.0 + s.legend(left, 16.0, series)
    } else {
        10.0
    };
    let height = top + row_h * labels.len() as f64 + 42.0;
    s.height = height;
    // Intervals widen the axis only so far beyond the estimates that those stay readable; a
    // bound further out is drawn at the edge.
    let est = items.iter().map(|b| b.value).filter(|v| v.is_finite());
    let (lo_e, hi_e) = est.fold((reference, reference), |(a, b), v| (a.min(v), b.max(v)));
    let reach = (2.0 * (hi_e - lo_e)).max(10.0);
    let values = items.iter().flat_map(|b| {
        let (lo, hi) = b.interval.unwrap_or((b.value, b.value));
        [b.value, lo.max(lo_e - reach), hi.min(hi_e + reach)]
    });
    let x = Scale::over(values, &[reference], left, WIDTH - 20.0);
    let bottom = top + row_h * labels.len() as f64;
    s.x_axis(&x, bottom, top, axis);
    let x0 = x.at(reference);
    for (i, label) in labels.iter().enumerate() {
        let y = top + row_h * i as f64 + 3.0;
        s.text(left - 6.0, y + row_h / 2.0, "end", "rowlabel", label);
        let here = of_label(label);
        for b in items.iter().filter(|b| b.label == *label) {
            let slot = here.iter().position(|&k| k == b.series).unwrap_or(0);
            let yb = y + bar_h * slot as f64;
            let xv = x.at(b.value);
            let opacity = if b.faded { 0.35 } else { 0.85 };
            s.rect_mark(
                xv.min(x0),
                yb,
                (xv - x0).abs(),
                bar_h - 2.0,
                &format!("fill:{};fill-opacity:{opacity}", colour(b.series)),
                &b.tip,
            );
            if let Some((lo, hi)) = b.interval {
                let ym = yb + (bar_h - 2.0) / 2.0;
                s.line(x.at(lo), ym, x.at(hi), ym, "whisker");
                s.line(x.at(lo), ym - 3.0, x.at(lo), ym + 3.0, "whisker");
                s.line(x.at(hi), ym - 3.0, x.at(hi), ym + 3.0, "whisker");
            }
        }
    }
    s.line(x0, top, x0, bottom, "zero");
    s.figure(id, caption)
}

/// Room for row labels at the left of a chart: about 6.4 px per character of the longest,
/// within 60..=380 px.
fn label_width<'a>(labels: impl Iterator<Item = &'a str>) -> f64 {
    let longest = labels.map(|l| l.chars().count()).max().unwrap_or(0);
    (longest as f64 * 6.4 + 14.0).clamp(60.0, 380.0)
}

/// One cell of a heat map.
#[derive(Debug, Clone, PartialEq)]
pub struct HeatCell {
    /// Value the colour shows; `None` is grey.
    pub value: Option<f64>,
    /// Text written in the cell.
    pub text: String,
    /// Drawn pale: not to be trusted.
    pub faded: bool,
    /// Hover text.
    pub tip: String,
}

/// A grid of `rows` x `columns`, coloured from blue (below 0) through white to red (at
/// `span` and above): degradation per probe and condition.
pub fn heat(
    id: &str,
    caption: &str,
    rows: &[String],
    columns: &[String],
    cells: &[Vec<Option<HeatCell>>],
    span: f64,
) -> String {
    let left = label_width(rows.iter().map(String::as_str));
    let top = 80.0;
    let cw = ((WIDTH - left - 70.0) / columns.len().max(1) as f64).clamp(56.0, 110.0);
    let cw = if columns.len() > 20 {
        (WIDTH - left - 70.0) / columns.len() as f64
    } else {
        cw
    };
    let width = WIDTH.max(left + cw * columns.len() as f64 + 70.0);
    let ch = if rows.len() > 16 { 12.0 } else { 22.0 };
    let write = cw >= 40.0 && ch >= 20.0;
    let height = top + ch * rows.len() as f64 + 10.0;
    let mut s = Svg::new(width, height);
    let every = (columns.len() / 20).max(1);
    for (j, c) in columns.iter().enumerate().filter(|(j, _)| j % every == 0) {
        let x = left + cw * (j as f64 + 0.5);
        s.raw(&format!(
            r#"<text class="tick" text-anchor="start" transform="translate({x:.1} {:.1}) rotate(-35)">{}</text>"#,
            top - 6.0,
            esc(c)
        ));
    }
    for (i, r) in rows.iter().enumerate() {
        let y = top + ch * i as f64;
        if ch >= 20.0 || i % 5 == 0 {
            s.text(left - 6.0, y + ch / 2.0 + 4.0, "end", "rowlabel", r);
        }
        for (j, cell) in cells[i].iter().enumerate() {
            let x = left + cw * j as f64;
            let Some(c) = cell else {
                continue;
            };
            let fill = c
                .value
                .map_or_else(|| "#d9d9d9".to_string(), |v| diverging(v, span));
            let opacity = if c.faded { 0.4 } else { 1.0 };
            s.rect_mark(
                x + 1.0,
                y + 1.0,
                cw - 2.0,
                ch - 2.0,
                &format!("fill:{fill};fill-opacity:{opacity}"),
                &c.tip,
            );
            if write {
                s.text(
                    x + cw / 2.0,
                    y + ch / 2.0 + 4.0,
                    "middle",
                    "celltext",
                    &c.text,
                );
            }
        }
    }
    s.figure(id, caption)
}

/// White at 0, red towards `span`, blue towards `-span`.
fn diverging(v: f64, span: f64) -> String {
    let t = (v / span).clamp(-1.0, 1.0);
    let (r, g, b) = if t >= 0.0 {
        (255.0, 255.0 - 170.0 * t, 255.0 - 180.0 * t)
    } else {
        (255.0 + 190.0 * t, 255.0 + 110.0 * t, 255.0)
    };
    format!("rgb({:.0},{:.0},{:.0})", r, g, b)
}

/// A point of a [`Line`].
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Setting.
    pub x: f64,
    /// Value.
    pub y: f64,
    /// Interval of the value.
    pub interval: Option<(f64, f64)>,
    /// Hover text.
    pub tip: String,
}

/// A named line of points.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// Name (legend).
    pub name: String,
    /// Points in increasing x.
    pub points: Vec<Point>,
}

/// Which axes of a [`curve`] are logarithmic (for values spanning decades).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Log {
    /// The setting.
    pub x: bool,
    /// The values.
    pub y: bool,
}

/// The axes of a [`curve`]: what each shows, and which are logarithmic.
#[derive(Debug, Clone, Copy)]
pub struct Axes<'a> {
    /// The setting's label.
    pub x: &'a str,
    /// The values' label.
    pub y: &'a str,
    /// Which are logarithmic.
    pub log: Log,
}

/// Lines over a setting with their interval bands; `limit` a horizontal line, `marks`
/// vertical ones, each labelled.
pub fn curve(
    id: &str,
    caption: &str,
    axes: Axes<'_>,
    lines: &[Line],
    limit: Option<(f64, &str)>,
    marks: &[(f64, String)],
) -> String {
    curve_over(id, caption, axes, lines, limit, marks, None)
}

/// Lines of another unit in a panel under a [`curve`]'s: what the panel's axis shows, and
/// the lines.
#[derive(Debug, Clone, Copy)]
pub struct Below<'a> {
    /// The values' label.
    pub y: &'a str,
    /// The lines, each against the same setting as the panel above.
    pub lines: &'a [Line],
}

/// A [`curve`], with a second panel under it when `below` has lines: the same setting axis
/// and marks, its own value axis, no limit.
pub fn curve_over(
    id: &str,
    caption: &str,
    axes: Axes<'_>,
    lines: &[Line],
    limit: Option<(f64, &str)>,
    marks: &[(f64, String)],
    below: Option<Below<'_>>,
) -> String {
    let Axes {
        x: x_label,
        y: y_label,
        log,
    } = axes;
    let below = below.filter(|b| !b.lines.is_empty());
    let left = 70.0;
    let plot_h = 260.0;
    let (below_h, gap) = (150.0, 48.0);
    let mut s = Svg::new(WIDTH, 0.0);
    let names: Vec<String> = lines.iter().map(|l| l.name.clone()).collect();
    let legend_h = if names.len() > 1 || !names.iter().all(String::is_empty) {
        s.legend(left, 14.0, &names)
    } else {
        0.0
    };
    let top = 18.0 + legend_h;
    let bottom = match below {
        Some(_) => top + plot_h + gap + below_h,
        None => top + plot_h,
    };
    s.height = bottom + 46.0;
    let tx = |v: f64| if log.x { v.max(1e-9).log10() } else { v };
    let ty = |v: f64| if log.y { v.max(1e-9).log10() } else { v };
    let all = lines.iter().chain(below.iter().flat_map(|b| b.lines));
    let xs = all.flat_map(|l| l.points.iter().map(|p| tx(p.x)));
    let x = Scale::over(xs, &[], left, WIDTH - 20.0);
    let ys = lines.iter().flat_map(|l| {
        l.points.iter().flat_map(|p| {
            let (lo, hi) = p.interval.unwrap_or((p.y, p.y));
            [p.y, lo, hi].map(ty)
        })
    });
    let include: Vec<f64> = limit.map(|(v, _)| ty(v)).into_iter().collect();
    let y = Scale::over(ys, &include, top + plot_h, top);
    if log.y {
        s.y_axis_log(&y, left, WIDTH - 20.0, y_label);
    } else {
        s.y_axis(&y, left, WIDTH - 20.0, y_label);
    }
    let top_x_label = if below.is_some() { "" } else { x_label };
    if log.x {
        s.x_axis_log(&x, top + plot_h, top, top_x_label);
    } else {
        s.x_axis(&x, top + plot_h, top, top_x_label);
    }
    if let Some((v, label)) = limit {
        let py = y.at(ty(v));
        s.line(left, py, WIDTH - 20.0, py, "limit");
        s.text(WIDTH - 22.0, py - 4.0, "end", "guide", label);
    }
    for (v, label) in marks {
        let px = x.at(tx(*v));
        s.line(px, top, px, bottom, "limit");
        s.text(px + 3.0, top + 10.0, "start", "guide", label);
    }
    draw_lines(&mut s, lines, 0, &|v| x.at(tx(v)), &|v| y.at(ty(v)));
    if let Some(b) = below {
        let ptop = top + plot_h + gap;
        let ys = b.lines.iter().flat_map(|l| {
            l.points.iter().flat_map(|p| {
                let (lo, hi) = p.interval.unwrap_or((p.y, p.y));
                [p.y, lo, hi]
            })
        });
        let y2 = Scale::over(ys, &[0.0], bottom, ptop);
        s.y_axis(&y2, left, WIDTH - 20.0, b.y);
        if log.x {
            s.x_axis_log(&x, bottom, ptop, x_label);
        } else {
            s.x_axis(&x, bottom, ptop, x_label);
        }
        let names: Vec<String> = b.lines.iter().map(|l| l.name.clone()).collect();
        let first = lines.len();
        // Above the panel, clear of its lines and of the axis above.
        let _ = s.legend_from(left, ptop - 8.0, &names, first);
        draw_lines(&mut s, b.lines, first, &|v| x.at(tx(v)), &|v| y2.at(v));
    }
    s.figure(id, caption)
}

/// Each line with its interval band (when every point has one) and its points, coloured
/// from palette index `first` on; `px` and `py` place a setting and a value.
fn draw_lines(
    s: &mut Svg,
    lines: &[Line],
    first: usize,
    px: &dyn Fn(f64) -> f64,
    py: &dyn Fn(f64) -> f64,
) {
    for (n, l) in lines.iter().enumerate() {
        let i = first + n;
        let pts: Vec<&Point> = l.points.iter().filter(|p| p.y.is_finite()).collect();
        let with_ci: Vec<&&Point> = pts.iter().filter(|p| p.interval.is_some()).collect();
        if with_ci.len() == pts.len() && pts.len() > 1 {
            let up: Vec<(f64, f64)> = pts
                .iter()
                .map(|p| (px(p.x), py(p.interval.unwrap().1)))
                .collect();
            let lo: Vec<(f64, f64)> = pts
                .iter()
                .map(|p| (px(p.x), py(p.interval.unwrap().0)))
                .collect();
            s.band(&up, &lo, &format!("{}33", colour(i)));
        }
        let path: Vec<(f64, f64)> = pts.iter().map(|p| (px(p.x), py(p.y))).collect();
        s.path_mark(&path, colour(i), i / super::svg::PALETTE.len(), &l.name);
        for p in &pts {
            if let (Some((lo, hi)), 1) = (p.interval, pts.len()) {
                s.line(px(p.x), py(lo), px(p.x), py(hi), "whisker");
            }
            s.point_mark(px(p.x), py(p.y), colour(i), &p.tip);
        }
    }
}

/// A labelled interval of time behind a series.
#[derive(Debug, Clone, PartialEq)]
pub struct Shade {
    /// Start.
    pub from: f64,
    /// End.
    pub to: f64,
    /// What ran.
    pub label: String,
}

/// A time series: one panel per unit, each with its lines, the `shades` behind every panel.
pub fn series(
    id: &str,
    caption: &str,
    x_label: &str,
    panels: &[(String, Vec<Line>)],
    shades: &[Shade],
) -> String {
    let left = 70.0;
    let panel_h = 150.0;
    let gap = 36.0;
    let top = 26.0;
    let height = top + (panel_h + gap) * panels.len() as f64 + 24.0;
    let xs = panels
        .iter()
        .flat_map(|(_, ls)| ls.iter().flat_map(|l| l.points.iter().map(|p| p.x)));
    let x = Scale::over(xs, &[], left, WIDTH - 20.0);
    let mut s = Svg::new(WIDTH, height);
    for (k, (unit, lines)) in panels.iter().enumerate() {
        let ptop = top + (panel_h + gap) * k as f64;
        let ys = lines.iter().flat_map(|l| l.points.iter().map(|p| p.y));
        let y = Scale::over(ys, &[0.0], ptop + panel_h, ptop);
        for (i, sh) in shades.iter().enumerate() {
            let (a, b) = (x.at(sh.from), x.at(sh.to));
            s.raw(&format!(
                r##"<rect class="span" x="{a:.1}" y="{ptop:.1}" width="{:.1}" height="{panel_h:.1}" style="fill:{}"><title>{}</title></rect>"##,
                (b - a).max(0.5),
                if i % 2 == 0 { "#fde0c5" } else { "#fbd0a8" },
                esc(&format!("{} ({} s to {} s)", sh.label, exact(sh.from), exact(sh.to)))
            ));
            if k == 0 && b - a > 6.0 * sh.label.chars().count() as f64 {
                s.text(a + 2.0, ptop - 4.0, "start", "guide", &sh.label);
            }
        }
        s.y_axis(&y, left, WIDTH - 20.0, unit);
        s.x_axis(
            &x,
            ptop + panel_h,
            ptop,
            if k + 1 == panels.len() { x_label } else { "" },
        );
        let names: Vec<String> = lines.iter().map(|l| l.name.clone()).collect();
        let _ = s.legend(left + 6.0, ptop + 12.0, &names);
        for (i, l) in lines.iter().enumerate() {
            let pts: Vec<(f64, f64)> = l
                .points
                .iter()
                .filter(|p| p.y.is_finite())
                .map(|p| (x.at(p.x), y.at(p.y)))
                .collect();
            s.path_mark(&pts, colour(i), 0, &l.name);
            // Every point carries its value; drawn small so long series stay readable.
            for p in l.points.iter().filter(|p| p.y.is_finite()) {
                s.raw(&format!(
                    r#"<circle class="mark dot" cx="{:.1}" cy="{:.1}" r="1.6" style="fill:{}"><title>{}</title></circle>"#,
                    x.at(p.x),
                    y.at(p.y),
                    colour(i),
                    esc(&p.tip)
                ));
            }
        }
    }
    s.figure(id, caption)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_datum_is_a_mark_with_its_value_on_hover() {
        let items = vec![
            Bar {
                label: "cpu-int".into(),
                value: 12.0,
                interval: Some((10.0, 14.0)),
                series: 0,
                faded: false,
                tip: "cpu-int: +12.0 [10.0, 14.0]".into(),
            },
            Bar {
                label: "disk".into(),
                value: -3.0,
                interval: None,
                series: 0,
                faded: true,
                tip: "disk: -3.0".into(),
            },
        ];
        let svg = bars("b", "caption", "%", &items, 0.0, &[]);
        assert_eq!(svg.matches(r#"class="mark""#).count(), 2);
        assert!(svg.contains("<title>cpu-int: +12.0 [10.0, 14.0]</title>"));
        assert!(svg.starts_with(r#"<figure class="chart" data-chart="b">"#));
        let line = Line {
            name: "a".into(),
            points: vec![
                Point {
                    x: 1.0,
                    y: 2.0,
                    interval: Some((1.0, 3.0)),
                    tip: "1: 2".into(),
                },
                Point {
                    x: 2.0,
                    y: 4.0,
                    interval: Some((3.0, 5.0)),
                    tip: "2: 4".into(),
                },
            ],
        };
        let c = curve(
            "c",
            "cap",
            Axes {
                x: "x",
                y: "y",
                log: Log::default(),
            },
            &[line],
            Some((5.0, "limit")),
            &[(1.5, "t".into())],
        );
        assert_eq!(c.matches(r#"class="mark""#).count(), 2);
        assert!(c.contains(r#"class="band""#));
    }

    #[test]
    fn the_heat_colour_is_white_at_zero_and_saturates() {
        assert_eq!(diverging(0.0, 50.0), "rgb(255,255,255)");
        assert_eq!(diverging(100.0, 50.0), diverging(50.0, 50.0));
        assert!(diverging(-10.0, 50.0).ends_with(",255)"));
    }
}
