//! Pipelines on the dashboard: the list with the registration form, and one pipeline's page,
//! its DAG drawn as inline SVG on the server (no script, no library), a table of the nodes'
//! live figures, the end-to-end p99 against the SLO, SLO attainment per second, accuracy
//! served, load and drops and the configuration's cost per second on one time axis, and the
//! applied plan.
//!
//! The drawing: nodes in columns by depth (the longest path from a root), edges from each
//! parent to its child with an arrow head; the edges into a switch node (one with `when`) are
//! dashed, and the one from the node its condition reads carries the condition and the
//! measured share of queries the switch let through.

use std::fmt::Write;

use askama::Template;
use infaas_core::pipeline::{parse_source, Condition, Source};

use crate::chart::{LineChart, Series, XAxis};
use crate::dashboard::Layout;
use crate::format::{dollars, escape, millis, percent};

/// Size of a node's box and the space around it, in SVG user units.
pub const BOX_WIDTH: f64 = 260.0;
pub const BOX_HEIGHT: f64 = 92.0;
/// Between columns (room for the edges' labels) and between boxes of a column.
pub const GAP_X: f64 = 130.0;
pub const GAP_Y: f64 = 28.0;
pub const MARGIN: f64 = 16.0;
/// Room above the boxes for the edges that skip a column (they go over the boxes between).
pub const LANE: f64 = 48.0;
/// Most characters of a line of a box or of an edge label (the whole text is in the tooltip).
const BOX_CHARS: usize = 40;
const LABEL_CHARS: usize = 22;
/// Seconds of attainment history the chart shows.
pub const ATTAINMENT_WINDOW_S: i64 = 600;

/// A switch: the node runs only on the rows for which a condition holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Switch {
    /// What the condition reads, `"node.output"`.
    pub source: String,
    /// The condition, short (`top p < 0.9`, `label ∈ {1, 7}`).
    pub condition: String,
    /// Measured share of the queries reaching the node that it ran for.
    pub probability: Option<f64>,
}

/// A node as the graph draws it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GraphNode {
    pub name: String,
    /// `app`, `model` or the combiner (`mean`, `vote`, `concat`, `first`).
    pub kind: String,
    /// The application, model or the combiner's sources.
    pub target: String,
    /// Names of the nodes it reads from.
    pub parents: Vec<String>,
    pub switch: Option<Switch>,
    /// The variant it runs: the planned one, else the last that served it.
    pub variant: Option<String>,
    /// Whether `variant` is the plan's choice (else the last served).
    pub planned: bool,
    pub replicas: usize,
    pub queued_rows: usize,
    /// p99 latency over the last minute, ms.
    pub p99_ms: Option<f64>,
    /// What its instances cost per hour, dollars.
    pub cost_per_hour: f64,
}

impl GraphNode {
    /// Whether the node merges other nodes' outputs (runs in the controller, no model).
    pub fn is_combiner(&self) -> bool {
        self.kind != "app" && self.kind != "model"
    }
}

/// The short text of a switch condition.
pub fn condition_label(c: &Condition) -> String {
    match (&c.label_in, c.top_probability_below) {
        (Some(labels), _) => {
            let l: Vec<String> = labels.iter().map(i64::to_string).collect();
            format!("label ∈ {{{}}}", l.join(", "))
        }
        (None, Some(t)) => format!("top p < {t}"),
        (None, None) => "always".into(),
    }
}

/// Each node's column: the length of the longest path from a root to it (parents that are
/// not among the nodes are ignored; a cycle, which a checked pipeline has not, stops growing
/// after as many rounds as there are nodes).
pub fn depths(nodes: &[GraphNode]) -> Vec<usize> {
    let index = |name: &str| nodes.iter().position(|n| n.name == name);
    let parents: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| n.parents.iter().filter_map(|p| index(p)).collect())
        .collect();
    let mut depth = vec![0usize; nodes.len()];
    for _ in 0..nodes.len() {
        let mut changed = false;
        for (k, ps) in parents.iter().enumerate() {
            let d = ps
                .iter()
                .filter(|&&p| p != k)
                .map(|&p| depth[p] + 1)
                .max()
                .unwrap_or(0)
                .min(nodes.len());
            if d != depth[k] {
                depth[k] = d;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    depth
}

/// Where each node's box goes: (column, row within the column), rows in the nodes' order.
pub fn layout(nodes: &[GraphNode]) -> Vec<(usize, usize)> {
    let depth = depths(nodes);
    let mut filled = vec![0usize; depth.iter().max().map_or(0, |d| d + 1)];
    depth
        .iter()
        .map(|&d| {
            let row = filled[d];
            filled[d] += 1;
            (d, row)
        })
        .collect()
}

/// `s` cut to `max` characters, with an ellipsis when cut.
fn fit(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

fn opt_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), millis)
}

