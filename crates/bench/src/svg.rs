//! The report as a chart (`sectorcrypt bench --svg FILE`), drawn with plotters' SVG
//! backend.
//!
//! Each case is a row of two horizontal bars in GB/s: sectorcrypt's median, with a whisker
//! from the slowest to the fastest of its runs, and its peer's median. Where the report
//! states a `limit`, a red mark stands at the machine's limit for the case (the median over
//! the fraction). A column right of the plot gives the figures of each bar: the median,
//! the ratio to the peer and the fraction of the limit; the peer's median and name.
//! Cases go into panels of similar speed, each with its own linear scale, so that a case
//! at 1 GB/s is not a sliver beside one at 20 GB/s: a panel takes the fastest case left
//! and every case at least a [`PANEL_SPAN`]th of it (by its fastest run or its peer). Bar
//! lengths stay proportional to the figures within a panel. The title names the CPU, its
//! features, the backend and the date.
//!
//! The SVG names its fonts (`monospace` for the case names, `sans-serif` elsewhere) and
//! leaves laying the text out to the viewer; the widths reserved for text assume at most
//! 0.62 em per character.

use crate::{CaseResult, Report};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The colour of sectorcrypt's bars.
pub const OURS: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
/// The colour of the peers' bars.
pub const PEER: RGBColor = RGBColor(0xf2, 0x8e, 0x2b);
/// The colour of the limit marks.
pub const LIMIT: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);
const GREY: RGBColor = RGBColor(0x66, 0x66, 0x66);

/// A panel holds cases down to this fraction of its fastest.
pub const PANEL_SPAN: f64 = 4.0;
/// A limit mark widens its panel's scale only where the case reaches at least this
/// fraction of it (a case far below its limit says so in its figures).
const LIMIT_SCALED: f64 = 0.2;
/// Height of one bar, pixels.
pub const BAR: i32 = 13;
const ROW: i32 = 2 * BAR + 12;
const WIDTH: i32 = 1320;
/// Space right of the plot for the figures written after the bars.
const RIGHT: i32 = 340;
const AXIS: i32 = 44;
const PANEL_GAP: i32 = 18;
/// Pixels per point of font size: plotters writes `font-size` as the size over 1.24.
const PT: f64 = 1.24;

/// What the title says about the run.
#[derive(Debug, Clone, Default)]
pub struct Caption {
    /// The CPU's model name.
    pub cpu: String,
    /// The AES backend sectorcrypt ran on.
    pub backend: String,
    /// When the run was, as the title shows it.
    pub date: String,
    /// The case filter of the run.
    pub filter: Option<String>,
    /// A `--quick` run.
    pub quick: bool,
}

impl Caption {
    /// The caption of a run on this machine now.
    pub fn of_this_machine(backend: &str, filter: Option<&str>, quick: bool) -> Caption {
        Caption {
            cpu: cpu_model(),
            backend: backend.to_string(),
            date: utc_now(),
            filter: filter.map(str::to_string),
            quick,
        }
    }
}

/// The `model name` of /proc/cpuinfo ("unknown CPU" without one).
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The time now in UTC, `YYYY-MM-DD HH:MM UTC`.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format_utc(secs)
}

/// `secs` since the epoch as `YYYY-MM-DD HH:MM UTC` (the proleptic Gregorian calendar).
pub fn format_utc(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let (hh, mm) = ((secs % 86400) / 3600, (secs % 3600) / 60);
    // Days to a civil date, counting 400-year eras from 0000-03-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {hh:02}:{mm:02} UTC")
}

/// The larger of a case's measured figures: its fastest run and its peer.
fn measured(r: &CaseResult) -> f64 {
    [Some(r.max), r.peer_bytes_per_sec]
        .into_iter()
        .flatten()
        .filter(|x| x.is_finite())
        .fold(0.0, f64::max)
}

/// The rightmost figure a case puts on its panel's scale: its measured figures, and its
/// limit where it reaches at least [`LIMIT_SCALED`] of that.
fn extent(r: &CaseResult) -> f64 {
    let limit = limit_rate(r).filter(|l| r.bytes_per_sec >= l * LIMIT_SCALED);
    limit.map_or(measured(r), |l| l.max(measured(r)))
}

/// The machine's limit for the case in bytes per second (the median over the fraction).
fn limit_rate(r: &CaseResult) -> Option<f64> {
    r.limit
        .filter(|l| l.is_finite() && *l > 0.0)
        .map(|l| r.bytes_per_sec / l)
}

