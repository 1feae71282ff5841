//! `infaas loadgen`: an open-loop load generator. Requests arrive as a Poisson process at a
//! given rate (exponential gaps, independent of answers), or at the times of a trace in the
//! simulator's CSV format (`--trace`: each query to its application with its own SLO and
//! minimum accuracy), each one a row of a validation set; it reports p50/p99 latency,
//! throughput and SLO attainment. `--pipeline` sends the queries to a pipeline.

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use rand::Rng;

use infaas_core::stats::percentile;

use crate::Client;

#[derive(Debug, Clone, Args)]
pub struct LoadgenArgs {
    /// Application to query (model-less); or use --model or --trace.
    #[arg(long, conflicts_with = "model")]
    pub app: Option<String>,
    /// Replay this trace (`time_ms,app,slo_ms,min_accuracy`, as `infaas sim --trace` reads it)
    /// instead of Poisson arrivals: every query at its time, to its application, with its SLO
    /// and minimum accuracy.
    #[arg(long, conflicts_with_all = ["app", "model", "rate", "duration", "latency_ms", "min_accuracy"])]
    pub trace: Option<std::path::PathBuf>,
    /// Registered model to query.
    #[arg(long, conflicts_with = "pipeline")]
    pub model: Option<String>,
    /// Pipeline to query (`POST /v1/pipelines/{name}/infer`); --latency-ms overrides its SLO.
    #[arg(long, conflicts_with_all = ["app", "model"])]
    pub pipeline: Option<String>,
    /// Mean arrival rate, requests per second (0: one request at a time, closed loop).
    #[arg(long, default_value_t = 50.0)]
    pub rate: f64,
    /// How long to send, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Latency SLO in ms, sent with every query and used for attainment.
    #[arg(long)]
    pub latency_ms: Option<f64>,
    #[arg(long)]
    pub min_accuracy: Option<f64>,
    /// NPZ whose rows are sent (one row per request), laid out as a validation set: an array
    /// `x`, sent as the input named by --input, or one array `x.<name>` per model input, each
    /// sent under its own name (several inputs, any dtype).
    #[arg(long)]
    pub npz: std::path::PathBuf,
    /// Input tensor name of the array `x`.
    #[arg(long, default_value = "input")]
    pub input: String,
    /// Closed-loop clients when --rate is 0: each sends its next request when its last one
    /// is answered (the throughput at saturation).
    #[arg(long, default_value_t = 1)]
    pub connections: usize,
    /// Seed of the arrival process.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Summary of a run.
#[derive(Debug, serde::Serialize)]
pub struct Report {
    pub sent: usize,
    pub ok: usize,
    pub errors: std::collections::BTreeMap<u16, usize>,
    pub seconds: f64,
    pub throughput_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Latency percentiles 1 to 99 of the successful answers, ms (an empirical
    /// distribution, e.g. of the request path for `POST /v1/whatif`'s `request_overhead_ms`).
    pub percentiles_ms: Vec<f64>,
    /// Fraction of successful answers within the SLO (over all requests sent).
    pub slo_attainment: Option<f64>,
    /// Variants that answered, with counts (for a pipeline, `node=variant, ...`).
    pub variants: std::collections::BTreeMap<String, usize>,
    /// Latency the server measured (its answers' `latency_ms`), p50 and p99, ms.
    pub server_p50_ms: Option<f64>,
    pub server_p99_ms: Option<f64>,
}

/// What served a query: its variant, or for a pipeline the variants of the nodes that ran.
fn served_by(answer: &serde_json::Value) -> Option<String> {
    if let Some(v) = answer["variant"].as_str() {
        return Some(v.to_string());
    }
    let nodes = answer["nodes"].as_array()?;
    let parts: Vec<String> = nodes
        .iter()
        .filter_map(|n| {
            Some(format!(
                "{}={}",
                n["node"].as_str()?,
                n["variant"].as_str()?
            ))
        })
        .collect();
    Some(parts.join(", "))
}

pub async fn run(client: &Client, args: &LoadgenArgs) -> anyhow::Result<Report> {
    let bytes =
        std::fs::read(&args.npz).with_context(|| format!("reading {}", args.npz.display()))?;
    let arrays = infaas_protocol::npz::read_npz(&bytes)?;
    let bodies: Vec<Inputs> = request_bodies(arrays, &args.input)?
        .iter()
        .map(Inputs::encode)
        .collect::<anyhow::Result<_>>()?;
    let trace = match &args.trace {
        Some(p) => Some(infaas_core::trace::Trace::read_csv(p)?),
        None => None,
    };
    let path = match (&args.app, &args.model, &args.pipeline, &trace) {
        (_, _, _, Some(_)) => String::new(),
        (Some(app), _, _, _) => format!("/v1/apps/{app}/infer"),
        (None, Some(m), _, _) => format!("/v1/models/{m}/infer"),
        (None, None, Some(p), _) => format!("/v1/pipelines/{p}/infer"),
        (None, None, None, None) => anyhow::bail!("pass --app, --model, --pipeline or --trace"),
    };
    let client = std::sync::Arc::new(client.clone_handle());
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    let start = Instant::now();
    let end = Duration::from_secs_f64(args.duration.max(0.1));
    if args.rate <= 0.0 && trace.is_none() && args.connections > 1 {
        let bodies: Vec<Vec<u8>> = bodies
            .iter()
            .map(|b| b.body(args.latency_ms, args.min_accuracy))
            .collect();
        return closed_loop(client, bodies, path, args, start, end).await;
    }
    let mut tasks = tokio::task::JoinSet::new();
    let mut next = Duration::ZERO;
    let mut i = 0usize;
    let open_loop = args.rate > 0.0 || trace.is_some();
    let mut tally = Tally::default();
    loop {
        let (body, p, slo) = match &trace {
            Some(t) => {
                let Some(a) = t.arrivals.get(i) else {
                    break;
                };
                next = Duration::from_secs_f64(a.at_ms.max(0.0) / 1e3);
                let body = bodies[i % bodies.len()].body(a.slo_ms, a.min_accuracy);
                (body, format!("/v1/apps/{}/infer", t.apps[a.app]), a.slo_ms)
            }
            None if next < end => {
                let body = bodies[i % bodies.len()].body(args.latency_ms, args.min_accuracy);
                (body, path.clone(), args.latency_ms)
            }
            None => break,
        };
        if open_loop {
            tokio::time::sleep_until(tokio::time::Instant::from_std(start + next)).await;
        }
        let c = client.clone();
        let send = async move {
            let t0 = Instant::now();
            let resp = c
                .request(reqwest::Method::POST, &p)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body)
                .send()
                .await;
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            match resp {
                Ok(r) => {
                    let status = r.status().as_u16();
                    let v: serde_json::Value = r.json().await.unwrap_or_default();
                    (status, ms, served_by(&v), v["latency_ms"].as_f64(), slo)
                }
                Err(_) => (0, ms, None, None, slo),
            }
        };
        if trace.is_some() {
            tasks.spawn(send);
        } else if open_loop {
            tasks.spawn(send);
            // Exponential gap: -ln(U) / rate.
            let u: f64 = rng.random_range(f64::EPSILON..1.0);
            next += Duration::from_secs_f64(-u.ln() / args.rate);
        } else {
            tally.add(send.await);
            next = start.elapsed();
        }
        i += 1;
        // Answers are folded in as they come: a finished task kept until the end holds its
        // whole allocation (about 1.4 KB), which over an hour at 300 q/s is over a gigabyte.
        while let Some(r) = tasks.try_join_next() {
            tally.add(r?);
        }
    }
    while let Some(r) = tasks.join_next().await {
        tally.add(r?);
    }
    Ok(tally.report(i, start.elapsed().as_secs_f64()))
}

/// A request's inputs, encoded as JSON once: a request adds only its SLO and minimum accuracy,
/// so the generator spends little of the machine's cores (which it shares with the server under
/// test) on building bodies. Encoding a CNN's 3,072 floats for every request cost more core
/// time than the server's whole edge spends on it.
struct Inputs {
    /// `{"inputs":[...]` without the closing brace.
    open: String,
}

impl Inputs {
    fn encode(body: &serde_json::Value) -> anyhow::Result<Inputs> {
        let inputs = serde_json::to_string(&body["inputs"])?;
        Ok(Inputs {
            open: format!("{{\"inputs\":{inputs}"),
        })
    }

