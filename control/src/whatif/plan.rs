//! A what-if request checked into what a run needs: the trace (recorded, uploaded or
//! generated) within the limits, the policies, the simulated cluster and the tenant's
//! variants with the profiles the platform measured. Pure functions; each refusal names the
//! field, the line, the application or the limit.

use infaas_protocol::v1::{TraceSource, WhatIfCluster, WhatIfRequest, WhatIfTrace};
use infaas_scheduler::autoscale::ScalingConfig;
use infaas_scheduler::{Prices, VariantEntry};
use infaas_sim::generate::{Generator, Shape};
use infaas_sim::policy::NAMES;
use infaas_sim::trace::Trace;
use infaas_sim::Cluster;

use crate::cluster::Catalog;
use crate::config::{AutoscaleConfig, WhatIfConfig};
use crate::error::Error;

/// Longest generator spec, in characters.
pub const MAX_SPEC_CHARS: usize = 1000;
/// Most workers of either kind in a simulated cluster.
pub const MAX_WORKERS: u32 = 256;
/// Most cores of a simulated worker.
pub const MAX_CORES: u32 = 1024;
/// Highest headroom a run may ask for.
pub const MAX_SLACK: f64 = 100.0;
/// Most values of `request_overhead_ms`.
pub const MAX_OVERHEAD_SAMPLES: usize = 10_000;

/// What a run simulates.
#[derive(Debug, Clone)]
pub struct WhatIfSetup {
    pub trace: Trace,
    pub policies: Vec<String>,
    pub cluster: Cluster,
    pub scaling: ScalingConfig,
    pub variants: Vec<VariantEntry>,
}

/// The live platform, for the defaults of the simulated cluster.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LiveCluster {
    pub cpu_workers: u32,
    pub gpu_workers: u32,
    /// The largest thread budget of a live worker.
    pub cores: u32,
    /// The largest memory budget of a live worker.
    pub memory_bytes: u64,
}

/// The policies to compare: known names, each once, at least one.
pub fn policies(names: &[String]) -> Result<Vec<String>, Error> {
    if names.is_empty() {
        return Err(Error::Invalid(format!(
            "policies is empty: name one or more of {}",
            NAMES.join(", ")
        )));
    }
    if names.len() > NAMES.len() {
        return Err(Error::Invalid(format!(
            "policies names {} policies; at most {} (each of {} once)",
            names.len(),
            NAMES.len(),
            NAMES.join(", ")
        )));
    }
    for (i, name) in names.iter().enumerate() {
        if !NAMES.contains(&name.as_str()) {
            return Err(Error::Invalid(format!(
                "unknown policy '{name}'; expected one of {}",
                NAMES.join(", ")
            )));
        }
        if names[..i].contains(name) {
            return Err(Error::Invalid(format!("policy '{name}' is named twice")));
        }
    }
    Ok(names.to_vec())
}

