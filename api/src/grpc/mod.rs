//! The Open Inference Protocol over gRPC: KServe v2's `inference.GRPCInferenceService`, which
//! the unmodified Python `tritonclient.grpc` client calls. It listens on its own port
//! (`grpc_listen`, 8001 by default like Triton) and answers ServerLive, ServerReady,
//! ModelReady, ServerMetadata, ModelMetadata and ModelInfer; any other method of Triton's
//! service answers UNIMPLEMENTED.
//!
//! It is the REST v2 edge ([`crate::routes::v2`]) over another transport, and shares its
//! logic: a model name is a registered model or an application (model-less, with
//! `latency_ms`, `min_accuracy` and `max_cost` in the request `parameters`), answers carry
//! how they were served in the response `parameters`, and the caller is the tenant of the
//! access token in the `authorization: Bearer <token>` metadata, verified as for HTTP and
//! charged to the same per-tenant request rate (every method but ServerLive and
//! ServerReady, which need no token, like `/v2/health/*`). Errors are the control plane's,
//! as gRPC codes ([`status`]).
//!
//! The messages, the server and a client are generated from the vendored
//! `proto/grpc_service.proto` and committed as `inference_pb.rs` ([`pb`]); see
//! `proto/README.md` and `build.rs` for how to regenerate them (feature `regen-proto`).

mod tensors;

/// The protobuf messages, server and client of `inference.GRPCInferenceService`, generated
/// by tonic-prost-build from the vendored `proto/grpc_service.proto`.
#[allow(clippy::all, clippy::pedantic, missing_docs, rustdoc::all)]
#[path = "inference_pb.rs"]
pub mod pb;

use std::future::Future;
use std::time::Instant;

use axum::http::StatusCode;
use tokio_util::sync::CancellationToken;
use tonic::codec::CompressionEncoding;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Request, Response, Status};

use crate::auth::Principal;
use crate::error::ApiError;
use crate::routes::v2;
use crate::state::AppState;
use infaas_control::serving::serve as serve_query;
use pb::grpc_inference_service_server::{GrpcInferenceService, GrpcInferenceServiceServer};
use pb::model_metadata_response::TensorMetadata;
use pb::{
    ModelInferRequest, ModelInferResponse, ModelMetadataRequest, ModelMetadataResponse,
    ModelReadyRequest, ModelReadyResponse, ServerLiveRequest, ServerLiveResponse,
    ServerMetadataRequest, ServerMetadataResponse, ServerReadyRequest, ServerReadyResponse,
};

/// A client of the service (tests, benchmarks, tools):
/// `Client::connect("http://127.0.0.1:8001")`.
pub type Client =
    pb::grpc_inference_service_client::GrpcInferenceServiceClient<tonic::transport::Channel>;

/// The implementation of `GRPCInferenceService` over the control plane.
#[derive(Clone)]
pub struct Inference {
    state: AppState,
}

/// The service ready to serve: requests up to `max_body_bytes` (decoded, after gzip or
/// deflate), gzip and deflate requests accepted.
pub fn service(state: AppState) -> GrpcInferenceServiceServer<Inference> {
    let limit = state.config.max_body_bytes;
    GrpcInferenceServiceServer::new(Inference { state })
        .max_decoding_message_size(limit)
        .accept_compressed(CompressionEncoding::Gzip)
        .accept_compressed(CompressionEncoding::Deflate)
}

/// Serves the service on `listener` until `shutdown` is cancelled, then lets in-flight calls
/// finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: CancellationToken,
) -> Result<(), tonic::transport::Error> {
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panicked))
        .add_service(service(state))
        .serve_with_incoming_shutdown(incoming, async move { shutdown.cancelled().await })
        .await
}

/// The answer to a call whose handler panicked: INTERNAL, the connection kept.
fn panicked(_: Box<dyn std::any::Any + Send>) -> axum::http::Response<tonic::body::Body> {
    tracing::error!("a gRPC handler panicked");
    Status::internal("internal error; see the server log").into_http()
}