/// The lines of a node's box (unescaped).
fn box_lines(n: &GraphNode) -> [String; 4] {
    if n.is_combiner() {
        return [
            format!("combine {}", n.kind),
            format!("from {}", n.target),
            "in the controller".into(),
            format!("p99 {}", opt_ms(n.p99_ms)),
        ];
    }
    let what = format!("{} {}", n.kind, n.target);
    let variant = match &n.variant {
        Some(v) => format!("{v} ({})", if n.planned { "planned" } else { "served" }),
        None => "no variant yet".into(),
    };
    [
        what,
        variant,
        format!("{} replicas · {} rows queued", n.replicas, n.queued_rows),
        format!("p99 {} · {}/h", opt_ms(n.p99_ms), dollars(n.cost_per_hour)),
    ]
}

/// The pipeline's DAG as an `<svg>` element; every text in it is escaped.
pub fn graph_svg(nodes: &[GraphNode]) -> String {
    let places = layout(nodes);
    let columns = places.iter().map(|p| p.0 + 1).max().unwrap_or(0);
    let mut per_column = vec![0usize; columns];
    for &(c, _) in &places {
        per_column[c] += 1;
    }
    let tallest = per_column.iter().copied().max().unwrap_or(0);
    let step_y = BOX_HEIGHT + GAP_Y;
    let width = if columns == 0 {
        2.0 * MARGIN + BOX_WIDTH
    } else {
        2.0 * MARGIN + columns as f64 * BOX_WIDTH + (columns - 1) as f64 * GAP_X
    };
    let skips = |k: usize, n: &GraphNode| {
        n.parents.iter().any(|p| {
            nodes
                .iter()
                .position(|m| &m.name == p)
                .is_some_and(|p| places[k].0 > places[p].0 + 1)
        })
    };
    let lane = if nodes.iter().enumerate().any(|(k, n)| skips(k, n)) {
        LANE
    } else {
        0.0
    };
    let height = 2.0 * MARGIN + lane + (tallest.max(1) as f64) * step_y - GAP_Y;
    // Top-left corner of each box; shorter columns are centred vertically.
    let corner: Vec<(f64, f64)> = places
        .iter()
        .map(|&(c, r)| {
            let offset = (tallest - per_column[c]) as f64 * step_y / 2.0;
            (
                MARGIN + c as f64 * (BOX_WIDTH + GAP_X),
                MARGIN + lane + offset + r as f64 * step_y,
            )
        })
        .collect();
    let mut svg = String::new();
    let _ = write!(
        svg,
        r##"<svg class="pipeline-graph" id="pipeline-graph" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="pipeline graph" data-nodes="{}" data-columns="{columns}"><defs><marker id="pipeline-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#5b6475"/></marker></defs>"##,
        nodes.len()
    );
    if nodes.is_empty() {
        let _ = write!(
            svg,
            r#"<text class="empty" x="{:.1}" y="{:.1}" text-anchor="middle">no node</text>"#,
            width / 2.0,
            height / 2.0
        );
    }
    // Edges first, under the boxes.
    let mut labels = String::new();
    for (k, n) in nodes.iter().enumerate() {
        let switch_from = n
            .switch
            .as_ref()
            .and_then(|s| match parse_source(&s.source) {
                Source::Node { node, .. } => Some(node),
                Source::Request(_) => None,
            });
        for parent in &n.parents {
            let Some(p) = nodes.iter().position(|m| &m.name == parent) else {
                continue;
            };
            if p == k {
                continue;
            }
            let (x1, y1) = (corner[p].0 + BOX_WIDTH, corner[p].1 + BOX_HEIGHT / 2.0);
            let (x2, y2) = (corner[k].0, corner[k].1 + BOX_HEIGHT / 2.0);
            // An edge to the next column curves straight across the gap; one that skips
            // columns rises into the lane above the boxes in the first gap, runs along it and
            // comes down in the last gap, so that the boxes between do not hide it.
            let (route, (mx, my)) = if places[k].0 > places[p].0 + 1 {
                let up = MARGIN + lane / 2.0;
                let (a, b) = (x1 + GAP_X, x2 - GAP_X);
                (
                    format!(
                        "M {x1:.1} {y1:.1} C {:.1} {y1:.1}, {:.1} {up:.1}, {a:.1} {up:.1} L {b:.1} {up:.1} C {:.1} {up:.1}, {:.1} {y2:.1}, {x2:.1} {y2:.1}",
                        x1 + GAP_X / 2.0,
                        x1 + GAP_X / 2.0,
                        x2 - GAP_X / 2.0,
                        x2 - GAP_X / 2.0,
                    ),
                    ((a + b) / 2.0, up),
                )
            } else {
                let bend = ((x2 - x1) / 2.0).max(20.0);
                (
                    format!(
                        "M {x1:.1} {y1:.1} C {:.1} {y1:.1}, {:.1} {y2:.1}, {x2:.1} {y2:.1}",
                        x1 + bend,
                        x2 - bend
                    ),
                    ((x1 + x2) / 2.0, (y1 + y2) / 2.0),
                )
            };
            let class = if n.switch.is_some() {
                "edge switch"
            } else {
                "edge"
            };
            let dash = if n.switch.is_some() {
                r#" stroke-dasharray="6 4""#
            } else {
                ""
            };
            let _ = write!(
                svg,
                r##"<path class="{class}" data-from="{}" data-to="{}" d="{route}" fill="none" stroke="#5b6475" stroke-width="1.5"{dash} marker-end="url(#pipeline-arrow)"><title>{} → {}</title></path>"##,
                escape(parent),
                escape(&n.name),
                escape(parent),
                escape(&n.name),
            );
            if let (Some(s), Some(from)) = (&n.switch, switch_from) {
                if from != parent {
                    continue;
                }
                let ran = s.probability.map_or_else(
                    || "ran: no data yet".into(),
                    |p| format!("ran {}", percent(p)),
                );
                let cond = fit(&s.condition, LABEL_CHARS);
                let chars = cond.chars().count().max(ran.chars().count()) as f64;
                let w = chars * 6.0 + 10.0;
                let _ = write!(
                    labels,
                    r##"<g class="edge-label" data-from="{}" data-to="{}"><title>{} runs when {} {} ({})</title><rect x="{:.1}" y="{:.1}" width="{w:.1}" height="28" rx="3" fill="#ffffff" stroke="#d7dbe3"/><text x="{mx:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text><text x="{mx:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text></g>"##,
                    escape(parent),
                    escape(&n.name),
                    escape(&n.name),
                    escape(&s.source),
                    escape(&s.condition),
                    escape(&ran),
                    mx - w / 2.0,
                    my - 14.0,
                    my - 3.0,
                    escape(&cond),
                    my + 10.0,
                    escape(&ran),
                );
            }
        }
    }
    svg.push_str(&labels);
    for (k, n) in nodes.iter().enumerate() {
        let (x, y) = corner[k];
        let kind = if n.is_combiner() {
            "combine"
        } else {
            n.kind.as_str()
        };
        let lines = box_lines(n);
        let switch = if n.switch.is_some() { " switch" } else { "" };
        let _ = write!(
            svg,
            r##"<g class="node {}{switch}" id="node-{}" data-node="{}" data-column="{}"><title>{}&#10;{}</title><rect x="{x:.1}" y="{y:.1}" width="{BOX_WIDTH}" height="{BOX_HEIGHT}" rx="6" fill="#f6f7f9" stroke="#2456c7" stroke-width="1.2"/><text class="name" x="{:.1}" y="{:.1}" font-size="13" font-weight="600">{}</text>"##,
            escape(kind),
            escape(&n.name),
            escape(&n.name),
            places[k].0,
            escape(&n.name),
            escape(&lines.join("\n")),
            x + 10.0,
            y + 19.0,
            escape(&fit(&n.name, BOX_CHARS - 6)),
        );
        for (i, line) in lines.iter().enumerate() {
            if line.is_empty() {
                continue;
            }
            let _ = write!(
                svg,
                r#"<text class="line{}" x="{:.1}" y="{:.1}" font-size="11">{}</text>"#,
                i + 1,
                x + 10.0,
                y + 37.0 + 16.0 * i as f64,
                escape(&fit(line, BOX_CHARS)),
            );
        }
        svg.push_str("</g>");
    }
    svg.push_str("</svg>");
    svg
}

