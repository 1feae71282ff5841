//! The what-if runs of this controller: simulation slots, each tenant's unfinished runs and
//! the cancellation flag of every run under way; and the runs an earlier process left
//! unfinished, failed at start. State only: [`super::runner`] runs them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use infaas_store::Db;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Why every unfinished run is failed when a controller starts.
const INTERRUPTED: &str =
    "interrupted: the server stopped before the run finished; start the run again";

/// The runs of this controller: simulation slots, each tenant's runs not yet finished, and
/// the cancellation flag of every run under way.
#[derive(Debug)]
pub struct WhatIfRuns {
    slots: Arc<Semaphore>,
    per_tenant: Mutex<HashMap<String, usize>>,
    cancelled: Mutex<HashMap<String, Arc<AtomicBool>>>,
}

/// A tenant's place among its unfinished runs, given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    runs: Arc<WhatIfRuns>,
    tenant: String,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Ok(mut m) = self.runs.per_tenant.lock() {
            if let Some(n) = m.get_mut(&self.tenant) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    m.remove(&self.tenant);
                }
            }
        }
    }
}

impl WhatIfRuns {
    /// At most `parallel` runs simulate at once.
    pub fn new(parallel: usize) -> Arc<WhatIfRuns> {
        Arc::new(WhatIfRuns {
            slots: Arc::new(Semaphore::new(parallel.max(1))),
            per_tenant: Mutex::new(HashMap::new()),
            cancelled: Mutex::new(HashMap::new()),
        })
    }

    /// A place for one more run of `tenant`, unless it has `max` unfinished already.
    pub fn reserve(self: &Arc<Self>, tenant: &str, max: usize) -> Option<Reservation> {
        let mut m = self.per_tenant.lock().ok()?;
        let n = m.entry(tenant.to_string()).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(Reservation {
            runs: self.clone(),
            tenant: tenant.to_string(),
        })
    }

    /// Stops run `id` (deleted) after the policy under way, if this controller runs it.
    pub fn cancel(&self, id: &str) {
        if let Ok(m) = self.cancelled.lock() {
            if let Some(flag) = m.get(id) {
                flag.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Waits for a simulation slot (`None` once the slots are closed).
    pub(super) async fn slot(&self) -> Option<OwnedSemaphorePermit> {
        self.slots.clone().acquire_owned().await.ok()
    }

    pub(super) fn flag(&self, id: &str) -> Arc<AtomicBool> {
        let flag = Arc::new(AtomicBool::new(false));
        if let Ok(mut m) = self.cancelled.lock() {
            m.insert(id.to_string(), flag.clone());
        }
        flag
    }

    pub(super) fn forget(&self, id: &str) {
        if let Ok(mut m) = self.cancelled.lock() {
            m.remove(id);
        }
    }
}

/// Marks the runs an earlier process left unfinished as failed (at start).
pub async fn fail_interrupted(db: &Db) {
    match db.fail_unfinished_whatif_runs(INTERRUPTED).await {
        Ok(0) => {}
        Ok(n) => tracing::warn!(
            runs = n,
            "what-if runs interrupted by a restart marked failed"
        ),
        Err(e) => tracing::error!(error = %e, "cannot mark interrupted what-if runs failed"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_tenant_holds_at_most_its_places_until_they_are_dropped() {
        let runs = WhatIfRuns::new(1);
        let a = runs.reserve("t1", 1).unwrap();
        assert!(runs.reserve("t1", 1).is_none());
        let b = runs.reserve("t2", 1).unwrap();
        drop(a);
        let again = runs.reserve("t1", 1);
        assert!(again.is_some());
        drop((again, b));
        assert!(runs.per_tenant.lock().unwrap().is_empty());
    }

    #[test]
    fn cancelling_sets_the_flag_of_a_run_under_way_only() {
        let runs = WhatIfRuns::new(1);
        let flag = runs.flag("r1");
        runs.cancel("r2");
        assert!(!flag.load(Ordering::Relaxed));
        runs.cancel("r1");
        assert!(flag.load(Ordering::Relaxed));
        runs.forget("r1");
        assert!(runs.cancelled.lock().unwrap().is_empty());
    }
}