/// The simulated cluster: the request's sizes, else the live platform's; the server's
/// prices and autoscaler headroom unless the request sets `slack`.
pub fn cluster(
    req: &WhatIfRequest,
    live: &LiveCluster,
    autoscale: &AutoscaleConfig,
    prices: Prices,
) -> Result<(Cluster, ScalingConfig, WhatIfCluster), Error> {
    let (mut cpu_workers, gpu_workers) = (
        req.cpu_workers.unwrap_or(live.cpu_workers),
        req.gpu_workers.unwrap_or(live.gpu_workers),
    );
    if req.cpu_workers.is_none() && cpu_workers + gpu_workers == 0 {
        cpu_workers = 1;
    }
    let cores = req.cpu_cores.unwrap_or(live.cores.max(1));
    for (field, v) in [("cpu_workers", cpu_workers), ("gpu_workers", gpu_workers)] {
        if v > MAX_WORKERS {
            return Err(Error::Invalid(format!(
                "{field} {v} is over the limit of {MAX_WORKERS}"
            )));
        }
    }
    // Valid sizes, yet no cluster to simulate: unprocessable (422), like a trace naming an
    // application the tenant does not have. (The schema cannot say it: a size that is not
    // given is the live cluster's.)
    if cpu_workers + gpu_workers == 0 {
        return Err(Error::Unprocessable(format!(
            "the simulated cluster needs a worker: cpu_workers and gpu_workers are both 0{}; give one of them at least 1",
            if req.gpu_workers.is_none() {
                " (gpu_workers was not given: the live GPU workers, none)"
            } else {
                ""
            }
        )));
    }
    if !(1..=MAX_CORES).contains(&cores) {
        return Err(Error::Invalid(format!(
            "cpu_cores {cores} must be from 1 to {MAX_CORES}"
        )));
    }
    let scaling = match req.slack {
        Some(slack) if !(slack.is_finite() && (1.0..=MAX_SLACK).contains(&slack)) => {
            return Err(Error::Invalid(format!(
                "slack {slack} must be from 1 to {MAX_SLACK}"
            )))
        }
        // As `infaas sim --slack`: scale down above 1.5 x slack / 1.05.
        Some(slack) => ScalingConfig {
            slack,
            scale_down: ScalingConfig::with_slack(slack).scale_down,
            ..autoscale.scaling()
        },
        None => autoscale.scaling(),
    };
    let (max_cpu, max_gpu) = (
        req.max_cpu_workers.unwrap_or(cpu_workers),
        req.max_gpu_workers.unwrap_or(gpu_workers),
    );
    for (field, v, at_least) in [
        ("max_cpu_workers", max_cpu, cpu_workers),
        ("max_gpu_workers", max_gpu, gpu_workers),
    ] {
        if v > MAX_WORKERS || v < at_least {
            return Err(Error::Invalid(format!(
                "{field} {v} must be from {at_least} (the workers the cluster starts with) to {MAX_WORKERS}"
            )));
        }
    }
    let start_s = req.worker_start_s.unwrap_or(30.0);
    if !(start_s.is_finite() && (0.0..=3600.0).contains(&start_s)) {
        return Err(Error::Invalid(format!(
            "worker_start_s {start_s} must be from 0 to 3600"
        )));
    }
    let overhead = req.request_overhead_ms.clone().unwrap_or_default();
    if overhead.len() > MAX_OVERHEAD_SAMPLES {
        return Err(Error::Invalid(format!(
            "request_overhead_ms has {} values, over the limit of {MAX_OVERHEAD_SAMPLES}",
            overhead.len()
        )));
    }
    if let Some(bad) = overhead
        .iter()
        .find(|v| !(v.is_finite() && (0.0..=60_000.0).contains(*v)))
    {
        return Err(Error::Invalid(format!(
            "request_overhead_ms holds {bad}: every value must be from 0 to 60000 ms"
        )));
    }
    let request_cpu_ms = req.request_cpu_ms.unwrap_or(0.0);
    if !infaas_sim::request_cpu_ms_accepted(request_cpu_ms) {
        return Err(Error::Invalid(format!(
            "request_cpu_ms {request_cpu_ms} must be from 0 to {} ms",
            infaas_sim::MAX_REQUEST_CPU_MS
        )));
    }
    let defaults = Cluster::default();
    let cluster = Cluster {
        request_cpu_ms,
        cold_start: req.cold_start.unwrap_or(false),
        max_cpu_workers: max_cpu as usize,
        max_gpu_workers: max_gpu as usize,
        worker_start_ms: start_s * 1e3,
        request_overhead_ms: overhead,
        cpu_workers: cpu_workers as usize,
        cpu_cores: cores as usize,
        gpu_workers: gpu_workers as usize,
        gpu_worker_cores: cores as usize,
        worker_memory_bytes: if live.memory_bytes > 0 {
            live.memory_bytes
        } else {
            defaults.worker_memory_bytes
        },
        prices,
        ..defaults
    };
    let view = WhatIfCluster {
        cpu_workers,
        cpu_cores: cores,
        gpu_workers,
        slack: scaling.slack,
        variants: 0,
    };
    Ok((cluster, scaling, view))
}