    /// The whole body, with the query's SLO and minimum accuracy when it has them.
    fn body(&self, latency_ms: Option<f64>, min_accuracy: Option<f64>) -> Vec<u8> {
        use std::fmt::Write;
        let mut out = String::with_capacity(self.open.len() + 48);
        out.push_str(&self.open);
        // A non-finite value is no JSON number: sent as null (the server names the field).
        let mut field = |name: &str, v: Option<f64>| {
            if let Some(v) = v {
                match serde_json::Number::from_f64(v) {
                    Some(n) => _ = write!(out, ",\"{name}\":{n}"),
                    None => _ = write!(out, ",\"{name}\":null"),
                }
            }
        };
        field("latency_ms", latency_ms);
        field("min_accuracy", min_accuracy);
        out.push('}');
        out.into_bytes()
    }
}

/// One request body per row of the NPZ (at most 1,000): the array `x` as the input named
/// `input`, or every array `x.<name>` as the input `<name>`.
fn request_bodies(
    arrays: Vec<infaas_core::Tensor>,
    input: &str,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let inputs: Vec<(String, infaas_core::Tensor)> = match arrays.iter().position(|t| t.name == "x")
    {
        Some(i) => vec![(input.to_string(), arrays[i].clone())],
        None => arrays
            .into_iter()
            .filter_map(|t| Some((t.name.strip_prefix("x.")?.to_string(), t.clone())))
            .collect(),
    };
    anyhow::ensure!(
        !inputs.is_empty(),
        "the NPZ has no array 'x' and no array 'x.<input name>'"
    );
    let rows = inputs
        .iter()
        .map(|(_, t)| t.batch_len())
        .min()
        .unwrap_or(0)
        .max(1);
    Ok((0..rows.min(1000))
        .map(|i| {
            let tensors: Vec<_> = inputs
                .iter()
                .map(|(name, x)| {
                    let mut t = infaas_protocol::tensor_to_json(&x.slice_batch(i, i + 1));
                    t.name = name.clone();
                    t
                })
                .collect();
            serde_json::json!({ "inputs": tensors })
        })
        .collect())
}

/// `connections` clients, each sending its next request when the last one is answered, until
/// `end`.
async fn closed_loop(
    client: std::sync::Arc<Client>,
    bodies: Vec<Vec<u8>>,
    path: String,
    args: &LoadgenArgs,
    start: Instant,
    end: Duration,
) -> anyhow::Result<Report> {
    let bodies = std::sync::Arc::new(bodies);
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..args.connections {
        let (client, bodies, path, slo) = (
            client.clone(),
            bodies.clone(),
            path.clone(),
            args.latency_ms,
        );
        tasks.spawn(async move {
            let mut tally = Tally::default();
            let mut i = c;
            while start.elapsed() < end {
                let t0 = Instant::now();
                let resp = client
                    .request(reqwest::Method::POST, &path)
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(bodies[i % bodies.len()].clone())
                    .send()
                    .await;
                let ms = t0.elapsed().as_secs_f64() * 1e3;
                tally.add(match resp {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        let v: serde_json::Value = r.json().await.unwrap_or_default();
                        (status, ms, served_by(&v), v["latency_ms"].as_f64(), slo)
                    }
                    Err(_) => (0, ms, None, None, slo),
                });
                i += 1;
            }
            tally
        });
    }
    let mut all = Tally::default();
    while let Some(t) = tasks.join_next().await {
        all.merge(t?);
    }
    let sent = all.ok + all.errors.values().sum::<usize>();
    Ok(all.report(sent, start.elapsed().as_secs_f64()))
}

