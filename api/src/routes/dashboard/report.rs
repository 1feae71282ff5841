//! Usage figures of the dashboard, computed from per-minute usage rows: an application's
//! summary, its charts over time and its usage by variant. Pure functions of the rows.

use std::collections::{BTreeMap, HashMap};

use infaas_store::UsageRow;
use infaas_web::chart::{LineChart, Series, XAxis};
use infaas_web::dashboard::{AppSummary, VariantUsage};
use infaas_web::format;

/// Minutes the dashboard reports on.
pub const WINDOW_MINUTES: i64 = 60;

/// The minutes of the window ending with the minute of `now_ms`, oldest first.
pub fn window(now_ms: i64, minutes: i64) -> Vec<i64> {
    let last = now_ms.div_euclid(60_000) * 60_000;
    (0..minutes).rev().map(|i| last - i * 60_000).collect()
}

fn attainment(met: i64, requests: i64) -> String {
    if requests > 0 {
        format::percent(met as f64 / requests as f64)
    } else {
        "–".into()
    }
}

/// `5 ms`, `2 ms – 10 ms`, or `none` when no query asked for a latency.
fn slo_range(min: Option<f64>, max: Option<f64>) -> String {
    match (min, max) {
        (Some(a), Some(b)) if (a - b).abs() < 1e-9 => format::millis(a),
        (Some(a), Some(b)) => format!("{} – {}", format::millis(a), format::millis(b)),
        (Some(a), None) | (None, Some(a)) => format::millis(a),
        (None, None) => "none".into(),
    }
}

/// An application's figures over `window_minutes`. `accuracy` maps variant names to their
/// validation accuracy (variants deleted since are left out of the accuracy served).
pub fn summary(
    name: &str,
    models: usize,
    rows: &[UsageRow],
    accuracy: &HashMap<String, f64>,
    window_minutes: i64,
) -> AppSummary {
    let requests: i64 = rows.iter().map(|r| r.requests).sum();
    let met: i64 = rows.iter().map(|r| r.slo_met).sum();
    let cost: f64 = rows.iter().map(|r| r.cost).sum();
    let slo_min = rows.iter().filter_map(|r| r.slo_min_ms).reduce(f64::min);
    let slo_max = rows.iter().filter_map(|r| r.slo_max_ms).reduce(f64::max);
    let (weighted, counted) = rows
        .iter()
        .filter_map(|r| accuracy.get(&r.variant).map(|a| (a, r.requests)))
        .fold((0.0, 0i64), |(sum, n), (a, q)| (sum + a * q as f64, n + q));
    AppSummary {
        name: name.to_string(),
        models,
        requests,
        slos: slo_range(slo_min, slo_max),
        attainment: attainment(met, requests),
        accuracy: if counted > 0 {
            format::accuracy(weighted / counted as f64)
        } else {
            "–".into()
        },
        cost_per_hour: format::dollars(cost * 60.0 / window_minutes.max(1) as f64),
    }
}

/// Totals of one minute over every variant.
#[derive(Default, Clone, Copy)]
struct Minute {
    requests: i64,
    latency_sum_ms: f64,
    latency_max_ms: f64,
    slo_min_ms: Option<f64>,
    cost: f64,
}

fn per_minute(rows: &[UsageRow]) -> HashMap<i64, Minute> {
    let mut out: HashMap<i64, Minute> = HashMap::new();
    for r in rows {
        let m = out.entry(r.minute).or_default();
        m.requests += r.requests;
        m.latency_sum_ms += r.latency_sum_ms;
        m.latency_max_ms = m.latency_max_ms.max(r.latency_max_ms);
        m.slo_min_ms = infaas_store::db::merge_slo(m.slo_min_ms, r.slo_min_ms, true);
        m.cost += r.cost;
    }
    out
}

