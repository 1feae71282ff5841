//! Input objects of offline jobs, parsed into tensors shaped as a model takes them.
//!
//! - **NPZ** (`.npz`): like validation sets, a single-input model takes array `x` (or an array
//!   named like its input); a multi-input model takes `x.<input>` (or the bare input name).
//!   Float64 arrays feed float32 inputs. Other arrays (e.g. labels `y`) are ignored.
//! - **JSON lines** (`.jsonl`, `.ndjson`): one item per line; for a single-input model a line is
//!   the item's (nested) array, or an object with one key; for a multi-input model an object
//!   `{"<input>": array, ...}`. Blank lines are skipped.
//!
//! Every rejection names the object and the array or line.

use infaas_core::{DataType, Tensor, TensorData};
use infaas_protocol::{tensor_from_json, tensor_to_json, JsonTensor};
use serde_json::Value;

use crate::cluster::schema::InputSpec;

/// The formats jobs read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Npz,
    JsonLines,
}

impl Format {
    /// From an object name's extension.
    pub fn of(key: &str) -> Option<Format> {
        let lower = key.to_ascii_lowercase();
        if lower.ends_with(".npz") {
            Some(Format::Npz)
        } else if lower.ends_with(".jsonl") || lower.ends_with(".ndjson") {
            Some(Format::JsonLines)
        } else {
            None
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Npz => "npz",
            Format::JsonLines => "jsonl",
        }
    }

    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "npz" => Some(Format::Npz),
            "jsonl" => Some(Format::JsonLines),
            _ => None,
        }
    }
}

/// An input object's items: one tensor per model input, all with `rows` rows.
#[derive(Debug, Clone)]
pub struct Items {
    pub inputs: Vec<Tensor>,
    pub rows: usize,
}

impl Items {
    /// Rows `[start, start + n)`.
    pub fn slice(&self, start: usize, n: usize) -> Vec<Tensor> {
        let end = (start + n).min(self.rows);
        self.inputs
            .iter()
            .map(|t| t.slice_batch(start.min(end), end))
            .collect()
    }
}

/// Parses `bytes` of object `key` for a model with inputs `specs`.
pub fn parse(
    format: Format,
    key: &str,
    bytes: &[u8],
    specs: &[InputSpec],
) -> Result<Items, String> {
    if specs.is_empty() {
        return Err("the model's input signature is unknown".into());
    }
    let items = match format {
        Format::Npz => parse_npz(key, bytes, specs)?,
        Format::JsonLines => parse_jsonl(key, bytes, specs)?,
    };
    if items.rows == 0 {
        return Err(format!("input object '{key}' holds no items"));
    }
    Ok(items)
}

fn dtype(spec: &InputSpec) -> Result<DataType, String> {
    DataType::parse(&spec.datatype).ok_or_else(|| {
        format!(
            "input '{}' has unsupported type {}",
            spec.name, spec.datatype
        )
    })
}

fn features_fit(spec: &InputSpec, got: &[usize]) -> bool {
    spec.features.len() == got.len()
        && spec
            .features
            .iter()
            .zip(got)
            .all(|(&want, &g)| want < 0 || want as usize == g)
}

fn model_shape(spec: &InputSpec) -> String {
    let dims: Vec<String> = std::iter::once("N".to_string())
        .chain(
            spec.features
                .iter()
                .map(|d| if *d < 0 { "*".into() } else { d.to_string() }),
        )
        .collect();
    format!("[{}]", dims.join(", "))
}

