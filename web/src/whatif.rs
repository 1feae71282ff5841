//! What-if planning on the dashboard (SIMULATED results): the runs page (list and form),
//! a run's page, and the plot of a run, cost per second, SLO attainment and accuracy served
//! over the simulated time, one line per policy. One drawing for the CLI's
//! `infaas sim --plot` file, the API's `GET /v1/whatif/{id}/plot.svg` and the run page.

use askama::Template;

use crate::chart::{LineChart, Series, XAxis, HEIGHT, WIDTH};
use crate::dashboard::Layout;

/// A run in the list, and the head of its page.
#[derive(Debug, Clone, Default)]
pub struct WhatIfRow {
    pub id: String,
    /// `queued`, `running`, `succeeded` or `failed`.
    pub status: String,
    /// What the trace is (a generator spec, recorded traffic, an uploaded CSV).
    pub trace: String,
    pub queries: u64,
    /// Policies, comma-separated.
    pub policies: String,
    /// Queries simulated over all policies, in whole percent.
    pub progress_pct: u32,
    pub error: Option<String>,
    pub created: String,
}

impl WhatIfRow {
    /// Whether the run has ended (succeeded or failed).
    pub fn settled(&self) -> bool {
        self.status == "succeeded" || self.status == "failed"
    }
}

/// A policy offered in the form.
#[derive(Debug, Clone, Default)]
pub struct PolicyChoice {
    pub name: String,
    pub checked: bool,
}

/// What the run form holds (kept when a submission is refused).
#[derive(Debug, Clone, Default)]
pub struct WhatIfForm {
    /// `recorded`, `generate` or `csv`.
    pub source: String,
    /// Recorded traffic of this application (empty: all).
    pub app: String,
    pub minutes: String,
    pub spec: String,
    pub csv: String,
    pub cpu_workers: String,
    pub cpu_cores: String,
    pub gpu_workers: String,
    /// Most CPU workers the worker autoscaler may run (empty: as many as the cluster starts with).
    pub max_cpu_workers: String,
}

impl WhatIfForm {
    /// Whether the trace comes from `source`.
    pub fn is(&self, source: &str) -> bool {
        self.source == source
    }
}

/// The tenant's what-if runs and the form that starts one.
#[derive(Template)]
#[template(path = "dashboard/whatif.html")]
pub struct WhatIfPage {
    pub layout: Layout,
    pub runs: Vec<WhatIfRow>,
    pub form: WhatIfForm,
    pub policies: Vec<PolicyChoice>,
    /// The tenant's applications, offered for recorded traffic.
    pub apps: Vec<String>,
    /// Minutes of traffic the platform keeps.
    pub horizon_minutes: u64,
    /// Why the last submission was refused.
    pub error: Option<String>,
}

impl WhatIfPage {
    /// Whether a run is still under way (the list refreshes itself).
    pub fn live(&self) -> bool {
        self.runs.iter().any(|r| !r.settled())
    }
}

/// How far one policy's simulation has got.
#[derive(Debug, Clone, Default)]
pub struct ProgressRow {
    pub policy: String,
    pub done: u64,
    pub total: u64,
    pub pct: u32,
}

/// A policy's totals (SIMULATED).
#[derive(Debug, Clone, Default)]
pub struct PolicyRow {
    pub policy: String,
    pub queries: u64,
    pub cost: String,
    pub attainment: String,
    pub p99: String,
    pub accuracy: String,
    pub dropped: u64,
    pub actions: u64,
    /// Its applications' totals.
    pub apps: Vec<AppRow>,
}

/// An application's totals under one policy (SIMULATED).
#[derive(Debug, Clone, Default)]
pub struct AppRow {
    pub app: String,
    pub queries: u64,
    pub attainment: String,
    pub p99: String,
    pub accuracy: String,
    pub dropped: u64,
}

/// One run: its trace and cluster, progress per policy, and once it has succeeded a table
/// per policy and the plot.
#[derive(Template)]
#[template(path = "dashboard/whatif_run.html")]
pub struct WhatIfRunPage {
    pub layout: Layout,
    pub run: WhatIfRow,
    pub apps: String,
    pub duration: String,
    pub cluster: String,
    pub progress: Vec<ProgressRow>,
    pub results: Vec<PolicyRow>,
    /// Cost, attainment and accuracy charts, empty until the run has succeeded.
    pub charts: Vec<Figure>,
}

