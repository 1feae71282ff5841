//! Where the Proteus data lives for the tests that read it: beside the repository
//! (`../shared/data/proteus`), or where `INFAAS_PROTEUS_TRACES` (the `twitter` directory) and
//! `INFAAS_PROTEUS_PROFILES` (the profile catalogue) point. A test skips when it is absent.

#![allow(dead_code)]

use std::path::PathBuf;

fn base() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/proteus")
}

/// The directory of the Twitter traces, or `None` (said on stderr) when it is absent.
pub fn traces() -> Option<PathBuf> {
    let dir = std::env::var_os("INFAAS_PROTEUS_TRACES")
        .map(PathBuf::from)
        .unwrap_or_else(|| base().join("twitter"));
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipped: no Proteus traces at {}", dir.display());
        None
    }
}

/// The traces and the profile catalogue's file, or `None` when either is absent.
pub fn traces_and_profiles() -> Option<(PathBuf, PathBuf)> {
    let traces = traces()?;
    let profiles = std::env::var_os("INFAAS_PROTEUS_PROFILES")
        .map(PathBuf::from)
        .unwrap_or_else(|| base().join("aggregate_profiled.csv"));
    if profiles.is_file() {
        Some((traces, profiles))
    } else {
        eprintln!("skipped: no Proteus profiles at {}", profiles.display());
        None
    }
}
