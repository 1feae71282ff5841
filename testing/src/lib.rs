//! Test fixtures shared by the integration suites and benches of infaas. Not part of the
//! platform: nothing but tests and benches depends on this crate.
#![allow(clippy::unwrap_used)] // fixtures fail the test that uses them, with the cause

pub mod backends;
#[cfg(feature = "platform")]
pub mod heavy;
#[cfg(feature = "platform")]
pub mod platform;
#[cfg(feature = "platform")]
pub mod server;
#[cfg(feature = "platform")]
pub mod workers;
