//! Reading a JSON tensor's `data`: numbers read as numbers ([`WireData`]) against a JSON value
//! per element (what the tensor JSON was read as before), for a 64-element row (a small
//! query) and a 224 x 224 x 3 image (150,528 elements, a large one). Each is parsed from the
//! same text and decoded to an FP32 tensor; medians over rounds.
//!
//! Run: `cargo bench -p infaas-protocol --bench json_data`

use std::time::{Duration, Instant};

use infaas_core::stats::median;
use infaas_protocol::{tensor_from_json, JsonTensor, WireData};
use serde::Deserialize;
use serde_json::Value;

/// The tensor JSON as it was read before: `data` as one JSON value.
#[derive(Deserialize)]
struct ValueTensor {
    name: String,
    datatype: String,
    shape: Vec<i64>,
    data: Value,
}

fn body(n: usize) -> String {
    let data: Vec<String> = (0..n)
        .map(|i| format!("{}", ((i * 7919) % 1000) as f32 / 997.0))
        .collect();
    format!(
        r#"{{"name": "x", "datatype": "FP32", "shape": [1, {n}], "data": [{}]}}"#,
        data.join(", ")
    )
}

fn time(rounds: usize, f: impl Fn()) -> Duration {
    for _ in 0..rounds.div_ceil(10) {
        f();
    }
    median(
        (0..rounds)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
    .unwrap_or_default()
}

fn main() {
    println!(
        "bytes held per element while decoding: {} as a value, {} as a number",
        std::mem::size_of::<Value>(),
        std::mem::size_of::<serde_json::Number>()
    );
    println!(
        "{:<28} {:>14} {:>14} {:>7}",
        "data", "as values", "as numbers", "ratio"
    );
    for (label, n, rounds) in [
        ("64 elements", 64, 20_000),
        ("150,528 elements", 150_528, 30),
    ] {
        let text = body(n);
        let numbers = || {
            let t: JsonTensor = serde_json::from_str(&text).expect("a tensor");
            assert!(matches!(t.data, Some(WireData::Numbers(_))));
            std::hint::black_box(tensor_from_json(&t).expect("decoded"));
        };
        let values = || {
            let v: ValueTensor = serde_json::from_str(&text).expect("a tensor");
            let t = JsonTensor {
                name: v.name,
                datatype: v.datatype,
                shape: v.shape,
                parameters: Default::default(),
                data: Some(WireData::Value(v.data)),
            };
            std::hint::black_box(tensor_from_json(&t).expect("decoded"));
        };
        let (a, b) = (time(rounds, values), time(rounds, numbers));
        println!(
            "{label:<28} {:>11.1} us {:>11.1} us {:>7.2}",
            a.as_secs_f64() * 1e6,
            b.as_secs_f64() * 1e6,
            a.as_secs_f64() / b.as_secs_f64()
        );
    }
}
