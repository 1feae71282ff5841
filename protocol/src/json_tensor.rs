//! Tensors as JSON, shared by the infaas v1 API and the v2 protocol:
//! `{"name", "datatype", "shape", "parameters"?, "data"}` where `data` is flat
//! (row-major) or nested by the shape.

use std::fmt;

use infaas_core::{DataType, Tensor, TensorData};
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Number, Value};

use crate::error::{ProtocolError, Role, TensorProblem};
use crate::shape;

/// A tensor as it appears on the wire. Parse it with [`tensor_from_json`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonTensor {
    pub name: String,
    /// A v2 datatype name (`FP32`, `INT64`, `BYTES`, ...).
    pub datatype: String,
    /// v2 shapes are `int64`; negative dimensions are rejected when parsing.
    pub shape: Vec<i64>,
    /// v2 tensor parameters (`binary_data_size`, ...); empty for the v1 API.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub parameters: Map<String, Value>,
    /// Absent when the tensor travels as binary data after the JSON header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<WireData>,
}

/// A tensor's `data` as read from JSON. A flat array of numbers, the usual case, is kept as
/// numbers (16 bytes each, no [`Value`] per element, parsed in one pass); anything else
/// (nested arrays, booleans, strings, a scalar, a mixed array) as the JSON value. Both are
/// written back exactly as read.
#[derive(Debug, Clone, PartialEq)]
pub enum WireData {
    Numbers(Vec<Number>),
    Value(Value),
}

impl WireData {
    /// The data as one JSON value.
    pub fn into_value(self) -> Value {
        match self {
            WireData::Numbers(n) => Value::Array(n.into_iter().map(Value::Number).collect()),
            WireData::Value(v) => v,
        }
    }
}

impl From<Value> for WireData {
    fn from(v: Value) -> WireData {
        WireData::Value(v)
    }
}

impl PartialEq<Value> for WireData {
    fn eq(&self, other: &Value) -> bool {
        match (self, other) {
            (WireData::Value(v), o) => v == o,
            (WireData::Numbers(n), Value::Array(items)) => {
                n.len() == items.len() && n.iter().zip(items).all(|(a, b)| b.as_number() == Some(a))
            }
            _ => false,
        }
    }
}

impl fmt::Display for WireData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        f.write_str(&text)
    }
}

impl Serialize for WireData {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            WireData::Numbers(n) => n.serialize(s),
            WireData::Value(v) => v.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for WireData {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<WireData, D::Error> {
        d.deserialize_any(DataVisitor)
    }
}

struct DataVisitor;

impl<'de> Visitor<'de> for DataVisitor {
    type Value = WireData;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tensor data: an array, flat or nested by the shape")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<WireData, A::Error> {
        let mut numbers: Vec<Number> =
            Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        while let Some(e) = seq.next_element::<Element>()? {
            match e {
                Element::Number(n) => numbers.push(n),
                Element::Other(v) => {
                    // Not a flat array of numbers: the rest is read as JSON values.
                    let mut items: Vec<Value> = numbers.into_iter().map(Value::Number).collect();
                    items.push(v);
                    while let Some(v) = seq.next_element::<Value>()? {
                        items.push(v);
                    }
                    return Ok(WireData::Value(Value::Array(items)));
                }
            }
        }
        Ok(WireData::Numbers(numbers))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<WireData, A::Error> {
        Value::deserialize(MapAccessDeserializer::new(map)).map(WireData::Value)
    }

    fn visit_bool<E>(self, b: bool) -> Result<WireData, E> {
        Ok(WireData::Value(Value::Bool(b)))
    }

    fn visit_i64<E>(self, x: i64) -> Result<WireData, E> {
        Ok(WireData::Value(Value::from(x)))
    }

    fn visit_u64<E>(self, x: u64) -> Result<WireData, E> {
        Ok(WireData::Value(Value::from(x)))
    }

    fn visit_f64<E>(self, x: f64) -> Result<WireData, E> {
        Ok(WireData::Value(Value::from(x)))
    }

    fn visit_str<E>(self, x: &str) -> Result<WireData, E> {
        Ok(WireData::Value(Value::from(x)))
    }

    fn visit_string<E>(self, x: String) -> Result<WireData, E> {
        Ok(WireData::Value(Value::String(x)))
    }

