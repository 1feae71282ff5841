//! `infaas infer`: one online query, model-less (`--app`) or to one model (`--model`).

use std::path::Path;

use anyhow::Context;
use clap::Args;
use serde_json::Value;

use crate::Client;
use infaas_protocol::v1::{InferResponse, TensorJson};

#[derive(Debug, Clone, Args)]
pub struct InferArgs {
    /// Application to query (model-less: the server picks the variant).
    #[arg(long, conflicts_with = "model", required_unless_present = "model")]
    pub app: Option<String>,
    /// Registered model to query (its best variant for the current load).
    #[arg(long)]
    pub model: Option<String>,
    /// Latency SLO in milliseconds.
    #[arg(long)]
    pub latency_ms: Option<f64>,
    /// Smallest acceptable accuracy, a fraction in [0, 1].
    #[arg(long)]
    pub min_accuracy: Option<f64>,
    /// Largest acceptable cost of the query.
    #[arg(long)]
    pub max_cost: Option<f64>,
    /// An input tensor, repeatable: `NAME=@FILE.npz` (the array NAME, `x.NAME` or `x`),
    /// `NAME=@FILE.json` or `NAME=JSON`, where the JSON is a tensor
    /// `{"shape", "datatype", "data"}` or a nested array of numbers (FP32).
    #[arg(long = "input", required = true, value_name = "NAME=@FILE|JSON")]
    pub inputs: Vec<String>,
    /// Send only the first N rows of NPZ arrays.
    #[arg(long)]
    pub rows: Option<usize>,
}

/// Why an `--input` cannot be turned into a tensor.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("--input '{0}' is not NAME=@FILE or NAME=JSON")]
    Syntax(String),
    #[error("--input {name}: cannot read {path}")]
    Read {
        name: String,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("--input {name}: {path} is not an NPZ file")]
    Npz {
        name: String,
        path: String,
        #[source]
        source: Box<infaas_protocol::npz::NpzError>,
    },
    #[error("--input {name}: {path} has no array '{name}', 'x.{name}' or 'x' (it has {found})")]
    NoArray {
        name: String,
        path: String,
        found: String,
    },
    #[error("--input {name}: invalid JSON")]
    Json {
        name: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("--input {name}: expected a tensor object {{\"shape\", \"datatype\", \"data\"}} or a nested array of numbers")]
    Shape { name: String },
}

