//! Line charts drawn as inline SVG on the server: no script, no library. Minutes run along
//! the x axis; every series is a line through its points (broken where a value is missing)
//! with a dot on each point, so that a single minute of data still shows.

use std::fmt::Write;

use crate::format::{clock, elapsed, escape};

/// Size of every chart, in SVG user units.
pub const WIDTH: f64 = 640.0;
pub const HEIGHT: f64 = 200.0;
/// Space for the y-axis labels, the legend and the x-axis labels.
pub const LEFT: f64 = 56.0;
pub const RIGHT: f64 = 12.0;
pub const TOP: f64 = 24.0;
pub const BOTTOM: f64 = 24.0;

/// A line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// CSS class of the line and dots (`s1`, `s2`, `slo`, ... in dashboard.css).
    pub class: &'static str,
    /// One value per x position; `None` leaves a gap.
    pub values: Vec<Option<f64>>,
}

/// How the x axis is labelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XAxis {
    /// Times of day (`HH:MM`, UTC): `minutes` are milliseconds since the Unix epoch.
    Clock,
    /// Time since the start (`M:SS`, `H:MM:SS`): `minutes` are milliseconds from it.
    Elapsed,
}

/// A chart over time.
#[derive(Debug, Clone)]
pub struct LineChart {
    pub title: String,
    /// Unit of the y axis, shown after the tick labels (`ms`, `req/min`, `$`).
    pub unit: String,
    /// The x position of each point, in milliseconds (see [`XAxis`]), ascending.
    pub minutes: Vec<i64>,
    pub x_axis: XAxis,
    pub series: Vec<Series>,
}

/// Where the chart puts a data point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    x_min: f64,
    x_max: f64,
    y_max: f64,
}

impl Scale {
    /// The scale of a chart: x spans the minutes (a single minute sits in the middle), y
    /// runs from zero to a rounded-up maximum of every value (1 when there is none).
    pub fn of(chart: &LineChart) -> Scale {
        let x_min = chart.minutes.first().copied().unwrap_or(0) as f64;
        let x_max = chart.minutes.last().copied().unwrap_or(0) as f64;
        let top = chart
            .series
            .iter()
            .flat_map(|s| s.values.iter().flatten())
            .copied()
            .filter(|v| v.is_finite())
            .fold(0.0_f64, f64::max);
        Scale {
            x_min,
            x_max,
            y_max: nice_ceiling(top),
        }
    }

    /// Largest value of the y axis.
    pub fn y_max(&self) -> f64 {
        self.y_max
    }

    /// SVG x of a minute.
    pub fn x(&self, minute_ms: i64) -> f64 {
        let span = WIDTH - LEFT - RIGHT;
        if self.x_max <= self.x_min {
            return LEFT + span / 2.0;
        }
        LEFT + (minute_ms as f64 - self.x_min) / (self.x_max - self.x_min) * span
    }

    /// SVG y of a value (clamped to the plot area).
    pub fn y(&self, value: f64) -> f64 {
        let span = HEIGHT - TOP - BOTTOM;
        let frac = (value / self.y_max).clamp(0.0, 1.0);
        TOP + (1.0 - frac) * span
    }
}

/// The smallest of 1, 2, 2.5, 5 × 10^k that is at least `v` (1 for zero or less).
pub fn nice_ceiling(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let magnitude = 10f64.powf(v.log10().floor());
    for step in [1.0, 2.0, 2.5, 5.0, 10.0] {
        let candidate = step * magnitude;
        if candidate >= v * (1.0 - 1e-12) {
            return candidate;
        }
    }
    10.0 * magnitude
}