/// A control-plane or edge error as a gRPC status: the code of its kind, the message that
/// names the problem, and the `infaas-error-type` metadata (`not_found`, `rate_limited`,
/// ... as in HTTP error bodies); `retry-after` (seconds) when rate limited.
pub fn status(e: ApiError) -> Status {
    let code = match &e {
        ApiError::BadRequest(_) => Code::InvalidArgument,
        ApiError::Unauthorized(_) => Code::Unauthenticated,
        ApiError::Forbidden(_) => Code::PermissionDenied,
        ApiError::NotFound(_) => Code::NotFound,
        ApiError::Conflict(_) | ApiError::Unprocessable(_) | ApiError::Unsatisfiable { .. } => {
            Code::FailedPrecondition
        }
        ApiError::PayloadTooLarge(_)
        | ApiError::RateLimited { .. }
        | ApiError::QuotaExceeded(_) => Code::ResourceExhausted,
        ApiError::Unavailable(_) => Code::Unavailable,
        ApiError::Dropped(_) => Code::DeadlineExceeded,
        ApiError::Status { status, .. } => match *status {
            StatusCode::UNAUTHORIZED => Code::Unauthenticated,
            StatusCode::FORBIDDEN => Code::PermissionDenied,
            StatusCode::NOT_FOUND => Code::NotFound,
            StatusCode::CONFLICT | StatusCode::UNPROCESSABLE_ENTITY => Code::FailedPrecondition,
            StatusCode::PAYLOAD_TOO_LARGE | StatusCode::TOO_MANY_REQUESTS => {
                Code::ResourceExhausted
            }
            StatusCode::SERVICE_UNAVAILABLE => Code::Unavailable,
            s if s.is_server_error() => Code::Internal,
            _ => Code::InvalidArgument,
        },
        ApiError::Internal(_) => Code::Internal,
    };
    let message = match &e {
        ApiError::Internal(cause) => {
            // The cause goes to the log; the client gets a reference-free summary.
            tracing::error!(error = ?cause, "internal error");
            "internal error; see the server log".to_string()
        }
        ApiError::Unsatisfiable {
            message,
            suggestion: Some(s),
        } => format!("{message}; closest variant: {s}"),
        other => other.to_string(),
    };
    let mut status = Status::new(code, message);
    let metadata = status.metadata_mut();
    metadata.insert(
        "infaas-error-type",
        MetadataValue::from_static(e.error_type()),
    );
    if let ApiError::RateLimited {
        retry_after_secs, ..
    } = &e
    {
        metadata.insert("retry-after", MetadataValue::from(*retry_after_secs));
    }
    status
}

/// The token of `authorization: Bearer <token>` metadata.
fn bearer(metadata: &MetadataMap) -> Result<&str, ApiError> {
    crate::auth::parse_bearer(
        metadata.get("authorization").map(|v| v.to_str().ok()),
        "the authorization metadata",
        "authorization",
    )
}

impl Inference {
    /// The caller, as HTTP finds it: the token verified (signature, expiry), one unit of its
    /// tenant's request rate spent, its key not revoked.
    async fn caller(&self, metadata: &MetadataMap) -> Result<Principal, ApiError> {
        let claims = self.state.tokens.verify(bearer(metadata)?)?;
        self.state
            .limiter
            .check(
                &self.state.db,
                &claims.tid,
                self.state.leadership.replicas(),
            )
            .await?;
        Principal::from_claims(&self.state, claims).await
    }