    fn visit_unit<E>(self) -> Result<WireData, E> {
        Ok(WireData::Value(Value::Null))
    }

    fn visit_none<E>(self) -> Result<WireData, E> {
        Ok(WireData::Value(Value::Null))
    }
}

/// One element of an array: a number, or any other JSON value. Its visitor repeats
/// [`DataVisitor`]'s scalar cases on purpose: one visitor for both (with a flag, or a const
/// parameter) read large arrays about 7% slower (`benches/json_data.rs`).
enum Element {
    Number(Number),
    Other(Value),
}

impl<'de> Deserialize<'de> for Element {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Element, D::Error> {
        struct ElementVisitor;
        impl<'de> Visitor<'de> for ElementVisitor {
            type Value = Element;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }

            fn visit_i64<E>(self, x: i64) -> Result<Element, E> {
                Ok(Element::Number(x.into()))
            }

            fn visit_u64<E>(self, x: u64) -> Result<Element, E> {
                Ok(Element::Number(x.into()))
            }

            fn visit_f64<E>(self, x: f64) -> Result<Element, E> {
                // JSON numbers are finite; a non-finite one stays a value (null) as before.
                Ok(Number::from_f64(x).map_or(Element::Other(Value::Null), Element::Number))
            }

            fn visit_bool<E>(self, b: bool) -> Result<Element, E> {
                Ok(Element::Other(Value::Bool(b)))
            }

            fn visit_str<E>(self, x: &str) -> Result<Element, E> {
                Ok(Element::Other(Value::from(x)))
            }

            fn visit_string<E>(self, x: String) -> Result<Element, E> {
                Ok(Element::Other(Value::String(x)))
            }

            fn visit_unit<E>(self) -> Result<Element, E> {
                Ok(Element::Other(Value::Null))
            }

            fn visit_none<E>(self) -> Result<Element, E> {
                Ok(Element::Other(Value::Null))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Element, A::Error> {
                Value::deserialize(SeqAccessDeserializer::new(seq)).map(Element::Other)
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Element, A::Error> {
                Value::deserialize(MapAccessDeserializer::new(map)).map(Element::Other)
            }
        }
        d.deserialize_any(ElementVisitor)
    }
}

/// Parses an input tensor from JSON: datatype, shape and every element checked.
pub fn tensor_from_json(t: &JsonTensor) -> Result<Tensor, ProtocolError> {
    decode_json(Role::Input, t)
}

/// A tensor as JSON with flat data. JSON has no NaN or infinities: such floats are
/// written as `null` (use the binary encoding to carry them).
pub fn tensor_to_json(t: &Tensor) -> JsonTensor {
    JsonTensor {
        data: Some(WireData::Value(data_to_json(&t.data))),
        ..json_header(t)
    }
}

/// An output tensor to write as JSON: the fields of [`JsonTensor`] borrowed from the
/// tensor, `data` written straight from its typed buffer (no `Value` per element). Reads
/// back as the [`JsonTensor`] that [`tensor_to_json`] builds.
#[derive(Debug, Serialize)]
pub struct JsonTensorOut<'a> {
    pub name: &'a str,
    pub datatype: &'static str,
    pub shape: Vec<i64>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub parameters: Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<JsonData<'a>>,
}

impl<'a> JsonTensorOut<'a> {
    /// The whole tensor, data included.
    pub fn new(t: &'a Tensor) -> JsonTensorOut<'a> {
        JsonTensorOut {
            data: Some(JsonData(&t.data)),
            ..JsonTensorOut::header(t)
        }
    }

    /// Everything but the data.
    pub fn header(t: &'a Tensor) -> JsonTensorOut<'a> {
        JsonTensorOut {
            name: &t.name,
            datatype: t.dtype().as_str(),
            shape: shape::wire_dims(&t.shape),
            parameters: Map::new(),
            data: None,
        }
    }
}

/// A tensor's elements as a flat JSON array: floats shortest (an `f32` as `0.1`, not
/// `0.10000000149011612`), NaN and infinities as `null`.
#[derive(Debug, Clone, Copy)]
pub struct JsonData<'a>(pub &'a TensorData);

impl Serialize for JsonData<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            TensorData::Bool(v) => s.collect_seq(v),
            TensorData::Uint8(v) => s.collect_seq(v),
            TensorData::Int8(v) => s.collect_seq(v),
            TensorData::Int16(v) => s.collect_seq(v),
            TensorData::Int32(v) => s.collect_seq(v),
            TensorData::Int64(v) => s.collect_seq(v),
            TensorData::Fp32(v) => s.collect_seq(v.iter().map(|x| x.is_finite().then_some(x))),
            TensorData::Fp64(v) => s.collect_seq(v.iter().map(|x| x.is_finite().then_some(x))),
            TensorData::Bytes(v) => s.collect_seq(v),
        }
    }
}