/// One answer: status (0: no response), client latency (ms), what served it, the server's
/// own latency (ms) and the query's SLO.
type Answer = (u16, f64, Option<String>, Option<f64>, Option<f64>);

/// The answers so far.
#[derive(Default)]
struct Tally {
    lat: Vec<f64>,
    server: Vec<f64>,
    ok: usize,
    within: usize,
    with_slo: bool,
    errors: std::collections::BTreeMap<u16, usize>,
    variants: std::collections::BTreeMap<String, usize>,
}

impl Tally {
    fn add(&mut self, (status, ms, variant, server_ms, slo): Answer) {
        self.with_slo |= slo.is_some();
        if status == 200 {
            self.ok += 1;
            self.lat.push(ms);
            self.server.extend(server_ms);
            if slo.is_none_or(|slo| ms <= slo) {
                self.within += 1;
            }
            if let Some(v) = variant {
                *self.variants.entry(v).or_default() += 1;
            }
        } else {
            *self.errors.entry(status).or_default() += 1;
        }
    }

    fn merge(&mut self, other: Tally) {
        self.lat.extend(other.lat);
        self.server.extend(other.server);
        self.ok += other.ok;
        self.within += other.within;
        self.with_slo |= other.with_slo;
        for (k, n) in other.errors {
            *self.errors.entry(k).or_default() += n;
        }
        for (k, n) in other.variants {
            *self.variants.entry(k).or_default() += n;
        }
    }

