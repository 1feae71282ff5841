//! Forecasters on the Proteus Twitter traces: per-second arrival rates (all applications),
//! errors measured on each trace's second half. Ignored by default (third-party data): `scripts/test.sh` runs it when the data is beside the repository, and it fails without the data (`INFAAS_PROTEUS_TRACES`, `INFAAS_PROTEUS_PROFILES` point elsewhere).

#![allow(clippy::unwrap_used)]

mod common;

use common::traces;
use infaas_eval::forecast::{evaluate_proteus, BEST, HORIZONS, PATTERNS};

/// The model fitted on each trace's first half forecasts its second half better than the
/// naive forecast (the last second's rate) on most traces, at every horizon, and never
/// noticeably worse; on the Twitter-derived traces the fit finds their 12-second season.
#[test]
#[ignore = "an evaluation on third-party data (the Proteus traces): scripts/test.sh runs it when the data is beside the repository"]
fn the_fitted_forecaster_beats_the_naive_one_on_most_proteus_traces() {
    let dir = traces();
    let table = evaluate_proteus(&dir).unwrap();
    println!("{table}");
    for (h, horizon) in HORIZONS.iter().enumerate() {
        let mut wins = Vec::new();
        for p in PATTERNS {
            let best = table.row(p, BEST).unwrap().errors[h].mape;
            let naive = table.row(p, "last-value").unwrap().errors[h].mape;
            assert!(
                best <= 1.05 * naive,
                "{p}, {horizon} s: fitted {best} vs naive {naive}\n{table}"
            );
            if best < 0.9 * naive {
                wins.push(p);
            }
        }
        assert!(
            wins.len() >= 4,
            "{horizon} s ahead, the fitted model is 10% better than the naive one only on {wins:?}\n{table}"
        );
    }
    let seasonal = PATTERNS
        .iter()
        .filter(|p| {
            table
                .rows
                .iter()
                .any(|r| r.trace == **p && r.model.contains("season=12"))
        })
        .count();
    assert!(seasonal >= 4, "{table}");
}