/// Everything but the data.
pub(crate) fn json_header(t: &Tensor) -> JsonTensor {
    JsonTensor {
        name: t.name.clone(),
        datatype: t.dtype().as_str().to_owned(),
        shape: shape::wire_dims(&t.shape),
        parameters: Map::new(),
        data: None,
    }
}

pub(crate) fn decode_json(role: Role, t: &JsonTensor) -> Result<Tensor, ProtocolError> {
    parse(t).map_err(|p| ProtocolError::tensor(role, &t.name, p))
}

fn parse(t: &JsonTensor) -> Result<Tensor, TensorProblem> {
    let dtype = shape::datatype(&t.datatype)?;
    let (dims, count) = shape::dims(&t.shape)?;
    let count_is = |actual: usize| {
        if actual == count {
            Ok(())
        } else {
            Err(TensorProblem::ElementCount {
                shape: dims.clone(),
                expected: count,
                actual,
            })
        }
    };
    let data = match t.data.as_ref().ok_or(TensorProblem::MissingData)? {
        WireData::Numbers(numbers) => {
            count_is(numbers.len())?;
            elements(dtype, numbers)?
        }
        WireData::Value(value) => {
            let mut flat: Vec<&Value> = Vec::new();
            flatten(value, &dims, &mut flat)?;
            count_is(flat.len())?;
            elements(dtype, &flat)?
        }
    };
    Ok(Tensor::new(t.name.clone(), dims, data)?)
}

/// Collects the elements of flat or nested `data` in row-major order. Nested data must
/// follow the shape exactly; flat data is only counted (by the caller).
fn flatten<'a>(
    data: &'a Value,
    shape: &[usize],
    out: &mut Vec<&'a Value>,
) -> Result<(), TensorProblem> {
    match data {
        Value::Array(items) if items.iter().any(Value::is_array) => nested(items, shape, 0, out),
        Value::Array(items) => {
            out.extend(items);
            Ok(())
        }
        scalar if shape.is_empty() => {
            out.push(scalar);
            Ok(())
        }
        _ => Err(TensorProblem::NotAnArray),
    }
}

fn nested<'a>(
    items: &'a [Value],
    shape: &[usize],
    depth: usize,
    out: &mut Vec<&'a Value>,
) -> Result<(), TensorProblem> {
    let ragged = || TensorProblem::RaggedData {
        shape: shape.to_vec(),
    };
    let expected = *shape.get(depth).ok_or_else(ragged)?;
    if items.len() != expected {
        return Err(TensorProblem::NestedShape {
            shape: shape.to_vec(),
            depth,
            expected,
            actual: items.len(),
        });
    }
    let leaf = depth + 1 == shape.len();
    for item in items {
        match (item, leaf) {
            (Value::Array(inner), false) => nested(inner, shape, depth + 1, out)?,
            (value, true) if !value.is_array() => out.push(value),
            _ => return Err(ragged()),
        }
    }
    Ok(())
}

/// An element as the conversions read it: a JSON value, or a number kept as one.
trait JsonElement {
    fn number(&self) -> Option<&Number>;
    fn boolean(&self) -> Option<bool>;
    fn string(&self) -> Option<&str>;
}

impl JsonElement for &Value {
    fn number(&self) -> Option<&Number> {
        self.as_number()
    }

    fn boolean(&self) -> Option<bool> {
        self.as_bool()
    }

    fn string(&self) -> Option<&str> {
        self.as_str()
    }
}

impl JsonElement for Number {
    fn number(&self) -> Option<&Number> {
        Some(self)
    }

    fn boolean(&self) -> Option<bool> {
        None
    }

    fn string(&self) -> Option<&str> {
        None
    }
}

