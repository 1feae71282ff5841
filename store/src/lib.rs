//! Persistence of infaas: metadata in SQLite or Postgres, files in a local directory or S3.
//!
//! Row types stay private to this crate; callers get `infaas_core` domain types.

pub mod db;
pub mod error;
pub mod objects;

pub use db::{
    ArrivalReport, CatalogEntry, Chunk, ChunkCounts, Db, DbKind, Job, JobSummary, Lease, NewChunk,
    NewJob, NewModel, NewScalingEvent, NewVariant, ObjectRecord, PruneMark, PrunedVariant,
    ReplicaRow, ScalingEventRow, UsageRow, WhatIfRun, LEADER_LEASE,
};
pub use error::StoreError;
pub use objects::{open_object_store, ByteStream, ObjectInfo, ObjectStore, ObjectStoreConfig};