/// A chart with its caption.
#[derive(Debug, Clone, Default)]
pub struct Figure {
    pub caption: String,
    /// The chart as SVG, built (and escaped) by [`crate::chart`].
    pub svg: String,
}

/// One policy's per-second figures (index = simulated second).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyLines {
    pub policy: String,
    /// Price of what the policy held in each second, $/s.
    pub cost_per_s: Vec<f64>,
    /// Fraction of the second's answered queries within their SLO (`None`: none answered).
    pub slo_attainment: Vec<Option<f64>>,
    /// Mean accuracy of the variants that answered in the second.
    pub mean_accuracy: Vec<Option<f64>>,
}

/// Line classes of the policies, in order (dashboard.css colours them).
const CLASSES: [&str; 4] = ["s1", "s2", "s3", "slo"];

/// The three charts: cost per second, SLO attainment, accuracy served.
pub fn charts(policies: &[PolicyLines]) -> [LineChart; 3] {
    let seconds = policies
        .iter()
        .map(|p| p.cost_per_s.len().max(p.slo_attainment.len()))
        .max()
        .unwrap_or(0);
    let chart =
        |title: &str, unit: &str, value: &dyn Fn(&PolicyLines, usize) -> Option<f64>| LineChart {
            title: title.into(),
            unit: unit.into(),
            minutes: (0..seconds as i64).map(|s| s * 1000).collect(),
            x_axis: XAxis::Elapsed,
            series: policies
                .iter()
                .enumerate()
                .map(|(i, p)| Series {
                    label: p.policy.clone(),
                    class: CLASSES[i % CLASSES.len()],
                    values: (0..seconds).map(|s| value(p, s)).collect(),
                })
                .collect(),
        };
    [
        chart("SIMULATED cost per second", "$/s", &|p, s| {
            p.cost_per_s.get(s).copied()
        }),
        chart("SIMULATED SLO attainment", "fraction", &|p, s| {
            p.slo_attainment.get(s).copied().flatten()
        }),
        chart("SIMULATED accuracy served", "accuracy", &|p, s| {
            p.mean_accuracy.get(s).copied().flatten()
        }),
    ]
}

