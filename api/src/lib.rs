//! The HTTP edge of infaas: routes (v1, the Open Inference Protocol v2, the dashboard),
//! authentication and the request-rate layer, form parsing into the control plane's types,
//! the OpenAPI document, and the one place where control-plane errors become statuses; and
//! the Open Inference Protocol over gRPC ([`grpc`]), on its own port, with the same
//! authentication, tenancy and selection.

pub mod auth;
pub mod error;
pub mod grpc;
pub mod limits;
pub mod metrics;
pub mod openapi;
pub mod routes;
pub mod server;
pub mod state;
pub mod uploads;
