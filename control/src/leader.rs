//! Leadership among the controller replicas that share one database: one replica holds the
//! leader lease ([`infaas_store::LEADER_LEASE`]) and runs the loops that must run once for the
//! cluster (model and worker autoscaling, the pipelines' tuner and overload manager); the
//! others serve queries and wait. The lease is renewed every `renew_every` for `ttl`; when the
//! leader dies, another replica takes the lease within `ttl + renew_every`. Every change of
//! holder raises the lease's token, which this process's leader writes carry (the store's
//! fence), so a deposed leader's late writes are refused.
//!
//! SQLite and a local directory are the single-replica embedded default: a second replica on
//! the same SQLite file is refused at start ([`Leadership::check_single_replica`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use infaas_store::db::leases::DEPOSED;
use infaas_store::{Db, DbKind, Lease, StoreError, LEADER_LEASE};
use serde::Serialize;
use tokio::sync::watch;

/// How long a lease lasts and how often it is renewed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeaseSettings {
    /// A lease not renewed for this long lapses.
    pub ttl: Duration,
    /// The holder renews (and the others try to take it) this often.
    pub renew_every: Duration,
}

impl Default for LeaseSettings {
    /// A 5-s lease renewed every second: a dead leader is replaced within 6 s.
    fn default() -> LeaseSettings {
        LeaseSettings {
            ttl: Duration::from_secs(5),
            renew_every: Duration::from_secs(1),
        }
    }
}

/// What this replica knows of the leadership (the body of `GET /v1/cluster`'s `leader`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeaderView {
    /// This replica's id.
    pub replica: String,
    /// This replica holds the lease.
    pub is_leader: bool,
    /// The holder of the lease, when one holds it.
    pub leader: Option<String>,
    /// Where the holder listens.
    pub leader_address: Option<String>,
    /// The lease's fencing token (raised at every change of holder).
    pub token: i64,
    /// Changes of leadership this replica has seen (gained or lost).
    pub changes: u64,
}

/// A transition of this replica's leadership, returned by [`Leadership::step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    Gained,
    Lost,
    Unchanged,
}

/// This replica's side of the election (cheap to share).
pub struct Leadership {
    replica: String,
    address: std::sync::Mutex<String>,
    settings: LeaseSettings,
    view: watch::Sender<LeaderView>,
    /// When the lease was last renewed by this replica (to step down before it can lapse).
    renewed: std::sync::Mutex<Option<Instant>>,
    /// The URLs of the live replicas (this one included), as last read from the database:
    /// what a worker's heartbeat is answered with.
    peers: std::sync::Mutex<Vec<String>>,
}

impl Leadership {
    pub fn new(settings: LeaseSettings) -> Arc<Leadership> {
        let replica = format!("replica-{}", uuid::Uuid::new_v4().simple());
        let (view, _) = watch::channel(LeaderView {
            replica: replica.clone(),
            is_leader: false,
            leader: None,
            leader_address: None,
            token: 0,
            changes: 0,
        });
        Arc::new(Leadership {
            replica,
            address: std::sync::Mutex::new(String::new()),
            settings,
            view,
            renewed: std::sync::Mutex::new(None),
            peers: std::sync::Mutex::new(Vec::new()),
        })
    }

    pub fn replica(&self) -> &str {
        &self.replica
    }

    pub fn settings(&self) -> LeaseSettings {
        self.settings
    }

    /// Where this replica listens (announced with the lease).
    pub fn set_address(&self, address: String) {
        *self.address.lock().unwrap_or_else(|e| e.into_inner()) = address;
    }

