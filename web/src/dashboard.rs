//! Pages of the browser dashboard under `/ui`. Each page is a plain view struct whose text
//! fields are escaped when rendered; charts arrive as SVG already built (and escaped) by
//! [`crate::chart`].

use crate::chart::{LineChart, Series, XAxis};
use askama::Template;

/// What every signed-in page shows around its content.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    /// Name of the signed-in tenant.
    pub tenant: String,
    /// Anti-forgery token of the session, for the forms of the page.
    pub csrf: String,
    /// The navigation entry to highlight (`apps`, `models`, `workers`, `scaling`, `jobs`).
    pub active: &'static str,
}

impl Layout {
    /// Whether `entry` is the highlighted navigation entry.
    pub fn is(&self, entry: &str) -> bool {
        self.active == entry
    }
}

/// The sign-in form.
#[derive(Template)]
#[template(path = "dashboard/login.html")]
pub struct LoginPage {
    /// Why the last attempt failed.
    pub error: Option<String>,
    /// Anti-forgery token, also set in a cookie (double submit).
    pub csrf: String,
}

/// An error page (unknown application or model, forbidden request, ...).
#[derive(Template)]
#[template(path = "dashboard/error.html")]
pub struct ErrorPage {
    pub status: u16,
    pub title: String,
    pub message: String,
}

/// An application's figures over the report window.
#[derive(Debug, Clone, Default)]
pub struct AppSummary {
    pub name: String,
    pub models: usize,
    pub requests: i64,
    /// The latency SLOs queries asked for (`2 ms – 10 ms`, `5 ms` or `none`).
    pub slos: String,
    /// Fraction of queries that met their SLO.
    pub attainment: String,
    /// Accuracy of the variants that answered, weighted by queries.
    pub accuracy: String,
    /// Cost over the window scaled to an hour.
    pub cost_per_hour: String,
}

/// The tenant's applications.
#[derive(Template)]
#[template(path = "dashboard/apps.html")]
pub struct AppsPage {
    pub layout: Layout,
    pub window_minutes: i64,
    pub apps: Vec<AppSummary>,
    /// Cost of all applications per minute (SVG).
    pub cost_chart: String,
}

/// Usage of one variant over the report window.
#[derive(Debug, Clone, Default)]
pub struct VariantUsage {
    pub model: String,
    pub variant: String,
    pub hardware: String,
    pub requests: i64,
    pub attainment: String,
    pub mean_latency: String,
    pub max_latency: String,
    pub cost: String,
}

/// The "try it" form's fields, as last submitted.
#[derive(Debug, Clone, Default)]
pub struct TryForm {
    /// JSON array of input tensors.
    pub inputs: String,
    pub latency_ms: String,
    pub min_accuracy: String,
}

/// The answer to a query sent from the "try it" form.
#[derive(Debug, Clone, Default)]
pub struct TryResult {
    pub model: String,
    pub variant: String,
    pub worker: String,
    pub hardware: String,
    pub accuracy: String,
    pub reason: String,
    pub predicted: String,
    pub measured: String,
    pub cost: String,
    /// Output tensors as JSON, one line each.
    pub outputs: String,
}

/// One application: figures, charts, usage by variant, models and the "try it" form.
#[derive(Template)]
#[template(path = "dashboard/app.html")]
pub struct AppPage {
    pub layout: Layout,
    pub window_minutes: i64,
    pub summary: AppSummary,
    pub latency_chart: String,
    pub throughput_chart: String,
    pub cost_chart: String,
    /// Observed against forecast arrival rates, with the forecasts' errors.
    pub forecast: ForecastPanel,
    pub variants: Vec<VariantUsage>,
    pub models: Vec<ModelRow>,
    pub form: TryForm,
    pub result: Option<TryResult>,
    /// Why the last query failed.
    pub error: Option<String>,
}

/// The forecast of an application's arrival rate on its page.
#[derive(Debug, Clone, Default)]
pub struct ForecastPanel {
    /// Observed, predicted 1 s ahead and predicted 10 s ahead, per second (SVG).
    pub chart: String,
    /// The forecasting model in use.
    pub model: String,
    /// MAPE of the 1 s and 10 s predictions (`–` before there is one).
    pub mape_1s: String,
    pub mape_10s: String,
    /// Highest rate forecast over the next ten seconds, queries/s.
    pub max_next: String,
}

