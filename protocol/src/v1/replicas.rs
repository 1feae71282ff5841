//! The controller replicas of one cluster (`GET /v1/cluster`): which replicas share the
//! database, and which of them leads the loops that run once for the cluster.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The leader lease as a replica sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LeaderStatus {
    /// The replica that holds the lease; absent while none does (the previous leader died
    /// and its lease has not lapsed yet, or it lapsed and no replica has taken it).
    pub replica: Option<String>,
    /// Where the leader listens.
    pub address: Option<String>,
    /// The lease's fencing token: raised at every change of leader; the leader's scaling
    /// decisions carry it, and a deposed leader's are refused.
    pub token: i64,
}

/// One replica that has announced itself within the last lease period or two.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReplicaStatus {
    pub id: String,
    /// Where it listens.
    pub address: String,
    /// When it first announced itself (ms since the Unix epoch, the database's clock).
    pub started_ms: i64,
    /// When it last renewed its announcement.
    pub seen_ms: i64,
    /// It holds the leader lease.
    pub leader: bool,
}

/// `GET /v1/cluster`: the replica that answered, the leader, every live replica.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClusterStatus {
    /// The replica that answered this request.
    pub replica: String,
    /// That replica leads.
    pub is_leader: bool,
    pub leader: LeaderStatus,
    /// Changes of leadership the answering replica has seen since it started.
    pub leadership_changes: u64,
    /// Lease period and renewal interval, in ms.
    pub lease_ttl_ms: u64,
    pub lease_renew_ms: u64,
    pub replicas: Vec<ReplicaStatus>,
}