fn elements<E: JsonElement>(dtype: DataType, values: &[E]) -> Result<TensorData, TensorProblem> {
    Ok(match dtype {
        DataType::Bool => TensorData::Bool(each(values, |i, v| {
            v.boolean().ok_or(TensorProblem::WrongElementType {
                index: i,
                expected: "a boolean",
            })
        })?),
        DataType::Uint8 => TensorData::Uint8(each(values, |i, v| integer(i, v, dtype))?),
        DataType::Int8 => TensorData::Int8(each(values, |i, v| integer(i, v, dtype))?),
        DataType::Int16 => TensorData::Int16(each(values, |i, v| integer(i, v, dtype))?),
        DataType::Int32 => TensorData::Int32(each(values, |i, v| integer(i, v, dtype))?),
        DataType::Int64 => TensorData::Int64(each(values, |i, v| integer(i, v, dtype))?),
        DataType::Fp32 => TensorData::Fp32(each(values, |i, v| {
            let x = number(i, v)?;
            let y = x as f32;
            if y.is_infinite() {
                return Err(out_of_range(i, x, dtype));
            }
            Ok(y)
        })?),
        DataType::Fp64 => TensorData::Fp64(each(values, number)?),
        DataType::Bytes => TensorData::Bytes(each(values, |i, v| {
            v.string()
                .map(str::to_owned)
                .ok_or(TensorProblem::WrongElementType {
                    index: i,
                    expected: "a string",
                })
        })?),
    })
}

fn each<E, T>(
    values: &[E],
    f: impl Fn(usize, &E) -> Result<T, TensorProblem>,
) -> Result<Vec<T>, TensorProblem> {
    values.iter().enumerate().map(|(i, v)| f(i, v)).collect()
}

fn number<E: JsonElement>(index: usize, v: &E) -> Result<f64, TensorProblem> {
    // A match, not `ok_or`: the error would be built and dropped for every element.
    match v.number().and_then(Number::as_f64) {
        Some(x) => Ok(x),
        None => Err(TensorProblem::WrongElementType {
            index,
            expected: "a number",
        }),
    }
}

/// An integral JSON number (`3` or `3.0`) that fits `T`.
fn integer<E: JsonElement, T: TryFrom<i64> + TryFrom<u64>>(
    index: usize,
    v: &E,
    dtype: DataType,
) -> Result<T, TensorProblem> {
    let Some(n) = v.number() else {
        return Err(TensorProblem::WrongElementType {
            index,
            expected: "a number",
        });
    };
    if let Some(x) = n.as_i64() {
        return T::try_from(x).map_err(|_| out_of_range(index, x, dtype));
    }
    if let Some(x) = n.as_u64() {
        return T::try_from(x).map_err(|_| out_of_range(index, x, dtype));
    }
    let x = n.as_f64().unwrap_or(f64::NAN);
    if x.fract() != 0.0 || !x.is_finite() {
        return Err(TensorProblem::NotAnInteger { index, value: x });
    }
    // i64::MIN is exactly representable; i64::MAX rounds up to 2^63, hence `<`.
    if (i64::MIN as f64..i64::MAX as f64).contains(&x) {
        return T::try_from(x as i64).map_err(|_| out_of_range(index, x, dtype));
    }
    Err(out_of_range(index, x, dtype))
}

fn out_of_range(index: usize, value: impl ToString, dtype: DataType) -> TensorProblem {
    TensorProblem::OutOfRange {
        index,
        value: value.to_string(),
        datatype: dtype.as_str(),
    }
}

fn data_to_json(data: &TensorData) -> Value {
    fn arr<T: Copy>(v: &[T], f: impl Fn(T) -> Value) -> Value {
        Value::Array(v.iter().map(|&x| f(x)).collect())
    }
    match data {
        TensorData::Bool(v) => arr(v, Value::Bool),
        TensorData::Uint8(v) => arr(v, Value::from),
        TensorData::Int8(v) => arr(v, Value::from),
        TensorData::Int16(v) => arr(v, Value::from),
        TensorData::Int32(v) => arr(v, Value::from),
        TensorData::Int64(v) => arr(v, Value::from),
        TensorData::Fp32(v) => arr(v, f32_to_json),
        TensorData::Fp64(v) => arr(v, Value::from),
        TensorData::Bytes(v) => Value::Array(v.iter().map(|s| Value::from(s.as_str())).collect()),
    }
}