    fn report(self, sent: usize, seconds: f64) -> Report {
        let Tally {
            mut lat,
            mut server,
            ok,
            within,
            with_slo,
            errors,
            variants,
        } = self;
        let mut report = Report {
            sent,
            ok,
            errors,
            seconds,
            throughput_per_s: ok as f64 / seconds,
            p50_ms: 0.0,
            p99_ms: 0.0,
            max_ms: 0.0,
            percentiles_ms: Vec::new(),
            slo_attainment: with_slo.then(|| within as f64 / sent.max(1) as f64),
            variants,
            server_p50_ms: None,
            server_p99_ms: None,
        };
        lat.sort_by(f64::total_cmp);
        report.p50_ms = percentile(&lat, 0.50);
        report.p99_ms = percentile(&lat, 0.99);
        report.max_ms = lat.last().copied().unwrap_or(0.0);
        if !lat.is_empty() {
            report.percentiles_ms = (1..100)
                .map(|p| percentile(&lat, p as f64 / 100.0))
                .collect();
        }
        server.sort_by(f64::total_cmp);
        if !server.is_empty() {
            report.server_p50_ms = Some(percentile(&server, 0.50));
            report.server_p99_ms = Some(percentile(&server, 0.99));
        }
        report
    }
}

use rand::SeedableRng;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_fold_into_the_report() {
        let mut tally = Tally::default();
        let v = |s: &str| Some(s.to_string());
        tally.add((200, 1.0, v("a"), Some(0.5), Some(2.0)));
        tally.add((200, 3.0, v("b"), Some(0.7), Some(2.0)));
        tally.add((200, 2.0, v("a"), None, Some(2.0)));
        tally.add((429, 0.2, None, None, Some(2.0)));
        tally.add((0, 9.0, None, None, Some(2.0)));
        let r = tally.report(6, 2.0);
        assert_eq!((r.sent, r.ok), (6, 3));
        assert_eq!(r.errors, [(0, 1), (429, 1)].into_iter().collect());
        assert_eq!(
            r.variants,
            [(v("a").unwrap(), 2), (v("b").unwrap(), 1)]
                .into_iter()
                .collect()
        );
        assert_eq!(r.throughput_per_s, 1.5);
        assert_eq!((r.p50_ms, r.max_ms), (2.0, 3.0));
        assert_eq!(r.percentiles_ms.len(), 99);
        // Within the SLO: the answers at 1 and 2 ms, over every request sent.
        assert_eq!(r.slo_attainment, Some(2.0 / 6.0));
        assert_eq!(r.server_p50_ms, Some(percentile(&[0.5, 0.7], 0.5)));
    }

    #[test]
    fn every_x_array_is_an_input_of_the_request() {
        use infaas_core::{Tensor, TensorData};
        let ids = Tensor::new(
            "x.input_ids",
            vec![3, 2],
            TensorData::Int64(vec![1, 2, 3, 4, 5, 6]),
        )
        .unwrap();
        let mask = Tensor::new(
            "x.attention_mask",
            vec![3, 2],
            TensorData::Int64(vec![1, 1, 1, 0, 1, 0]),
        )
        .unwrap();
        let y = Tensor::new("y", vec![3], TensorData::Int64(vec![0, 1, 0])).unwrap();
        let bodies = request_bodies(vec![ids, mask, y], "input").unwrap();
        assert_eq!(bodies.len(), 3);
        let inputs = bodies[1]["inputs"].as_array().unwrap();
        let names: Vec<&str> = inputs.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["input_ids", "attention_mask"]);
        assert_eq!(inputs[0]["data"], serde_json::json!([3, 4]));
        assert_eq!(inputs[1]["data"], serde_json::json!([1, 0]));
        assert_eq!(inputs[0]["datatype"], "INT64");
        // A single `x` goes under the name given.
        let x = Tensor::new("x", vec![2, 1], TensorData::Fp32(vec![0.5, 1.5])).unwrap();
        let bodies = request_bodies(vec![x], "image").unwrap();
        assert_eq!(bodies[1]["inputs"][0]["name"], "image");
        assert!(request_bodies(Vec::new(), "input").is_err());
    }

    #[test]
    fn a_body_is_its_row_s_inputs_with_the_query_s_slo_and_accuracy() {
        use infaas_core::{Tensor, TensorData};
        let x = Tensor::new(
            "x",
            vec![2, 2],
            TensorData::Fp32(vec![0.5, 1.5, -2.0, 3.25]),
        )
        .unwrap();
        let bodies = request_bodies(vec![x], "image").unwrap();
        let inputs = Inputs::encode(&bodies[1]).unwrap();
        let parse = |b: Vec<u8>| serde_json::from_slice::<serde_json::Value>(&b).unwrap();
        let plain = parse(inputs.body(None, None));
        assert_eq!(plain, bodies[1]);
        let full = parse(inputs.body(Some(23.581), Some(0.9)));
        assert_eq!(full["inputs"], bodies[1]["inputs"]);
        assert_eq!(full["latency_ms"], 23.581);
        assert_eq!(full["min_accuracy"], 0.9);
        assert_eq!(full["inputs"][0]["data"], serde_json::json!([-2.0, 3.25]));
        let only_slo = parse(inputs.body(Some(5.0), None));
        assert_eq!(only_slo["latency_ms"], 5.0);
        assert!(only_slo.get("min_accuracy").is_none());
        assert_eq!(
            parse(inputs.body(Some(f64::NAN), None))["latency_ms"],
            serde_json::Value::Null
        );
    }

    #[test]
    fn no_slo_no_attainment() {
        let mut tally = Tally::default();
        tally.add((200, 1.0, None, None, None));
        let r = tally.report(1, 1.0);
        assert_eq!(r.slo_attainment, None);
        assert_eq!(r.server_p50_ms, None);
    }
}