/// Latency (mean and max per minute, with the tightest SLO asked that minute), throughput
/// and cost charts over `minutes`.
pub fn charts(rows: &[UsageRow], minutes: &[i64]) -> (LineChart, LineChart, LineChart) {
    let by_minute = per_minute(rows);
    let at = |m: &i64| by_minute.get(m).copied();
    let served = |m: &i64| at(m).filter(|x| x.requests > 0);
    let mut latency_series = vec![
        Series {
            label: "mean".into(),
            class: "s1",
            values: minutes
                .iter()
                .map(|m| served(m).map(|x| x.latency_sum_ms / x.requests as f64))
                .collect(),
        },
        Series {
            label: "max".into(),
            class: "s2",
            values: minutes
                .iter()
                .map(|m| served(m).map(|x| x.latency_max_ms))
                .collect(),
        },
    ];
    let slo: Vec<Option<f64>> = minutes
        .iter()
        .map(|m| at(m).and_then(|x| x.slo_min_ms))
        .collect();
    if slo.iter().any(Option::is_some) {
        latency_series.push(Series {
            label: "SLO".into(),
            class: "slo",
            values: slo,
        });
    }
    let latency = LineChart {
        title: "Latency per minute".into(),
        unit: "ms".into(),
        minutes: minutes.to_vec(),
        x_axis: XAxis::Clock,
        series: latency_series,
    };
    let throughput = LineChart {
        title: "Requests per minute".into(),
        unit: "req/min".into(),
        minutes: minutes.to_vec(),
        x_axis: XAxis::Clock,
        series: vec![Series {
            label: "requests".into(),
            class: "s3",
            values: minutes
                .iter()
                .map(|m| Some(at(m).map_or(0.0, |x| x.requests as f64)))
                .collect(),
        }],
    };
    (latency, throughput, cost_chart(rows, minutes))
}

/// Cost per minute over `minutes` (zero where nothing ran).
pub fn cost_chart(rows: &[UsageRow], minutes: &[i64]) -> LineChart {
    let by_minute = per_minute(rows);
    LineChart {
        title: "Cost per minute".into(),
        unit: "$".into(),
        minutes: minutes.to_vec(),
        x_axis: XAxis::Clock,
        series: vec![Series {
            label: "cost".into(),
            class: "s1",
            values: minutes
                .iter()
                .map(|m| Some(by_minute.get(m).map_or(0.0, |x| x.cost)))
                .collect(),
        }],
    }
}