/// The cases grouped into panels of similar measured speed (indices into `results`): the
/// fastest first, each panel in the report's order.
pub fn panels(results: &[CaseResult]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..results.len()).collect();
    order.sort_by(|&a, &b| measured(&results[b]).total_cmp(&measured(&results[a])));
    let mut out: Vec<Vec<usize>> = vec![];
    let mut top = f64::INFINITY;
    for i in order {
        let x = measured(&results[i]);
        match out.last_mut() {
            Some(p) if x * PANEL_SPAN >= top => p.push(i),
            _ => {
                out.push(vec![i]);
                top = x;
            }
        }
    }
    for p in &mut out {
        p.sort_unstable();
    }
    out
}

/// The upper end of a scale that holds `x`: 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a
/// power of ten.
fn nice_ceiling(x: f64) -> f64 {
    if !(x.is_finite() && x > 0.0) {
        return 1.0;
    }
    let p = 10f64.powf(x.log10().floor());
    [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|v| *v >= x * 1.0001)
        .unwrap_or(10.0 * p)
}

/// A figure in GB/s with three significant digits.
fn gbs(bytes_per_sec: f64) -> String {
    let g = bytes_per_sec / 1e9;
    if g >= 10.0 {
        format!("{g:.1}")
    } else if g >= 1.0 {
        format!("{g:.2}")
    } else {
        format!("{g:.3}")
    }
}

/// An axis tick in GB/s, without trailing zeros.
fn tick(v: &f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn font(family: &str, px: f64) -> TextStyle<'_> {
    (family, px * PT).into_font().into()
}

/// Pixels that `chars` characters of a `px`-pixel font take at most.
fn text_width(chars: usize, px: f64) -> i32 {
    (chars as f64 * px * 0.62).ceil() as i32
}