    /// Where this replica listens, as announced.
    pub fn address(&self) -> String {
        self.address
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The URLs of the live replicas, this one first (a worker's heartbeat answer).
    pub fn peers(&self) -> Vec<String> {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let own = self.address();
        peers.retain(|p| *p != own);
        if !own.is_empty() {
            peers.insert(0, own);
        }
        peers
    }

    /// How many replicas are live (this one included; at least 1).
    pub fn replicas(&self) -> usize {
        let own = self.address();
        let peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let others = peers.iter().filter(|p| **p != own).count();
        others + 1
    }

    /// Keeps the live replicas' URLs (read by the election loop every round).
    pub fn set_peers(&self, peers: Vec<String>) {
        *self.peers.lock().unwrap_or_else(|e| e.into_inner()) = peers;
    }

    pub fn view(&self) -> LeaderView {
        self.view.borrow().clone()
    }

    pub fn is_leader(&self) -> bool {
        self.view.borrow().is_leader
    }

    /// Whether this replica may act as the leader now: it holds the lease and renewed it
    /// recently enough that the lease cannot have lapsed (less one renewal, for the others'
    /// clocks), even when the database has stopped answering. Every step of a leader's
    /// action checks it first, so no step starts once another replica could lead.
    pub fn leads_now(&self) -> bool {
        self.is_leader()
            && self
                .renewed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some_and(|at| at.elapsed() + self.settings.renew_every < self.settings.ttl)
    }

    /// Changes of the view, for loops that wait on leadership.
    pub fn subscribe(&self) -> watch::Receiver<LeaderView> {
        self.view.subscribe()
    }

    /// On SQLite, refuses to start beside another live replica of the same database file.
    /// A lease left by a process that died is waited out (at most one `ttl`).
    pub async fn check_single_replica(&self, db: &Db) -> Result<(), SecondReplica> {
        if db.kind() != DbKind::Sqlite {
            return Ok(());
        }
        let deadline = Instant::now() + self.settings.ttl + self.settings.renew_every;
        loop {
            let lease = db.lease(LEADER_LEASE).await.map_err(SecondReplica::Store)?;
            match lease {
                Some(l) if !l.expired() && l.holder != self.replica => {
                    if Instant::now() >= deadline {
                        return Err(SecondReplica::Refused {
                            holder: l.holder,
                            address: l.address,
                        });
                    }
                    tokio::time::sleep(self.settings.renew_every).await;
                }
                _ => return Ok(()),
            }
        }
    }

    /// One round of the election: renews or tries to take the lease, updates the store's
    /// fence and the view. A leader that cannot reach the database steps down before its
    /// lease could have lapsed.
    pub async fn step(&self, db: &Db) -> Transition {
        let was = self.is_leader();
        let ttl_ms = i64::try_from(self.settings.ttl.as_millis()).unwrap_or(i64::MAX);
        // A database that does not answer within a lease period counts as unreachable (the
        // loop must not hang on it; `leads_now` already stops actions once the lease could
        // have lapsed, whatever this call does).
        let acquired = tokio::time::timeout(
            self.settings.ttl,
            db.acquire_lease(LEADER_LEASE, &self.replica, &self.address(), ttl_ms),
        )
        .await
        .unwrap_or(Err(StoreError::TimedOut(self.settings.ttl)));
        match acquired {
            Ok(lease) => {
                let leads = lease.held_by(&self.replica);
                if leads {
                    *self.renewed.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
                }
                self.apply(db, leads, Some(&lease), was)
            }
            Err(e) => {
                // Without the database this replica cannot prove it still leads: it steps down
                // once the lease could have lapsed (less one renewal, for the others' clocks).
                let stale = self
                    .renewed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .is_none_or(|at| at.elapsed() + self.settings.renew_every >= self.settings.ttl);
                tracing::warn!(error = %e, leader = was, "the leader lease could not be renewed");
                if was && stale {
                    self.apply(db, false, None, was)
                } else {
                    Transition::Unchanged
                }
            }
        }
    }

    fn apply(&self, db: &Db, leads: bool, lease: Option<&Lease>, was: bool) -> Transition {
        db.set_fence(match (leads, lease) {
            (true, Some(l)) => l.token,
            _ => DEPOSED,
        });
        let transition = match (was, leads) {
            (false, true) => Transition::Gained,
            (true, false) => Transition::Lost,
            _ => Transition::Unchanged,
        };
        self.view.send_modify(|v| {
            v.is_leader = leads;
            if let Some(l) = lease {
                let live = !l.expired();
                v.leader = live.then(|| l.holder.clone());
                v.leader_address = live.then(|| l.address.clone());
                v.token = l.token;
            } else if !leads {
                v.leader = None;
                v.leader_address = None;
            }
            if transition != Transition::Unchanged {
                v.changes += 1;
            }
        });
        match transition {
            Transition::Gained => tracing::info!(
                replica = %self.replica,
                token = lease.map_or(0, |l| l.token),
                "this replica leads the cluster's loops"
            ),
            Transition::Lost => tracing::warn!(
                replica = %self.replica,
                "this replica lost the leader lease: its loops stop"
            ),
            Transition::Unchanged => {}
        }
        transition
    }

    /// Hands the lease over at once (a replica stopping) and fences this process.
    pub async fn resign(&self, db: &Db) {
        if self.is_leader() {
            if let Err(e) = db.release_lease(LEADER_LEASE, &self.replica).await {
                tracing::warn!(error = %e, "could not release the leader lease; it lapses by itself");
            }
            self.apply(db, false, None, true);
        }
    }
}

/// Why a replica may not start.
#[derive(Debug, thiserror::Error)]
pub enum SecondReplica {
    #[error(
        "another infaas serve ({holder} at {address}) is running on this SQLite database: \
         SQLite and a local directory hold one replica; run several replicas on Postgres \
         (--database-url postgres://...) and S3 (--object-store s3://...)"
    )]
    Refused { holder: String, address: String },
    #[error("reading the leader lease: {0}")]
    Store(#[source] StoreError),
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn a_leader_stops_acting_once_its_lease_could_have_lapsed() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::connect(&format!("sqlite://{}", dir.path().join("t.db").display()))
            .await
            .unwrap();
        let l = Leadership::new(LeaseSettings {
            ttl: Duration::from_millis(300),
            renew_every: Duration::from_millis(100),
        });
        assert!(!l.leads_now(), "not before the election");
        assert_eq!(l.step(&db).await, Transition::Gained);
        assert!(l.is_leader() && l.leads_now());
        // No renewal for ttl - renew_every: the view still says leader (the database did not
        // say otherwise), but no action may start.
        tokio::time::sleep(Duration::from_millis(220)).await;
        assert!(l.is_leader());
        assert!(!l.leads_now(), "acting past the safe part of the lease");
        assert_eq!(l.step(&db).await, Transition::Unchanged);
        assert!(l.leads_now(), "a renewal makes it safe again");
    }
}
