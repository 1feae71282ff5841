//! The arrival exchange: how controller replicas on one database share the queries each one
//! received. Per-query work stays local (a replica records its arrivals in memory, as one
//! controller does); about once a second each replica publishes what arrived at it since its
//! last report (`Db::publish_arrivals`: rows per variant for the model autoscaler, queries per
//! application and second for the recorded traffic and the forecasts, pipeline arrival times
//! for the pipelines' tuner and overload manager) and merges the reports
//! the other replicas published. So the leader's autoscaler plans for the cluster's demand,
//! and every replica exports and forecasts the same traffic. Reports arrive up to
//! [`SETTLE_S`] seconds after the queries; the forecasts read seconds that old.
//!
//! On the embedded SQLite default there is one replica and nothing is exchanged.

use std::collections::HashMap;
use std::time::Duration;

use infaas_scheduler::autoscale::Arrivals;
use infaas_store::DbKind;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::platform::ControlPlane;
use crate::traffic::SecondArrivals;

/// How often a replica publishes and reads.
pub const PERIOD: Duration = Duration::from_secs(1);
/// Seconds after which a second's arrivals from every replica are in (a report every
/// [`PERIOD`], read within the next one, and a second of margin).
pub const SETTLE_S: i64 = 3;
/// How far back a reader looks; a replica stalled longer misses the reports in between.
const WINDOW_MS: i64 = 30_000;
/// Reports older than this are removed.
const KEEP_MS: i64 = 120_000;

/// One replica's arrivals over one period.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Rows per variant.
    #[serde(default)]
    pub demand: Vec<VariantArrivals>,
    /// Queries per application and second.
    #[serde(default)]
    pub traffic: Vec<SecondArrivals>,
    /// Arrival times of pipeline queries.
    #[serde(default)]
    pub pipelines: Vec<PipelineArrivals>,
}

/// Queries that arrived for one pipeline: their times, ms since the Unix epoch.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub struct PipelineArrivals {
    pub tenant: String,
    pub pipeline: String,
    pub at_ms: Vec<i64>,
}

/// Rows that arrived for one variant.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub struct VariantArrivals {
    pub variant: String,
    pub rows: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_accuracy: Option<f64>,
    /// Loads the query path started for it.
    #[serde(default)]
    pub loads_for_queries: u32,
}

impl Report {
    fn is_empty(&self) -> bool {
        self.demand.is_empty() && self.traffic.is_empty() && self.pipelines.is_empty()
    }
}

/// Whether replicas exchange arrivals on this database (the ones that hold several).
pub fn enabled(kind: DbKind) -> bool {
    kind == DbKind::Postgres
}

/// How old a second must be before every replica's arrivals of it are in, on a database of
/// `kind` (0 where there is one replica).
pub fn settle_s(kind: DbKind) -> i64 {
    if enabled(kind) {
        SETTLE_S
    } else {
        0
    }
}

/// This replica's unpublished arrivals.
fn collect(control: &ControlPlane) -> Report {
    let mut demand: Vec<VariantArrivals> = control
        .cluster
        .demand
        .take_unshared()
        .into_iter()
        .map(|(variant, a)| VariantArrivals {
            variant,
            rows: a.rows,
            slo_ms: a.slo_ms,
            min_accuracy: a.min_accuracy,
            loads_for_queries: a.loads_for_queries,
        })
        .collect();
    demand.sort_by(|a, b| a.variant.cmp(&b.variant));
    let mut pipelines: Vec<PipelineArrivals> = control
        .pipelines
        .take_unshared()
        .into_iter()
        .map(|((tenant, pipeline), at_ms)| PipelineArrivals {
            tenant,
            pipeline,
            at_ms,
        })
        .collect();
    pipelines.sort_by(|a, b| (&a.tenant, &a.pipeline).cmp(&(&b.tenant, &b.pipeline)));
    Report {
        demand,
        traffic: control.traffic.take_unshared(),
        pipelines,
    }
}

/// Merges another replica's report; `with_demand` false takes only its traffic (reports
/// published before this replica started planning).
fn merge(control: &ControlPlane, report: &Report, with_demand: bool) {
    if with_demand {
        for d in &report.demand {
            control.cluster.demand.merge(
                &d.variant,
                &Arrivals {
                    rows: d.rows,
                    slo_ms: d.slo_ms,
                    min_accuracy: d.min_accuracy,
                    loads_for_queries: d.loads_for_queries,
                },
            );
        }
    }
    for t in &report.traffic {
        control.traffic.merge(t);
    }
    for p in &report.pipelines {
        control
            .pipelines
            .merge_arrivals(&p.tenant, &p.pipeline, &p.at_ms);
    }
}

/// Publishes and reads every [`PERIOD`] until `shutdown` (nothing on a database that holds
/// one replica).
pub async fn run(control: ControlPlane, shutdown: CancellationToken) {
    if !enabled(control.db.kind()) {
        return;
    }
    control.cluster.demand.share();
    control.traffic.share();
    control.pipelines.share();
    let me = control.leadership.replica().to_string();
    let mut seq: i64 = 0;
    // The last report taken from each replica; `None` before the first read.
    let mut taken: Option<HashMap<String, i64>> = None;
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut rounds: u64 = 0;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        let report = collect(&control);
        if !report.is_empty() {
            seq += 1;
            let published = match serde_json::to_string(&report) {
                Ok(body) => control.db.publish_arrivals(&me, seq, &body).await,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot encode an arrival report");
                    Ok(())
                }
            };
            if let Err(e) = published {
                tracing::warn!(error = %e, "cannot publish this replica's arrivals; the other replicas miss them");
            }
        }
        match control.db.arrivals_since(&me, WINDOW_MS).await {
            Ok(reports) => {
                let first = taken.is_none();
                let taken = taken.get_or_insert_with(HashMap::new);
                for r in reports {
                    let last = taken.get(&r.replica).copied().unwrap_or(0);
                    if r.seq <= last {
                        continue;
                    }
                    taken.insert(r.replica.clone(), r.seq);
                    match serde_json::from_str::<Report>(&r.body) {
                        Ok(report) => merge(&control, &report, !first),
                        Err(e) => {
                            tracing::warn!(replica = %r.replica, seq = r.seq, error = %e, "an unreadable arrival report")
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot read the other replicas' arrivals"),
        }
        rounds += 1;
        if rounds.is_multiple_of(30) {
            if let Err(e) = control.db.prune_arrivals(KEEP_MS).await {
                tracing::warn!(error = %e, "cannot remove old arrival reports");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_report_reads_back_and_an_old_body_without_fields_is_empty() {
        let r = Report {
            demand: vec![VariantArrivals {
                variant: "v".into(),
                rows: 3,
                slo_ms: Some(20.0),
                min_accuracy: None,
                loads_for_queries: 1,
            }],
            traffic: vec![SecondArrivals {
                tenant: "t".into(),
                app: "a".into(),
                second: 1_700_000_000,
                count: 3,
                slo_ms: None,
                min_accuracy: Some(0.9),
            }],
            pipelines: vec![PipelineArrivals {
                tenant: "t".into(),
                pipeline: "p".into(),
                at_ms: vec![1_700_000_000_123, 1_700_000_000_456],
            }],
        };
        let body = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Report>(&body).unwrap(), r);
        assert!(serde_json::from_str::<Report>("{}").unwrap().is_empty());
        assert!(enabled(DbKind::Postgres) && !enabled(DbKind::Sqlite));
    }
}