/// Parses one `--input` argument into a wire tensor.
pub fn parse_input(arg: &str, rows: Option<usize>) -> Result<TensorJson, InputError> {
    let (name, value) = arg
        .split_once('=')
        .filter(|(n, _)| !n.is_empty())
        .ok_or_else(|| InputError::Syntax(arg.to_string()))?;
    let name = name.to_string();
    let Some(file) = value.strip_prefix('@') else {
        let v = serde_json::from_str(value).map_err(|source| InputError::Json {
            name: name.clone(),
            source,
        })?;
        return json_tensor(name, v);
    };
    let path = Path::new(file);
    let bytes = std::fs::read(path).map_err(|source| InputError::Read {
        name: name.clone(),
        path: file.to_string(),
        source,
    })?;
    if file.to_ascii_lowercase().ends_with(".npz") {
        let arrays = infaas_protocol::npz::read_npz(&bytes).map_err(|e| InputError::Npz {
            name: name.clone(),
            path: file.to_string(),
            source: Box::new(e),
        })?;
        let wanted = [name.clone(), format!("x.{name}"), "x".to_string()];
        let Some(t) = wanted
            .iter()
            .find_map(|w| arrays.iter().find(|a| &a.name == w))
        else {
            return Err(InputError::NoArray {
                name,
                path: file.to_string(),
                found: arrays
                    .iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let t = match rows {
            Some(n) if n < t.batch_len() => t.slice_batch(0, n),
            _ => t.clone(),
        };
        let j = infaas_protocol::tensor_to_json(&t);
        return Ok(TensorJson {
            name,
            shape: j.shape,
            datatype: j.datatype,
            data: j.data.unwrap_or(Value::Null.into()),
        });
    }
    let v = serde_json::from_slice(&bytes).map_err(|source| InputError::Json {
        name: name.clone(),
        source,
    })?;
    json_tensor(name, v)
}

/// A tensor object, or a nested array of numbers taken as FP32 with its nesting as shape.
fn json_tensor(name: String, v: Value) -> Result<TensorJson, InputError> {
    if v.is_object() {
        let mut v = v;
        if let Some(o) = v.as_object_mut() {
            o.insert("name".into(), Value::String(name.clone()));
        }
        return serde_json::from_value(v).map_err(|source| InputError::Json { name, source });
    }
    let shape = nested_shape(&v).ok_or_else(|| InputError::Shape { name: name.clone() })?;
    Ok(TensorJson {
        name,
        shape,
        datatype: "FP32".into(),
        data: v.into(),
    })
}

/// The shape of a rectangular nested array of numbers.
fn nested_shape(v: &Value) -> Option<Vec<i64>> {
    match v {
        Value::Number(_) => Some(Vec::new()),
        Value::Array(items) => {
            let first = nested_shape(items.first()?)?;
            if items
                .iter()
                .skip(1)
                .any(|i| nested_shape(i).as_ref() != Some(&first))
            {
                return None;
            }
            let mut shape = vec![items.len() as i64];
            shape.extend(first);
            Some(shape)
        }
        _ => None,
    }
}

/// Sends the query; the raw JSON answer and its typed form.
pub async fn run(client: &Client, args: &InferArgs) -> anyhow::Result<(Value, InferResponse)> {
    let inputs = args
        .inputs
        .iter()
        .map(|a| parse_input(a, args.rows))
        .collect::<Result<Vec<_>, _>>()?;
    let mut body = serde_json::json!({ "inputs": inputs });
    for (key, v) in [
        ("latency_ms", args.latency_ms),
        ("min_accuracy", args.min_accuracy),
        ("max_cost", args.max_cost),
    ] {
        if let Some(v) = v {
            body[key] = v.into();
        }
    }
    let path = match (&args.app, &args.model) {
        (Some(app), _) => format!("/v1/apps/{app}/infer"),
        (None, Some(m)) => format!("/v1/models/{m}/infer"),
        (None, None) => anyhow::bail!("pass --app or --model"),
    };
    let raw: Value = client
        .send_json(client.request(reqwest::Method::POST, &path).json(&body))
        .await?;
    let typed = serde_json::from_value(raw.clone())
        .context("the server's answer is not an inference response")?;
    Ok((raw, typed))
}

/// Prints the answer as a table: outputs, then how the query was served.
pub fn print(r: &InferResponse) {
    println!("{:<16} {:<8} {:<12} DATA", "OUTPUT", "TYPE", "SHAPE");
    for o in &r.outputs {
        let shape = format!("{:?}", o.shape);
        let mut data = o.data.to_string();
        if data.len() > 80 {
            let cut = data
                .char_indices()
                .nth(77)
                .map(|(i, _)| i)
                .unwrap_or(data.len());
            data.truncate(cut);
            data.push_str("...");
        }
        println!("{:<16} {:<8} {:<12} {data}", o.name, o.datatype, shape);
    }
    println!();
    println!("app        {}", r.app);
    println!("model      {}", r.model);
    println!("variant    {} (accuracy {:.4})", r.variant, r.accuracy);
    println!("worker     {} ({})", r.worker, r.hardware);
    println!("reason     {}", r.reason);
    println!(
        "latency    {:.3} ms (predicted {:.3} ms), cost {:.6}",
        r.latency_ms, r.predicted_ms, r.cost
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_json_inputs() {
        let t = parse_input("input=[[1, 2, 3], [4, 5, 6]]", None).expect("a tensor");
        assert_eq!((t.name.as_str(), t.shape.clone()), ("input", vec![2, 3]));
        assert_eq!(t.datatype, "FP32");
        let t = parse_input(
            r#"ids={"shape": [1], "datatype": "INT64", "data": [7]}"#,
            None,
        )
        .expect("a tensor");
        assert_eq!((t.name.as_str(), t.datatype.as_str()), ("ids", "INT64"));
    }

    #[test]
    fn bad_inputs_name_the_problem() {
        let e = parse_input("no-equals", None).expect_err("no name");
        assert!(e.to_string().contains("NAME=@FILE"), "{e}");
        let e = parse_input("x=[[1], [2, 3]]", None).expect_err("ragged");
        assert!(e.to_string().contains("nested array"), "{e}");
        let e = parse_input("x=@/nonexistent/file.npz", None).expect_err("missing file");
        assert!(e.to_string().contains("/nonexistent/file.npz"), "{e}");
    }

    #[test]
    fn npz_inputs_take_the_named_array_and_rows() {
        let zoo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../zoo/digits-val.npz");
        let arg = format!("input=@{}", zoo.display());
        let t = parse_input(&arg, Some(2)).expect("a tensor");
        assert_eq!(t.shape, vec![2, 64]);
        assert_eq!(
            t.data.clone().into_value().as_array().map(Vec::len),
            Some(128)
        );
        let two = Path::new(env!("CARGO_MANIFEST_DIR")).join("../zoo/digits-two-input-val.npz");
        let e = parse_input(&format!("nope=@{}", two.display()), None).expect_err("no array");
        assert!(e.to_string().contains("has no array 'nope'"), "{e}");
    }
}