/// A value with about four significant digits, trailing zeros dropped; tiny values
/// (costs of single queries) in scientific notation.
pub fn number(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 || !v.is_finite() {
        return if v.is_nan() { "–".into() } else { "0".into() };
    }
    if a < 1e-4 {
        return format!("{v:.2e}");
    }
    let decimals = (3 - a.log10().floor() as i32).clamp(0, 8) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

impl LineChart {
    /// The label of an x position.
    fn x_label(&self, ms: i64) -> String {
        match self.x_axis {
            XAxis::Clock => clock(ms),
            XAxis::Elapsed => elapsed(ms),
        }
    }

    /// The chart as an `<svg>` element; every text in it is escaped.
    pub fn to_svg(&self) -> String {
        let scale = Scale::of(self);
        let mut svg = String::new();
        let title = escape(&self.title);
        let _ = write!(
            svg,
            r#"<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{title}" data-points="{}"><title>{title}</title>"#,
            self.series
                .iter()
                .map(|s| s.values.iter().flatten().count())
                .sum::<usize>()
        );
        // Grid and y labels: 0, 1/4, ... of the axis maximum.
        for i in 0..=4 {
            let v = scale.y_max() * f64::from(i) / 4.0;
            let y = scale.y(v);
            let _ = write!(
                svg,
                r#"<line class="grid" x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                WIDTH - RIGHT,
                LEFT - 4.0,
                y + 3.0,
                number(v),
            );
        }
        let _ = write!(
            svg,
            r#"<text class="unit" x="4" y="14">{}</text>"#,
            escape(&self.unit)
        );
        if let (Some(first), Some(last)) = (self.minutes.first(), self.minutes.last()) {
            let y = HEIGHT - 6.0;
            let _ = write!(
                svg,
                r#"<text class="tick" x="{LEFT}" y="{y}">{}</text>"#,
                self.x_label(*first)
            );
            if last != first {
                let _ = write!(
                    svg,
                    r#"<text class="tick" x="{:.1}" y="{y}" text-anchor="end">{}</text>"#,
                    WIDTH - RIGHT,
                    self.x_label(*last)
                );
            }
        } else {
            let _ = write!(
                svg,
                r#"<text class="empty" x="{:.1}" y="{:.1}" text-anchor="middle">no data yet</text>"#,
                WIDTH / 2.0,
                HEIGHT / 2.0
            );
        }
        let mut legend_x = LEFT;
        for s in &self.series {
            let label = escape(&s.label);
            let _ = write!(
                svg,
                r#"<g class="legend {}"><line x1="{legend_x:.1}" y1="10" x2="{:.1}" y2="10"/><text x="{:.1}" y="14">{label}</text></g>"#,
                s.class,
                legend_x + 14.0,
                legend_x + 18.0
            );
            legend_x += 30.0 + 7.0 * s.label.chars().count() as f64;
        }
        for s in &self.series {
            let _ = write!(svg, r#"<g class="series {}">"#, s.class);
            for segment in self.segments(s, &scale) {
                if segment.len() > 1 {
                    let points: Vec<String> = segment
                        .iter()
                        .map(|(x, y)| format!("{x:.1},{y:.1}"))
                        .collect();
                    let _ = write!(svg, r#"<polyline points="{}"/>"#, points.join(" "));
                }
            }
            for (minute, value) in self.minutes.iter().zip(&s.values) {
                if let Some(v) = value {
                    let _ = write!(
                        svg,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" data-value="{}"><title>{} {}: {} {}</title></circle>"#,
                        scale.x(*minute),
                        scale.y(*v),
                        number(*v),
                        self.x_label(*minute),
                        escape(&s.label),
                        number(*v),
                        escape(&self.unit)
                    );
                }
            }
            svg.push_str("</g>");
        }
        svg.push_str("</svg>");
        svg
    }

    /// Runs of consecutive present values of a series, as SVG points.
    fn segments(&self, s: &Series, scale: &Scale) -> Vec<Vec<(f64, f64)>> {
        let mut out: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
        for (minute, value) in self.minutes.iter().zip(&s.values) {
            match value {
                Some(v) => {
                    if let Some(current) = out.last_mut() {
                        current.push((scale.x(*minute), scale.y(*v)));
                    }
                }
                None => {
                    if out.last().is_some_and(|c| !c.is_empty()) {
                        out.push(Vec::new());
                    }
                }
            }
        }
        out.retain(|c| !c.is_empty());
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn chart(values: Vec<Option<f64>>) -> LineChart {
        LineChart {
            title: "Latency".into(),
            unit: "ms".into(),
            minutes: (0..values.len() as i64).map(|i| i * 60_000).collect(),
            x_axis: XAxis::Clock,
            series: vec![Series {
                label: "mean".into(),
                class: "s1",
                values,
            }],
        }
    }

    #[test]
    fn numbers_keep_four_significant_digits() {
        assert_eq!(number(0.0), "0");
        assert_eq!(number(750.0), "750");
        assert_eq!(number(1.5), "1.5");
        assert_eq!(number(16.0), "16");
        assert_eq!(number(0.0125), "0.0125");
        assert_eq!(number(12345.0), "12345");
        assert_eq!(number(3.93e-10), "3.93e-10");
    }

    #[test]
    fn nice_ceilings() {
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(-3.0), 1.0);
        assert_eq!(nice_ceiling(1.0), 1.0);
        assert_eq!(nice_ceiling(1.3), 2.0);
        assert_eq!(nice_ceiling(2.2), 2.5);
        assert_eq!(nice_ceiling(4.0), 5.0);
        assert_eq!(nice_ceiling(7.0), 10.0);
        assert_eq!(nice_ceiling(0.031), 0.05);
        assert_eq!(nice_ceiling(120.0), 200.0);
    }

    #[test]
    fn points_map_onto_the_plot_area() {
        // Values 0, 5, 10 over three minutes: axis 0..10, first point bottom-left, last
        // top-right, middle one in the centre of the plot area.
        let c = chart(vec![Some(0.0), Some(5.0), Some(10.0)]);
        let s = Scale::of(&c);
        assert_eq!(s.y_max(), 10.0);
        assert_eq!(s.x(0), LEFT);
        assert_eq!(s.x(120_000), WIDTH - RIGHT);
        assert_eq!(s.x(60_000), LEFT + (WIDTH - LEFT - RIGHT) / 2.0);
        assert_eq!(s.y(0.0), HEIGHT - BOTTOM);
        assert_eq!(s.y(10.0), TOP);
        assert_eq!(s.y(5.0), TOP + (HEIGHT - TOP - BOTTOM) / 2.0);
        let svg = c.to_svg();
        assert!(
            svg.contains(r#"<polyline points="56.0,176.0 342.0,100.0 628.0,24.0"/>"#),
            "{svg}"
        );
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(svg.contains(r#"data-points="3""#));
    }

    #[test]
    fn a_single_minute_is_a_dot_in_the_middle() {
        let c = chart(vec![Some(4.0)]);
        let svg = c.to_svg();
        assert!(!svg.contains("<polyline"), "{svg}");
        // y axis 0..5: 4 sits at 80 % of the height.
        let y = TOP + 0.2 * (HEIGHT - TOP - BOTTOM);
        assert!(
            svg.contains(&format!(r#"<circle cx="342.0" cy="{y:.1}""#)),
            "{svg}"
        );
    }

    #[test]
    fn missing_values_break_the_line() {
        let c = chart(vec![Some(1.0), Some(2.0), None, Some(2.0), Some(1.0)]);
        let svg = c.to_svg();
        assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
        assert_eq!(svg.matches("<circle").count(), 4);
    }

    #[test]
    fn an_empty_chart_says_so() {
        let svg = chart(vec![]).to_svg();
        assert!(svg.contains("no data yet"));
        assert!(svg.contains(r#"data-points="0""#));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
    }

    #[test]
    fn text_is_escaped() {
        let mut c = chart(vec![Some(1.0)]);
        c.title = "<script>alert(1)</script>".into();
        c.series[0].label = "a\"b&c".into();
        let svg = c.to_svg();
        assert!(!svg.contains("<script>"), "{svg}");
        assert!(svg.contains("&lt;script&gt;"));
        assert!(svg.contains("a&quot;b&amp;c"));
    }
}