/// The trace of a request, within the limits. `recorded(app, minutes)` exports the tenant's
/// recorded traffic; `apps` are the tenant's applications.
pub fn trace(
    source: &TraceSource,
    limits: &WhatIfConfig,
    apps: &[String],
    recorded: impl FnOnce(Option<&str>, u64) -> (Trace, u64),
) -> Result<(Trace, WhatIfTrace), Error> {
    let (trace, kind, description) = match source {
        TraceSource::Recorded(r) => {
            if !(1..=10_080).contains(&r.minutes) {
                return Err(Error::Invalid(format!(
                    "trace.recorded.minutes {} must be from 1 to 10080",
                    r.minutes
                )));
            }
            if let Some(app) = &r.app {
                known_app(app, apps)?;
            }
            let (trace, horizon) = recorded(r.app.as_deref(), u64::from(r.minutes));
            let what = match &r.app {
                Some(app) => format!("application '{app}'"),
                None => "the tenant's applications".to_string(),
            };
            if trace.arrivals.is_empty() {
                return Err(Error::Unprocessable(format!(
                    "no query to {what} was recorded in the last {} minutes (the platform keeps {horizon} minutes): send queries first, or use a CSV trace or a generator",
                    r.minutes
                )));
            }
            (
                trace,
                "recorded",
                format!("recorded traffic of {what} over {} minutes", r.minutes),
            )
        }
        TraceSource::Csv(text) => {
            if text.len() as u64 > limits.max_csv_bytes {
                return Err(Error::TooLarge(format!(
                    "the CSV trace has {} bytes, over the limit of {} (whatif.max_csv_bytes)",
                    text.len(),
                    limits.max_csv_bytes
                )));
            }
            let trace = Trace::parse_csv(text, "the CSV trace")
                .map_err(|e| Error::Invalid(e.to_string()))?;
            (trace, "csv", "uploaded CSV".to_string())
        }
        TraceSource::Generate(spec) => {
            if spec.chars().count() > MAX_SPEC_CHARS {
                return Err(Error::Invalid(format!(
                    "trace.generate has more than {MAX_SPEC_CHARS} characters"
                )));
            }
            let generator: Generator = spec
                .parse()
                .map_err(|e: infaas_sim::trace::TraceError| Error::Invalid(e.to_string()))?;
            check_duration(generator.duration_s, limits)?;
            // Thinning draws up to peak rate x duration candidates: refuse a spec that is
            // certain to be far over the limit before drawing them.
            let most = peak_rate(&generator.shape) * generator.duration_s;
            if most > 2.0 * limits.max_queries as f64 {
                return Err(Error::Unprocessable(format!(
                    "generator '{spec}' would make up to {most:.0} queries, over the limit of {} (whatif.max_queries)",
                    limits.max_queries
                )));
            }
            let trace = generator.generate();
            if trace.arrivals.is_empty() {
                return Err(Error::Unprocessable(format!(
                    "generator '{spec}' made no query: raise its rate or duration"
                )));
            }
            (trace, "generate", spec.clone())
        }
    };
    if trace.arrivals.len() as u64 > limits.max_queries {
        return Err(Error::Unprocessable(format!(
            "the trace has {} queries, over the limit of {} (whatif.max_queries)",
            trace.arrivals.len(),
            limits.max_queries
        )));
    }
    check_duration(trace.duration_ms() / 1e3, limits)?;
    let info = WhatIfTrace {
        source: kind.to_string(),
        description,
        queries: trace.arrivals.len() as u64,
        apps: trace.apps.clone(),
        duration_s: trace.duration_ms() / 1e3,
    };
    Ok((trace, info))
}

fn check_duration(seconds: f64, limits: &WhatIfConfig) -> Result<(), Error> {
    if seconds > limits.max_duration_s as f64 {
        return Err(Error::Unprocessable(format!(
            "the trace lasts {seconds:.0} s, over the limit of {} s (whatif.max_duration_s)",
            limits.max_duration_s
        )));
    }
    Ok(())
}

/// The highest rate a generator's shape reaches, queries per second.
fn peak_rate(shape: &Shape) -> f64 {
    match *shape {
        Shape::Poisson { rate } | Shape::Gamma { rate, .. } => rate,
        Shape::Step { from, to, .. } => from.max(to),
        Shape::Burst { base, peak, .. } => base.max(peak),
        Shape::Diurnal {
            mean, amplitude, ..
        } => mean * (1.0 + amplitude.abs()),
    }
}

