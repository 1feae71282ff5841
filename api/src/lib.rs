//! The infaas controller: HTTP API, authentication, configuration; the command-line client is
//! the `infaas-cli` crate.

pub mod admin;
pub mod auth;
pub mod autoscaler;
pub mod cluster;
pub mod config;
pub mod error;
pub mod jobs;
pub mod metrics;
pub mod openapi;
pub mod quota;
pub mod registry;
pub mod routes;
pub mod server;
pub mod serving;
pub mod state;
pub mod telemetry;
pub mod usage;