/// The three charts stacked as one standalone SVG document, with the dashboard's
/// stylesheet inside (so that it renders alone, opened from a file or a URL).
pub fn plot_svg(policies: &[PolicyLines]) -> String {
    let charts = charts(policies).map(|c| c.to_svg());
    let gap = 10.0;
    let total = charts.len() as f64 * (HEIGHT + gap);
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{total}" viewBox="0 0 {WIDTH} {total}"><style>{}</style>"#,
        crate::DASHBOARD_CSS
    );
    for (i, c) in charts.iter().enumerate() {
        let y = i as f64 * (HEIGHT + gap);
        svg.push_str(&c.replacen(
            "<svg ",
            &format!(r#"<svg x="0" y="{y}" width="{WIDTH}" height="{HEIGHT}" "#),
            1,
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn lines(policy: &str, seconds: usize, cost: f64) -> PolicyLines {
        PolicyLines {
            policy: policy.into(),
            cost_per_s: vec![cost; seconds],
            slo_attainment: (0..seconds).map(|s| (s > 0).then_some(0.9)).collect(),
            mean_accuracy: vec![Some(0.8); seconds],
        }
    }

    #[test]
    fn one_line_per_policy_in_each_chart() {
        let p = [lines("static_peak", 3, 0.5), lines("<b>", 5, 0.1)];
        let [cost, attainment, accuracy] = charts(&p);
        for c in [&cost, &attainment, &accuracy] {
            assert_eq!(c.series.len(), 2);
            // The longer run sets the x axis; the shorter one has gaps after its end.
            assert_eq!(c.minutes.len(), 5);
            assert_eq!(c.series[0].class, "s1");
            assert_eq!(c.series[1].class, "s2");
        }
        assert_eq!(cost.series[0].values[2], Some(0.5));
        assert_eq!(cost.series[0].values[3], None);
        // A second without answers is a gap, not a zero.
        assert_eq!(attainment.series[1].values[0], None);
        assert_eq!(attainment.series[1].values[1], Some(0.9));
        let svg = plot_svg(&p);
        assert!(svg.starts_with("<svg xmlns="), "{svg}");
        assert!(svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches(r#"<svg x="0""#).count(), 3);
        assert!(svg.contains("SIMULATED cost per second"));
        assert!(!svg.contains("<b>"), "labels are escaped");
    }

    fn layout() -> Layout {
        Layout {
            tenant: "acme".into(),
            csrf: "tok3n".into(),
            active: "whatif",
        }
    }

    fn run(status: &str) -> WhatIfRow {
        WhatIfRow {
            id: "r1".into(),
            status: status.into(),
            trace: "poisson:rate=5,duration=10,app=<b>".into(),
            queries: 50,
            policies: "static_peak".into(),
            progress_pct: 40,
            error: None,
            created: "now".into(),
        }
    }

    #[test]
    fn the_runs_page_refreshes_while_a_run_is_under_way_and_keeps_the_form() {
        let mut page = WhatIfPage {
            layout: layout(),
            runs: vec![run("running")],
            form: WhatIfForm {
                source: "generate".into(),
                spec: "poisson:rate=5\"><script>".into(),
                ..WhatIfForm::default()
            },
            policies: vec![
                PolicyChoice {
                    name: "static_peak".into(),
                    checked: true,
                },
                PolicyChoice {
                    name: "horizontal".into(),
                    checked: false,
                },
            ],
            apps: vec!["digits".into()],
            horizon_minutes: 60,
            error: Some("bad <spec>".into()),
        };
        let html = page.render().unwrap();
        assert!(html.contains(r#"data-live-src="/ui/whatif""#), "{html}");
        assert!(html.contains(r#"<progress max="100" value="40">"#));
        assert!(html.contains(r#"id="source-generate" checked"#), "{html}");
        assert!(html.contains(r#"id="policy-static_peak" checked"#));
        assert!(html.contains(r#"id="policy-horizontal">"#));
        assert!(!html.contains("<script>") && !html.contains("<b>") && !html.contains("<spec>"));
        // The token is the first field of the multipart form.
        let form = &html[html.find(r#"id="whatif-form""#).unwrap()..];
        let first_input = &form[form.find("<input").unwrap()..];
        assert!(first_input.starts_with(r#"<input type="hidden" name="csrf" value="tok3n">"#));
        page.runs = vec![run("succeeded"), run("failed")];
        assert!(!page.render().unwrap().contains("data-live="));
    }

    #[test]
    fn a_run_page_shows_progress_then_a_table_per_policy_and_the_charts() {
        let mut page = WhatIfRunPage {
            layout: layout(),
            run: run("queued"),
            apps: "digits".into(),
            duration: "10.0 s".into(),
            cluster: "1 CPU + 0 GPU workers".into(),
            progress: vec![ProgressRow {
                policy: "static_peak".into(),
                done: 20,
                total: 50,
                pct: 40,
            }],
            results: vec![],
            charts: vec![],
        };
        let html = page.render().unwrap();
        assert!(html.contains(r#"data-live-src="/ui/whatif/r1""#), "{html}");
        assert!(html.contains("20 / 50"));
        assert!(!html.contains("run-results"));
        page.run.status = "succeeded".into();
        page.results = vec![PolicyRow {
            policy: "static_peak".into(),
            queries: 50,
            cost: "$0.01".into(),
            attainment: "99.0 %".into(),
            apps: vec![AppRow {
                app: "digits".into(),
                queries: 50,
                ..AppRow::default()
            }],
            ..PolicyRow::default()
        }];
        page.charts = charts(&[lines("static_peak", 3, 0.5)])
            .iter()
            .map(|c| Figure {
                caption: c.title.clone(),
                svg: c.to_svg(),
            })
            .collect();
        let html = page.render().unwrap();
        assert!(!html.contains("data-live="), "{html}");
        assert!(html.contains(r#"<tr id="result-static_peak"><td>static_peak</td><td>50</td><td>$0.01</td><td>99.0 %</td>"#), "{html}");
        assert!(html.contains(r#"<table id="apps-static_peak">"#));
        assert_eq!(html.matches(r#"<svg class="chart""#).count(), 3);
        assert!(
            html.contains("<figcaption>SIMULATED SLO attainment, a line per policy</figcaption>")
        );
        // Deleting needs the session's token.
        assert!(html.contains(r#"action="/ui/whatif/r1/delete""#));
    }

    #[test]
    fn no_policy_is_an_empty_plot() {
        let svg = plot_svg(&[]);
        assert_eq!(svg.matches("no data yet").count(), 3, "{svg}");
    }
}
