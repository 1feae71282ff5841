//! Wire formats of inference requests and responses, free of any HTTP framework:
//!
//! - tensor JSON shared by the infaas v1 API and v2 ([`JsonTensor`],
//!   [`tensor_from_json`], [`tensor_to_json`]);
//! - the Open Inference Protocol (KServe v2) REST bodies with Triton's binary tensor
//!   data extension, byte-compatible with `tritonclient.http` ([`decode_v2_request`],
//!   [`encode_v2_response`], metadata and error documents);
//! - the documents of the v1 API that clients read and send ([`v1`]);
//! - tensors as raw bytes, as the protocol's gRPC messages carry them
//!   ([`decode_raw_tensor`], [`encode_raw_tensor`]);
//! - NumPy `.npz` archives, the format of validation sets and job inputs and outputs
//!   ([`npz`]).
//!
//! Decoding never panics on untrusted bytes; every error names the tensor or header
//! at fault.

mod binary;
mod error;
mod frames;
mod json_tensor;
pub mod npz;
mod raw;
mod shape;
pub mod v1;
mod v2;

pub use error::{ProtocolError, Role, TensorProblem};
pub use frames::{decode_tensors, encode_tensors};
pub use json_tensor::{
    tensor_from_json, tensor_to_json, JsonData, JsonTensor, JsonTensorOut, WireData,
};
pub use raw::{decode_raw_tensor, encode_raw_tensor, tensor_shape, wire_shape};
pub use v2::{
    decode_v2_request, decode_v2_response, encode_v2_response, encode_v2_response_with, error_body,
    model_metadata, parse_header_length, server_metadata, EncodedResponse, RequestedOutput,
    V2Request, V2Response, BINARY_TENSOR_DATA, INFERENCE_HEADER_CONTENT_LENGTH,
};