/// What a refusal says of an application the tenant does not have.
fn not_the_tenants(apps: &[String]) -> String {
    if apps.is_empty() {
        "the tenant has none; register a model first".to_string()
    } else {
        format!("the tenant's applications: {}", apps.join(", "))
    }
}

fn known_app(app: &str, apps: &[String]) -> Result<(), Error> {
    if apps.iter().any(|a| a == app) {
        return Ok(());
    }
    Err(Error::Unprocessable(format!(
        "application '{app}' is not an application of the tenant ({})",
        not_the_tenants(apps)
    )))
}

/// The tenant's profiled variants as the simulator's entries, each under its application's
/// name (the simulator holds every variant under one tenant of its own), sorted by id.
pub fn tenant_variants(catalog: &Catalog, tenant: &str) -> Vec<VariantEntry> {
    let mut out: Vec<VariantEntry> = catalog
        .variants()
        .filter(|s| s.entry.tenant_id == tenant)
        .filter(|s| s.entry.variant.accuracy.is_some() && !s.entry.variant.latency.is_empty())
        .map(|s| s.selector_entry(s.entry.app.clone()))
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// Every application the trace names is the tenant's and has a profiled variant.
pub fn check_apps(trace: &Trace, variants: &[VariantEntry], apps: &[String]) -> Result<(), Error> {
    for app in &trace.apps {
        if !apps.contains(app) {
            return Err(Error::Unprocessable(format!(
                "the trace names application '{app}', which is not an application of the tenant ({})",
                not_the_tenants(apps)
            )));
        }
        if !variants.iter().any(|v| &v.app == app) {
            return Err(Error::Unprocessable(format!(
                "application '{app}' has no profiled variant to simulate yet (see GET /v1/apps/{app})"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use infaas_protocol::v1::RecordedTrace;

    fn request(trace: TraceSource) -> WhatIfRequest {
        WhatIfRequest {
            trace,
            policies: vec!["static_peak".into()],
            cpu_workers: None,
            cpu_cores: None,
            gpu_workers: None,
            slack: None,
            max_cpu_workers: None,
            max_gpu_workers: None,
            worker_start_s: None,
            request_overhead_ms: None,
            request_cpu_ms: None,
            cold_start: None,
        }
    }

    fn message(e: Error) -> (String, &'static str) {
        let kind = match &e {
            Error::Invalid(_) => "invalid",
            Error::TooLarge(_) => "too large",
            Error::Unprocessable(_) => "unprocessable",
            _ => "other",
        };
        (e.to_string(), kind)
    }

    fn apps() -> Vec<String> {
        vec!["digits".into(), "faces".into()]
    }

    fn no_record(_: Option<&str>, _: u64) -> (Trace, u64) {
        (Trace::default(), 60)
    }

    #[test]
    fn policies_are_known_distinct_and_bounded() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            policies(&names(&["infaas_greedy", "static_peak"])).unwrap(),
            ["infaas_greedy", "static_peak"]
        );
        for (given, says) in [
            (names(&[]), "policies is empty"),
            (
                names(&["fastest"]),
                "unknown policy 'fastest'; expected one of static_peak",
            ),
            (
                names(&["horizontal", "horizontal"]),
                "policy 'horizontal' is named twice",
            ),
            (names(&["horizontal"; 5]), "at most 4"),
        ] {
            let (m, kind) = message(policies(&given).unwrap_err());
            assert!(m.contains(says), "{given:?}: {m}");
            assert_eq!(kind, "invalid");
        }
    }

    #[test]
    fn the_cluster_defaults_to_the_live_one_and_checks_sizes() {
        let live = LiveCluster {
            cpu_workers: 2,
            gpu_workers: 0,
            cores: 8,
            memory_bytes: 1 << 30,
        };
        let a = AutoscaleConfig::default();
        let (c, s, v) = cluster(
            &request(TraceSource::Csv(String::new())),
            &live,
            &a,
            Prices::default(),
        )
        .unwrap();
        assert_eq!((c.cpu_workers, c.cpu_cores, c.gpu_workers), (2, 8, 0));
        assert_eq!(c.worker_memory_bytes, 1 << 30);
        assert_eq!((c.request_cpu_ms, c.cold_start), (0.0, false));
        assert_eq!((s.slack, s.scale_down), (a.slack, a.scale_down));
        assert_eq!((v.cpu_workers, v.cpu_cores, v.slack), (2, 8, a.slack));
        let mut r = request(TraceSource::Csv(String::new()));
        r.cpu_workers = Some(5);
        r.slack = Some(2.1);
        r.request_cpu_ms = Some(0.75);
        r.cold_start = Some(true);
        let (c, s, _) = cluster(&r, &live, &a, Prices::default()).unwrap();
        assert_eq!(c.cpu_workers, 5);
        assert_eq!((c.request_cpu_ms, c.cold_start), (0.75, true));
        assert!((s.scale_down - 3.0).abs() < 1e-9);
        let base = || request(TraceSource::Csv(String::new()));
        // No worker at all: sizes within the limits, a cluster that cannot be simulated.
        for (cpu, gpu) in [(Some(0), None), (Some(0), Some(0))] {
            let r = WhatIfRequest {
                cpu_workers: cpu,
                gpu_workers: gpu,
                ..base()
            };
            let (m, kind) = message(cluster(&r, &live, &a, Prices::default()).unwrap_err());
            assert!(m.contains("needs a worker"), "{m}");
            assert!(
                m.contains("cpu_workers") && m.contains("gpu_workers"),
                "{m}"
            );
            assert_eq!(kind, "unprocessable", "{m}");
        }
        for (r, says) in [
            (
                WhatIfRequest {
                    gpu_workers: Some(300),
                    ..base()
                },
                "gpu_workers 300 is over the limit of 256",
            ),
            (
                WhatIfRequest {
                    cpu_cores: Some(0),
                    ..base()
                },
                "cpu_cores 0 must be from 1 to 1024",
            ),
            (
                WhatIfRequest {
                    slack: Some(0.5),
                    ..base()
                },
                "slack 0.5 must be from 1",
            ),
            (
                WhatIfRequest {
                    cpu_workers: Some(2),
                    max_cpu_workers: Some(1),
                    ..base()
                },
                "max_cpu_workers 1 must be from 2",
            ),
            (
                WhatIfRequest {
                    worker_start_s: Some(-1.0),
                    ..base()
                },
                "worker_start_s -1 must be from 0 to 3600",
            ),
            (
                WhatIfRequest {
                    request_overhead_ms: Some(vec![0.5, -2.0]),
                    ..base()
                },
                "request_overhead_ms holds -2",
            ),
            (
                WhatIfRequest {
                    request_overhead_ms: Some(vec![1.0; 10_001]),
                    ..base()
                },
                "request_overhead_ms has 10001 values, over the limit of 10000",
            ),
            (
                WhatIfRequest {
                    request_cpu_ms: Some(1500.0),
                    ..base()
                },
                "request_cpu_ms 1500 must be from 0 to 1000 ms",
            ),
            (
                WhatIfRequest {
                    request_cpu_ms: Some(f64::NAN),
                    ..base()
                },
                "request_cpu_ms NaN must be from 0 to 1000 ms",
            ),
        ] {
            let (m, kind) = message(cluster(&r, &live, &a, Prices::default()).unwrap_err());
            assert!(m.contains(says), "{m}");
            assert_eq!(kind, "invalid");
        }
    }

    #[test]
    fn traces_come_from_csv_a_generator_or_the_record_within_the_limits() {
        let limits = WhatIfConfig::default();
        let csv = "time_ms,app,slo_ms,min_accuracy\n0,digits,100,\n500,digits,100,\n";
        let (t, info) = trace(&TraceSource::Csv(csv.into()), &limits, &apps(), no_record).unwrap();
        assert_eq!(t.arrivals.len(), 2);
        assert_eq!((info.source.as_str(), info.queries), ("csv", 2));
        assert_eq!(info.duration_s, 0.5);
        let spec = "poisson:rate=50,duration=10,app=digits,slo=100";
        let (t, info) = trace(
            &TraceSource::Generate(spec.into()),
            &limits,
            &apps(),
            no_record,
        )
        .unwrap();
        assert!(t.arrivals.len() > 300, "{}", t.arrivals.len());
        assert_eq!(info.description, spec);
        assert_eq!(info.apps, ["digits"]);
        let mut recorded = Trace::default();
        let app = recorded.app_index("digits");
        recorded.arrivals.push(infaas_sim::trace::Arrival {
            at_ms: 500.0,
            app,
            slo_ms: None,
            min_accuracy: None,
        });
        let source = TraceSource::Recorded(RecordedTrace {
            app: Some("digits".into()),
            minutes: 5,
        });
        let (t, info) = trace(&source, &limits, &apps(), |a, m| {
            assert_eq!((a, m), (Some("digits"), 5));
            (recorded.clone(), 60)
        })
        .unwrap();
        assert_eq!(t, recorded);
        assert_eq!(info.source, "recorded");

        let small = WhatIfConfig {
            max_queries: 100,
            max_csv_bytes: 64,
            max_duration_s: 60,
            ..WhatIfConfig::default()
        };
        let long_csv = format!(
            "time_ms,app,slo_ms,min_accuracy\n{}",
            "0,digits,,\n".repeat(10)
        );
        for (source, says, kind) in [
            (
                TraceSource::Csv("time_ms,app,slo_ms,min_accuracy\n0,digits,100,\nx,digits,,\n".into()),
                "the CSV trace, line 3: time_ms 'x'",
                "invalid",
            ),
            (
                TraceSource::Csv("time_ms,app,slo_ms,min_accuracy\n".into()),
                "the CSV trace holds no arrivals",
                "invalid",
            ),
            (TraceSource::Csv(long_csv), "over the limit of 64 (whatif.max_csv_bytes)", "too large"),
            (
                TraceSource::Generate("poisson:rate=50".into()),
                "'duration' is required",
                "invalid",
            ),
            (
                TraceSource::Generate("poisson:rate=50,duration=61,app=digits".into()),
                "over the limit of 60 s (whatif.max_duration_s)",
                "unprocessable",
            ),
            (
                TraceSource::Generate("poisson:rate=1e6,duration=50,app=digits".into()),
                "over the limit of 100 (whatif.max_queries)",
                "unprocessable",
            ),
            (
                TraceSource::Generate("poisson:rate=3,duration=50,app=digits".into()),
                "the trace has",
                "unprocessable",
            ),
            (
                TraceSource::Generate("poisson:rate=0,duration=50,app=digits".into()),
                "made no query",
                "unprocessable",
            ),
            (
                TraceSource::Recorded(RecordedTrace {
                    app: Some("nope".into()),
                    minutes: 5,
                }),
                "application 'nope' is not an application of the tenant (the tenant's applications: digits, faces)",
                "unprocessable",
            ),
            (
                TraceSource::Recorded(RecordedTrace {
                    app: None,
                    minutes: 5,
                }),
                "no query to the tenant's applications was recorded in the last 5 minutes",
                "unprocessable",
            ),
            (
                TraceSource::Recorded(RecordedTrace {
                    app: None,
                    minutes: 0,
                }),
                "minutes 0 must be from 1",
                "invalid",
            ),
        ] {
            let (m, k) = message(trace(&source, &small, &apps(), no_record).unwrap_err());
            assert!(m.contains(says), "{source:?}: {m}");
            assert_eq!(k, kind, "{m}");
        }
    }

    #[test]
    fn every_application_of_the_trace_needs_profiled_variants() {
        let mut t = Trace::default();
        t.app_index("digits");
        let variant = |app: &str| VariantEntry {
            id: "v".into(),
            name: "v".into(),
            model: "m".into(),
            app: app.into(),
            accuracy: 0.9,
            hardware: infaas_core::HardwareKind::Cpu,
            threads: 1,
            max_batch: 1,
            load_ms: 1.0,
            memory_bytes: 1,
            latency: vec![],
        };
        check_apps(&t, &[variant("digits")], &apps()).unwrap();
        let (m, _) = message(check_apps(&t, &[variant("faces")], &apps()).unwrap_err());
        assert!(
            m.contains("application 'digits' has no profiled variant"),
            "{m}"
        );
        t.app_index("cats");
        let (m, kind) = message(check_apps(&t, &[variant("digits")], &apps()).unwrap_err());
        assert_eq!(
            m,
            "the trace names application 'cats', which is not an application of the tenant (the tenant's applications: digits, faces)"
        );
        assert_eq!(kind, "unprocessable");
    }
}