/// Seconds of the forecast the application page shows (the last five minutes and the ten
/// seconds to come).
pub const FORECAST_CHART_S: i64 = 300;

/// The forecast panel of an application page: `observed`, `predicted_1s` and
/// `predicted_10s` are `(second since the Unix epoch, queries/s)` in ascending seconds; the
/// errors are fractions.
pub fn forecast_panel(
    model: &str,
    observed: &[(i64, f64)],
    predicted_1s: &[(i64, f64)],
    predicted_10s: &[(i64, f64)],
    max_next: f64,
    mape_1s: Option<f64>,
    mape_10s: Option<f64>,
) -> ForecastPanel {
    let last = observed
        .iter()
        .chain(predicted_1s)
        .chain(predicted_10s)
        .map(|p| p.0)
        .max();
    let (xs, lines) = match last {
        None => (Vec::new(), [Vec::new(), Vec::new(), Vec::new()]),
        Some(last) => {
            let first = observed
                .iter()
                .chain(predicted_1s)
                .chain(predicted_10s)
                .map(|p| p.0)
                .min()
                .unwrap_or(last)
                .max(last - FORECAST_CHART_S + 1);
            let at = |points: &[(i64, f64)], s: i64| {
                points
                    .binary_search_by_key(&s, |p| p.0)
                    .ok()
                    .map(|i| points[i].1)
            };
            let xs: Vec<i64> = (first..=last).collect();
            let lines = [observed, predicted_1s, predicted_10s]
                .map(|points| xs.iter().map(|&s| at(points, s)).collect::<Vec<_>>());
            (xs.iter().map(|s| s * 1000).collect(), lines)
        }
    };
    let [o, p1, p10] = lines;
    let chart = LineChart {
        title: "Arrival rate: observed and forecast".into(),
        unit: "req/s".into(),
        minutes: xs,
        x_axis: XAxis::Clock,
        series: vec![
            Series {
                label: "observed".into(),
                class: "s1",
                values: o,
            },
            Series {
                label: "forecast 1 s ahead".into(),
                class: "s2",
                values: p1,
            },
            Series {
                label: "forecast 10 s ahead".into(),
                class: "s3",
                values: p10,
            },
        ],
    };
    let pct = |m: Option<f64>| m.map_or_else(|| "–".to_string(), |m| format!("{:.1}%", m * 100.0));
    ForecastPanel {
        chart: chart.to_svg(),
        model: model.to_string(),
        mape_1s: pct(mape_1s),
        mape_10s: pct(mape_10s),
        max_next: crate::chart::number(max_next),
    }
}

/// A model in a list.
#[derive(Debug, Clone, Default)]
pub struct ModelRow {
    pub name: String,
    pub app: String,
    pub status: String,
    /// Progress of the registration in whole percent.
    pub progress_pct: u32,
    pub detail: String,
    pub error: Option<String>,
    pub variants: usize,
    /// Best validation accuracy of its variants.
    pub accuracy: String,
}

impl ModelRow {
    /// Whether the registration's background work has finished (ready or failed).
    pub fn settled(&self) -> bool {
        self.status == "ready" || self.status == "failed"
    }
}

/// The tenant's models.
#[derive(Template)]
#[template(path = "dashboard/models.html")]
pub struct ModelsPage {
    pub layout: Layout,
    pub models: Vec<ModelRow>,
}

impl ModelsPage {
    /// Whether some registration is still in progress (the list refreshes itself).
    pub fn live(&self) -> bool {
        self.models.iter().any(|m| !m.settled())
    }
}

/// A loaded copy of a variant.
#[derive(Debug, Clone, Default)]
pub struct InstanceRef {
    pub worker: String,
    /// `active`, `overloaded`, `interfered` or `inactive`.
    pub state: String,
}

/// Profiled latency at one batch size.
#[derive(Debug, Clone, Default)]
pub struct LatencyCell {
    pub batch: usize,
    pub mean: String,
    pub p99: String,
}

