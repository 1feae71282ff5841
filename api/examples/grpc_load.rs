//! Closed-loop load over the Open Inference Protocol's gRPC service, for the serving benchmark
//! (`scripts/bench/serving.py`): `--connections` clients, each on its own HTTP/2 connection,
//! send 1-row FP32 queries with raw input contents back to back for `--seconds`, then one JSON
//! line: `{"rps", "p50_ms", "p99_ms", "non_2xx", "socket_errors"}` (errors are failed calls).
//!
//! Build: `cargo build --release -p infaas-api --example grpc_load`
//! Run: `grpc_load --addr 127.0.0.1:8001 --token T --model APP --input NAME --shape 1,30
//!       --connections 16 --seconds 10`

use std::time::{Duration, Instant};

use infaas_api::grpc::pb::model_infer_request::InferInputTensor;
use infaas_api::grpc::pb::ModelInferRequest;
use infaas_api::grpc::Client;
use tonic::metadata::MetadataValue;

struct Args {
    addr: String,
    token: String,
    model: String,
    input: String,
    shape: Vec<i64>,
    connections: usize,
    seconds: f64,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        addr: "127.0.0.1:8001".into(),
        token: String::new(),
        model: String::new(),
        input: "input".into(),
        shape: vec![1, 1],
        connections: 1,
        seconds: 10.0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| anyhow::anyhow!("{flag} needs a value"))?;
        match flag.as_str() {
            "--addr" => a.addr = value,
            "--token" => a.token = value,
            "--model" => a.model = value,
            "--input" => a.input = value,
            "--shape" => a.shape = value.split(',').map(str::parse).collect::<Result<_, _>>()?,
            "--connections" => a.connections = value.parse()?,
            "--seconds" => a.seconds = value.parse()?,
            other => anyhow::bail!("unknown flag {other}"),
        }
    }
    Ok(a)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let a = args()?;
    let elements: i64 = a.shape.iter().product();
    let raw: Vec<u8> = (0..elements)
        .flat_map(|i| ((i % 7) as f32 * 0.1).to_le_bytes())
        .collect();
    let request = ModelInferRequest {
        model_name: a.model.clone(),
        inputs: vec![InferInputTensor {
            name: a.input.clone(),
            datatype: "FP32".into(),
            shape: a.shape.clone(),
            ..Default::default()
        }],
        raw_input_contents: vec![raw.into()],
        ..Default::default()
    };
    let auth: MetadataValue<_> = format!("Bearer {}", a.token).parse()?;
    let until = Instant::now() + Duration::from_secs_f64(a.seconds);
    let mut clients = Vec::new();
    for _ in 0..a.connections {
        let mut client = Client::connect(format!("http://{}", a.addr)).await?;
        let (request, auth) = (request.clone(), auth.clone());
        clients.push(tokio::spawn(async move {
            let (mut latencies, mut errors) = (Vec::new(), 0u64);
            while Instant::now() < until {
                let mut r = tonic::Request::new(request.clone());
                r.metadata_mut().insert("authorization", auth.clone());
                let t = Instant::now();
                match client.model_infer(r).await {
                    Ok(_) => latencies.push(t.elapsed().as_secs_f64() * 1e3),
                    Err(_) => errors += 1,
                }
            }
            (latencies, errors)
        }));
    }
    let started = Instant::now();
    let (mut all, mut errors) = (Vec::new(), 0);
    for c in clients {
        let (l, e) = c.await?;
        all.extend(l);
        errors += e;
    }
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    all.sort_by(f64::total_cmp);
    let pct = |q: f64| {
        all.get(((all.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    println!(
        "{}",
        serde_json::json!({
            "rps": all.len() as f64 / secs,
            "p50_ms": pct(0.5),
            "p99_ms": pct(0.99),
            "non_2xx": errors,
            "socket_errors": "",
        })
    );
    Ok(())
}
