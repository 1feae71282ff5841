//! Tensors moved between the controller and its workers: the v2 response layout with every
//! tensor binary (a JSON header of names, datatypes and shapes, then the raw data).

use infaas_core::Tensor;
use serde_json::Map;

use crate::{decode_v2_response, encode_v2_response, ProtocolError, V2Request};

/// Encodes tensors; returns the body and the length of its JSON header.
pub fn encode_tensors(tensors: &[Tensor]) -> Result<(Vec<u8>, usize), ProtocolError> {
    let req = V2Request {
        id: None,
        parameters: Map::new(),
        inputs: Vec::new(),
        outputs: Vec::new(),
        binary_output_default: true,
    };
    let enc = encode_v2_response("frame", None, None, tensors, &req, Map::new())?;
    let header = enc.header_length.unwrap_or(enc.body.len());
    Ok((enc.body, header))
}

/// Decodes what [`encode_tensors`] produced.
pub fn decode_tensors(body: &[u8], header_length: usize) -> Result<Vec<Tensor>, ProtocolError> {
    Ok(decode_v2_response(body, Some(header_length))?.outputs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use infaas_core::TensorData;

    #[test]
    fn frames_round_trip() {
        let t = vec![
            Tensor::new("a", vec![2, 2], TensorData::Fp32(vec![1.0, 2.0, 3.0, 4.5])).unwrap(),
            Tensor::new("b", vec![2], TensorData::Int64(vec![-1, 7])).unwrap(),
            Tensor::new("c", vec![1], TensorData::Bytes(vec!["seven".into()])).unwrap(),
        ];
        let (body, header) = encode_tensors(&t).unwrap();
        assert!(header < body.len());
        assert_eq!(decode_tensors(&body, header).unwrap(), t);
        assert!(decode_tensors(&body[..body.len() - 1], header).is_err());
    }
}