fn parse_npz(key: &str, bytes: &[u8], specs: &[InputSpec]) -> Result<Items, String> {
    let arrays = infaas_protocol::npz::read_npz(bytes)
        .map_err(|e| format!("input object '{key}' is not a readable NPZ file: {e}"))?;
    let names: Vec<&str> = arrays.iter().map(|a| a.name.as_str()).collect();
    let single = specs.len() == 1;
    let mut inputs = Vec::with_capacity(specs.len());
    let mut rows: Option<(usize, String)> = None;
    for spec in specs {
        let primary = if single {
            "x".to_string()
        } else {
            format!("x.{}", spec.name)
        };
        let array = arrays
            .iter()
            .find(|a| a.name == primary)
            .or_else(|| arrays.iter().find(|a| a.name == spec.name))
            .ok_or_else(|| {
                format!(
                    "input object '{key}' has no array for input '{}' (expected '{primary}' or '{}'); it holds {:?}",
                    spec.name, spec.name, names
                )
            })?;
        let want = dtype(spec)?;
        if array.shape.is_empty() || !features_fit(spec, &array.shape[1..]) {
            return Err(format!(
                "array '{}' of '{key}' has shape {:?}; input '{}' takes {}",
                array.name,
                array.shape,
                spec.name,
                model_shape(spec)
            ));
        }
        let data = match (want, &array.data) {
            (DataType::Fp32, TensorData::Fp64(v)) => {
                TensorData::Fp32(v.iter().map(|&x| x as f32).collect())
            }
            (want, data) if data.dtype() == want => data.clone(),
            (want, data) => {
                return Err(format!(
                    "array '{}' of '{key}' holds {} values; input '{}' takes {}",
                    array.name,
                    data.dtype().as_str(),
                    spec.name,
                    want.as_str()
                ))
            }
        };
        let n = array.shape[0];
        match &rows {
            Some((r, other)) if *r != n => {
                return Err(format!(
                    "array '{}' of '{key}' has {n} rows but array '{other}' has {r}",
                    array.name
                ))
            }
            None => rows = Some((n, array.name.clone())),
            _ => {}
        }
        inputs.push(Tensor {
            name: spec.name.clone(),
            shape: array.shape.clone(),
            data,
        });
    }
    Ok(Items {
        inputs,
        rows: rows.map_or(0, |(r, _)| r),
    })
}

/// The shape of a nested JSON array (following first elements); a scalar has shape `[]`.
fn nested_shape(v: &Value) -> Vec<usize> {
    let mut shape = Vec::new();
    let mut at = v;
    while let Value::Array(a) = at {
        shape.push(a.len());
        match a.first() {
            Some(first) => at = first,
            None => break,
        }
    }
    shape
}

fn parse_jsonl(key: &str, bytes: &[u8], specs: &[InputSpec]) -> Result<Items, String> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| format!("input object '{key}' is not UTF-8 text: {e}"))?;
    let single = specs.len() == 1;
    // Per input: the rows as JSON values, and the feature shape of the first row.
    let mut columns: Vec<(Vec<Value>, Option<Vec<usize>>)> = vec![(Vec::new(), None); specs.len()];
    for (n, line) in text.lines().enumerate() {
        let line_no = n + 1;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line)
            .map_err(|e| format!("line {line_no} of '{key}' is not JSON: {e}"))?;
        let mut fields = match value {
            Value::Object(map) => map,
            array @ Value::Array(_) if single => {
                let mut map = serde_json::Map::new();
                map.insert(specs[0].name.clone(), array);
                map
            }
            _ => {
                return Err(format!(
                    "line {line_no} of '{key}' must be {}",
                    if single {
                        "an array or an object with the input's name"
                    } else {
                        "an object with one array per input"
                    }
                ))
            }
        };
        if single && fields.len() == 1 && !fields.contains_key(&specs[0].name) {
            // A single-input model takes its one array whatever the key.
            let (_, v) = fields.into_iter().next().unwrap_or_default();
            fields = serde_json::Map::new();
            fields.insert(specs[0].name.clone(), v);
        }
        for (spec, (rows, shape)) in specs.iter().zip(columns.iter_mut()) {
            let v = fields
                .remove(&spec.name)
                .ok_or_else(|| format!("line {line_no} of '{key}' has no input '{}'", spec.name))?;
            let got = nested_shape(&v);
            if !features_fit(spec, &got) {
                return Err(format!(
                    "line {line_no} of '{key}': input '{}' has shape {:?} per item; the model takes {} (without the batch dimension)",
                    spec.name,
                    got,
                    model_shape(spec)
                ));
            }
            match shape {
                Some(first) if *first != got => {
                    return Err(format!(
                        "line {line_no} of '{key}': input '{}' has shape {got:?} but earlier lines have {first:?}",
                        spec.name
                    ))
                }
                None => *shape = Some(got),
                _ => {}
            }
            rows.push(v);
        }
        if let Some(extra) = fields.keys().next() {
            return Err(format!(
                "line {line_no} of '{key}' has '{extra}', which is not an input of the model"
            ));
        }
    }
    let mut inputs = Vec::with_capacity(specs.len());
    let mut count = 0;
    for (spec, (rows, shape)) in specs.iter().zip(columns) {
        count = rows.len();
        let mut full = vec![rows.len() as i64];
        full.extend(shape.unwrap_or_default().into_iter().map(|d| d as i64));
        let t = tensor_from_json(&JsonTensor {
            name: spec.name.clone(),
            datatype: spec.datatype.clone(),
            shape: full,
            parameters: Default::default(),
            data: Some(Value::Array(rows).into()),
        })
        .map_err(|e| format!("'{key}', input '{}': {e}", spec.name))?;
        inputs.push(t);
    }
    Ok(Items {
        inputs,
        rows: count,
    })
}

