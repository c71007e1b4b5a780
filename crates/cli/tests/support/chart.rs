//! Reading a `bench --svg` chart back as a person reads it: the case names on the left,
//! each bar measured against the tick labels of its panel's axis, the whisker and the
//! limit mark against the same axis. Checked against the report's figures.

use serde_json::Value;

/// A `<text>`: position, anchor, font family, content.
#[derive(Debug, Clone)]
pub struct Text {
    pub x: f64,
    pub y: f64,
    pub anchor: String,
    pub family: String,
    pub content: String,
}

/// A filled `<rect>`.
#[derive(Debug, Clone, Copy)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

/// A `<polyline>` of two points, with its stroke colour.
#[derive(Debug, Clone)]
pub struct Line {
    pub a: (f64, f64),
    pub b: (f64, f64),
    pub stroke: String,
}

/// The drawing's elements.
#[derive(Debug, Default)]
pub struct Chart {
    pub texts: Vec<Text>,
    /// Rectangles by fill colour (upper-case `#RRGGBB`).
    pub rects: Vec<(String, Rect)>,
    pub lines: Vec<Line>,
}

/// The colours of the chart: sectorcrypt's bars, the peers' bars, the limit marks.
pub const OURS: &str = "#1F77B4";
pub const PEER: &str = "#F28E2B";
pub const LIMIT: &str = "#D62728";

fn num(n: roxmltree::Node<'_, '_>, attr: &str) -> f64 {
    n.attribute(attr)
        .unwrap_or_else(|| panic!("{attr} missing: {n:?}"))
        .parse()
        .unwrap_or_else(|e| panic!("{attr}: {e}: {n:?}"))
}

/// Parses `svg` (panics when it is not well-formed XML with an `<svg>` root).
pub fn parse(svg: &str) -> Chart {
    let doc = roxmltree::Document::parse(svg).expect("the chart is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let mut c = Chart::default();
    for n in doc.descendants().filter(|n| n.is_element()) {
        match n.tag_name().name() {
            "text" => c.texts.push(Text {
                x: num(n, "x"),
                y: num(n, "y"),
                anchor: n.attribute("text-anchor").unwrap_or("start").into(),
                family: n.attribute("font-family").unwrap_or("").into(),
                content: n.text().unwrap_or("").trim().into(),
            }),
            "rect" if n.attribute("fill") != Some("none") => c.rects.push((
                n.attribute("fill").unwrap_or("").to_uppercase(),
                Rect {
                    x: num(n, "x"),
                    y: num(n, "y"),
                    w: num(n, "width"),
                    h: num(n, "height"),
                },
            )),
            "polyline" => {
                let pts: Vec<(f64, f64)> = n
                    .attribute("points")
                    .unwrap_or("")
                    .split_whitespace()
                    .map(|p| {
                        let (x, y) = p.split_once(',').expect("x,y");
                        (x.parse().unwrap(), y.parse().unwrap())
                    })
                    .collect();
                if let [a, b] = pts[..] {
                    c.lines.push(Line {
                        a,
                        b,
                        stroke: n.attribute("stroke").unwrap_or("").to_uppercase(),
                    });
                }
            }
            _ => {}
        }
    }
    c
}

/// A panel's axis: pixels of its 0 tick and per GB/s, from its tick labels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Axis {
    pub y: f64,
    pub x0: f64,
    pub px_per_gbs: f64,
    pub max_gbs: f64,
}

impl Chart {
    /// The axes, from the numeric tick labels (centred, one row of them per panel); each
    /// is checked to be linear.
    pub fn axes(&self) -> Vec<Axis> {
        let mut rows: Vec<(f64, Vec<(f64, f64)>)> = vec![];
        for t in self.texts.iter().filter(|t| t.anchor == "middle") {
            let Ok(v) = t.content.parse::<f64>() else {
                continue;
            };
            match rows.iter_mut().find(|(y, _)| *y == t.y) {
                Some((_, ticks)) => ticks.push((v, t.x)),
                None => rows.push((t.y, vec![(v, t.x)])),
            }
        }
        rows.into_iter()
            .map(|(y, mut ticks)| {
                ticks.sort_by(|a, b| a.0.total_cmp(&b.0));
                assert!(ticks.len() >= 3, "an axis with few ticks: {ticks:?}");
                assert_eq!(ticks[0].0, 0.0, "the axis starts at 0: {ticks:?}");
                let (v1, x1) = ticks[ticks.len() - 1];
                let x0 = ticks[0].1;
                let px_per_gbs = (x1 - x0) / v1;
                for (v, x) in &ticks {
                    assert!((x0 + v * px_per_gbs - x).abs() <= 1.0, "{ticks:?}");
                }
                Axis {
                    y,
                    x0,
                    px_per_gbs,
                    max_gbs: v1,
                }
            })
            .collect()
    }