/// SLO attainment per second (within the SLO / answered), the last
/// [`ATTAINMENT_WINDOW_S`] seconds up to the last answered one; seconds without queries are
/// gaps. `seconds`: (ms since the Unix epoch, answered, within), oldest first. With a
/// `target` (the SLO's percentile as a fraction), a dashed line shows it.
pub fn attainment_chart(seconds: &[(i64, u64, u64)], target: Option<f64>) -> LineChart {
    let last = seconds.iter().map(|s| s.0.div_euclid(1000)).max();
    let (xs, values): (Vec<i64>, Vec<Option<f64>>) = match last {
        None => (Vec::new(), Vec::new()),
        Some(last) => {
            let first = seconds
                .iter()
                .map(|s| s.0.div_euclid(1000))
                .min()
                .unwrap_or(last)
                .max(last - ATTAINMENT_WINDOW_S + 1);
            (first..=last)
                .map(|sec| {
                    let (n, ok) = seconds
                        .iter()
                        .filter(|s| s.0.div_euclid(1000) == sec)
                        .fold((0u64, 0u64), |(n, ok), s| (n + s.1, ok + s.2));
                    (sec * 1000, (n > 0).then(|| ok as f64 / n as f64))
                })
                .unzip()
        }
    };
    let mut series = vec![Series {
        label: "within SLO".into(),
        class: "s1",
        values,
    }];
    if let Some(t) = target {
        series.push(Series {
            label: format!("target {}", percent(t)),
            class: "slo",
            values: vec![Some(t); xs.len()],
        });
    }
    LineChart {
        title: "SLO attainment per second".into(),
        unit: "fraction".into(),
        minutes: xs,
        x_axis: XAxis::Clock,
        series,
    }
}

/// The overload charts of a pipeline's page, on one time axis.
#[derive(Debug, Clone)]
pub struct QualityCharts {
    /// Mean accuracy of the answers per second.
    pub accuracy: LineChart,
    /// Queries answered and dropped early per second.
    pub load: LineChart,
    /// What the pipeline's loaded instances cost per second, $/h.
    pub cost: LineChart,
}

