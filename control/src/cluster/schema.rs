//! Input schemas: which models of an application can take a query's inputs.
//!
//! A single-input model takes any one tensor of its dtype and feature shape, whatever its
//! name (the tensor is renamed to the model's input); a model with several inputs needs
//! them by name.

use infaas_core::Tensor;

/// One model input from a stored signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputSpec {
    pub name: String,
    pub datatype: String,
    /// Dimensions after the batch dimension; -1 for a dynamic one.
    pub features: Vec<i64>,
}

/// Inputs of a model from its stored signature JSON.
pub fn inputs_of(signature: Option<&serde_json::Value>) -> Vec<InputSpec> {
    let Some(inputs) = signature.and_then(|s| s["inputs"].as_array()) else {
        return Vec::new();
    };
    inputs
        .iter()
        .filter_map(|i| {
            let shape: Vec<i64> = i["shape"]
                .as_array()?
                .iter()
                .filter_map(|d| d.as_i64())
                .collect();
            Some(InputSpec {
                name: i["name"].as_str()?.to_string(),
                datatype: i["datatype"].as_str()?.to_string(),
                features: shape.into_iter().skip(1).collect(),
            })
        })
        .collect()
}

fn dims(features: &[i64]) -> String {
    features
        .iter()
        .map(|d| {
            if *d < 0 {
                "*".to_string()
            } else {
                d.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("x")
}

/// The key under which a model's variants are indexed for its application.
pub fn model_key(inputs: &[InputSpec]) -> String {
    match inputs {
        [one] => format!("{}:{}", one.datatype, dims(&one.features)),
        many => {
            let mut parts: Vec<String> = many
                .iter()
                .map(|i| format!("{}={}:{}", i.name, i.datatype, dims(&i.features)))
                .collect();
            parts.sort();
            parts.join("|")
        }
    }
}

/// The key of a query's inputs, comparable with [`model_key`].
pub fn query_key(inputs: &[Tensor]) -> String {
    let feats = |t: &Tensor| -> Vec<i64> { t.shape.iter().skip(1).map(|&d| d as i64).collect() };
    match inputs {
        [one] => format!("{}:{}", one.dtype().as_str(), dims(&feats(one))),
        many => {
            let mut parts: Vec<String> = many
                .iter()
                .map(|t| format!("{}={}:{}", t.name, t.dtype().as_str(), dims(&feats(t))))
                .collect();
            parts.sort();
            parts.join("|")
        }
    }
}

/// Whether a model with inputs `specs` takes `inputs` (the batch dimension aside): one input
/// of the right dtype and feature shape whatever its name for a single-input model, every
/// input by name otherwise. A dynamic feature dimension (-1) takes any size.
pub fn accepts(specs: &[InputSpec], inputs: &[Tensor]) -> bool {
    let fits = |spec: &InputSpec, t: &Tensor| {
        spec.datatype == t.dtype().as_str()
            && spec.features.len() + 1 == t.shape.len()
            && spec
                .features
                .iter()
                .zip(&t.shape[1..])
                .all(|(&want, &got)| want < 0 || want as usize == got)
    };
    match (specs, inputs) {
        ([spec], [t]) => fits(spec, t),
        _ => {
            specs.len() == inputs.len()
                && specs.iter().all(|spec| {
                    inputs
                        .iter()
                        .find(|t| t.name == spec.name)
                        .is_some_and(|t| fits(spec, t))
                })
        }
    }
}

/// The application key of a schema in the selection index.
pub fn app_key(app: &str, key: &str) -> String {
    format!("{app}\u{1f}{key}")
}

/// Renames a single input to the model's input name (no-op otherwise).
pub fn adapt(mut inputs: Vec<Tensor>, model_inputs: &[InputSpec]) -> Vec<Tensor> {
    if let ([t], [spec]) = (inputs.as_mut_slice(), model_inputs) {
        t.name = spec.name.clone();
    }
    inputs
}

/// Human-readable description of input specs, for error messages.
pub fn describe(inputs: &[InputSpec]) -> String {
    inputs
        .iter()
        .map(|i| {
            format!(
                "{} {} [-1, {}]",
                i.name,
                i.datatype,
                i.features
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn dynamic_feature_dimensions_take_any_size() {
        let sig = serde_json::json!({"inputs": [{"name": "tokens", "datatype": "INT64", "shape": [-1, -1]}]});
        let specs = inputs_of(Some(&sig));
        for n in [1usize, 7, 300] {
            let t = Tensor::new("ids", vec![2, n], TensorData::Int64(vec![0; 2 * n])).unwrap();
            assert!(accepts(&specs, &[t]));
        }
        let rank3 = Tensor::new("ids", vec![1, 2, 2], TensorData::Int64(vec![0; 4])).unwrap();
        assert!(!accepts(&specs, &[rank3]));
    }

    use super::*;
    use infaas_core::TensorData;

    #[test]
    fn single_input_models_match_any_name() {
        let sig = serde_json::json!({"inputs": [{"name": "pixels", "datatype": "FP32", "shape": [-1, 64]}]});
        let specs = inputs_of(Some(&sig));
        let t = Tensor::new("input", vec![2, 64], TensorData::Fp32(vec![0.0; 128])).unwrap();
        assert_eq!(model_key(&specs), query_key(std::slice::from_ref(&t)));
        assert!(accepts(&specs, std::slice::from_ref(&t)));
        let fp64 = Tensor::new("input", vec![2, 64], TensorData::Fp64(vec![0.0; 128])).unwrap();
        assert!(!accepts(&specs, &[fp64]));
        let adapted = adapt(vec![t], &specs);
        assert_eq!(adapted[0].name, "pixels");
    }

    #[test]
    fn multi_input_models_match_by_name() {
        let sig = serde_json::json!({"inputs": [
            {"name": "left", "datatype": "FP32", "shape": [-1, 32]},
            {"name": "right", "datatype": "FP32", "shape": [-1, 32]}]});
        let specs = inputs_of(Some(&sig));
        let l = Tensor::new("right", vec![1, 32], TensorData::Fp32(vec![0.0; 32])).unwrap();
        let r = Tensor::new("left", vec![1, 32], TensorData::Fp32(vec![0.0; 32])).unwrap();
        assert_eq!(model_key(&specs), query_key(&[l.clone(), r.clone()]));
        let wrong = Tensor::new("x", vec![1, 32], TensorData::Fp32(vec![0.0; 32])).unwrap();
        assert!(accepts(&specs, &[l.clone(), r.clone()]));
        assert!(!accepts(&specs, &[l.clone(), wrong.clone()]));
        assert!(!accepts(&specs, std::slice::from_ref(&l)));
        assert_ne!(model_key(&specs), query_key(&[l, wrong]));
    }
}