/// A variant with its profile and instances.
#[derive(Debug, Clone, Default)]
pub struct VariantRow {
    pub name: String,
    pub precision: String,
    pub hardware: String,
    pub threads: usize,
    pub max_batch: usize,
    pub status: String,
    pub accuracy: String,
    pub load: String,
    pub memory: String,
    pub latency: Vec<LatencyCell>,
    pub instances: Vec<InstanceRef>,
}

/// One model: registration progress, signature and variants.
#[derive(Template)]
#[template(path = "dashboard/model.html")]
pub struct ModelPage {
    pub layout: Layout,
    pub model: ModelRow,
    pub size: String,
    pub sha256: String,
    /// Inputs and outputs, one line each.
    pub signature: Vec<String>,
    pub created: String,
    /// The variants kept.
    pub variants: Vec<VariantRow>,
    /// The variants the registration pruned, one line per file and reason (e.g. `int8: 14
    /// variants, file removed: accuracy 0.379 <= 1.000 of opt, not faster at any batch`).
    pub pruned: Vec<String>,
}

/// The registration form.
#[derive(Template)]
#[template(path = "dashboard/register.html")]
pub struct RegisterPage {
    pub layout: Layout,
    pub error: Option<String>,
    pub name: String,
    pub app: String,
}

/// A variant loaded on a worker, with its live figures.
#[derive(Debug, Clone, Default)]
pub struct InstanceRow {
    pub variant: String,
    pub state: String,
    pub threads: usize,
    pub max_batch: usize,
    pub queue_rows: usize,
    pub qps: String,
    pub requests: u64,
    /// Latency, call to answer (the queue included).
    pub p50: String,
    pub p99: String,
    /// The session's run time per batch.
    pub run_p50: String,
    pub run_p99: String,
}

/// A worker with its hardware, utilisation and the tenant's instances.
#[derive(Debug, Clone, Default)]
pub struct WorkerRow {
    pub name: String,
    pub id: String,
    pub alive: bool,
    pub hardware: String,
    pub cores: usize,
    pub threads: String,
    /// Threads of busy instances over cores, e.g. `2 / 2`.
    pub busy_threads: String,
    pub memory: String,
    pub utilisation: String,
    pub heartbeat: String,
    pub instances: Vec<InstanceRow>,
    pub loading: Vec<LoadingRow>,
}

/// A variant being loaded on a worker for queries that wait for it.
#[derive(Debug, Clone, Default)]
pub struct LoadingRow {
    pub variant: String,
    /// How long since the load started, e.g. `1.2 s`.
    pub since: String,
    pub waiting_rows: usize,
}

/// A controller replica on the cluster's database.
#[derive(Debug, Clone, Default)]
pub struct ReplicaRow {
    pub id: String,
    pub address: String,
    /// It holds the leader lease (runs autoscaling, the tuner and the overload manager).
    pub leader: bool,
    /// It answered this page.
    pub this: bool,
    /// Since it started, e.g. `1:05`.
    pub up: String,
}

/// Workers, and the controller replicas with their leader.
#[derive(Template)]
#[template(path = "dashboard/workers.html")]
pub struct WorkersPage {
    pub layout: Layout,
    pub workers: Vec<WorkerRow>,
    pub replicas: Vec<ReplicaRow>,
    /// The lease's fencing token (raised at every change of leader).
    pub lease_token: i64,
}

/// A scaling decision.
#[derive(Debug, Clone, Default)]
pub struct ScalingRow {
    pub at: String,
    pub app: String,
    pub variant: String,
    pub worker: String,
    pub action: String,
    pub reason: String,
    pub cost_before: String,
    pub cost_after: String,
}

/// Scaling events.
#[derive(Template)]
#[template(path = "dashboard/scaling.html")]
pub struct ScalingPage {
    pub layout: Layout,
    pub events: Vec<ScalingRow>,
}

/// An offline job and its progress.
#[derive(Debug, Clone, Default)]
pub struct JobRow {
    pub id: String,
    pub target: String,
    pub state: String,
    pub items_done: i64,
    pub items_total: i64,
    /// Progress in whole percent (0 when the total is not known yet).
    pub progress_pct: u32,
    pub error: Option<String>,
    pub created: String,
}

