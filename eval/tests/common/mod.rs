//! Where the Proteus data lives for the evaluations that read it: beside the repository
//! (`../shared/data/proteus`), or where `INFAAS_PROTEUS_TRACES` (the `twitter` directory) and
//! `INFAAS_PROTEUS_PROFILES` (the profile catalogue) point. The data is third-party and never
//! in the repository, so these tests are ignored by default and run on request
//! (`scripts/test.sh` runs them when it finds the data; docs/development.md); run without the
//! data, they fail, naming where they looked.

#![allow(dead_code)]

use std::path::PathBuf;

fn base() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/proteus")
}

fn missing(what: &str, path: &std::path::Path, var: &str) -> ! {
    panic!(
        "no Proteus {what} at {}: put the data beside the repository (../shared/data/proteus) or set {var}",
        path.display()
    )
}

/// The directory of the Twitter traces; panics when it is absent.
pub fn traces() -> PathBuf {
    let dir = std::env::var_os("INFAAS_PROTEUS_TRACES")
        .map(PathBuf::from)
        .unwrap_or_else(|| base().join("twitter"));
    if !dir.is_dir() {
        missing("traces", &dir, "INFAAS_PROTEUS_TRACES");
    }
    dir
}

/// The traces and the profile catalogue's file; panics when either is absent.
pub fn traces_and_profiles() -> (PathBuf, PathBuf) {
    let traces = traces();
    let profiles = std::env::var_os("INFAAS_PROTEUS_PROFILES")
        .map(PathBuf::from)
        .unwrap_or_else(|| base().join("aggregate_profiled.csv"));
    if !profiles.is_file() {
        missing("profiles", &profiles, "INFAAS_PROTEUS_PROFILES");
    }
    (traces, profiles)
}