/// Overload at a glance (last ten minutes): per second, the mean accuracy the answers were
/// served with, the queries answered beside those dropped early, and what the pipeline's
/// configuration costs; all three on the same seconds, the last [`ATTAINMENT_WINDOW_S`] up to
/// the newest of either record. `quality`: (ms since the Unix epoch, answered, mean accuracy,
/// dropped), `cost`: (ms since the Unix epoch, $/h), each oldest first. A second without
/// answers leaves a gap in the accuracy, one without a cost sample a gap in the cost; the load
/// is 0 where nothing was answered or dropped.
pub fn quality_charts(
    quality: &[(i64, u64, Option<f64>, u64)],
    cost: &[(i64, f64)],
) -> QualityCharts {
    let secs = || {
        quality
            .iter()
            .map(|s| s.0.div_euclid(1000))
            .chain(cost.iter().map(|c| c.0.div_euclid(1000)))
    };
    let seconds: Vec<i64> = match secs().max() {
        None => Vec::new(),
        Some(last) => {
            let first = secs()
                .min()
                .unwrap_or(last)
                .max(last - ATTAINMENT_WINDOW_S + 1);
            (first..=last).collect()
        }
    };
    let at = |sec: i64| quality.iter().find(|q| q.0.div_euclid(1000) == sec);
    let cost_at = |sec: i64| {
        cost.iter()
            .rev()
            .find(|c| c.0.div_euclid(1000) == sec)
            .map(|c| c.1)
    };
    let minutes: Vec<i64> = seconds.iter().map(|s| s * 1000).collect();
    let accuracy = LineChart {
        title: "Accuracy served per second".into(),
        unit: "accuracy".into(),
        minutes: minutes.clone(),
        x_axis: XAxis::Clock,
        series: vec![Series {
            label: "mean accuracy of the answers".into(),
            class: "s1",
            values: seconds.iter().map(|&s| at(s).and_then(|q| q.2)).collect(),
        }],
    };
    let load = LineChart {
        title: "Queries per second".into(),
        unit: "q/s".into(),
        minutes: minutes.clone(),
        x_axis: XAxis::Clock,
        series: vec![
            Series {
                label: "answered".into(),
                class: "s1",
                values: seconds
                    .iter()
                    .map(|&s| Some(at(s).map_or(0.0, |q| q.1 as f64)))
                    .collect(),
            },
            Series {
                label: "dropped early".into(),
                class: "slo",
                values: seconds
                    .iter()
                    .map(|&s| Some(at(s).map_or(0.0, |q| q.3 as f64)))
                    .collect(),
            },
        ],
    };
    let cost = LineChart {
        title: "Cost of the pipeline's instances per second".into(),
        unit: "$/h".into(),
        minutes,
        x_axis: XAxis::Clock,
        series: vec![Series {
            label: "cost ($/h)".into(),
            class: "s2",
            values: seconds.iter().map(|&s| cost_at(s)).collect(),
        }],
    };
    QualityCharts {
        accuracy,
        load,
        cost,
    }
}

/// An example document for the registration form (a cascade over two applications).
pub fn example_document(apps: &[String]) -> String {
    let cheap = apps.first().map_or("small", String::as_str);
    let expert = apps.get(1).map_or("large", String::as_str);
    format!(
        r#"name: cascade
inputs:
  - {{name: image, datatype: FP32, shape: [64]}}
nodes:
  - {{name: cheap, app: {cheap}, inputs: {{input: image}}}}
  - name: expert
    app: {expert}
    inputs: {{input: image}}
    when: {{source: cheap.probabilities, top_probability_below: 0.9}}
  - {{name: answer, combine: first, from: [expert.probabilities, cheap.probabilities]}}
outputs:
  probabilities: answer.output
slo:
  latency_ms: 100"#
    )
}

/// A pipeline in the list.
#[derive(Debug, Clone, Default)]
pub struct PipelineRow {
    pub name: String,
    pub description: String,
    /// Node names in order, comma-separated.
    pub nodes: String,
    pub node_count: usize,
    /// `100 ms at p99`, or `none`.
    pub slo: String,
    pub planned: bool,
    pub queries_last_minute: usize,
    pub p99: String,
}

/// The tenant's pipelines and the registration form.
#[derive(Template)]
#[template(path = "dashboard/pipelines.html")]
pub struct PipelinesPage {
    pub layout: Layout,
    pub pipelines: Vec<PipelineRow>,
    /// The document last submitted (kept when refused).
    pub document: String,
    /// The example shown in the empty form.
    pub example: String,
    /// Why the last submission was refused.
    pub error: Option<String>,
}

/// One node's figures in the table.
#[derive(Debug, Clone, Default)]
pub struct NodeRow {
    pub name: String,
    pub kind: String,
    pub target: String,
    pub parents: String,
    /// `when cheap.probabilities: top p < 0.9`, or empty.
    pub condition: String,
    pub planned_variant: String,
    pub last_variant: String,
    pub replicas: usize,
    pub queued_rows: usize,
    pub runs_last_minute: usize,
    pub p99: String,
    pub branch: String,
    pub cost: String,
}