    async fn model_infer_as(
        &self,
        p: Principal,
        req: ModelInferRequest,
    ) -> Result<ModelInferResponse, ApiError> {
        let want = v2::requirements(|key| tensors::number(&req.parameters, key))?;
        let requested = tensors::requested_outputs(&req.outputs)?;
        let inputs = tensors::decode_inputs(&req.inputs, &req.raw_input_contents)?;
        let (outputs, params) = match v2::pipeline_named(&self.state, &p.tenant_id, &req.model_name)
            .await
        {
            Some(pipeline) => {
                let out = infaas_control::pipelines::run::infer(
                    &self.state,
                    &p.tenant_id,
                    &pipeline,
                    want,
                    inputs,
                )
                .await?;
                let params = v2::pipeline_parameters(&req.model_name, &out)?;
                (out.outputs, params)
            }
            None => {
                let goal = v2::goal(&self.state, &p.tenant_id, &req.model_name).await;
                let outcome = serve_query(&self.state, &p.tenant_id, goal, want, inputs).await?;
                let params = v2::outcome_parameters(&outcome);
                (outcome.outputs, params)
            }
        };
        let (outputs, raw_output_contents) = tensors::encode_outputs(&outputs, &requested)?;
        let parameters = params
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), tensors::parameter(v)?)))
            .collect();
        Ok(ModelInferResponse {
            model_name: req.model_name.clone(),
            model_version: req.model_version.clone(),
            id: req.id.clone(),
            parameters,
            outputs,
            raw_output_contents,
        })
    }
}

/// Runs one call, counting it by method and code (`infaas_grpc_requests_total`) and timing
/// it (`infaas_grpc_request_duration_seconds`).
async fn tracked<T>(
    method: &'static str,
    call: impl Future<Output = Result<T, ApiError>>,
) -> Result<Response<T>, Status> {
    let start = Instant::now();
    let result = call.await.map(Response::new).map_err(status);
    let code = match &result {
        Ok(_) => Code::Ok,
        Err(s) => s.code(),
    };
    let labels = [("method", method), ("code", code_name(code))];
    metrics::counter!("infaas_grpc_requests_total", &labels).increment(1);
    metrics::histogram!("infaas_grpc_request_duration_seconds", &labels[..1])
        .record(start.elapsed().as_secs_f64());
    result
}

fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[tonic::async_trait]
impl GrpcInferenceService for Inference {
    /// Live while the process answers; no token needed.
    async fn server_live(
        &self,
        _req: Request<ServerLiveRequest>,
    ) -> Result<Response<ServerLiveResponse>, Status> {
        tracked("ServerLive", async {
            Ok(ServerLiveResponse { live: true })
        })
        .await
    }

    /// Ready when the database and object store answer and the runtime loaded; no token
    /// needed.
    async fn server_ready(
        &self,
        _req: Request<ServerReadyRequest>,
    ) -> Result<Response<ServerReadyResponse>, Status> {
        tracked("ServerReady", async {
            Ok(ServerReadyResponse {
                ready: v2::server_is_ready(&self.state).await,
            })
        })
        .await
    }

    /// Whether the caller has a model or application of that name that serves.
    async fn model_ready(
        &self,
        req: Request<ModelReadyRequest>,
    ) -> Result<Response<ModelReadyResponse>, Status> {
        tracked("ModelReady", async {
            let p = self.caller(req.metadata()).await?;
            Ok(ModelReadyResponse {
                ready: v2::target_is_ready(&self.state, &p.tenant_id, &req.get_ref().name).await,
            })
        })
        .await
    }

    async fn server_metadata(
        &self,
        req: Request<ServerMetadataRequest>,
    ) -> Result<Response<ServerMetadataResponse>, Status> {
        tracked("ServerMetadata", async {
            self.caller(req.metadata()).await?;
            Ok(ServerMetadataResponse {
                name: v2::SERVER_NAME.into(),
                version: env!("CARGO_PKG_VERSION").into(),
                extensions: vec![v2::MODEL_LESS.into()],
            })
        })
        .await
    }