/// Usage by variant, most queried first.
pub fn by_variant(rows: &[UsageRow]) -> Vec<VariantUsage> {
    struct Acc<'a> {
        model: &'a str,
        hardware: &'a str,
        requests: i64,
        met: i64,
        latency_sum_ms: f64,
        latency_max_ms: f64,
        cost: f64,
    }
    let mut acc: BTreeMap<&str, Acc> = BTreeMap::new();
    for r in rows {
        let a = acc.entry(&r.variant).or_insert(Acc {
            model: &r.model,
            hardware: &r.hardware,
            requests: 0,
            met: 0,
            latency_sum_ms: 0.0,
            latency_max_ms: 0.0,
            cost: 0.0,
        });
        a.requests += r.requests;
        a.met += r.slo_met;
        a.latency_sum_ms += r.latency_sum_ms;
        a.latency_max_ms = a.latency_max_ms.max(r.latency_max_ms);
        a.cost += r.cost;
    }
    let mut out: Vec<(i64, VariantUsage)> = acc
        .into_iter()
        .map(|(variant, a)| {
            (
                a.requests,
                VariantUsage {
                    model: a.model.to_string(),
                    variant: variant.to_string(),
                    hardware: a.hardware.to_string(),
                    requests: a.requests,
                    attainment: attainment(a.met, a.requests),
                    mean_latency: if a.requests > 0 {
                        format::millis(a.latency_sum_ms / a.requests as f64)
                    } else {
                        "–".into()
                    },
                    max_latency: format::millis(a.latency_max_ms),
                    cost: format::dollars(a.cost),
                },
            )
        })
        .collect();
    out.sort_by_key(|(requests, _)| std::cmp::Reverse(*requests));
    out.into_iter().map(|(_, v)| v).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn row(variant: &str, minute: i64, requests: i64, slo: Option<f64>) -> UsageRow {
        UsageRow {
            tenant_id: "t".into(),
            app: "digits".into(),
            model: "m".into(),
            variant: variant.into(),
            hardware: "cpu".into(),
            minute,
            requests,
            rows: requests,
            slo_met: requests - 1,
            slo_missed: 1,
            latency_sum_ms: 2.0 * requests as f64,
            latency_max_ms: 5.0,
            cost: 0.5,
            slo_min_ms: slo,
            slo_max_ms: slo.map(|s| s * 2.0),
        }
    }

    #[test]
    fn the_window_ends_with_the_current_minute() {
        let w = window(10 * 60_000 + 1234, 3);
        assert_eq!(w, vec![8 * 60_000, 9 * 60_000, 10 * 60_000]);
    }

    #[test]
    fn summary_weights_accuracy_by_queries_and_scales_cost_to_an_hour() {
        let rows = vec![
            row("a", 0, 3, Some(4.0)),
            row("b", 60_000, 1, Some(2.0)),
            row("gone", 60_000, 4, None),
        ];
        let acc: HashMap<String, f64> = [("a".to_string(), 0.9), ("b".to_string(), 0.5)].into();
        let s = summary("digits", 2, &rows, &acc, 30);
        assert_eq!(s.requests, 8);
        // 5 of 8 met (each row misses one).
        assert_eq!(s.attainment, "62.5 %");
        // (3 × 0.9 + 1 × 0.5) / 4, the deleted variant left out.
        assert_eq!(s.accuracy, "0.8000");
        // 1.5 over 30 minutes is 3 an hour.
        assert_eq!(s.cost_per_hour, "$3.00");
        assert_eq!(s.slos, "2.00 ms – 8.00 ms");
        let none = summary("x", 0, &[], &acc, 60);
        assert_eq!(
            (none.slos.as_str(), none.attainment.as_str()),
            ("none", "–")
        );
    }

    #[test]
    fn charts_follow_the_minutes() {
        let minutes = window(2 * 60_000, 3);
        let rows = vec![row("a", 0, 2, Some(3.0)), row("b", 0, 2, Some(1.0))];
        let (latency, throughput, cost) = charts(&rows, &minutes);
        // Mean over both variants; nothing in the later minutes.
        assert_eq!(latency.series[0].values, vec![Some(2.0), None, None]);
        assert_eq!(latency.series[1].values, vec![Some(5.0), None, None]);
        // The SLO line is the tightest SLO of the minute.
        assert_eq!(latency.series[2].label, "SLO");
        assert_eq!(latency.series[2].values, vec![Some(1.0), None, None]);
        assert_eq!(
            throughput.series[0].values,
            vec![Some(4.0), Some(0.0), Some(0.0)]
        );
        assert_eq!(cost.series[0].values, vec![Some(1.0), Some(0.0), Some(0.0)]);
        // Without SLOs there is no SLO line.
        let (latency, _, _) = charts(&[row("a", 0, 1, None)], &minutes);
        assert_eq!(latency.series.len(), 2);
    }

    #[test]
    fn usage_by_variant_most_queried_first() {
        let rows = vec![
            row("a", 0, 1, None),
            row("b", 0, 2, None),
            row("b", 60_000, 3, None),
        ];
        let v = by_variant(&rows);
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].variant.as_str(), v[0].requests), ("b", 5));
        assert_eq!(v[0].attainment, "60.0 %");
        assert_eq!(v[0].cost, "$1.00");
        assert_eq!((v[1].variant.as_str(), v[1].requests), ("a", 1));
    }
}