/// The shortest decimal that reads back as the same f32 (`0.1`, not
/// `0.10000000149011612`); `null` for NaN and infinities.
fn f32_to_json(x: f32) -> Value {
    x.to_string()
        .parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
        .map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tensor(v: Value) -> JsonTensor {
        serde_json::from_value(v).unwrap()
    }

    fn err(v: Value) -> String {
        tensor_from_json(&tensor(v)).unwrap_err().to_string()
    }

    #[test]
    fn every_datatype_round_trips() {
        let cases = [
            TensorData::Bool(vec![true, false, true, true]),
            TensorData::Uint8(vec![0, 1, 200, 255]),
            TensorData::Int8(vec![-128, -1, 0, 127]),
            TensorData::Int16(vec![i16::MIN, -2, 3, i16::MAX]),
            TensorData::Int32(vec![i32::MIN, -2, 3, i32::MAX]),
            TensorData::Int64(vec![i64::MIN, -2, 3, i64::MAX]),
            TensorData::Fp32(vec![0.1, -2.5, f32::MAX, f32::MIN_POSITIVE]),
            TensorData::Fp64(vec![0.1, -2.5, f64::MAX, 5e-324]),
            TensorData::Bytes(vec![
                "cat".into(),
                String::new(),
                "日本".into(),
                "\"q\"".into(),
            ]),
        ];
        for data in cases {
            let t = Tensor::new("x", vec![2, 2], data).unwrap();
            let j = tensor_to_json(&t);
            assert_eq!(j.datatype, t.dtype().as_str());
            // Through text, as on the wire.
            let text = serde_json::to_string(&j).unwrap();
            let back: JsonTensor = serde_json::from_str(&text).unwrap();
            assert_eq!(tensor_from_json(&back).unwrap(), t, "{text}");
        }
    }

    #[test]
    fn written_data_is_what_the_json_value_writes() {
        let floats = [
            0.1f32,
            -2.5,
            1e-7,
            1e20,
            3.4028235e38,
            f32::MIN_POSITIVE,
            1.0e-45,
            0.0,
            -0.0,
            16_777_217.0,
            0.333_333_34,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ];
        let cases = [
            TensorData::Bool(vec![true, false]),
            TensorData::Uint8(vec![0, 255]),
            TensorData::Int8(vec![-128, 127]),
            TensorData::Int16(vec![i16::MIN, i16::MAX]),
            TensorData::Int32(vec![i32::MIN, i32::MAX]),
            TensorData::Int64(vec![i64::MIN, i64::MAX]),
            TensorData::Fp32(floats.to_vec()),
            TensorData::Fp32((1..2000).map(|i| (i as f32).sqrt() / 7.0).collect()),
            TensorData::Fp64(vec![0.1, 5e-324, f64::MAX, f64::NAN, f64::INFINITY]),
            TensorData::Bytes(vec!["cat".into(), String::new(), "\"q\"\n日本".into()]),
        ];
        for data in cases {
            let n = data.len();
            let t = Tensor::new("out", vec![n], data).unwrap();
            // Byte for byte what the `Value` path writes.
            let text = serde_json::to_string(&JsonTensorOut::new(&t)).unwrap();
            assert_eq!(text, serde_json::to_string(&tensor_to_json(&t)).unwrap());
            let header = serde_json::to_string(&JsonTensorOut::header(&t)).unwrap();
            assert_eq!(header, serde_json::to_string(&json_header(&t)).unwrap());
        }
    }

    #[test]
    fn f32_is_written_shortest() {
        let t = Tensor::new("x", vec![3], TensorData::Fp32(vec![0.1, 1.0, 1e-7])).unwrap();
        let text = serde_json::to_string(&tensor_to_json(&t).data).unwrap();
        assert_eq!(text, "[0.1,1.0,1e-7]");
    }

    #[test]
    fn non_finite_floats_become_null() {
        let t = Tensor::new("x", vec![2], TensorData::Fp32(vec![f32::NAN, 1.0])).unwrap();
        assert_eq!(tensor_to_json(&t).data.unwrap(), json!([null, 1.0]));
        assert_eq!(
            err(json!({"name": "x", "datatype": "FP32", "shape": [2], "data": [null, 1]})),
            "input 'x': element 0 is not a number"
        );
    }

    #[test]
    fn nested_and_flat_data_agree() {
        let flat = tensor(json!({"name": "x", "datatype": "INT32", "shape": [2, 3],
            "data": [1, 2, 3, 4, 5, 6]}));
        let nested = tensor(json!({"name": "x", "datatype": "INT32", "shape": [2, 3],
            "data": [[1, 2, 3], [4, 5, 6]]}));
        let a = tensor_from_json(&flat).unwrap();
        assert_eq!(a, tensor_from_json(&nested).unwrap());
        assert_eq!(a.data, TensorData::Int32(vec![1, 2, 3, 4, 5, 6]));
        let deep = tensor(json!({"name": "x", "datatype": "BOOL", "shape": [2, 1, 2],
            "data": [[[true, false]], [[false, true]]]}));
        assert_eq!(
            tensor_from_json(&deep).unwrap().data,
            TensorData::Bool(vec![true, false, false, true])
        );
    }

    #[test]
    fn scalars_and_empty_tensors() {
        let scalar = tensor(json!({"name": "s", "datatype": "FP64", "shape": [], "data": 2.5}));
        assert_eq!(
            tensor_from_json(&scalar).unwrap().data,
            TensorData::Fp64(vec![2.5])
        );
        let wrapped = tensor(json!({"name": "s", "datatype": "FP64", "shape": [], "data": [2.5]}));
        assert_eq!(
            tensor_from_json(&wrapped).unwrap().shape,
            Vec::<usize>::new()
        );
        let empty = tensor(json!({"name": "e", "datatype": "FP32", "shape": [0, 4], "data": []}));
        assert_eq!(
            tensor_from_json(&empty).unwrap().data,
            TensorData::Fp32(vec![])
        );
    }

    #[test]
    fn nested_data_must_follow_the_shape() {
        assert_eq!(
            err(json!({"name": "x", "datatype": "INT32", "shape": [2, 3],
                "data": [[1, 2], [3, 4], [5, 6]]})),
            "input 'x': nested data does not match shape [2,3]: an array at depth 0 has 3 \
             elements, expected 2"
        );
        assert_eq!(
            err(json!({"name": "x", "datatype": "INT32", "shape": [2, 3],
                "data": [[1, 2, 3], [4, 5]]})),
            "input 'x': nested data does not match shape [2,3]: an array at depth 1 has 2 \
             elements, expected 3"
        );
        assert!(
            err(json!({"name": "x", "datatype": "INT32", "shape": [2, 2],
            "data": [[1, 2], 3]}))
            .contains("are mixed or nested too deep")
        );
        assert!(err(json!({"name": "x", "datatype": "INT32", "shape": [2],
            "data": [[1], [2]]}))
        .contains("are mixed or nested too deep"));
        assert_eq!(
            err(json!({"name": "x", "datatype": "INT32", "shape": [2], "data": 3})),
            "input 'x': 'data' must be an array (flat or nested by the shape)"
        );
    }

    #[test]
    fn element_count_must_match_the_shape() {
        let data: Vec<f32> = vec![0.0; 127];
        assert_eq!(
            err(json!({"name": "x", "datatype": "FP32", "shape": [2, 64], "data": data})),
            "input 'x': shape [2,64] holds 128 elements but 127 were given"
        );
        assert!(
            err(json!({"name": "x", "datatype": "FP32", "shape": [-1, 64], "data": data}))
                .contains("input 'x': shape [-1,64] has a negative dimension")
        );
    }

    #[test]
    fn datatype_must_be_supported() {
        let e = err(json!({"name": "x", "datatype": "FP8", "shape": [1], "data": [1]}));
        assert!(
            e.starts_with("input 'x': datatype 'FP8' is not supported"),
            "{e}"
        );
        // Names are case-insensitive.
        let t = tensor(json!({"name": "x", "datatype": "fp32", "shape": [1], "data": [1]}));
        assert_eq!(
            tensor_from_json(&t).unwrap().data,
            TensorData::Fp32(vec![1.0])
        );
    }

    #[test]
    fn integers_must_be_integral_and_in_range() {
        let int = |dt: &str, v: Value| {
            err(json!({"name": "x", "datatype": dt, "shape": [2], "data": [0, v]}))
        };
        assert_eq!(
            int("UINT8", json!(300)),
            "input 'x': element 1 (300) is out of range for UINT8"
        );
        assert_eq!(
            int("UINT8", json!(-1)),
            "input 'x': element 1 (-1) is out of range for UINT8"
        );
        assert!(int("INT8", json!(128)).contains("out of range for INT8"));
        assert!(int("INT16", json!(40000)).contains("out of range for INT16"));
        assert!(int("INT32", json!(1u64 << 31)).contains("out of range for INT32"));
        assert!(int("INT64", json!(u64::MAX)).contains("out of range for INT64"));
        assert!(int("INT64", json!(1e19)).contains("out of range for INT64"));
        assert_eq!(
            int("INT32", json!(2.5)),
            "input 'x': element 1 (2.5) is not an integer"
        );
        assert_eq!(
            int("INT32", json!("7")),
            "input 'x': element 1 is not a number"
        );
        // Integral floats are accepted.
        let t = tensor(json!({"name": "x", "datatype": "INT64", "shape": [2],
            "data": [3.0, -9.223372036854776e18]}));
        assert_eq!(
            tensor_from_json(&t).unwrap().data,
            TensorData::Int64(vec![3, i64::MIN])
        );
    }

    #[test]
    fn floats_accept_integers_and_reject_overflow() {
        let t = tensor(json!({"name": "x", "datatype": "FP32", "shape": [3],
            "data": [1, -2, 0.5]}));
        assert_eq!(
            tensor_from_json(&t).unwrap().data,
            TensorData::Fp32(vec![1.0, -2.0, 0.5])
        );
        assert!(
            err(json!({"name": "x", "datatype": "FP32", "shape": [1], "data": [1e39]})).contains(
                "element 0 (1000000000000000000000000000000000000000) is out of range for FP32"
            )
        );
        assert_eq!(
            err(json!({"name": "x", "datatype": "FP64", "shape": [1], "data": [true]})),
            "input 'x': element 0 is not a number"
        );
    }

    #[test]
    fn wrong_element_types_are_named() {
        assert_eq!(
            err(json!({"name": "b", "datatype": "BOOL", "shape": [2], "data": [true, 1]})),
            "input 'b': element 1 is not a boolean"
        );
        assert_eq!(
            err(json!({"name": "s", "datatype": "BYTES", "shape": [2], "data": ["a", 1]})),
            "input 's': element 1 is not a string"
        );
    }

    #[test]
    fn missing_data_is_an_error() {
        assert_eq!(
            err(json!({"name": "x", "datatype": "FP32", "shape": [1]})),
            "input 'x': has neither 'data' nor parameters.binary_data_size"
        );
    }

    /// `data` read as numbers gives the tensors and errors that reading it as JSON values
    /// gives, for every datatype, and is written back byte for byte as read.
    #[test]
    fn numbers_read_without_values_decode_and_write_as_values_do() {
        let datas = [
            "[1, 2, 3, 4]",
            "[1.5, -2.25, 3e2, 4]",
            "[0, 255, 256, -1]",
            "[1, 2.0, 3.5, 4]",
            "[9007199254740993, -9223372036854775808, 18446744073709551615, 1e300]",
            "[3.4e38, 3.5e38, -1e-45, 0.1]",
            "[1, 2, 3]",
            "[[1, 2], [3, 4]]",
            "[1, true, 3, 4]",
            "[1, \"a\", 3, null]",
            "[null, 1, 2, 3]",
            "[]",
            "7",
        ];
        for data in datas {
            let numbers: WireData = serde_json::from_str(data).unwrap();
            let value: Value = serde_json::from_str(data).unwrap();
            assert_eq!(
                serde_json::to_string(&numbers).unwrap(),
                serde_json::to_string(&value).unwrap(),
                "{data}"
            );
            assert_eq!(numbers, value, "{data}");
            let flat = data.starts_with('[') && !data[1..].contains(['[', 't', '"', 'n']);
            assert_eq!(matches!(numbers, WireData::Numbers(_)), flat, "{data}");
            for dtype in [
                "BOOL", "UINT8", "INT8", "INT16", "INT32", "INT64", "FP32", "FP64", "BYTES",
            ] {
                let tensor = |data: WireData| {
                    tensor_from_json(&JsonTensor {
                        name: "x".into(),
                        datatype: dtype.into(),
                        shape: vec![2, 2],
                        parameters: Map::new(),
                        data: Some(data),
                    })
                    .map_err(|e| e.to_string())
                };
                assert_eq!(
                    tensor(numbers.clone()),
                    tensor(WireData::Value(value.clone())),
                    "{dtype} {data}"
                );
            }
        }
    }
}
