//! Prometheus metrics: requests by route and status, latency histograms.

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process-wide recorder once; later calls return the same handle.
pub fn install() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let buckets = [
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                1.0, 2.5, 5.0, 10.0,
            ];
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &buckets)
                .ok()?;
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            match metrics::set_global_recorder(recorder) {
                Ok(()) => {
                    start_upkeep(handle.clone());
                    Some(handle)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "a metrics recorder was already installed");
                    None
                }
            }
        })
        .clone()
}

/// How often histogram samples are folded into their buckets.
const UPKEEP: std::time::Duration = std::time::Duration::from_secs(1);

/// A recorder built with `build_recorder` keeps every histogram sample until the histogram is
/// rendered: a server nobody scrapes would grow by 8 bytes per sample without end (about
/// 0.3 MB a minute at a few hundred queries/s). A thread folds them into the buckets every
/// [`UPKEEP`], so memory stays flat whether or not `/metrics` is scraped.
fn start_upkeep(handle: PrometheusHandle) {
    let spawned = std::thread::Builder::new()
        .name("infaas-metrics".into())
        .spawn(move || loop {
            std::thread::sleep(UPKEEP);
            handle.run_upkeep();
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the metrics upkeep thread; histograms grow until /metrics is scraped");
    }
}

/// Middleware: counts every request by method, matched route and status, and records
/// its latency.
pub async fn track(req: Request, next: Next) -> Response {
    let start = Instant::now();
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".to_string());
    let resp = next.run(req).await;
    let status = resp.status().as_u16().to_string();
    let labels = [("method", method), ("route", route), ("status", status)];
    metrics::counter!("infaas_http_requests_total", &labels).increment(1);
    metrics::histogram!("infaas_http_request_duration_seconds", &labels[..2])
        .record(start.elapsed().as_secs_f64());
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resident_bytes() -> u64 {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
        let pages: u64 = statm
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        pages * 4096
    }

    /// Histogram samples do not pile up when nobody scrapes `/metrics`: six million samples
    /// (48 MB if kept) leave the resident memory within a few MB.
    #[test]
    fn unscraped_histograms_do_not_grow() {
        assert!(install().is_some());
        let h = metrics::histogram!("infaas_test_unscraped_seconds", "route" => "/x");
        for _ in 0..200_000 {
            h.record(0.001);
        }
        std::thread::sleep(UPKEEP * 2);
        let before = resident_bytes();
        for _ in 0..6 {
            for _ in 0..1_000_000 {
                h.record(0.001);
            }
            std::thread::sleep(UPKEEP + UPKEEP / 2);
        }
        let grown = resident_bytes().saturating_sub(before);
        assert!(
            grown < 20 << 20,
            "resident memory grew by {} MB",
            grown >> 20
        );
    }
}
