//! The Open Inference Protocol (KServe v2) REST documents, with Triton's binary
//! tensor data extension, as the Python `tritonclient.http` client sends them.

mod body;
mod metadata;
mod request;
mod response;

pub use body::{parse_header_length, INFERENCE_HEADER_CONTENT_LENGTH};
pub use metadata::{error_body, model_metadata, server_metadata, BINARY_TENSOR_DATA};
pub use request::{decode_v2_request, RequestedOutput, V2Request};
pub use response::{
    decode_v2_response, encode_v2_response, encode_v2_response_with, EncodedResponse, V2Response,
};