    /// The case names: the right-aligned monospace labels.
    pub fn names(&self) -> Vec<&Text> {
        self.texts
            .iter()
            .filter(|t| t.family == "monospace" && t.anchor == "end")
            .collect()
    }

    fn rects_of(&self, fill: &str) -> Vec<Rect> {
        self.rects
            .iter()
            .filter(|(f, _)| f == fill)
            .map(|(_, r)| *r)
            .collect()
    }
}

/// Pixels a bar's or mark's position may be off (plotters draws on whole pixels).
const PX: f64 = 1.5;

fn near(got: f64, want: f64, what: &str) {
    assert!((got - want).abs() <= PX, "{what}: {got} px, want {want}");
}

/// Checks `svg` against the report's `results` (the JSON objects of `bench --json`):
/// one label per case with its name, and in its row a bar per side of the length of the
/// side's median on the panel's axis, the whisker from the slowest to the fastest run, and
/// a limit mark at the median over `limit` where that is on the axis. Returns the axis
/// each case was read on, in the report's order.
pub fn check(svg: &str, results: &[Value]) -> Vec<Axis> {
    let chart = parse(svg);
    let axes = chart.axes();
    let labels = chart.names();
    let mut got: Vec<&str> = labels.iter().map(|t| t.content.as_str()).collect();
    let mut want: Vec<&str> = results
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want, "the labels are the case names, once each");
    let (ours, peers) = (chart.rects_of(OURS), chart.rects_of(PEER));
    let with_peer = results.iter().filter(|r| r["peer_bytes_per_sec"].is_f64());
    // One bar per case and side, and one swatch of each colour in the legend.
    assert_eq!(ours.len(), results.len() + 1, "{ours:?}");
    assert_eq!(peers.len(), with_peer.count() + 1, "{peers:?}");
    let mut read_on = vec![];
    for r in results {
        let name = r["name"].as_str().unwrap();
        let label = labels.iter().find(|t| t.content == name).unwrap();
        let yc = label.y;
        let axis = *axes
            .iter()
            .filter(|a| a.y > yc)
            .min_by(|a, b| a.y.total_cmp(&b.y))
            .unwrap_or_else(|| panic!("{name}: no axis below its row"));
        let x = |bytes_per_sec: f64| axis.x0 + bytes_per_sec / 1e9 * axis.px_per_gbs;
        let f = |k: &str| r[k].as_f64();
        // sectorcrypt's bar ends at the row's centre line, the peer's starts there.
        let row: Vec<&Rect> = ours
            .iter()
            .filter(|b| (b.y + b.h - yc).abs() <= 2.0)
            .collect();
        assert_eq!(row.len(), 1, "{name}: sectorcrypt's bar: {row:?}");
        let bar = row[0];
        near(bar.x, axis.x0, &format!("{name}: the bar starts at 0"));
        near(bar.x + bar.w, x(f("bytes_per_sec").unwrap()), name);
        let peer: Vec<&Rect> = peers.iter().filter(|b| (b.y - yc).abs() <= 2.0).collect();
        match f("peer_bytes_per_sec") {
            Some(p) => {
                assert_eq!(peer.len(), 1, "{name}: the peer's bar: {peer:?}");
                near(peer[0].x, axis.x0, &format!("{name}: the peer starts at 0"));
                near(peer[0].x + peer[0].w, x(p), &format!("{name}: peer"));
            }
            None => assert!(peer.is_empty(), "{name}: a peer bar without a peer"),
        }
        let bar_y = bar.y + bar.h / 2.0;
        let in_row = |l: &&Line| (l.a.1 - bar_y).abs() <= 12.0 && (l.b.1 - bar_y).abs() <= 12.0;
        let whisker: Vec<&Line> = chart
            .lines
            .iter()
            .filter(in_row)
            .filter(|l| l.stroke != LIMIT && l.a.1 == l.b.1 && (l.a.1 - bar_y).abs() <= 1.0)
            .collect();
        assert_eq!(whisker.len(), 1, "{name}: the whisker: {whisker:?}");
        near(
            whisker[0].a.0,
            x(f("min").unwrap()),
            &format!("{name}: min"),
        );
        near(
            whisker[0].b.0,
            x(f("max").unwrap()),
            &format!("{name}: max"),
        );
        let marks: Vec<&Line> = chart
            .lines
            .iter()
            .filter(in_row)
            .filter(|l| l.stroke == LIMIT)
            .collect();
        let limit = f("limit").map(|l| f("bytes_per_sec").unwrap() / l);
        match limit.filter(|l| *l / 1e9 <= axis.max_gbs) {
            Some(l) => {
                assert_eq!(marks.len(), 1, "{name}: the limit mark: {marks:?}");
                near(marks[0].a.0, x(l), &format!("{name}: limit"));
            }
            None => assert!(marks.is_empty(), "{name}: a mark with no limit on the axis"),
        }
        read_on.push(axis);
    }
    read_on
}