/// Splits `words` into lines of at most `chars` characters.
fn wrap(words: &[String], chars: usize) -> Vec<String> {
    let mut lines: Vec<String> = vec![];
    for w in words {
        match lines.last_mut() {
            Some(l) if l.len() + 1 + w.len() <= chars => {
                l.push(' ');
                l.push_str(w);
            }
            _ => lines.push(w.clone()),
        }
    }
    lines
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Failed = String;

fn err(e: impl std::fmt::Display) -> Failed {
    format!("drawing the chart: {e}")
}

/// The chart of `report` as an SVG document.
pub fn render(report: &Report, caption: &Caption) -> Result<String, String> {
    let names = report
        .results
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(0);
    let left = text_width(names.max(8), 14.0) + 24;
    let features = wrap(
        &[
            vec!["cpu features:".to_string()],
            report.cpu_features.clone(),
        ]
        .concat(),
        ((WIDTH - 40) as f64 / (12.0 * 0.62)) as usize,
    );
    let header = 92 + 16 * features.len() as i32;
    let groups = panels(&report.results);
    let body: i32 = groups
        .iter()
        .map(|p| p.len() as i32 * ROW + AXIS + PANEL_GAP)
        .sum::<i32>()
        .max(40);
    let height = header + body + 10;
    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (WIDTH as u32, height as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        draw_header(&root, report, caption, &features)?;
        if groups.is_empty() {
            root.draw_text(
                "No case ran (no case name contains the filter).",
                &font("sans-serif", 14.0).color(&INK),
                (20, header + 10),
            )
            .map_err(err)?;
        }
        let mut top = header;
        for group in &groups {
            let h = group.len() as i32 * ROW + AXIS;
            let area = root.clone().shrink((0, top), (WIDTH, h));
            let rows: Vec<&CaseResult> = group.iter().map(|&i| &report.results[i]).collect();
            draw_panel(&root, &area, &rows, left)?;
            top += h + PANEL_GAP;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// The title, the machine, and the legend.
fn draw_header(
    root: &Area<'_>,
    report: &Report,
    caption: &Caption,
    features: &[String],
) -> Result<(), Failed> {
    let mut title = "sectorcrypt bench: GB/s of sectorcrypt and of its peer, per case".to_string();
    if caption.quick {
        title.push_str(" (quick run: 3 short runs per side)");
    }
    root.draw_text(
        &title,
        &font("sans-serif", 20.0)
            .color(&INK)
            .pos(Pos::new(HPos::Left, VPos::Top)),
        (20, 12),
    )
    .map_err(err)?;
    let mut machine = format!(
        "{} · backend {} · clock {:.2} GHz (measured) · {}",
        caption.cpu, caption.backend, report.clock_ghz, caption.date
    );
    if let Some(f) = &caption.filter {
        machine.push_str(&format!(" · cases matching \"{f}\""));
    }
    let small = font("sans-serif", 12.0).pos(Pos::new(HPos::Left, VPos::Top));
    root.draw_text(&machine, &small.color(&INK), (20, 40))
        .map_err(err)?;
    let mut y = 58;
    for line in features {
        root.draw_text(line, &small.color(&GREY), (20, y))
            .map_err(err)?;
        y += 16;
    }
    // The legend: a swatch or mark, then its words.
    y += 8;
    let text = font("sans-serif", 12.0).pos(Pos::new(HPos::Left, VPos::Center));
    let mut x = 20;
    let mut item = |draw: &dyn Fn(i32) -> Result<(), Failed>, words: &str| {
        draw(x)?;
        root.draw_text(words, &text.color(&INK), (x + 26, y))
            .map_err(err)?;
        x += 26 + text_width(words.chars().count(), 12.0) + 24;
        Ok::<(), Failed>(())
    };
    item(
        &|x| swatch(root, x, y, OURS),
        "sectorcrypt: median of its runs",
    )?;
    item(
        &|x| whisker(root, x + 2, x + 20, y),
        "slowest to fastest run",
    )?;
    item(
        &|x| swatch(root, x, y, PEER),
        "peer: median (named right of the plot)",
    )?;
    item(
        &|x| limit_mark(root, x + 10, y),
        "the machine's limit for the case (the report's limit field)",
    )?;
    root.draw_text(
        "Panels group cases of similar speed; each has its own scale.",
        &text.color(&GREY),
        (20, y + 20),
    )
    .map_err(err)
}

fn swatch(root: &Area<'_>, x: i32, y: i32, color: RGBColor) -> Result<(), Failed> {
    root.draw(&Rectangle::new(
        [(x, y - BAR / 2), (x + 20, y - BAR / 2 + BAR)],
        color.filled(),
    ))
    .map_err(err)
}

/// A whisker from `x0` to `x1` at height `y`, with end caps.
fn whisker(root: &Area<'_>, x0: i32, x1: i32, y: i32) -> Result<(), Failed> {
    let style = INK.stroke_width(1);
    root.draw(&PathElement::new(vec![(x0, y), (x1, y)], style))
        .map_err(err)?;
    for x in [x0, x1] {
        root.draw(&PathElement::new(vec![(x, y - 4), (x, y + 4)], style))
            .map_err(err)?;
    }
    Ok(())
}

/// The limit mark at `x`, centred on height `y`.
fn limit_mark(root: &Area<'_>, x: i32, y: i32) -> Result<(), Failed> {
    root.draw(&PathElement::new(
        vec![(x, y - BAR / 2 - 3), (x, y + BAR / 2 + 1)],
        LIMIT.stroke_width(3),
    ))
    .map_err(err)
}

/// One panel: its axis, and a row of bars per case.
fn draw_panel(
    root: &Area<'_>,
    area: &Area<'_>,
    rows: &[&CaseResult],
    left: i32,
) -> Result<(), Failed> {
    let top = rows.iter().map(|r| extent(r)).fold(0.0, f64::max) / 1e9;
    let xmax = nice_ceiling(top);
    let n = rows.len() as f64;
    let mut chart = ChartBuilder::on(area)
        .margin_right(RIGHT)
        .margin_left(10)
        .x_label_area_size(AXIS)
        .y_label_area_size(left - 10)
        .build_cartesian_2d(0f64..xmax, 0f64..n)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_labels(10)
        .x_label_formatter(&tick)
        .x_label_style(font("sans-serif", 12.0).color(&INK))
        .x_desc("GB/s")
        .axis_desc_style(font("sans-serif", 12.0).color(&INK))
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
        .draw()
        .map_err(err)?;
    let plot = chart.plotting_area();
    let at = |gbs: f64, row: f64| plot.map_coordinate(&(gbs, n - row - 0.5));
    let name = font("monospace", 14.0)
        .color(&INK)
        .pos(Pos::new(HPos::Right, VPos::Center));
    let figure = font("sans-serif", 12.0).pos(Pos::new(HPos::Left, VPos::Center));
    let column = at(xmax, 0.0).0 + 14;
    for (i, r) in rows.iter().enumerate() {
        let (x0, yc) = at(0.0, i as f64);
        let x = |bytes_per_sec: f64| at(bytes_per_sec / 1e9, i as f64).0;
        root.draw_text(&r.name, &name, (x0 - 8, yc)).map_err(err)?;
        // sectorcrypt above the centre line, the peer below it.
        let (oy, py) = (yc - 1 - BAR / 2, yc + 1 + BAR / 2);
        bar(root, x0, x(r.bytes_per_sec), oy, OURS)?;
        whisker(root, x(r.min), x(r.max), oy)?;
        let mut words = format!("{} GB/s", gbs(r.bytes_per_sec));
        if let Some(ratio) = r.ratio {
            words.push_str(&format!(" · {ratio:.2}x the peer"));
        }
        if let Some(l) = r.limit {
            words.push_str(&format!(" · {:.0}% of the limit", l * 100.0));
            if let Some(rate) = limit_rate(r).filter(|v| *v <= xmax * 1e9) {
                limit_mark(root, x(rate), oy)?;
            }
        }
        // The figures stand in a column right of the plot, a line per bar.
        root.draw_text(&words, &figure.color(&INK), (column, oy))
            .map_err(err)?;
        if let Some(p) = r.peer_bytes_per_sec {
            bar(root, x0, x(p), py, PEER)?;
            let peer = r.peer.as_deref().unwrap_or("peer");
            root.draw_text(
                &format!("{} GB/s {peer}", gbs(p)),
                &figure.color(&GREY),
                (column, py),
            )
            .map_err(err)?;
        }
    }
    Ok(())
}

/// A bar from `x0` to `x1` centred on height `y`.
fn bar(root: &Area<'_>, x0: i32, x1: i32, y: i32, color: RGBColor) -> Result<(), Failed> {
    root.draw(&Rectangle::new(
        [(x0, y - BAR / 2), (x1, y - BAR / 2 + BAR)],
        color.filled(),
    ))
    .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str, gbs: f64, peer: Option<f64>, limit: Option<f64>) -> CaseResult {
        CaseResult {
            name: name.into(),
            backend: "vaes".into(),
            bytes_per_sec: gbs * 1e9,
            min: gbs * 0.9e9,
            max: gbs * 1e9,
            peer: peer.map(|_| "openssl".into()),
            peer_bytes_per_sec: peer.map(|p| p * 1e9),
            ratio: peer.map(|p| gbs / p),
            peers: vec![],
            cycles_per_byte: 1.0,
            limit,
            round_limit_cpb: None,
        }
    }

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(format_utc(0), "1970-01-01 00:00 UTC");
        // 2000-02-29 (a leap day of a century year divisible by 400) 23:59.
        assert_eq!(format_utc(951_868_740), "2000-02-29 23:59 UTC");
        assert_eq!(format_utc(1_795_503_600), "2026-11-24 07:00 UTC");
    }

    #[test]
    fn panels_hold_cases_of_similar_speed_in_report_order() {
        let results = [
            case("a", 16.0, Some(7.0), Some(0.8)),
            case("g", 1.2, Some(0.08), None),
            case("b", 5.0, Some(1.0), None),
            case("m", 0.1, None, None),
            case("c", 2.5, Some(2.6), Some(0.01)),
        ];
        // "a" at 16 GB/s (its limit does not count): down to 4 GB/s shares its panel.
        assert_eq!(panels(&results), [vec![0, 2], vec![1, 4], vec![3]]);
        assert!(panels(&[]).is_empty());
    }

    #[test]
    fn scales_end_on_round_figures_above_the_data() {
        for (x, want) in [
            (57.5, 60.0),
            (18.0, 20.0),
            (1.21, 1.5),
            (0.07, 0.08),
            (0.0, 1.0),
        ] {
            let got = nice_ceiling(x);
            assert!((got - want).abs() < want * 1e-9, "{x}: {got}");
        }
        assert_eq!(tick(&0.0), "0");
        assert_eq!(tick(&2.5), "2.5");
        assert_eq!(tick(&0.05), "0.05");
        assert_eq!(gbs(16.24e9), "16.2");
        assert_eq!(gbs(0.0813e9), "0.081");
    }
}
