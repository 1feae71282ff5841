//! HTTP routes.

pub mod api_keys;
pub mod auth;
pub mod cluster;
pub mod dashboard;
pub mod health;
pub mod infer;
pub mod jobs;
pub mod models;
pub mod pipelines;
pub mod scaling;
pub mod v2;
pub mod whatif;