/// A node of the applied plan.
#[derive(Debug, Clone, Default)]
pub struct PlanNodeRow {
    pub name: String,
    pub variant: String,
    pub max_batch: String,
    pub replicas: String,
    pub cost: String,
}

/// The applied plan.
#[derive(Debug, Clone, Default)]
pub struct PlanView {
    pub predicted_p99: String,
    pub attainment: String,
    pub cost: String,
    /// End-to-end accuracy and how it was obtained (measured on the validation set, or
    /// estimated).
    pub accuracy: String,
    pub nodes: Vec<PlanNodeRow>,
}

/// One pipeline: graph, node table, end-to-end figures, attainment chart and plan.
#[derive(Template)]
#[template(path = "dashboard/pipeline.html")]
pub struct PipelinePage {
    pub layout: Layout,
    pub name: String,
    pub description: String,
    /// The DAG as SVG, from [`graph_svg`].
    pub graph: String,
    pub nodes: Vec<NodeRow>,
    pub queries_last_minute: usize,
    pub p99: String,
    /// `100 ms at p99`, or `none`.
    pub slo: String,
    /// Whether the p99 of the last minute is within the SLO (`None`: no SLO or no query).
    pub within_slo: Option<bool>,
    /// Share of the charted queries answered within the SLO.
    pub attainment: String,
    pub cost: String,
    /// The attainment chart as SVG.
    pub attainment_chart: String,
    /// Accuracy served per second, answered / dropped queries per second, and what the
    /// pipeline's instances cost per second ($/h), as SVG on one time axis (from
    /// [`quality_charts`]).
    pub accuracy_chart: String,
    pub load_chart: String,
    pub cost_chart: String,
    /// The accuracy-scaling allocation (`hardware scaling, relative accuracy 1.000`), if any.
    pub overload: Option<String>,
    /// The arrival rate against its forecasts, once the pipeline has had queries.
    pub forecast: Option<crate::dashboard::ForecastPanel>,
    pub plan: Option<PlanView>,
    /// The validation set (`540 rows graded on output 'probabilities'`), if any.
    pub validation: Option<String>,
    /// Why the live figures are missing (the pipeline no longer fits the registry).
    pub warning: Option<String>,
    /// The registered document, as JSON.
    pub document: String,
}