/// One JSON line per item of a batch's outputs: `{"item": N, "outputs": [tensor, ...]}`, each
/// tensor with the item's shape (no batch dimension) and flat data.
pub fn output_lines(first_item: i64, outputs: &[Tensor], out: &mut Vec<u8>) -> Result<(), String> {
    let rows = outputs.first().map_or(0, Tensor::batch_len);
    for r in 0..rows {
        let tensors: Vec<Value> = outputs
            .iter()
            .map(|t| {
                let mut j = tensor_to_json(&t.slice_batch(r, r + 1));
                j.shape.remove(0);
                serde_json::to_value(&j).unwrap_or(Value::Null)
            })
            .collect();
        let line = serde_json::json!({"item": first_item + r as i64, "outputs": tensors});
        serde_json::to_writer(&mut *out, &line).map_err(|e| e.to_string())?;
        out.push(b'\n');
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, features: &[i64]) -> InputSpec {
        InputSpec {
            name: name.into(),
            datatype: "FP32".into(),
            features: features.to_vec(),
        }
    }

    #[test]
    fn json_lines_take_arrays_or_objects() {
        let specs = [spec("pixels", &[2])];
        let text = "[1, 2]\n\n{\"pixels\": [3, 4]}\n{\"whatever\": [5, 6]}\n";
        let items = parse(Format::JsonLines, "a.jsonl", text.as_bytes(), &specs).unwrap();
        assert_eq!(items.rows, 3);
        assert_eq!(items.inputs[0].shape, vec![3, 2]);
        assert_eq!(
            items.inputs[0].data,
            TensorData::Fp32(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        );
        let part = items.slice(1, 5);
        assert_eq!(part[0].shape, vec![2, 2]);
    }

    #[test]
    fn json_lines_name_the_bad_line() {
        let specs = [spec("x", &[2])];
        let err = parse(Format::JsonLines, "a.jsonl", b"[1, 2]\n[1, 2, 3]\n", &specs).unwrap_err();
        assert!(err.contains("line 2 of 'a.jsonl'"), "{err}");
        let err = parse(Format::JsonLines, "a.jsonl", b"[1, 2]\nnot json\n", &specs).unwrap_err();
        assert!(err.contains("line 2") && err.contains("not JSON"), "{err}");
        let two = [spec("left", &[1]), spec("right", &[1])];
        let err = parse(Format::JsonLines, "b.jsonl", b"{\"left\": [1]}\n", &two).unwrap_err();
        assert!(err.contains("no input 'right'"), "{err}");
        let err = parse(Format::JsonLines, "c.jsonl", b"", &specs).unwrap_err();
        assert!(err.contains("no items"), "{err}");
    }

    #[test]
    fn npz_arrays_match_inputs_by_name() {
        let x = Tensor::new("x", vec![3, 2], TensorData::Fp64(vec![0.5; 6])).unwrap();
        let y = Tensor::new("y", vec![3], TensorData::Int64(vec![0; 3])).unwrap();
        let bytes = infaas_protocol::npz::write_npz(&[x, y]).unwrap();
        let items = parse(Format::Npz, "a.npz", &bytes, &[spec("input", &[2])]).unwrap();
        assert_eq!((items.rows, items.inputs[0].name.as_str()), (3, "input"));
        assert_eq!(items.inputs[0].dtype(), DataType::Fp32);
        let err = parse(Format::Npz, "a.npz", &bytes, &[spec("input", &[3])]).unwrap_err();
        assert!(
            err.contains("array 'x' of 'a.npz' has shape [3, 2]"),
            "{err}"
        );
        let err = parse(Format::Npz, "a.npz", b"garbage", &[spec("input", &[2])]).unwrap_err();
        assert!(err.contains("not a readable NPZ"), "{err}");
    }

    #[test]
    fn outputs_become_one_line_per_item() {
        let t = Tensor::new(
            "scores",
            vec![2, 3],
            TensorData::Fp32(vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]),
        )
        .unwrap();
        let mut out = Vec::new();
        output_lines(40, &[t], &mut out).unwrap();
        let lines: Vec<Value> = std::str::from_utf8(&out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1]["item"], 41);
        assert_eq!(lines[1]["outputs"][0]["shape"], serde_json::json!([3]));
        assert_eq!(
            lines[1]["outputs"][0]["data"],
            serde_json::json!([3.0, 4.0, 5.0])
        );
    }
}
