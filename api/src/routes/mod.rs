//! HTTP routes.

pub mod api_keys;
pub mod auth;
pub mod health;
pub mod models;