    /// The inputs and outputs of the caller's model or of its application's models.
    async fn model_metadata(
        &self,
        req: Request<ModelMetadataRequest>,
    ) -> Result<Response<ModelMetadataResponse>, Status> {
        tracked("ModelMetadata", async {
            let p = self.caller(req.metadata()).await?;
            let name = &req.get_ref().name;
            let sig = v2::signature(&self.state, &p.tenant_id, name).await?;
            let tensors = |ts: Vec<v2::TensorSpec>| -> Vec<TensorMetadata> {
                ts.into_iter()
                    .map(|(name, dtype, shape)| TensorMetadata {
                        name,
                        datatype: dtype.as_str().into(),
                        shape,
                    })
                    .collect()
            };
            Ok(ModelMetadataResponse {
                name: name.clone(),
                versions: v2::VERSIONS.iter().map(|v| v.to_string()).collect(),
                platform: v2::PLATFORM.into(),
                inputs: tensors(sig.inputs),
                outputs: tensors(sig.outputs),
                properties: Default::default(),
            })
        })
        .await
    }

    /// One query to a model or (model-less) an application.
    async fn model_infer(
        &self,
        req: Request<ModelInferRequest>,
    ) -> Result<Response<ModelInferResponse>, Status> {
        tracked("ModelInfer", async {
            let p = self.caller(req.metadata()).await?;
            self.model_infer_as(p, req.into_inner()).await
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_become_the_codes_of_their_kind() {
        let cases: Vec<(ApiError, Code, &str)> = vec![
            (
                ApiError::BadRequest("input 'x': bad".into()),
                Code::InvalidArgument,
                "bad_request",
            ),
            (
                ApiError::Unauthorized("no".into()),
                Code::Unauthenticated,
                "unauthorized",
            ),
            (
                ApiError::Forbidden("no".into()),
                Code::PermissionDenied,
                "forbidden",
            ),
            (
                ApiError::NotFound("model 'm' not found".into()),
                Code::NotFound,
                "not_found",
            ),
            (
                ApiError::Conflict("failed".into()),
                Code::FailedPrecondition,
                "conflict",
            ),
            (
                ApiError::RateLimited {
                    message: "slow down".into(),
                    retry_after_secs: 3,
                },
                Code::ResourceExhausted,
                "rate_limited",
            ),
            (
                ApiError::QuotaExceeded("full".into()),
                Code::ResourceExhausted,
                "quota_exceeded",
            ),
            (
                ApiError::Unavailable("later".into()),
                Code::Unavailable,
                "unavailable",
            ),
            (
                ApiError::Unsatisfiable {
                    message: "no variant meets the requirements".into(),
                    suggestion: Some(serde_json::json!({"variant": "v1", "latency_ms": 3.0})),
                },
                Code::FailedPrecondition,
                "unsatisfiable",
            ),
            (
                ApiError::Internal(anyhow::anyhow!("secret detail")),
                Code::Internal,
                "internal",
            ),
        ];
        for (e, code, kind) in cases {
            let text = e.to_string();
            let s = status(e);
            assert_eq!(s.code(), code, "{text}");
            assert_eq!(
                s.metadata()
                    .get("infaas-error-type")
                    .and_then(|v| v.to_str().ok()),
                Some(kind)
            );
            match code {
                Code::Internal => assert!(!s.message().contains("secret"), "{}", s.message()),
                Code::FailedPrecondition if kind == "unsatisfiable" => {
                    assert!(s.message().contains("closest variant") && s.message().contains("v1"))
                }
                _ => assert_eq!(s.message(), text),
            }
            if kind == "rate_limited" {
                assert_eq!(
                    s.metadata()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok()),
                    Some("3")
                );
            }
        }
    }

    #[test]
    fn bearer_tokens_come_from_the_authorization_metadata() {
        let mut m = MetadataMap::new();
        assert!(bearer(&m)
            .unwrap_err()
            .to_string()
            .contains("missing authorization"));
        m.insert("authorization", MetadataValue::from_static("Basic abc"));
        assert!(bearer(&m)
            .unwrap_err()
            .to_string()
            .contains("'Bearer <token>'"));
        m.insert("authorization", MetadataValue::from_static("Bearer  t0k "));
        assert_eq!(bearer(&m).unwrap(), "t0k");
    }
}