/// What the job form holds (kept when a submission is refused).
#[derive(Debug, Clone, Default)]
pub struct JobForm {
    pub app: String,
    pub model: String,
    pub min_accuracy: String,
    pub output_path: String,
}

/// Offline jobs, and the form that submits one.
#[derive(Template)]
#[template(path = "dashboard/jobs.html")]
pub struct JobsPage {
    pub layout: Layout,
    pub jobs: Vec<JobRow>,
    pub form: JobForm,
    /// Why the last submission was refused.
    pub error: Option<String>,
    /// The tenant's applications and models, offered in the form.
    pub apps: Vec<String>,
    pub models: Vec<String>,
}

impl JobsPage {
    /// Whether a job is still running (the list refreshes itself).
    pub fn live(&self) -> bool {
        self.jobs
            .iter()
            .any(|j| !matches!(j.state.as_str(), "succeeded" | "failed" | "cancelled"))
    }
}

/// Whole percent of `done` out of `total` (0 without a total), at most 100.
pub fn percent_of(done: i64, total: i64) -> u32 {
    if total <= 0 {
        return 0;
    }
    ((done.max(0) as f64 / total as f64) * 100.0)
        .floor()
        .clamp(0.0, 100.0) as u32
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn layout() -> Layout {
        Layout {
            tenant: "acme".into(),
            csrf: "tok3n".into(),
            active: "models",
        }
    }

    #[test]
    fn pages_escape_user_text() {
        let page = ModelsPage {
            layout: Layout {
                tenant: "<b>evil</b>".into(),
                ..layout()
            },
            models: vec![ModelRow {
                name: "m1".into(),
                app: "digits".into(),
                status: "failed".into(),
                error: Some("<img src=x onerror=alert(1)>".into()),
                ..Default::default()
            }],
        };
        let html = page.render().unwrap();
        assert!(!html.contains("<img src=x"), "{html}");
        assert!(!html.contains("<b>evil"), "{html}");
        assert!(html.contains("&#60;img src=x") || html.contains("&lt;img src=x"));
    }

    #[test]
    fn workers_show_the_loads_queries_wait_for() {
        let worker = WorkerRow {
            name: "w1".into(),
            ..Default::default()
        };
        let mut page = WorkersPage {
            layout: layout(),
            workers: vec![worker.clone()],
            replicas: Vec::new(),
            lease_token: 0,
        };
        let html = page.render().unwrap();
        assert!(!html.contains("Loading for queries"), "{html}");
        page.workers[0].loading = vec![LoadingRow {
            variant: "m.int8.cpu.t1.b8".into(),
            since: "1.5 s".into(),
            waiting_rows: 12,
        }];
        let html = page.render().unwrap();
        assert!(html.contains("Loading for queries"), "{html}");
        assert!(
            html.contains("<tr><td>m.int8.cpu.t1.b8</td><td>1.5 s ago</td><td>12</td></tr>"),
            "{html}"
        );
    }

    #[test]
    fn workers_page_names_the_leading_replica() {
        let row = |id: &str, leader: bool, this: bool| ReplicaRow {
            id: id.into(),
            address: format!("{id}:8080"),
            leader,
            this,
            up: "0:42".into(),
        };
        let page = WorkersPage {
            layout: layout(),
            workers: Vec::new(),
            replicas: vec![row("r1", false, true), row("r2", true, false)],
            lease_token: 7,
        };
        let html = page.render().unwrap();
        assert!(
            html.contains(
                "<tr><td>r1 (this page)</td><td>r1:8080</td><td>follower</td><td>0:42</td></tr>"
            ),
            "{html}"
        );
        assert!(
            html.contains("<tr><td>r2</td><td>r2:8080</td><td class=\"state ready\">leader</td><td>0:42</td></tr>"),
            "{html}"
        );
        assert!(html.contains("lease token 7"), "{html}");
    }

    #[test]
    fn every_form_carries_the_session_token() {
        let page = RegisterPage {
            layout: layout(),
            error: None,
            name: String::new(),
            app: String::new(),
        };
        let html = page.render().unwrap();
        // The registration form and the sign-out form.
        assert_eq!(html.matches("<form").count(), 2, "{html}");
        assert_eq!(
            html.matches(r#"<input type="hidden" name="csrf" value="tok3n">"#)
                .count(),
            2,
            "{html}"
        );
        // The token is the first field of the multipart form: the server checks it before
        // reading the files.
        let form = &html[html.find("enctype=\"multipart/form-data\"").unwrap()..];
        let first_input = &form[form.find("<input").unwrap()..];
        assert!(first_input.starts_with(r#"<input type="hidden" name="csrf""#));
    }

    #[test]
    fn model_progress_refreshes_until_settled() {
        let mut page = ModelPage {
            layout: layout(),
            model: ModelRow {
                name: "m".into(),
                app: "a".into(),
                status: "profiling".into(),
                progress_pct: 42,
                detail: "profiling m.int8.cpu.t1".into(),
                ..Default::default()
            },
            size: "1 KiB".into(),
            sha256: "ab".into(),
            signature: vec![],
            created: "now".into(),
            variants: vec![],
            pruned: vec![],
        };
        let html = page.render().unwrap();
        assert!(html.contains(r#"data-live="#), "{html}");
        assert!(!html.contains(r#"id="pruned""#), "{html}");
        assert!(
            html.contains(r#"<progress max="100" value="42">"#),
            "{html}"
        );
        page.model.status = "ready".into();
        page.model.progress_pct = 100;
        let html = page.render().unwrap();
        assert!(!html.contains(r#"data-live="#), "{html}");
        assert!(html.contains(r#"id="model-status" class="status ready">ready<"#));
        // What the registration pruned is listed under the table of the variants kept.
        page.pruned = vec![
            "int8: 2 variants, file removed: accuracy 0.379 <= 1.000 of opt, \
             not faster at any batch"
                .into(),
        ];
        let html = page.render().unwrap();
        assert!(
            html.contains(
                "<p id=\"pruned\">Pruned at registration (not served): \
                 <span>int8: 2 variants, file removed: accuracy 0.379 &#60;= 1.000 of opt, \
                 not faster at any batch</span></p>"
            ),
            "{html}"
        );
    }

    #[test]
    fn charts_are_inserted_as_markup() {
        let page = AppPage {
            layout: layout(),
            window_minutes: 60,
            summary: AppSummary {
                name: "digits".into(),
                ..Default::default()
            },
            latency_chart: "<svg id=\"l\"></svg>".into(),
            throughput_chart: String::new(),
            cost_chart: String::new(),
            forecast: forecast_panel(
                "ewma(a=0.5)",
                &[(100, 4.0), (101, 6.0)],
                &[(101, 4.0), (102, 5.0)],
                &[(110, 5.0), (111, 5.0)],
                5.0,
                Some(0.333),
                None,
            ),
            variants: vec![],
            models: vec![],
            form: TryForm {
                inputs: "[{\"name\": \"input\"}]".into(),
                ..Default::default()
            },
            result: None,
            error: None,
        };
        let html = page.render().unwrap();
        assert!(html.contains("<svg id=\"l\"></svg>"));
        // The forecast: its chart (seconds 100-111: 2 observed, 2 + 2 predicted points) and
        // errors.
        assert!(html.contains(r#"data-points="6""#), "{html}");
        assert!(html.contains(r#"id="forecast-mape-1s">33.3%<"#), "{html}");
        assert!(html.contains(r#"id="forecast-mape-10s">–<"#), "{html}");
        assert!(html.contains("ewma(a=0.5)"), "{html}");
        // The form's JSON is text, escaped inside the textarea.
        assert!(html.contains("&#34;name&#34;") || html.contains("&quot;name&quot;"));
    }

    #[test]
    fn percentages() {
        assert_eq!(percent_of(0, 0), 0);
        assert_eq!(percent_of(5, 10), 50);
        assert_eq!(percent_of(11, 10), 100);
        assert_eq!(percent_of(2, 3), 66);
    }
}