impl PipelinePage {
    /// The class of the end-to-end p99.
    pub fn p99_class(&self) -> &'static str {
        match self.within_slo {
            Some(true) => "ok",
            Some(false) => "bad",
            None => "",
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn node(name: &str, kind: &str, parents: &[&str]) -> GraphNode {
        GraphNode {
            name: name.into(),
            kind: kind.into(),
            target: format!("{name}-target"),
            parents: parents.iter().map(|p| p.to_string()).collect(),
            ..GraphNode::default()
        }
    }

    /// The cascade: cheap, expert behind a switch on cheap, answer = first(expert, cheap).
    fn cascade() -> Vec<GraphNode> {
        let mut expert = node("expert", "model", &["cheap"]);
        expert.switch = Some(Switch {
            source: "cheap.probabilities".into(),
            condition: "top p < 0.9".into(),
            probability: Some(0.25),
        });
        expert.variant = Some("digits-mlp-l.fp32.cpu.t1".into());
        expert.replicas = 2;
        expert.queued_rows = 3;
        expert.p99_ms = Some(4.5);
        expert.cost_per_hour = 0.12;
        let mut cheap = node("cheap", "app", &[]);
        cheap.variant = Some("digits-mlp-s.int8.cpu.t1".into());
        cheap.planned = true;
        let mut answer = node("answer", "first", &["expert", "cheap"]);
        answer.target = "expert.probabilities, cheap.probabilities".into();
        vec![cheap, expert, answer]
    }

    fn edges(svg: &str) -> Vec<String> {
        svg.split("<path class=\"edge")
            .skip(1)
            .map(|s| s.split("</path>").next().unwrap().to_string())
            .collect()
    }

    #[test]
    fn columns_follow_the_longest_path_from_a_root() {
        let nodes = cascade();
        assert_eq!(depths(&nodes), vec![0, 1, 2]);
        // A diamond with a shortcut: d reads a directly and through b and c.
        let nodes = vec![
            node("d", "mean", &["a", "c", "b"]),
            node("c", "model", &["b"]),
            node("b", "app", &["a"]),
            node("a", "app", &[]),
            node("e", "app", &[]),
        ];
        assert_eq!(depths(&nodes), vec![3, 2, 1, 0, 0]);
        assert_eq!(layout(&nodes), vec![(3, 0), (2, 0), (1, 0), (0, 0), (0, 1)]);
        let svg = graph_svg(&nodes);
        assert!(
            svg.contains(r#"id="node-d" data-node="d" data-column="3""#),
            "{svg}"
        );
        assert!(svg.contains(r#"id="node-e" data-node="e" data-column="0""#));
        assert!(svg.contains(r#"data-columns="4""#));
        // Column 3 starts three box widths and gaps from the left.
        let x = MARGIN + 3.0 * (BOX_WIDTH + GAP_X);
        let d = &svg[svg.find(r#"id="node-d""#).unwrap()..];
        assert!(d.contains(&format!(r#"<rect x="{x:.1}""#)), "{d}");
        // The edges that skip a column go over the boxes between, in the lane above them.
        let e = edges(&svg);
        let over = e
            .iter()
            .find(|p| p.contains(r#"data-from="a" data-to="d""#))
            .unwrap();
        let d: Vec<f64> = over
            .split("d=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .split([' ', ','])
            .filter_map(|w| w.parse().ok())
            .collect();
        // Start and end at the boxes' sides; everything between above the boxes.
        assert_eq!(d.len(), 16, "{over}");
        assert!(
            [d[5], d[7], d[9], d[11]].iter().all(|&y| y < MARGIN + LANE),
            "{over}"
        );
        let next = e
            .iter()
            .find(|p| p.contains(r#"data-from="c" data-to="d""#))
            .unwrap();
        assert!(
            next.contains(&format!(
                " C {:.1} {:.1},",
                x - GAP_X / 2.0,
                MARGIN + LANE + (BOX_HEIGHT + GAP_Y) / 2.0 + BOX_HEIGHT / 2.0
            )),
            "{next}"
        );
        // Unknown parents and cycles do not hang or panic.
        let odd = vec![node("x", "app", &["y", "ghost"]), node("y", "app", &["x"])];
        assert!(depths(&odd).iter().all(|&d| d <= 2));
        assert!(graph_svg(&odd).starts_with("<svg"));
    }

    #[test]
    fn every_node_and_edge_is_drawn() {
        let svg = graph_svg(&cascade());
        assert!(svg.starts_with("<svg class=\"pipeline-graph\"") && svg.ends_with("</svg>"));
        assert!(svg.contains(r#"data-nodes="3""#));
        for name in ["cheap", "expert", "answer"] {
            assert_eq!(
                svg.matches(&format!(r#"data-node="{name}""#)).count(),
                1,
                "{name}: {svg}"
            );
            assert!(svg.contains(&format!(">{name}</text>")), "{name}");
        }
        // Three edges, each with an arrow head, from parent to child.
        let e = edges(&svg);
        assert_eq!(e.len(), 3, "{svg}");
        for (from, to) in [
            ("cheap", "expert"),
            ("expert", "answer"),
            ("cheap", "answer"),
        ] {
            assert!(
                e.iter()
                    .any(|p| p.contains(&format!(r#"data-from="{from}" data-to="{to}""#))),
                "{from} -> {to}: {svg}"
            );
        }
        assert!(e
            .iter()
            .all(|p| p.contains(r#"marker-end="url(#pipeline-arrow)""#)));
        // The box shows kind and target, variant, replicas, queue, p99 and cost.
        assert!(svg.contains(">model expert-target</text>"));
        assert!(
            svg.contains(">digits-mlp-l.fp32.cpu.t1 (served)</text>"),
            "{svg}"
        );
        assert!(svg.contains(">digits-mlp-s.int8.cpu.t1 (planned)</text>"));
        assert!(svg.contains(">2 replicas · 3 rows queued</text>"));
        assert!(svg.contains(">p99 4.50 ms · $0.1200/h</text>"), "{svg}");
        assert!(svg.contains(">combine first</text>"), "{svg}");
        assert!(
            svg.contains(">from expert.probabilities, cheap.probab…</text>"),
            "{svg}"
        );
        // An empty pipeline is an empty drawing, not a panic.
        assert!(graph_svg(&[]).contains("no node"));
    }

    #[test]
    fn a_switch_edge_is_dashed_and_labelled() {
        let svg = graph_svg(&cascade());
        let e = edges(&svg);
        let switch: Vec<_> = e.iter().filter(|p| p.starts_with(" switch")).collect();
        assert_eq!(switch.len(), 1, "{svg}");
        assert!(switch[0].contains(r#"data-from="cheap" data-to="expert""#));
        assert!(switch[0].contains(r#"stroke-dasharray="6 4""#));
        // The others are solid.
        assert_eq!(svg.matches("stroke-dasharray").count(), 1);
        let label = &svg[svg
            .find(r#"<g class="edge-label" data-from="cheap" data-to="expert">"#)
            .unwrap()..];
        let label = label.split("</g>").next().unwrap();
        assert!(label.contains(">top p &lt; 0.9</text>"), "{label}");
        assert!(label.contains(">ran 25.0 %</text>"), "{label}");
        // Without measurements yet, the label says so.
        let mut nodes = cascade();
        nodes[1].switch.as_mut().unwrap().probability = None;
        assert!(graph_svg(&nodes).contains(">ran: no data yet</text>"));
    }

    #[test]
    fn text_is_escaped() {
        let mut nodes = vec![node("<b>", "app", &[]), node("x", "model", &["<b>"])];
        nodes[0].target = "a&b\"c".into();
        nodes[0].variant = Some("<script>alert(1)</script>".into());
        nodes[1].switch = Some(Switch {
            source: "<b>.out".into(),
            condition: "<i>".into(),
            probability: None,
        });
        let svg = graph_svg(&nodes);
        assert!(
            !svg.contains("<b>") && !svg.contains("<script>") && !svg.contains("<i>"),
            "{svg}"
        );
        assert!(svg.contains(r#"data-node="&lt;b&gt;""#));
        assert!(
            svg.contains(r#"data-from="&lt;b&gt;" data-to="x""#),
            "{svg}"
        );
        assert!(svg.contains("app a&amp;b&quot;c"));
        assert!(svg.contains("&lt;script&gt;"));
    }

    #[test]
    fn conditions_read_short() {
        let c: Condition = Condition {
            source: "a.label".into(),
            label_in: Some(vec![1, 7]),
            top_probability_below: None,
        };
        assert_eq!(condition_label(&c), "label ∈ {1, 7}");
        let c = Condition {
            source: "a.probabilities".into(),
            label_in: None,
            top_probability_below: Some(0.9),
        };
        assert_eq!(condition_label(&c), "top p < 0.9");
    }

    #[test]
    fn attainment_is_within_over_answered_per_second_with_gaps() {
        let seconds = [(10_000, 4, 4), (11_000, 4, 3), (13_000, 2, 1)];
        let c = attainment_chart(&seconds, Some(0.99));
        assert_eq!(c.minutes, vec![10_000, 11_000, 12_000, 13_000]);
        assert_eq!(
            c.series[0].values,
            vec![Some(1.0), Some(0.75), None, Some(0.5)]
        );
        assert_eq!(c.series[1].label, "target 99.0 %");
        assert_eq!(c.series[1].class, "slo");
        let svg = c.to_svg();
        assert!(svg.contains("SLO attainment per second"));
        // Only the last window is charted.
        let long = [(0, 1, 1), (ATTAINMENT_WINDOW_S * 1000 + 5000, 1, 0)];
        let c = attainment_chart(&long, None);
        assert_eq!(c.minutes.len() as i64, ATTAINMENT_WINDOW_S);
        assert_eq!(c.series.len(), 1);
        assert_eq!(c.series[0].values.last(), Some(&Some(0.0)));
        assert!(attainment_chart(&[], None).to_svg().contains("no data yet"));
    }

    fn layout_() -> Layout {
        Layout {
            tenant: "acme".into(),
            csrf: "tok3n".into(),
            active: "pipelines",
        }
    }

    #[test]
    fn the_list_page_shows_pipelines_and_the_form_with_its_error() {
        let page = PipelinesPage {
            layout: layout_(),
            pipelines: vec![PipelineRow {
                name: "cascade".into(),
                description: "<em>x</em>".into(),
                nodes: "cheap, expert, answer".into(),
                node_count: 3,
                slo: "100 ms at p99".into(),
                planned: false,
                queries_last_minute: 7,
                p99: "3.00 ms".into(),
            }],
            document: "name: \"<bad>\"".into(),
            example: example_document(&["fast".into()]),
            error: Some("node 'cheap', input 'input': <nope>".into()),
        };
        let html = page.render().unwrap();
        assert!(
            html.contains(
                r#"<tr id="pipeline-cascade"><td><a href="/ui/pipelines/cascade">cascade</a>"#
            ),
            "{html}"
        );
        assert!(html.contains("<td>7</td>"));
        assert!(!html.contains("<em>") && !html.contains("<bad>") && !html.contains("<nope>"));
        assert!(html.contains(r#"id="pipeline-error""#));
        assert!(
            html.contains("app: fast"),
            "the example uses the tenant's application"
        );
        let form = &html[html.find(r#"id="pipeline-form""#).unwrap()..];
        let first_input = &form[form.find("<input").unwrap()..];
        assert!(first_input.starts_with(r#"<input type="hidden" name="csrf" value="tok3n">"#));
        assert!(html.contains(r#"<a href="/ui/pipelines" class="active">Pipelines</a>"#));
    }

    #[test]
    fn accuracy_load_and_cost_share_one_time_axis() {
        // Queries in seconds 10 and 12; the cost sampled in seconds 11 to 14.
        let quality = [(10_000, 4, Some(0.9), 1), (12_000, 2, Some(0.8), 0)];
        let cost = [(11_000, 0.5), (12_000, 0.5), (13_000, 1.25), (14_000, 1.0)];
        let c = quality_charts(&quality, &cost);
        let axis: Vec<i64> = (10..=14).map(|s| s * 1000).collect();
        for chart in [&c.accuracy, &c.load, &c.cost] {
            assert_eq!(chart.minutes, axis, "{}", chart.title);
            assert_eq!(chart.x_axis, XAxis::Clock);
        }
        assert_eq!(
            c.accuracy.series[0].values,
            vec![Some(0.9), None, Some(0.8), None, None]
        );
        assert_eq!(
            c.load.series[0].values,
            vec![Some(4.0), Some(0.0), Some(2.0), Some(0.0), Some(0.0)]
        );
        assert_eq!(
            c.load.series[1].values,
            vec![Some(1.0), Some(0.0), Some(0.0), Some(0.0), Some(0.0)]
        );
        assert_eq!(c.cost.series.len(), 1);
        assert_eq!(c.cost.series[0].label, "cost ($/h)");
        assert_eq!(c.cost.unit, "$/h");
        assert_eq!(
            c.cost.series[0].values,
            vec![None, Some(0.5), Some(0.5), Some(1.25), Some(1.0)]
        );
        // Only the last window is charted, up to the newer of the two records.
        let long = [(0, 1.0), ((ATTAINMENT_WINDOW_S + 5) * 1000, 2.0)];
        let c = quality_charts(&[(1000, 1, Some(1.0), 0)], &long);
        assert_eq!(c.cost.minutes.len() as i64, ATTAINMENT_WINDOW_S);
        assert_eq!(
            c.cost.minutes.last(),
            Some(&((ATTAINMENT_WINDOW_S + 5) * 1000))
        );
        assert_eq!(c.accuracy.minutes, c.cost.minutes);
        assert_eq!(c.cost.series[0].values.last(), Some(&Some(2.0)));
        assert!(quality_charts(&[], &[])
            .cost
            .to_svg()
            .contains("no data yet"));
    }

    #[test]
    fn the_pipeline_page_has_graph_table_chart_plan_and_delete() {
        let charts = quality_charts(&[(1000, 3, Some(0.97), 1)], &[(1000, 0.25), (2000, 0.5)]);
        let page = PipelinePage {
            layout: layout_(),
            name: "cascade".into(),
            description: String::new(),
            graph: graph_svg(&cascade()),
            nodes: vec![NodeRow {
                name: "expert".into(),
                condition: "when cheap.probabilities: top p < 0.9".into(),
                ..NodeRow::default()
            }],
            queries_last_minute: 3,
            p99: "5.00 ms".into(),
            slo: "100 ms at p99".into(),
            within_slo: Some(true),
            attainment: "100 %".into(),
            cost: "$0.12/h".into(),
            attainment_chart: attainment_chart(&[(1000, 1, 1)], Some(0.99)).to_svg(),
            accuracy_chart: charts.accuracy.to_svg(),
            load_chart: charts.load.to_svg(),
            cost_chart: charts.cost.to_svg(),
            overload: Some("accuracy scaling: relative accuracy 0.981".into()),
            forecast: Some(crate::dashboard::forecast_panel(
                "ewma(a=0.5)",
                &[(1, 3.0), (2, 4.0)],
                &[(2, 3.0), (3, 4.0)],
                &[(12, 4.0)],
                4.0,
                Some(0.25),
                None,
            )),
            plan: Some(PlanView {
                predicted_p99: "4.00 ms".into(),
                attainment: "99.5 %".into(),
                cost: "$0.10/h".into(),
                accuracy: "0.9815 (measured on the pipeline's validation set)".into(),
                nodes: vec![PlanNodeRow {
                    name: "expert".into(),
                    variant: "v1".into(),
                    ..PlanNodeRow::default()
                }],
            }),
            validation: Some("540 rows graded on output 'probabilities'".into()),
            warning: None,
            document: "{}".into(),
        };
        let html = page.render().unwrap();
        assert!(html.contains(r#"<svg class="pipeline-graph""#), "{html}");
        assert!(html.contains("measured on the pipeline"), "{html}");
        assert!(html.contains(r#"id="chart-accuracy""#) && html.contains("dropped early"));
        // The cost over time, beside accuracy and load: its series with both samples.
        let cost = &html[html.find(r#"<figure id="chart-cost">"#).unwrap()..];
        let cost = &cost[..cost.find("</figure>").unwrap()];
        assert!(cost.contains(r#"<svg class="chart""#), "{cost}");
        assert!(cost.contains(r#"data-points="2""#), "{cost}");
        assert!(
            cost.contains("cost ($/h)") && cost.contains(r#"data-value="0.25""#),
            "{cost}"
        );
        assert!(
            html.find(r#"id="chart-load""#) < html.find(r#"id="chart-cost""#),
            "the cost follows the load"
        );
        assert!(html.contains("accuracy scaling: relative accuracy 0.981"));
        assert!(html.contains(r#"id="pipeline-forecast""#) && html.contains("ewma(a=0.5)"));
        assert!(html.contains(r#"id="pipeline-validation">Validation set: 540 rows"#));
        assert!(html.contains(r#"<svg class="chart""#));
        assert!(html.contains(r#"id="pipeline-plan""#));
        assert!(
            html.contains(r#"id="e2e-p99" class="ok">5.00 ms"#),
            "{html}"
        );
        assert!(html.contains("top p &lt; 0.9") || html.contains("top p &#60; 0.9"));
        assert!(html.contains(r#"action="/ui/pipelines/cascade/delete""#));
        assert!(html.contains(r#"data-live-src="/ui/pipelines/cascade""#));
    }
}
